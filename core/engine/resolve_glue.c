#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"
#include "engine/engine.h"
#include "flow/flow.h"
#include "log/log.h"

/* Lazy resolution for IP rules (flow.h: flow_env.resolve). When route()
 * reaches an IP-CIDR rule without no-resolve (or a list holding one) for a
 * named flow and nothing before it matched, the decision is a trial;
 * flow_open then resolves the name here, through chute's own resolver and
 * cache (the real answer: the fake-IP pool is the DNS server's, not the
 * resolver's), and decides again with the addresses. At most once a flow:
 * a flow whose resolution is done or failed never asks again, and the
 * decision cache keeps the outcome for the next flows to the name. */

struct rq {
    struct engine *e;
    struct flow *f;
    struct dns_query *q;
    void (*done)(void *arg);
    void *arg;
};

void
engine_resolved_store(struct flow *f, const char *err, const struct sockaddr_storage *addrs,
                      size_t n)
{
    struct flow_resolved *r = &f->resolved;
    memset(r, 0, sizeof(*r));
    r->state = FLOW_RESOLVE_FAILED;
    if (err != NULL)
        return;
    for (size_t i = 0; i < n && r->n < FLOW_RESOLVED_MAX; i++) {
        if (addrs[i].ss_family == AF_INET) {
            memcpy(r->ip[r->n], &((const struct sockaddr_in *)&addrs[i])->sin_addr, 4);
        } else if (addrs[i].ss_family == AF_INET6) {
            memcpy(r->ip[r->n], &((const struct sockaddr_in6 *)&addrs[i])->sin6_addr, 16);
            r->v6 |= (uint8_t)(1u << r->n);
        } else {
            continue;
        }
        r->n++;
    }
    if (r->n > 0)
        r->state = FLOW_RESOLVE_DONE;
}

size_t
engine_resolved_format(const struct flow_resolved *r, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    if (r->state == FLOW_RESOLVE_FAILED)
        return (size_t)snprintf(buf, len, "no address");
    for (unsigned i = 0; i < r->n && at < len; i++) {
        char a[INET6_ADDRSTRLEN];
        inet_ntop(r->v6 & (1u << i) ? AF_INET6 : AF_INET, r->ip[i], a, sizeof(a));
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? " " : "", a);
    }
    return at;
}

static void
on_answer(void *arg, const char *err, const struct sockaddr_storage *addrs, size_t n)
{
    struct rq *rq = arg;
    char shown[200];
    engine_resolved_store(rq->f, err, addrs, n);
    rq->e->rule_resolves++;
    engine_resolved_format(&rq->f->resolved, shown, sizeof(shown));
    LOG_DEBUG("flow %llu: resolved %s for IP rules: %s", (unsigned long long)rq->f->id,
              rq->f->dst.name, shown);
    void (*done)(void *) = rq->done;
    void *done_arg = rq->arg;
    free(rq);
    done(done_arg);
}

void *
engine_flow_resolve(void *ud, struct flow *f, void (*done)(void *arg), void *arg)
{
    struct engine *e = ud;
    struct rq *rq = malloc(sizeof(*rq));
    if (rq == NULL)
        return NULL;
    *rq = (struct rq){.e = e, .f = f, .done = done, .arg = arg};
    rq->q = dns_resolve(e->dns, f->dst.name, on_answer, rq);
    if (rq->q == NULL) {
        free(rq);
        return NULL;
    }
    return rq;
}

void
engine_flow_resolve_cancel(void *ud, void *handle)
{
    struct rq *rq = handle;
    (void)ud;
    dns_query_cancel(rq->q);
    free(rq);
}
