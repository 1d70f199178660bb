#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fetch/fetch.h"
#include "flow/dcache.h"
#include "log/log.h"
#include "script/script.h"
#include "tls/tls.h"

/* The bundle's remote rule sets and providers (core/fetch) on the engine:
 * the fetch set lives as long as the engine, so a reload keeps each item's
 * validators and timer; a fetch that replaced a cache reloads the bundle
 * off the loop (engine_reload), which reads the new cache: the swap is the
 * reload's, atomic, and it bumps the rule version so the decision cache
 * starts empty. */

static int
validate(void *ud, const struct fetch_item_cfg *c, const char *buf, size_t len, char *note,
         size_t notelen)
{
    return script_remote_validate(c, buf, len, note, notelen);
}

/* An mmdb (chute.config's geo = { mmdb = { url = ... } }) is swapped into
 * the running script alone, no reload: the fetch's check opened it (and
 * built its index) off the loop. A geosite.dat's sites are compiled into
 * domain sets, tens of ms for a big file: that is a reload's work, off the
 * loop too. */
static void
geo_updated(struct engine *e, const struct fetch_item_cfg *c)
{
    static const char *const which[] = {"mmdb", "asn"};
    char err[512];
    if (e->script == NULL || c->format < 0 || c->format > 1)
        return;
    if (script_geo_update(e->script, which[c->format], c->path, err, sizeof(err)) != 0) {
        LOG_WARN("%s updated, but it could not be swapped in: %s; the old one stays", c->name,
                 err);
        return;
    }
    if (e->dcache != NULL)
        flow_dcache_clear(e->dcache); /* its decisions came from the old file */
    e->rule_version++;
    LOG_INFO("%s updated: swapped in (rule version %u)", c->name, e->rule_version);
}

static void
updated(void *ud, const struct fetch_item_cfg *c)
{
    struct engine *e = ud;
    if (c->kind == FETCH_GEO && c->format != 2) {
        geo_updated(e, c);
        return;
    }
    if (c->kind == FETCH_GEO) {
        LOG_INFO("%s updated: reloading the bundle (its sites compile off the loop)", c->name);
        engine_reload(e);
        return;
    }
    LOG_INFO("%s %s updated: reloading the bundle", c->kind == FETCH_RULESET ? "ruleset" :
             "provider", c->name);
    engine_reload(e);
}

static int
policy(void *ud, const char *name)
{
    struct engine *e = ud;
    return script_policy_lookup(e->script, name);
}

/* 1 when one of the items is fetched over https. */
static int
wants_tls(const struct fetch_item_cfg *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strncmp(items[i].url, "https:", 6) == 0 || strncmp(items[i].url, "HTTPS:", 6) == 0)
            return 1;
    return 0;
}

int
engine_fetch_trust(struct outbound_env *env, const struct fetch_item_cfg *items, size_t n,
                   char *err, size_t errlen)
{
    if (env->tls != NULL || !wants_tls(items, n))
        return 0;
    env->tls = tls_ctx_new(NULL, err, errlen);
    return env->tls != NULL ? 0 : -1;
}

void
engine_fetch_sync(struct engine *e)
{
    size_t n;
    const struct fetch_item_cfg *items = script_remotes(e->script, &n);
    if (n == 0 && e->fetch == NULL)
        return;
    char err[256];
    if (engine_fetch_trust(&e->out, items, n, err, sizeof(err)) != 0)
        LOG_ERROR("remote lists over https: %s; their fetches fail until it loads", err);
    if (e->fetch == NULL) {
        struct fetch_hooks h = {.validate = validate, .updated = updated, .policy = policy,
                                .ud = e};
        if ((e->fetch = fetch_set_new(&e->out, &h)) == NULL) {
            LOG_ERROR("remote lists: out of memory: they are not fetched");
            return;
        }
    }
    if (fetch_set_sync(e->fetch, items, n) != 0)
        LOG_ERROR("remote lists: out of memory: the previous set is kept");
}
