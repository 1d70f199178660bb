/* libFuzzer target for core/control: the request router, the target and
 * query parsers, the JSON bodies and the WebSocket frames after an
 * upgrade, through a client without a socket (control_client_fake). The
 * first byte picks the secret ("" or "s") so both the 401 path and the
 * handlers are reached; the rest is fed in pieces whose sizes come from
 * the input, as a socket would deliver it.
 *
 * Invariants, checked with CHECK():
 *  - every answer starts with an HTTP/1.1 status line (or is WebSocket
 *    frames after a 101);
 *  - with a secret set and no "token"/"Bearer" in the input, no answer
 *    but 401, 400 (a malformed head), 204 (a preflight), 431, 413, 411
 *    and the dashboard's 200s;
 *  - the bytes queued never pass CONTROL_OUT_MAX per feed. */

#include <ev.h>
#include <string.h>

#include "control/control.h"
#include "flow/flow.h"
#include "fuzz.h"
#include "log/log.h"

struct seen {
    size_t bytes;
    int ws;
    int secret, has_token;
    char first[16];
    size_t first_len;
};

static void
on_out(void *arg, const char *p, size_t n)
{
    struct seen *s = arg;
    CHECK(n <= CONTROL_OUT_MAX);
    if (!s->ws && n >= 12) {
        CHECK(memcmp(p, "HTTP/1.1 ", 9) == 0);
        int status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
        if (status == 101)
            s->ws = 1;
        if (s->secret && !s->has_token)
            CHECK(status == 401 || status == 400 || status == 204 || status == 431 ||
                  status == 413 || status == 411 || status == 200 || status == 404);
    }
    s->bytes += n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ev_loop *loop;
    static struct flow_table *flows;
    if (loop == NULL) {
        loop = ev_loop_new(EVFLAG_AUTO);
        flows = flow_table_new();
        log_threshold = LOG_LEVEL_ERROR;
    }
    if (size < 2)
        return 0;
    struct control_env env = {.loop = loop, .flows = flows};
    char err[128];
    struct control *c = control_new(&env, NULL, err, sizeof(err));
    CHECK(c != NULL);
    struct seen s = {.secret = data[0] & 1};
    s.has_token = memmem(data, size, "token", 5) != NULL || memmem(data, size, "earer", 5) != NULL;
    if (s.secret)
        control_test_secret(c, "s");
    struct control_client *cl = control_client_fake(c, on_out, &s);
    CHECK(cl != NULL);
    size_t off = 2, step = (size_t)data[1] % 64 + 1;
    int open = 1;
    while (off < size && open) {
        size_t n = size - off < step ? size - off : step;
        open = control_client_feed(cl, data + off, n) == 0;
        off += n;
        step = step * 7 % 97 + 1;
    }
    if (open)
        control_client_close(cl);
    control_free(c);
    return 0;
}
