/* flow_cursor: a walk of the live flows that survives removals between
 * its steps (the control API writes GET /connections in slices). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "flow/flow.h"
#include "log/log.h"

static void
survives_removals(void **st)
{
    log_threshold = LOG_LEVEL_ERROR;
    struct flow_table *t = flow_table_new();
    struct flow f[5];
    memset(f, 0, sizeof(f));
    for (int i = 0; i < 5; i++)
        flow_table_add(t, &f[i], 0);
    struct flow_cursor a, b;
    flow_cursor_open(t, &a);
    flow_cursor_open(t, &b);
    assert_ptr_equal(flow_cursor_next(t, &a), &f[0]);
    /* a is at f[1]: removing it moves a on to f[2]; b (at f[0]) too. */
    flow_table_remove(t, &f[1], 0, "done");
    flow_table_remove(t, &f[0], 0, "done");
    assert_ptr_equal(flow_cursor_next(t, &a), &f[2]);
    assert_ptr_equal(flow_cursor_next(t, &b), &f[2]);
    flow_table_remove(t, &f[4], 0, "done");
    assert_ptr_equal(flow_cursor_next(t, &a), &f[3]);
    assert_null(flow_cursor_next(t, &a));
    assert_null(flow_cursor_next(t, &a));
    flow_cursor_close(t, &a);
    /* A flow added while b walks is seen: it joins at the end. */
    struct flow g;
    memset(&g, 0, sizeof(g));
    flow_table_add(t, &g, 0);
    assert_ptr_equal(flow_cursor_next(t, &b), &f[3]);
    assert_ptr_equal(flow_cursor_next(t, &b), &g);
    assert_null(flow_cursor_next(t, &b));
    flow_cursor_close(t, &b);
    /* Closed cursors are not moved any more. */
    flow_table_remove(t, &f[2], 0, "done");
    flow_table_remove(t, &f[3], 0, "done");
    flow_table_remove(t, &g, 0, "done");
    flow_table_free(t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(survives_removals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
