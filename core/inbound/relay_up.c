#include "flow/relay.h"
#include "flow/session.h"
#include "inbound/inbound.h"
#include "io/io.h"

int
inbound_relay_upstream(struct flow_relay *r, const struct flow_env *e, int fd,
                       const struct flow_upstream *up, const void *pre_up, size_t pre_up_len,
                       const void *reply, size_t reply_len, struct flow *f,
                       void (*done)(struct flow_relay *, void *, const char *), void *arg)
{
    struct io_stream *client = io_fd_new(e->loop, fd);
    if (client == NULL)
        return -1;
    int rc = flow_relay_upstream(r, e, client, up, pre_up, pre_up_len, reply, reply_len, f, done,
                                 arg);
    if (rc != 0)
        io_fd_release(client); /* the socket stays the caller's */
    return rc;
}
