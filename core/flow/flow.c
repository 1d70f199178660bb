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
    struct flow_cursor *cursors; /* open walks (flow_cursor_open) */
    double refused_logged;       /* when flow_table_refused last logged */
    const char *refused_what;    /* and of which flows */
    uint64_t refused_unlogged;
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

/* The fields a flow's close line and its description share. */
static size_t
format_line(const struct flow *f, double now, char *buf, size_t len)
{
    char src[64], dst[300];
    flow_sockaddr_format(&f->src, src, sizeof(src));
    flow_addr_format(&f->dst, dst, sizeof(dst));
    int n = snprintf(buf, len,
                     "%llu %s %s %s -> %s%s%s policy=%s%s%s rule=\"%s%s%s\" up=%llu down=%llu "
                     "time=%.3fs",
                     (unsigned long long)f->id, flow_network_name(f->network),
                     flow_inbound_name(f->inbound), src, dst, f->sniffed ? " host=" : "",
                     f->sniffed ? f->sniffed : "",
                     f->policy_name ? f->policy_name : flow_policy_name(f->policy),
                     f->via && f->via != f->policy_name ? " via=" : "",
                     f->via && f->via != f->policy_name ? f->via : "", f->rule ? f->rule : "-",
                     f->why[0] ? " " : "", f->why, (unsigned long long)f->bytes_up,
                     (unsigned long long)f->bytes_down, now - f->started);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* The close line; a JSON line gets its parts as fields (log/log.h). */
static void
log_close(const struct flow *f, double now, const char *reason)
{
    char line[1024], src[64], dst[300], rule[300];
    format_line(f, now, line, sizeof(line));
    flow_sockaddr_format(&f->src, src, sizeof(src));
    flow_addr_format(&f->dst, dst, sizeof(dst));
    snprintf(rule, sizeof(rule), "%s%s%s", f->rule ? f->rule : "-", f->why[0] ? " " : "", f->why);
    const char *policy = f->policy_name ? f->policy_name : flow_policy_name(f->policy);
    const struct log_field fields[] = {
        LOG_FIELD_N("flow", f->id),
        LOG_FIELD_S("network", flow_network_name(f->network)),
        LOG_FIELD_S("inbound", flow_inbound_name(f->inbound)),
        LOG_FIELD_S("src", src),
        LOG_FIELD_S("dst", dst),
        LOG_FIELD_S("host", f->sniffed),
        LOG_FIELD_S("policy", policy),
        LOG_FIELD_S("via", f->via && f->via != f->policy_name ? f->via : NULL),
        LOG_FIELD_S("rule", rule),
        LOG_FIELD_N("up", f->bytes_up),
        LOG_FIELD_N("down", f->bytes_down),
        LOG_FIELD_T("duration", now - f->started),
    };
    log_write_fields(LOG_LEVEL_INFO, fields, sizeof(fields) / sizeof(fields[0]), "flow %s close=%s",
                     line, reason);
}

void
flow_table_remove(struct flow_table *t, struct flow *f, double now, const char *reason)
{
    if (f->_next == NULL)
        return;
    for (struct flow_cursor *c = t->cursors; c != NULL; c = c->_next)
        if (c->_at == f)
            c->_at = f->_next;
    f->_prev->_next = f->_next;
    f->_next->_prev = f->_prev;
    f->_prev = f->_next = NULL;
    t->st.active--;
    t->st.bytes_up += f->bytes_up;
    t->st.bytes_down += f->bytes_down;
    if (log_threshold >= LOG_LEVEL_INFO)
        log_close(f, now, reason);
    free(f->sniffed);
    f->sniffed = NULL;
}

void
flow_log_decided(const struct flow *f)
{
    if (log_threshold < LOG_LEVEL_DEBUG)
        return;
    char src[64], dst[300];
    flow_sockaddr_format(&f->src, src, sizeof(src));
    flow_addr_format(&f->dst, dst, sizeof(dst));
    LOG_DEBUG("flow %llu: %s %s %s -> %s%s%s: policy=%s rule=\"%s%s%s\"",
              (unsigned long long)f->id, flow_network_name(f->network),
              flow_inbound_name(f->inbound), src, dst, f->sniffed ? " host=" : "",
              f->sniffed ? f->sniffed : "",
              f->policy_name ? f->policy_name : flow_policy_name(f->policy),
              f->rule ? f->rule : "-", f->why[0] ? " " : "", f->why);
}

void
flow_log_connect_failed(const struct flow *f, const char *why)
{
    char dst[300];
    flow_addr_format(&f->dst, dst, sizeof(dst));
    LOG_INFO("flow %llu: connect %s: %s", (unsigned long long)f->id, dst, why);
}

#define REFUSED_LOG_INTERVAL 10.0

void
flow_table_refused(struct flow_table *t, const char *what, size_t cap, double now)
{
    t->st.refused++;
    t->refused_unlogged++;
    if (t->refused_logged != 0 && now - t->refused_logged < REFUSED_LOG_INTERVAL &&
        strcmp(what, t->refused_what) == 0)
        return;
    LOG_WARN("flow: %s flows at the memory_limit's cap of %zu: %s (%llu since the last line, "
             "%llu in all; a larger memory_limit raises the cap)", what, cap,
             strcmp(what, "TCP") == 0 ? "a new one gets a RST"
                                      : "the least recently used one closes for a new one",
             (unsigned long long)t->refused_unlogged, (unsigned long long)t->st.refused);
    t->refused_logged = now;
    t->refused_what = what;
    t->refused_unlogged = 0;
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
    static const char *const names[] = {"socks", "http", "tun", "reverse"};
    return names[i];
}


void
flow_set_owner(struct flow *f, const struct flow_owner_ops *ops, void *arg)
{
    f->_owner = ops;
    f->_owner_arg = arg;
}

struct flow *
flow_table_find(const struct flow_table *t, uint64_t id)
{
    for (struct flow *f = t->head._next; f != &t->head; f = f->_next)
        if (f->id == id)
            return f;
    return NULL;
}

int
flow_table_close(struct flow_table *t, uint64_t id, const char *reason)
{
    struct flow *f = flow_table_find(t, id);
    if (f == NULL)
        return -1;
    if (f->_owner == NULL)
        return -2;
    f->_owner->close(f, f->_owner_arg, reason);
    return 0;
}

void
flow_table_each(const struct flow_table *t, void (*fn)(void *arg, const struct flow *f), void *arg)
{
    for (const struct flow *f = t->head._next; f != &t->head; f = f->_next)
        fn(arg, f);
}

void
flow_cursor_open(struct flow_table *t, struct flow_cursor *c)
{
    c->_at = t->head._next;
    c->_next = t->cursors;
    t->cursors = c;
}

const struct flow *
flow_cursor_next(struct flow_table *t, struct flow_cursor *c)
{
    if (c->_at == &t->head)
        return NULL;
    const struct flow *f = c->_at;
    c->_at = c->_at->_next;
    return f;
}

void
flow_cursor_close(struct flow_table *t, struct flow_cursor *c)
{
    for (struct flow_cursor **p = &t->cursors; *p != NULL; p = &(*p)->_next)
        if (*p == c) {
            *p = c->_next;
            return;
        }
}

size_t
flow_describe(const struct flow *f, double now, char *buf, size_t len)
{
    if (len == 0)
        return 0;
    size_t n = format_line(f, now, buf, len);
    const char *state = f->_owner ? f->_owner->state(f, f->_owner_arg) : "unowned";
    int k = snprintf(buf + n, len - n, " state=%s", state);
    n += k < 0 ? 0 : (size_t)k;
    return n < len ? n : len - 1;
}
