#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log/log.h"
#include "tun/tun_int.h"

/* The reader thread of a device without offload, the writer's (writer.c)
 * counterpart. There every packet is one read(), and the reads were 40% of
 * the loop's time with eight uploads (perf), the loop at a full core while
 * the machine had a core's third to spare. The thread reads into a ring of
 * MTU-sized slots and tells the loop through an eventfd, which the loop
 * waits on instead of the device: tun_read_batch then takes up to a batch
 * from the ring without a system call, one wakeup per batch as before.
 *
 * Slots are the loop's from tun_read_batch until its next call (as the
 * device's buffers are); the thread fills only slots past |tail|. Counters
 * only grow (the slot is the counter modulo |cap|), so the thread can read
 * into its slots outside the lock. The lock is taken once per burst of
 * reads and once per batch, never per packet. The thread touches the ring,
 * the fds and its own fields; it does not log (the loop logs a failed read,
 * after which the thread has ended). */

#define RING_BATCHES 4 /* slots: this many batches, so the thread reads on while the loop works */

struct tun_reader {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t room; /* the loop freed slots */
    int efd;             /* readable while packets wait (armed) */
    int stop_fd;         /* readable: the thread ends */
    uint8_t *buf;
    uint16_t *len;
    size_t stride, cap;
    size_t head, held, tail; /* head <= head + held <= tail <= head + cap */
    int armed, waiting, stop;
    int err, warned;
};

static void
arm(struct tun_reader *r)
{
    uint64_t one = 1;
    ssize_t n;
    do
        n = write(r->efd, &one, sizeof(one));
    while (n < 0 && errno == EINTR);
}

/* Reads what the device has into the free slots; returns how many, and
 * in |*err| a read's errno other than EAGAIN. */
static size_t
read_burst(struct tun *t, struct tun_reader *r, size_t tail, size_t room, int *err)
{
    size_t n = 0;
    while (n < room) {
        size_t i = (tail + n) % r->cap;
        ssize_t k = read(t->fd, r->buf + i * r->stride, t->bufsize);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k < 0 && errno != EAGAIN)
                *err = errno;
            break;
        }
        r->len[i] = (uint16_t)k;
        n++;
    }
    return n;
}

/* Makes |n| more slots the loop's (and |err| its to see) and wakes it. */
static void
publish(struct tun_reader *r, size_t n, int err)
{
    pthread_mutex_lock(&r->mu);
    r->tail += n;
    if (err != 0)
        r->err = err;
    int wake = !r->armed;
    r->armed = 1;
    pthread_mutex_unlock(&r->mu);
    if (wake)
        arm(r);
}

static void *
run(void *arg)
{
    struct tun *t = arg;
    struct tun_reader *r = t->reader;
    struct pollfd p[2] = {{.fd = t->fd, .events = POLLIN}, {.fd = r->stop_fd, .events = POLLIN}};
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (r->tail - r->head == r->cap && !r->stop) {
            r->waiting = 1;
            pthread_cond_wait(&r->room, &r->mu);
        }
        r->waiting = 0;
        int stop = r->stop;
        size_t tail = r->tail, room = r->cap - (r->tail - r->head);
        pthread_mutex_unlock(&r->mu);
        if (stop)
            break;
        if (room > (size_t)t->batch)
            room = (size_t)t->batch;
        int err = 0;
        size_t n = read_burst(t, r, tail, room, &err);
        if (n > 0 || err != 0) {
            publish(r, n, err);
            if (err != 0)
                break; /* the device failed: the loop stops its TUN path */
            continue;  /* read on until the device is empty */
        }
        if (poll(p, 2, -1) < 0 && errno != EINTR) {
            publish(r, 0, errno);
            break;
        }
        if (p[1].revents != 0)
            break;
        if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            publish(r, 0, EIO); /* the device is gone: tell the loop, not spin */
            break;
        }
    }
    return NULL;
}

int
tun_reader_start(struct tun *t)
{
    struct tun_reader *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -1;
    r->cap = (size_t)t->batch * RING_BATCHES;
    r->stride = (t->bufsize + 63) & ~(size_t)63;
    r->buf = aligned_alloc(64, r->stride * r->cap);
    r->len = calloc(r->cap, sizeof(*r->len));
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->buf == NULL || r->len == NULL || r->efd < 0 || r->stop_fd < 0)
        goto fail;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->room, NULL);
    t->reader = r;
    int rc = pthread_create(&r->th, NULL, run, t);
    if (rc == 0)
        return 0;
    t->reader = NULL;
    pthread_cond_destroy(&r->room);
    pthread_mutex_destroy(&r->mu);
    errno = rc;
fail:
    rc = errno;
    if (r->efd >= 0)
        close(r->efd);
    if (r->stop_fd >= 0)
        close(r->stop_fd);
    free(r->buf);
    free(r->len);
    free(r);
    errno = rc;
    return -1;
}

int
tun_reader_fd(const struct tun *t)
{
    return t->reader->efd;
}

int
tun_reader_read(struct tun *t, struct tun_batch *b)
{
    struct tun_reader *r = t->reader;
    pthread_mutex_lock(&r->mu);
    r->head += r->held; /* the previous batch is done with */
    size_t n = r->tail - r->head;
    r->held = n < (size_t)t->batch ? n : (size_t)t->batch;
    size_t head = r->head;
    if (r->held == n && r->armed) {
        uint64_t v;
        r->armed = 0; /* all taken: the thread arms again with the next packet */
        (void)!read(r->efd, &v, sizeof(v));
    }
    if (r->waiting)
        pthread_cond_signal(&r->room);
    int err = r->err;
    pthread_mutex_unlock(&r->mu);
    if (r->held == 0 && err != 0) {
        if (!r->warned)
            LOG_ERROR("tun %s: read: %s", t->name, strerror(err));
        r->warned = 1;
        errno = err;
        return -1;
    }
    return tun_ring_batch(t, b, r->buf, r->len, r->stride, r->cap, head, r->held);
}

void
tun_reader_stop(struct tun *t)
{
    struct tun_reader *r = t->reader;
    if (r == NULL)
        return;
    uint64_t one = 1;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_signal(&r->room);
    pthread_mutex_unlock(&r->mu);
    (void)!write(r->stop_fd, &one, sizeof(one));
    pthread_join(r->th, NULL);
    pthread_cond_destroy(&r->room);
    pthread_mutex_destroy(&r->mu);
    close(r->efd);
    close(r->stop_fd);
    free(r->buf);
    free(r->len);
    free(r);
    t->reader = NULL;
}
