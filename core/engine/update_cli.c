#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"
#include "engine/engine.h"
#include "fetch/fetch.h"
#include "outbound/outbound.h"
#include "outbound/set.h"
#include "script/script.h"
#include "tls/tls.h"

/* chute update BUNDLE: every remote rule set and provider of the bundle
 * fetched once, now, through its via policy, with the caches written as
 * the running engine writes them; a line per item; exit 1 if any failed.
 * A running chute picks the new caches up at its next reload (SIGHUP). */

static const char usage[] =
    "usage: chute update BUNDLE\n"
    "\n"
    "Fetches each remote rule set (chute.ruleset { url = ... }) and proxy\n"
    "provider (chute.provider) of BUNDLE once, writes their caches in chute's\n"
    "state folder, and prints a line per item: fetched, not modified, or\n"
    "failed with the reason. Exits 1 if any failed, 0 otherwise.\n";

struct update {
    struct script *s;
    int failed;
};

static int
validate(void *ud, const struct fetch_item_cfg *c, const char *buf, size_t len, char *note,
         size_t notelen)
{
    return script_remote_validate(c, buf, len, note, notelen);
}

static void
updated(void *ud, const struct fetch_item_cfg *c)
{
}

static void
report(void *ud, const struct fetch_item_cfg *c, enum fetch_outcome o, const char *why)
{
    struct update *u = ud;
    const char *kind = c->kind == FETCH_RULESET ? "ruleset" : c->kind == FETCH_GEO ? "geo" : "provider";
    if (o == FETCH_FETCHED)
        printf("fetched\t%s %s\t%s\t%s\n", kind, c->name, why ? why : "", c->path);
    else if (o == FETCH_NOT_MODIFIED)
        printf("not modified\t%s %s\t%s\n", kind, c->name, c->path);
    else {
        printf("failed\t%s %s\t%s\n", kind, c->name, why ? why : "?");
        u->failed = 1;
    }
    fflush(stdout);
}

static int
policy(void *ud, const char *name)
{
    return script_policy_lookup(((struct update *)ud)->s, name);
}

int
engine_update_main(int argc, char **argv)
{
    if (argc == 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc != 3) {
        fputs(usage, stderr);
        return 2;
    }
    char err[1024];
    struct update u = {0};
    if ((u.s = script_load(argv[2], NULL, err, sizeof(err))) == NULL) {
        fprintf(stderr, "chute: %s\n", err);
        return 1;
    }
    size_t n;
    const struct fetch_item_cfg *items = script_remotes(u.s, &n);
    if (n == 0) {
        printf("%s has no remote rule sets or providers\n", argv[2]);
        script_free(u.s);
        return 0;
    }
    struct dns_resolver_opts ro;
    struct outbound_env env = {0};
    int rc = 1;
    env.loop = ev_loop_new(EVFLAG_AUTO);
    engine_resolver_opts(script_config(u.s), &ro);
    env.dns = env.loop ? dns_resolver_new(env.loop, &ro, err, sizeof(err)) : NULL;
    env.set = script_outbound_set(u.s);
    if (env.dns == NULL) {
        fprintf(stderr, "chute: update: %s\n", env.loop ? err : "no event loop");
        goto done;
    }
    if ((outbound_set_needs_tls(env.set) && (env.tls = tls_ctx_new(NULL, err, sizeof(err))) ==
                                                NULL) ||
        engine_fetch_trust(&env, items, n, err, sizeof(err)) != 0) {
        fprintf(stderr, "chute: update: %s\n", err);
        goto done;
    }
    outbound_set_start(env.set, &env, NULL);
    struct fetch_hooks h = {.validate = validate, .updated = updated, .report = report,
                            .policy = policy, .ud = &u};
    struct fetch_set *fs = fetch_set_new(&env, &h);
    if (fs == NULL || fetch_set_sync(fs, items, n) != 0) {
        fprintf(stderr, "chute: update: out of memory\n");
        fetch_set_free(fs);
        outbound_set_stop(env.set);
        goto done;
    }
    fetch_set_update_all(fs);
    while (fetch_set_busy(fs) > 0)
        ev_run(env.loop, EVRUN_ONCE);
    fetch_set_free(fs);
    outbound_set_stop(env.set);
    rc = u.failed ? 1 : 0;
done:
    dns_resolver_free(env.dns);
    tls_ctx_free(env.tls);
    script_free(u.s);
    if (env.loop != NULL)
        ev_loop_destroy(env.loop);
    return rc;
}
