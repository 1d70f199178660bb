#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "chute/chute.h"

/* The packet interface end to end through the public API: packets_in from
 * four threads into a running engine, ICMP echo requests answered by the
 * engine's own datapath and delivered through packets_out in batches. */

#define THREADS 4
#define PER_THREAD 5000

static atomic_size_t replies, out_calls;
static atomic_size_t max_batch;

static void
on_out(void *arg, const struct chute_packet *p, size_t n)
{
    atomic_fetch_add(&out_calls, 1);
    if (n > atomic_load(&max_batch))
        atomic_store(&max_batch, n);
    for (size_t i = 0; i < n; i++)
        if (p[i].len == 28 + 4 && p[i].data[9] == 1 && p[i].data[20] == 0) /* echo reply */
            atomic_fetch_add(&replies, 1);
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

static void *
produce(void *arg)
{
    chute_engine *e = arg;
    size_t sent = 0;
    while (sent < PER_THREAD) {
        uint8_t buf[16][32];
        struct chute_packet p[16];
        size_t k = 0;
        for (; k < 16 && sent + k < PER_THREAD; k++) {
            echo_request(buf[k], (uint16_t)(sent + k));
            p[k] = (struct chute_packet){buf[k], 32};
        }
        int rc = chute_engine_packets_in(e, p, k);
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

static void
test_threads_echo(void **state)
{
    chute_engine *e;
    struct chute_options o = {.packets_out = on_out, .batch = 32, .queue = 256};
    assert_int_equal(chute_engine_new(&e, &o), 0);
    char err[256];
    assert_int_equal(chute_engine_load_string(e, bundle, err, sizeof(err)), 0);
    pthread_t loop, th[THREADS];
    assert_int_equal(pthread_create(&loop, NULL, run, e), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, produce, e), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 500 && atomic_load(&replies) < THREADS * PER_THREAD; i++)
        usleep(10000);
    chute_engine_stop(e);
    void *rc;
    pthread_join(loop, &rc);
    assert_int_equal((intptr_t)rc, 0);
    assert_int_equal(atomic_load(&replies), THREADS * PER_THREAD);
    assert_true(atomic_load(&max_batch) <= 32);
    assert_true(atomic_load(&out_calls) < THREADS * PER_THREAD); /* batched, not one by one */
    chute_engine_free(e);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
