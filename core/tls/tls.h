#ifndef CHUTE_TLS_TLS_H
#define CHUTE_TLS_TLS_H

/* TLS clients for upstream connections (Trojan, https proxies, DoT later)
 * on BearSSL 0.6: TLS 1.2, ECDHE AEAD suites with AES-GCM first,
 * certificates checked against the system trust store (or a CA file),
 * IP-address certificates checked by chute itself (BearSSL matches names
 * only), sessions resumed by ID per (server, port, SNI), close_notify on
 * every clean close. TLS runs over any inner io_stream (a socket, a proxy
 * stream, another TLS stream); a finished handshake is an io_stream. */

#include <ev.h>
#include <stddef.h>

#include "io/io.h"
#include "log/counter.h"

struct tls_ctx;
struct tls_handshake;

/* Loads the trust anchors of |ca_file| (PEM bundle; NULL: the system's,
 * /etc/ssl/certs/ca-certificates.crt). NULL with |err| naming the file and
 * the reason (unreadable, no certificate in it). */
struct tls_ctx *tls_ctx_new(const char *ca_file, char *err, size_t errlen);
void tls_ctx_free(struct tls_ctx *t);
/* Anchors loaded; sessions cached. */
size_t tls_ctx_anchor_count(const struct tls_ctx *t);

struct tls_client_opts {
    const char *host;        /* the server as the bundle names it: a DNS name or an IP
                              * literal; what the certificate must be for */
    const char *sni;         /* NULL: |host| when it is a name, none for an IP */
    unsigned short port;     /* with host+sni, the session cache's key */
    const char *const *alpn; /* NULL or |nalpn| protocol names */
    size_t nalpn;
    int skip_verify;         /* no certificate check at all (the bundle said so) */
};

/* |s| is the TLS stream (handshake done; the caller owns it; its inner is
 * the transport) or NULL with |err| an errno value and |why| a readable
 * reason, e.g. "tls: server requires TLS 1.3 (BearSSL 0.6 speaks TLS 1.2
 * only)", "tls: certificate not trusted", "tls: certificate is for another
 * name", "tls: connection closed during handshake". On failure the inner
 * stream has been closed. */
typedef void (*tls_handshake_cb)(void *arg, struct io_stream *s, int err, const char *why);

/* Starts a client handshake over |inner| (owned from now on; the TLS
 * stream takes over its callbacks). The callback fires exactly once, never
 * from inside this call, unless cancelled. NULL when out of memory (|inner|
 * closed). */
struct tls_handshake *tls_client_start(struct tls_ctx *t, struct io_stream *inner,
                                       const struct tls_client_opts *o, tls_handshake_cb cb,
                                       void *arg);
/* Stops the handshake, closes the inner stream, frees it; no callback. */
void tls_handshake_cancel(struct tls_handshake *h);

/* The protocol ALPN chose ("h2", "http/1.1") for a TLS stream, or NULL. */
const char *tls_stream_alpn(const struct io_stream *s);
/* 1 if the stream's handshake resumed a cached session. */
int tls_stream_resumed(const struct io_stream *s);

/* A context's counters, one X(field, key) each (log/counter.h). */
#define TLS_STATS(X)                                                                               \
    X(handshakes, handshakes) /* client handshakes completed */                                    \
    X(resumed, resumed)       /* of which resumed a cached session */                              \
    X(failures, failures)     /* client handshakes that failed */                                  \
    X(tls13_only, tls13_only) /* of which the server spoke only TLS 1.3 */

struct tls_stats {
#define X(field, key) uint64_t field;
    TLS_STATS(X)
#undef X
};
/* TLS_STATS as a table over struct tls_stats. */
extern const struct log_counter tls_counters[];
void tls_ctx_stats(const struct tls_ctx *t, struct tls_stats *out);

#endif
