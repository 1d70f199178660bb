#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "chute/chute.h"

/* The packet interface end to end through the public API: packets_in from
 * four threads at once into a running engine (scripts/test tsan runs this
 * under ThreadSanitizer), ICMP echo requests answered by the engine's own
 * datapath and delivered through packets_out in batches; the queue full
 * while the loop runs and before it does. */

#define THREADS 4
#define PER_THREAD 5000

static atomic_size_t replies, out_calls;
static atomic_size_t max_batch;
/* While |stall| is set, the first packets_out call holds the loop thread
 * (|stalled| says it is held) until |stall| is cleared or 10 s pass
 * (|stall_timeout| then says a packets_in call must have blocked). */
static atomic_int stall, stalled, stall_timeout;

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
on_out(void *arg, const struct chute_packet *p, size_t n)
{
    atomic_fetch_add(&out_calls, 1);
    if (n > atomic_load(&max_batch))
        atomic_store(&max_batch, n);
    for (size_t i = 0; i < n; i++)
        if (p[i].len == 28 + 4 && p[i].data[9] == 1 && p[i].data[20] == 0) /* echo reply */
            atomic_fetch_add(&replies, 1);
    if (atomic_load(&stall)) {
        atomic_store(&stalled, 1);
        double until = now_s() + 10;
        while (atomic_load(&stall) && now_s() < until)
            usleep(1000);
        if (atomic_load(&stall))
            atomic_store(&stall_timeout, 1);
        atomic_store(&stalled, 0);
    }
}

static void
reset(void)
{
    atomic_store(&replies, 0);
    atomic_store(&out_calls, 0);
    atomic_store(&max_batch, 0);
    atomic_store(&stall, 0);
    atomic_store(&stalled, 0);
    atomic_store(&stall_timeout, 0);
}

/* An IPv4 ICMP echo request, 10.0.0.2 -> 10.0.0.1, 4 bytes of payload. */
static void
echo_request(uint8_t *p, uint16_t seq)
{
    memset(p, 0, 32);
    p[0] = 0x45;
    p[3] = 32;
    p[8] = 64;
    p[9] = 1;
    memcpy(p + 12, (uint8_t[]){10, 0, 0, 2, 10, 0, 0, 1}, 8);
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2)
        s += (uint32_t)(p[i] << 8 | p[i + 1]);
    s = (s & 0xffff) + (s >> 16);
    s = ~(s + (s >> 16)) & 0xffff;
    p[10] = (uint8_t)(s >> 8);
    p[11] = (uint8_t)s;
    p[20] = 8;
    p[26] = (uint8_t)(seq >> 8);
    p[27] = (uint8_t)seq;
    s = 0;
    for (int i = 20; i < 32; i += 2)
        s += (uint32_t)(p[i] << 8 | p[i + 1]);
    s = (s & 0xffff) + (s >> 16);
    s = ~(s + (s >> 16)) & 0xffff;
    p[22] = (uint8_t)(s >> 8);
    p[23] = (uint8_t)s;
}

/* Producers start together (a barrier) and count how many of them are
 * inside packets_in at once: the test asserts they did overlap. */
static pthread_barrier_t go;
static atomic_int inside, max_inside;

static int
push(chute_engine *e, const struct chute_packet *p, size_t n)
{
    int k = atomic_fetch_add(&inside, 1) + 1;
    for (int m = atomic_load(&max_inside); k > m && !atomic_compare_exchange_weak(&max_inside, &m, k);)
        ;
    int rc = chute_engine_packets_in(e, p, n);
    atomic_fetch_sub(&inside, 1);
    return rc;
}

static void *
produce(void *arg)
{
    chute_engine *e = arg;
    size_t sent = 0;
    pthread_barrier_wait(&go);
    while (sent < PER_THREAD) {
        uint8_t buf[16][32];
        struct chute_packet p[16];
        size_t k = 0;
        for (; k < 16 && sent + k < PER_THREAD; k++) {
            echo_request(buf[k], (uint16_t)(sent + k));
            p[k] = (struct chute_packet){buf[k], 32};
        }
        int rc = push(e, p, k);
        if (rc == CHUTE_ERR_FULL) {
            usleep(100);
            continue;
        }
        assert_true(rc > 0);
        sent += (size_t)rc;
    }
    return NULL;
}

static void *
run(void *arg)
{
    char err[256];
    int rc = chute_engine_run(arg, err, sizeof(err));
    return (void *)(intptr_t)rc;
}

static const char *bundle =
    "local chute = require 'chute'\n"
    "chute.config { log_level = 'warn' }\n"
    "function chute.route(f) return 'DIRECT' end\n";

/* Starts |e|'s loop on its own thread and waits until it answers: one echo
 * request in, its reply out. */
static pthread_t
start_running(chute_engine *e)
{
    char err[256];
    assert_int_equal(chute_engine_load_string(e, bundle, err, sizeof(err)), 0);
    pthread_t loop;
    assert_int_equal(pthread_create(&loop, NULL, run, e), 0);
    uint8_t pkt[32];
    echo_request(pkt, 0);
    struct chute_packet p = {pkt, sizeof(pkt)};
    assert_int_equal(chute_engine_packets_in(e, &p, 1), 1);
    for (int i = 0; i < 1000 && atomic_load(&replies) == 0; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&replies), 1);
    reset();
    return loop;
}

static void
stop_running(chute_engine *e, pthread_t loop)
{
    chute_engine_stop(e);
    void *rc;
    pthread_join(loop, &rc);
    assert_int_equal((intptr_t)rc, 0);
    chute_engine_free(e);
}

/* Four threads at once into a running loop, while this one reads the
 * counters and asks for a reload (the other calls chute.h allows from any
 * thread): every request answered, in batches of at most 32. */
static void
test_threads_echo(void **state)
{
    chute_engine *e;
    struct chute_options o = {.packets_out = on_out, .batch = 32, .queue = 256};
    reset();
    assert_int_equal(chute_engine_new(&e, &o), 0);
    pthread_t loop = start_running(e), th[THREADS];
    atomic_store(&max_inside, 0);
    assert_int_equal(pthread_barrier_init(&go, NULL, THREADS + 1), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, produce, e), 0);
    pthread_barrier_wait(&go);
    struct chute_stats st;
    for (int i = 0; i < 20; i++) {
        chute_engine_stats(e, &st);
        if (i == 5)
            chute_engine_reload(e);
        usleep(1000);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < 1000 && atomic_load(&replies) < THREADS * PER_THREAD; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&replies), THREADS * PER_THREAD);
    assert_true(atomic_load(&max_batch) <= 32);
    assert_true(atomic_load(&out_calls) < THREADS * PER_THREAD); /* batched, not one by one */
    assert_true(atomic_load(&max_inside) >= 2); /* the calls did overlap */
    for (int i = 0; i < 500; i++) { /* the reload lands (its loader is a thread too) */
        chute_engine_stats(e, &st);
        if (st.reloads == 1)
            break;
        usleep(10000);
    }
    assert_int_equal(st.reloads, 1);
    stop_running(e, loop);
}

/* The loop held inside packets_out: from four threads, the queue takes
 * exactly its free room (queue + batch, less the loop's batch) and then
 * every call returns CHUTE_ERR_FULL at once: no call waits for the loop,
 * none grows the queue. Released, the loop answers all it took. */
#define FULL_QUEUE 16
#define FULL_BATCH 4

static atomic_size_t full_taken, full_refused;
static atomic_int full_slowest_us;

static void *
fill(void *arg)
{
    chute_engine *e = arg;
    uint8_t pkt[3][32];
    struct chute_packet p[3];
    for (int i = 0; i < 3; i++) {
        echo_request(pkt[i], (uint16_t)i);
        p[i] = (struct chute_packet){pkt[i], 32};
    }
    pthread_barrier_wait(&go);
    for (int i = 0; i < 200; i++) {
        double t0 = now_s();
        int rc = push(e, p, 3);
        int us = (int)((now_s() - t0) * 1e6);
        for (int m = atomic_load(&full_slowest_us);
             us > m && !atomic_compare_exchange_weak(&full_slowest_us, &m, us);)
            ;
        if (rc == CHUTE_ERR_FULL)
            atomic_fetch_add(&full_refused, 1);
        else if (rc > 0)
            atomic_fetch_add(&full_taken, (size_t)rc);
        else
            fail_msg("packets_in: %d", rc);
    }
    return NULL;
}

static void
test_full_while_running(void **state)
{
    chute_engine *e;
    struct chute_options o = {.packets_out = on_out, .batch = FULL_BATCH, .queue = FULL_QUEUE};
    reset();
    assert_int_equal(chute_engine_new(&e, &o), 0);
    pthread_t loop = start_running(e), th[THREADS];
    atomic_store(&stall, 1);
    uint8_t pkt[32];
    echo_request(pkt, 1);
    struct chute_packet p = {pkt, sizeof(pkt)};
    assert_int_equal(chute_engine_packets_in(e, &p, 1), 1);
    for (int i = 0; i < 1000 && !atomic_load(&stalled); i++)
        usleep(10000);
    assert_true(atomic_load(&stalled)); /* the loop holds that packet as its batch */
    atomic_store(&full_taken, 0);
    atomic_store(&full_refused, 0);
    atomic_store(&full_slowest_us, 0);
    assert_int_equal(pthread_barrier_init(&go, NULL, THREADS + 1), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, fill, e), 0);
    pthread_barrier_wait(&go);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    assert_true(atomic_load(&stalled)); /* still held: nothing was drained meanwhile */
    assert_int_equal(atomic_load(&stall_timeout), 0);
    atomic_store(&stall, 0);
    print_message("queue full: %zu taken, %zu refused, slowest call %d us\n", atomic_load(&full_taken),
                  atomic_load(&full_refused), atomic_load(&full_slowest_us));
    assert_int_equal(atomic_load(&full_taken), FULL_QUEUE + FULL_BATCH - 1);
    assert_true(atomic_load(&full_refused) >= THREADS * 200 - (FULL_QUEUE + FULL_BATCH));
    assert_true(atomic_load(&full_slowest_us) < 2000000); /* the loop was held for all of it */
    for (int i = 0; i < 1000 && atomic_load(&replies) < 1 + FULL_QUEUE + FULL_BATCH - 1; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&replies), 1 + FULL_QUEUE + FULL_BATCH - 1);
    stop_running(e, loop);
}

static void
test_full_and_invalid(void **state)
{
    chute_engine *e;
    uint8_t pkt[32];
    echo_request(pkt, 1);
    struct chute_packet p[40];
    for (int i = 0; i < 40; i++)
        p[i] = (struct chute_packet){pkt, sizeof(pkt)};
    assert_int_equal(chute_engine_new(&e, NULL), 0);
    assert_int_equal(chute_engine_packets_in(e, p, 1), CHUTE_ERR_INVALID); /* no packets_out */
    chute_engine_free(e);

    struct chute_options o = {.packets_out = on_out, .batch = 4, .queue = 16};
    assert_int_equal(chute_engine_new(&e, &o), 0);
    /* Not running: the queue holds 16 + a batch, then says so. */
    assert_int_equal(chute_engine_packets_in(e, p, 40), 20);
    assert_int_equal(chute_engine_packets_in(e, p, 1), CHUTE_ERR_FULL);
    assert_int_equal(chute_engine_packets_in(e, p, 0), 0);
    chute_engine_free(e);

    o.mtu = 100; /* below IPv4's minimum of 576 */
    assert_int_equal(chute_engine_new(&e, &o), CHUTE_ERR_INVALID);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_and_invalid),
        cmocka_unit_test(test_threads_echo),
        cmocka_unit_test(test_full_while_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
