#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "script/script_int.h"

/* Bundle files are opened relative to the bundle folder one component at a
 * time with O_NOFOLLOW, so a link inside the bundle cannot lead out of it
 * (to /etc/shadow or /proc/self/environ), and only regular files are opened,
 * with O_NONBLOCK: a FIFO would block the loop in open() and a device could
 * read forever. The bundle folder itself may be a link. */

static const char *
reason_of(int err)
{
    if (err == ELOOP)
        return "a symbolic link (bundle files are read without following links)";
    if (err == ENOTDIR)
        return "a path through something that is not a folder";
    return strerror(err);
}

static void
fail(struct script *s, const char *rel, const char *reason, char *why, size_t whylen)
{
    snprintf(why, whylen, "%s/%s: %s", s->dir ? s->dir : ".", rel, reason);
}

static void
fail_errno(struct script *s, const char *rel, int err, char *why, size_t whylen)
{
    s->file_errno = err;
    fail(s, rel, reason_of(err), why, whylen);
}

int
script_bundle_open(struct script *s, const char *rel, char *why, size_t whylen)
{
    char tmp[4096];
    s->file_errno = EINVAL;
    if (script_bundle_path(s, rel, tmp, sizeof(tmp)) != 0) {
        fail(s, rel, "outside the bundle", why, whylen);
        return -1;
    }
    int dir = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        fail_errno(s, rel, errno, why, whylen);
        return -1;
    }
    snprintf(tmp, sizeof(tmp), "%s", rel);
    char *part = tmp, *slash;
    while ((slash = strchr(part, '/')) != NULL) {
        *slash = '\0';
        if (part[0] != '\0' && strcmp(part, ".") != 0) {
            int next = openat(dir, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int e = errno;
            struct stat ls;
            if (next < 0 && e == ENOTDIR && fstatat(dir, part, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(ls.st_mode))
                e = ELOOP; /* a link to a folder: say so, not "not a folder" */
            close(dir);
            if (next < 0) {
                fail_errno(s, rel, e, why, whylen);
                return -1;
            }
            dir = next;
        }
        part = slash + 1;
    }
    struct stat st;
    if (fstatat(dir, part, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        fail_errno(s, rel, errno, why, whylen);
        close(dir);
        return -1;
    }
    if (S_ISLNK(st.st_mode) || !S_ISREG(st.st_mode)) {
        fail(s, rel, S_ISLNK(st.st_mode) ? reason_of(ELOOP) : "not a regular file", why, whylen);
        close(dir);
        return -1;
    }
    int fd = openat(dir, part, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    int e = errno;
    close(dir);
    /* The name may have been swapped since fstatat: check what was opened. */
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(s, rel, fd < 0 ? reason_of(e) : "not a regular file", why, whylen);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

char *
script_bundle_read(struct script *s, const char *rel, size_t max, size_t *len, char *why,
                   size_t whylen)
{
    int fd = script_bundle_open(s, rel, why, whylen);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        fail(s, rel, strerror(errno), why, whylen);
    } else if ((uint64_t)st.st_size > max) {
        char r[64];
        snprintf(r, sizeof(r), "larger than %zu MiB", max >> 20);
        fail(s, rel, r, why, whylen);
    } else if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
        fail(s, rel, "out of memory", why, whylen);
    } else {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break; /* shrunk while reading: what was there */
            got += (size_t)n;
        }
        buf[got] = '\0';
        *len = got;
    }
    close(fd);
    return buf;
}
