#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "flow/flow.h"

/* An owner as flow/tcp.c or a listener is one: it holds the flow and ends
 * it when asked, through the table. */
struct owned {
    struct flow flow;
    struct flow_table *t;
    const char *state;
    const char *closed_with;
};

static const char *
fake_state(const struct flow *f, void *arg)
{
    return ((struct owned *)arg)->state;
}

static void
fake_close(struct flow *f, void *arg, const char *reason)
{
    struct owned *o = arg;
    o->closed_with = reason;
    flow_table_remove(o->t, &o->flow, 2.0, reason);
}

static const struct flow_owner_ops fake_owner = {.state = fake_state, .close = fake_close};

static void
add(struct flow_table *t, struct owned *o, const char *host, const char *state)
{
    memset(o, 0, sizeof(*o));
    o->t = t;
    o->state = state;
    o->flow.network = FLOW_TCP;
    o->flow.inbound = FLOW_IN_TUN;
    o->flow.rule = "route";
    assert_int_equal(flow_addr_from_host(&o->flow.dst, host, strlen(host), 443), 0);
    flow_table_add(t, &o->flow, 1.0);
    flow_set_owner(&o->flow, &fake_owner, o);
}

static void
count(void *arg, const struct flow *f)
{
    uint64_t *ids = arg;
    ids[ids[0]++ + 1] = f->id;
}

static void
test_find_describe_close(void **state)
{
    struct flow_table *t = flow_table_new();
    struct owned a, b;
    add(t, &a, "a.test", "relay");
    add(t, &b, "b.test", "sniffing");
    assert_ptr_equal(flow_table_find(t, a.flow.id), &a.flow);
    assert_ptr_equal(flow_table_find(t, b.flow.id), &b.flow);
    assert_null(flow_table_find(t, 999));

    char line[512];
    size_t n = flow_describe(&b.flow, 1.5, line, sizeof(line));
    assert_int_equal(n, strlen(line));
    assert_non_null(strstr(line, "-> b.test:443 policy=DIRECT"));
    assert_non_null(strstr(line, "time=0.500s state=sniffing"));
    assert_null(strstr(line, "close="));
    /* Truncated, still terminated. */
    assert_int_equal(flow_describe(&b.flow, 1.5, line, 8), 7);
    assert_int_equal(strlen(line), 7);

    uint64_t ids[4] = {0};
    flow_table_each(t, count, ids);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], a.flow.id); /* oldest first */
    assert_int_equal(ids[2], b.flow.id);

    assert_int_equal(flow_table_close(t, a.flow.id, "closed by the control API"), 0);
    assert_string_equal(a.closed_with, "closed by the control API");
    assert_null(flow_table_find(t, a.flow.id));
    assert_int_equal(flow_table_close(t, a.flow.id, "again"), -1);

    struct flow_table_stats st;
    flow_table_stats(t, &st);
    assert_int_equal(st.active, 1);
    assert_int_equal(st.total, 2);
    flow_table_remove(t, &b.flow, 3.0, "done");
    flow_table_free(t);
}

static void
test_unowned(void **state)
{
    struct flow_table *t = flow_table_new();
    struct flow f = {.network = FLOW_UDP, .inbound = FLOW_IN_TUN};
    assert_int_equal(flow_addr_from_host(&f.dst, "10.0.0.1", 8, 53), 0);
    flow_table_add(t, &f, 0.0);
    assert_int_equal(flow_table_close(t, f.id, "x"), -2);
    char line[256];
    flow_describe(&f, 0.0, line, sizeof(line));
    assert_non_null(strstr(line, "state=unowned"));
    flow_table_remove(t, &f, 0.0, "done");
    flow_table_free(t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_describe_close),
        cmocka_unit_test(test_unowned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
