#include <errno.h>
#include <stddef.h>

#include "outbound/hs.h"

enum { WAIT_METHOD, WAIT_AUTH, WAIT_REPLY };

/* What one handshake covers: the whole of it, or a pool's two halves (a
 * connection greeted ahead, the request later on another call). */
enum mode { FULL, GREET, REQUEST };

struct socks5 {
    struct outbound_hs hs;
    int associate;         /* UDP ASSOCIATE: the caller wants the whole reply */
    enum mode mode;
    /* Built at the start, sent when the proxy asks for them. */
    size_t auth_len, req_len;
    uint8_t auth[OUTBOUND_SOCKS5_AUTH_MAX];
    uint8_t req[OUTBOUND_SOCKS5_REQUEST_MAX];
    /* A reply and whatever the destination sent right behind it. */
    uint8_t in[OUTBOUND_SOCKS5_REPLY_MAX + 256];
};

struct rep_error {
    int err;
    const char *why;
};

/* RFC 1928 §6 REP codes 1..8. */
static const struct rep_error rep_errors[] = {
    {ECONNABORTED, "socks5: general failure"},
    {EACCES, "socks5: not allowed by ruleset"},
    {ENETUNREACH, "socks5: network unreachable"},
    {EHOSTUNREACH, "socks5: host unreachable"},
    {ECONNREFUSED, "socks5: connection refused by proxy's target"},
    {ETIMEDOUT, "socks5: TTL expired"},
    {EPROTO, "socks5: command not supported"},
    {EPROTO, "socks5: address type not supported"},
};

static struct rep_error
rep_error(uint8_t rep)
{
    if (rep >= 1 && rep <= 8)
        return rep_errors[rep - 1];
    return (struct rep_error){EPROTO, "socks5: unknown reply code"};
}

/* The greeting (and auth) is over: a pool's GREET ends here, done. */
static int
greeted(struct socks5 *x)
{
    struct outbound_hs *h = &x->hs;

    if (x->mode == GREET) {
        outbound_hs_done(h, 0); /* bytes behind the reply: the caller refuses them */
        return 1;
    }
    h->state = WAIT_REPLY;
    return outbound_hs_send(h, x->req, x->req_len) < 0;
}

static int
on_method(struct socks5 *x)
{
    struct outbound_hs *h = &x->hs;
    uint8_t method = 0;
    int r = outbound_hs_socks5_parse_method(h->in, h->in_len, &method);

    if (r == 0)
        return 0;
    if (r < 0) {
        outbound_hs_fail(h, EPROTO, "socks5: malformed method reply");
        return 1;
    }
    outbound_hs_consume(h, (size_t)r);
    if (method == OUTBOUND_SOCKS5_NOAUTH)
        return greeted(x);
    if (method == OUTBOUND_SOCKS5_USERPASS && x->auth_len > 0) {
        h->state = WAIT_AUTH;
        return outbound_hs_send(h, x->auth, x->auth_len) < 0;
    }
    if (method == OUTBOUND_SOCKS5_NO_METHOD)
        outbound_hs_fail(h, EACCES, "socks5: no acceptable authentication method");
    else
        outbound_hs_fail(h, EPROTO, "socks5: proxy chose a method that was not offered");
    return 1;
}

static int
on_auth(struct socks5 *x)
{
    struct outbound_hs *h = &x->hs;
    uint8_t status = 0;
    int r = outbound_hs_socks5_parse_auth(h->in, h->in_len, &status);

    if (r == 0)
        return 0;
    if (r < 0) {
        outbound_hs_fail(h, EPROTO, "socks5: malformed authentication reply");
        return 1;
    }
    if (status != 0) {
        outbound_hs_fail(h, EACCES, "socks5: authentication failed");
        return 1;
    }
    outbound_hs_consume(h, (size_t)r);
    return greeted(x);
}

static int
on_reply(struct socks5 *x)
{
    struct outbound_hs *h = &x->hs;
    uint8_t rep;
    int r = outbound_hs_socks5_parse_reply(h->in, h->in_len, &rep);
    /* Once REP is known a refusal is named even if the rest of the reply
     * never comes: many servers close right after a failure code. (0xff:
     * not seen yet, or unassigned; both read as a protocol error.) */
    int known = rep != 0 && rep != 0xff;
    struct rep_error e = rep_error(rep);

    if (known) {
        h->eof_err = e.err;
        h->eof_why = e.why;
    }
    if (r == 0)
        return 0;
    if (r < 0) {
        if (known)
            outbound_hs_fail(h, e.err, e.why);
        else
            outbound_hs_fail(h, EPROTO, "socks5: malformed reply");
        return 1;
    }
    if (rep == 0)
        outbound_hs_done(h, ((struct socks5 *)h)->associate ? 0 : (size_t)r);
    else
        outbound_hs_fail(h, e.err, e.why);
    return 1;
}

static int
step(struct outbound_hs *h)
{
    struct socks5 *x = (struct socks5 *)h;

    /* A proxy may send its replies back to back; take each in turn. */
    for (;;) {
        int state = h->state, r;
        switch (state) {
        case WAIT_METHOD:
            r = on_method(x);
            break;
        case WAIT_AUTH:
            r = on_auth(x);
            break;
        default:
            return on_reply(x);
        }
        if (r != 0 || h->state == state)
            return r;
    }
}

static const struct outbound_hs_proto socks5_proto = {
    .step = step,
    .eof_why = "socks5: proxy closed the connection",
    .io_why = "socks5: connection to the proxy failed",
};

static struct outbound_hs *
start(struct io_stream *s, const struct outbound_proxy *p, const struct flow_addr *dst,
      int associate, enum mode mode, outbound_hs_cb cb, void *arg);

struct outbound_hs *
outbound_socks5_connect(struct io_stream *s, const struct outbound_proxy *p,
                        const struct flow_addr *dst, outbound_hs_cb cb, void *arg)
{
    return start(s, p, dst, 0, FULL, cb, arg);
}

struct outbound_hs *
outbound_socks5_greet(struct io_stream *s, const struct outbound_proxy *p, outbound_hs_cb cb,
                      void *arg)
{
    static const struct flow_addr none = {.kind = FLOW_ADDR_IP4};
    return start(s, p, &none, 0, GREET, cb, arg);
}

struct outbound_hs *
outbound_socks5_request(struct io_stream *s, const struct outbound_proxy *p,
                        const struct flow_addr *dst, outbound_hs_cb cb, void *arg)
{
    return start(s, p, dst, 0, REQUEST, cb, arg);
}

struct outbound_hs *
outbound_socks5_associate(struct io_stream *s, const struct outbound_proxy *p,
                          outbound_hs_cb cb, void *arg)
{
    /* The client's address is not known before it sends: 0.0.0.0:0 says so. */
    static const struct flow_addr any = {.kind = FLOW_ADDR_IP4};
    return start(s, p, &any, 1, FULL, cb, arg);
}

static struct outbound_hs *
start(struct io_stream *s, const struct outbound_proxy *p, const struct flow_addr *dst,
      int associate, enum mode mode, outbound_hs_cb cb, void *arg)
{
    struct outbound_hs *h = outbound_hs_new(s, sizeof(struct socks5), &socks5_proto,
                                            offsetof(struct socks5, in),
                                            OUTBOUND_SOCKS5_REPLY_MAX + 256, cb, arg);
    struct socks5 *x = (struct socks5 *)h;
    uint8_t greeting[4];
    int with_auth = p->user[0] != '\0', n;

    if (h == NULL)
        return NULL;
    h->state = WAIT_METHOD;
    if (with_auth) {
        n = outbound_hs_socks5_auth(x->auth, sizeof(x->auth), p->user, p->pass);
        if (n < 0) {
            outbound_hs_fail(h, EINVAL, "socks5: user or password longer than 255 bytes");
            return outbound_hs_started(h);
        }
        x->auth_len = (size_t)n;
    }
    n = outbound_hs_socks5_request(x->req, sizeof(x->req), dst);
    if (n < 0) {
        outbound_hs_fail(h, EINVAL, "socks5: destination cannot be encoded");
        return outbound_hs_started(h);
    }
    x->req_len = (size_t)n;
    x->associate = associate;
    x->mode = mode;
    if (associate)
        x->req[1] = 3; /* CMD: UDP ASSOCIATE */
    if (mode == REQUEST) {
        h->state = WAIT_REPLY;
        outbound_hs_send(h, x->req, x->req_len);
        return outbound_hs_started(h);
    }
    outbound_hs_send(h, greeting, outbound_hs_socks5_greeting(greeting, with_auth));
    return outbound_hs_started(h);
}
