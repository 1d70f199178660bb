#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "control/control_int.h"

/* One client's requests and answers, sans-I/O: bytes come in through
 * cl->in, answers go out through cl->out (server.c moves both). */

static const char *
status_text(int status)
{
    switch (status) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

int
control_out_append(struct control_client *cl, const void *p, size_t n)
{
    if (cl->dead)
        return -1;
    if (cl->out_len - cl->out_off + n > CONTROL_OUT_MAX) {
        /* A client that does not read its answers: drop it rather than
         * queue without end. */
        cl->c->st.dropped++;
        control_client_kill(cl);
        return -1;
    }
    if (cl->out_off > 0 && cl->out_len + n > cl->out_cap) {
        memmove(cl->out, cl->out + cl->out_off, cl->out_len - cl->out_off);
        cl->out_len -= cl->out_off;
        cl->out_off = 0;
    }
    if (cl->out_len + n > cl->out_cap) {
        size_t cap = cl->out_cap ? cl->out_cap : 4096;
        while (cap < cl->out_len + n)
            cap *= 2;
        char *o = realloc(cl->out, cap);
        if (o == NULL) {
            control_client_kill(cl);
            return -1;
        }
        cl->out = o;
        cl->out_cap = cap;
    }
    memcpy(cl->out + cl->out_len, p, n);
    cl->out_len += n;
    return 0;
}

static const char *
cors_origin(const struct control *c)
{
    return c->o.cors[0] ? c->o.cors : c->origin;
}

static void
head(struct control_client *cl, int status, const char *ctype, long long len)
{
    char h[768];
    int n = snprintf(h, sizeof(h),
                     "HTTP/1.1 %d %s\r\nAccess-Control-Allow-Origin: %s\r\nVary: Origin\r\n"
                     "Cache-Control: no-store\r\n",
                     status, status_text(status), cors_origin(cl->c));
    if (ctype != NULL)
        n += snprintf(h + n, sizeof(h) - (size_t)n, "Content-Type: %s\r\n", ctype);
    if (len >= 0)
        n += snprintf(h + n, sizeof(h) - (size_t)n, "Content-Length: %lld\r\n", len);
    else
        n += snprintf(h + n, sizeof(h) - (size_t)n, "Transfer-Encoding: chunked\r\n");
    n += snprintf(h + n, sizeof(h) - (size_t)n, "%s\r\n",
                  cl->close_after ? "Connection: close\r\n" : "");
    control_out_append(cl, h, (size_t)n);
}

void
control_reply(struct control_client *cl, int status, const char *ctype, const char *body, size_t len)
{
    head(cl, status, ctype, (long long)len);
    if (len > 0)
        control_out_append(cl, body, len);
}

void
control_reply_json(struct control_client *cl, int status, void *json)
{
    json_t *j = json;
    char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (s == NULL) {
        control_reply(cl, 500, "application/json", "{\"message\":\"out of memory\"}", 27);
        return;
    }
    control_reply(cl, status, "application/json; charset=utf-8", s, strlen(s));
    free(s);
}

void
control_reply_late(struct control_client *cl, int status, void *json)
{
    /* From the loop, or at once from the request (a REJECT-only delay
     * test), where the client's request handling is still up the stack. */
    int busy = cl->busy;
    cl->busy = 1;
    control_reply_json(cl, status, json);
    if (!cl->dead && !busy)
        control_client_flush(cl);
    cl->busy = busy;
    if (busy)
        return;
    if (cl->dead) {
        control_client_kill(cl);
        return;
    }
    control_client_resume(cl);
}

void
control_reply_error(struct control_client *cl, int status, const char *message)
{
    control_reply_json(cl, status, json_pack("{s:s}", "message", message));
}

void
control_stream_head(struct control_client *cl, const char *ctype)
{
    cl->mode = MODE_CHUNKED;
    head(cl, 200, ctype, -1);
}

int
control_stream_send(struct control_client *cl, const char *p, size_t n)
{
    if (cl->mode == MODE_WS) {
        struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)p, n};
        /* wslay queues without a bound: a client with messages still
         * waiting is not reading, so it gets no more. */
        if (wslay_event_get_queued_msg_count(cl->ws) > 8 ||
            wslay_event_queue_msg(cl->ws, &m) != 0) {
            cl->c->st.dropped++;
            control_client_kill(cl);
            return -1;
        }
        if (wslay_event_send(cl->ws) != 0) {
            control_client_kill(cl);
            return -1;
        }
        return cl->dead ? -1 : 0;
    }
    char sz[24];
    int k = snprintf(sz, sizeof(sz), "%zx\r\n", n);
    if (control_out_append(cl, sz, (size_t)k) != 0 || control_out_append(cl, p, n) != 0 ||
        control_out_append(cl, "\r\n", 2) != 0)
        return -1;
    return 0;
}

static void
preflight(struct control_client *cl)
{
    char h[768];
    int n = snprintf(h, sizeof(h),
                     "HTTP/1.1 204 No Content\r\nAccess-Control-Allow-Origin: %s\r\nVary: Origin\r\n"
                     "Access-Control-Allow-Methods: GET, PUT, PATCH, POST, DELETE, OPTIONS\r\n"
                     "Access-Control-Allow-Headers: Authorization, Content-Type\r\n"
                     "Access-Control-Max-Age: 600\r\n%s\r\n",
                     cors_origin(cl->c), cl->close_after ? "Connection: close\r\n" : "");
    control_out_append(cl, h, (size_t)n);
}

/* The dashboard's files load without the secret (they hold none); its
 * scripts then call the API with it, as Clash's external-ui. */
static int
is_public(const struct control_target *t)
{
    return t->nsegs >= 1 && strcmp(t->segs[0], "ui") == 0;
}

static void
handle(struct control_client *cl, const struct http_request *req, const char *body, size_t blen)
{
    struct control *c = cl->c;
    c->st.requests++;
    cl->answered = 1;
    if (req->minor_version == 0 || http_connection_has(req->headers, req->num_headers, "close"))
        cl->close_after = 1;
    if (METHOD_IS(req, "OPTIONS")) {
        preflight(cl);
        return;
    }
    struct control_target t;
    if (control_target_parse(req->target, &t) != 0) {
        c->st.bad_requests++;
        control_reply_error(cl, 400, "bad request target");
        return;
    }
    if (!is_public(&t) && !control_auth_ok(c->o.secret, req, t.query)) {
        /* Before routing: a wrong secret learns nothing of what exists. */
        c->st.unauthorized++;
        control_reply_error(cl, 401, "Unauthorized");
        return;
    }
    if (control_api(cl, req, &t, body, blen) || control_ui(cl, &t))
        return;
    control_reply_error(cl, 404, "no such endpoint");
}

static void
consume(struct control_client *cl, size_t n)
{
    memmove(cl->in, cl->in + n, cl->in_len - n);
    cl->in_len -= n;
}

static void
fail(struct control_client *cl, int status, const char *why)
{
    cl->c->st.bad_requests++;
    cl->close_after = 1;
    cl->in_len = 0;
    control_reply_error(cl, status, why);
}

/* Answers the complete requests in cl->in, in order; how many. */
static int
process(struct control_client *cl)
{
    int done = 0;
    while (!cl->dead && !cl->close_after && cl->mode == MODE_HTTP && !cl->listing &&
           !CONTROL_WAITING(cl) && cl->in_len > 0) {
        struct http_request req;
        int hl = http_h1_parse_request(cl->in, cl->in_len, &req);
        if (hl == HTTP_ERR_INCOMPLETE) {
            if (cl->in_len == sizeof(cl->in))
                fail(cl, 431, "request head too large");
            return done;
        }
        if (hl == HTTP_ERR_TOO_LARGE) {
            fail(cl, 431, "request head too large");
            return done;
        }
        if (hl < 0) {
            fail(cl, 400, "malformed request");
            return done;
        }
        struct http_body b;
        if (http_body_init_request(&b, &req) != 0) {
            fail(cl, 400, "bad Content-Length or Transfer-Encoding");
            return done;
        }
        if (b.kind == HTTP_BODY_CHUNKED) {
            fail(cl, 411, "chunked request bodies are not taken: send a Content-Length");
            return done;
        }
        size_t blen = b.kind == HTTP_BODY_LENGTH ? (size_t)b.remaining : 0;
        if (b.kind == HTTP_BODY_LENGTH && b.remaining > sizeof(cl->in) - (size_t)hl) {
            fail(cl, 413, "request body too large");
            return done;
        }
        if (cl->in_len < (size_t)hl + blen)
            return done;
        handle(cl, &req, cl->in + hl, blen);
        done++;
        if (cl->dead)
            return done;
        consume(cl, (size_t)hl + blen);
    }
    if (!cl->dead && cl->mode == MODE_WS && cl->in_len > 0)
        control_ws_feed(cl);
    return done;
}

int
control_client_ready(const struct control_client *cl)
{
    return cl->mode == MODE_HTTP && !cl->listing && !CONTROL_WAITING(cl) && !cl->close_after &&
           cl->in_len > 0;
}

int
control_client_input(struct control_client *cl)
{
    cl->busy = 1;
    for (;;) {
        int done = 0;
        if (cl->mode == MODE_WS)
            control_ws_feed(cl);
        else if (cl->mode == MODE_HTTP)
            done = process(cl);
        else
            cl->in_len = 0; /* a stream's client has nothing more to say */
        if (!cl->dead)
            control_client_flush(cl);
        /* A list that ended in the flush lets the requests behind it go. */
        if (cl->dead || done == 0 || !control_client_ready(cl))
            break;
    }
    cl->busy = 0;
    if (cl->dead) {
        control_client_kill(cl);
        return -1;
    }
    return 0;
}
