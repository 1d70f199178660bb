#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "log/counter.h"

/* A module's list, as a module's header would declare it. */
#define DEMO_STATS(X) X(sent, sent) X(lost_bytes, lost) X(peak, peak)
struct demo_stats {
#define X(field, key) uint64_t field;
    DEMO_STATS(X)
#undef X
};
static const struct log_counter demo_counters[] = {
#define X(field, key) LOG_COUNTER(struct demo_stats, field, key)
    DEMO_STATS(X)
#undef X
    LOG_COUNTER_END};

static void
test_demo_table(void **state)
{
    assert_string_equal(demo_counters[0].key, "sent");
    assert_int_equal(demo_counters[0].offset, offsetof(struct demo_stats, sent));
    assert_string_equal(demo_counters[1].key, "lost"); /* the key, not the field */
    assert_int_equal(demo_counters[1].offset, offsetof(struct demo_stats, lost_bytes));
    assert_string_equal(demo_counters[2].key, "peak");
    assert_int_equal(demo_counters[2].offset, offsetof(struct demo_stats, peak));
    assert_null(demo_counters[3].key);
    struct demo_stats d = {.sent = 1, .lost_bytes = 2, .peak = UINT64_MAX};
    assert_int_equal(log_counter_value(&demo_counters[1], &d), 2);
    assert_true(log_counter_value(&demo_counters[2], &d) == UINT64_MAX);
}

static void
test_format(void **state)
{
    struct demo_stats a = {.sent = 1, .lost_bytes = 20, .peak = UINT64_MAX};
    struct demo_stats b = {.sent = 7};
    const struct log_counter_group g[] = {{"", demo_counters, &a}, {"b_", demo_counters, &b}};
    char buf[256] = "stats";
    size_t n = log_counters_format(buf, sizeof(buf), g, 2);
    assert_string_equal(buf, "stats sent=1 lost=20 peak=18446744073709551615 b_sent=7 b_lost=0 "
                             "b_peak=0");
    assert_int_equal(n, strlen(buf));

    /* Cut short when full: still a string, and its length is returned. */
    char small[16] = "x";
    n = log_counters_format(small, sizeof(small), g, 2);
    assert_string_equal(small, "x sent=1 lost=2");
    assert_int_equal(n, sizeof(small) - 1);
    n = log_counters_format(small, sizeof(small), g, 2);
    assert_int_equal(n, sizeof(small) - 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_table),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
