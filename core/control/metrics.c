#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_int.h"
#include "flow/flow.h"
#include "outbound/set.h"

/* GET /metrics: the Prometheus text exposition format (version 0.0.4),
 * every counter of every module's table as chute_<prefix><key>, the
 * proxies' and groups' health, live flows and bytes by policy. */

struct text {
    char *p;
    size_t len, cap;
    int oom;
};

static void __attribute__((format(printf, 2, 3)))
put(struct text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *p = realloc(t->p, cap);
        if (p == NULL) {
            t->oom = 1;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}

/* A label value: backslash, quote and newline escaped. */
static const char *
label(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    for (; *s != '\0' && o + 3 < len; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            buf[o++] = '\\';
            buf[o++] = *s == '\n' ? 'n' : *s;
        } else {
            buf[o++] = *s;
        }
    }
    buf[o] = '\0';
    return buf;
}

/* The tables hold no kinds: what counts things now (active, used, held)
 * is a gauge, the rest only grows. */
static const char *
kind(const char *key)
{
    static const char *const gauges[] = {"active", "used", "lua_bytes", "entries", "size",
                                         "held", "open", "live", "capacity", "heap_max",
                                         "listeners"};
    for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++)
        if (strstr(key, gauges[i]) != NULL)
            return "gauge";
    return "counter";
}

static void
emit(void *arg, const struct log_counter_group *g, size_t n)
{
    struct text *t = arg;
    char name[160];
    for (size_t i = 0; i < n; i++)
        for (const struct log_counter *k = g[i].table; k->key != NULL; k++) {
            snprintf(name, sizeof(name), "chute_%s%s", g[i].prefix, k->key);
            put(t, "# TYPE %s %s\n%s %llu\n", name, kind(name), name,
                (unsigned long long)log_counter_value(k, g[i].stats));
        }
}

struct by_policy {
    const char *name[64];
    uint64_t flows[64], up[64], down[64];
    size_t n;
};

static void
count_flow(void *arg, const struct flow *f)
{
    struct by_policy *b = arg;
    const char *name = f->policy_name != NULL ? f->policy_name : flow_policy_name(f->policy);
    size_t i = 0;
    while (i < b->n && strcmp(b->name[i], name) != 0)
        i++;
    if (i == b->n) {
        if (b->n == 64)
            return; /* more policies than that: the totals above still hold them */
        b->name[b->n++] = name;
    }
    b->flows[i]++;
    b->up[i] += f->bytes_up;
    b->down[i] += f->bytes_down;
}

static void
policies(struct control *c, struct text *t)
{
    char l1[160], l2[160];
    struct outbound_set *s = c->env.set != NULL ? c->env.set(c->env.ud) : NULL;
    size_t n = s != NULL ? outbound_set_count(s) : 0;
    put(t, "# TYPE chute_proxy_up gauge\n");
    for (size_t i = 0; i < n; i++) {
        struct outbound_set_entry e;
        if (outbound_set_entry(s, (int)i, &e) == 0 && !e.is_group)
            put(t, "chute_proxy_up{name=\"%s\",type=\"%s\"} %d\n", label(e.name, l1, sizeof(l1)),
                e.type, e.alive);
    }
    put(t, "# TYPE chute_proxy_latency_ms gauge\n");
    for (size_t i = 0; i < n; i++) {
        struct outbound_set_entry e;
        if (outbound_set_entry(s, (int)i, &e) == 0 && !e.is_group && e.latency >= 0)
            put(t, "chute_proxy_latency_ms{name=\"%s\"} %d\n", label(e.name, l1, sizeof(l1)),
                e.latency);
    }
    put(t, "# TYPE chute_group_selected gauge\n");
    for (size_t i = 0; i < n; i++) {
        struct outbound_set_entry e;
        if (outbound_set_entry(s, (int)i, &e) != 0 || !e.is_group)
            continue;
        for (size_t m = 0; m < e.nmembers; m++)
            put(t, "chute_group_selected{group=\"%s\",member=\"%s\"} %d\n",
                label(e.name, l1, sizeof(l1)),
                label(outbound_set_name(s, e.members[m]), l2, sizeof(l2)), e.members[m] == e.now);
    }
    struct by_policy *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return;
    flow_table_each(c->env.flows, count_flow, b);
    put(t, "# TYPE chute_policy_flows_active gauge\n");
    for (size_t i = 0; i < b->n; i++)
        put(t, "chute_policy_flows_active{policy=\"%s\"} %llu\n", label(b->name[i], l1, sizeof(l1)),
            (unsigned long long)b->flows[i]);
    put(t, "# TYPE chute_policy_live_bytes gauge\n");
    for (size_t i = 0; i < b->n; i++)
        put(t, "chute_policy_live_bytes{policy=\"%s\",direction=\"up\"} %llu\n"
               "chute_policy_live_bytes{policy=\"%s\",direction=\"down\"} %llu\n",
            label(b->name[i], l1, sizeof(l1)), (unsigned long long)b->up[i], l1,
            (unsigned long long)b->down[i]);
    free(b);
}

void
control_metrics(struct control_client *cl)
{
    struct control *c = cl->c;
    struct text t = {.cap = 8192};
    t.p = malloc(t.cap);
    if (t.p == NULL) {
        control_reply_error(cl, 500, "out of memory");
        return;
    }
    t.p[0] = '\0';
    if (c->env.counters != NULL)
        c->env.counters(c->env.ud, emit, &t);
    policies(c, &t);
    put(&t, "# TYPE chute_control_requests counter\nchute_control_requests %llu\n"
            "# TYPE chute_control_unauthorized counter\nchute_control_unauthorized %llu\n"
            "# TYPE chute_control_dropped counter\nchute_control_dropped %llu\n"
            "# TYPE chute_control_hs_timeouts counter\nchute_control_hs_timeouts %llu\n"
            "# TYPE chute_control_source_drops counter\nchute_control_source_drops %llu\n"
            "# TYPE chute_control_clients gauge\nchute_control_clients %zu\n",
        (unsigned long long)c->st.requests, (unsigned long long)c->st.unauthorized,
        (unsigned long long)c->st.dropped, (unsigned long long)c->st.hs_timeouts,
        (unsigned long long)c->st.source_drops, c->nclients);
    if (t.oom)
        control_reply_error(cl, 500, "out of memory");
    else
        control_reply(cl, 200, "text/plain; version=0.0.4; charset=utf-8", t.p, t.len);
    free(t.p);
}
