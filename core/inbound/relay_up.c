#include <stdlib.h>
#include <string.h>

#include "flow/relay.h"
#include "io/io.h"
#include "inbound/inbound.h"
#include "outbound/outbound.h"

int
inbound_relay_upstream(struct flow_relay *r, const struct flow_env *e, int fd,
                       const struct outbound_result *up, const void *pre_up, size_t pre_up_len,
                       const void *reply, size_t reply_len, struct flow *f,
                       void (*done)(struct flow_relay *, void *, const char *), void *arg)
{
    /* The client sees our reply, then what the destination already said. */
    const void *down = reply;
    size_t down_len = reply_len;
    char *joined = NULL;
    if (up->extra_len > 0) {
        joined = malloc(reply_len + up->extra_len);
        if (joined == NULL)
            return -1;
        memcpy(joined, reply, reply_len);
        memcpy(joined + reply_len, up->extra, up->extra_len);
        down = joined;
        down_len = reply_len + up->extra_len;
    }
    if (up->via != NULL && f->policy >= FLOW_POLICY__BUILTIN)
        f->via = up->via;
    struct io_stream *client = io_fd_new(e->loop, fd);
    struct flow_relay_args a = {
        .client = client,
        .upstream = up->stream,
        .pre_up = pre_up,
        .pre_up_len = pre_up_len,
        .pre_down = down,
        .pre_down_len = down_len,
        .up_count = &f->bytes_up,
        .down_count = &f->bytes_down,
        .idle = e->opts->idle_timeout,
        .cb = done,
        .arg = arg,
    };
    int rc = client != NULL ? flow_relay_start(r, e->loop, &a) : -1;
    if (rc != 0 && client != NULL)
        io_fd_release(client); /* the socket stays the caller's */
    free(joined);
    /* The relays leave |pre_down| out of the count; the destination's early
     * bytes in it are the flow's all the same (as the TUN path counts them). */
    if (rc == 0)
        f->bytes_down += up->extra_len;
    return rc;
}
