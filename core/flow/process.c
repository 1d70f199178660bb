#include <dirent.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flow/process.h"

/* The socket from |src| to |dst| with sock_diag: an exact lookup, no dump.
 * Returns 0 with its owner's uid and its inode. */
static int
find_socket(int proto, const struct sockaddr_storage *src, const struct sockaddr_storage *dst,
            uid_t *uid, unsigned *inode)
{
    struct {
        struct nlmsghdr h;
        struct inet_diag_req_v2 r;
    } req = {0};
    if (src->ss_family != dst->ss_family ||
        (src->ss_family != AF_INET && src->ss_family != AF_INET6))
        return -1;
    req.h.nlmsg_len = sizeof(req);
    req.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.h.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = (uint8_t)src->ss_family;
    req.r.sdiag_protocol = (uint8_t)proto;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (src->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const void *)src, *d = (const void *)dst;
        req.r.id.idiag_sport = s->sin_port;
        req.r.id.idiag_dport = d->sin_port;
        memcpy(req.r.id.idiag_src, &s->sin_addr, 4);
        memcpy(req.r.id.idiag_dst, &d->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *s = (const void *)src, *d = (const void *)dst;
        req.r.id.idiag_sport = s->sin6_port;
        req.r.id.idiag_dport = d->sin6_port;
        memcpy(req.r.id.idiag_src, &s->sin6_addr, 16);
        memcpy(req.r.id.idiag_dst, &d->sin6_addr, 16);
    }
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -1;
    int rc = -1;
    char buf[1024];
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (send(fd, &req, sizeof(req), 0) == (ssize_t)sizeof(req)) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        if (n > 0 && NLMSG_OK(h, (size_t)n) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            *uid = m->idiag_uid;
            *inode = m->idiag_inode;
            rc = m->idiag_inode != 0 ? 0 : -1;
        }
    }
    close(fd);
    return rc;
}

/* The process holding socket |inode|: every /proc/PID/fd link is read until
 * one says "socket:[inode]". */
static pid_t
find_owner(unsigned inode)
{
    char want[32], path[600], link[64];
    int wl = snprintf(want, sizeof(want), "socket:[%u]", inode);
    DIR *proc = opendir("/proc");
    if (proc == NULL)
        return 0;
    pid_t found = 0;
    struct dirent *p;
    while (found == 0 && (p = readdir(proc)) != NULL) {
        if (p->d_name[0] < '1' || p->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
        DIR *fds = opendir(path);
        if (fds == NULL)
            continue;
        struct dirent *f;
        while ((f = readdir(fds)) != NULL) {
            if (f->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "/proc/%s/fd/%s", p->d_name, f->d_name);
            ssize_t n = readlink(path, link, sizeof(link));
            if (n == wl && memcmp(link, want, (size_t)wl) == 0) {
                found = (pid_t)atoi(p->d_name);
                break;
            }
        }
        closedir(fds);
    }
    closedir(proc);
    return found;
}

static void
set_base(char *dst, size_t cap, const char *path, size_t n)
{
    const char *b = path;
    for (size_t i = 0; i < n; i++)
        if (path[i] == '/')
            b = path + i + 1;
    n -= (size_t)(b - path);
    n = n < cap - 1 ? n : cap - 1;
    memcpy(dst, b, n);
    dst[n] = '\0';
}

/* The executable's own name, as Surge and mihomo compare it: the base name
 * of /proc/PID/exe, as mihomo reads it (the kernel's comm is cut at 15
 * bytes), else of argv[0] (exe is unreadable for another user's process
 * when chute is not root), else comm. */
static void
process_name(struct flow_process *out)
{
    static const char deleted[] = " (deleted)";
    size_t n = strlen(out->path), d = sizeof(deleted) - 1;
    char path[64], buf[512];

    if (n > d && strcmp(out->path + n - d, deleted) == 0)
        n -= d;
    if (n > 0) {
        set_base(out->name, sizeof(out->name), out->path, n);
        return;
    }
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)out->pid);
    FILE *fp = fopen(path, "r");
    if (fp != NULL) {
        size_t k = fread(buf, 1, sizeof(buf) - 1, fp);
        fclose(fp);
        buf[k] = '\0';
        if (buf[0] != '\0') {
            set_base(out->name, sizeof(out->name), buf, strlen(buf));
            return;
        }
    }
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)out->pid);
    fp = fopen(path, "r");
    if (fp != NULL) {
        if (fgets(out->name, sizeof(out->name), fp) != NULL)
            out->name[strcspn(out->name, "\n")] = '\0';
        fclose(fp);
    }
}

int
flow_process_lookup(const struct flow *f, struct flow_process *out)
{
    unsigned inode;
    memset(out, 0, sizeof(*out));
    int proto = f->network == FLOW_UDP ? IPPROTO_UDP : IPPROTO_TCP;
    if (find_socket(proto, &f->src, &f->local, &out->uid, &inode) != 0)
        return -1;
    out->pid = find_owner(inode);
    if (out->pid == 0)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)out->pid);
    ssize_t n = readlink(path, out->path, sizeof(out->path) - 1);
    out->path[n > 0 ? n : 0] = '\0';
    process_name(out);
    return 0;
}
