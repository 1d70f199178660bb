/* libFuzzer target for core/http/h1_conn.c, the stateful HTTP/1 exchange
 * driver, over real socketpairs and a libev loop. The input is a script
 * of steps: the client sends bytes, the origin sends bytes, either side
 * half-closes or closes, the loop runs. The hook forwards each request
 * (over the kept upstream, else a new one), or answers some locally.
 *
 * Invariants, checked with abort():
 *  - what each origin receives parses, with the same framing rules, as
 *    exactly the requests the hook forwarded to it, in order: no request
 *    smuggled past the hook, none lost, each body where its head says;
 *  - no upstream head carries a hop-by-hop field;
 *  - on_done fires at most once, and nothing fires after it;
 *  - the driver's memory stays within its two buffers and an arena. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/h1_conn.h"

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

#define MAX_UPS 4
#define MAX_REQS 64
#define MEM_MAX (2 * (HTTP_MAX_HEAD + 16384) + 2 * HTTP_MAX_HEAD + 8 * MEM_ARENA_CHUNK)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct bytes {
    char *p;
    size_t len;
};

static struct {
    struct ev_loop *loop;
    struct http_h1_conn *c;
    int cli;
    int org[MAX_UPS];
    struct bytes got[MAX_UPS]; /* what each origin received */
    int nups;
    /* The requests forwarded, in order, and to which upstream. */
    char *paths[MAX_REQS];
    size_t path_len[MAX_REQS];
    int req_up[MAX_REQS];
    int nreqs;
    int done, answer_every;
    int collect, upgrade; /* bodies read whole; upgrade requests passed on */
    unsigned heads;
} T;

static void
put(struct bytes *b, const char *p, size_t n)
{
    char *q = realloc(b->p, b->len + n + 1);

    CHECK(q != NULL);
    b->p = q;
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static int
pair(int *theirs)
{
    int sv[2];

    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    *theirs = sv[1];
    return sv[0];
}

static void decide(struct http_h1_conn *c, struct http_fwd_req *req);

/* Bodies read whole for a hook (h1_collect.c): kept, or replaced. */
static void
on_request_body(void *arg, struct http_h1_conn *c, struct http_fwd_req *req, const char *body,
                size_t len)
{
    CHECK(!T.done);
    if (body != NULL && (T.heads & 1))
        CHECK(http_h1_conn_set_request_body(c, "replaced", 8) == 0);
    decide(c, req);
}

static void
on_response_body(void *arg, struct http_h1_conn *c, struct http_fwd_resp *resp, const char *body,
                 size_t len)
{
    CHECK(!T.done);
    if (body != NULL && (T.heads & 2))
        CHECK(http_h1_conn_set_response_body(c, body, len / 2) == 0);
}

static void
on_upgrade(void *arg, struct http_h1_conn *c, struct io_stream *client, struct io_stream *up,
           struct mem_slice to_up, struct mem_slice to_client)
{
    CHECK(!T.done && client != NULL && up != NULL);
    io_close(client, 0);
    io_close(up, 0);
    T.done = 1;
    http_h1_conn_free(c);
    T.c = NULL;
}

static void
on_request_head(void *arg, struct http_h1_conn *c, struct http_fwd_req *req)
{
    CHECK(!T.done);
    T.heads++;
    if (T.collect && !req->refused && !req->connect && http_h1_conn_collect_request(c, 64) == 0)
        return;
    decide(c, req);
}

static void
decide(struct http_h1_conn *c, struct http_fwd_req *req)
{
    struct http_h1_upstream up = {0};

    if (req->refused || req->connect || (T.answer_every && T.heads % T.answer_every == 0)) {
        CHECK(http_h1_conn_respond(c, req->refused ? 400 : 403, "No", NULL, T.heads & 1) == 0);
        return;
    }
    if (T.nreqs == MAX_REQS) {
        CHECK(http_h1_conn_respond(c, 503, "Busy", NULL, 1) == 0);
        return;
    }
    if (!http_h1_conn_has_upstream(c)) {
        if (T.nups == MAX_UPS) {
            CHECK(http_h1_conn_respond(c, 502, "Bad Gateway", NULL, 1) == 0);
            return;
        }
        up.stream = io_fd_new(T.loop, pair(&T.org[T.nups]));
        CHECK(up.stream != NULL);
        T.nups++;
    }
    CHECK(http_h1_conn_forward(c, up.stream != NULL ? &up : NULL) == 0);
    T.paths[T.nreqs] = malloc(req->path.len + 1);
    CHECK(T.paths[T.nreqs] != NULL);
    memcpy(T.paths[T.nreqs], req->path.ptr, req->path.len);
    T.path_len[T.nreqs] = req->path.len;
    T.req_up[T.nreqs] = T.nups - 1;
    T.nreqs++;
}

static void
on_response_head(void *arg, struct http_h1_conn *c, struct http_fwd_resp *resp)
{
    CHECK(!T.done && !resp->interim);
    if (T.heads & 2)
        (void)http_fwd_field_set(&resp->fields, MEM_SLICE_LIT("X-Fuzz"), MEM_SLICE_LIT("1"));
    if (T.collect)
        CHECK(http_h1_conn_collect_response(c, 48) == 0);
}

static void
on_upstream_end(void *arg, struct http_h1_conn *c, const char *reason)
{
    CHECK(!T.done);
}

static void
on_done(void *arg, struct http_h1_conn *c, const char *reason)
{
    CHECK(!T.done && reason != NULL);
    T.done = 1;
    http_h1_conn_free(c);
    T.c = NULL;
}

static const struct http_h1_conn_cbs cbs = {.on_request_head = on_request_head,
                                            .on_response_head = on_response_head,
                                            .on_upstream_end = on_upstream_end,
                                            .on_request_body = on_request_body,
                                            .on_response_body = on_response_body,
                                            .on_upgrade = on_upgrade,
                                            .on_done = on_done};
static const struct http_h1_conn_cbs cbs_raw = {.on_request_head = on_request_head,
                                                .on_upstream_end = on_upstream_end,
                                                .on_done = on_done};

/* Takes what the peers' ends have: the client's answers are dropped, the
 * origins' requests kept for the check. */
static void
drain(void)
{
    char b[65536];
    ssize_t n;

    while (T.cli >= 0 && (n = recv(T.cli, b, sizeof(b), 0)) > 0)
        ;
    for (int i = 0; i < T.nups; i++)
        while (T.org[i] >= 0 && (n = recv(T.org[i], b, sizeof(b), 0)) > 0)
            put(&T.got[i], b, (size_t)n);
}

static void
run(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        ev_run(T.loop, EVRUN_NOWAIT);
        drain();
        if (T.c != NULL)
            CHECK(T.done || http_h1_conn_memory(T.c) <= MEM_MAX);
    }
}

static int
hop_by_hop(struct mem_slice n)
{
    return mem_slice_ieq(n, "connection") || mem_slice_ieq(n, "proxy-connection") ||
           mem_slice_ieq(n, "keep-alive") || mem_slice_ieq(n, "proxy-authorization") ||
           mem_slice_ieq(n, "te") || mem_slice_ieq(n, "upgrade");
}

/* Each origin's bytes are the requests forwarded to it, in order and
 * whole, but for the last, which the connection may have cut. */
static void
check_origin(int u)
{
    const char *p = T.got[u].p;
    size_t left = T.got[u].len;
    int next = 0;

    while (left > 0) {
        struct http_request req;
        struct http_body body;
        int n = http_h1_parse_request(p, left, &req);
        ssize_t k;

        if (n == HTTP_ERR_INCOMPLETE)
            break; /* cut mid-head: the last one */
        CHECK(n > 0);
        while (next < T.nreqs && T.req_up[next] != u)
            next++;
        CHECK(next < T.nreqs);
        CHECK(req.target.len == T.path_len[next] &&
              memcmp(req.target.ptr, T.paths[next], req.target.len) == 0);
        for (size_t i = 0; i < req.num_headers; i++)
            CHECK(!hop_by_hop(req.headers[i].name) || T.upgrade);
        CHECK(http_body_init_request(&body, &req) == 0);
        p += n;
        left -= (size_t)n;
        k = http_body_feed(&body, p, left);
        CHECK(k >= 0);
        p += k;
        left -= (size_t)k;
        next++;
        if (!body.done) {
            CHECK(left == 0); /* cut mid-body: the last one */
            break;
        }
    }
}

static void
reset(void)
{
    struct ev_loop *loop;

    if (T.c != NULL)
        http_h1_conn_free(T.c);
    if (T.cli >= 0)
        close(T.cli);
    for (int i = 0; i < T.nups; i++) {
        if (T.org[i] >= 0)
            close(T.org[i]);
        free(T.got[i].p);
    }
    for (int i = 0; i < T.nreqs; i++)
        free(T.paths[i]);
    ev_run(T.loop, EVRUN_NOWAIT);
    loop = T.loop;
    memset(&T, 0, sizeof(T));
    T.loop = loop;
    T.cli = -1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_h1_conn_opts o = {.fwd = {.form = HTTP_FWD_PROXY}};
    struct io_stream *s;
    size_t i = 1;

    if (T.loop == NULL)
        T.loop = ev_loop_new(EVFLAG_AUTO);
    reset();
    if (size < 1)
        return 0;
    T.answer_every = data[0] & 7;
    if (data[0] & 8) {
        o.fwd.form = HTTP_FWD_ORIGIN;
        o.fwd.default_host = MEM_SLICE_LIT("d.test");
        o.fwd.default_port = 443;
    }
    /* With the hook callbacks: bodies collected (and some replaced), and
     * upgrades tunnelled, on every other input. */
    T.collect = (data[0] & 16) && (data[0] & 32);
    o.fwd.upgrade = T.upgrade = (data[0] & 64) != 0;
    s = io_fd_new(T.loop, pair(&T.cli));
    T.c = http_h1_conn_new(s, &o, data[0] & 16 ? &cbs : &cbs_raw, NULL);
    CHECK(T.c != NULL);
    /* Steps: a tag byte, then for sends a length byte and the bytes. */
    while (i < size && !T.done) {
        uint8_t tag = data[i++];
        size_t n = i < size ? data[i] : 0;
        int fd = tag & 1 ? (T.nups > 0 ? T.org[T.nups - 1] : -1) : T.cli;

        switch ((tag >> 1) & 3) {
        case 0: /* send */
            i++;
            n = n < size - i ? n : size - i;
            if (fd >= 0)
                (void)!send(fd, data + i, n, MSG_NOSIGNAL);
            i += n;
            break;
        case 1: /* half-close */
            if (fd >= 0)
                shutdown(fd, SHUT_WR);
            break;
        case 2: /* the peer goes (the origin's end stays readable for the check) */
            if (fd >= 0 && !(tag & 1)) {
                close(T.cli);
                T.cli = -1;
            } else if (fd >= 0) {
                shutdown(fd, SHUT_RDWR);
            }
            break;
        default:
            break;
        }
        run(1 + (tag >> 3));
    }
    run(4);
    for (int u = 0; u < T.nups; u++)
        check_origin(u);
    reset();
    return 0;
}
