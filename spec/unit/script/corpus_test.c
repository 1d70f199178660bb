/* The decision corpus: spec/fixtures/corpus is a bundle of lists shaped like
 * the public Surge and Clash/mihomo ones (every format chute reads, CRLF, a
 * BOM, inline comments, YAML flow and block payloads, regexes with commas,
 * two generated 100k-line lists); decisions.txt beside it says what each
 * query must decide, from the originals' documented semantics. The bundle
 * is copied to a temporary folder, gen.sh writes the big lists there, and
 * each query goes through script_route as the engine would call it. The
 * load's warnings (types chute cannot evaluate) are compared exactly.
 * spec/lua/85-corpus.sh runs the same queries through `chute route`. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "flow/flow.h"
#include "script/script.h"

static const char *const want_warnings =
    "warn  chute.ruleset: lists/sukka-reject.list: 2 rules of types chute cannot evaluate "
    "left out (the first: lists/sukka-reject.list:10, USER-AGENT; strict = true makes this an "
    "error)\n"
    "warn  chute.ruleset: lists/acl4ssr-classical.yaml: 2 rules of types chute cannot "
    "evaluate left out (the first: lists/acl4ssr-classical.yaml:10, GEOSITE without geo.geosite; strict = true "
    "makes this an error)\n"
    "warn  chute.ruleset: lists/mihomo-classical.txt: 2 rules of types chute cannot evaluate "
    "left out (the first: lists/mihomo-classical.txt:6, SUB-RULE; strict = true makes this an "
    "error)\n";

static char corpus[4096], bundle[64];

static const char *
fixture(const char *name)
{
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;
    snprintf(corpus, sizeof(corpus), "%.*s/../../fixtures/corpus%s%s", dir,
             slash ? __FILE__ : ".", name[0] ? "/" : "", name);
    return corpus;
}

/* Loads the bundle copy with stderr going to a file; returns the log
 * without timestamps in |log|. */
static struct script *
load_logged(char *log, size_t len)
{
    char err[1024] = "", line[1024];
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);
    size_t used = 0;

    assert_non_null(tmp);
    fflush(stderr);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    struct script *s = script_load(bundle, NULL, err, sizeof(err));
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    if (s == NULL)
        fail_msg("script_load: %s", err);
    rewind(tmp);
    log[0] = '\0';
    while (fgets(line, sizeof(line), tmp) != NULL && used < len) {
        const char *l = strlen(line) > 24 ? line + 24 : line; /* "YYYY-MM-DD hh:mm:ss.mmm " */
        used += (size_t)snprintf(log + used, len - used, "%s", l);
    }
    fclose(tmp);
    return s;
}

/* "DEST" as chute route takes it: [v6]:port, v4:port, name:port, or no port. */
static void
parse_dest(const char *dest, struct flow *f)
{
    char host[256];
    unsigned port = 443;
    const char *colon = strrchr(dest, ':');
    if (dest[0] == '[') {
        const char *close = strchr(dest, ']');
        assert_non_null(close);
        snprintf(host, sizeof(host), "%.*s", (int)(close - dest - 1), dest + 1);
        if (close[1] == ':')
            port = (unsigned)atoi(close + 2);
    } else if (colon != NULL && strchr(dest, ':') == colon) {
        snprintf(host, sizeof(host), "%.*s", (int)(colon - dest), dest);
        port = (unsigned)atoi(colon + 1);
    } else {
        snprintf(host, sizeof(host), "%s", dest);
    }
    assert_int_equal(flow_addr_from_host(&f->dst, host, strlen(host), (uint16_t)port), 0);
}

static void
resolves(struct flow *f, const char *ip)
{
    uint8_t *a = f->resolved.ip[0];
    f->resolved.state = FLOW_RESOLVE_DONE;
    f->resolved.n = 1;
    f->resolved.v6 = strchr(ip, ':') != NULL;
    assert_int_equal(inet_pton(f->resolved.v6 ? AF_INET6 : AF_INET, ip, a), 1);
}

/* One decisions.txt line; returns 0 when it decided as written. */
static int
check_query(struct script *s, char *line, unsigned lineno)
{
    char *arrow = strstr(line, " -> "), *tok, *save = NULL, got[300];
    struct flow f;
    struct sockaddr_in *src = (struct sockaddr_in *)&f.src;

    if (arrow == NULL)
        fail_msg("decisions.txt:%u: no ' -> ' in '%s'", lineno, line);
    *arrow = '\0';
    const char *want = arrow + 4;
    memset(&f, 0, sizeof(f));
    f.id = lineno;
    f.network = FLOW_TCP;
    f.inbound = FLOW_IN_SOCKS;
    f.policy = -1;
    src->sin_family = AF_INET;
    src->sin_addr.s_addr = htonl(0x7f000001);
    src->sin_port = htons(40000);
    parse_dest(strtok_r(line, " ", &save), &f);
    while ((tok = strtok_r(NULL, " ", &save)) != NULL) {
        if (strcmp(tok, "inbound=http") == 0)
            f.inbound = FLOW_IN_HTTP;
        else if (strcmp(tok, "inbound=http-plain") == 0) {
            f.inbound = FLOW_IN_HTTP;
            f.http_plain = 1;
        } else if (strcmp(tok, "inbound=tun") == 0)
            f.inbound = FLOW_IN_TUN;
        else if (strcmp(tok, "inbound=socks") == 0)
            f.inbound = FLOW_IN_SOCKS;
        else if (strcmp(tok, "network=udp") == 0)
            f.network = FLOW_UDP;
        else if (strncmp(tok, "resolves=", 9) == 0)
            resolves(&f, tok + 9);
        else
            fail_msg("decisions.txt:%u: unknown option '%s'", lineno, tok);
    }
    script_route(s, &f);
    snprintf(got, sizeof(got), "%s%s%s", script_policy_name(s, f.policy), f.why[0] ? " " : "",
             f.why);
    free(f.sniffed);
    if (strcmp(got, want) == 0)
        return 0;
    print_error("decisions.txt:%u: %s: want '%s', got '%s'\n", lineno, line, want, got);
    return 1;
}

static void
test_corpus(void **state)
{
    char cmd[9000], log[4096], line[512];
    unsigned lineno = 0, queries = 0, failed = 0;
    (void)state;

    snprintf(bundle, sizeof(bundle), "/tmp/chute-corpus-XXXXXX");
    assert_non_null(mkdtemp(bundle));
    snprintf(cmd, sizeof(cmd), "cp -R '%s/.' '%s' && sh '%s/gen.sh' '%s/lists'", fixture(""),
             bundle, bundle, bundle);
    assert_int_equal(system(cmd), 0);
    struct script *s = load_logged(log, sizeof(log));
    assert_string_equal(log, want_warnings);

    FILE *d = fopen(fixture("decisions.txt"), "r");
    assert_non_null(d);
    while (fgets(line, sizeof(line), d) != NULL) {
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        queries++;
        failed += (unsigned)check_query(s, line, lineno);
    }
    fclose(d);
    script_free(s);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", bundle);
    assert_int_equal(system(cmd), 0);
    assert_true(queries > 50);
    assert_int_equal(failed, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
