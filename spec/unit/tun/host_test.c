#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tun/tun.h"

/* core/tun/host.c: the host endpoint's queue (pushes from any thread, the
 * loop's batches) and its write queue flushing to a callback. */

struct sink {
    size_t calls, pkts, max_batch;
    uint8_t last[64];
};

static void
on_out(void *arg, const struct tun_batch *b)
{
    struct sink *s = arg;
    s->calls++;
    s->pkts += b->n;
    if (b->n > s->max_batch)
        s->max_batch = b->n;
    memcpy(s->last, b->data[b->n - 1], b->len[b->n - 1] < 64 ? b->len[b->n - 1] : 64);
}

static void
test_push_read_order(void **state)
{
    struct sink s = {0};
    struct tun *t = tun_attach_host(1500, 4, 16, on_out, &s);
    assert_non_null(t);
    uint8_t buf[10][20], big[1501] = {0};
    struct tun_packet p[12];
    for (int i = 0; i < 10; i++) {
        memset(buf[i], i, sizeof(buf[i]));
        p[i] = (struct tun_packet){buf[i], (size_t)(i + 1)};
    }
    p[10] = (struct tun_packet){big, sizeof(big)}; /* over the MTU: dropped */
    p[11] = (struct tun_packet){big, 0};           /* empty: dropped */
    assert_int_equal(tun_push(t, p, 12), 12);
    assert_int_equal(tun_push_pending(t), 10);
    memset(buf, 0xee, sizeof(buf)); /* copied: the caller's buffers are free */
    struct tun_batch b;
    int seen = 0;
    while (tun_read_batch(t, &b) > 0) {
        assert_true(b.n <= 4);
        for (size_t k = 0; k < b.n; k++, seen++) {
            assert_int_equal(b.len[k], seen + 1);
            assert_int_equal(b.data[k][0], seen);
        }
    }
    assert_int_equal(seen, 10);
    struct tun_stats st;
    tun_stats(t, &st);
    assert_int_equal(st.host_drops, 2);
    assert_int_equal(st.pkts_in, 10);
    tun_close(t);
}

static void
test_full(void **state)
{
    struct sink s = {0};
    struct tun *t = tun_attach_host(1500, 4, 16, on_out, &s); /* 16 + a batch of 4 */
    assert_non_null(t);
    uint8_t pkt[100] = {0x45};
    struct tun_packet p[30];
    for (int i = 0; i < 30; i++)
        p[i] = (struct tun_packet){pkt, sizeof(pkt)};
    assert_int_equal(tun_push(t, p, 30), 20);
    assert_int_equal(tun_push(t, p, 1), 0);
    struct tun_batch b;
    assert_int_equal(tun_read_batch(t, &b), 4);
    /* The loop's batch is still held until its next read. */
    assert_int_equal(tun_push(t, p, 1), 0);
    assert_int_equal(tun_read_batch(t, &b), 4);
    assert_int_equal(tun_push(t, p, 10), 4);
    struct tun_stats st;
    tun_stats(t, &st);
    assert_int_equal(st.host_full, 10 + 1 + 1 + 6);
    tun_close(t);
}

static void
test_flush_batches(void **state)
{
    struct sink s = {0};
    struct tun *t = tun_attach_host(1500, 8, 16, on_out, &s);
    assert_non_null(t);
    for (int i = 0; i < 20; i++) {
        uint8_t *slot = tun_wq_reserve(t, 60);
        assert_non_null(slot);
        memset(slot, i, 60);
        tun_wq_commit(t, 60);
    }
    assert_null(tun_wq_reserve(t, 1501));
    tun_wq_flush(t);
    assert_int_equal(s.pkts, 20);
    assert_int_equal(s.calls, 3); /* 8 + 8 + 4 */
    assert_int_equal(s.max_batch, 8);
    assert_int_equal(s.last[0], 19);
    assert_int_equal(tun_wq_pending(t), 0);
    tun_close(t);
}

/* Four producers at once against the loop's reads: every packet arrives
 * once, each thread's in its order (run under -DCMAKE_BUILD_TYPE=Tsan). */
#define THREADS 4
#define PER_THREAD 20000

struct producer {
    struct tun *t;
    uint8_t id;
};

static void *
produce(void *arg)
{
    struct producer *pr = arg;
    uint32_t seq = 0;
    while (seq < PER_THREAD) {
        uint8_t pkt[8][8];
        struct tun_packet p[8];
        size_t k = 0;
        for (; k < 8 && seq + k < PER_THREAD; k++) {
            uint32_t v = seq + (uint32_t)k;
            pkt[k][0] = pr->id;
            memcpy(&pkt[k][1], &v, 4);
            p[k] = (struct tun_packet){pkt[k], 5};
        }
        seq += (uint32_t)tun_push(pr->t, p, k); /* full: retry the rest */
    }
    return NULL;
}

static void
test_threads(void **state)
{
    struct sink s = {0};
    struct tun *t = tun_attach_host(1500, 64, 256, on_out, &s);
    assert_non_null(t);
    pthread_t th[THREADS];
    struct producer pr[THREADS];
    for (int i = 0; i < THREADS; i++) {
        pr[i] = (struct producer){t, (uint8_t)i};
        assert_int_equal(pthread_create(&th[i], NULL, produce, &pr[i]), 0);
    }
    uint32_t next[THREADS] = {0};
    size_t total = 0;
    while (total < THREADS * PER_THREAD) {
        struct tun_batch b;
        int n = tun_read_batch(t, &b);
        for (int k = 0; k < n; k++) {
            uint32_t v;
            assert_int_equal(b.len[k], 5);
            assert_true(b.data[k][0] < THREADS);
            memcpy(&v, &b.data[k][1], 4);
            assert_int_equal(v, next[b.data[k][0]]);
            next[b.data[k][0]]++;
        }
        total += (size_t)n;
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(tun_push_pending(t), 0);
    tun_close(t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_read_order),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_flush_batches),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
