#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/h2_int.h"
#include "mitm/mitm_int.h"

const struct log_counter mitm_counters[] = {
#define X(field, key) LOG_COUNTER(struct mitm_stats, field, key)
    MITM_STATS(X)
#undef X
    LOG_COUNTER_END};

/* The name the flow is known by: the client's (fake-IP, CONNECT, SOCKS5),
 * else the SNI it sent, else its address as text (a host list may name
 * IPs). */
const char *
mitm_flow_host(const struct flow *f, char *buf, size_t len)
{
    if (f->dst.kind == FLOW_ADDR_NAME)
        return f->dst.name;
    if (f->sniffed != NULL)
        return f->sniffed;
    flow_addr_host(&f->dst, buf, len);
    return buf;
}

int
mitm_flow_to(struct flow *out, const struct flow *f, const char *host, uint16_t port)
{
    char buf[64];
    *out = *f;
    out->sniffed = NULL; /* the flow's own: it may end before |out| */
    out->_owner = NULL;
    out->_prev = out->_next = NULL;
    if (strcasecmp(host, mitm_flow_host(f, buf, sizeof(buf))) == 0 && port == f->dst.port)
        return 0;
    return flow_addr_from_host(&out->dst, host, strlen(host), port);
}

static int
live(const struct mitm_bypass *b, double now)
{
    return b->until > now || (b->silent > 0 && now - b->seen < 600);
}

static struct mitm_bypass *
mark_find(struct mitm *m, const char *host, double now)
{
    for (size_t i = 0; i < MITM_BYPASS_MAX; i++)
        if (live(&m->bypass[i], now) && strcasecmp(m->bypass[i].host, host) == 0)
            return &m->bypass[i];
    return NULL;
}

static struct mitm_bypass *
bypass_find(struct mitm *m, const char *host, double now)
{
    struct mitm_bypass *b = mark_find(m, host, now);
    return b != NULL && b->until > now ? b : NULL;
}

/* |host|'s entry, made when missing (a free slot, else the oldest goes). */
static struct mitm_bypass *
mark_get(struct mitm *m, const char *host, double now)
{
    struct mitm_bypass *b = mark_find(m, host, now);
    for (size_t i = 0; b == NULL && i < MITM_BYPASS_MAX; i++)
        if (!live(&m->bypass[i], now)) {
            b = &m->bypass[i];
            memset(b, 0, sizeof(*b));
        }
    if (b == NULL) {
        b = &m->bypass[m->bypass_next];
        m->bypass_next = (m->bypass_next + 1) % MITM_BYPASS_MAX;
        memset(b, 0, sizeof(*b));
    }
    snprintf(b->host, sizeof(b->host), "%s", host);
    b->seen = now;
    return b;
}

int
mitm_host_silent(struct mitm *m, const char *host)
{
    struct mitm_bypass *b = mark_get(m, host, io_mono_now());
    return ++b->silent >= MITM_SILENT_REFUSALS;
}

void
mitm_host_served(struct mitm *m, const char *host)
{
    struct mitm_bypass *b = mark_find(m, host, io_mono_now());
    if (b != NULL)
        b->silent = 0;
}

void
mitm_bypass_add(struct mitm *m, const char *host)
{
    double now = io_mono_now();
    struct mitm_bypass *b = mark_get(m, host, now);
    b->silent = 0;
    b->until = now + (m->o.bypass_seconds > 0 ? m->o.bypass_seconds : 300);
    LOG_INFO("mitm: %s passes through uninspected for %.0f s (auto_bypass)", host,
             b->until - now);
}

static int
wants(void *ud, const struct flow *f)
{
    struct mitm *m = ud;
    char buf[64];
    if (f->network != FLOW_TCP || f->mitm < 0 || f->policy == FLOW_POLICY_REJECT)
        return 0;
    if (f->mitm == 0 && (m->o.hosts == NULL || mitm_hosts_count(m->o.hosts) == 0))
        return 0;
    const char *host = mitm_flow_host(f, buf, sizeof(buf));
    if (host[0] == 0)
        return 0;
    if (f->mitm == 0 && !mitm_hosts_match(m->o.hosts, host, strlen(host), f->dst.port))
        return 0;
    if (bypass_find(m, host, io_mono_now()) != NULL) {
        m->st.bypassed++;
        return 0;
    }
    if (m->o.mint == NULL || m->o.trust == NULL) {
        LOG_WARN("mitm: %s is on the MITM list but no CA is loaded: passed through", host);
        return 0;
    }
    return 1;
}

struct mitm *
mitm_new(const struct flow_env *env)
{
    struct mitm *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->env = env;
    m->h2mem.max = MITM_H2_MAX_BUFFERED;
    m->icpt = (struct flow_intercept){.wants = wants, .start = mitm_sess_start,
                                      .stop = mitm_sess_stop, .ud = m};
    return m;
}

void
mitm_free(struct mitm *m)
{
    if (m == NULL)
        return;
    mitm_h2_pool_free(m->h2pool);
    mitm_h1_pool_free(m);
    free(m);
}

void
mitm_configure(struct mitm *m, const struct mitm_opts *o)
{
    m->o = *o;
    m->h2mem.max = o->h2_max_buffered ? o->h2_max_buffered : MITM_H2_MAX_BUFFERED;
    /* A reload may give a policy id another meaning: idle connections
     * opened through the old one go. */
    mitm_h1_pool_free(m);
}

const struct flow_intercept *
mitm_intercept(struct mitm *m)
{
    return &m->icpt;
}

int
mitm_blocks_quic(struct mitm *m, const struct flow *f)
{
    char buf[64];
    if (!m->o.block_quic || f->network != FLOW_UDP || f->dst.port != 443 || f->mitm < 0 ||
        m->o.hosts == NULL)
        return 0;
    const char *host = mitm_flow_host(f, buf, sizeof(buf));
    if (f->mitm == 0 && !mitm_hosts_match(m->o.hosts, host, strlen(host), 443))
        return 0;
    m->st.quic_blocked++;
    return 1;
}

int
mitm_port_used(const struct mitm *m, uint16_t port)
{
    return mitm_hosts_port_used(m->o.hosts, port);
}

void
mitm_stats(const struct mitm *m, struct mitm_stats *out)
{
    *out = m->st;
    out->h1_up_idle = mitm_h1_idle_count(m);
    out->h2_buffered = m->h2mem.held;
    out->h2_buffered_peak = m->h2mem.peak;
    out->h2_buffer_alloc = m->h2mem.alloc;
    out->h2_narrowed = m->h2mem.narrowed;
}
