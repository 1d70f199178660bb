#ifndef CHUTE_TLS_TLS_H
#define CHUTE_TLS_TLS_H

/* TLS over any io_stream (a socket, an lwIP connection, a proxy stream,
 * another TLS stream) on BearSSL 0.6: TLS 1.2 only, ECDHE AEAD suites with
 * AES-GCM first, close_notify on every clean close.
 *
 * Clients (Trojan, https proxies, the MITM's upstream): certificates
 * checked against the system trust store (or a CA file), IP-address
 * certificates checked by chute itself (BearSSL matches names only),
 * sessions resumed by ID per (server, port, SNI).
 *
 * Servers (the MITM's client side): one P-256 certificate chain per
 * configuration, ALPN h2 then http/1.1 in the server's preference,
 * ECDHE-ECDSA AEAD suites, sessions resumed by ID from a cache per
 * configuration, except when the ClientHello's ALPN shares no name with
 * ours (BearSSL 0.6 crashes on that resumption; chute reads the ClientHello
 * first and makes that handshake a full one, which ends in alert 120).
 *
 * Both roles take an |inner| stream that is connected (or accepted) and
 * hand back a TLS stream over it (io/io.h's contract: push readiness,
 * writev takes up to one record's worth and sends it in the background).
 * The TLS stream's shutdown ends the data at once but sends its
 * close_notify only once the peer has been quiet for 1.5 s (or at close):
 * BearSSL 0.6 drops what arrives after its own close_notify, so an answer
 * still on its way would be lost. close(s, 0) sends close_notify and the
 * last records in the background (10 s at most), then closes |inner|;
 * close(s, 1) resets |inner| at once.
 *
 * Loop thread only; nothing here is thread-safe. */

#include <stddef.h>

#include "io/io.h"
#include "log/counter.h"

struct tls_ctx;
struct tls_handshake;
struct tls_server_cfg;

/* Loads the trust anchors of |ca_file| (PEM bundle; NULL: $SSL_CERT_FILE
 * when set, else the system's, /etc/ssl/certs/ca-certificates.crt). NULL with |err| naming the file and
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
    const char *const *alpn; /* NULL or |nalpn| protocol names (copied) */
    size_t nalpn;
    int skip_verify;         /* no certificate check at all (the bundle said so) */
};

/* |s| is the TLS stream (handshake done; the caller owns it; its inner is
 * the transport) or NULL with |err| an errno value and |why| a readable
 * reason, valid during the call: e.g. "tls: server requires TLS 1.3
 * (BearSSL 0.6 speaks TLS 1.2 only)", "tls: certificate not trusted",
 * "tls: certificate is for another name", "tls: connection closed during
 * handshake". On failure the inner stream has been closed. The stream has
 * no callbacks yet and is not reading; the caller may close it from inside
 * this callback. */
typedef void (*tls_handshake_cb)(void *arg, struct io_stream *s, int err, const char *why);

/* Starts a client handshake over |inner| (owned from now on; the TLS
 * stream takes over its callbacks and its reading). Fires exactly once,
 * never from inside this call, unless cancelled. NULL when out of memory
 * (|inner| closed). |t| must outlive the handshake; |o| and its strings
 * are copied. */
struct tls_handshake *tls_client_start(struct tls_ctx *t, struct io_stream *inner,
                                       const struct tls_client_opts *o, tls_handshake_cb cb,
                                       void *arg);
/* Stops a client or server handshake, closes its inner stream, frees it;
 * no callback. Not from inside the handshake's own callback (it is gone by
 * then). */
void tls_handshake_cancel(struct tls_handshake *h);

/* The protocol ALPN chose ("h2", "http/1.1") for a TLS stream of either
 * role, or NULL (none, or not a TLS stream). Lives as long as the stream. */
const char *tls_stream_alpn(const struct io_stream *s);
/* 1 if the stream's handshake resumed a cached session (either role). */
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

/* ---- server -------------------------------------------------------------- */

/* A server configuration from a PEM certificate chain (leaf first, then
 * the intermediates; NUL-terminated text) and the leaf's P-256 private key
 * (PEM "EC PRIVATE KEY" or "PRIVATE KEY"). Both are copied. NULL with |err|
 * naming the problem, e.g. "tls: certificate chain: no certificate in
 * it", "tls: certificate key is not EC P-256", "tls: private key does not
 * match the certificate". Holds a session cache of its own, so a session
 * only ever resumes with the certificate it was made with. */
struct tls_server_cfg *tls_server_cfg_new_pem(const char *chain_pem, const char *key_pem,
                                              char *err, size_t errlen);
/* Drops the caller's reference: the configuration lives on while
 * handshakes and streams started from it do, and is freed after the last. */
void tls_server_cfg_free(struct tls_server_cfg *cfg);

struct tls_server_stats {
    unsigned long long handshakes, resumed, failures;
    /* Cached sessions not resumed because the ClientHello's ALPN shares
     * no name with ours (or could not be read): each became a full
     * handshake. */
    unsigned long long resume_refused;
};
void tls_server_cfg_stats(const struct tls_server_cfg *cfg, struct tls_server_stats *out);

/* Starts a server handshake over |inner| (owned from now on, as for
 * tls_client_start) with |cfg|'s certificate. Fires exactly once, never
 * from inside this call, unless cancelled (tls_handshake_cancel). Reasons
 * include "tls: client offers no protocol we speak (ALPN)", "tls: client
 * does not trust our certificate (alert 48)" and, with EPROTONOSUPPORT
 * (typically a TLS 1.3-only client), "tls: no cipher suite in common with
 * the client (BearSSL 0.6 speaks TLS 1.2 only)". |cfg| is referenced, not
 * copied, until the stream is closed. NULL when out of memory (|inner|
 * closed). */
struct tls_handshake *tls_server_start(const struct tls_server_cfg *cfg, struct io_stream *inner,
                                       tls_handshake_cb cb, void *arg);
/* The same offering |alpn| (|nalpn| names in our preference, static or
 * outliving the handshake) instead of h2 then http/1.1: the MITM offers
 * what it will speak to this client. The resumption check uses it too. */
struct tls_handshake *tls_server_start_alpn(const struct tls_server_cfg *cfg,
                                            struct io_stream *inner, const char *const *alpn,
                                            size_t nalpn, tls_handshake_cb cb, void *arg);

/* Takes another reference on |cfg| (dropped with tls_server_cfg_free). */
struct tls_server_cfg *tls_server_cfg_ref(struct tls_server_cfg *cfg);

/* ---- CA and minted leaves (x509 DER writer; notes/bearssl.md §4) ---------- */

struct tls_ca;
struct tls_mint;

/* Makes a P-256 CA: its certificate (PEM, mode 0644) at |cert_path| and
 * its key (PKCS#8 PEM "PRIVATE KEY", mode 0600) at |key_path|, the
 * folders made (0700) when missing. Subject O=chute, CN="chute CA <16 hex
 * digits>" (unique per install), cA TRUE pathLen 0, keyCertSign + cRLSign
 * + digitalSignature, valid ~10 years from a day ago. Refuses (-1,
 * "already exists: refusing to overwrite it (EEXIST)") when either file
 * exists, and leaves no half-made CA. 0, or -1 with |err| naming the file
 * and the reason. Blocks on the disk (fsync): for the CLI, not the loop. */
int tls_ca_create(const char *cert_path, const char *key_path, char *err, size_t errlen);
/* Loads a CA made by tls_ca_create (or any P-256 CA certificate with its
 * key, "EC PRIVATE KEY" or "PRIVATE KEY"; leaves get its SKI as their AKI
 * and end no later than it does). NULL with |err| naming the file and the
 * reason, e.g. "tls: CA key /x/ca.key: private key does not match the
 * certificate", "tls: CA certificate /x/ca.pem: not a CA certificate
 * (basicConstraints has no cA TRUE)". Reads files: at start or reload. */
struct tls_ca *tls_ca_load(const char *cert_path, const char *key_path, char *err,
                           size_t errlen);
void tls_ca_free(struct tls_ca *ca);
/* The CA certificate's DER, valid while |ca| lives. */
const unsigned char *tls_ca_der(const struct tls_ca *ca, size_t *len);
/* The same as PEM text (NUL-terminated), valid while |ca| lives. */
const char *tls_ca_pem(const struct tls_ca *ca);

/* An LRU of server configurations with leaves minted for hosts under
 * |ca| (referenced: it must outlive the mint): P-256 leaf key shared by all
 * leaves, validity <= 46 days from a day in the past, re-minted a day
 * before expiry. |cache_max| leaves are kept (0: a default of 1024). */
struct tls_mint *tls_mint_new(struct tls_ca *ca, size_t cache_max, char *err, size_t errlen);
void tls_mint_free(struct tls_mint *m);
/* A server configuration whose chain is [leaf for |host|, CA], minted now
 * (one ECDSA signature, ~0.4-0.5 ms) or cached. |host|: a DNS name (any
 * case, a final dot allowed; SAN dNSName in lower case, CN too when it
 * fits 64 bytes) or an IP literal, IPv6 with or without brackets (SAN
 * iPAddress). |now| is the wall clock in Unix seconds: notBefore = now - 1
 * day, and a cached leaf is re-minted from a day before its notAfter. The
 * caller gets a reference (tls_server_cfg_free); the cache keeps its own,
 * so an evicted or renewed leaf lives on in its handshakes. NULL with
 * |err| ("tls: no leaf for 'x': <why>") when |host| is no name or address
 * a certificate can carry, the CA expires within a day, or out of
 * memory. */
struct tls_server_cfg *tls_mint_get(struct tls_mint *m, const char *host, double now, char *err,
                                    size_t errlen);

#define TLS_MINT_STATS(X)                                                                          \
    X(minted, leaves_minted) /* leaves signed */                                                   \
    X(cached, leaves_cached) /* requests answered from the cache */                                \
    X(held, leaves_held)     /* leaves in the cache now */

struct tls_mint_stats {
#define X(field, key) uint64_t field;
    TLS_MINT_STATS(X)
#undef X
};
extern const struct log_counter tls_mint_counters[];
void tls_mint_stats(const struct tls_mint *m, struct tls_mint_stats *out);

#endif
