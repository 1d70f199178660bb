/* GET /connections with N live flows (default 10,000), through the control
 * API's own request path (a client without a socket): the time to write
 * the whole list, and the most bytes queued at once (the slice bound).
 * Run by scripts/bench/control. Prints "row N ms bytes max_queued". */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/control.h"
#include "flow/flow.h"
#include "log/log.h"

struct seen {
    size_t bytes, max;
};

static void
on_out(void *arg, const char *p, size_t n)
{
    struct seen *s = arg;
    s->bytes += n;
    if (n > s->max)
        s->max = n;
}

static double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int
main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    log_threshold = LOG_LEVEL_ERROR;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct flow_table *t = flow_table_new();
    struct flow *f = calloc(n, sizeof(*f));
    for (size_t i = 0; i < n; i++) {
        f[i].network = FLOW_TCP;
        f[i].inbound = FLOW_IN_SOCKS;
        flow_sockaddr_set(&f[i].src, 4, (const uint8_t *)"\x7f\0\0\1", (uint16_t)(10000 + i % 50000));
        flow_sockaddr_set(&f[i].local, 4, (const uint8_t *)"\x7f\0\0\1", 1080);
        char host[64];
        snprintf(host, sizeof(host), "host-%zu.example.com", i);
        flow_addr_from_host(&f[i].dst, host, strlen(host), 443);
        f[i].rule = "route";
        f[i].policy_name = "auto";
        f[i].via = "hk";
        f[i].bytes_up = i * 31;
        f[i].bytes_down = i * 977;
        flow_table_add(t, &f[i], 1714564800.0 + (double)i / 1000);
    }
    struct control_env env = {.loop = loop, .flows = t};
    char err[128];
    struct control *c = control_new(&env, NULL, err, sizeof(err));
    static const char req[] = "GET /connections HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int r = 0; r < runs; r++) {
        struct seen s = {0};
        struct control_client *cl = control_client_fake(c, on_out, &s);
        double t0 = now_ms();
        control_client_feed(cl, req, sizeof(req) - 1);
        double ms = now_ms() - t0;
        control_client_close(cl);
        printf("row %zu %.2f %zu %zu\n", n, ms, s.bytes, s.max);
    }
    control_free(c);
    for (size_t i = 0; i < n; i++)
        flow_table_remove(t, &f[i], 0, "done");
    free(f);
    flow_table_free(t);
    ev_loop_destroy(loop);
    return 0;
}
