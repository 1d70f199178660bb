#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_int.h"
#include "flow/flow.h"
#include "tls/crypto.h"

/* Streams (/traffic, /memory, /logs, and /connections over WebSocket):
 * one JSON object per second or per log line, as chunks of a chunked
 * answer or as WebSocket text messages. WebSocket framing is wslay's
 * (sans-I/O: its callbacks read from cl->in and write into cl->out). */

#define WS_LIST_MAX 196608 /* bytes of flows in one /connections message */

static const char *const level_names[] = {"error", "warning", "info", "debug"};

static ssize_t
ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
    struct control_client *cl = ud;
    if (cl->in_len == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    size_t n = len < cl->in_len ? len : cl->in_len;
    memcpy(buf, cl->in, n);
    memmove(cl->in, cl->in + n, cl->in_len - n);
    cl->in_len -= n;
    return (ssize_t)n;
}

static ssize_t
ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *ud)
{
    struct control_client *cl = ud;
    /* Past the bound, wslay keeps the rest in its queue (bounded by
     * control_stream_send) until the flush has room again. */
    if (cl->dead || cl->out_len - cl->out_off + len > CONTROL_OUT_MAX) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    control_out_append(cl, data, len);
    return (ssize_t)len;
}

static void
ws_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *ud)
{
    /* Clients send nothing chute needs; pings and closes wslay answers. */
}

static const struct wslay_event_callbacks ws_callbacks = {
    .recv_callback = ws_recv,
    .send_callback = ws_send,
    .on_msg_recv_callback = ws_msg,
};

static void
base64(const uint8_t *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = '\0';
}

int
control_ws_upgrade(struct control_client *cl, const struct http_request *req)
{
    const struct http_header *k = http_header_find(req->headers, req->num_headers,
                                                   "sec-websocket-key");
    const struct http_header *v = http_header_find(req->headers, req->num_headers,
                                                   "sec-websocket-version");
    if (k == NULL || k->value.len == 0 || k->value.len > 64 || v == NULL ||
        !mem_slice_ieq(v->value, "13")) {
        control_reply_error(cl, 400, "WebSocket: needs Sec-WebSocket-Key and version 13");
        return -1;
    }
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char keyed[64 + sizeof(guid)];
    memcpy(keyed, k->value.ptr, k->value.len);
    memcpy(keyed + k->value.len, guid, sizeof(guid) - 1);
    uint8_t sha[20];
    tls_sha1(keyed, k->value.len + sizeof(guid) - 1, sha);
    char accept[32];
    base64(sha, sizeof(sha), accept);
    if (wslay_event_context_server_init(&cl->ws, &ws_callbacks, cl) != 0) {
        control_reply_error(cl, 500, "out of memory");
        return -1;
    }
    /* Frames over 4 KiB from a client are refused: it has nothing to say. */
    wslay_event_config_set_max_recv_msg_length(cl->ws, 4096);
    char h[256];
    int n = snprintf(h, sizeof(h),
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                     accept);
    control_out_append(cl, h, (size_t)n);
    cl->mode = MODE_WS;
    cl->close_after = 0;
    control_streams_tick_one(cl);
    return 0;
}

int
control_ws_feed(struct control_client *cl)
{
    if (wslay_event_recv(cl->ws) != 0 || wslay_event_send(cl->ws) != 0 ||
        (!wslay_event_want_read(cl->ws) && !wslay_event_want_write(cl->ws))) {
        control_client_kill(cl); /* a protocol error, or the close handshake is done */
        return -1;
    }
    return 0;
}

int
control_ws_pump(struct control_client *cl)
{
    if (cl->ws == NULL || !wslay_event_want_write(cl->ws))
        return 0;
    if (wslay_event_send(cl->ws) != 0) {
        control_client_kill(cl);
        return -1;
    }
    return 0;
}

void
control_ws_free(struct control_client *cl)
{
    if (cl->ws != NULL)
        wslay_event_context_free(cl->ws);
    cl->ws = NULL;
}

static void
send_json(struct control_client *cl, json_t *j)
{
    char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (s == NULL)
        return;
    size_t n = strlen(s);
    if (cl->mode == MODE_CHUNKED)
        s[n++] = '\n'; /* one object a line, as Clash's chunked streams; the NUL's place */
    control_stream_send(cl, s, n);
    free(s);
}

void
control_streams_tick_one(struct control_client *cl)
{
    struct control *c = cl->c;
    switch (cl->topic) {
    case TOPIC_TRAFFIC:
        send_json(cl, json_pack("{s:I,s:I}", "up", (json_int_t)c->rate_up, "down",
                                (json_int_t)c->rate_down));
        break;
    case TOPIC_MEMORY:
        send_json(cl, json_pack("{s:I,s:i}", "inuse", (json_int_t)control_memory_inuse(),
                                "oslimit", 0));
        break;
    case TOPIC_CONNECTIONS: {
        size_t len;
        char *m = control_list_message(c, WS_LIST_MAX, &len);
        if (m != NULL)
            control_stream_send(cl, m, len);
        free(m);
        break;
    }
    default:
        break;
    }
}

void
control_streams_tick(struct control *c)
{
    struct flow_table_stats st;
    flow_table_stats(c->env.flows, &st);
    c->rate_up = st.bytes_up >= c->last_up ? st.bytes_up - c->last_up : 0;
    c->rate_down = st.bytes_down >= c->last_down ? st.bytes_down - c->last_down : 0;
    /* The first tick has no second before it. (Not "both totals 0": a
     * chute that moved nothing yet would lose the first second of a
     * transfer.) */
    if (!c->ticked)
        c->rate_up = c->rate_down = 0;
    c->ticked = 1;
    c->last_up = st.bytes_up;
    c->last_down = st.bytes_down;
    for (struct control_client *cl = c->head.next, *next; cl != &c->head; cl = next) {
        next = cl->next;
        if (cl->dead || cl->topic == TOPIC_NONE || cl->topic == TOPIC_LOGS)
            continue;
        cl->busy = 1;
        control_streams_tick_one(cl);
        if (!cl->dead)
            control_client_flush(cl);
        cl->busy = 0;
        if (cl->dead)
            control_client_kill(cl);
    }
}

void
control_logs_tap(void *arg, enum log_level level, const char *msg, size_t len)
{
    struct control *c = arg;
    for (struct control_client *cl = c->head.next; cl != &c->head; cl = cl->next) {
        if (cl->dead || cl->topic != TOPIC_LOGS || (int)level > cl->log_level)
            continue;
        json_t *j = json_pack("{s:s,s:s%}", "type", level_names[level], "payload", msg, len);
        /* Any client may be up the stack here: one that fails is only
         * marked, and the tick frees it. */
        int busy = cl->busy;
        cl->busy = 1;
        send_json(cl, j);
        if (!cl->dead)
            control_client_flush(cl);
        cl->busy = busy;
        if (cl->dead)
            control_client_park(cl);
    }
}
