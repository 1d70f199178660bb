#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/addr.h"
#include "io/io.h"
#include "log/log.h"
#include "outbound/set_int.h"
#include "tls/tls.h"

/* In a group without checks a down mark from report() would never be
 * lifted (a down member gets no traffic, so no success report): it expires
 * after this many seconds instead. */
#define RETRY_UNCHECKED 10.0
/* Groups of groups are refused at load; this only bounds a bad set. */
#define MAX_DEPTH 4

#define REAL(s) ((s)->owner != NULL ? (s)->owner : (s))

static const char *const type_names[] = {"select", "fallback", "url-test", "load-balance"};

static uint64_t
fnv64(const void *p, size_t n, uint64_t h, int fold)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)(fold ? tolower(b[i]) : b[i])) * 1099511628211ull;
    return h;
}

#define FNV_INIT 14695981039346656037ull

/* splitmix64's finalizer: FNV alone leaves the high bits poorly mixed, and
 * rendezvous hashing compares whole 64-bit scores. */
static uint64_t
mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static struct group *
group_of(const struct outbound_set *s, int policy)
{
    size_t first = FLOW_POLICY__BUILTIN + s->nproxies;
    if (policy < 0 || (size_t)policy < first || (size_t)policy - first >= s->ngroups)
        return NULL;
    return &s->groups[(size_t)policy - first];
}

static double
now(const struct outbound_set *s)
{
    return s->env != NULL ? io_mono_now() : 0;
}

static void
set_free(struct outbound_set *s)
{
    outbound_set_pools_drop(s);
    for (size_t i = 0; i < s->ngroups; i++) {
        free(s->groups[i].cfg.members);
        free(s->groups[i].m);
    }
    free(s->groups);
    for (size_t i = 0; i < s->nproxies; i++)
        tls_ctx_free(s->proxies[i].anchors);
    free(s->proxies);
    free(s->names);
    free(s->interned);
    free(s->use_at);
    free(s->uses);
    free(s->pools);
    free(s->view);
    free(s);
}

/* Counting sort of the (group, member) pairs by the member's id. */
static int
build_uses(struct outbound_set *s)
{
    size_t ids = FLOW_POLICY__BUILTIN + s->nproxies, total = 0;
    s->use_at = calloc(ids + 1, sizeof(size_t));
    for (size_t i = 0; i < s->ngroups; i++)
        total += s->groups[i].cfg.nmembers;
    s->uses = malloc((total ? total : 1) * sizeof(*s->uses));
    if (s->use_at == NULL || s->uses == NULL)
        return -1;
    for (size_t i = 0; i < s->ngroups; i++) {
        for (size_t j = 0; j < s->groups[i].cfg.nmembers; j++) {
            int id = s->groups[i].m[j].policy;
            if (id >= 0 && (size_t)id < ids && id != FLOW_POLICY_REJECT)
                s->use_at[id + 1]++;
        }
    }
    for (size_t id = 0; id < ids; id++)
        s->use_at[id + 1] += s->use_at[id];
    size_t *fill = calloc(ids, sizeof(size_t));
    if (fill == NULL)
        return -1;
    for (size_t i = 0; i < s->ngroups; i++) {
        for (size_t j = 0; j < s->groups[i].cfg.nmembers; j++) {
            int id = s->groups[i].m[j].policy;
            if (id >= 0 && (size_t)id < ids && id != FLOW_POLICY_REJECT)
                s->uses[s->use_at[id] + fill[id]++] = (struct member_use){(uint32_t)i, (uint32_t)j};
        }
    }
    free(fill);
    return 0;
}

static int
build_names(struct outbound_set *s)
{
    size_t n = s->nproxies + s->ngroups, cap = 8;
    /* Interned once here, so flows keep a policy's name past a reload
     * without a lookup per flow. */
    s->interned = malloc((n ? n : 1) * sizeof(*s->interned));
    if (s->interned == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        s->interned[i] = flow_policy_intern(i < s->nproxies ? s->proxies[i].name
                                                            : s->groups[i - s->nproxies].cfg.name);
    }
    while (cap < 2 * n)
        cap *= 2;
    s->names = malloc(cap * sizeof(int));
    if (s->names == NULL)
        return -1;
    memset(s->names, 0xff, cap * sizeof(int)); /* -1 */
    s->names_mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        int id = (int)(FLOW_POLICY__BUILTIN + i);
        const char *name = outbound_set_name(s, id);
        size_t h = fnv64(name, strlen(name), FNV_INIT, 0) & s->names_mask;
        while (s->names[h] >= 0) {
            if (strcmp(outbound_set_name(s, s->names[h]), name) == 0)
                break; /* a duplicate (the loader refuses them): the first one wins */
            h = (h + 1) & s->names_mask;
        }
        if (s->names[h] < 0)
            s->names[h] = id;
    }
    return 0;
}

struct outbound_set *
outbound_set_new(struct outbound_proxy *proxies, size_t nproxies,
                 struct outbound_group_cfg *groups, size_t ngroups)
{
    struct outbound_set *s = calloc(1, sizeof(*s));
    if (s == NULL)
        goto fail_cfg;
    s->view = calloc(1, sizeof(*s->view));
    s->groups = calloc(ngroups ? ngroups : 1, sizeof(*s->groups));
    if (s->view == NULL || s->groups == NULL)
        goto fail_set;
    for (size_t i = 0; i < ngroups; i++) {
        s->groups[i].m = calloc(groups[i].nmembers ? groups[i].nmembers : 1, sizeof(struct member));
        if (s->groups[i].m == NULL)
            goto fail_set;
    }
    /* Only the indexes can fail past here: take ownership. */
    s->refs = 1;
    s->view->owner = s;
    s->proxies = proxies;
    s->nproxies = nproxies;
    s->ngroups = ngroups;
    for (size_t i = 0; i < ngroups; i++) {
        struct group *g = &s->groups[i];
        g->cfg = groups[i];
        g->cur = -1;
        if (g->cfg.selected < 0 || (size_t)g->cfg.selected >= g->cfg.nmembers)
            g->cfg.selected = 0;
    }
    free(groups);
    for (size_t i = 0; i < ngroups; i++) {
        struct group *g = &s->groups[i];
        for (size_t j = 0; j < g->cfg.nmembers; j++) {
            const char *name = outbound_set_name(s, g->cfg.members[j]);
            g->m[j].policy = g->cfg.members[j];
            g->m[j].seed = mix64(fnv64(name, strlen(name), FNV_INIT, 0));
            g->m[j].latency = -1;
        }
    }
    if (build_names(s) != 0 || build_uses(s) != 0) {
        set_free(s);
        return NULL;
    }
    return s;

fail_set:
    if (s->groups != NULL) {
        for (size_t i = 0; i < ngroups; i++)
            free(s->groups[i].m);
    }
    free(s->groups);
    free(s->view);
    free(s);
fail_cfg:
    for (size_t i = 0; i < ngroups; i++)
        free(groups[i].members);
    free(groups);
    free(proxies);
    return NULL;
}

struct outbound_set *
outbound_set_ref(struct outbound_set *s)
{
    s->refs++;
    return s;
}

void
outbound_set_unref(struct outbound_set *s)
{
    if (s == NULL || --s->refs > 0 || s->owner != NULL)
        return;
    outbound_set_stop(s); /* the checks' opens drop their refs on the view */
    set_free(s);
}

/* Finds |name| among the members of |g|; -1 if absent. */
static int
member_index(const struct outbound_set *s, const struct group *g, const char *name)
{
    for (size_t i = 0; i < g->cfg.nmembers; i++) {
        const char *n = outbound_set_name(s, g->m[i].policy);
        if (strcmp(n, name) == 0)
            return (int)i;
    }
    return -1;
}

/* A reload keeps what the old set learnt, matched by names. */
static void
carry_over(struct outbound_set *s, const struct outbound_set *prev)
{
    for (size_t i = 0; i < s->nproxies; i++) {
        const struct outbound_proxy *pp =
            outbound_set_proxy(prev, outbound_set_lookup(prev, s->proxies[i].name));
        if (pp == NULL)
            continue;
        s->proxies[i].silent = pp->silent;
        /* What it said of the old settings holds only if they stayed (a
         * new password deserves its own warning). */
        if (outbound_set_same_proxy(pp, &s->proxies[i])) {
            s->proxies[i].silent_warned = pp->silent_warned;
            s->proxies[i].last_answer = pp->last_answer;
        }
    }
    for (size_t i = 0; i < s->ngroups; i++) {
        struct group *g = &s->groups[i];
        const struct group *pg = group_of(prev, outbound_set_lookup(prev, g->cfg.name));
        if (pg == NULL)
            continue;
        for (size_t j = 0; j < pg->cfg.nmembers; j++) {
            int k = member_index(s, g, outbound_set_name(prev, pg->m[j].policy));
            if (k < 0)
                continue;
            struct member *m = &g->m[k];
            m->health = pg->m[j].health;
            m->latency = pg->m[j].latency;
            m->retry_at = pg->m[j].retry_at;
            memcpy(m->error, pg->m[j].error, sizeof(m->error));
        }
        if (g->cfg.type != pg->cfg.type)
            continue;
        if (g->cfg.type == OUTBOUND_GROUP_SELECT && pg->cfg.nmembers > 0) {
            int k = member_index(s, g, outbound_set_name(prev, pg->m[pg->cfg.selected].policy));
            if (k >= 0)
                g->cfg.selected = k;
        }
        if (g->cfg.type == OUTBOUND_GROUP_URL_TEST && pg->cur >= 0)
            g->cur = member_index(s, g, outbound_set_name(prev, pg->m[pg->cur].policy));
    }
}

void
outbound_set_start(struct outbound_set *s, const struct outbound_env *env,
                   const struct outbound_set *prev)
{
    outbound_set_stop(s);
    if (prev != NULL)
        carry_over(s, REAL(prev));
    if (env == NULL)
        return; /* nothing to run the checks on: results carried over only */
    if (prev != NULL)
        outbound_set_pools_carry(s, (struct outbound_set *)prev);
    s->env = env;
    s->running = 1;
    outbound_set_health_start(s);
}

void
outbound_set_stop(struct outbound_set *s)
{
    outbound_set_pools_drop(s); /* those a reload carried over are no longer here */
    if (!s->running)
        return;
    outbound_set_health_stop(s);
    s->running = 0;
    s->env = NULL;
}

int
outbound_set_needs_tls(const struct outbound_set *s)
{
    if (s == NULL)
        return 0;
    s = REAL(s);
    for (size_t i = 0; i < s->nproxies; i++) {
        const struct outbound_proxy *p = &s->proxies[i];
        if (p->type == OUTBOUND_TROJAN || (p->type == OUTBOUND_HTTP && p->tls))
            return 1;
    }
    return 0;
}

int
outbound_set_lookup(const struct outbound_set *s, const char *name)
{
    if (strcmp(name, "DIRECT") == 0)
        return FLOW_POLICY_DIRECT;
    if (strcmp(name, "REJECT") == 0)
        return FLOW_POLICY_REJECT;
    s = REAL(s);
    size_t h = fnv64(name, strlen(name), FNV_INIT, 0) & s->names_mask;
    for (; s->names[h] >= 0; h = (h + 1) & s->names_mask) {
        if (strcmp(outbound_set_name(s, s->names[h]), name) == 0)
            return s->names[h];
    }
    return -1;
}

const char *
outbound_set_name(const struct outbound_set *s, int policy)
{
    s = REAL(s);
    if (policy == FLOW_POLICY_DIRECT)
        return "DIRECT";
    if (policy == FLOW_POLICY_REJECT)
        return "REJECT";
    if (s->interned != NULL && policy >= FLOW_POLICY__BUILTIN &&
        (size_t)policy - FLOW_POLICY__BUILTIN < s->nproxies + s->ngroups)
        return s->interned[policy - FLOW_POLICY__BUILTIN];
    if (policy >= FLOW_POLICY__BUILTIN && (size_t)policy - FLOW_POLICY__BUILTIN < s->nproxies)
        return s->proxies[policy - FLOW_POLICY__BUILTIN].name;
    const struct group *g = group_of(s, policy);
    return g != NULL ? g->cfg.name : "?"; /* as flow_policy_name: callers print it as is */
}

const struct outbound_proxy *
outbound_set_proxy(const struct outbound_set *s, int policy)
{
    s = REAL(s);
    if (policy >= FLOW_POLICY__BUILTIN && (size_t)policy - FLOW_POLICY__BUILTIN < s->nproxies)
        return &s->proxies[policy - FLOW_POLICY__BUILTIN];
    return NULL;
}

static int
is_down(const struct member *m)
{
    return m->health == HEALTH_DOWN;
}

/* Lifts the expired down marks of a group without checks; 1 if any. */
static int
expire(const struct outbound_set *s, struct group *g)
{
    int changed = 0;
    double t = 0;
    for (size_t i = 0; i < g->cfg.nmembers; i++) {
        struct member *m = &g->m[i];
        if (m->retry_at <= 0 || !is_down(m))
            continue;
        if (t == 0 && (t = now(s)) == 0)
            return 0; /* not started: no clock */
        if (t >= m->retry_at) {
            m->health = HEALTH_UNKNOWN;
            m->retry_at = 0;
            changed = 1;
        }
    }
    return changed;
}

/* A group moves from member |from| to |to|: counted, and said at info
 * (a user wants to know why traffic now leaves elsewhere). */
static void
switched(struct outbound_set *s, const struct group *g, int from, int to)
{
    const struct member *f = &g->m[from], *t = &g->m[to];
    s->st.switches++;
    if (f->health == HEALTH_DOWN)
        LOG_INFO("group '%s': now '%s', was '%s' (down: %s)", g->cfg.name,
                 outbound_set_name(s, t->policy), outbound_set_name(s, f->policy),
                 f->error[0] ? f->error : "?");
    else
        LOG_INFO("group '%s': now '%s' (%d ms), was '%s' (%d ms)", g->cfg.name,
                 outbound_set_name(s, t->policy), t->latency, outbound_set_name(s, f->policy),
                 f->latency);
}

/* url-test: the fastest healthy member, but leave the current one only for
 * a member faster by more than the tolerance, so that jitter between two
 * close members does not flap the choice. */
static void
urltest_eval(struct outbound_set *s, struct group *g)
{
    int best = -1, first_ok = -1, cur = g->cur, next = cur;
    for (size_t i = 0; i < g->cfg.nmembers; i++) {
        const struct member *m = &g->m[i];
        if (is_down(m))
            continue;
        if (first_ok < 0)
            first_ok = (int)i;
        if (m->latency >= 0 && (best < 0 || m->latency < g->m[best].latency))
            best = (int)i;
    }
    if (cur < 0 || is_down(&g->m[cur])) {
        next = best >= 0 ? best : first_ok >= 0 ? first_ok : cur >= 0 ? cur : 0;
    } else if (best >= 0 && best != cur &&
               (g->m[cur].latency < 0 ||
                (double)g->m[best].latency + g->cfg.tolerance < (double)g->m[cur].latency)) {
        next = best;
    }
    if (cur >= 0 && next != cur)
        switched(s, g, cur, next);
    g->cur = next;
}

static uint64_t
host_hash(const struct flow_addr *dst)
{
    if (dst == NULL)
        return 0;
    switch (dst->kind) {
    case FLOW_ADDR_NAME:
        return fnv64(dst->name, dst->name_len, FNV_INIT, 1);
    case FLOW_ADDR_IP4:
        return fnv64(dst->ip, 4, FNV_INIT, 0);
    case FLOW_ADDR_IP6:
        return fnv64(dst->ip, 16, FNV_INIT, 0);
    default:
        return 0;
    }
}

/* Rendezvous hashing: each member scores the host, the highest wins. A
 * member going down moves only the hosts it won; the port is left out so
 * one site sticks to one member. */
static int
balance(const struct group *g, const struct flow_addr *dst)
{
    uint64_t h = host_hash(dst), top = 0;
    int any_up = 0, best = 0, found = 0;
    for (size_t i = 0; i < g->cfg.nmembers && !any_up; i++)
        any_up = !is_down(&g->m[i]);
    for (size_t i = 0; i < g->cfg.nmembers; i++) {
        if (any_up && is_down(&g->m[i]))
            continue;
        uint64_t score = mix64(h ^ g->m[i].seed);
        if (!found || score > top) {
            top = score;
            best = (int)i;
            found = 1;
        }
    }
    return best;
}

/* With every member down the last one is the best guess: groups end with
 * their last resort (DIRECT, often), and it is what a user would try. */
static int
first_healthy(const struct group *g)
{
    for (size_t i = 0; i < g->cfg.nmembers; i++) {
        if (!is_down(&g->m[i]))
            return (int)i;
    }
    return (int)g->cfg.nmembers - 1;
}

static int
pick_member(struct outbound_set *s, struct group *g, const struct flow_addr *dst)
{
    int changed = expire(s, g);
    switch (g->cfg.type) {
    case OUTBOUND_GROUP_SELECT:
        return g->cfg.selected;
    case OUTBOUND_GROUP_FALLBACK: {
        int i = first_healthy(g);
        if (g->cur >= 0 && i != g->cur)
            switched(s, g, g->cur, i);
        g->cur = i;
        return i;
    }
    case OUTBOUND_GROUP_URL_TEST:
        if (g->cur < 0 || changed)
            urltest_eval(s, g);
        return g->cur;
    case OUTBOUND_GROUP_LOAD_BALANCE:
        return balance(g, dst);
    }
    return 0;
}

int
outbound_set_pick(struct outbound_set *s, int policy, const struct flow_addr *dst)
{
    s = REAL(s);
    for (int depth = 0; depth < MAX_DEPTH; depth++) {
        struct group *g = group_of(s, policy);
        if (g == NULL)
            return policy;
        if (g->cfg.nmembers == 0)
            return FLOW_POLICY_REJECT;
        policy = g->m[pick_member(s, g, dst)].policy;
    }
    return FLOW_POLICY_REJECT;
}

int
outbound_set_select(struct outbound_set *s, const char *group, const char *member, char *err,
                    size_t errlen)
{
    s = REAL(s);
    struct group *g = group_of(s, outbound_set_lookup(s, group));
    char dummy[1];
    if (err == NULL || errlen == 0)
        err = dummy, errlen = sizeof(dummy);
    if (g == NULL) {
        snprintf(err, errlen, "no group '%s'", group);
        return -1;
    }
    if (g->cfg.type != OUTBOUND_GROUP_SELECT) {
        snprintf(err, errlen, "'%s' is not a select group", group);
        return -1;
    }
    int k = member_index(s, g, member);
    if (k >= 0) {
        g->cfg.selected = k;
        return 0;
    }
    int off = snprintf(err, errlen, "group '%s' has no member '%s' (members: ", group, member);
    for (size_t i = 0; i < g->cfg.nmembers && off >= 0 && (size_t)off < errlen; i++)
        off += snprintf(err + off, errlen - (size_t)off, "%s%s", i ? ", " : "",
                        outbound_set_name(s, g->m[i].policy));
    if (off >= 0 && (size_t)off < errlen)
        snprintf(err + off, errlen - (size_t)off, ")");
    return -1;
}

void
outbound_set_report(struct outbound_set *s, int policy, int failed)
{
    outbound_set_report_why(s, policy, failed, "connection failed");
}

void
outbound_set_report_why(struct outbound_set *s, int policy, int failed, const char *why)
{
    if (s->owner != NULL || policy < 0 || (size_t)policy >= FLOW_POLICY__BUILTIN + s->nproxies)
        return;
    for (size_t u = s->use_at[policy]; u < s->use_at[policy + 1]; u++) {
        size_t i = s->uses[u].g, j = s->uses[u].m;
        struct group *g = &s->groups[i];
        struct member *m = &g->m[j];
        if (failed) {
            if (m->health != HEALTH_DOWN)
                outbound_set_pool_drain(s, policy); /* a member marked down drops its pool */
            m->health = HEALTH_DOWN;
            snprintf(m->error, sizeof(m->error), "%s", why);
            if (g->hg != NULL)
                outbound_set_health_recheck(s, i, j);
            else if (s->env != NULL)
                m->retry_at = now(s) + RETRY_UNCHECKED;
        } else {
            m->health = HEALTH_UP;
            m->retry_at = 0;
            m->error[0] = '\0';
        }
        if (g->cfg.type == OUTBOUND_GROUP_URL_TEST)
            urltest_eval(s, g);
    }
}

void
outbound_set_check_result(struct outbound_set *s, size_t g, size_t m, int ms, const char *err)
{
    struct group *gr = &s->groups[g];
    struct member *mb = &gr->m[m];
    s->st.checks++;
    mb->retry_at = 0;
    if (ms >= 0)
        LOG_DEBUG("health: group '%s' via '%s': up, %d ms", gr->cfg.name,
                  outbound_set_name(s, mb->policy), ms);
    else
        LOG_DEBUG("health: group '%s' via '%s': down: %s", gr->cfg.name,
                  outbound_set_name(s, mb->policy), err != NULL ? err : "check failed");
    if (ms < 0) {
        if (mb->health != HEALTH_DOWN)
            outbound_set_pool_drain(s, mb->policy);
        s->st.check_failures++;
        mb->health = HEALTH_DOWN;
        mb->latency = -1;
        snprintf(mb->error, sizeof(mb->error), "%s", err != NULL ? err : "check failed");
    } else {
        mb->health = HEALTH_UP;
        mb->latency = ms;
        mb->error[0] = '\0';
    }
    if (gr->cfg.type == OUTBOUND_GROUP_URL_TEST)
        urltest_eval(s, gr);
}

int
outbound_set_note_latency(struct outbound_set *s, const char *group, const char *member, int ms)
{
    s = REAL(s);
    struct group *g = group_of(s, outbound_set_lookup(s, group));
    int k = g != NULL ? member_index(s, g, member) : -1;
    if (k < 0)
        return -1;
    outbound_set_check_result(s, (size_t)(g - s->groups), (size_t)k, ms, "check failed");
    return 0;
}

static void __attribute__((format(printf, 4, 5)))
append(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = *off < len ? vsnprintf(buf + *off, len - *off, fmt, ap) : 0;
    va_end(ap);
    if (n > 0)
        *off = *off + (size_t)n < len ? *off + (size_t)n : len;
}

void
outbound_set_describe(const struct outbound_set *s, char *buf, size_t len)
{
    size_t off = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    s = REAL(s);
    for (size_t i = 0; i < s->ngroups; i++) {
        const struct group *g = &s->groups[i];
        int cur = g->cfg.type == OUTBOUND_GROUP_SELECT     ? g->cfg.selected
                  : g->cfg.type == OUTBOUND_GROUP_FALLBACK ? first_healthy(g)
                                                           : g->cur;
        append(buf, len, &off, "%s%s=%s", i ? "\n" : "", g->cfg.name, type_names[g->cfg.type]);
        if (g->cfg.type != OUTBOUND_GROUP_LOAD_BALANCE && cur < (int)g->cfg.nmembers)
            append(buf, len, &off, ":%s", cur >= 0 ? outbound_set_name(s, g->m[cur].policy) : "-");
        for (size_t j = 0; j < g->cfg.nmembers; j++) {
            const struct member *m = &g->m[j];
            const char *name = outbound_set_name(s, m->policy);
            if (m->health != HEALTH_DOWN && m->latency >= 0)
                append(buf, len, &off, " %s=%dms", name, m->latency);
            else
                append(buf, len, &off, " %s=%s", name,
                       m->health == HEALTH_DOWN ? "down" : m->health == HEALTH_UP ? "up" : "?");
        }
    }
}

void
outbound_set_stats(const struct outbound_set *s, struct outbound_set_stats *out)
{
    *out = REAL(s)->st;
}

const struct log_counter outbound_set_counters[] = {
#define X(field, key) LOG_COUNTER(struct outbound_set_stats, field, key)
    OUTBOUND_SET_STATS(X)
#undef X
    LOG_COUNTER_END};
