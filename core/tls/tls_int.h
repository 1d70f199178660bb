#ifndef CHUTE_TLS_TLS_INT_H
#define CHUTE_TLS_TLS_INT_H

/* Inside core/tls only: the record pump both roles share (conn.c), the
 * context behind struct tls_ctx, the trust store loader (trust.c), PEM
 * objects (pem.c), the client session cache (session.c), the server's
 * configuration (server.c) and its ClientHello check (hello.c); the CA,
 * the X.509 writer and the mint have theirs in x509w.h. The only folder
 * that includes bearssl.h. */

#include <bearssl.h>
#include <stddef.h>

#include "tls/tls.h"

/* ---- the connection both roles share (conn.c) -------------------------- */

struct tls_conn;

/* What differs between client and server; static const, one per role.
 * Every hook runs from the loop, before the handshake callback. */
struct tls_conn_role {
    /* The handshake finished with the session |p| (secret: not kept). */
    void (*done)(struct tls_conn *c, const br_ssl_session_parameters *p);
    /* It failed with |err|; the inner stream is about to be closed. */
    void (*failed)(struct tls_conn *c, int err);
    /* errno and reason for an engine that closed with |e| during the
     * handshake; may format into c->why (it lives until the callback
     * returns) or defer to tls_conn_reason(). */
    int (*reason)(struct tls_conn *c, int e, const char **why);
    /* NULL, or called once with the first record the peer sent (header
     * included, whole unless |len| < 5 + its length) before the engine
     * sees any of it: the server reads the ClientHello there. */
    void (*first_record)(struct tls_conn *c, const unsigned char *rec, size_t len);
    /* Frees the whole object (wiping the keys). */
    void (*destroy)(struct tls_conn *c);
    /* "client" or "server", and the peer's name (the host, the SNI; may
     * be ""), for the debug log. */
    const char *name;
    const char *(*peer)(const struct tls_conn *c);
};

struct tls_conn {
    struct io_stream s; /* first: handed out as the stream; s.inner is the transport */
    const struct tls_conn_role *role;
    br_ssl_engine_context *eng;
    tls_handshake_cb cb;
    void *cb_arg;
    struct io_soon kick; /* the first handshake step; then on_readable for bytes held */
    ev_timer quiet;      /* after shutdown: close_notify once the peer is quiet */
    ev_timer linger;     /* closed by the owner: the last records still go out */
    int err;             /* sticky stream error (errno) */
    int start_err;       /* a bad option, reported from the loop */
    const char *start_why;
    unsigned hs : 1;           /* handshake running */
    unsigned reading : 1;      /* the owner called read_start */
    unsigned inner_reading : 1;
    unsigned wblocked : 1;     /* the inner stream owes us on_drain */
    unsigned ieof : 1;         /* the inner stream ended */
    unsigned shut : 1, shut_done : 1, notified : 1; /* notified: our close_notify is queued */
    unsigned want_drain : 1, lingering : 1, resumed : 1;
    /* The first record, held until it is whole (first_record only); a
     * client keeps the first bytes it got in hdr too (rec_have of them),
     * to tell a peer that speaks no TLS at all. */
    unsigned peek : 1;
    unsigned char hdr[5];
    /* Bytes read past what the engine asked for: the next record's
     * header, read with the body before it (one read per record). */
    unsigned char ahead[5];
    size_t ahead_len;
    unsigned char *rec;
    size_t rec_have, rec_len;
    /* The session ID offered (client) or asked for (server): the engine
     * has no "resumed" getter, a resumed session keeps its ID. */
    size_t offered_len;
    unsigned char offered_id[32];
    double t0; /* io_mono_now() at the start: the handshake's time, in the debug log */
    char why[160];
    unsigned char iobuf[BR_SSL_BUFSIZE_BIDI];
};

/* Ties |c| (zeroed) to |inner|, whose callbacks it takes over, and
 * schedules the first handshake step; the role sets up and resets |eng|
 * before returning to the loop. */
void tls_conn_start(struct tls_conn *c, const struct tls_conn_role *role,
                    br_ssl_engine_context *eng, struct io_stream *inner, tls_handshake_cb cb,
                    void *arg);
/* hello.c: reads the first record from the inner stream, as io_read,
 * holding it until it is whole (or is no sane handshake record), then
 * shows it to role->first_record and hands it to the engine. */
ssize_t tls_conn_read_first(struct tls_conn *c);
/* Makes the first step report |why| (EINVAL) instead of handshaking. */
void tls_conn_start_fail(struct tls_conn *c, const char *why);
/* The reasons every role shares ("connection closed during handshake",
 * a sentence from errors.c, "handshake failed (BearSSL error n)" for a
 * code it does not know), in c->why or static. */
int tls_conn_reason(struct tls_conn *c, int e, const char **why);

/* ---- BearSSL's codes in words (errors.c) ------------------------------- */

/* A sentence for BearSSL error |e| (an engine's last error: an SSL code,
 * an X.509 code, or an alert received (BR_ERR_RECV_FATAL_ALERT + n) or
 * sent (BR_ERR_SEND_FATAL_ALERT + n)), without the "tls: " prefix, as
 * seen by our |server| role (0: we are the client): static, or formatted
 * into |buf| (|n| bytes; alerts carry their number). NULL for a code
 * BearSSL 0.6 does not define. */
const char *tls_error_sentence(int e, int server, char *buf, size_t n);
/* 1 if the |n| first bytes a peer sent (n >= 1) cannot start a TLS
 * record: a plain-text port, say. */
int tls_bytes_not_tls(const unsigned char *p, size_t n);
/* The validity of the DER certificate |der| (|len| bytes; only its start
 * is needed, through the validity field): 0 with the times as seconds
 * since the epoch (UTC), or -1. */
int tls_der_validity(const unsigned char *der, size_t len, long long *not_before,
                     long long *not_after);
/* Formats |t| (seconds since the epoch) as "2026-01-31 12:00:00 UTC". */
void tls_time_text(long long t, char *buf, size_t n);
extern const char tls_closed_why[];
/* The TLS stream's struct tls_conn, or NULL for another kind of stream. */
struct tls_conn *tls_conn_of(const struct io_stream *s);

/* ---- client ------------------------------------------------------------ */

struct tls_session_cache;

struct tls_ctx {
    br_x509_trust_anchor *anchors; /* deep copies, read-only once loaded */
    size_t nanchors;
    struct tls_session_cache *sessions;
    struct tls_stats stats;
};

/* Loads every CERTIFICATE of the PEM file |path| as a trust anchor (CA
 * anchors for CA certificates, direct-trust anchors for the others).
 * 0, or -1 with |err| naming the file and the reason. */
int tls_trust_load(const char *path, br_x509_trust_anchor **out, size_t *n, char *err,
                   size_t errlen);
void tls_trust_free(br_x509_trust_anchor *tas, size_t n);

/* The certificate check, a br_x509_class: BearSSL's minimal validator
 * against |name| (not necessarily the SNI), plus the iPAddress SAN check it
 * lacks; or, with |skip|, nothing but extracting the server key. Embedded in
 * the connection; br_ssl_client_init_full(&cc, &w->u.minimal, ...) first. */
struct tls_x509 {
    const br_x509_class *vtable; /* first: BearSSL passes &vtable around */
    union {
        br_x509_minimal_context minimal;
        br_x509_decoder_context dec; /* skip: the EE key only */
    } u;
    const char *name;  /* DNS name the EE must carry; NULL for none */
    unsigned char ip[16];
    size_t iplen;      /* 4 or 16: the EE must list this iPAddress */
    int skip, ncert;
    /* The start of the certificate being read (its validity is there),
     * and the first one of the chain whose dates do not cover now: its
     * index (-1: none), and the date it fails on (notAfter when expired,
     * notBefore when not yet valid). */
    unsigned char head[1024];
    size_t head_len;
    int bad_time_cert, bad_time_future;
    long long bad_time;
    unsigned char *ee; /* the EE certificate, kept for the SAN check */
    size_t ee_len, ee_cap;
};

/* |name| is linked, not copied. Set ip/iplen before the handshake. */
void tls_x509_init(struct tls_x509 *w, const char *name, int skip);
/* Frees the kept certificate (the context stays usable). */
void tls_x509_fini(struct tls_x509 *w);
/* 1 if the subjectAltName of the DER certificate |der| (|len| bytes, read
 * only within them) lists the iPAddress |ip| (|iplen| bytes), 0 if not or
 * if the certificate cannot be walked. The check tls_x509 adds to
 * BearSSL's; spec/fuzz/tls_san_fuzz.c calls it directly. */
int tls_der_san_has_ip(const unsigned char *der, size_t len, const unsigned char *ip,
                       size_t iplen);
/* Reads one DER TLV at *p (< end): 0 with the tag and value (*p moves past
 * it), or -1. Only low tag numbers and definite lengths of up to 4 bytes,
 * which covers every element of a certificate's TBS. */
int tls_der_next(const unsigned char **p, const unsigned char *end, unsigned *tag,
                 const unsigned char **val, size_t *len);
/* 1 with |*val|/|*vlen| the extnValue contents (inside the OCTET STRING)
 * of the extension |oid| (the OID's content octets) of certificate |der|,
 * 0 if it has none or cannot be walked. */
int tls_der_ext(const unsigned char *der, size_t len, const unsigned char *oid, size_t oidlen,
                const unsigned char **val, size_t *vlen);

/* Session cache key: host, port, SNI and whether the certificate was
 * checked (a session from an unchecked handshake never resumes a checked
 * one). The key is binary (NUL separators); its length is returned, 0 if it
 * does not fit |cap|. */
#define TLS_SESSION_KEY_MAX 600
size_t tls_session_key(char *key, size_t cap, const char *host, unsigned short port,
                       const char *sni, int skip_verify);

/* An LRU of |cap| entries; parameters are wiped when dropped. */
struct tls_session_cache *tls_session_cache_new(size_t cap);
void tls_session_cache_free(struct tls_session_cache *c);
/* 1 and |*out| filled when |key| has a session (it becomes the most recent). */
int tls_session_get(struct tls_session_cache *c, const char *key, size_t klen,
                    br_ssl_session_parameters *out);
/* Stores or replaces |key|'s session, evicting the least recent. */
void tls_session_put(struct tls_session_cache *c, const char *key, size_t klen,
                     const br_ssl_session_parameters *p);
void tls_session_forget(struct tls_session_cache *c, const char *key, size_t klen);
size_t tls_session_count(const struct tls_session_cache *c);

/* 1 when this CPU runs AES-GCM fastest (AES-NI), so AES suites go first;
 * else ChaCha20 goes first. */
int tls_aes_first(void);

/* ---- PEM (pem.c) ------------------------------------------------------- */

/* A growable byte buffer fed by BearSSL's decoders (|oom| once a growth
 * failed; later appends are dropped). */
struct tls_bytes {
    unsigned char *p;
    size_t len, cap;
    int oom;
};
void tls_bytes_append(void *ctx, const void *data, size_t len);
/* Wipes and frees the bytes. */
void tls_bytes_fini(struct tls_bytes *b);

/* PEM objects out of a byte stream pushed in pieces. |on_obj| gets each
 * object's banner name and DER (valid during the call); non-zero from it
 * stops the push with that value. */
struct tls_pem {
    br_pem_decoder_context dec;
    struct tls_bytes der;
    int in_obj;
    char name[128];
    int (*on_obj)(void *arg, const char *name, const unsigned char *der, size_t len);
    void *arg;
};
#define TLS_PEM_MALFORMED (-1)
#define TLS_PEM_OOM (-2)
void tls_pem_init(struct tls_pem *p,
                  int (*on_obj)(void *arg, const char *name, const unsigned char *der, size_t len),
                  void *arg);
/* 0, TLS_PEM_MALFORMED, TLS_PEM_OOM or what on_obj returned. */
int tls_pem_push(struct tls_pem *p, const void *data, size_t len);
/* After the last push: ends a final line that lacks its newline (the END
 * banner only counts once terminated). Same results as tls_pem_push. */
int tls_pem_finish(struct tls_pem *p);
/* Wipes the object buffer (keys pass through it). */
void tls_pem_fini(struct tls_pem *p);
/* 1 if |name| is a certificate banner ("CERTIFICATE", "X509 CERTIFICATE"). */
int tls_pem_is_cert(const char *name);

/* ---- server (server.c, hello.c) ---------------------------------------- */

#define TLS_SERVER_ALPN_MAX 4

/* Reads the first record a client sent, before BearSSL does: 1 when a
 * resumed handshake is safe (the ClientHello carries no ALPN, or one name
 * in |names| that it also offers), 0 when not, or when |rec| is no
 * complete and well-formed ClientHello in one record (fail closed).
 * |id|/|idlen| get the session ID it asks to resume (idlen 0: none). */
int tls_hello_resume_ok(const unsigned char *rec, size_t len, const char *const *names,
                        size_t nnames, unsigned char id[32], size_t *idlen);

/* The session cache, wrapping BearSSL's LRU: load() refuses (a full
 * handshake follows) unless the connection's ClientHello passed
 * tls_hello_resume_ok. */
struct tls_server_cache {
    const br_ssl_session_cache_class *vtable; /* first */
    br_ssl_session_cache_lru lru;
};

struct tls_server_cfg {
    unsigned refs; /* the owner's, plus one per connection */
    br_x509_certificate *chain;
    size_t nchain;
    br_ec_private_key sk;
    const char *alpn[TLS_SERVER_ALPN_MAX];
    size_t nalpn;
    struct tls_server_cache cache;
    unsigned char *cache_store;
    size_t cache_len;
    struct tls_server_stats stats;
};

/* A configuration from a DER chain (leaf first) and the leaf's P-256
 * private key, both copied; NULL with |err| naming the problem (the key is
 * not P-256, it does not match the certificate, ...). */
struct tls_server_cfg *tls_server_cfg_new(const br_x509_certificate *chain, size_t nchain,
                                          const br_ec_private_key *sk, char *err, size_t errlen);
/* The same for a leaf tls_mint just signed for |sk| (the pair is not
 * checked again: that costs a point multiplication, as much as the
 * signature), with a smaller session cache (16 sessions, 1.6 KB). */
struct tls_server_cfg *tls_server_cfg_new_minted(const br_x509_certificate *chain,
                                                 size_t nchain, const br_ec_private_key *sk,
                                                 char *err, size_t errlen);

#endif
