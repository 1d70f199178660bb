#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "http/http.h"
#include "mitm/h2_int.h"

/* An h2 message as the hooks see an HTTP/1.1 one: the header block is
 * written out as an HTTP/1.1 head and read back with chute's own parser
 * and forwarding rules, so every hook (Lua, Surge modules) runs on h2
 * unchanged; the edited fields then go back into nv pairs. */

int
h2_fields_add(struct h2_fields *f, struct mem_arena *a, const uint8_t *name, size_t nlen,
              const uint8_t *value, size_t vlen)
{
    if (f->n >= H2_MAX_FIELDS || f->bytes + nlen + vlen + 32 > H2_MAX_HEADER_LIST)
        return -1;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        nghttp2_nv *v = mem_arena_alloc(a, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        if (f->n > 0)
            memcpy(v, f->v, f->n * sizeof(*v));
        f->v = v;
        f->cap = cap;
    }
    uint8_t *n = mem_arena_memdup(a, name, nlen);
    uint8_t *val = mem_arena_memdup(a, value, vlen);
    if (n == NULL || val == NULL)
        return -1;
    f->v[f->n++] = (nghttp2_nv){n, val, nlen, vlen, NGHTTP2_NV_FLAG_NONE};
    f->bytes += nlen + vlen + 32; /* RFC 9113's accounting */
    return 0;
}

static int
name_is(const nghttp2_nv *nv, const char *lit)
{
    size_t n = strlen(lit);
    return nv->namelen == n && strncasecmp((const char *)nv->name, lit, n) == 0;
}

int
h2_msg_conn_specific(const uint8_t *name, size_t len)
{
    static const char *const drop[] = {"connection", "keep-alive", "proxy-connection",
                                       "transfer-encoding", "upgrade", "te", "host"};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        if (strlen(drop[i]) == len && strncasecmp((const char *)name, drop[i], len) == 0)
            return 1;
    return 0;
}

/* A growing text in the arena: the HTTP/1.1 head being written. */
struct text {
    char *p;
    size_t len, cap;
    struct mem_arena *a;
    int oom;
};

static void
put(struct text *t, const void *s, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 512;
        while (cap < t->len + n)
            cap *= 2;
        char *p = mem_arena_alloc(t->a, cap);
        if (p == NULL) {
            t->oom = 1;
            return;
        }
        if (t->len > 0)
            memcpy(p, t->p, t->len);
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
}

static void
puts_(struct text *t, const char *s)
{
    put(t, s, strlen(s));
}

static void
put_field(struct text *t, const nghttp2_nv *nv)
{
    put(t, nv->name, nv->namelen);
    put(t, ": ", 2);
    put(t, nv->value, nv->valuelen);
    put(t, "\r\n", 2);
}

/* A field value fit for an HTTP/1.1 head (nghttp2 checked the peer's; a
 * hook's edits were checked by http_fwd_field_*). */
static int
clean(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == '\r' || p[i] == '\n' || p[i] == 0)
            return 0;
    return 1;
}

int
h2_msg_request(struct http_fwd_req *req, struct mem_arena *a, const struct h2_fields *in,
               struct mem_slice host, uint16_t port, int has_body)
{
    const nghttp2_nv *method = NULL, *path = NULL, *auth = NULL, *scheme = NULL;
    int te_trailers = 0;
    memset(req, 0, sizeof(*req));
    for (size_t i = 0; i < in->n; i++) {
        const nghttp2_nv *nv = &in->v[i];
        if (!clean(nv->name, nv->namelen) || !clean(nv->value, nv->valuelen))
            goto bad;
        if (nv->namelen > 0 && nv->name[0] == ':') {
            if (name_is(nv, ":method"))
                method = nv;
            else if (name_is(nv, ":path"))
                path = nv;
            else if (name_is(nv, ":authority"))
                auth = nv;
            else if (name_is(nv, ":scheme"))
                scheme = nv;
            else
                goto bad; /* :protocol (extended CONNECT) and anything else */
        }
    }
    if (method != NULL && method->valuelen == 7 && memcmp(method->value, "CONNECT", 7) == 0) {
        req->refused = 405; /* chute tunnels nothing inside a MITM'd stream */
        return 0;
    }
    if (method == NULL || path == NULL || scheme == NULL || path->valuelen == 0 ||
        method->valuelen == 0)
        goto bad;
    struct text t = {.a = a};
    put(&t, method->value, method->valuelen);
    put(&t, " ", 1);
    put(&t, path->value, path->valuelen);
    puts_(&t, " HTTP/1.1\r\n");
    if (auth != NULL) {
        puts_(&t, "Host: ");
        put(&t, auth->value, auth->valuelen);
        puts_(&t, "\r\n");
    }
    for (size_t i = 0; i < in->n; i++) {
        const nghttp2_nv *nv = &in->v[i];
        if (nv->namelen > 0 && nv->name[0] == ':')
            continue;
        if (auth != NULL && name_is(nv, "host"))
            continue; /* :authority wins (RFC 9113 §8.3.1) */
        if (name_is(nv, "te")) {
            te_trailers = nv->valuelen == 8 && strncasecmp((const char *)nv->value, "trailers", 8) == 0;
            continue;
        }
        if (h2_msg_conn_specific(nv->name, nv->namelen) && !name_is(nv, "host"))
            goto bad; /* RFC 9113 §8.2.2: malformed */
        put_field(&t, nv);
    }
    puts_(&t, "\r\n");
    if (t.oom)
        return -1;
    struct http_request parsed;
    int n = http_h1_parse_request(t.p, t.len, &parsed);
    if (n == HTTP_ERR_TOO_LARGE) {
        req->refused = 431;
        return 0;
    }
    if (n <= 0)
        goto bad;
    struct http_fwd_opts o = {.form = HTTP_FWD_ORIGIN, .default_host = host,
                              .default_port = port};
    if (http_fwd_request_init(req, a, &o, t.p, (size_t)n, &parsed) != 0)
        return -1;
    if (!req->refused && te_trailers &&
        http_fwd_field_add(&req->fields, MEM_SLICE_LIT("te"), MEM_SLICE_LIT("trailers")) != 0)
        return -1;
    (void)has_body;
    return 0;
bad:
    memset(req, 0, sizeof(*req));
    req->refused = 400;
    return 0;
}

/* Names go to h2 peers in lower case (a hook may have written "X-Chute"). */
static int
nv_push(struct mem_arena *a, nghttp2_nv *v, size_t *n, const char *name, size_t nlen,
        const char *value, size_t vlen)
{
    uint8_t *nm = mem_arena_alloc(a, nlen + 1);
    if (nm == NULL)
        return -1;
    for (size_t i = 0; i < nlen; i++)
        nm[i] = (uint8_t)tolower((unsigned char)name[i]);
    v[(*n)++] = (nghttp2_nv){nm, (uint8_t *)value, nlen, vlen, NGHTTP2_NV_FLAG_NONE};
    return 0;
}

static int
push_fields(struct mem_arena *a, nghttp2_nv *v, size_t *n, const struct http_fwd_fields *f,
            int keep_te)
{
    for (size_t i = 0; i < f->n; i++) {
        const struct http_header *h = &f->v[i];
        if (h->name.len == 0)
            continue;
        if (h2_msg_conn_specific((const uint8_t *)h->name.ptr, h->name.len) &&
            !(keep_te && mem_slice_ieq(h->name, "te") && mem_slice_ieq(h->value, "trailers")))
            continue;
        if (nv_push(a, v, n, h->name.ptr, h->name.len, h->value.ptr, h->value.len) != 0)
            return -1;
    }
    return 0;
}

int
h2_msg_request_nv(const struct http_fwd_req *req, struct mem_arena *a, nghttp2_nv **out,
                  size_t *n)
{
    nghttp2_nv *v = mem_arena_alloc(a, (req->fields.n + 4) * sizeof(*v));
    if (v == NULL)
        return -1;
    *n = 0;
    const struct http_header *host = http_fwd_field_get(&req->fields, "host");
    struct mem_slice auth = host != NULL ? host->value : req->host;
    if (nv_push(a, v, n, ":method", 7, req->method.ptr, req->method.len) != 0 ||
        nv_push(a, v, n, ":scheme", 7, "https", 5) != 0 ||
        nv_push(a, v, n, ":authority", 10, auth.ptr, auth.len) != 0 ||
        nv_push(a, v, n, ":path", 5, req->path.ptr, req->path.len) != 0 ||
        push_fields(a, v, n, &req->fields, 1) != 0)
        return -1;
    *out = v;
    return 0;
}

int
h2_msg_response(struct http_fwd_resp *resp, struct mem_arena *a, const struct http_fwd_req *req,
                const struct h2_fields *in)
{
    const nghttp2_nv *status = NULL;
    for (size_t i = 0; i < in->n; i++)
        if (name_is(&in->v[i], ":status"))
            status = &in->v[i];
    if (status == NULL || status->valuelen != 3)
        return HTTP_ERR_BAD;
    struct text t = {.a = a};
    puts_(&t, "HTTP/1.1 ");
    put(&t, status->value, 3);
    puts_(&t, " \r\n");
    for (size_t i = 0; i < in->n; i++) {
        const nghttp2_nv *nv = &in->v[i];
        if (nv->namelen > 0 && nv->name[0] == ':')
            continue;
        if (!clean(nv->name, nv->namelen) || !clean(nv->value, nv->valuelen))
            return HTTP_ERR_BAD;
        if (h2_msg_conn_specific(nv->name, nv->namelen))
            continue;
        put_field(&t, nv);
    }
    puts_(&t, "\r\n");
    if (t.oom)
        return -1;
    struct http_response parsed;
    int n = http_h1_parse_response(t.p, t.len, &parsed);
    if (n <= 0)
        return HTTP_ERR_BAD;
    int rc = http_fwd_response_init(resp, a, req, t.p, (size_t)n, &parsed, 1);
    return rc;
}

int
h2_msg_response_nv(const struct http_fwd_resp *resp, struct mem_arena *a, nghttp2_nv **out,
                   size_t *n)
{
    nghttp2_nv *v = mem_arena_alloc(a, (resp->fields.n + 1) * sizeof(*v));
    char *st = mem_arena_alloc(a, 8);
    if (v == NULL || st == NULL)
        return -1;
    snprintf(st, 8, "%03d", resp->status % 1000);
    *n = 0;
    if (nv_push(a, v, n, ":status", 7, st, 3) != 0 ||
        push_fields(a, v, n, &resp->fields, 0) != 0)
        return -1;
    *out = v;
    return 0;
}

int
h2_msg_reply_nv(struct mem_arena *a, int status, const char *extra, size_t body_len,
                nghttp2_nv **out, size_t *n)
{
    size_t lines = 0;
    for (const char *p = extra; p != NULL && *p; p++)
        lines += *p == '\n';
    nghttp2_nv *v = mem_arena_alloc(a, (lines + 3) * sizeof(*v));
    char *st = mem_arena_alloc(a, 8), *cl = mem_arena_alloc(a, 24);
    if (v == NULL || st == NULL || cl == NULL)
        return -1;
    snprintf(st, 8, "%03d", status % 1000);
    *n = 0;
    if (nv_push(a, v, n, ":status", 7, st, 3) != 0)
        return -1;
    for (const char *p = extra; p != NULL && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        size_t ll = len > 0 && p[len - 1] == '\r' ? len - 1 : len;
        if (colon != NULL) {
            const char *val = colon + 1;
            while (val < p + ll && (*val == ' ' || *val == '\t'))
                val++;
            if (!h2_msg_conn_specific((const uint8_t *)p, (size_t)(colon - p)) &&
                nv_push(a, v, n, p, (size_t)(colon - p), val, (size_t)(p + ll - val)) != 0)
                return -1;
        }
        p = eol != NULL ? eol + 1 : p + len;
    }
    if (status >= 200 && status != 204 && status != 304) {
        int k = snprintf(cl, 24, "%zu", body_len);
        if (nv_push(a, v, n, "content-length", 14, cl, (size_t)k) != 0)
            return -1;
    }
    *out = v;
    return 0;
}
