#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log/log.h"
#include "tun/netlink.h"
#include "tun/tun_int.h"

/* auto_route: everything without chute's mark is looked up in TUN_TABLE,
 * whose default route is the TUN; excluded prefixes go to the main table
 * first. sing-box and Clash's auto-route take the same shape. */
#define TUN_TABLE 2022
#define PRIO_EXCLUDE 9000
#define PRIO_CAPTURE 9001
#define RT_MAIN 254
#define TUN_TXQLEN 10000

static int
ifreq_ioctl(int req, struct ifreq *ifr)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    int rc = ioctl(s, (unsigned long)req, ifr) == 0 ? 0 : -errno;
    close(s);
    return rc;
}

static int
install_routes(struct tun *t, const struct tun_opts *o, char *err, size_t errlen)
{
    int fams[2] = {AF_INET, AF_INET6};
    for (int i = 0; i < 2; i++) {
        struct ip_cidr any = {.family = fams[i], .prefix = 0};
        int rc = tun_nl_route(t->ifindex, &any, TUN_TABLE);
        if (rc != 0 && fams[i] == AF_INET6 && rc == -EACCES)
            continue; /* IPv6 disabled on this machine */
        if (rc != 0) {
            snprintf(err, errlen, "tun %s: default route in table %d: %s", t->name, TUN_TABLE,
                     strerror(-rc));
            return -1;
        }
        for (size_t k = 0; k < o->num_exclude; k++) {
            if (o->exclude[k].family != fams[i])
                continue;
            tun_nl_rule(0, fams[i], PRIO_EXCLUDE, &o->exclude[k], RT_MAIN, 0);
            if ((rc = tun_nl_rule(1, fams[i], PRIO_EXCLUDE, &o->exclude[k], RT_MAIN, 0)) != 0) {
                snprintf(err, errlen, "tun %s: exclude rule: %s", t->name, strerror(-rc));
                return -1;
            }
        }
        /* A stale rule from a run that did not clean up is replaced. */
        tun_nl_rule(0, fams[i], PRIO_CAPTURE, NULL, TUN_TABLE, o->fwmark);
        if ((rc = tun_nl_rule(1, fams[i], PRIO_CAPTURE, NULL, TUN_TABLE, o->fwmark)) != 0) {
            snprintf(err, errlen, "tun %s: capture rule: %s", t->name, strerror(-rc));
            return -1;
        }
    }
    t->routed = 1;
    t->fwmark = o->fwmark;
    LOG_INFO("tun %s: auto_route on (table %d, upstream fwmark 0x%x, %zu excluded)", t->name,
             TUN_TABLE, o->fwmark, o->num_exclude);
    return 0;
}

static void
remove_routes(struct tun *t)
{
    int fams[2] = {AF_INET, AF_INET6};
    for (int i = 0; i < 2; i++) {
        tun_nl_rule(0, fams[i], PRIO_CAPTURE, NULL, TUN_TABLE, t->fwmark);
        for (size_t k = 0; k < t->num_exclude; k++)
            if (t->exclude[k].family == fams[i])
                tun_nl_rule(0, fams[i], PRIO_EXCLUDE, &t->exclude[k], RT_MAIN, 0);
    }
}

struct tun *
tun_open(const struct tun_opts *o, char *err, size_t errlen)
{
    struct tun *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (t->fd < 0) {
        snprintf(err, errlen, "tun: /dev/net/tun: %s", strerror(errno));
        goto fail;
    }
    struct ifreq ifr = {0};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (o->offload ? IFF_VNET_HDR : 0);
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", o->name);
    if (ioctl(t->fd, TUNSETIFF, &ifr) != 0) {
        snprintf(err, errlen, "tun %s: TUNSETIFF: %s%s", o->name, strerror(errno),
                 errno == EPERM ? " (needs CAP_NET_ADMIN: run as root)" : "");
        goto fail;
    }
    snprintf(t->name, sizeof(t->name), "%s", ifr.ifr_name);
    int rc;
    if (o->offload) {
        /* TCP segmentation offload both ways: the kernel hands chute 64 KiB
         * TCP packets instead of MTU-sized ones, and takes them back, which
         * is what gets past one-syscall-per-packet at MTU 1500. */
        int hdr = TUN_VNET_HDR;
        unsigned off = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
        if (ioctl(t->fd, TUNSETVNETHDRSZ, &hdr) != 0 || ioctl(t->fd, TUNSETOFFLOAD, off) != 0) {
            snprintf(err, errlen, "tun %s: offload: %s (set tun.offload = false)", t->name,
                     strerror(errno));
            goto fail;
        }
        t->vnet = 1;
    }
    if (o->mtu > 0) {
        ifr.ifr_mtu = o->mtu;
        if ((rc = ifreq_ioctl(SIOCSIFMTU, &ifr)) != 0) {
            snprintf(err, errlen, "tun %s: mtu %d: %s", t->name, o->mtu, strerror(-rc));
            goto fail;
        }
    }
    if ((rc = ifreq_ioctl(SIOCGIFMTU, &ifr)) != 0 || (t->mtu = ifr.ifr_mtu) <= 0 ||
        (rc = ifreq_ioctl(SIOCGIFINDEX, &ifr)) != 0) {
        snprintf(err, errlen, "tun %s: %s", t->name, strerror(-rc));
        goto fail;
    }
    t->ifindex = ifr.ifr_ifindex;
    for (size_t i = 0; i < o->num_addrs; i++) {
        if ((rc = tun_nl_addr(t->ifindex, &o->addrs[i])) != 0) {
            snprintf(err, errlen, "tun %s: address %zu: %s", t->name, i + 1, strerror(-rc));
            goto fail;
        }
    }
    /* The kernel queues what chute writes in front of the client's stack; at
     * the default 500 packets, eight 1 MiB windows of 1500-byte packets
     * overflow it and the clients retransmit. */
    ifr.ifr_qlen = TUN_TXQLEN;
    if ((rc = ifreq_ioctl(SIOCSIFTXQLEN, &ifr)) != 0)
        LOG_WARN("tun %s: txqueuelen %d: %s", t->name, TUN_TXQLEN, strerror(-rc));
    if ((rc = ifreq_ioctl(SIOCGIFFLAGS, &ifr)) == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ifreq_ioctl(SIOCSIFFLAGS, &ifr);
    }
    if (rc != 0) {
        snprintf(err, errlen, "tun %s: up: %s", t->name, strerror(-rc));
        goto fail;
    }
    if (tun_io_init(t, o->batch) != 0) {
        snprintf(err, errlen, "tun %s: out of memory for buffers", t->name);
        goto fail;
    }
    if (!t->vnet && tun_writer_start(t) != 0)
        LOG_WARN("tun %s: no writer thread (%s): writes stay on the loop", t->name, strerror(errno));
    if (o->num_exclude > 0) {
        t->exclude = malloc(o->num_exclude * sizeof(*t->exclude));
        if (t->exclude != NULL) {
            memcpy(t->exclude, o->exclude, o->num_exclude * sizeof(*t->exclude));
            t->num_exclude = o->num_exclude;
        }
    }
    if (o->auto_route && install_routes(t, o, err, errlen) != 0) {
        remove_routes(t);
        goto fail;
    }
    LOG_INFO("tun %s: up, mtu %d, batch %d, offload %s", t->name, t->mtu, t->batch,
             t->vnet ? "tso4+tso6" : t->writer ? "off (writer thread)" : "off");
    return t;
fail:
    tun_close(t);
    return NULL;
}

struct tun *
tun_attach_fd(int fd, int mtu, int batch)
{
    struct tun *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->fd = fd;
    t->borrowed = 1;
    t->mtu = mtu;
    snprintf(t->name, sizeof(t->name), "fd%d", fd);
    if (tun_io_init(t, batch) != 0) {
        tun_close(t);
        return NULL;
    }
    return t;
}

void
tun_close(struct tun *t)
{
    if (t == NULL)
        return;
    tun_writer_stop(t); /* it writes what it holds first */
    if (t->routed)
        remove_routes(t);
    if (t->fd >= 0 && !t->borrowed)
        close(t->fd);
    tun_io_fini(t);
    if (t->host != NULL)
        tun_host_free(t);
    free(t->exclude);
    free(t);
}

int
tun_fd(const struct tun *t)
{
    return t->fd;
}

int
tun_mtu(const struct tun *t)
{
    return t->mtu;
}

int
tun_offload(const struct tun *t)
{
    return t->vnet;
}

const char *
tun_name(const struct tun *t)
{
    return t->name;
}

void
tun_stats(const struct tun *t, struct tun_stats *out)
{
    *out = t->st;
    if (t->host != NULL)
        tun_host_stats(t, out);
    if (t->writer != NULL)
        tun_writer_stats(t, out);
}

const struct log_counter tun_counters[] = {
#define X(field, key) LOG_COUNTER(struct tun_stats, field, key)
    TUN_STATS(X)
#undef X
    LOG_COUNTER_END};
