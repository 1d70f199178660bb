#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "flow/flow.h"

struct flow_table {
    struct flow head; /* sentinel of the live list */
    uint64_t next_id;
    struct flow_table_stats st;
};

struct flow_table *
flow_table_new(void)
{
    struct flow_table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->head._prev = t->head._next = &t->head;
    t->next_id = 1;
    return t;
}

void
flow_table_free(struct flow_table *t)
{
    free(t);
}

void
flow_table_add(struct flow_table *t, struct flow *f, double now)
{
    f->id = t->next_id++;
    f->started = now;
    f->_next = &t->head;
    f->_prev = t->head._prev;
    f->_prev->_next = f;
    t->head._prev = f;
    t->st.active++;
    t->st.total++;
}

void
flow_table_remove(struct flow_table *t, struct flow *f, double now, const char *reason)
{
    if (f->_next == NULL)
        return;
    f->_prev->_next = f->_next;
    f->_next->_prev = f->_prev;
    f->_prev = f->_next = NULL;
    t->st.active--;
    t->st.bytes_up += f->bytes_up;
    t->st.bytes_down += f->bytes_down;
    char *sniffed = f->sniffed;
    f->sniffed = NULL;
    if (log_threshold >= LOG_LEVEL_INFO) {
        char src[64], dst[300];
        flow_sockaddr_format(&f->src, src, sizeof(src));
        flow_addr_format(&f->dst, dst, sizeof(dst));
        log_write(LOG_LEVEL_INFO,
                         "flow %llu %s %s %s -> %s%s%s policy=%s%s%s rule=\"%s%s%s\" up=%llu "
                         "down=%llu time=%.3fs close=%s",
                         (unsigned long long)f->id, flow_network_name(f->network),
                         flow_inbound_name(f->inbound), src, dst, sniffed ? " host=" : "",
                         sniffed ? sniffed : "",
                         f->policy_name ? f->policy_name : flow_policy_name(f->policy),
                         f->via && f->via != f->policy_name ? " via=" : "",
                         f->via && f->via != f->policy_name ? f->via : "",
                         f->rule ? f->rule : "-", f->why[0] ? " " : "", f->why,
                         (unsigned long long)f->bytes_up,
                         (unsigned long long)f->bytes_down, now - f->started, reason);
    }
    free(sniffed);
}

void
flow_log_connect_failed(const struct flow *f, const char *why)
{
    char dst[300];
    flow_addr_format(&f->dst, dst, sizeof(dst));
    LOG_INFO("flow %llu: connect %s: %s", (unsigned long long)f->id, dst, why);
}

void
flow_table_stats(const struct flow_table *t, struct flow_table_stats *out)
{
    *out = t->st;
    /* Live flows' bytes count too, so stats move during long transfers. */
    for (const struct flow *f = t->head._next; f != &t->head; f = f->_next) {
        out->bytes_up += f->bytes_up;
        out->bytes_down += f->bytes_down;
    }
}

const struct log_counter flow_table_counters[] = {
#define X(field, key) LOG_COUNTER(struct flow_table_stats, field, key)
    FLOW_TABLE_STATS(X)
#undef X
    LOG_COUNTER_END};

const char *
flow_network_name(enum flow_network n)
{
    return n == FLOW_UDP ? "udp" : "tcp";
}

const char *
flow_inbound_name(enum flow_inbound i)
{
    static const char *const names[] = {"socks", "http", "tun"};
    return names[i];
}

