#include <string.h>

#include "io/io.h"
#include "log/log.h"
#include "flow/addr.h"
#include "outbound/proxy.h"
#include "outbound/set_int.h"

/* A proxy that takes the request and never answers. Shadowsocks servers
 * meet a wrong key (or cipher) with silence, to resist probing, so the
 * only sign chute gets is none: the flow would hang until its client gave
 * up, closed as "done", with the proxy still up in its groups. ss.c
 * watches each stream; this file says what it saw. */

#define REAL(s) ((s)->owner != NULL ? (s)->owner : (s))

/* The proxy |name| of the env's set now, with its policy id; NULL when
 * the set has none (a reload removed it). */
static struct outbound_proxy *
find(const struct outbound_env *env, const char *name, struct outbound_set **set, int *policy)
{
    if (env->set == NULL)
        return NULL;
    struct outbound_set *s = REAL(env->set);
    int id = outbound_set_lookup(s, name);
    if (id < FLOW_POLICY__BUILTIN || (size_t)id - FLOW_POLICY__BUILTIN >= s->nproxies)
        return NULL;
    *set = env->set; /* the view, for a check's own stream: its reports are ignored */
    *policy = id;
    return &s->proxies[id - FLOW_POLICY__BUILTIN];
}

void
outbound_silent_report(const struct outbound_env *env, const char *name, double secs,
                       double since)
{
    struct outbound_set *s;
    int policy;
    struct outbound_proxy *p = find(env, name, &s, &policy);
    if (p != NULL && p->last_answer >= since) {
        /* One key serves every flow: this destination is only slow. */
        LOG_DEBUG("no byte from proxy '%s' in %.1f s after the request, but it answers other "
                  "flows: a slow destination",
                  name, secs);
        return;
    }
    int warn = p == NULL || !p->silent_warned;
    /* Once per episode at warn: a browser opens tens of flows at once. */
    LOG_AT(warn ? LOG_LEVEL_WARN : LOG_LEVEL_DEBUG,
           "no byte from proxy '%s' in %.1f s after the request: wrong password or cipher?", name,
           secs);
    if (p == NULL)
        return;
    p->silent++;
    p->silent_warned = 1;
    REAL(s)->st.silent++;
    outbound_set_report_why(s, policy, 1, "no answer to the request: wrong password or cipher?");
}

void
outbound_silent_answered(const struct outbound_env *env, const char *name, double secs, int late)
{
    struct outbound_set *s;
    int policy;
    struct outbound_proxy *p = find(env, name, &s, &policy);
    if (late)
        LOG_INFO("proxy '%s' answered after %.1f s: a slow server, not a wrong password", name,
                 secs);
    if (p == NULL)
        return;
    p->silent_warned = 0;
    p->last_answer = io_mono_now();
    outbound_set_report(s, policy, 0);
}
