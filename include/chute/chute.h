#ifndef CHUTE_CHUTE_H
#define CHUTE_CHUTE_H

/* chute's embedding API: what the CLI itself uses, and what a host app (a
 * router daemon, a NetworkExtension) links against. Handles are opaque.
 * Unless a function says otherwise, call it from the thread that runs the
 * engine (the one inside chute_engine_run), or before the run starts. */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What libchute.so exports; everything else in it is hidden. */
#if defined(__GNUC__)
#define CHUTE_API __attribute__((visibility("default")))
#else
#define CHUTE_API
#endif

typedef struct chute_engine chute_engine;

/* Error codes: 0 is success. */
#define CHUTE_ERR_INVALID (-1) /* bad argument or bundle: see the message */
#define CHUTE_ERR_NOMEM (-2)
#define CHUTE_ERR_SYSTEM (-3)  /* a listener or the loop could not start */
#define CHUTE_ERR_FULL (-4)    /* chute_engine_packets_in: the queue has no room */

/* One IP packet (IPv4 or IPv6, no link-layer header). */
struct chute_packet {
    const uint8_t *data;
    size_t len;
};

/* Receives a batch of packets the engine sends towards the host's clients
 * (write them to the TUN fd, packetFlow.writePackets). Called on the loop
 * thread; |pkts| and the bytes they point at are valid during the call
 * only (they are the engine's write queue: nothing is copied for it). */
typedef void (*chute_packets_out_fn)(void *arg, const struct chute_packet *pkts, size_t n);

/* Called with every upstream socket the engine creates (connections, UDP,
 * DNS queries), before it connects, on the loop thread (and on the thread
 * loading a bundle, for the DNS socket a load opens to check): the host makes the
 * socket bypass its own tunnel (VpnService.protect, SO_MARK, binding to the
 * physical interface). Returns 0, or an errno value that fails the socket. */
typedef int (*chute_protect_socket_fn)(void *arg, int fd);

struct chute_options {
    /* Log level: "error", "warn", "info" (default) or "debug". The bundle's
     * log_level applies when this is NULL. Not copied: a static string. */
    const char *log_level;
    /* Nonzero: while running, SIGINT/SIGTERM stop the engine, SIGHUP
     * reloads the bundle, SIGUSR1 logs the counters and SIGUSR2 reopens
     * the bundle's log_file (the CLI sets it; a host app may keep its own). */
    int handle_signals;

    /* The packet interface. With |packets_out| set, the engine opens no TUN
     * device (the bundle's tun = {...} is ignored): the host hands it
     * packets with chute_engine_packets_in and takes its output through
     * |packets_out|. Packets are MTU-sized (no offload). */
    chute_packets_out_fn packets_out;
    void *packets_arg;     /* passed to packets_out */
    int mtu;               /* the largest packet either way; 0: 1500 */
    int batch;             /* packets per batch, both ways, 1..256; 0: 64 */
    size_t queue;          /* packets_in's queue, in packets; 0: 1024 */

    /* With |protect_socket| set, it replaces the bundle's outbound
     * interface and fwmark for every upstream socket. */
    chute_protect_socket_fn protect_socket;
    void *protect_arg;     /* passed to protect_socket */

    /* Bytes the engine should stay within (a NetworkExtension's 15 MiB):
     * lwIP's packet heap and pools, the flow caps, DNS caches and the
     * fake-IP pool, the Lua state's cap and packets_in's queue (when
     * |queue| is 0) are sized from it (README: "Memory limit" has the
     * figures). New flows past the caps are refused (TCP: a RST; UDP: the
     * least recently used mapping closes) and counted in flows_refused; a
     * bundle whose rule sets alone exceed their share fails to load. At
     * least 8 MiB; 0: the bundle's chute.config { memory_limit = ... },
     * else no limit (the build's sizes). Set here, it wins over the
     * bundle's. lwIP's part applies when the engine starts running. */
    size_t memory_limit;
};

struct chute_stats {
    uint64_t flows_active;
    uint64_t flows_total;
    uint64_t bytes_up;      /* client -> upstream, all flows */
    uint64_t bytes_down;    /* upstream -> client */
    uint64_t route_calls;   /* chute.route() calls */
    uint64_t route_errors;  /* of which fell back: error, budget, unknown policy */
    uint64_t dcache_hits;   /* new flows decided by the decision cache, without Lua */
    uint64_t reloads;       /* successful reloads */
    uint64_t lua_bytes;     /* memory held by the current script */
    uint32_t rule_version;
    uint64_t flows_refused; /* new flows refused at memory_limit's caps */
};

/* The library's version, "MAJOR.MINOR.PATCH"; a static string. */
CHUTE_API const char *chute_version(void);

/* Creates an engine and its loop. |opts| may be NULL; it is not referred to
 * after the call. On success stores the engine in |*out| and returns 0. */
CHUTE_API int chute_engine_new(chute_engine **out, const struct chute_options *opts);

/* Loads the bundle folder |path| (with main.lua) and makes it current. On
 * error returns CHUTE_ERR_INVALID and writes a message naming file:line into
 * |err| (|errlen| bytes, may be 0); a previous bundle stays current. The
 * engine copies |path|. */
CHUTE_API int chute_engine_load_bundle(chute_engine *e, const char *path, char *err, size_t errlen);

/* Same, with |main_lua| as the bundle's main.lua; require() then finds only
 * chute's own library. The engine copies |main_lua|. */
CHUTE_API int chute_engine_load_string(chute_engine *e, const char *main_lua, char *err, size_t errlen);

/* Opens the bundle's listeners and runs the loop until chute_engine_stop,
 * SIGINT or SIGTERM; SIGHUP reloads the bundle. Returns 0 after a clean
 * stop (every connection closed), or CHUTE_ERR_SYSTEM with |err| filled
 * when a listener cannot open. Needs a loaded bundle. */
CHUTE_API int chute_engine_run(chute_engine *e, char *err, size_t errlen);

/* Hands |n| packets to an engine created with packets_out. Any thread,
 * any time between chute_engine_new and chute_engine_free; never blocks.
 * The packets are copied into the engine's bounded queue (|pkts| is the
 * caller's again on return: hosts reuse their read buffers, and taking
 * them would need a release call from the loop thread to the host's); the
 * loop is woken once per call, not per packet, and processes them in
 * batches as the TUN device's reads. Returns how many were taken, in
 * order from the first: fewer than |n| when the queue filled (the rest
 * are the caller's to drop or retry; TCP retransmits), CHUTE_ERR_FULL
 * when none fit, CHUTE_ERR_INVALID without packets_out. A packet empty or
 * longer than the MTU is dropped and counts as taken. */
CHUTE_API int chute_engine_packets_in(chute_engine *e, const struct chute_packet *pkts, size_t n);

/* Asks a running engine to stop. Safe from any thread and from signal
 * handlers' threads; returns at once. */
CHUTE_API void chute_engine_stop(chute_engine *e);

/* Asks a running engine to reload its bundle, as SIGHUP does. Any thread. */
CHUTE_API void chute_engine_reload(chute_engine *e);

/* Copies the counters as of the loop's last pass (at most ~1 s old). Safe
 * from any thread while the engine exists. */
CHUTE_API void chute_engine_stats(chute_engine *e, struct chute_stats *out);

/* Frees an engine that is not running (run has returned or never started). */
CHUTE_API void chute_engine_free(chute_engine *e);

/* Loads |path| without opening sockets and refuses what chute_engine_run
 * would: two listeners on one port (a bundle without listeners passes: a
 * host may feed the packets; `chute check` refuses it as `chute run` does).
 * Warnings (no route()) go to the log. Returns 0 or CHUTE_ERR_INVALID with
 * the message in |err|. */
CHUTE_API int chute_bundle_check(const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
