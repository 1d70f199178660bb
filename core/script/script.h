#ifndef CHUTE_SCRIPT_SCRIPT_H
#define CHUTE_SCRIPT_SCRIPT_H

/* The Lua host: one lua_State per loaded bundle, sandboxed, with an
 * instruction budget per call and a memory cap. A reload builds a new
 * script and swaps it in; flows keep the decisions they already have. */

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "flow/flow.h"
#include "ip/ip.h"
#include "log/counter.h"

struct script;
struct outbound_set;

struct script_listener {
    int enabled;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char text[80];      /* the address as written, for logs */
    size_t num_users;   /* SOCKS5 RFC 1929 / HTTP Basic; 0 = no auth */
    char **users;       /* num_users pairs: users[2i] name, users[2i+1] password */
};

/* listen.reverse: a listener whose connections go to one HTTPS origin,
 * intercepted (inbound/reverse.c). */
struct script_reverse {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char text[80];          /* the listen address as written */
    char host[256];         /* the origin */
    uint16_t port;
};

#define SCRIPT_TUN_MAX_ADDRS 4

/* tun = { ... }: capture a machine's traffic on a TUN device. */
struct script_tun {
    int enabled;
    char name[16];
    struct ip_cidr addrs[SCRIPT_TUN_MAX_ADDRS];
    size_t num_addrs;
    int mtu;                  /* 0: leave the device's MTU */
    int batch;                /* packets per read batch */
    int auto_route;           /* route everything through the TUN (policy routing) */
    int offload;              /* TCP segmentation offload (IFF_VNET_HDR), default on */
    struct ip_cidr *exclude;
    size_t num_exclude;
};

#define SCRIPT_DNS_MAX_UPSTREAMS 8

/* dns = { ... }: the built-in DNS server and the resolver's upstreams. */
struct script_dns {
    int enabled;             /* the bundle has dns = {...} */
    int mode;                /* enum dns_mode: 0 fake-ip, 1 real-ip */
    char range4[64], range6[64];
    uint32_t fake_ttl;
    size_t fake_max;
    char *state_file;        /* NULL: none (state_file = false) */
    char **exclude;          /* NULL: the defaults */
    size_t nexclude;
    struct sockaddr_storage upstream[SCRIPT_DNS_MAX_UPSTREAMS];
    size_t nupstream;
    struct sockaddr_storage listen;
    int has_listen;
    double timeout;
    size_t cache;
    int hijack;              /* answer port 53 on the TUN (default on) */
};

/* mitm = { ... }: which flows chute decrypts, and with which CA. */
struct script_mitm {
    int enabled;          /* the bundle has mitm = {...} */
    char **hosts;         /* Surge hostname patterns, in order ("*.example.com",
                           * "api.example.net:8443", "-pinned.example.com") */
    size_t nhosts;
    char *ca, *ca_key;    /* NULL: chute's own CA in its state folder; else paths
                           * (relative ones resolved against the bundle) */
    char **skip_verify;   /* origins whose certificate is not checked (warned at load) */
    size_t nskip;
    int auto_bypass;      /* pass a host through a while after a client refused the leaf */
    double bypass_seconds;
    int block_quic;       /* refuse UDP/443 to MITM hosts on the TUN (default on) */
    size_t max_body;      /* bytes of a body a hook or rewrite may see (default 128 KiB) */
    size_t max_buffered;  /* h2 body bytes held across all connections (0: the MITM's default) */
};

/* control = { ... }: the control API (core/control). */
struct script_control {
    int enabled;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char listen[80];   /* as written */
    char secret[256];  /* "" none: refused unless the address is loopback */
    char cors[256];    /* Access-Control-Allow-Origin; "" the API's own origin */
};

/* The bundle's configuration after chute.config(), with defaults applied.
 * Owned by the script; valid until script_free. */
struct script_config {
    int log_level;          /* enum log_level, or -1 when the bundle says nothing */
    int fallback;           /* policy for flows whose route() fails */
    struct script_listener socks, http, mixed; /* mixed: SOCKS5 and HTTP on one port */
    int log_format;         /* enum log_format, or -1 when the bundle says nothing */
    char *log_file;         /* NULL: stderr; else a path (relative ones resolved against the bundle) */
    struct script_reverse *reverse;
    size_t nreverse;
    double connect_timeout; /* seconds */
    double idle_timeout;    /* seconds */
    double udp_timeout;     /* seconds a UDP mapping lives without traffic */
    struct script_tun tun;
    char out_interface[16]; /* upstream sockets bind here (SO_BINDTODEVICE); "" none */
    uint32_t out_fwmark;    /* upstream sockets carry this mark (SO_MARK); 0 none */
    uint32_t budget;        /* Lua instructions per route() call */
    size_t lua_memory;      /* bytes */
    size_t decision_cache;  /* entries; 0 off */
    size_t memory_limit;    /* bytes (engine/budget.c sizes it); 0 none */
    struct script_dns dns;
    struct script_mitm mitm;
    struct script_control control;
};

/* The script host's counters, one X(field, key) each (log/counter.h). */
#define SCRIPT_STATS(X)                                                                            \
    X(route_calls, route_calls)                                                                    \
    X(route_errors, route_errors) /* errors, budget overruns and unknown names */                  \
    X(lua_bytes, lua_bytes)       /* memory held by the state */                               \
    X(hook_calls, hook_calls)     /* on_request / on_response calls */                         \
    X(hook_errors, hook_errors)   /* calls that failed (the message passed unmodified) */      \
    X(hook_budget_cuts, hook_budget_cuts) /* of those, cut by the instruction budget */        \
    X(hook_body_skips, hook_body_skips)   /* body hooks skipped: the body was over max_body */

struct script_stats {
#define X(field, key) uint64_t field;
    SCRIPT_STATS(X)
#undef X
};
/* SCRIPT_STATS as a table over struct script_stats. */
extern const struct log_counter script_counters[];

/* Loads the bundle in |dir| (a folder with main.lua), or when |main_src| is
 * non-NULL that source as the bundle's main.lua (requires still resolve in
 * |dir| when it is non-NULL). Runs main.lua under a load budget. Returns the
 * script, or NULL with a message naming file:line in |err|. */
struct script *script_load(const char *dir, const char *main_src, char *err, size_t errlen);
void script_free(struct script *s);

const struct script_config *script_config(const struct script *s);
/* Bytes the bundle's rule sets (chute.ruleset, chute.rules) built. */
size_t script_rules_memory(const struct script *s);
/* Caps the Lua state at |cap| bytes (when below its lua_memory_mb): -1
 * with |err| when it already holds more after loading (|limit|, the
 * memory_limit the cap comes from, for the message). */
int script_memory_cap(struct script *s, size_t cap, size_t limit, char *err, size_t errlen);
void script_stats(const struct script *s, struct script_stats *out);

/* A refreshed GEOIP / IP-ASN / GEOSITE file (script/geo.c): |which| is
 * "mmdb", "asn" or "geosite", as in chute.config's geo = {...}. Opens
 * |path| and swaps it in only if it is usable; -1 with |err| and the old
 * one stays. From the loop thread, between route() calls; after a 0 the
 * decision cache must be dropped (decisions may have changed). */
int script_geo_update(struct script *s, const char *which, const char *path, char *err,
                      size_t errlen);

/* Decides where |f| goes: calls chute.route(flow) once under the budget and
 * stores the policy and the deciding rule in |f|. An error, an overrun or an
 * unknown name logs file:line and gives the fallback policy. Never fails. */
void script_route(struct script *s, struct flow *f);

/* The bundle's chute.on_request / chute.on_response hooks as a set the
 * MITM runs (mitm/mitm.h), or NULL when the bundle registered none. Owned
 * by the script: valid until script_free (a reload makes a new one).
 * Requests and responses whose URL no hook's pattern matches never enter
 * Lua; the rest run each matching hook in registration order under the
 * instruction budget and memory cap of route(). A hook that fails (error,
 * budget, bad return value) is logged with file:line and counted, and its
 * own edits are dropped: the message goes on as the hooks before it left
 * it. Loop thread only. */
struct mitm_hooks;
const struct mitm_hooks *script_mitm_hooks(struct script *s);

/* Calls chute.on_dns({name=, type=}) under the budget, if the bundle has
 * it, and fills |out| (struct dns_hook_result). Errors log file:line and
 * leave the answer alone. */
struct dns_hook_result;
void script_on_dns(struct script *s, const char *name, uint16_t qtype, struct dns_hook_result *out);
int script_has_on_dns(const struct script *s);

/* What `run` refuses about the bundle's listeners, for `check` too: two
 * on one address and port (or overlapping: a wildcard, dual-stack [::]),
 * and, when |need_one|, none that takes traffic (a listen = {...}, a TUN
 * or dns.listen). 0, or -1 with the message naming file:line in |err|. */
int script_listeners_check(struct script *s, int need_one, char *err, size_t errlen);
/* Loads nothing: warns (log) about what a bundle that loaded leaves to
 * defaults a user may not expect, such as no route(). */
void script_warn_defaults(const struct script *s);

/* The policy id of |name|: DIRECT, REJECT, or a proxy or group the bundle
 * declared (|s| may be NULL: the built-ins only); -1 if unknown. */
int script_policy_lookup(const struct script *s, const char *name);
/* The name of policy id |policy| in |s|. */
const char *script_policy_name(const struct script *s, int policy);
/* The rewrites of the bundle's chute.module calls (Surge modules:
 * mitm/rewrite.h): their hooks (mitm_rewrites_hooks) and [MITM] host names
 * (mitm_rewrites_hostnames). NULL when the bundle loaded none. Owned by
 * the script. */
struct mitm_rewrites;
struct mitm_rewrites *script_rewrites(const struct script *s);
/* The bundle's proxies and groups (NULL before the load finished). */
struct outbound_set *script_outbound_set(const struct script *s);

/* The bundle's remote rule sets and proxy providers (chute.ruleset
 * { url = ... }, chute.provider), for core/fetch to keep fresh: |*n| of
 * them, owned by the script. A successful fetch replaces an item's cache;
 * the next load reads it. */
struct fetch_item_cfg;
const struct fetch_item_cfg *script_remotes(const struct script *s, size_t *n);
/* The |k|-th proxy chute.provider |provider| gave (its name in the
 * bundle), or NULL past the last (or for no such provider). */
const char *script_provider_proxy(const struct script *s, const char *provider, size_t k);
/* Whether |buf| is a good body for |c| (a list that parses, a
 * subscription with proxies): 0 with |note| ("512 rules", "12 proxies
 * (clash)"), or -1 with |note| saying why not. Touches no script: any
 * thread may call it. */
int script_remote_validate(const struct fetch_item_cfg *c, const char *buf, size_t len, char *note,
                           size_t notelen);

#endif
