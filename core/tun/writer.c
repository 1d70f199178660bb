#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/log.h"
#include "tun/tun_int.h"

/* The writer thread of a device without offload. There every packet is one
 * write(), and each write runs the receiving stack's work for it (the
 * client's TCP input and wakeup) in the writer's time: a fifth of the
 * loop's time or more (perf: 20% for one flow, 29% for eight). A flush of
 * many packets is handed to this thread with the queue's buffer, so the
 * loop goes on reading and relaying while the kernel takes them, on the
 * other core when there is one. A small flush (an upload's ACKs) is
 * written inline: a wakeup costs more than it saves there, and an ACK must
 * not wait behind a thread switch.
 *
 * Order is kept: a flush first waits until the writer has written the
 * buffer before, so an ACK queued right after a handoff waits for that
 * buffer's writes (what writing it inline would have cost anyway). The thread sees plain entries only: ref entries hold
 * lwIP's pbufs, which only the loop may release, so tun_wq_ref_ok says no
 * while a writer runs. It touches nothing but the buffer, the fd and its
 * own counters, which the loop reads under the lock. It does not log: the
 * loop logs its first refused write. */

/* Flushes of at least this many bytes go to the thread (about 40 packets
 * of MTU 1500: what a download's batch queues; an ACK-only flush is a few
 * hundred bytes). */
#define WRITER_MIN (64 * 1024)

struct tun_writer {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf; /* being written; NULL while idle */
    size_t len;
    uint8_t *spare; /* the queue's other buffer, while idle */
    int stop;
    uint64_t pkts, bytes, drops; /* the thread's, under mu */
    int err;                     /* the first refused write's errno (-1: short) */
    int warned;
};

static void
write_all(struct tun_writer *w, const uint8_t *b, size_t used, int fd)
{
    uint64_t pkts = 0, bytes = 0, drops = 0;
    int err = 0;
    for (size_t off = 0; off < used;) {
        uint32_t l;
        memcpy(&l, b + off, TUN_WQ_HDR);
        ssize_t n = write(fd, b + off + TUN_WQ_HDR, l);
        if (n == (ssize_t)l) {
            pkts++;
            bytes += l;
        } else if (drops++ == 0) {
            err = n < 0 ? errno : -1;
        }
        off += TUN_WQ_HDR + l;
    }
    pthread_mutex_lock(&w->mu);
    w->pkts += pkts;
    w->bytes += bytes;
    w->drops += drops;
    if (w->err == 0)
        w->err = err;
    pthread_mutex_unlock(&w->mu);
}

static void *
run(void *arg)
{
    struct tun *t = arg;
    struct tun_writer *w = t->writer;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->buf == NULL && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->buf == NULL)
            break; /* stopping, nothing left */
        uint8_t *b = w->buf;
        size_t len = w->len;
        pthread_mutex_unlock(&w->mu);
        write_all(w, b, len, t->fd);
        pthread_mutex_lock(&w->mu);
        w->spare = b;
        w->buf = NULL;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int
tun_writer_start(struct tun *t)
{
    struct tun_writer *w = calloc(1, sizeof(*w));
    if (w == NULL || (w->spare = malloc(t->wq_cap)) == NULL) {
        free(w);
        return -1;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    t->writer = w;
    int rc = pthread_create(&w->th, NULL, run, t);
    if (rc != 0) {
        errno = rc;
        t->writer = NULL;
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w->spare);
        free(w);
        return -1;
    }
    return 0;
}

/* Waits until the thread is idle; with w->mu held. */
static void
wait_idle(struct tun_writer *w)
{
    while (w->buf != NULL)
        pthread_cond_wait(&w->cv, &w->mu);
}

int
tun_writer_take(struct tun *t)
{
    struct tun_writer *w = t->writer;
    pthread_mutex_lock(&w->mu);
    wait_idle(w);
    if (w->err != 0 && !w->warned) {
        w->warned = 1;
        LOG_WARN("tun %s: a write: %s (counted as wq_drops from now on)", t->name,
                 w->err < 0 ? "short write" : strerror(w->err));
    }
    int take = t->wq_used >= WRITER_MIN;
    if (take) {
        w->buf = t->wq;
        w->len = t->wq_used;
        t->wq = w->spare;
        w->spare = NULL;
        t->st.wq_handoffs++;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return take;
}

void
tun_writer_stats(const struct tun *t, struct tun_stats *st)
{
    struct tun_writer *w = t->writer;
    pthread_mutex_lock(&w->mu);
    st->pkts_out += w->pkts;
    st->bytes_out += w->bytes;
    st->wq_drops += w->drops;
    pthread_mutex_unlock(&w->mu);
}

void
tun_writer_stop(struct tun *t)
{
    struct tun_writer *w = t->writer;
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1; /* the thread writes what it holds first */
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->spare);
    free(w);
    t->writer = NULL;
}
