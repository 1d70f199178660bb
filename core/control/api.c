#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_int.h"
#include "flow/flow.h"
#include "log/log.h"
#include "outbound/set.h"

/* The Clash REST endpoints, with Clash's JSON shapes and status codes
 * (the dashboards parse them as Clash sends them). JSON is jansson's:
 * Debian's libjansson, mature, with refcounted values, json_pack for
 * terse building and a decoder whose errors say where (the 400s). */

static const char *const level_names[] = {"error", "warning", "info", "debug"};

static struct outbound_set *
cur_set(struct control *c)
{
    return c->env.set != NULL ? c->env.set(c->env.ud) : NULL;
}

void *
control_proxy_json(struct outbound_set *s, int policy)
{
    struct outbound_set_entry e;
    if (outbound_set_entry(s, policy, &e) != 0)
        return NULL;
    json_t *hist = json_array();
    if (e.latency >= 0)
        json_array_append_new(hist, json_pack("{s:s,s:i}", "time", "", "delay", e.latency));
    json_t *p = json_pack("{s:s,s:s,s:b,s:b,s:o}", "name", e.name, "type", e.type, "udp", e.udp,
                          "alive", e.alive, "history", hist);
    if (p != NULL && !e.is_group && policy >= FLOW_POLICY__BUILTIN) /* chute's own */
        json_object_set_new(p, "silent", json_integer((json_int_t)e.silent));
    if (p != NULL && e.is_group) {
        json_t *all = json_array();
        for (size_t i = 0; i < e.nmembers; i++)
            json_array_append_new(all, json_string(outbound_set_name(s, e.members[i])));
        json_object_set_new(p, "all", all);
        json_object_set_new(p, "now", json_string(e.now >= 0 ? outbound_set_name(s, e.now) : ""));
    }
    return p;
}

/* Clash lists a GLOBAL selector over everything; dashboards order their
 * groups by it. chute's is a listing only, unless the bundle declares a
 * group called GLOBAL (then that one is shown). */
static json_t *
global_json(struct outbound_set *s)
{
    json_t *all = json_array();
    size_t n = s != NULL ? outbound_set_count(s) : FLOW_POLICY__BUILTIN;
    for (size_t i = 0; i < n; i++)
        json_array_append_new(all, json_string(s != NULL ? outbound_set_name(s, (int)i)
                                                         : flow_policy_name((int)i)));
    return json_pack("{s:s,s:s,s:b,s:b,s:[],s:o,s:s}", "name", "GLOBAL", "type", "Selector",
                     "udp", 1, "alive", 1, "history", "all", all, "now", "DIRECT");
}

static void
get_proxies(struct control_client *cl)
{
    struct outbound_set *s = cur_set(cl->c);
    json_t *m = json_object();
    size_t n = s != NULL ? outbound_set_count(s) : 0;
    for (size_t i = 0; i < n; i++) {
        json_t *p = control_proxy_json(s, (int)i);
        if (p != NULL)
            json_object_set_new(m, outbound_set_name(s, (int)i), p);
    }
    if (json_object_get(m, "GLOBAL") == NULL)
        json_object_set_new(m, "GLOBAL", global_json(s));
    control_reply_json(cl, 200, json_pack("{s:o}", "proxies", m));
}

static void
get_proxy(struct control_client *cl, const char *name)
{
    struct outbound_set *s = cur_set(cl->c);
    int id = s != NULL ? outbound_set_lookup(s, name) : -1;
    if (id < 0 && strcmp(name, "GLOBAL") == 0) {
        control_reply_json(cl, 200, global_json(s));
        return;
    }
    json_t *p = id >= 0 ? control_proxy_json(s, id) : NULL;
    if (p == NULL) {
        control_reply_error(cl, 404, "resource not found");
        return;
    }
    control_reply_json(cl, 200, p);
}

/* Parses |body| as a JSON object; NULL after a 400 naming what is wrong. */
static json_t *
body_object(struct control_client *cl, const char *body, size_t blen)
{
    json_error_t je;
    json_t *j = json_loadb(body, blen, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL || !json_is_object(j)) {
        char msg[300];
        if (j == NULL)
            snprintf(msg, sizeof(msg), "body: not JSON: %s (line %d, column %d)", je.text,
                     je.line, je.column);
        else
            snprintf(msg, sizeof(msg), "body: expected a JSON object");
        json_decref(j);
        control_reply_error(cl, 400, msg);
        return NULL;
    }
    return j;
}

/* The string field |k| of |j|: NULL when absent; a 400 and |*bad| when
 * it is not a string. */
static const char *
str_field(struct control_client *cl, json_t *j, const char *k, int *bad)
{
    json_t *v = json_object_get(j, k);
    if (v == NULL)
        return NULL;
    if (!json_is_string(v)) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%s: expected a string", k);
        control_reply_error(cl, 400, msg);
        *bad = 1;
        return NULL;
    }
    return json_string_value(v);
}

static void
put_proxy(struct control_client *cl, const char *group, const char *body, size_t blen)
{
    struct outbound_set *s = cur_set(cl->c);
    int id = s != NULL ? outbound_set_lookup(s, group) : -1;
    if (id < 0) {
        control_reply_error(cl, 404, "resource not found");
        return;
    }
    json_t *j = body_object(cl, body, blen);
    if (j == NULL)
        return;
    int bad = 0;
    const char *member = str_field(cl, j, "name", &bad);
    if (!bad && member == NULL)
        control_reply_error(cl, 400, "name: missing (the member to select)");
    if (bad || member == NULL) {
        json_decref(j);
        return;
    }
    char err[512];
    if (outbound_set_select(s, group, member, err, sizeof(err)) != 0) {
        control_reply_error(cl, 400, err);
    } else {
        LOG_INFO("control: group '%s' now uses '%s'", group, member);
        control_reply(cl, 204, NULL, NULL, 0);
    }
    json_decref(j);
}

static void
get_configs(struct control_client *cl)
{
    struct control *c = cl->c;
    const char *mode = c->env.mode != NULL ? c->env.mode(c->env.ud) : "rule";
    int http = 0, socks = 0, mixed = 0;
    if (c->env.ports != NULL)
        c->env.ports(c->env.ud, &http, &socks, &mixed);
    control_reply_json(cl, 200,
                       json_pack("{s:i,s:i,s:i,s:i,s:i,s:b,s:s,s:s,s:s,s:b}", "port", http,
                                 "socks-port", socks, "redir-port", 0, "tproxy-port", 0,
                                 "mixed-port", mixed, "allow-lan", 0, "bind-address", "*", "mode", mode,
                                 "log-level", level_names[log_threshold], "ipv6", 1));
}

static int
parse_level(const char *v)
{
    if (strcmp(v, "warning") == 0)
        return LOG_LEVEL_WARN;
    if (strcmp(v, "silent") == 0)
        return LOG_LEVEL_ERROR;
    return log_level_parse(v);
}

static void
patch_configs(struct control_client *cl, const char *body, size_t blen)
{
    struct control *c = cl->c;
    json_t *j = body_object(cl, body, blen);
    if (j == NULL)
        return;
    int bad = 0;
    const char *mode = str_field(cl, j, "mode", &bad);
    const char *level = bad ? NULL : str_field(cl, j, "log-level", &bad);
    int lv = level != NULL ? parse_level(level) : -1;
    char err[256];
    if (bad) {
        /* answered */
    } else if (level != NULL && lv < 0) {
        control_reply_error(cl, 400, "log-level: expected error, warning, info, debug or silent");
    } else if (mode != NULL &&
               (c->env.set_mode == NULL || c->env.set_mode(c->env.ud, mode, err, sizeof(err)) != 0)) {
        control_reply_error(cl, 400, c->env.set_mode != NULL ? err : "mode: not supported");
    } else {
        if (lv >= 0)
            log_threshold = (enum log_level)lv;
        if (mode != NULL || lv >= 0)
            LOG_INFO("control: mode=%s log-level=%s", c->env.mode ? c->env.mode(c->env.ud) : "rule",
                     level_names[log_threshold]);
        control_reply(cl, 204, NULL, NULL, 0);
    }
    json_decref(j);
}

struct ids {
    uint64_t *v;
    size_t n, cap;
};

static void
collect(void *arg, const struct flow *f)
{
    struct ids *x = arg;
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 256;
        uint64_t *v = realloc(x->v, cap * sizeof(*v));
        if (v == NULL)
            return;
        x->v = v;
        x->cap = cap;
    }
    x->v[x->n++] = f->id;
}

static void
delete_connections(struct control_client *cl, const char *id)
{
    struct flow_table *t = cl->c->env.flows;
    if (id != NULL) {
        char *end;
        unsigned long long n = strtoull(id, &end, 10);
        if (*end != '\0' || id[0] == '\0' || flow_table_close(t, n, "closed by control") != 0) {
            control_reply_error(cl, 404, "no such connection");
            return;
        }
        control_reply(cl, 204, NULL, NULL, 0);
        return;
    }
    /* Closing inside the walk is not allowed: ids first. */
    struct ids x = {0};
    flow_table_each(t, collect, &x);
    for (size_t i = 0; i < x.n; i++)
        flow_table_close(t, x.v[i], "closed by control");
    free(x.v);
    control_reply(cl, 204, NULL, NULL, 0);
}

static void
get_rules(struct control_client *cl)
{
    struct control *c = cl->c;
    const char *fb = c->env.fallback != NULL ? c->env.fallback(c->env.ud) : "DIRECT";
    /* chute's rules are the bundle's route(): one script rule, then the
     * fallback for flows it fails on. */
    control_reply_json(cl, 200, json_pack("{s:[{s:s,s:s,s:s},{s:s,s:s,s:s}]}", "rules", "type",
                                          "Script", "payload", "chute.route", "proxy", "route()",
                                          "type", "Match", "payload", "", "proxy", fb));
}

/* The counters as {"key": n} (|section| NULL: all of them, flat, as the
 * stats line's keys) or grouped {"section": {"key": n}}. */
struct counters_arg {
    json_t *flat, *sections;
};

static void
emit_counters(void *arg, const struct log_counter_group *g, size_t n)
{
    struct counters_arg *a = arg;
    char key[128];
    for (size_t i = 0; i < n; i++) {
        json_t *sec = NULL;
        if (a->sections != NULL && g[i].section != NULL) {
            sec = json_object_get(a->sections, g[i].section);
            if (sec == NULL) {
                sec = json_object();
                json_object_set_new(a->sections, g[i].section, sec);
            }
        }
        for (const struct log_counter *k = g[i].table; k->key != NULL; k++) {
            snprintf(key, sizeof(key), "%s%s", g[i].prefix, k->key);
            json_int_t v = (json_int_t)log_counter_value(k, g[i].stats);
            if (a->flat != NULL)
                json_object_set_new(a->flat, key, json_integer(v));
            if (sec != NULL)
                json_object_set_new(sec, key, json_integer(v));
        }
    }
    /* Computed, as the stats tun line: packets per TUN read. */
    json_t *tun = a->sections != NULL ? json_object_get(a->sections, "tun") : NULL;
    json_int_t batches = json_integer_value(json_object_get(tun, "batches"));
    if (tun != NULL)
        json_object_set_new(tun, "batch_mean",
                            json_real(batches > 0 ? (double)json_integer_value(json_object_get(
                                                        tun, "pkts_in")) / (double)batches
                                                  : 0.0));
}

/* GET /chute/stats: every counter flat, the same grouped by section, and
 * the API's own; GET /chute/<section>: one section ("dcache", "lwip",
 * "tun", "mitm", ...; 404 for one that is off, as the TUN without a TUN). */
static void
get_chute(struct control_client *cl, const char *section)
{
    struct control *c = cl->c;
    struct counters_arg a = {section == NULL ? json_object() : NULL, json_object()};
    if (c->env.counters != NULL)
        c->env.counters(c->env.ud, emit_counters, &a);
    if (section != NULL) {
        json_t *sec = json_incref(json_object_get(a.sections, section));
        json_decref(a.sections);
        if (sec == NULL)
            control_reply_error(cl, 404, "no such section (or it is off)");
        else
            control_reply_json(cl, 200, sec);
        return;
    }
    json_t *ctl = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "requests",
                            (json_int_t)c->st.requests, "unauthorized",
                            (json_int_t)c->st.unauthorized, "bad_requests",
                            (json_int_t)c->st.bad_requests, "dropped", (json_int_t)c->st.dropped,
                            "hs_timeouts", (json_int_t)c->st.hs_timeouts, "source_drops",
                            (json_int_t)c->st.source_drops, "clients", (json_int_t)c->nclients);
    control_reply_json(cl, 200, json_pack("{s:o,s:o,s:o}", "counters", a.flat, "sections",
                                          a.sections, "control", ctl));
}

static int
is_ws(const struct http_request *req)
{
    const struct http_header *u = http_header_find(req->headers, req->num_headers, "upgrade");
    return u != NULL && mem_slice_ieq(u->value, "websocket");
}

/* /traffic, /memory, /logs, /connections as a stream: WebSocket when the
 * client asks to upgrade, else chunked HTTP. */
static void
start_stream(struct control_client *cl, const struct http_request *req, enum control_topic topic,
             const struct control_target *t)
{
    cl->topic = topic;
    cl->log_level = LOG_LEVEL_INFO;
    char lv[16];
    if (topic == TOPIC_LOGS && control_query_get(t->query, "level", lv, sizeof(lv)) == 1) {
        int l = parse_level(lv);
        if (l < 0) {
            cl->topic = TOPIC_NONE;
            control_reply_error(cl, 400, "level: expected error, warning, info or debug");
            return;
        }
        cl->log_level = l;
    }
    if (is_ws(req)) {
        if (control_ws_upgrade(cl, req) != 0)
            cl->topic = TOPIC_NONE;
        return;
    }
    control_stream_head(cl, "application/json");
    cl->close_after = 0; /* a stream ends when the client goes */
    control_streams_tick_one(cl);
}

int
control_api(struct control_client *cl, const struct http_request *req,
            const struct control_target *t, const char *body, size_t blen)
{
    int get = METHOD_IS(req, "GET"), put = METHOD_IS(req, "PUT");
    int patch = METHOD_IS(req, "PATCH"), del = METHOD_IS(req, "DELETE");
    const char *s0 = t->nsegs > 0 ? t->segs[0] : "";
    size_t n = t->nsegs;
    if (n == 0 && get) {
        control_reply_json(cl, 200, json_pack("{s:s}", "hello", "clash"));
    } else if (n == 1 && get && strcmp(s0, "version") == 0) {
        control_reply_json(cl, 200, json_pack("{s:s,s:b,s:b}", "version", "chute " CHUTE_VERSION,
                                              "premium", 0, "meta", 0));
    } else if (n == 1 && strcmp(s0, "configs") == 0 && (get || patch || put)) {
        if (get) {
            get_configs(cl);
        } else if (patch) {
            patch_configs(cl, body, blen);
        } else {
            if (cl->c->env.reload != NULL)
                cl->c->env.reload(cl->c->env.ud);
            control_reply(cl, 204, NULL, NULL, 0);
        }
    } else if (n == 1 && get && strcmp(s0, "proxies") == 0) {
        get_proxies(cl);
    } else if (n == 2 && get && strcmp(s0, "proxies") == 0) {
        get_proxy(cl, t->segs[1]);
    } else if (n == 2 && put && strcmp(s0, "proxies") == 0) {
        put_proxy(cl, t->segs[1], body, blen);
    } else if (n == 3 && get && strcmp(s0, "proxies") == 0 && strcmp(t->segs[2], "delay") == 0) {
        control_delay(cl, t->segs[1], t->query, 0);
    } else if (n == 3 && get && strcmp(s0, "group") == 0 && strcmp(t->segs[2], "delay") == 0) {
        control_delay(cl, t->segs[1], t->query, 1);
    } else if (n == 1 && get && strcmp(s0, "connections") == 0) {
        if (is_ws(req))
            start_stream(cl, req, TOPIC_CONNECTIONS, t);
        else
            control_list_start(cl);
    } else if ((n == 1 || n == 2) && del && strcmp(s0, "connections") == 0) {
        delete_connections(cl, n == 2 ? t->segs[1] : NULL);
    } else if (n == 1 && get && strcmp(s0, "traffic") == 0) {
        start_stream(cl, req, TOPIC_TRAFFIC, t);
    } else if (n == 1 && get && strcmp(s0, "memory") == 0) {
        start_stream(cl, req, TOPIC_MEMORY, t);
    } else if (n == 1 && get && strcmp(s0, "logs") == 0) {
        start_stream(cl, req, TOPIC_LOGS, t);
    } else if (n == 1 && get && strcmp(s0, "rules") == 0) {
        get_rules(cl);
    } else if (strcmp(s0, "providers") == 0) {
        return control_providers(cl, req, t);
    } else if (n == 2 && get && strcmp(s0, "dns") == 0 && strcmp(t->segs[1], "query") == 0) {
        control_dns(cl, t->query);
    } else if (n == 1 && get && strcmp(s0, "metrics") == 0) {
        control_metrics(cl);
    } else if (n == 2 && get && strcmp(s0, "chute") == 0) {
        get_chute(cl, strcmp(t->segs[1], "stats") == 0 ? NULL : t->segs[1]);
    } else {
        return 0;
    }
    return 1;
}
