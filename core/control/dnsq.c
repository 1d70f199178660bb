#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_int.h"
#include "dns/msg.h"

/* GET /dns/query?name=example.com&type=AAAA through chute's resolver (the
 * engine's, injected as env.dns_query), answered in Clash's shape: Status
 * (the rcode), Question, TC/RD/RA/AD/CD, and Answer/Authority/Additional
 * records as {name, type, TTL, data}. A query that takes longer than
 * Clash's DNS timeout (5 s) is cancelled and answered as Clash's: 500
 * {"message":"context deadline exceeded"}. The client waits meanwhile. */

#define DEADLINE "context deadline exceeded"

struct control_dnsq {
    struct control_client *cl;
    void *q;       /* the resolver's handle, until it answers */
    ev_timer limit;
};

static struct dns_msg msg; /* 19 KB: one at a time, on the loop thread */

static void
stop(struct control_dnsq *d)
{
    struct control *c = d->cl->c;
    ev_timer_stop(c->env.loop, &d->limit);
    if (d->q != NULL && c->env.dns_cancel != NULL)
        c->env.dns_cancel(c->env.ud, d->q);
    d->cl->dnsq = NULL;
    free(d);
}

void
control_dns_cancel(struct control_client *cl)
{
    if (cl->dnsq != NULL)
        stop(cl->dnsq);
}

static void
finish(struct control_dnsq *d, int status, json_t *j)
{
    struct control_client *cl = d->cl;
    stop(d);
    control_reply_late(cl, status, j);
}

/* One section's records, [from, to) of msg.rr, OPT left out. */
static json_t *
records(const uint8_t *resp, size_t len, size_t from, size_t to)
{
    json_t *a = json_array();
    char data[2048];
    for (size_t i = from; i < to; i++) {
        const struct dns_rr *rr = &msg.rr[i];
        if (rr->type == DNS_TYPE_OPT)
            continue;
        if (dns_rr_text(resp, len, rr, data, sizeof(data)) < 0)
            snprintf(data, sizeof(data), "\\# %u (too long to show)", rr->rdlen);
        char name[DNS_NAME_MAX + 2];
        snprintf(name, sizeof(name), "%s.", rr->name);
        json_array_append_new(a, json_pack("{s:s,s:i,s:I,s:s}", "name", name, "type", rr->type,
                                           "TTL", (json_int_t)rr->ttl, "data", data));
    }
    return a;
}

static void
on_answer(void *arg, const uint8_t *resp, size_t len, const char *err)
{
    struct control_dnsq *d = arg;
    d->q = NULL; /* gone after this call */
    if (resp == NULL || dns_msg_parse(&msg, resp, len) != 0) {
        const char *why = resp == NULL ? err : "bad answer from the DNS server";
        /* The resolver gave up before our deadline: say it as Clash does. */
        if (why != NULL && strcmp(why, "timeout") == 0)
            why = DEADLINE;
        finish(d, 500, json_pack("{s:s}", "message", why != NULL ? why : "DNS failure"));
        return;
    }
    char qname[DNS_NAME_MAX + 2];
    snprintf(qname, sizeof(qname), "%s.", msg.qname);
    uint16_t f = msg.flags;
    json_t *j = json_pack("{s:i,s:[{s:s,s:i,s:i}],s:b,s:b,s:b,s:b,s:b}", "Status", DNS_RCODE(f),
                          "Question", "Name", qname, "Qtype", msg.qtype, "Qclass", msg.qclass,
                          "TC", (f & DNS_FLAG_TC) != 0, "RD", (f & DNS_FLAG_RD) != 0, "RA",
                          (f & DNS_FLAG_RA) != 0, "AD", (f & 0x0020) != 0, "CD", (f & 0x0010) != 0);
    /* Clash leaves a section out when it is empty. */
    size_t ends[3] = {msg.nan, msg.nan + msg.nns, msg.nrr};
    const char *keys[3] = {"Answer", "Authority", "Additional"};
    for (size_t s = 0, from = 0; s < 3; from = ends[s++]) {
        json_t *a = records(resp, len, from, ends[s]);
        if (json_array_size(a) > 0)
            json_object_set_new(j, keys[s], a);
        else
            json_decref(a);
    }
    finish(d, 200, j);
}

static void
on_limit(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct control_dnsq *d = (struct control_dnsq *)((char *)w - offsetof(struct control_dnsq, limit));
    finish(d, 500, json_pack("{s:s}", "message", DEADLINE));
}

void
control_dns(struct control_client *cl, struct mem_slice query)
{
    struct control *c = cl->c;
    char name[DNS_NAME_MAX + 2], type[16] = "A";
    int r = control_query_get(query, "name", name, sizeof(name));
    if (r <= 0 || name[0] == '\0') {
        control_reply_error(cl, 400, r < 0 ? "name: malformed or longer than 253 bytes"
                                           : "name: missing (GET /dns/query?name=example.com)");
        return;
    }
    if (control_query_get(query, "type", type, sizeof(type)) < 0 || type[0] == '\0')
        snprintf(type, sizeof(type), "A");
    int qtype = dns_type_parse(type);
    if (qtype < 0) {
        control_reply_error(cl, 400, "invalid query type");
        return;
    }
    size_t n = strlen(name);
    if (n > 1 && name[n - 1] == '.')
        name[n - 1] = '\0'; /* "example.com." as Clash takes it too */
    uint8_t q[DNS_HEADER_LEN + DNS_NAME_MAX + 2 + 4];
    int qlen = dns_build_query(q, sizeof(q), (uint16_t)random(), name, (uint16_t)qtype, 0);
    if (qlen < 0) {
        control_reply_error(cl, 400, "name: not a domain name (empty or over-long label)");
        return;
    }
    if (c->env.dns_query == NULL) {
        control_reply_error(cl, 500, "DNS section is disabled");
        return;
    }
    struct control_dnsq *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        control_reply_error(cl, 500, "out of memory");
        return;
    }
    d->cl = cl;
    d->q = c->env.dns_query(c->env.ud, q, (size_t)qlen, on_answer, d);
    if (d->q == NULL) {
        free(d);
        control_reply_error(cl, 500, "DNS section is disabled");
        return;
    }
    cl->dnsq = d;
    ev_timer_init(&d->limit, on_limit, c->dns_timeout, 0);
    ev_timer_start(c->env.loop, &d->limit);
}
