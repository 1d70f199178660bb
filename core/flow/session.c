#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flow/relay.h"
#include "flow/session.h"
#include "io/io.h"
#include "outbound/outbound.h"

struct flow_open {
    struct outbound_open *oc;
    void *rq;                  /* the name resolving for IP rules, before oc */
    const struct flow_env *e;
    int local;
    struct flow *f;
    flow_open_cb cb;
    void *arg;
};

static void
on_open(void *arg, const struct outbound_result *r)
{
    struct flow_open *o = arg;
    struct flow_upstream u = {.stream = r->stream, .extra = r->extra, .extra_len = r->extra_len,
                              .err = r->err, .why = r->why};
    flow_open_cb cb = o->cb;
    void *cb_arg = o->arg;
    if (r->err != 0)
        flow_log_connect_failed(o->f, r->why);
    else if (r->via != NULL && o->f->policy >= FLOW_POLICY__BUILTIN)
        o->f->via = r->via;
    free(o);
    cb(cb_arg, &u);
}

/* Ends an open that failed before any upstream was asked for. */
static void
fail(struct flow_open *o, int err, const char *why)
{
    struct flow_upstream u = {.err = err, .why = why};
    flow_open_cb cb = o->cb;
    void *cb_arg = o->arg;
    flow_log_connect_failed(o->f, why);
    free(o);
    cb(cb_arg, &u);
}

static int
start(struct flow_open *o)
{
    const struct flow_env *e = o->e;
    o->oc = outbound_open(o->local ? e->local : e->out, o->f->policy, &o->f->dst,
                          e->opts->connect_timeout, on_open, o);
    return o->oc != NULL ? 0 : -1;
}

/* The name is resolved (or could not be): the flow is decided again, now
 * that its IP rules can match, and opens as that decision says. */
static void
on_resolved(void *arg)
{
    struct flow_open *o = arg;
    const struct flow_env *e = o->e;
    o->rq = NULL;
    e->decide(e->ud, o->f);
    if (o->f->policy == FLOW_POLICY_REJECT)
        fail(o, ECANCELED, "rejected"); /* session.h: ECANCELED is a REJECT decided late */
    else if (start(o) != 0)
        fail(o, ENOMEM, "out of memory");
}

/* route() reached an IP rule needing the named flow's address and gave a
 * trial decision: the name resolves first (flow.h: flow_env.resolve). */
static int
wants_resolve(const struct flow_env *e, const struct flow *f, int local)
{
    return !local && (f->_reads & FLOW_READ_RESOLVE) && f->_resolvable &&
           f->resolved.state == FLOW_RESOLVE_NONE && e->resolve != NULL;
}

struct flow_open *
flow_open(const struct flow_env *e, struct flow *f, int local, flow_open_cb cb, void *arg)
{
    struct flow_open *o = malloc(sizeof(*o));
    if (o == NULL)
        return NULL;
    *o = (struct flow_open){.e = e, .local = local, .f = f, .cb = cb, .arg = arg};
    if (wants_resolve(e, f, local)) {
        o->rq = e->resolve(e->ud, f, on_resolved, o);
        if (o->rq != NULL)
            return o;
        free(o); /* out of memory */
        return NULL;
    }
    if (start(o) != 0) {
        free(o);
        return NULL;
    }
    return o;
}

void
flow_open_cancel(struct flow_open *o)
{
    if (o->rq != NULL)
        o->e->resolve_cancel(o->e->ud, o->rq);
    else
        outbound_open_cancel(o->oc);
    free(o);
}

int
flow_relay_upstream(struct flow_relay *r, const struct flow_env *e, struct io_stream *client,
                    const struct flow_upstream *u, const void *pre_up, size_t pre_up_len,
                    const void *reply, size_t reply_len, struct flow *f,
                    void (*done)(struct flow_relay *, void *, const char *), void *arg)
{
    /* The client sees our reply, then what the destination already said. */
    const void *down = reply;
    size_t down_len = reply_len;
    char *joined = NULL;
    if (u->extra_len > 0) {
        joined = malloc(reply_len + u->extra_len);
        if (joined == NULL)
            return -1;
        if (reply_len > 0)
            memcpy(joined, reply, reply_len);
        memcpy(joined + reply_len, u->extra, u->extra_len);
        down = joined;
        down_len = reply_len + u->extra_len;
    }
    struct flow_relay_args a = {
        .client = client,
        .upstream = u->stream,
        .pre_up = pre_up,
        .pre_up_len = pre_up_len,
        .pre_down = down,
        .pre_down_len = down_len,
        .up_count = &f->bytes_up,
        .down_count = &f->bytes_down,
        .idle = e->opts->idle_timeout,
        .cb = done,
        .arg = arg,
    };
    int rc;
    const struct flow_intercept *icpt = e->intercept;
    if (icpt != NULL && icpt->wants(icpt->ud, f)) {
        memset(r, 0, sizeof(*r));
        r->_cb = done;
        r->_arg = arg;
        r->_icpt = icpt;
        r->_icpt_state = icpt->start(icpt->ud, r, &a, f);
        r->_running = r->_icpt_state != NULL;
        rc = r->_running ? 0 : -1;
        if (rc != 0)
            r->_icpt = NULL;
    } else {
        rc = flow_relay_start(r, e->loop, &a);
    }
    free(joined);
    /* The relay leaves |pre_down| out of the count; the destination's early
     * bytes in it are the flow's all the same. */
    if (rc == 0)
        f->bytes_down += u->extra_len;
    return rc;
}
