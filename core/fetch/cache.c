#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fetch/fetch.h"

/* The caches live in chute's state folder, never in the bundle: a bundle
 * may be read-only (a package, a signed folder), and a cache is chute's
 * own data. Each is replaced whole: readers see the old file or the new
 * one, never a part. */

int
fetch_state_dir(char *dir, size_t n)
{
    const char *s = getenv("CHUTE_STATE_DIR"), *x = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    int k;
    if (s != NULL && s[0] != '\0')
        k = snprintf(dir, n, "%s", s);
    else if (x != NULL && x[0] == '/') /* XDG: relative values are ignored */
        k = snprintf(dir, n, "%s/chute", x);
    else if (home != NULL && home[0] != '\0')
        k = snprintf(dir, n, "%s/.local/state/chute", home);
    else
        return -1;
    return k > 0 && (size_t)k < n ? 0 : -1;
}

int
fetch_cache_path(const char *path, const char *kind, const char *name, char *out, size_t n,
                 char *err, size_t errlen)
{
    if (path != NULL && path[0] == '/') {
        if ((size_t)snprintf(out, n, "%s", path) >= n) {
            snprintf(err, errlen, "path: too long");
            return -1;
        }
        return 0;
    }
    char dir[4096], rel[512];
    if (path == NULL) {
        /* "<kind>-<name>", the name's unsafe bytes as '_' */
        int k = snprintf(rel, sizeof(rel), "%s-", kind);
        for (const char *c = name; *c && (size_t)k + 1 < sizeof(rel); c++)
            rel[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                               (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'
                           ? *c
                           : '_';
        rel[k] = '\0';
    } else {
        if (path[0] == '\0' || strstr(path, "..") != NULL || strlen(path) >= sizeof(rel)) {
            snprintf(err, errlen, "path '%.100s': a file name under the state folder's cache/ "
                     "(no '..'), or an absolute path", path);
            return -1;
        }
        snprintf(rel, sizeof(rel), "%s", path);
    }
    if (fetch_state_dir(dir, sizeof(dir)) != 0) {
        snprintf(err, errlen, "no state folder for the cache (set CHUTE_STATE_DIR or HOME, or "
                 "give an absolute path = ...)");
        return -1;
    }
    if ((size_t)snprintf(out, n, "%s/cache/%s", dir, rel) >= n) {
        snprintf(err, errlen, "path: too long");
        return -1;
    }
    return 0;
}

char *
fetch_cache_read(const char *path, size_t max, size_t *len, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "%s: %s", path, strerror(e));
        errno = e;
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, whylen, "%s: not a regular file", path);
        errno = EINVAL;
        return NULL;
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        snprintf(why, whylen, "%s: %lld bytes, over the limit of %zu", path,
                 (long long)st.st_size, max);
        errno = EFBIG;
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf != NULL && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (buf == NULL) {
        snprintf(why, whylen, "%s: out of memory", path);
        errno = ENOMEM;
        return NULL;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

static int
mkdirs(char *path)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        int rc = mkdir(path, 0700);
        *s = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

static int
write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* |data| into |path| through "<path>.tmp": fsync'd, then renamed. */
static int
replace(const char *path, const char *data, size_t len, char *err, size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int
fetch_cache_write(const char *path, const char *buf, size_t len, const char *etag,
                  const char *last_modified, char *err, size_t errlen)
{
    char dir[4096], meta[4200], text[400];
    snprintf(dir, sizeof(dir), "%s", path);
    if (mkdirs(dir) != 0) {
        snprintf(err, errlen, "%s: cannot make its folder: %s", path, strerror(errno));
        return -1;
    }
    /* The body first, then its validators: a crash between the renames
     * leaves old validators with the new body (one full fetch too many);
     * the other order could make a 304 keep a stale body. */
    if (replace(path, buf, len, err, errlen) != 0)
        return -1;
    snprintf(meta, sizeof(meta), "%s.meta", path);
    int k = snprintf(text, sizeof(text), "etag %s\nlast-modified %s\n", etag ? etag : "",
                     last_modified ? last_modified : "");
    return replace(meta, text, (size_t)k, err, errlen);
}

double
fetch_cache_meta(const char *path, char *etag, size_t etaglen, char *lm, size_t lmlen)
{
    char meta[4200], why[64];
    struct stat st;
    etag[0] = lm[0] = '\0';
    if (stat(path, &st) != 0)
        return -1;
    snprintf(meta, sizeof(meta), "%s.meta", path);
    size_t len;
    char *m = fetch_cache_read(meta, 4096, &len, why, sizeof(why));
    for (char *line = m, *next; line != NULL && *line; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (strncmp(line, "etag ", 5) == 0)
            snprintf(etag, etaglen, "%s", line + 5);
        else if (strncmp(line, "last-modified ", 14) == 0)
            snprintf(lm, lmlen, "%s", line + 14);
        if (next == NULL)
            break;
    }
    free(m);
    double age = difftime(time(NULL), st.st_mtime);
    return age < 0 ? 0 : age;
}

void
fetch_cache_touch(const char *path)
{
    utimensat(AT_FDCWD, path, NULL, 0);
}
