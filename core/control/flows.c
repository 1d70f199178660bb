#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/control_int.h"
#include "flow/flow.h"
#include "io/io.h"

/* GET /connections: one Clash connection object per live flow, written
 * with snprintf (10,000 flows in well under 50 ms) and sent in slices:
 * at most LIST_SLICE bytes are queued at a time, whatever the count. */

#define LIST_SLICE 65536
#define ENTRY_MAX 2048

/* |s| as the inside of a JSON string: control bytes, quotes and
 * backslashes escaped, bytes >= 0x80 as \u00XX (no UTF-8 is assumed of a
 * sniffed name). */
static size_t
json_esc(char *out, size_t len, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (; *s != '\0' && o + 7 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20 || ch >= 0x80) {
            memcpy(out + o, "\\u00", 4);
            out[o + 4] = hex[ch >> 4];
            out[o + 5] = hex[ch & 15];
            o += 6;
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o] = '\0';
    return o;
}

static void
sock_ip_port(const struct sockaddr_storage *ss, char *ip, size_t len, unsigned *port)
{
    ip[0] = '\0';
    *port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, (socklen_t)len);
        *port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, (socklen_t)len);
        *port = ntohs(a->sin6_port);
    }
}

static const char *const inbound_types[] = {"SOCKS5", "HTTP", "Tun"};

/* One connection object; the length, or 0 if it did not fit. */
static size_t
flow_entry(const struct flow *f, char *buf, size_t len)
{
    char sip[64], lip[64], dip[64] = "", host[2 * FLOW_NAME_MAX + 8], rule[128], payload[160];
    char pol[160], via[160];
    unsigned sport, lport;
    sock_ip_port(&f->src, sip, sizeof(sip), &sport);
    sock_ip_port(&f->local, lip, sizeof(lip), &lport);
    if (f->dst.kind == FLOW_ADDR_IP4 || f->dst.kind == FLOW_ADDR_IP6)
        flow_addr_host(&f->dst, dip, sizeof(dip));
    const char *name = f->dst.kind == FLOW_ADDR_NAME ? f->dst.name : f->sniffed ? f->sniffed : "";
    json_esc(host, sizeof(host), name);
    json_esc(rule, sizeof(rule), f->rule != NULL ? f->rule : "");
    json_esc(payload, sizeof(payload), f->why);
    json_esc(pol, sizeof(pol), f->policy_name != NULL ? f->policy_name : flow_policy_name(f->policy));
    via[0] = '\0';
    if (f->via != NULL && f->policy_name != NULL && strcmp(f->via, f->policy_name) != 0) {
        size_t k = json_esc(via + 1, sizeof(via) - 4, f->via);
        via[0] = '"';
        memcpy(via + 1 + k, "\",", 3);
    }
    /* started is monotonic: the date is now's less the flow's age. */
    double wall = ev_time() - (io_mono_now() - f->started);
    time_t secs = (time_t)wall;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char start[64];
    snprintf(start, sizeof(start), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)((wall - (double)secs) * 1000));
    int n = snprintf(buf, len,
                     "{\"id\":\"%llu\",\"metadata\":{\"network\":\"%s\",\"type\":\"%s\","
                     "\"sourceIP\":\"%s\",\"destinationIP\":\"%s\",\"sourcePort\":\"%u\","
                     "\"destinationPort\":\"%u\",\"inboundIP\":\"%s\",\"inboundPort\":\"%u\","
                     "\"host\":\"%s\",\"dnsMode\":\"normal\",\"processPath\":\"\","
                     "\"specialProxy\":\"\"},\"upload\":%llu,\"download\":%llu,\"start\":\"%s\","
                     "\"chains\":[%s\"%s\"],\"rule\":\"%s\",\"rulePayload\":\"%s\"}",
                     (unsigned long long)f->id, f->network == FLOW_UDP ? "udp" : "tcp",
                     inbound_types[f->inbound % 3], sip, dip, sport, (unsigned)f->dst.port, lip,
                     lport, host, (unsigned long long)f->bytes_up,
                     (unsigned long long)f->bytes_down, start, via, pol, rule, payload);
    return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

/* The WebSocket message's walk: flows until the buffer is full. */
struct slice {
    char *buf;
    size_t len, cap;
    int first, full;
};

static void
add_flow(void *arg, const struct flow *f)
{
    struct slice *s = arg;
    if (s->full || s->cap - s->len < ENTRY_MAX + 1) {
        s->full = 1;
        return;
    }
    if (!s->first)
        s->buf[s->len++] = ',';
    size_t n = flow_entry(f, s->buf + s->len, s->cap - s->len);
    if (n == 0) {
        if (!s->first)
            s->len--;
        return;
    }
    s->len += n;
    s->first = 0;
}

static uint64_t
rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0, rss = 0;
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * 4096;
}

uint64_t
control_memory_inuse(void)
{
    return rss_bytes();
}

static size_t
list_head(struct control *c, char *buf, size_t len)
{
    struct flow_table_stats st;
    flow_table_stats(c->env.flows, &st);
    int n = snprintf(buf, len, "{\"downloadTotal\":%llu,\"uploadTotal\":%llu,\"memory\":%llu,"
                               "\"connections\":[",
                     (unsigned long long)st.bytes_down, (unsigned long long)st.bytes_up,
                     (unsigned long long)rss_bytes());
    return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

void
control_list_start(struct control_client *cl)
{
    char head[256];
    size_t n = list_head(cl->c, head, sizeof(head));
    control_stream_head(cl, "application/json; charset=utf-8");
    cl->mode = MODE_HTTP; /* a chunked answer, then the next request */
    if (control_stream_send(cl, head, n) != 0)
        return;
    flow_cursor_open(cl->c->env.flows, &cl->cursor);
    cl->list_first = 1;
    cl->listing = 1;
    control_list_more(cl);
}

void
control_list_end(struct control_client *cl)
{
    if (cl->listing)
        flow_cursor_close(cl->c->env.flows, &cl->cursor);
    cl->listing = 0;
}

void
control_list_more(struct control_client *cl)
{
    struct flow_table *t = cl->c->env.flows;
    struct slice s = {.cap = LIST_SLICE, .first = cl->list_first};
    s.buf = malloc(s.cap);
    if (s.buf == NULL) {
        control_client_kill(cl);
        return;
    }
    const struct flow *f = NULL;
    while (s.cap - s.len >= ENTRY_MAX + 1 && (f = flow_cursor_next(t, &cl->cursor)) != NULL)
        add_flow(&s, f);
    cl->list_first = s.first;
    if (s.len > 0 && control_stream_send(cl, s.buf, s.len) != 0) {
        free(s.buf);
        return;
    }
    free(s.buf);
    if (f != NULL)
        return; /* the slice is full: the flush asks for the next one */
    control_list_end(cl);
    if (control_stream_send(cl, "]}", 2) == 0)
        control_out_append(cl, "0\r\n\r\n", 5);
}

/* The whole object as one message, for WebSocket clients: at most
 * |cap| bytes of flows (the oldest first), so one message stays bounded. */
char *
control_list_message(struct control *c, size_t cap, size_t *len)
{
    struct slice s = {.cap = cap, .first = 1};
    s.buf = malloc(cap + 8);
    if (s.buf == NULL)
        return NULL;
    s.len = list_head(c, s.buf, cap);
    flow_table_each(c->env.flows, add_flow, &s);
    memcpy(s.buf + s.len, "]}", 3);
    *len = s.len + 2;
    return s.buf;
}
