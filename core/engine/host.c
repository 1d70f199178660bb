#include <limits.h>
#include <stdlib.h>

#include "chute/chute.h"
#include "engine/engine.h"
#include "log/log.h"
#include "tun/tun.h"

/* The packet interface (chute_options.packets_out): a host app moves the
 * packets, through core/tun's host endpoint, which datapath.c runs exactly
 * as the TUN device: same batches, same write queue. What is here is the
 * glue: the wakeup from other threads, and the public packet type. */

#define PUSH_CHUNK 64 /* packets converted to tun_packet per lock */

struct engine_host {
    struct tun *t;
    chute_packets_out_fn out;
    void *arg;
};

/* A flushed write-queue batch, as the host's packet type. */
static void
on_out(void *arg, const struct tun_batch *b)
{
    struct engine_host *h = arg;
    struct chute_packet p[TUN_BATCH_MAX];
    for (size_t i = 0; i < b->n; i++)
        p[i] = (struct chute_packet){b->data[i], b->len[i]};
    h->out(h->arg, p, b->n);
}

static void
on_async(struct ev_loop *loop, ev_async *w, int revents)
{
    engine_host_drain(w->data);
}

int
engine_host_new(struct engine *e, const struct chute_options *o)
{
    if (o == NULL)
        return 0;
    if (o->protect_socket != NULL) {
        e->out.protect = o->protect_socket;
        e->out.protect_arg = o->protect_arg;
    }
    if (o->packets_out == NULL)
        return 0;
    int mtu = o->mtu > 0 ? o->mtu : 1500, batch = o->batch > 0 ? o->batch : 64;
    if (mtu < 576 || mtu > 65535 || batch > TUN_BATCH_MAX) {
        LOG_ERROR("chute_options: mtu %d (576..65535) or batch %d (1..%d) out of range", mtu,
                  batch, TUN_BATCH_MAX);
        return CHUTE_ERR_INVALID;
    }
    struct engine_host *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return CHUTE_ERR_NOMEM;
    h->out = o->packets_out;
    h->arg = o->packets_arg;
    /* memory_limit: a shorter queue (packets of the MTU each) and write queue. */
    struct engine_budget b;
    int sized = engine_budget_size(o->memory_limit, &b) == 0 && b.limit != 0;
    size_t queue = o->queue > 0 ? o->queue : sized ? b.queue : 1024;
    h->t = tun_attach_host(mtu, batch, queue, on_out, h);
    if (h->t == NULL) {
        free(h);
        return CHUTE_ERR_NOMEM;
    }
    if (sized)
        tun_wq_limit(h->t, b.wq);
    e->host = h;
    /* Started now, before any other thread can see the engine, so that
     * chute_engine_packets_in may send to it at any time. */
    ev_async_init(&e->_host, on_async);
    e->_host.data = e;
    ev_async_start(e->loop, &e->_host);
    return 0;
}

void
engine_host_free(struct engine *e)
{
    if (e->host == NULL)
        return;
    ev_async_stop(e->loop, &e->_host);
    tun_close(e->host->t);
    free(e->host);
    e->host = NULL;
}

struct tun *
engine_host_tun(const struct engine *e)
{
    return e->host != NULL ? e->host->t : NULL;
}

int
engine_packets_in(struct engine *e, const struct chute_packet *pkts, size_t n)
{
    if (e->host == NULL || (pkts == NULL && n > 0))
        return CHUTE_ERR_INVALID;
    if (n > INT_MAX)
        n = INT_MAX;
    size_t taken = 0;
    while (taken < n) {
        struct tun_packet tp[PUSH_CHUNK];
        size_t k = n - taken < PUSH_CHUNK ? n - taken : PUSH_CHUNK;
        for (size_t i = 0; i < k; i++)
            tp[i] = (struct tun_packet){pkts[taken + i].data, pkts[taken + i].len};
        size_t got = tun_push(e->host->t, tp, k);
        taken += got;
        if (got < k)
            break;
    }
    if (taken > 0)
        ev_async_send(e->loop, &e->_host); /* a no-op while one is pending */
    if (taken == 0 && n > 0)
        return CHUTE_ERR_FULL;
    return (int)taken;
}
