/* The chute command line: run, check, route, ca, version. It uses only the
 * public embedding API, plus the script host for `route` and the CA's
 * commands (ca_cli.c). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "chute/chute.h"
#include "dns/dns.h"
#include "engine/engine.h"
#include "engine/trim.h"
#include "control/control.h"
#include "log/log.h"
#include "flow/flow.h"
#include "script/script.h"

static const char usage_main[] =
    "usage: chute <command> [options] [args]\n"
    "\n"
    "commands:\n"
    "  run BUNDLE          run the engine on a script bundle (a folder with main.lua)\n"
    "  check BUNDLE        load and validate a bundle without opening sockets\n"
    "  route BUNDLE DEST   print the policy route() gives DEST (HOST or IP, optional :PORT)\n"
    "  import CONFIG -o DIR write a bundle from a Clash/mihomo config.yaml or a Surge\n"
    "                      profile.conf\n"
    "  update BUNDLE       fetch the bundle's remote rule sets and providers once\n"
    "  ca init|export|path make, print or locate the local CA the MITM signs leaves with\n"
    "  ctl COMMAND         drive a running chute over its control API (status, flows,\n"
    "                      close, select, reload, logs)\n"
    "  version             print the version\n"
    "\n"
    "`chute <command> --help` describes each command.\n";

static const char usage_run[] =
    "usage: chute run [--log-level LEVEL] [--log-format text|json] BUNDLE\n"
    "\n"
    "Runs the engine on BUNDLE until SIGINT or SIGTERM. SIGHUP reloads the\n"
    "bundle: new flows use the new script, flows in flight keep their decision,\n"
    "and a bundle that fails to load leaves the running one in place.\n"
    "\n"
    "  --log-level LEVEL   error, warn, info or debug (default: the bundle's\n"
    "                      log_level, else info)\n"
    "  --log-format FORMAT text, or json: one object per line (default: the\n"
    "                      bundle's log_format, else text). SIGUSR2 reopens\n"
    "                      the bundle's log_file (logrotate).\n";

static const char usage_check[] =
    "usage: chute check BUNDLE\n"
    "\n"
    "Loads BUNDLE as `run` would, without opening sockets, and refuses what\n"
    "run would: no listener at all, two listeners on one port. Prints \"ok\"\n"
    "and exits 0 (warnings, such as a bundle without route(), on stderr), or\n"
    "prints the error with its file:line and exits 1.\n";

static const char usage_route[] =
    "usage: chute route [--network tcp|udp] [--inbound socks|http|tun] BUNDLE DEST\n"
    "\n"
    "Calls the bundle's route() once for a flow to DEST (example.com,\n"
    "example.com:443, 192.0.2.1:80, [2001:db8::1]:443; port 443 by default)\n"
    "and prints the policy and the rule that decided it. Exits 3 when route()\n"
    "failed (an error, the budget, a bad return value) and the answer is the\n"
    "fallback policy; 1 when the bundle does not load.\n";

static int
wants_help(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* More descriptors: each relayed connection holds two sockets and, while
 * bytes move, two pipes. */
static void
raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int
cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"log-level", required_argument, NULL, 'l'},
        {"log-format", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct chute_options o = {.handle_signals = 1};
    int c;
    engine_mem_keep_top();
    optind = 2;
    while ((c = getopt_long(argc, argv, "l:f:h", opts, NULL)) != -1) {
        if (c == 'f') {
            if (log_format_parse(optarg) < 0) {
                fprintf(stderr, "chute run: --log-format '%s': expected text or json\n", optarg);
                return 2;
            }
            engine_cli_log_format(log_format_parse(optarg));
        } else if (c == 'l') {
            if (log_level_parse(optarg) < 0) {
                fprintf(stderr, "chute run: --log-level '%s': expected error, warn, info or debug\n",
                        optarg);
                return 2;
            }
            o.log_level = optarg;
        } else if (c == 'h') {
            fputs(usage_run, stdout);
            return 0;
        } else {
            fputs(usage_run, stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fputs(usage_run, stderr);
        return 2;
    }
    if (engine_cli_bundle_arg("run", argv[optind]) != 0)
        return 1;
    raise_nofile();
    chute_engine *e;
    char err[1024];
    if (chute_engine_new(&e, &o) != 0) {
        fprintf(stderr, "chute: cannot create the engine\n");
        return 1;
    }
    if (chute_engine_load_bundle(e, argv[optind], err, sizeof(err)) != 0) {
        fprintf(stderr, "chute: %s\n", err);
        chute_engine_free(e);
        return 1;
    }
    int rc = chute_engine_run(e, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "chute: %s\n", err);
    chute_engine_free(e);
    return rc == 0 ? 0 : 1;
}

static int
cmd_check(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_check, stdout);
        return 0;
    }
    if (argc != 3) {
        fputs(usage_check, stderr);
        return 2;
    }
    char err[1024];
    if (engine_cli_bundle_arg("check", argv[2]) != 0)
        return 1;
    if (engine_bundle_check(argv[2], 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "chute: %s\n", err);
        return 1;
    }
    printf("ok: %s\n", argv[2]);
    return 0;
}

/* DEST: host, host:port, v4:port, [v6]:port, or a bare v6 literal. */
static int
parse_dest(const char *s, struct flow_addr *a)
{
    const char *host = s, *colon = strrchr(s, ':');
    size_t hlen = strlen(s);
    long port = 443;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL)
            return -1;
        host = s + 1;
        hlen = (size_t)(rb - host);
        colon = rb[1] == ':' ? rb + 1 : NULL;
        if (rb[1] != '\0' && colon == NULL)
            return -1;
    } else if (colon != NULL && strchr(s, ':') != colon) {
        colon = NULL; /* a bare IPv6 literal */
    } else if (colon != NULL) {
        hlen = (size_t)(colon - s);
    }
    if (colon != NULL) {
        char *end;
        port = strtol(colon + 1, &end, 10);
        if (*end != '\0' || port < 1 || port > 65535)
            return -1;
    }
    return flow_addr_from_host(a, host, hlen, (uint16_t)port);
}

struct sync_rq {
    struct flow *f;
    int done;
};

static void
on_resolved(void *arg, const char *err, const struct sockaddr_storage *addrs, size_t n)
{
    struct sync_rq *rq = arg;
    engine_resolved_store(rq->f, err, addrs, n);
    rq->done = 1;
}

/* chute route resolves a name for its IP rules on a loop of its own. */
static void
resolve_now(struct script *s, struct flow *f)
{
    struct dns_resolver_opts ro;
    char err[256];
    struct sync_rq rq = {f, 0};
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    f->resolved.state = FLOW_RESOLVE_FAILED;
    if (loop == NULL)
        return;
    engine_resolver_opts(script_config(s), &ro);
    struct dns_resolver *r = dns_resolver_new(loop, &ro, err, sizeof(err));
    if (r != NULL && dns_resolve(r, f->dst.name, on_resolved, &rq) != NULL)
        while (!rq.done)
            ev_run(loop, EVRUN_ONCE);
    else
        fprintf(stderr, "chute route: cannot resolve %s: %s\n", f->dst.name,
                r == NULL ? err : "out of memory");
    dns_resolver_free(r);
    ev_loop_destroy(loop);
}

static int
cmd_route(int argc, char **argv)
{
    static const struct option opts[] = {
        {"network", required_argument, NULL, 'n'},
        {"inbound", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct flow f = {.id = 1, .network = FLOW_TCP, .inbound = FLOW_IN_SOCKS};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "n:i:h", opts, NULL)) != -1) {
        if (c == 'n' && (strcmp(optarg, "tcp") == 0 || strcmp(optarg, "udp") == 0)) {
            f.network = optarg[0] == 'u' ? FLOW_UDP : FLOW_TCP;
        } else if (c == 'i' && strcmp(optarg, "socks") == 0) {
            f.inbound = FLOW_IN_SOCKS;
        } else if (c == 'i' && strcmp(optarg, "http") == 0) {
            f.inbound = FLOW_IN_HTTP;
        } else if (c == 'i' && strcmp(optarg, "tun") == 0) {
            f.inbound = FLOW_IN_TUN;
        } else if (c == 'h') {
            fputs(usage_route, stdout);
            return 0;
        } else {
            fputs(usage_route, stderr);
            return 2;
        }
    }
    if (optind != argc - 2) {
        fputs(usage_route, stderr);
        return 2;
    }
    if (parse_dest(argv[optind + 1], &f.dst) != 0) {
        fprintf(stderr, "chute route: '%s' is not HOST[:PORT], IP[:PORT] or [IPv6]:PORT\n",
                argv[optind + 1]);
        return 2;
    }
    char err[1024];
    if (engine_cli_bundle_arg("route", argv[optind]) != 0)
        return 1;
    struct script *s = script_load(argv[optind], NULL, err, sizeof(err));
    if (s == NULL) {
        fprintf(stderr, "chute: %s\n", err);
        return 1;
    }
    struct sockaddr_in *src = (struct sockaddr_in *)&f.src;
    src->sin_family = AF_INET;
    src->sin_addr.s_addr = htonl(0x7f000001);
    f._resolvable = 1; /* as the engine: an IP rule may wait for the name */
    struct script_stats before, after;
    script_stats(s, &before);
    script_route(s, &f);
    char shown[600] = "";
    if ((f._reads & FLOW_READ_RESOLVE) && f._resolvable && f.resolved.state == FLOW_RESOLVE_NONE) {
        /* An IP rule needs the name's addresses: resolve as the engine
         * would (its resolver, the bundle's DNS servers), decide again. */
        resolve_now(s, &f);
        f._reads = 0;
        f.why[0] = '\0';
        script_route(s, &f);
        char a[256];
        engine_resolved_format(&f.resolved, a, sizeof(a));
        snprintf(shown, sizeof(shown), "\tresolved %s: %s", f.dst.name, a);
    }
    printf("%s\t%s%s%s%s\n", script_policy_name(s, f.policy), f.rule, f.why[0] ? " " : "", f.why,
           shown);
    /* A bundle author's CI must see a route() that failed: the answer is
     * only the fallback. */
    script_stats(s, &after);
    int failed = after.route_errors != before.route_errors;
    if (failed)
        fprintf(stderr, "chute route: route() failed (%s), so %s is only the fallback policy\n",
                f.rule, script_policy_name(s, f.policy));
    script_free(s);
    return failed ? 3 : 0;
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc, argv);
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc, argv);
    if (strcmp(cmd, "route") == 0)
        return cmd_route(argc, argv);
    if (strcmp(cmd, "import") == 0)
        return engine_import_main(argc, argv);
    if (strcmp(cmd, "ca") == 0)
        return engine_ca_main(argc, argv);
    if (strcmp(cmd, "update") == 0)
        return engine_update_main(argc, argv);
    if (strcmp(cmd, "ctl") == 0)
        return control_ctl_main(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("chute %s\n", chute_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(usage_main, stdout);
        return 0;
    }
    fprintf(stderr, "chute: unknown command '%s'\n\n%s", cmd, usage_main);
    return 2;
}
