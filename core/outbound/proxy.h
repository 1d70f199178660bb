#ifndef CHUTE_OUTBOUND_PROXY_H
#define CHUTE_OUTBOUND_PROXY_H

/* Proxy servers as the bundle declares them (chute.proxy), and the
 * protocol modules that speak to them. Each module turns a transport to
 * the proxy (a stream: TCP, or TLS over it) into a path to the flow's
 * destination:
 *   socks5.c  SOCKS5 CONNECT (RFC 1928, RFC 1929 auth); UDP ASSOCIATE
 *   http.c    HTTP CONNECT (Basic auth), over TLS for https proxies
 *   ss.c      Shadowsocks AEAD (SIP004): a stream, and per-datagram UDP
 *   trojan.c  Trojan: a TLS stream with the request header first */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/flow-t.h"

#include "io/io.h"
#include "pool/pool.h"

struct tls_ctx;
struct outbound_env;

enum outbound_proto {
    OUTBOUND_SOCKS5 = 0,
    OUTBOUND_HTTP,
    OUTBOUND_SHADOWSOCKS,
    OUTBOUND_TROJAN,
};

enum outbound_ss_cipher {
    OUTBOUND_SS_AES_128_GCM = 0,
    OUTBOUND_SS_AES_256_GCM,
    OUTBOUND_SS_CHACHA20_POLY1305,
};

struct outbound_proxy {
    char name[64];
    enum outbound_proto type;
    struct flow_addr server;       /* name or IP, with port */
    char user[256], pass[256];     /* socks5/http auth ("" = none); ss and trojan: password */
    int tls;                       /* http: an https proxy; trojan: always */
    char sni[256];                 /* "" = the server's name (none for an IP) */
    int skip_cert_verify;
    struct tls_ctx *anchors;       /* its own trust anchors (ca = "file"), owned; NULL: the system's */
    int udp;                       /* UDP flows may use this proxy */
    /* Shadowsocks: the cipher and the master key from the password
     * (EVP_BytesToKey with MD5), filled at load. */
    enum outbound_ss_cipher cipher;
    uint8_t key[32];
    size_t key_len;
    /* Trojan: hex(SHA224(password)), filled at load. */
    char trojan_hash[57];
    /* Warm connections (pool = {...}): on by default for TLS-based
     * proxies (Trojan, https), whose handshakes cost the most. */
    struct pool_opts pool;
    char where[96];                /* "main.lua:12": where the bundle declared it */
    /* Run time, the set's (zero at load): flows whose request got no byte
     * back in time (silent.c), and whether that was said at warn since the
     * proxy last answered. */
    uint64_t silent;
    int silent_warned;
    double last_answer; /* io_mono_now() of its last first byte to a flow (0: none yet) */
};

/* A handshake in progress on a stream. The callback fires exactly once
 * (never from inside the start call) unless cancelled: |err| 0 and
 * |extra| the bytes the proxy sent past its reply (they belong to the
 * destination: an early response), or |err| an errno value with |why| a
 * static text ("socks5: connection refused by proxy", "http: 407 proxy
 * authentication required", ...). The stream stays the caller's. */
struct outbound_hs;
typedef void (*outbound_hs_cb)(void *arg, int err, const char *why, const uint8_t *extra,
                               size_t extra_len);

/* socks5.c: greeting (no-auth, or user/pass when |p| has a user), auth,
 * CONNECT |dst| (a name is sent as a name), reply. */
struct outbound_hs *outbound_socks5_connect(struct io_stream *s, const struct outbound_proxy *p,
                                            const struct flow_addr *dst, outbound_hs_cb cb,
                                            void *arg);
/* socks5.c, the two halves of a connect for a pool (set_pool.c): greet
 * runs the greeting and the auth only, ahead of any flow (success: the
 * connection is ready for a request; |extra| would be bytes the proxy sent
 * unasked); request sends only the CONNECT on a connection greet made
 * ready, and reads the reply as outbound_socks5_connect does. */
struct outbound_hs *outbound_socks5_greet(struct io_stream *s, const struct outbound_proxy *p,
                                          outbound_hs_cb cb, void *arg);
struct outbound_hs *outbound_socks5_request(struct io_stream *s, const struct outbound_proxy *p,
                                            const struct flow_addr *dst, outbound_hs_cb cb,
                                            void *arg);
/* socks5.c: UDP ASSOCIATE (from 0.0.0.0:0) on the control connection |s|;
 * on success |extra| is the whole reply (its BND.ADDR is the relay). */
struct outbound_hs *outbound_socks5_associate(struct io_stream *s,
                                              const struct outbound_proxy *p, outbound_hs_cb cb,
                                              void *arg);
/* http.c: "CONNECT host:port", Proxy-Authorization Basic when |p| has a
 * user, any 2xx opens the tunnel. */
struct outbound_hs *outbound_http_connect(struct io_stream *s, const struct outbound_proxy *p,
                                          const struct flow_addr *dst, outbound_hs_cb cb,
                                          void *arg);
/* Stops the handshake's watchers and frees it; the callback is not called. */
void outbound_hs_cancel(struct outbound_hs *h);

/* ss.c: a Shadowsocks stream over the connection to the server |inner|
 * (owned from now on) to |dst|: the salt and the address header go out
 * with the first bytes written (or after 10 ms with none). NULL when out
 * of memory (|inner| closed). */
struct io_stream *outbound_ss_stream(struct io_stream *inner, const struct outbound_proxy *p,
                                     const struct flow_addr *dst);

/* ss.c: watches |s| (an outbound_ss_stream) for a server that never
 * answers: a Shadowsocks server meets a wrong key with silence. Once the
 * request is out, no byte back within |deadline| seconds is reported
 * (outbound_silent_report) and the flow goes on; the first byte reports
 * the proxy as working. |env| must outlive the stream's reading (the
 * engine's, or a health check's that closes its stream first); |name| is
 * the proxy's interned name. Call it before the first write. */
void outbound_ss_watch(struct io_stream *s, const struct outbound_env *env, const char *name,
                       double deadline);
#define OUTBOUND_SILENT_DEADLINE 5.0

/* silent.c: what the watch found, for proxy |name| of env->set now (the
 * set may have been reloaded since the flow began). Silence for |secs|
 * since the request went out at |since| (io_mono_now()): when the proxy answered
 * another flow since then, the key works and only this destination is
 * slow (said at debug); else logged ("no byte from proxy 'hk' in 5.0 s
 * after the request: wrong password or cipher?", at warn once until the
 * proxy answers again), counted (the set's proxy_silent, the proxy's own),
 * and the proxy marked down in its groups with its next check brought
 * forward. An answer (|late|: after the silence was reported) marks it
 * working. */
void outbound_silent_report(const struct outbound_env *env, const char *name, double secs,
                            double since);
void outbound_silent_answered(const struct outbound_env *env, const char *name, double secs,
                              int late);

/* ss.c, UDP: each datagram sealed on its own with a fresh salt.
 * Seal: [salt][AEAD([addr of dst][payload])][tag] into |out|; returns the
 * length or -1 when |cap| is too small. Open: checks and decrypts |in| in
 * place; returns the payload's offset in |in| with its length in
 * |*payload_len| and the sender's address in |from|, or -1 (bad tag,
 * malformed: the datagram is dropped and counted). */
ssize_t outbound_ss_udp_seal(const struct outbound_proxy *p, const struct flow_addr *dst,
                             const uint8_t *payload, size_t len, uint8_t *out, size_t cap);
ssize_t outbound_ss_udp_open(const struct outbound_proxy *p, uint8_t *in, size_t len,
                             struct flow_addr *from, size_t *payload_len);

/* Fills p->cipher, key and key_len from a cipher name and a password.
 * 0, or -1 for an unknown cipher. */
int outbound_ss_setup(struct outbound_proxy *p, const char *cipher, const char *password);

/* trojan.c: wraps a TLS stream (the handshake done) so the first bytes
 * written go after "hex(SHA224(pw))\r\n CMD ATYP ADDR PORT \r\n". */
struct io_stream *outbound_trojan_stream(struct io_stream *tls,
                                               const struct outbound_proxy *p,
                                               const struct flow_addr *dst);
/* The same with CMD UDP ASSOCIATE: datagrams then travel in the stream as
 * [ATYP ADDR PORT][length BE16][CRLF][payload]. */
struct io_stream *outbound_trojan_udp_stream(struct io_stream *tls,
                                                   const struct outbound_proxy *p,
                                                   const struct flow_addr *dst);
/* Fills p->trojan_hash from the password. */
void outbound_trojan_setup(struct outbound_proxy *p, const char *password);

/* The SOCKS5 address form shared by SOCKS5, Shadowsocks and Trojan:
 * [ATYP][addr][port BE]. write: bytes written or -1 (|cap| too small);
 * parse: bytes consumed, 0 when more bytes are needed, -1 malformed. */
int outbound_addr_write(uint8_t *out, size_t cap, const struct flow_addr *a);
int outbound_addr_parse(const uint8_t *in, size_t len, struct flow_addr *a);

#endif
