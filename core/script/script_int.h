#ifndef CHUTE_SCRIPT_INT_H
#define CHUTE_SCRIPT_INT_H

/* Private to core/script: the script object and the helpers its files share. */

#include <lauxlib.h>
#include <lua.h>

#include "mitm/mitm.h"
#include "mem/slice.h"
#include "script/script.h"

#define SCRIPT_LOAD_BUDGET 200000000u /* instructions for running main.lua */
#define SCRIPT_MAX_SOURCE (64u << 20)  /* bytes of one Lua file of the bundle */
#define SCRIPT_MAX_FILES 64            /* io.open handles open at once per state */

#define SCRIPT_HOOK_METHODS 8

/* One chute.on_request / chute.on_response registration (bind_http.c). */
struct script_hook {
    struct rules_re *re;  /* the URL pattern, matched against mitm_request.url */
    int fn_ref;           /* the function, in the registry */
    int body;             /* opts.body: wants the body before it runs */
    size_t max_body;      /* opts.max_body; 0 until the load ends: mitm.max_body */
    char methods[SCRIPT_HOOK_METHODS][16]; /* opts.method; "" ends, none: any */
    char where[64];       /* "main.lua:12": where the function is defined */
    uint64_t failures;    /* for the log's rate limit */
    double logged_at;     /* when a failure was last logged (monotonic s) */
    uint64_t unlogged;    /* failures since then that were not */
    int skip_logged;      /* the over-max_body skip was logged */
};

/* What the hooks of one message may change, applied to the message only
 * once they return (hooks.c). */
struct hook_work {
    struct http_fwd_fields fields; /* the phase's editable fields */
    int cow;                       /* fields.v is the running hook's own copy */
    struct mem_slice method;
    struct mem_slice path, query;  /* the target split at its '?' */
    int has_query;
    struct mem_slice target;       /* path?query: the request line's target */
    int method_set, target_set;
    const char *body;              /* NULL: not there (not asked for, too large) */
    size_t body_len;
    int body_set;
};

/* One message's run of hooks, on the C stack of the mitm_hooks callback. */
struct hook_msg {
    uint64_t serial;               /* struct script's msg_serial for it */
    int response;                  /* on_response (req is read-only then) */
    struct mitm_request *m;
    struct http_fwd_resp *resp;
    const struct script_hook *h;   /* running now */
    struct hook_work w, saved;     /* saved: as the running hook found it */
    int fields_edited;             /* a hook that succeeded edited the fields */
    int replied;
    struct mitm_reply reply;
};

struct script {
    lua_State *L;
    char *dir;
    size_t mem_used, mem_limit;
    size_t rules_bytes; /* the rule sets' C sets, as built (script_rules_memory) */
    uint32_t budget;      /* current call's limit */
    uint64_t used;        /* instructions and charged units counted in this call */
    int armed;            /* a call is under the budget */
    int tripped;          /* the budget ran out: keep raising until the call unwinds */
    uint64_t time_limit_ns, deadline_ns; /* the call's wall clock (budget.c) */
    char trip_msg[192];   /* "file:line: instruction budget exceeded (...)" */
    int env_ref;          /* the sandbox _ENV shared by the bundle's chunks */
    int state_ref;        /* chute.lua's state table */
    int route_ref;        /* chute.route, or LUA_NOREF */
    int on_dns_ref;       /* chute.on_dns, or LUA_NOREF */
    int flow_ref;         /* the flow userdata's metatable */
    struct script_config cfg;
    struct script_stats st;
    /* chute.proxy / chute.group declarations while main.lua runs, then the
     * set built from them (bind_proxy.c). */
    struct outbound_proxy *proxies;
    size_t nproxies;
    struct outbound_group_cfg *groups;
    size_t ngroups;
    struct outbound_set *set;
    /* The first group member that named nothing declared yet, told once
     * main.lua has run (it may be a group declared later). */
    char late_member[64], late_group[64], late_where[96];
    int late_index;
    /* chute.provider / chute.ruleset { url = ... } (bind_remote.c) */
    struct fetch_item_cfg *remotes;
    size_t nremotes;
    struct script_provider *providers;
    size_t nproviders;
    /* chute.on_request / on_response, in registration order (bind_http.c),
     * and the set the MITM gets (hooks.c). */
    struct script_hook *req_hooks, *resp_hooks;
    size_t nreq_hooks, nresp_hooks;
    struct mitm_hooks mitm_hooks;
    int loaded;           /* main.lua has run: no more registrations */
    int reply_mt_ref;     /* metatable of chute.respond/redirect/reject's results */
    int req_mt_ref, resp_mt_ref, headers_mt_ref;
    struct hook_msg *msg; /* the message whose hooks run now, or NULL */
    uint64_t msg_serial;  /* its number: objects of older messages are dead */
    struct mitm_rewrites *rewrites; /* chute.module's rules, NULL until one loads */
    char protect_err[1024]; /* why the last script_protected call failed */
    const char *main_src;   /* chute_engine_load_string's main.lua while it loads, or NULL */
    char cfg_source[4200];  /* chute.config's call: chunk source ("@dir/main.lua"), */
    char cfg_short[128];    /* its shown name and its line (0: no chute.config) */
    int cfg_line;
    unsigned nfiles;        /* io.open handles not closed yet */
    int file_errno;         /* why the last script_bundle_open failed (ENOENT: missing) */
    struct script_geo *geo; /* GEOIP/GEOSITE files and sites (geo.c), NULL if none */
};

static inline struct script *
script_of(lua_State *L)
{
    return *(struct script **)lua_getextraspace(L);
}

/* protect.c */
/* Runs fn(L) with |ud| as its light-userdata argument inside lua_pcall.
 * Returns LUA_OK, or the error code with the message in s->protect_err. */
int script_protected(struct script *s, lua_CFunction fn, void *ud);
/* Sets the panic handler that logs before Lua aborts. */
void script_protect_init(lua_State *L);

/* budget.c */
void script_budget_arm(struct script *s, uint32_t budget);
void script_budget_disarm(struct script *s);
/* Counts |units| of work a C function is about to do (or did) against the
 * running call's budget, and checks its wall clock: raises the budget's
 * error when either ran out. A no-op outside a budgeted call. */
void script_budget_charge(lua_State *L, uint64_t units);
/* Message handler for lua_pcall: keeps the error's "file:line:" position. */
int script_msgh(lua_State *L);

/* Does |msg| start with a "chunk:line:" position? (route.c) */
int script_has_position(const char *msg);

/* bind_http.c: chute.on_request/on_response/respond/redirect/reject, and
 * the set for the MITM once the load is done. */
int script_l_on_request(lua_State *L);
int script_l_on_response(lua_State *L);
int script_l_respond(lua_State *L);
int script_l_redirect(lua_State *L);
int script_l_reject(lua_State *L);
void script_http_open(struct script *s);
void script_hooks_finish(struct script *s);
void script_hooks_free(struct script *s);
/* RFC 9110 token / field value (no control bytes but HT) checks. */
int script_http_token_ok(const char *p, size_t n);
int script_http_value_ok(const char *p, size_t n);
/* 1 when |h| wants |m| (pattern and method), in C. */
int script_hook_wants(const struct script_hook *h, const struct mitm_request *m);

/* bind_req.c: the req, resp and headers objects hooks get. */
enum { SCRIPT_OBJ_REQ, SCRIPT_OBJ_RESP };
void script_hooks_open(struct script *s);
/* Pushes a new req or resp object for the message running now. */
void script_push_msg_obj(lua_State *L, int kind);
/* hooks.c: running them (the mitm_hooks callbacks). */
int script_hooks_on_request(void *ud, struct mitm_request *m, struct mitm_reply *out);
void script_hooks_on_response(void *ud, struct mitm_request *m, struct http_fwd_resp *resp,
                              const char **body, size_t *body_len);

/* bind_remote.c: FNV-1a of a URL, for its cache file's name. */
unsigned long long script_url_hash(const char *s);

/* sandbox.c */
/* "<bundle>/<rel>" for a relative path without ".."; -1 otherwise. */
int script_bundle_path(struct script *s, const char *rel, char *out, size_t len);
/* A path the config names (chute.config's files, not the sandbox's): as
 * given when absolute, else the bundle's; malloc'd, NULL out of memory. */
char *script_config_path(struct script *s, const char *p);
int script_sandbox_open(struct script *s, char *err, size_t errlen);
/* Loads a bundle file (path relative to the bundle) into the sandbox: pushes
 * the chunk, or returns non-zero with the message pushed. */
int script_load_file(struct script *s, const char *rel);

/* file.c */
/* Opens bundle file |rel| read-only: no link followed at any level, a
 * regular file only, never blocking. Returns the fd, or -1 with
 * "<bundle>/<rel>: <reason>" in |why|. */
int script_bundle_open(struct script *s, const char *rel, char *why, size_t whylen);
/* The whole file (at most |max| bytes) in a malloc'd buffer with a NUL
 * after its *len bytes; NULL with |why|. */
char *script_bundle_read(struct script *s, const char *rel, size_t max, size_t *len, char *why,
                         size_t whylen);

/* bounded.c: the library functions whose work grows with an argument,
 * charged to the budget; pattern.c: string.find/match/gmatch/gsub, the
 * matcher charged step by step, into the string library at |string_lib|. */
void script_bounded_open(lua_State *L);
void script_pattern_open(lua_State *L, int string_lib);

/* config.c */
int script_config_read(struct script *s, char *err, size_t errlen);
/* config_log.c: log_format, log_file from the config table at |t|. */
void script_log_read(struct script *s, int t);
/* config_mixed.c: listen.mixed on the port of listen.socks or listen.http
 * (|st|: the state table, for the position of chute.config). */
int script_mixed_check(struct script *s, int st, char *err, size_t errlen);
void script_config_free(struct script_config *cfg);
int script_check_address(const char *text, struct sockaddr_storage *ss, socklen_t *len);

/* bind_proxy.c: chute.proxy, chute.group, chute.select into the table on
 * top of the stack; the set made once main.lua has run. */
void script_proxy_open(lua_State *L);
/* Declares proxy |name| from the chute.proxy table at |t|: NULL, or why
 * not (pushed or static). */
const char *script_proxy_add(lua_State *L, int t, const char *name, int *field);

/* bind_remote.c: chute.provider "name" {...}, chute.ruleset { url = ... },
 * a group's use = {...} (the count of its providers' proxies, then their
 * ids into |out|), and the check once main.lua has run. */
struct fetch_item_cfg;
struct script_provider;
int script_l_provider(lua_State *L);
int script_l_ruleset_remote(lua_State *L);
const char *script_group_use(lua_State *L, struct script *s, int t, size_t *count);
size_t script_group_use_fill(lua_State *L, struct script *s, int t, int *out);
int script_remotes_finish(struct script *s, char *err, size_t errlen);
/* A provider's proxy named |name| takes another name (the bundle's own
 * declaration wins). */
void script_provider_yield(struct script *s, const char *name);
void script_remotes_free(struct script *s);
/* bind_ruleset.c: a ruleset from |buf| (NULL: empty) pushed; -1 with
 * |err| when it does not parse (an empty one is pushed then). */
int script_ruleset_push_text(lua_State *L, const char *name, const char *buf, size_t len, int fmt,
                             int skip, int strict, char *err, size_t errlen);
/* The same check without Lua (any thread): 0 with the entries' count. */
int script_ruleset_check(const char *name, const char *buf, size_t len, int fmt, int skip,
                         int strict, size_t *count, char *err, size_t errlen);
int script_proxies_finish(struct script *s, char *err, size_t errlen);
void script_proxies_free(struct script *s);

/* selfloop.c: -1 with |err| when one of the |n| proxies is chute's own
 * listener of its protocol (flows through it would loop). */
struct outbound_proxy;
int script_check_self_loops(struct script *s, const struct outbound_proxy *p, size_t n, char *err,
                            size_t errlen);

/* bind_dns.c: dns = {...} of the config table at |t|; core.check_* */
int script_dns_read(struct script *s, int t, char *err, size_t errlen);
void script_dns_free(struct script_dns *d);
int script_l_check_upstream(lua_State *L);
int script_l_check_range(lua_State *L);
/* config_size.c: chute.config's sizes (memory_limit): core.check_size for
 * the schema, and the bytes of key |key| of table |t| (0 when absent). */
int script_l_check_size(lua_State *L);
size_t script_config_size(lua_State *L, int t, const char *key);

/* bind_flow.c */
struct flow_process;
/* The process behind |f|, looked up once per flow; NULL if not local. */
const struct flow_process *script_flow_process(const struct flow *f);

/* ip_rules.c. An IP rule without no-resolve was reached for |f|: 1 (and
 * FLOW_READ_RESOLVE set) when |f| is a name not resolved yet, so that the
 * decision must wait for its addresses; 0 when they are known (or the
 * flow has an IP). */
int script_ip_rule_reached(struct flow *f);
struct rules_cidrs;
/* |f|'s destination IP in |all|, or, for a resolved named flow, any of its
 * addresses in |resolving| (the rules without no-resolve): 1 with the
 * smallest tag. */
int script_cidrs_match_flow(const struct rules_cidrs *all, const struct rules_cidrs *resolving,
                            const struct flow *f, uint32_t *tag);
/* The flow of a "chute.flow" userdata argument (an error outside route()). */
struct flow *script_check_flow(lua_State *L, int idx);
/* bind_ruleset.c: the metatable, and chute.ruleset() itself */
void script_ruleset_open(struct script *s);
int script_l_ruleset(lua_State *L);
/* Pushes Surge's internal rule set |name| ("LAN", "SYSTEM") and returns 1,
 * or 0 (nothing pushed) for another name. */
int script_ruleset_builtin(lua_State *L, const char *name);
/* IN-TYPE's value ("HTTP/SOCKS5", mihomo's names) as a bit per slot in
 * |mask|; -1 for a name mihomo does not have. A slot is an enum
 * flow_inbound, but the HTTP listener has two, as in mihomo: its CONNECT
 * tunnels are HTTPS (FLOW_IN_HTTP), its plain forwarded requests HTTP
 * (SCRIPT_IN_HTTP_PLAIN). script_in_type_of gives a flow's slot. */
#define SCRIPT_IN_HTTP_PLAIN 4
#define SCRIPT_IN_SLOTS 5
int script_in_types(struct mem_slice v, uint8_t *mask);
int script_in_type_of(const struct flow *f);
int script_ruleset_match(lua_State *L, int idx, struct flow *f, uint32_t *line);
/* bind_module.c: chute.module "file" | { text = ... } */
int script_l_module(lua_State *L);
/* bind_import.c: chute.clash "config.yaml" / chute.surge "profile.conf" */
int script_l_clash(lua_State *L);
int script_l_surge(lua_State *L);
/* bind_rules.c: chute.rules { ... } */
void script_rules_open(struct script *s);
int script_l_rules(lua_State *L);
void script_flow_open(struct script *s);
/* Pushes a flow userdata for one call; set *result to NULL after it. */
struct flow **script_flow_push(struct script *s, struct flow *f);

#endif
