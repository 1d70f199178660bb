#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "control/control.h"
#include "dns/dns.h"
#include "engine/engine.h"
#include "fetch/fetch.h"
#include "log/log.h"
#include "rules/list.h"
#include "script/script.h"

/* What the control API is given of the engine (struct control_env): the
 * flow table, the counters, the current policies, the mode, a reload. */

static struct outbound_set *
env_set(void *ud)
{
    struct engine *e = ud;
    return e->out.set;
}

static void
env_counters(void *ud, control_counters_fn emit, void *arg)
{
    engine_stats_groups(ud, emit, arg);
}

static void
env_reload(void *ud)
{
    engine_reload(ud);
}

static const char *const modes[] = {"rule", "direct", "global"};

static const char *
env_mode(void *ud)
{
    return modes[((struct engine *)ud)->mode];
}

static int
env_set_mode(void *ud, const char *mode, char *err, size_t errlen)
{
    struct engine *e = ud;
    for (int i = 0; i < 3; i++)
        if (strcasecmp(mode, modes[i]) == 0) {
            if (i == ENGINE_MODE_GLOBAL && script_policy_lookup(e->script, "GLOBAL") < 0) {
                snprintf(err, errlen, "mode: global sends every flow to the group called GLOBAL, "
                                      "and the bundle has none (chute.group \"GLOBAL\" {...})");
                return -1;
            }
            e->mode = i;
            return 0;
        }
    snprintf(err, errlen, "mode: \"%s\" is not rule, global or direct", mode);
    return -1;
}

static const char *
env_fallback(void *ud)
{
    struct engine *e = ud;
    return script_policy_name(e->script, script_config(e->script)->fallback);
}

static void
env_ports(void *ud, int *http, int *socks, int *mixed)
{
    struct engine *e = ud;
    *http = inbound_port(e->http);
    *socks = inbound_port(e->socks);
    *mixed = inbound_port(e->mixed);
}

/* GET /dns/query: through the resolver, as dns_forward relays any type. */
static void *
env_dns_query(void *ud, const uint8_t *q, size_t len, control_dns_cb cb, void *arg)
{
    struct engine *e = ud;
    return e->dns != NULL ? dns_forward(e->dns, q, len, cb, arg) : NULL;
}

static void
env_dns_cancel(void *ud, void *q)
{
    dns_query_cancel(q);
}

static struct control_opts
opts_of(const struct script_control *sc)
{
    struct control_opts o = {.addr = sc->addr, .addrlen = sc->addrlen};
    snprintf(o.text, sizeof(o.text), "%s", sc->listen);
    snprintf(o.secret, sizeof(o.secret), "%s", sc->secret);
    snprintf(o.cors, sizeof(o.cors), "%s", sc->cors);
    return o;
}

/* /providers/...: the bundle's remote providers and rule sets. */
static size_t
env_providers(void *ud, struct control_provider *out, size_t max)
{
    struct engine *e = ud;
    size_t n = 0, k = 0;
    const struct fetch_item_cfg *items = e->script ? script_remotes(e->script, &n) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct fetch_item_cfg *c = &items[i];
        if (c->kind == FETCH_GEO || k++ >= max) /* the GEO files are no providers */
            continue;
        struct control_provider *p = &out[k - 1];
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "%s", c->name);
        p->rules = c->kind == FETCH_RULESET;
        snprintf(p->behavior, sizeof(p->behavior), "%s",
                 c->format == RULES_FORMAT_CLASH_DOMAIN || c->format == RULES_FORMAT_DOMAIN_SET
                     ? "domain"
                 : c->format == RULES_FORMAT_CLASH_IPCIDR ? "ipcidr"
                                                          : "classical");
        char etag[8], lm[8];
        p->age = fetch_cache_meta(c->path, etag, sizeof(etag), lm, sizeof(lm));
        p->count = c->count;
    }
    return k;
}

static const char *
env_provider_proxy(void *ud, const char *name, size_t k)
{
    struct engine *e = ud;
    return e->script ? script_provider_proxy(e->script, name, k) : NULL;
}

static int
env_provider_refresh(void *ud, int rules, const char *name)
{
    struct engine *e = ud;
    if (e->fetch == NULL)
        return -1;
    int rc = fetch_set_refresh(e->fetch, rules ? FETCH_RULESET : FETCH_PROVIDER, name);
    if (rc == 0)
        LOG_INFO("control: %s %s: fetching now", rules ? "ruleset" : "provider", name);
    return rc < 0 ? -1 : 0;
}

int
engine_control_start(struct engine *e, char *err, size_t errlen)
{
    const struct script_control *sc = &script_config(e->script)->control;
    if (!sc->enabled || e->control != NULL)
        return 0;
    struct control_opts o = opts_of(sc);
    const struct control_env env = {
        .loop = e->loop, .flows = e->flows, .out = &e->out, .set = env_set,
        .counters = env_counters, .reload = env_reload, .mode = env_mode,
        .set_mode = env_set_mode, .fallback = env_fallback, .ports = env_ports,
        .dns_query = env_dns_query,
        .dns_cancel = env_dns_cancel, .providers = env_providers,
        .provider_proxy = env_provider_proxy, .provider_refresh = env_provider_refresh, .ud = e,
    };
    e->control = control_new(&env, &o, err, errlen);
    return e->control != NULL ? 0 : -1;
}

void
engine_control_stop(struct engine *e)
{
    control_free(e->control);
    e->control = NULL;
}

void
engine_control_reload(struct engine *e)
{
    const struct script_control *sc = &script_config(e->script)->control;
    char err[256];
    if (e->control == NULL) {
        if (engine_control_start(e, err, sizeof(err)) != 0)
            LOG_ERROR("reload: %s", err);
        return;
    }
    struct control_opts o = opts_of(sc);
    /* Not engine_control_stop when the bundle drops control = {...}: the
     * reload may come from one of its clients (PUT /configs), up the stack. */
    if (control_configure(e->control, sc->enabled ? &o : NULL, err, sizeof(err)) != 0)
        LOG_ERROR("reload: %s; the control API stays on %s", err, "its old address");
}
