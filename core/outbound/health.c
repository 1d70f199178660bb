#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log/log.h"
#include "flow/addr.h"
#include "outbound/set_int.h"
#include "io/io.h"

/* Health checks: per (group, member) a timer, then outbound_open() through
 * the member, an HTTP GET, and the time to the status line. */

#define FIRST_CHECK 0.2   /* groups have data soon after a start */
#define STAGGER 0.02      /* members of a group do not all leave at once */
#define RECHECK 1.0       /* after a failed connection was reported */
#define MIN_GAP 0.1       /* between two checks of one member */
#define DEFAULT_TIMEOUT 5.0

struct health_check {
    struct outbound_set *set;
    size_t g, m;
    int active;            /* REJECT and group members are never checked */
    ev_timer due;          /* the next check */
    ev_timer limit;        /* the running check's deadline */
    struct outbound_open *open;
    struct io_stream *stream;
    struct outbound_env env; /* the set's env, its set replaced by the view */
    double t0;
    size_t sent;
    struct outbound_health_line line;
};

struct health_group {
    struct flow_addr dst;
    char req[640];
    size_t req_len;
    double timeout;
    struct health_check c[];
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

struct url {
    struct flow_addr dst;
    char authority[256]; /* the Host header: as written in the URL */
    char path[256];
};

static int __attribute__((format(printf, 3, 4)))
url_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int
parse_port(const char *p, size_t n, uint16_t *port)
{
    unsigned long v = 0;
    if (n == 0 || n > 5)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)p[i]))
            return -1;
        v = v * 10 + (unsigned long)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

static int
parse_url(const char *url, struct url *u, char *err, size_t errlen)
{
    if (strncasecmp(url, "https://", 8) == 0)
        return url_fail(err, errlen, "https health checks are not supported yet: use http:// (%s)", url);
    if (strncasecmp(url, "http://", 7) != 0)
        return url_fail(err, errlen, "health check URL '%s' must start with http://", url);
    const char *a = url + 7, *end;
    size_t alen = strcspn(a, "/?#");
    if (alen == 0)
        return url_fail(err, errlen, "health check URL '%s' has no host", url);
    if (memchr(a, '@', alen) != NULL)
        return url_fail(err, errlen, "health check URL '%s': credentials are not supported", url);
    const char *host = a, *rest;
    size_t hlen;
    uint16_t port = 80;
    if (a[0] == '[') {
        const char *close = memchr(a, ']', alen);
        if (close == NULL)
            return url_fail(err, errlen, "health check URL '%s': unclosed '['", url);
        host = a + 1;
        hlen = (size_t)(close - host);
        rest = close + 1;
    } else {
        const char *colon = memchr(a, ':', alen);
        hlen = colon != NULL ? (size_t)(colon - a) : alen;
        rest = a + hlen;
    }
    end = a + alen;
    if (rest < end && (*rest != ':' || parse_port(rest + 1, (size_t)(end - rest - 1), &port) != 0))
        return url_fail(err, errlen, "health check URL '%s': bad port", url);
    int bad = hlen == 0;
    if (a[0] == '[') {
        bad = bad || flow_addr_from_ip(&u->dst, host, hlen, port) != 0 ||
              u->dst.kind != FLOW_ADDR_IP6;
    } else {
        for (size_t i = 0; i < hlen && !bad; i++)
            bad = !(isalnum((unsigned char)host[i]) || host[i] == '-' || host[i] == '.' ||
                    host[i] == '_');
        bad = bad || flow_addr_from_host(&u->dst, host, hlen, port) != 0;
    }
    if (bad)
        return url_fail(err, errlen, "health check URL '%s': bad host", url);
    const char *path = end;
    size_t plen = strcspn(path, "#");
    for (size_t i = 0; i < plen; i++) {
        if ((unsigned char)path[i] <= 0x20 || path[i] == 0x7f)
            return url_fail(err, errlen, "health check URL '%s': bad character in the path", url);
    }
    if (alen >= sizeof(u->authority) || plen + 2 > sizeof(u->path))
        return url_fail(err, errlen, "health check URL '%s' is too long", url);
    memcpy(u->authority, a, alen);
    u->authority[alen] = '\0';
    snprintf(u->path, sizeof(u->path), "%s%.*s", path[0] == '/' ? "" : "/", (int)plen, path);
    return 0;
}

int
outbound_set_check_url(const char *url, char *err, size_t errlen)
{
    struct url u;
    return parse_url(url, &u, err, errlen);
}

static struct health_group *
hg_of(const struct health_check *c)
{
    return c->set->groups[c->g].hg;
}

/* Stops whatever the check has in flight; the due timer stays as it is. */
static void
release(struct health_check *c)
{
    struct ev_loop *loop = c->set->env->loop;
    ev_timer_stop(loop, &c->limit);
    if (c->open != NULL) {
        outbound_open_cancel(c->open);
        c->open = NULL;
    }
    if (c->stream != NULL) {
        io_close(c->stream, 0);
        c->stream = NULL;
    }
}

static void
finish(struct health_check *c, int ms, const char *err)
{
    struct outbound_set *s = c->set;
    struct ev_loop *loop = s->env->loop;
    release(c);
    outbound_set_check_result(s, c->g, c->m, ms, err);
    double next = s->groups[c->g].cfg.interval - (io_mono_now() - c->t0);
    ev_timer_set(&c->due, next > MIN_GAP ? next : MIN_GAP, 0);
    ev_timer_start(loop, &c->due);
}

static int
elapsed_ms(const struct health_check *c)
{
    double ms = (io_mono_now() - c->t0) * 1000 + 0.5;
    return ms < 0 ? 0 : ms > 1e9 ? 1000000000 : (int)ms;
}

int
outbound_health_feed(struct outbound_health_line *l, const void *p, size_t n)
{
    size_t room = sizeof(l->b) - l->got;
    size_t take = n < room ? n : room;
    memcpy(l->b + l->got, p, take);
    l->got += take;
    return outbound_hs_http_status(l->b, l->got);
}

/* Takes response bytes; 1 once the check is over (finished). */
static int
feed(struct health_check *c, const void *p, size_t n)
{
    int status = outbound_health_feed(&c->line, p, n);
    if (status == 0)
        return 0;
    if (status > 0)
        finish(c, elapsed_ms(c), NULL); /* any status: the path works */
    else
        finish(c, -1, "not an HTTP response");
    return 1;
}

/* Sends the rest of the request; 1 if the check ended on an error. */
static int
send_more(struct health_check *c)
{
    const struct health_group *hg = hg_of(c);
    while (c->sent < hg->req_len) {
        const char *p = hg->req + c->sent;
        size_t n = hg->req_len - c->sent;
        ssize_t w = io_write(c->stream, p, n);
        if (w < 0 && errno == EAGAIN)
            return 0; /* on_drain follows */
        if (w < 0) {
            finish(c, -1, strerror(errno));
            return 1;
        }
        c->sent += (size_t)w;
    }
    return 0;
}

static void
read_more(struct health_check *c)
{
    char buf[512];
    for (;;) {
        ssize_t n = io_read(c->stream, buf, sizeof(buf));
        if (n > 0) {
            if (feed(c, buf, (size_t)n))
                return;
            continue;
        }
        if (n == 0) {
            finish(c, -1, "closed before the status line");
            return;
        }
        if (errno != EAGAIN)
            finish(c, -1, strerror(errno));
        return;
    }
}

static void
on_readable(void *arg)
{
    read_more(arg);
}

/* The stream can take bytes again, or failed in the background (the next
 * read says how). */
static void
on_drain(void *arg)
{
    struct health_check *c = arg;
    if (!send_more(c))
        read_more(c);
}

static void
on_open(void *arg, const struct outbound_result *r)
{
    struct health_check *c = arg;
    c->open = NULL;
    if (r->err != 0) {
        finish(c, -1, r->why != NULL ? r->why : strerror(r->err));
        return;
    }
    c->stream = r->stream;
    io_set_callbacks(c->stream, on_readable, on_drain, c);
    io_read_start(c->stream);
    if (r->extra_len > 0 && feed(c, r->extra, r->extra_len))
        return;
    send_more(c);
}

/* A Shadowsocks server that took the whole request and said nothing is
 * most likely refusing our key (it answers a wrong one with silence). */
static void
on_limit(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct health_check *c = CONTAINER(w, struct health_check, limit);
    const struct outbound_proxy *p =
        outbound_set_proxy(c->set, c->set->groups[c->g].m[c->m].policy);
    int silent = c->stream != NULL && c->sent == hg_of(c)->req_len && c->line.got == 0 && p != NULL &&
                 p->type == OUTBOUND_SHADOWSOCKS;
    finish(c, -1, silent ? "no answer to the request: wrong password or cipher?" : "timeout");
}

static void
on_due(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct health_check *c = CONTAINER(w, struct health_check, due);
    struct outbound_set *s = c->set;
    struct health_group *hg = hg_of(c);
    c->env = *s->env; /* copied now: the env's TLS context may have come since */
    c->env.set = s->view;
    c->t0 = io_mono_now();
    c->sent = 0;
    c->line.got = 0;
    ev_timer_set(&c->limit, hg->timeout, 0);
    ev_timer_start(loop, &c->limit);
    c->open = outbound_open(&c->env, s->groups[c->g].m[c->m].policy, &hg->dst, hg->timeout,
                            on_open, c);
    if (c->open == NULL)
        finish(c, -1, "out of memory");
}

static int
checkable(const struct outbound_set *s, int policy)
{
    return policy == FLOW_POLICY_DIRECT ||
           (policy >= FLOW_POLICY__BUILTIN && (size_t)policy - FLOW_POLICY__BUILTIN < s->nproxies);
}

void
outbound_set_health_start(struct outbound_set *s)
{
    struct ev_loop *loop = s->env->loop;
    for (size_t i = 0; i < s->ngroups; i++) {
        struct group *g = &s->groups[i];
        struct url u;
        char err[320];
        if (g->cfg.interval <= 0 || g->cfg.url[0] == '\0' || g->cfg.nmembers == 0)
            continue;
        if (parse_url(g->cfg.url, &u, err, sizeof(err)) != 0) {
            LOG_WARN("group '%s': %s: no health checks", g->cfg.name, err);
            continue;
        }
        struct health_group *hg = calloc(1, sizeof(*hg) + g->cfg.nmembers * sizeof(hg->c[0]));
        if (hg == NULL) {
            LOG_WARN("group '%s': out of memory: no health checks", g->cfg.name);
            continue;
        }
        hg->dst = u.dst;
        hg->timeout = g->cfg.timeout > 0 ? g->cfg.timeout : DEFAULT_TIMEOUT;
        int n = snprintf(hg->req, sizeof(hg->req),
                         "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: chute-health\r\n"
                         "Connection: close\r\n\r\n",
                         u.path, u.authority);
        hg->req_len = n > 0 && (size_t)n < sizeof(hg->req) ? (size_t)n : 0;
        g->hg = hg;
        for (size_t j = 0; j < g->cfg.nmembers; j++) {
            struct health_check *c = &hg->c[j];
            c->set = s;
            c->g = i;
            c->m = j;
            ev_timer_init(&c->due, on_due, FIRST_CHECK + STAGGER * (double)j, 0);
            ev_timer_init(&c->limit, on_limit, 0, 0);
            c->active = checkable(s, g->m[j].policy);
            if (c->active)
                ev_timer_start(loop, &c->due);
        }
    }
}

void
outbound_set_health_stop(struct outbound_set *s)
{
    for (size_t i = 0; i < s->ngroups; i++) {
        struct health_group *hg = s->groups[i].hg;
        if (hg == NULL)
            continue;
        for (size_t j = 0; j < s->groups[i].cfg.nmembers; j++) {
            if (!hg->c[j].active)
                continue;
            ev_timer_stop(s->env->loop, &hg->c[j].due);
            release(&hg->c[j]);
        }
        free(hg);
        s->groups[i].hg = NULL;
    }
}

void
outbound_set_health_recheck(struct outbound_set *s, size_t g, size_t m)
{
    struct health_group *hg = s->groups[g].hg;
    if (hg == NULL || !hg->c[m].active || !ev_is_active(&hg->c[m].due))
        return; /* not checked, or a check is running now */
    ev_timer *due = &hg->c[m].due;
    if (ev_timer_remaining(s->env->loop, due) > RECHECK) {
        ev_timer_stop(s->env->loop, due);
        ev_timer_set(due, RECHECK, 0);
        ev_timer_start(s->env->loop, due);
    }
}
