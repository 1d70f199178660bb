#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_int.h"
#include "flow/addr.h"
#include "io/io.h"
#include "outbound/outbound.h"
#include "outbound/set.h"

/* GET /proxies/:name/delay?url=http://...&timeout=ms: one HTTP GET through
 * the proxy or group, timed to the response's status line, as Clash's
 * (200 {"delay":ms}; 504 on a timeout, 503 when it fails, 400 for a bad
 * url). The client waits; it reads nothing more until the answer. */

#define DEFAULT_URL "http://www.gstatic.com/generate_204"
#define STATUS_LEN 12
#define MAX_PROBES 64

/* One timed GET through one policy. */
struct probe {
    struct control_delay *d;
    int policy;
    struct outbound_open *open;
    struct io_stream *st;
    ev_timer limit;
    double t0;
    size_t sent, got;
    char line[STATUS_LEN];
    int ms;       /* the result: >= 0, -1 timeout, -2 failed */
    int running;
};

/* A test of one policy (GET /proxies/:name/delay) or of every member of a
 * group at once (GET /group/:name/delay: {"member": ms, ...}, the members
 * that failed left out, as Clash). */
struct control_delay {
    struct control_client *cl;
    /* The engine's, not a copy: an open still reads it after its callback
     * (which may free this). */
    const struct outbound_env *env;
    struct outbound_set *set;   /* a reference: names stay valid */
    int group;
    size_t n, left;
    char req[600];
    size_t req_len;
    struct probe p[];
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static void
probe_stop(struct probe *p)
{
    if (!p->running)
        return;
    p->running = 0;
    ev_timer_stop(p->d->env->loop, &p->limit);
    if (p->open != NULL)
        outbound_open_cancel(p->open);
    if (p->st != NULL)
        io_close(p->st, 0);
    p->open = NULL;
    p->st = NULL;
}

static void
release(struct control_delay *d)
{
    for (size_t i = 0; i < d->n; i++)
        probe_stop(&d->p[i]);
    if (d->set != NULL)
        outbound_set_unref(d->set);
    free(d);
}

void
control_delay_cancel(struct control_client *cl)
{
    if (cl->delay != NULL)
        release(cl->delay);
    cl->delay = NULL;
}

static void
answer(struct control_delay *d)
{
    struct control_client *cl = d->cl;
    json_t *j;
    int status = 200;
    if (d->group) {
        j = json_object();
        for (size_t i = 0; i < d->n; i++)
            if (d->p[i].ms >= 0)
                json_object_set_new(j, outbound_set_name(d->set, d->p[i].policy),
                                    json_integer(d->p[i].ms));
    } else if (d->p[0].ms >= 0) {
        j = json_pack("{s:i}", "delay", d->p[0].ms);
    } else {
        status = d->p[0].ms == -1 ? 504 : 503;
        j = json_pack("{s:s}", "message",
                      status == 504 ? "Timeout" : "An error occurred in the delay test");
    }
    cl->delay = NULL;
    release(d);
    control_reply_late(cl, status, j);
}

/* |ms| >= 0, or -1 (timeout) / -2 (failed). */
static void
finish(struct probe *p, int ms)
{
    probe_stop(p);
    p->ms = ms;
    if (--p->d->left == 0)
        answer(p->d);
}

static void
read_more(struct probe *p)
{
    for (;;) {
        char buf[256];
        ssize_t n = io_read(p->st, buf, sizeof(buf));
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            finish(p, -2);
            return;
        }
        size_t take = (size_t)n < STATUS_LEN - p->got ? (size_t)n : STATUS_LEN - p->got;
        memcpy(p->line + p->got, buf, take);
        p->got += take;
        if (p->got == STATUS_LEN) {
            int ok = memcmp(p->line, "HTTP/1.", 7) == 0;
            finish(p, ok ? (int)((io_mono_now() - p->t0) * 1000 + 0.5) : -2);
            return;
        }
    }
}

static void
send_more(struct probe *p)
{
    const struct control_delay *d = p->d;
    while (p->sent < d->req_len) {
        ssize_t w = io_write(p->st, d->req + p->sent, d->req_len - p->sent);
        if (w < 0 && errno == EAGAIN)
            return;
        if (w < 0) {
            finish(p, -2);
            return;
        }
        p->sent += (size_t)w;
    }
    read_more(p);
}

static void
on_readable(void *arg)
{
    read_more(arg);
}

static void
on_drain(void *arg)
{
    send_more(arg);
}

static void
on_open(void *arg, const struct outbound_result *r)
{
    struct probe *p = arg;
    p->open = NULL;
    if (r->err != 0) {
        finish(p, -2);
        return;
    }
    p->st = r->stream;
    io_set_callbacks(p->st, on_readable, on_drain, p);
    io_read_start(p->st);
    send_more(p);
}

static void
on_limit(struct ev_loop *loop, ev_timer *w, int revents)
{
    finish(CONTAINER(w, struct probe, limit), -1);
}

void
control_delay(struct control_client *cl, const char *name, struct mem_slice query, int group)
{
    struct control *c = cl->c;
    struct outbound_set *s = c->env.set != NULL ? c->env.set(c->env.ud) : NULL;
    int policy = s != NULL ? outbound_set_lookup(s, name) : -1;
    struct outbound_set_entry e;
    if (policy < 0 || c->env.out == NULL || outbound_set_entry(s, policy, &e) != 0 ||
        (group && !e.is_group)) {
        control_reply_error(cl, 404, "resource not found");
        return;
    }
    char url[512], tmo[16];
    int r = control_query_get(query, "url", url, sizeof(url));
    if (r == 0)
        snprintf(url, sizeof(url), "%s", DEFAULT_URL);
    long ms = 5000;
    if (control_query_get(query, "timeout", tmo, sizeof(tmo)) == 1) {
        char *end;
        ms = strtol(tmo, &end, 10);
        if (*end != '\0' || ms < 1 || ms > 60000) {
            control_reply_error(cl, 400, "timeout: expected milliseconds, 1..60000");
            return;
        }
    }
    struct mem_slice host, path;
    uint16_t port;
    struct flow_addr dst;
    if (r < 0 || http_target_split(mem_slice(url, strlen(url)), 0, &host, &port, &path) != 0 ||
        flow_addr_from_host(&dst, host.ptr, host.len, port) != 0) {
        control_reply_error(cl, 400, "url: expected http://host[:port]/path (https is not tested)");
        return;
    }
    size_t n = group ? e.nmembers : 1;
    if (n > MAX_PROBES)
        n = MAX_PROBES;
    struct control_delay *d = n > 0 ? calloc(1, sizeof(*d) + n * sizeof(d->p[0])) : NULL;
    if (d == NULL) {
        control_reply_error(cl, n > 0 ? 500 : 404, n > 0 ? "out of memory" : "resource not found");
        return;
    }
    int k = snprintf(d->req, sizeof(d->req),
                     "GET %.*s HTTP/1.1\r\nHost: %.*s\r\nUser-Agent: chute-delay\r\n"
                     "Connection: close\r\n\r\n",
                     (int)path.len, path.ptr, (int)host.len, host.ptr);
    d->req_len = k > 0 && (size_t)k < sizeof(d->req) ? (size_t)k : 0;
    d->cl = cl;
    d->env = c->env.out;
    d->set = outbound_set_ref(s);
    d->group = group;
    d->n = d->left = n;
    cl->delay = d;
    for (size_t i = 0; i < n; i++) {
        struct probe *p = &d->p[i];
        p->d = d;
        p->policy = group ? e.members[i] : policy;
        p->running = 1;
        p->t0 = io_mono_now();
        ev_timer_init(&p->limit, on_limit, (double)ms / 1000, 0);
        ev_timer_start(d->env->loop, &p->limit);
    }
    /* Opened after every probe is set up: a REJECT member fails at once. */
    for (size_t i = 0; i < n && cl->delay == d; i++) {
        struct probe *p = &d->p[i];
        if (p->policy == FLOW_POLICY_REJECT) {
            finish(p, -2);
            continue;
        }
        p->open = outbound_open(d->env, p->policy, &dst, (double)ms / 1000, on_open, p);
        if (p->open == NULL)
            finish(p, -2);
    }
}
