#ifndef CHUTE_ENGINE_ENGINE_H
#define CHUTE_ENGINE_ENGINE_H

/* The engine object behind include/chute/chute.h: one libev loop that owns
 * every listener, flow and script. Private to engine/: the folders below get
 * what they need injected (struct flow_env, their own options); only the
 * loop thread touches it. */

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine/budget.h"
#include "flow/flow.h"
#include "inbound/inbound.h"
#include "log/counter.h"
#include "outbound/outbound.h"

struct script;
struct flow_table;
struct dns_resolver;
struct inbound_listener;
struct tun;
struct flow_udp_table;
struct flow_tcp_table;
struct flow_dcache;
struct dns_server;
struct ip_view;
struct script_config;
struct chute_stats;
struct control;
struct chute_options;
struct chute_packet;
struct engine_host;

/* Packets the TUN path dropped or answered itself: drops by reason, and
 * the counters in ENGINE_DP_STATS, one X(field, key) each (log/counter.h). */
#define ENGINE_DP_STATS(X)                                                                         \
    X(bad_dst, bad_dst)       /* TCP/UDP to unspecified, loopback, multicast, broadcast */         \
    X(icmp_echo, icmp_echo)   /* echo requests answered locally */                                 \
    X(icmp_other, icmp_other) /* other ICMP: dropped */

struct engine_dp_stats {
    uint64_t drops[8]; /* by -enum ip_err: truncated, version, length, fragment, proto, l4 */
#define X(field, key) uint64_t field;
    ENGINE_DP_STATS(X)
#undef X
};
/* ENGINE_DP_STATS as a table over struct engine_dp_stats (drops aside). */
extern const struct log_counter engine_dp_counters[];

struct mitm;
struct mitm_hosts;
struct mitm_hooks;
struct tls_ca;
struct tls_mint;

/* What one bundle's MITM settings hold (mitm_glue.c). */
struct engine_mitm {
    int on;
    struct mitm_hosts *hosts, *skip;
    struct tls_ca *ca;
    struct tls_mint *mint;
    char *ca_path;
    int state_ca;  /* the CA is chute's own (state folder): reloads keep it */
    int reuse_ca;  /* prepared: take the running CA and its leaves */
    const struct mitm_hooks *hooks[2];
    size_t nhooks;
    int auto_bypass, block_quic;
    double bypass_seconds;
    size_t max_buffered;
};

struct engine {
    struct ev_loop *loop;
    struct script *script;   /* the current bundle; replaced whole on reload */
    char *bundle_dir;        /* NULL for a bundle loaded from a string */
    char *bundle_src;
    struct flow_table *flows;
    uint64_t trim_peak; /* trim.c: the most flows since the last malloc_trim */
    struct flow_dcache *dcache; /* per loaded bundle: a reload starts it empty */
    struct dns_resolver *dns;
    struct dns_server *dnss;     /* NULL unless the bundle has dns = {...} */
    struct outbound_env local;   /* like out, without interface or mark: chute's own listeners */
    struct outbound_env out;
    struct inbound_listener *socks, *http, *mixed;
    struct inbound_listener **reverse; /* listen.reverse, one per entry */
    size_t nreverse;
    struct tun *tun;             /* while running: the device (tun = {...}) or the host's */
    struct engine_host *host;    /* chute_options.packets_out: from new to free */
    struct flow_udp_table *udp;
    struct flow_tcp_table *tcp;  /* the TUN's TCP flows */
    struct engine_dp_stats dp;
    size_t memory_limit;         /* chute_options.memory_limit: wins over the bundle's */
    struct engine_budget budget; /* the current bundle's sizes (budget.c) */
    struct mitm *mitm;          /* made with the first bundle that has a MITM */
    struct engine_mitm mitm_cur;
    struct flow_opts fopts;  /* the current bundle's, rewritten by each load */
    struct flow_env fenv;    /* what netstack, flow/udp.c and the listeners are given */
    struct inbound_users users[3]; /* socks, http, mixed: the current bundle's credentials */
    uint32_t rule_version;   /* bumped by every reload */
    uint64_t route_calls_before, route_errors_before; /* of scripts replaced by reloads */
    uint64_t dcache_hits_before;
    uint64_t rule_resolves;  /* names resolved because an IP rule needed them (resolve_glue.c) */
    uint64_t reloads;        /* successful reloads */
    struct control *control; /* NULL unless the bundle has control = {...} */
    struct fetch_set *fetch; /* remote rule sets and providers (fetch_glue.c), or NULL */
    int mode;                /* enum engine_mode: the control API's Clash mode */
    ev_signal _sigint, _sigterm, _sighup, _sigusr1, _sigusr2;
    ev_async _stop, _reload, _load_done;
    /* A reload's bundle loads on its own thread (engine_reload). */
    pthread_t _loader;
    int _loading, _reload_again;
    struct script *_loaded;  /* the loader's result, or NULL with _load_err */
    char _load_err[1024];
    ev_io _tun_io;
    ev_async _host;              /* chute_engine_packets_in woke the loop */
    ev_prepare _flush;
    ev_timer _lwip;
    atomic_int _stop_requested;
    int _running;
    /* Published for other threads by engine_stats_publish(). */
    _Atomic uint64_t _pub[16];
};

/* How new flows are decided (Clash's "mode", set through the control
 * API): by the script, all DIRECT, all through the policy named GLOBAL. */
enum engine_mode { ENGINE_MODE_RULE = 0, ENGINE_MODE_DIRECT, ENGINE_MODE_GLOBAL };

/* control_glue.c: starts the control API of the current bundle
 * (control = {...}) on the loop, or does nothing; -1 with |err|. */
int engine_control_start(struct engine *e, char *err, size_t errlen);
void engine_control_stop(struct engine *e);
/* After a reload: the new bundle's control = {...} (secret, CORS, address;
 * started, or closed when it is gone); errors go to the log. */
void engine_control_reload(struct engine *e);

/* self_guard.c: outbound_env.is_self, |arg| the engine. */
int engine_is_self(void *arg, const struct sockaddr_storage *ss);

/* stats.c: calls |emit| once with every module's counters now (the
 * stats line's groups, then the TUN's while it runs). */
void engine_stats_groups(struct engine *e,
                         void (*emit)(void *arg, const struct log_counter_group *g, size_t n),
                         void *arg);

/* Decides a new flow's policy: the decision cache, else the script's
 * route(); stores the policy and the deciding rule in |f|. */
void engine_route(struct engine *e, struct flow *f);

/* Loads a bundle into a new script and makes it current; on failure the old
 * one stays and |err| says why (file:line). */
int engine_load(struct engine *e, const char *dir, const char *src, char *err, size_t errlen);
/* datapath.c: opens the TUN path of the current bundle (tun = {...}), or
 * does nothing when it has none. Returns -1 with |err| filled. */
int engine_tun_start(struct engine *e, char *err, size_t errlen);
void engine_tun_stop(struct engine *e);
/* datapath.c: processes the host's queued packets (the ev_async fired). */
void engine_host_drain(struct engine *e);

/* host.c: the packet interface. engine_host_new applies |o|'s packets_out
 * and protect_socket (0 when it has none); the rest any thread may call
 * between new and free. */
int engine_host_new(struct engine *e, const struct chute_options *o);
void engine_host_free(struct engine *e);
struct tun *engine_host_tun(const struct engine *e);
int engine_packets_in(struct engine *e, const struct chute_packet *pkts, size_t n);

/* dns_glue.c. Applies the bundle's dns = {...} to the resolver and the
 * server (|old| is the previous bundle's config, or NULL). */
int engine_dns_load(struct engine *e, const struct script_config *old,
                    const struct script_config *cfg, char *err, size_t errlen);
/* Points the server's on_dns hook at the current script. */
void engine_dns_hook(struct engine *e);
/* A UDP datagram to port 53 on the TUN: answered by the server (1), or not
 * ours (0). */
int engine_dns_udp(struct engine *e, const struct ip_view *v);
/* A TCP flow to port 53 on the TUN: sent to the server's TCP socket (1). */
int engine_dns_tcp(struct engine *e, struct flow *f);
/* A new flow's destination: a fake IP becomes its name (-1: a fake IP with
 * no name behind it: refuse the flow); in real-ip mode the name an answer
 * gave for the IP becomes flow.host. */
int engine_flow_name(struct engine *e, struct flow *f);

/* stats.c. Logs every module's counters, from their tables, in two lines
 * ("stats flows_active=...", and "stats tun ..." while the TUN runs), after
 * the groups line (SIGUSR1, and at exit). */
void engine_stats_log(struct engine *e);

/* mitm_glue.c. Builds what |s|'s MITM settings need (the CA, made in the
 * state folder on first use; host lists; hook sets) without touching the
 * running engine: -1 with |err| when the bundle cannot run. */
int engine_mitm_prepare(struct engine *e, struct script *s, struct engine_mitm *n, char *err,
                        size_t errlen);
/* Makes |n| current (|s| just became e->script) and frees the previous. */
void engine_mitm_commit(struct engine *e, struct engine_mitm *n);
void engine_mitm_release(struct engine_mitm *m);

/* Reloads the bundle from where it came; logs the outcome. */
void engine_reload(struct engine *e);
/* stats.c. Copies the loop's counters where engine_stats_read() (any
 * thread: chute_engine_stats()) reads them. */
void engine_stats_publish(struct engine *e);
void engine_stats_read(struct engine *e, struct chute_stats *out);

/* ca_cli.c. chute's state folder: $CHUTE_STATE_DIR, else
 * $XDG_STATE_HOME/chute, else $HOME/.local/state/chute. 0, or -1 when
 * none is set or |dir| is too small. */
int engine_state_dir(char *dir, size_t n);
/* The local CA's files in it: ca.pem and ca.key. 0 or -1, as above. */
int engine_ca_paths(char *cert, size_t certlen, char *key, size_t keylen);
/* `chute ca ...` (argv[1] is "ca"): the exit status. */
int engine_ca_main(int argc, char **argv);
/* chute_bundle_check, and for `chute check` (|need_listener|: as `chute
 * run` refuses a bundle that takes no traffic). */
int engine_bundle_check(const char *path, int need_listener, char *err, size_t errlen);
/* cli_hint.c: 0 when |path| may be a bundle folder; -1 when it is a file
 * (main.lua, a Clash or Surge config), after saying on stderr what to pass
 * to `chute |cmd|` instead. */
int engine_cli_bundle_arg(const char *cmd, const char *path);
/* chute import CONFIG -o BUNDLE (import_cli.c) */
/* trim.c: from the stats timer; gives memory back after a burst of flows. */
void engine_trim_tick(struct engine *e);
int engine_import_main(int argc, char **argv);
struct dns_resolver_opts;
/* dns_glue.c: the resolver options a bundle's config asks for. */
void engine_resolver_opts(const struct script_config *cfg, struct dns_resolver_opts *ro);

/* fetch_glue.c: the current bundle's remote rule sets and providers on
 * the engine's fetch set (made with the first bundle that has one). */
void engine_fetch_sync(struct engine *e);
struct fetch_item_cfg;
/* Loads |env|'s trust store when one of |items| is https and it has none:
 * 0, or -1 with |err|. */
int engine_fetch_trust(struct outbound_env *env, const struct fetch_item_cfg *items, size_t n,
                       char *err, size_t errlen);
/* update_cli.c: `chute update BUNDLE` (argv[1] is "update"). */
int engine_update_main(int argc, char **argv);

/* resolve_glue.c: flow_env.resolve for IP rules without no-resolve. */
void *engine_flow_resolve(void *ud, struct flow *f, void (*done)(void *arg), void *arg);
void engine_flow_resolve_cancel(void *ud, void *handle);
/* Stores a resolver's answer (or its error) in f->resolved. */
void engine_resolved_store(struct flow *f, const char *err, const struct sockaddr_storage *addrs,
                           size_t n);
/* "192.0.2.1 2001:db8::1", or "no address", into |buf|. */
size_t engine_resolved_format(const struct flow_resolved *r, char *buf, size_t len);

/* `chute run --log-format`: enum log_format, over the bundle's log_format
 * (the process's one CLI; -1, the default: the bundle decides). */
void engine_cli_log_format(int format);

#endif
