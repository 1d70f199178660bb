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

struct control_delay {
    struct control_client *cl;
    struct outbound_env env;
    struct outbound_open *open;
    struct io_stream *st;
    ev_timer limit;
    double t0;
    char req[600];
    size_t req_len, sent, got;
    char line[STATUS_LEN];
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static void
release(struct control_delay *d)
{
    ev_timer_stop(d->env.loop, &d->limit);
    if (d->open != NULL)
        outbound_open_cancel(d->open);
    if (d->st != NULL)
        io_close(d->st, 0);
    free(d);
}

void
control_delay_cancel(struct control_client *cl)
{
    if (cl->delay != NULL)
        release(cl->delay);
    cl->delay = NULL;
}

/* Answers and lets the client go on: |ms| >= 0, or -1 (504) / -2 (503). */
static void
finish(struct control_delay *d, int ms)
{
    struct control_client *cl = d->cl;
    cl->delay = NULL;
    release(d);
    cl->busy = 1;
    if (ms >= 0)
        control_reply_json(cl, 200, json_pack("{s:i}", "delay", ms));
    else if (ms == -1)
        control_reply_error(cl, 504, "Timeout");
    else
        control_reply_error(cl, 503, "An error occurred in the delay test");
    if (!cl->dead)
        control_client_flush(cl);
    cl->busy = 0;
    if (cl->dead) {
        control_client_kill(cl);
        return;
    }
    control_client_resume(cl);
}

static void
read_more(struct control_delay *d)
{
    for (;;) {
        char buf[256];
        ssize_t n = io_read(d->st, buf, sizeof(buf));
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            finish(d, -2);
            return;
        }
        size_t take = (size_t)n < STATUS_LEN - d->got ? (size_t)n : STATUS_LEN - d->got;
        memcpy(d->line + d->got, buf, take);
        d->got += take;
        if (d->got == STATUS_LEN) {
            int ok = memcmp(d->line, "HTTP/1.", 7) == 0;
            finish(d, ok ? (int)((ev_time() - d->t0) * 1000 + 0.5) : -2);
            return;
        }
    }
}

static void
send_more(struct control_delay *d)
{
    while (d->sent < d->req_len) {
        ssize_t w = io_write(d->st, d->req + d->sent, d->req_len - d->sent);
        if (w < 0 && errno == EAGAIN)
            return;
        if (w < 0) {
            finish(d, -2);
            return;
        }
        d->sent += (size_t)w;
    }
    read_more(d);
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
    struct control_delay *d = arg;
    d->open = NULL;
    if (r->err != 0) {
        finish(d, -2);
        return;
    }
    d->st = r->stream;
    io_set_callbacks(d->st, on_readable, on_drain, d);
    io_read_start(d->st);
    send_more(d);
}

static void
on_limit(struct ev_loop *loop, ev_timer *w, int revents)
{
    finish(CONTAINER(w, struct control_delay, limit), -1);
}

void
control_delay(struct control_client *cl, const char *name, struct mem_slice query)
{
    struct control *c = cl->c;
    struct outbound_set *s = c->env.set != NULL ? c->env.set(c->env.ud) : NULL;
    int policy = s != NULL ? outbound_set_lookup(s, name) : outbound_set_lookup(NULL, name);
    if (policy < 0 || c->env.out == NULL) {
        control_reply_error(cl, 404, "resource not found");
        return;
    }
    if (policy == FLOW_POLICY_REJECT) {
        control_reply_error(cl, 503, "An error occurred in the delay test");
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
    struct control_delay *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        control_reply_error(cl, 500, "out of memory");
        return;
    }
    int n = snprintf(d->req, sizeof(d->req),
                     "GET %.*s HTTP/1.1\r\nHost: %.*s\r\nUser-Agent: chute-delay\r\n"
                     "Connection: close\r\n\r\n",
                     (int)path.len, path.ptr, (int)host.len, host.ptr);
    d->req_len = n > 0 && (size_t)n < sizeof(d->req) ? (size_t)n : 0;
    d->cl = cl;
    d->env = *c->env.out;
    d->t0 = ev_time();
    ev_timer_init(&d->limit, on_limit, (double)ms / 1000, 0);
    ev_timer_start(d->env.loop, &d->limit);
    d->open = outbound_open(&d->env, policy, &dst, (double)ms / 1000, on_open, d);
    if (d->open == NULL) {
        release(d);
        control_reply_error(cl, 500, "out of memory");
        return;
    }
    cl->delay = d;
}
