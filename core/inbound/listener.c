#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/log.h"
#include "inbound/inbound.h"
#include "io/io.h"

/* Guessing credentials: after AUTH_FREE_FAILS wrong ones from an address,
 * its attempts are refused unchecked for a back-off that doubles with each
 * further failure, 1 s up to AUTH_BACKOFF_MAX; a success, or
 * AUTH_FORGET s without a failure, clears it. A fixed table (the least
 * recent source replaced), so a spray of sources costs nothing more. */
#define AUTH_SOURCES 64
#define AUTH_FREE_FAILS 5
#define AUTH_BACKOFF_MAX 60.0
#define AUTH_FORGET 600.0

struct auth_source {
    uint8_t src[16];
    uint32_t fails;
    double last, until;
};

struct inbound_listener {
    const struct flow_env *e;
    const struct inbound_users *users;
    enum flow_inbound kind;
    int mixed;               /* FLOW_IN_SOCKS: SOCKS5 and HTTP, by the first byte */
    struct flow_addr target; /* FLOW_IN_REVERSE */
    int fd;
    struct sockaddr_storage bound; /* getsockname after bind */
    ev_io w;
    ev_timer retry;          /* accept paused after EMFILE/ENFILE */
    int paused;              /* pauses since the last accept that worked (logged once) */
    double emfile_logged;    /* when a pause was last logged */
    int emfile_told;         /* this episode's pause was */
    struct inbound_conn head; /* sentinel of the connection list */
    struct inbound_conn hs;   /* sentinel of the unfinished handshakes, oldest first */
    ev_timer hs_timer;        /* the oldest one's deadline */
    struct inbound_stats st;
    double hs_logged;         /* when a cap was last logged (one line per 10 s) */
    struct auth_source auth[AUTH_SOURCES]; /* recent authentication failures */
    double auth_logged;       /* when a back-off was last logged */
};

const struct log_counter inbound_counters[] = {
#define X(field, key) LOG_COUNTER(struct inbound_stats, field, key)
    INBOUND_STATS(X)
#undef X
    LOG_COUNTER_END};

static const char *
kind_name(const struct inbound_listener *l)
{
    if (l->mixed)
        return "mixed";
    return l->kind == FLOW_IN_SOCKS ? "socks" : l->kind == FLOW_IN_REVERSE ? "reverse" : "http";
}

static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct inbound_listener *l = w->data;
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        int fd = accept4(l->fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: stop accepting for a moment rather
                 * than spin on a listener that stays readable. One line
                 * per episode, and one per 10 s when episodes follow each
                 * other: it may last minutes, 10 pauses a second. */
                if (l->paused++ == 0 && io_mono_now() - l->emfile_logged >= 10) {
                    l->emfile_logged = io_mono_now();
                    l->emfile_told = 1;
                    LOG_WARN("accept on %s: %s; pausing accepts 100 ms at a time until "
                             "descriptors free up",
                             kind_name(l), strerror(errno));
                }
                ev_io_stop(loop, &l->w);
                /* A one-shot timer keeps its spent time: set it again, or
                 * the second pause would end at once. */
                ev_timer_set(&l->retry, 0.1, 0);
                ev_timer_start(loop, &l->retry);
            }
            return;
        }
        if (l->paused > 0) {
            /* The resume is told only after a pause that was. */
            if (l->emfile_logged > 0 && l->emfile_told)
                LOG_INFO("accept on %s: resumed after %d pauses", kind_name(l), l->paused);
            l->paused = l->emfile_told = 0;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (l->mixed)
            inbound_mixed_accept(l, fd, &peer);
        else if (l->kind == FLOW_IN_SOCKS)
            inbound_socks5_accept(l, fd, &peer);
        else if (l->kind == FLOW_IN_REVERSE)
            inbound_reverse_accept(l, fd, &peer);
        else
            inbound_http_accept(l, fd, &peer);
    }
}

static void
on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct inbound_listener *l = w->data;
    ev_io_start(loop, &l->w);
}

static double
hs_deadline(const struct inbound_listener *l)
{
    double t = l->e->opts->connect_timeout;
    return t > 0 ? t : 10.0;
}

/* Arms the deadline of the oldest unfinished handshake (none: stopped). */
static void
hs_arm(struct inbound_listener *l)
{
    struct ev_loop *loop = l->e->loop;
    ev_timer_stop(loop, &l->hs_timer);
    if (l->hs._hs_next == &l->hs)
        return;
    double left = l->hs._hs_next->_hs_since + hs_deadline(l) - io_mono_now();
    ev_timer_set(&l->hs_timer, left > 0.01 ? left : 0.01, 0);
    ev_timer_start(loop, &l->hs_timer);
}

static void
hs_remove(struct inbound_conn *c)
{
    if (c->_hs_next == NULL)
        return;
    c->_hs_prev->_hs_next = c->_hs_next;
    c->_hs_next->_hs_prev = c->_hs_prev;
    c->_hs_prev = c->_hs_next = NULL;
    c->_l->st.hs_pending--;
}

static void
on_hs_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct inbound_listener *l = w->data;
    double cut = io_mono_now() - hs_deadline(l) + 0.005;
    while (l->hs._hs_next != &l->hs && l->hs._hs_next->_hs_since <= cut) {
        struct inbound_conn *c = l->hs._hs_next;
        l->st.hs_timeouts++;
        c->_close(c); /* unlinks it */
    }
    hs_arm(l);
}

/* Closes the oldest unfinished handshake of |src|, or of all, when a new
 * one would pass a cap. */
static void
hs_make_room(struct inbound_listener *l, const uint8_t src[16])
{
    struct inbound_conn *oldest_src = NULL;
    size_t same = 0;
    for (struct inbound_conn *c = l->hs._hs_next; c != &l->hs; c = c->_hs_next)
        if (memcmp(c->_src, src, 16) == 0 && same++ == 0)
            oldest_src = c;
    struct inbound_conn *victim = NULL;
    const char *which = NULL;
    if (same >= INBOUND_HS_PER_SOURCE) {
        victim = oldest_src;
        l->st.hs_source_drops++;
        which = "from one source";
    } else if (l->st.hs_pending >= INBOUND_HS_MAX) {
        victim = l->hs._hs_next;
        l->st.hs_global_drops++;
        which = "in all";
    }
    if (victim == NULL)
        return;
    double now = io_mono_now();
    if (l->hs_logged == 0 || now - l->hs_logged >= 10) {
        l->hs_logged = now;
        LOG_WARN("%s: too many unfinished handshakes %s (caps %d per source, %d in all): "
                 "closing the oldest (counted in inbound_hs_source_drops / hs_global_drops)",
                 kind_name(l), which, INBOUND_HS_PER_SOURCE, INBOUND_HS_MAX);
    }
    victim->_close(victim);
}

struct inbound_listener *
inbound_listen(const struct flow_env *e, enum flow_inbound kind, const struct inbound_opts *cfg,
               char *err, size_t errlen)
{
    struct inbound_listener *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->e = e;
    l->users = cfg->users;
    l->kind = kind;
    l->mixed = kind == FLOW_IN_SOCKS && cfg->mixed;
    if (cfg->target != NULL)
        l->target = *cfg->target;
    l->head._prev = l->head._next = &l->head;
    l->fd = socket(cfg->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (l->fd < 0 || setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(l->fd, (const struct sockaddr *)&cfg->addr, cfg->addrlen) != 0 ||
        listen(l->fd, 4096) != 0) {
        snprintf(err, errlen, "listen on %s (%s): %s", cfg->text, kind_name(l),
                 strerror(errno));
        if (l->fd >= 0)
            close(l->fd);
        free(l);
        return NULL;
    }
    socklen_t blen = sizeof(l->bound);
    getsockname(l->fd, (struct sockaddr *)&l->bound, &blen);
    ev_io_init(&l->w, on_accept, l->fd, EV_READ);
    l->w.data = l;
    ev_io_start(e->loop, &l->w);
    ev_timer_init(&l->retry, on_retry, 0.1, 0);
    l->retry.data = l;
    l->hs._hs_prev = l->hs._hs_next = &l->hs;
    ev_timer_init(&l->hs_timer, on_hs_deadline, 1, 0);
    l->hs_timer.data = l;
    LOG_INFO("listening: %s on %s%s",
             l->mixed ? "mixed (socks5+http)" : kind == FLOW_IN_SOCKS ? "socks5" : kind_name(l),
             cfg->text, cfg->users != NULL && cfg->users->n ? " (auth)" : "");
    return l;
}

int
inbound_listener_is(const struct inbound_listener *l, const struct sockaddr_storage *ss)
{
    if (l == NULL || ss->ss_family != l->bound.ss_family)
        return 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss, *b = (const void *)&l->bound;
        uint32_t ip = ntohl(a->sin_addr.s_addr);
        return a->sin_port == b->sin_port &&
               (a->sin_addr.s_addr == b->sin_addr.s_addr || ip >> 24 == 127 || ip == 0 ||
                b->sin_addr.s_addr == htonl(INADDR_ANY));
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)ss, *b = (const void *)&l->bound;
        return a->sin6_port == b->sin6_port &&
               (IN6_ARE_ADDR_EQUAL(&a->sin6_addr, &b->sin6_addr) ||
                IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) || IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr) ||
                IN6_IS_ADDR_UNSPECIFIED(&b->sin6_addr));
    }
    return 0;
}

void
inbound_close(struct inbound_listener *l)
{
    if (l == NULL)
        return;
    ev_io_stop(l->e->loop, &l->w);
    ev_timer_stop(l->e->loop, &l->retry);
    close(l->fd);
    while (l->head._next != &l->head)
        l->head._next->_close(l->head._next);
    ev_timer_stop(l->e->loop, &l->hs_timer); /* after: closing re-arms it */
    free(l);
}

void
inbound_flow_init(struct flow *f, enum flow_inbound kind, int fd,
                  const struct sockaddr_storage *peer)
{
    f->network = FLOW_TCP;
    f->inbound = kind;
    f->src = *peer;
    socklen_t llen = sizeof(f->local);
    getsockname(fd, (struct sockaddr *)&f->local, &llen);
}

int
inbound_port(const struct inbound_listener *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (l == NULL || getsockname(l->fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

const struct flow_addr *
inbound_target(const struct inbound_listener *l)
{
    return &l->target;
}

const struct flow_env *
inbound_env(const struct inbound_listener *l)
{
    return l->e;
}

void
inbound_conn_link(struct inbound_listener *l, struct inbound_conn *c,
                  const struct sockaddr_storage *peer)
{
    flow_sockaddr_key(c->_src, peer);
    hs_make_room(l, c->_src);
    c->_l = l;
    c->_next = &l->head;
    c->_prev = l->head._prev;
    c->_prev->_next = c;
    l->head._prev = c;
    c->_hs_since = io_mono_now();
    c->_hs_next = &l->hs;
    c->_hs_prev = l->hs._hs_prev;
    c->_hs_prev->_hs_next = c;
    l->hs._hs_prev = c;
    if (l->st.hs_pending++ == 0)
        hs_arm(l);
}

void
inbound_conn_ready(struct inbound_conn *c)
{
    struct inbound_listener *l = c->_l;
    int was_oldest = l->hs._hs_next == c;
    hs_remove(c);
    if (was_oldest)
        hs_arm(l);
}

void
inbound_conn_timed_out(struct inbound_conn *c)
{
    if (c->_hs_next != NULL)
        c->_l->st.hs_timeouts++;
}

void
inbound_stats_add(const struct inbound_listener *l, struct inbound_stats *out)
{
    if (l == NULL)
        return;
#define X(field, key) out->field += l->st.field;
    INBOUND_STATS(X)
#undef X
}

void
inbound_conn_unlink(struct inbound_conn *c)
{
    if (c->_hs_next != NULL)
        inbound_conn_ready(c);
    c->_prev->_next = c->_next;
    c->_next->_prev = c->_prev;
    c->_prev = c->_next = NULL;
}

int
inbound_auth_required(const struct inbound_listener *l)
{
    return l->users != NULL && l->users->n > 0;
}

/* 1 if |a| (NUL-terminated) equals |b|..|blen|, in a time that depends on
 * the lengths only, not on where the first difference is. */
static int
same_secret(const char *a, const char *b, size_t blen)
{
    size_t alen = strlen(a);
    unsigned char diff = alen != blen;
    for (size_t i = 0; i < blen; i++)
        diff |= (unsigned char)(i < alen ? a[i] : 0) ^ (unsigned char)b[i];
    return diff == 0;
}

/* |src|'s entry (NULL: none), forgotten after AUTH_FORGET quiet seconds. */
static struct auth_source *
auth_find(struct inbound_listener *l, const uint8_t src[16], double now)
{
    for (size_t i = 0; i < AUTH_SOURCES; i++) {
        struct auth_source *a = &l->auth[i];
        if (a->fails > 0 && memcmp(a->src, src, 16) == 0) {
            if (now - a->last > AUTH_FORGET)
                memset(a, 0, sizeof(*a));
            return a->fails > 0 ? a : NULL;
        }
    }
    return NULL;
}

static struct auth_source *
auth_slot(struct inbound_listener *l, const uint8_t src[16])
{
    struct auth_source *a = &l->auth[0];
    for (size_t i = 1; i < AUTH_SOURCES && a->fails > 0; i++)
        if (l->auth[i].fails == 0 || l->auth[i].last < a->last)
            a = &l->auth[i];
    memset(a, 0, sizeof(*a));
    memcpy(a->src, src, 16);
    return a;
}

int
inbound_auth_check(struct inbound_conn *conn, const char *user, size_t ulen, const char *pass,
                   size_t plen)
{
    struct inbound_listener *l = conn->_l;
    const struct inbound_users *c = l->users;
    if (c->n == 0)
        return 1;
    double now = io_mono_now();
    struct auth_source *a = auth_find(l, conn->_src, now);
    if (a != NULL && now < a->until) {
        l->st.auth_backoffs++;
        if (l->auth_logged == 0 || now - l->auth_logged >= 10) {
            l->auth_logged = now;
            char who[INET6_ADDRSTRLEN];
            inet_ntop(AF_INET6, a->src, who, sizeof(who));
            LOG_WARN("%s: %u wrong credentials from %s: its attempts are refused unchecked for "
                     "%.0f s more (counted in inbound_auth_backoffs)",
                     kind_name(l), a->fails, who, a->until - now);
        }
        return 0;
    }
    /* Every pair is compared in full: a guess learns nothing from timing
     * about which name exists or how much of a password was right. */
    int ok = 0;
    for (size_t i = 0; i < c->n; i++)
        ok |= same_secret(c->users[2 * i], user, ulen) &
              same_secret(c->users[2 * i + 1], pass, plen);
    if (ok) {
        if (a != NULL)
            memset(a, 0, sizeof(*a));
        return 1;
    }
    if (a == NULL)
        a = auth_slot(l, conn->_src);
    a->fails++;
    a->last = now;
    if (a->fails >= AUTH_FREE_FAILS) {
        uint32_t extra = a->fails - AUTH_FREE_FAILS;
        double wait = extra >= 6 ? AUTH_BACKOFF_MAX : (double)(1u << extra);
        a->until = now + wait;
    }
    return 0;
}
