#ifndef CHUTE_HTTP_H1_CONN_INT_H
#define CHUTE_HTTP_H1_CONN_INT_H

/* Private to core/http: the exchange driver's state, shared by h1_conn.c
 * (the forwarding loop) and h1_collect.c (bodies read whole for hooks). */

#include <ev.h>

#include "http/h1_buf.h"
#include "http/h1_conn.h"

#define ROUNDS 64 /* per wake-up, before yielding to the loop */

enum state {
    HEAD,     /* reading the next request head */
    DECIDE,   /* the owner decides the request */
    COLLECT,  /* the request body is read whole for the owner (h1_collect.c) */
    EXCHANGE, /* forwarding the request and its response */
    LOCAL,    /* writing a local answer (then dropping the request body) */
    RELEASED, /* the client stream was handed back */
    DONE,
};

/* A body read whole (up to |max|) before it moves on: |raw| as framed,
 * then decoded into |body| for the owner, or |over| (passes as read). */
struct http_collect {
    int active, over, replaced;
    size_t max;
    char *raw;
    size_t len, cap;
    struct mem_slice body; /* what goes on: the decoded body, or the owner's */
};

struct http_h1_conn {
    struct ev_loop *loop;
    struct io_stream *client, *up;
    struct http_h1_conn_opts o;
    struct http_h1_conn_cbs cbs;
    void *arg;
    enum state state;
    struct mem_arena arena; /* the current request's strings */
    struct http_fwd_req req;
    struct http_fwd_resp resp;
    int have_req;
    struct http_buf cin, uin; /* from the client, from the upstream */
    struct mem_slice out;     /* first out: the upstream head (EXCHANGE), the answer (LOCAL) */
    size_t out_off;
    struct mem_slice down;    /* an edited response head, to the client before uin */
    size_t down_off;
    int req_done, resp_parsed, resp_done, up_eof, resp_sent_any;
    int upgraded; /* a 101 to an upgrade request: a tunnel once its head is out */
    int local_close;
    const char *local_reason;
    uint64_t *up_count, *down_count, spare_up, spare_down;
    int want_client, want_up, reading_client, reading_up;
    int in_step;
    struct http_collect creq, cresp; /* bodies read whole for hooks */
    struct io_soon soon;
    ev_timer idle;
    double last;
    double head_since; /* when the first byte of an unfinished head came; 0: none */
};


/* h1_conn.c */
int http_h1_end(struct http_h1_conn *c, const char *reason);
int http_h1_fail(struct http_h1_conn *c, int status, const char *reason);
void http_h1_kick(struct http_h1_conn *c);

/* h1_collect.c: one COLLECT round of the request body; the response body
 * while it is collected (returns -1 upstream trouble, else as moved). */
int http_h1_collect_req_step(struct http_h1_conn *c);
int http_h1_collect_resp_step(struct http_h1_conn *c);
/* The head (and a collected body) that go upstream / to the client. */
int http_h1_collected_req_out(struct http_h1_conn *c, struct mem_slice head, struct mem_slice *out);
void http_h1_collect_reset(struct http_h1_conn *c);

#endif
