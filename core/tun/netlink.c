#include <errno.h>
#include <linux/fib_rules.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tun/netlink.h"

struct req {
    struct nlmsghdr h;
    char body[512];
};

static void
attr(struct req *r, uint16_t type, const void *data, size_t len)
{
    struct rtattr *a = (struct rtattr *)((char *)r + NLMSG_ALIGN(r->h.nlmsg_len));
    a->rta_type = type;
    a->rta_len = (unsigned short)RTA_LENGTH(len);
    memcpy(RTA_DATA(a), data, len);
    r->h.nlmsg_len = NLMSG_ALIGN(r->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

static void
attr_u32(struct req *r, uint16_t type, uint32_t v)
{
    attr(r, type, &v, sizeof(v));
}

/* Sends |r| and waits for the kernel's acknowledgement. */
static int
talk(struct req *r)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0)
        return -errno;
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    r->h.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    r->h.nlmsg_seq = 1;
    int rc = -EIO;
    if (sendto(fd, r, r->h.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        rc = -errno;
        goto done;
    }
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
        rc = -errno;
        goto done;
    }
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            rc = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
            break;
        }
    }
done:
    close(fd);
    return rc;
}

static size_t
addr_len(int family)
{
    return family == AF_INET ? 4 : 16;
}

int
tun_nl_addr(int ifindex, const struct ip_cidr *a)
{
    struct req r = {0};
    r.h.nlmsg_type = RTM_NEWADDR;
    r.h.nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
    r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
    struct ifaddrmsg *m = NLMSG_DATA(&r.h);
    m->ifa_family = (uint8_t)a->family;
    m->ifa_prefixlen = a->prefix;
    m->ifa_index = (uint32_t)ifindex;
    attr(&r, IFA_LOCAL, a->addr, addr_len(a->family));
    attr(&r, IFA_ADDRESS, a->addr, addr_len(a->family));
    /* No duplicate address detection: the address is usable at once. */
    attr_u32(&r, IFA_FLAGS, IFA_F_NODAD);
    return talk(&r);
}

int
tun_nl_route(int ifindex, const struct ip_cidr *dst, uint32_t table)
{
    struct req r = {0};
    r.h.nlmsg_type = RTM_NEWROUTE;
    r.h.nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
    r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    struct rtmsg *m = NLMSG_DATA(&r.h);
    m->rtm_family = (uint8_t)dst->family;
    m->rtm_dst_len = dst->prefix;
    m->rtm_table = RT_TABLE_UNSPEC;
    m->rtm_protocol = RTPROT_BOOT;
    m->rtm_scope = RT_SCOPE_LINK;
    m->rtm_type = RTN_UNICAST;
    if (dst->prefix > 0)
        attr(&r, RTA_DST, dst->addr, addr_len(dst->family));
    attr_u32(&r, RTA_OIF, (uint32_t)ifindex);
    attr_u32(&r, RTA_TABLE, table);
    return talk(&r);
}

int
tun_nl_rule(int add, int family, uint32_t prio, const struct ip_cidr *dst, uint32_t table,
            uint32_t fwmark)
{
    struct req r = {0};
    r.h.nlmsg_type = add ? RTM_NEWRULE : RTM_DELRULE;
    r.h.nlmsg_flags = add ? NLM_F_CREATE | NLM_F_EXCL : 0;
    r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct fib_rule_hdr));
    struct fib_rule_hdr *m = NLMSG_DATA(&r.h);
    m->family = (uint8_t)family;
    m->action = FR_ACT_TO_TBL;
    m->table = RT_TABLE_UNSPEC;
    if (dst != NULL) {
        m->dst_len = dst->prefix;
        attr(&r, FRA_DST, dst->addr, addr_len(family));
    }
    if (fwmark != 0) {
        m->flags = FIB_RULE_INVERT;
        attr_u32(&r, FRA_FWMARK, fwmark);
        attr_u32(&r, FRA_FWMASK, 0xffffffff);
    }
    attr_u32(&r, FRA_PRIORITY, prio);
    attr_u32(&r, FRA_TABLE, table);
    return talk(&r);
}
