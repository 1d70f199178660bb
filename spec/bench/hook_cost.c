/* What a Lua MITM hook costs per request, through the set the MITM gets
 * (script_mitm_hooks): the target is <= 2 us per hooked request, and a
 * request no hook's pattern matches should cost nothing measurable over a
 * bundle with no hooks.
 *
 *   hook_cost [--quick] [--runs N]
 *
 * Every request is what the MITM does per exchange without I/O: reset the
 * request's arena, parse a 6-field GET head (http_h1_parse_request), take
 * it (http_fwd_request_init), fill a struct mitm_request, then, when the
 * bundle has hooks, wants_request and (if wanted) on_request, and write
 * the upstream head (http_fwd_request_head). Three bundles:
 *   none       no hooks (script_mitm_hooks is NULL: the MITM skips them)
 *   unmatched  one on_request hook whose pattern the URL does not match
 *   hooked     one on_request hook that matches and adds a header
 * 200,000 requests per run (--quick: 20,000), RUNS runs (default 5);
 * printed: ns per request for each (median of the runs), and the two
 * differences with none, which are what the hooks cost. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1_forward.h"
#include "http/http.h"
#include "mitm/mitm.h"
#include "script/script.h"

#include "bench_util.h"

static const char HEAD[] = "GET /api/v1/items?id=42 HTTP/1.1\r\nHost: api.example.com\r\n"
                           "User-Agent: bench/1.0\r\nAccept: */*\r\nAccept-Encoding: gzip\r\n"
                           "Cookie: session=abcdef0123456789\r\nX-Request-Id: 7\r\n\r\n";
static const char URL[] = "https://api.example.com/api/v1/items?id=42";

static const char *const BUNDLES[] = {
    "local chute = require 'chute'\n",
    "local chute = require 'chute'\n"
    "chute.on_request([[^https://other\\.example\\.org/]], function(req)\n"
    "  req.headers['X-Hooked'] = '1'\n"
    "end)\n",
    "local chute = require 'chute'\n"
    "chute.on_request([[^https://api\\.example\\.com/api/]], function(req)\n"
    "  req.headers['X-Hooked'] = '1'\n"
    "end)\n",
};
static const char *const NAMES[] = {"none", "unmatched", "hooked"};

static double
run(struct script *s, size_t n)
{
    const struct mitm_hooks *h = script_mitm_hooks(s);
    struct mem_arena a;
    struct http_request parsed;
    struct http_fwd_req req;
    struct mitm_request m;
    struct mitm_reply reply;
    struct mem_slice out;
    struct http_fwd_opts o = {.form = HTTP_FWD_ORIGIN, .default_host = MEM_SLICE_LIT("api.example.com"), .default_port = 443};
    size_t bytes = 0;

    mem_arena_init(&a);
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        mem_arena_reset(&a);
        int len = http_h1_parse_request(HEAD, sizeof(HEAD) - 1, &parsed);
        if (len <= 0 || http_fwd_request_init(&req, &a, &o, HEAD, (size_t)len, &parsed) != 0) {
            fprintf(stderr, "hook_cost: the request does not parse\n");
            exit(1);
        }
        memset(&m, 0, sizeof(m));
        m.req = &req;
        m.arena = &a;
        m.scheme = "https";
        m.host = MEM_SLICE_LIT("api.example.com");
        m.port = 443;
        m.url = mem_slice(URL, sizeof(URL) - 1);
        if (h != NULL && h->wants_request(h->ud, &m))
            h->on_request(h->ud, &m, &reply);
        if (http_fwd_request_head(&req, &out) != 0) {
            fprintf(stderr, "hook_cost: no upstream head\n");
            exit(1);
        }
        bytes += out.len;
    }
    uint64_t t1 = now_ns();
    mem_arena_fini(&a);
    if (bytes == 0)
        exit(1);
    return (double)(t1 - t0) / (double)n;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
    size_t n = 200000;
    int runs = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            n = 20000;
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: hook_cost [--quick] [--runs N]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 99)
        runs = 5;
    double med[3];
    for (int b = 0; b < 3; b++) {
        char err[512];
        struct script *s = script_load(NULL, BUNDLES[b], err, sizeof(err));
        if (s == NULL) {
            fprintf(stderr, "hook_cost: %s\n", err);
            return 1;
        }
        double t[100];
        run(s, n / 10); /* warm-up */
        for (int r = 0; r < runs; r++)
            t[r] = run(s, n);
        qsort(t, (size_t)runs, sizeof(t[0]), cmp_double);
        med[b] = t[runs / 2];
        struct script_stats st;
        script_stats(s, &st);
        printf("%-10s %8.0f ns/request  (hook calls %llu, errors %llu)\n", NAMES[b], med[b],
               (unsigned long long)st.hook_calls, (unsigned long long)st.hook_errors);
        if (st.hook_errors != 0)
            return 1;
        script_free(s);
    }
    printf("hook that adds a header: %+.3f us per request (target <= 2 us)\n",
           (med[2] - med[0]) / 1000.0);
    printf("hook that matches nothing: %+.3f us per request (target: not measurable)\n",
           (med[1] - med[0]) / 1000.0);
    printf("(%zu requests per run, median of %d runs; the request's parse, arena and head "
           "write included in all three)\n", n, runs);
    return 0;
}
