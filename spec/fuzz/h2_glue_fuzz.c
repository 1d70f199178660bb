/* libFuzzer target for chute's HTTP/2 glue in core/mitm/ (h2_io.c,
 * h2_server.c, h2_upstream.c, h2_h1.c, h2_body.c): nghttp2 in both roles
 * at once, over socketpairs and a libev loop, no network. The input plays
 * the client (its bytes go into chute's server session), an h2 origin
 * (into the client session of the shared upstream pool, adopted before the
 * first step) and two HTTP/1.1-only origins (parked in the h1 pool, for the
 * h2 -> h1 translation); hooks edit, answer, reject, rewrite and read
 * bodies, so every path of the glue can run. Opening a new upstream fails
 * from the loop (a policy with no proxy behind it): those streams get 502.
 *
 * Input: byte 0 picks the options (below); then steps, a tag byte each:
 *   bits 0-1  who: 0 the client, 1 the h2 origin, 2 and 3 the h1 origins
 *   bits 2-3  0: raw bytes (a length byte, the bytes)
 *             1: a frame (type, flags, stream id, a length byte, payload)
 *             2: an h2 peer's HEADERS, HPACK-encoded by the harness (flags,
 *                stream id, a field count, then fields as in h2_msg_fuzz);
 *                an h1 origin: n KiB of body bytes (a count byte)
 *             3: (bits 4-5) 0: DATA, n frames of 16 KiB (stream id, flags,
 *                count), 1: half-close, 2: close, 3: stop/start reading
 *   bits 6-7  loop rounds after the step, minus one
 *
 * Invariants, checked with abort():
 *  - what chute sends either h2 peer is valid h2: whole frames of at most
 *    16 KiB, the client preface first upstream, header blocks that HPACK
 *    decodes (with the state the bytes before built), lower-case names,
 *    clean values, no connection-specific field upstream, no PUSH_PROMISE;
 *  - what each h1 origin receives parses as HTTP/1.1 requests with valid
 *    framing, no more of them than the requests the hooks saw (nothing
 *    smuggled past the translation), a cut one only at the end;
 *  - the session's end is told at most once, and everything is freed
 *    (LeakSanitizer) when the input ends. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "http/http.h"
#include "io/io.h"
#include "log/log.h"
#include "mitm/h2_int.h"
#include "outbound/outbound.h"

#define HOST "o.test"
#define OPT_H2 0x01      /* the flow's origin speaks h2 (else the h1 ones) */
#define OPT_HOOKS 0x02   /* hooks want every request and response */
#define OPT_REQ_BODY 0x04 /* ... and request bodies (small, or over a window) */
#define OPT_RESP_BODY 0x08
#define OPT_BIG_MAX 0x10 /* body max over a stream window */
#define OPT_NO_MAGIC 0x20 /* the client's preface is the input's, not the harness's */
#define OPT_EDITS 0x40   /* the hooks edit, answer, reject, rewrite in turn */

/* One peer's end and a checker of what chute sent it. */
struct peer {
    int fd;
    int paused;
    int h2, upstream; /* what is checked: h2 frames (the origin's: preface first), or h1 */
    char *in;         /* bytes not checked yet */
    size_t len;
    size_t magic_left;
    nghttp2_hd_inflater *inf;
    nghttp2_hd_deflater *def; /* the harness's HEADERS toward chute */
    uint8_t *block;           /* a header block across CONTINUATION */
    size_t block_len;
    int in_block;             /* a HEADERS without END_HEADERS came */
    int h1_cut;               /* an h1 request ended mid-way: nothing may follow */
};

#define NPEERS 4
static struct {
    struct ev_loop *loop;
    struct flow_opts fo;
    struct outbound_env out;
    struct flow_env env;
    struct mitm *m;
    struct mitm_sess *s;
    struct flow f;
    struct flow_relay r;
    struct peer p[NPEERS];
    uint8_t opt;
    unsigned hooked, ends;
    size_t h1_reqs;
    int verbose; /* H2_GLUE_LOG set: what each peer got, and chute's log */
} T;

static const char magic[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* ---- hooks ---------------------------------------------------------------- */

static int
wants(void *ud, const struct mitm_request *m)
{
    return (T.opt & OPT_HOOKS) != 0;
}

static size_t
req_body(void *ud, const struct mitm_request *m)
{
    if (!(T.opt & OPT_REQ_BODY))
        return 0;
    return T.opt & OPT_BIG_MAX ? 300 * 1024 : 64;
}

static int
on_request(void *ud, struct mitm_request *m, struct mitm_reply *out)
{
    unsigned k = T.hooked++;
    if (!(T.opt & OPT_EDITS))
        return 0;
    switch (k % 7) {
    case 0:
        (void)http_fwd_field_set(&m->req->fields, MEM_SLICE_LIT("X-Fuzz"), MEM_SLICE_LIT("1"));
        return 0;
    case 1:
        *out = (struct mitm_reply){.status = 200, .extra = "x-local: 1\r\n",
                                   .body = MEM_SLICE_LIT("local answer")};
        return 1;
    case 2:
        out->reject = 1;
        return 1;
    case 3: /* another origin: no connection of its own, so a 502 */
        m->req->host = MEM_SLICE_LIT("elsewhere.test");
        return 0;
    case 4:
        if (m->body_set) {
            m->body = "replaced";
            m->body_len = 8;
        }
        return 0;
    case 5: /* plain http:// to the same name: HTTP/1.1 without TLS, no connection */
        m->scheme = "http";
        return 0;
    default:
        return 0;
    }
}

static size_t
resp_body(void *ud, const struct mitm_request *m, const struct http_fwd_resp *resp)
{
    if (!(T.opt & OPT_RESP_BODY))
        return 0;
    return T.opt & OPT_BIG_MAX ? 300 * 1024 : 64;
}

static void
on_response(void *ud, struct mitm_request *m, struct http_fwd_resp *resp, const char **body,
            size_t *len)
{
    if (!(T.opt & OPT_EDITS))
        return;
    (void)http_fwd_field_set(&resp->fields, MEM_SLICE_LIT("X-Fuzz-Resp"), MEM_SLICE_LIT("1"));
    if (body != NULL && (T.hooked & 1))
        *len /= 2;
}

static const struct mitm_hooks hooks = {.wants_request = wants,
                                        .request_body = req_body,
                                        .on_request = on_request,
                                        .wants_response = wants,
                                        .response_body = resp_body,
                                        .on_response = on_response};
static const struct mitm_hooks *const hook_list[] = {&hooks};

/* ---- checks of what chute sent ------------------------------------------- */

static void
check_field(const struct peer *p, const nghttp2_nv *nv)
{
    if (T.verbose)
        fprintf(stderr, "  %.*s: %.*s\n", (int)nv->namelen, nv->name, (int)nv->valuelen,
                nv->value);
    CHECK(nv->namelen > 0);
    CHECK(nghttp2_check_header_value(nv->value, nv->valuelen));
    const uint8_t *n = nv->name;
    size_t nl = nv->namelen;
    if (n[0] == ':') {
        n++;
        nl--;
    }
    CHECK(nghttp2_check_header_name(n, nl));
    for (size_t k = 0; k < nl; k++)
        CHECK(!(n[k] >= 'A' && n[k] <= 'Z'));
    if (p->upstream && !(nv->namelen == 2 && memcmp(nv->name, "te", 2) == 0))
        CHECK(!h2_msg_conn_specific(nv->name, nv->namelen));
}

static void
inflate_block(struct peer *p)
{
    const uint8_t *in = p->block;
    size_t left = p->block_len;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t n = nghttp2_hd_inflate_hd2(p->inf, &nv, &flags, in, left, 1);
        CHECK(n >= 0); /* chute's HPACK decodes */
        in += n;
        left -= (size_t)n;
        if (flags & NGHTTP2_HD_INFLATE_EMIT)
            check_field(p, &nv);
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(p->inf);
            break;
        }
        if (n == 0 && left == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT))
            break;
    }
    p->block_len = 0;
}

static void
block_add(struct peer *p, const uint8_t *b, size_t n)
{
    uint8_t *q = realloc(p->block, p->block_len + n + 1);
    CHECK(q != NULL);
    p->block = q;
    memcpy(p->block + p->block_len, b, n);
    p->block_len += n;
}

/* Whole frames out of what |p| holds. */
static size_t
check_h2(struct peer *p, const uint8_t *b, size_t len)
{
    size_t used = 0;
    if (p->magic_left > 0) {
        size_t n = len < p->magic_left ? len : p->magic_left;
        CHECK(memcmp(b, magic + (sizeof(magic) - 1 - p->magic_left), n) == 0);
        p->magic_left -= n;
        used = n;
    }
    while (len - used >= 9) {
        const uint8_t *h = b + used;
        size_t flen = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        uint8_t type = h[3], flags = h[4];
        uint32_t sid = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) &
                       0x7fffffff;
        CHECK(flen <= 16384);
        if (len - used < 9 + flen)
            break;
        const uint8_t *pl = h + 9;
        if (T.verbose)
            fprintf(stderr, "to %s: frame %u flags %#x stream %u, %zu bytes\n",
                    p->upstream ? "origin" : "client", type, flags, sid, flen);
        CHECK(type != NGHTTP2_PUSH_PROMISE);
        /* nothing between a block's frames */
        CHECK(p->in_block == (type == NGHTTP2_CONTINUATION));
        if (p->upstream && (type == NGHTTP2_HEADERS || type == NGHTTP2_DATA))
            CHECK(sid % 2 == 1); /* client-initiated streams only */
        if (type == NGHTTP2_HEADERS) {
            size_t off = 0, pad = 0;
            if (flags & NGHTTP2_FLAG_PADDED) {
                CHECK(flen >= 1);
                pad = pl[0];
                off = 1;
            }
            if (flags & NGHTTP2_FLAG_PRIORITY)
                off += 5;
            CHECK(off + pad <= flen);
            block_add(p, pl + off, flen - off - pad);
            p->in_block = !(flags & NGHTTP2_FLAG_END_HEADERS);
            if (!p->in_block)
                inflate_block(p);
        } else if (type == NGHTTP2_CONTINUATION) {
            block_add(p, pl, flen);
            p->in_block = !(flags & NGHTTP2_FLAG_END_HEADERS);
            if (!p->in_block)
                inflate_block(p);
        }
        used += 9 + flen;
    }
    return used;
}

static int
hop_by_hop(struct mem_slice n)
{
    return mem_slice_ieq(n, "connection") || mem_slice_ieq(n, "proxy-connection") ||
           mem_slice_ieq(n, "keep-alive") || mem_slice_ieq(n, "te") ||
           mem_slice_ieq(n, "upgrade");
}

/* Whole requests out of what an h1 origin holds. */
static size_t
check_h1(struct peer *p, const char *b, size_t len)
{
    size_t used = 0;
    while (used < len) {
        CHECK(!p->h1_cut);
        struct http_request req;
        struct http_body body;
        int n = http_h1_parse_request(b + used, len - used, &req);
        if (n == HTTP_ERR_INCOMPLETE)
            break;
        CHECK(n > 0);
        for (size_t i = 0; i < req.num_headers; i++)
            CHECK(!hop_by_hop(req.headers[i].name));
        CHECK(http_body_init_request(&body, &req) == 0);
        ssize_t k = http_body_feed(&body, b + used + n, len - used - (size_t)n);
        CHECK(k >= 0);
        if (!body.done)
            break; /* whole ones only: the rest comes later (or never) */
        T.h1_reqs++;
        if (T.verbose)
            fprintf(stderr, "to an h1 origin: %.*s %.*s\n", (int)req.method.len, req.method.ptr,
                    (int)req.target.len, req.target.ptr);
        CHECK(T.h1_reqs <= T.hooked || !(T.opt & OPT_HOOKS));
        used += (size_t)n + (size_t)k;
    }
    return used;
}

static void
drain(void)
{
    char b[65536];
    for (int i = 0; i < NPEERS; i++) {
        struct peer *p = &T.p[i];
        ssize_t n;
        while (p->fd >= 0 && !p->paused && (n = recv(p->fd, b, sizeof(b), 0)) > 0) {
            char *q = realloc(p->in, p->len + (size_t)n);
            CHECK(q != NULL);
            p->in = q;
            memcpy(p->in + p->len, b, (size_t)n);
            p->len += (size_t)n;
            size_t used = p->h2 ? check_h2(p, (const uint8_t *)p->in, p->len)
                                : check_h1(p, p->in, p->len);
            memmove(p->in, p->in + used, p->len - used);
            p->len -= used;
        }
    }
}

static void
run(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        ev_run(T.loop, EVRUN_NOWAIT);
        drain();
    }
}

/* ---- the peers' side ------------------------------------------------------ */

static void
send_all(struct peer *p, const void *b, size_t n)
{
    if (p->fd >= 0)
        (void)!send(p->fd, b, n, MSG_NOSIGNAL);
}

static void
send_frame(struct peer *p, uint8_t type, uint8_t flags, uint32_t sid, const uint8_t *pl,
           size_t n)
{
    uint8_t h[9] = {(uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n, type, flags,
                    (uint8_t)(sid >> 24), (uint8_t)(sid >> 16), (uint8_t)(sid >> 8),
                    (uint8_t)sid};
    send_all(p, h, 9);
    if (n > 0)
        send_all(p, pl, n);
}

static uint32_t
stream_id(uint8_t b)
{
    return b == 0xff ? 0x7fffffff : b;
}

/* HEADERS with a block the peer's own HPACK encoder writes. */
static size_t
send_headers(struct peer *p, const uint8_t *d, size_t size)
{
    size_t i = 0;
    if (size < 3)
        return size;
    uint8_t flags = d[i++];
    uint32_t sid = stream_id(d[i++]);
    size_t nf = d[i++] & 31;
    nghttp2_nv nv[32];
    size_t n = 0;
    while (n < nf && i + 2 <= size) {
        size_t nl = d[i++];
        if (i + nl + 1 > size)
            break;
        nv[n].name = (uint8_t *)d + i;
        nv[n].namelen = nl;
        i += nl;
        size_t vl = d[i++];
        if (i + vl > size)
            vl = size - i;
        nv[n].value = (uint8_t *)d + i;
        nv[n].valuelen = vl;
        nv[n].flags = NGHTTP2_NV_FLAG_NONE;
        i += vl;
        n++;
    }
    uint8_t buf[16384];
    size_t off = 0;
    if (flags & NGHTTP2_FLAG_PADDED)
        buf[off++] = 3;
    if (flags & NGHTTP2_FLAG_PRIORITY) {
        memcpy(buf + off, "\x00\x00\x00\x00\x0f", 5);
        off += 5;
    }
    ssize_t k = nghttp2_hd_deflate_hd(p->def, buf + off, sizeof(buf) - off - 3, nv, n);
    if (k < 0)
        return i;
    off += (size_t)k;
    if (flags & NGHTTP2_FLAG_PADDED) {
        memset(buf + off, 0, 3);
        off += 3;
    }
    /* END_HEADERS unless bit 7 says a CONTINUATION is to follow (raw). */
    uint8_t fl = flags & 0x80 ? (uint8_t)(flags & ~(0x80 | NGHTTP2_FLAG_END_HEADERS))
                              : (uint8_t)(flags | NGHTTP2_FLAG_END_HEADERS);
    send_frame(p, NGHTTP2_HEADERS, fl, sid, buf, off);
    return i;
}

static void
send_data(struct peer *p, uint32_t sid, uint8_t flags, unsigned frames)
{
    static uint8_t chunk[16384];
    if (chunk[0] == 0)
        memset(chunk, 'd', sizeof(chunk));
    for (unsigned k = 0; k < frames && p->fd >= 0; k++) {
        uint8_t fl = k + 1 == frames ? (uint8_t)(flags & NGHTTP2_FLAG_END_STREAM) : 0;
        send_frame(p, NGHTTP2_DATA, fl, sid, chunk, sizeof(chunk));
        run(1);
    }
}

static void
peer_close(struct peer *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
}

/* ---- setup and teardown --------------------------------------------------- */

static void
on_sess_done(struct flow_relay *r, void *arg, const char *reason)
{
    CHECK(T.ends++ == 0 && reason != NULL);
    T.s = NULL;
}

static struct io_stream *
pair(struct peer *p, int h2, int upstream)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    p->fd = sv[1];
    p->h2 = h2;
    p->upstream = upstream;
    p->magic_left = upstream && h2 ? sizeof(magic) - 1 : 0;
    CHECK(nghttp2_hd_inflate_new(&p->inf) == 0);
    CHECK(nghttp2_hd_deflate_new(&p->def, 4096) == 0);
    struct io_stream *s = io_fd_new(T.loop, sv[0]);
    CHECK(s != NULL);
    return s;
}

static void
setup(uint8_t opt)
{
    T.opt = opt;
    T.fo = (struct flow_opts){.connect_timeout = 5, .idle_timeout = 300};
    T.out = (struct outbound_env){.loop = T.loop};
    T.env = (struct flow_env){.loop = T.loop, .out = &T.out, .local = &T.out, .opts = &T.fo};
    T.m = mitm_new(&T.env);
    CHECK(T.m != NULL);
    struct mitm_opts o = {.hooks = hook_list, .nhooks = 1};
    mitm_configure(T.m, &o);
    T.f = (struct flow){.network = FLOW_TCP, .policy = FLOW_POLICY__BUILTIN};
    T.f.dst.kind = FLOW_ADDR_NAME;
    T.f.dst.port = 443;
    T.f.dst.name_len = sizeof(HOST) - 1;
    memcpy(T.f.dst.name, HOST, sizeof(HOST));
    T.r._cb = on_sess_done;
    /* The origins, already connected: an h2 one in the shared pool, two
     * HTTP/1.1 ones idle in the h1 pool. */
    mitm_h2_pool_adopt(T.m, &T.f, HOST, 443, pair(&T.p[1], 1, 1));
    mitm_h1_park(T.m, &T.f, HOST, 443, 0, pair(&T.p[2], 0, 1));
    mitm_h1_park(T.m, &T.f, HOST, 443, 0, pair(&T.p[3], 0, 1));
    struct mitm_sess *s = calloc(1, sizeof(*s));
    CHECK(s != NULL);
    s->m = T.m;
    s->r = &T.r;
    s->f = &T.f;
    s->state = M_HTTP;
    memcpy(s->host, HOST, sizeof(HOST));
    s->port = 443;
    s->up_h2 = (opt & OPT_H2) != 0;
    T.m->st.active++;
    T.s = s;
    CHECK(mitm_h2_server_start(s, pair(&T.p[0], 1, 0)) == 0);
    if (!(opt & OPT_NO_MAGIC))
        send_all(&T.p[0], magic, sizeof(magic) - 1);
}

static void
teardown(void)
{
    if (T.s != NULL)
        mitm_sess_stop(T.s, 1);
    mitm_free(T.m);
    ev_run(T.loop, EVRUN_NOWAIT);
    for (int i = 0; i < NPEERS; i++) {
        struct peer *p = &T.p[i];
        peer_close(p);
        free(p->in);
        free(p->block);
        nghttp2_hd_inflate_del(p->inf);
        nghttp2_hd_deflate_del(p->def);
    }
    struct ev_loop *loop = T.loop;
    memset(&T, 0, sizeof(T));
    T.loop = loop;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (T.loop == NULL) {
        T.loop = ev_loop_new(EVFLAG_AUTO);
        /* Quiet (protocol errors are the point), unless a crash is looked at. */
        log_threshold = getenv("H2_GLUE_LOG") != NULL ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR;
    }
    T.verbose = getenv("H2_GLUE_LOG") != NULL;
    if (size < 1)
        return 0;
    setup(data[0]);
    run(2);
    size_t i = 1;
    while (i < size && T.s != NULL) {
        uint8_t tag = data[i++];
        struct peer *p = &T.p[tag & 3];
        int rounds = 1 + (tag >> 6);
        switch ((tag >> 2) & 3) {
        case 0: { /* raw bytes */
            size_t n = i < size ? data[i++] : 0;
            n = n < size - i ? n : size - i;
            send_all(p, data + i, n);
            i += n;
            break;
        }
        case 1: { /* a frame */
            if (i + 4 > size) {
                i = size;
                break;
            }
            uint8_t type = data[i], flags = data[i + 1];
            uint32_t sid = stream_id(data[i + 2]);
            size_t n = data[i + 3];
            i += 4;
            n = n < size - i ? n : size - i;
            send_frame(p, type, flags, sid, data + i, n);
            i += n;
            break;
        }
        case 2:
            if (p->h2) {
                i += send_headers(p, data + i, size - i);
            } else if (i < size) { /* body bytes from an h1 origin */
                static char kib[1024];
                memset(kib, 'b', sizeof(kib));
                for (unsigned k = 0; k < data[i] && p->fd >= 0; k++) {
                    send_all(p, kib, sizeof(kib));
                    if (k % 16 == 15)
                        run(1);
                }
                i++;
            }
            break;
        default:
            switch ((tag >> 4) & 3) {
            case 0:
                if (i + 3 <= size && p->h2)
                    send_data(p, stream_id(data[i]), data[i + 1], data[i + 2] & 31);
                i += 3;
                break;
            case 1:
                if (p->fd >= 0)
                    shutdown(p->fd, SHUT_WR);
                break;
            case 2:
                peer_close(p);
                break;
            default:
                p->paused = !p->paused;
                break;
            }
            rounds = 1;
            break;
        }
        run(rounds);
    }
    for (int k = 0; k < NPEERS; k++)
        T.p[k].paused = 0;
    run(6);
    teardown();
    return 0;
}
