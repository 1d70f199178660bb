#include <errno.h>
#include <stddef.h>

#include "outbound/hs.h"

struct http {
    struct outbound_hs hs;
    uint8_t in[OUTBOUND_HTTP_HEAD_MAX];
};

/* A static text per refusing status, so |why| needs no storage. */
#define ANSWERED(n) "http: proxy answered " #n
#define TEN(h, t)                                                                                  \
    ANSWERED(h##t##0), ANSWERED(h##t##1), ANSWERED(h##t##2), ANSWERED(h##t##3),                    \
        ANSWERED(h##t##4), ANSWERED(h##t##5), ANSWERED(h##t##6), ANSWERED(h##t##7),                \
        ANSWERED(h##t##8), ANSWERED(h##t##9)
#define HUNDRED(h)                                                                                 \
    TEN(h, 0), TEN(h, 1), TEN(h, 2), TEN(h, 3), TEN(h, 4), TEN(h, 5), TEN(h, 6), TEN(h, 7),        \
        TEN(h, 8), TEN(h, 9)

static const char *const answered[] = {HUNDRED(3), HUNDRED(4), HUNDRED(5)};

static int
step(struct outbound_hs *h)
{
    for (;;) {
        int status = 0;
        int r = outbound_hs_http_parse_head(h->in, h->in_len, &status);

        if (r == 0)
            return 0;
        if (r < 0) {
            outbound_hs_fail(h, EPROTO, "http: malformed proxy response");
            return 1;
        }
        if (status < 200) {
            /* An interim response: the real one follows. */
            outbound_hs_consume(h, (size_t)r);
            continue;
        }
        if (status < 300)
            outbound_hs_done(h, (size_t)r);
        else if (status == 407)
            outbound_hs_fail(h, EACCES, "http: 407 proxy authentication required");
        else if (status == 401) /* tinyproxy's answer to wrong credentials */
            outbound_hs_fail(h, EACCES, "http: 401 proxy authentication failed");
        else
            outbound_hs_fail(h, ECONNREFUSED, answered[status - 300]);
        return 1;
    }
}

static const struct outbound_hs_proto http_proto = {
    .step = step,
    .eof_why = "http: proxy closed the connection",
    .io_why = "http: connection to the proxy failed",
};

struct outbound_hs *
outbound_http_connect(struct io_stream *s, const struct outbound_proxy *p,
                      const struct flow_addr *dst, outbound_hs_cb cb, void *arg)
{
    struct outbound_hs *h =
        outbound_hs_new(s, sizeof(struct http), &http_proto, offsetof(struct http, in),
                        OUTBOUND_HTTP_HEAD_MAX, cb, arg);
    char req[OUTBOUND_HTTP_REQUEST_MAX];
    int n;

    if (h == NULL)
        return NULL;
    n = outbound_hs_http_request(req, sizeof(req), dst, p->user, p->pass);
    if (n < 0)
        outbound_hs_fail(h, EINVAL, "http: destination cannot be sent in a request line");
    else
        outbound_hs_send(h, req, (size_t)n);
    return outbound_hs_started(h);
}
