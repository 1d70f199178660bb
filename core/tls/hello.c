#include <stdlib.h>
#include <string.h>

#include "tls/tls_int.h"

/* The ClientHello, read before BearSSL sees it, for one question: may this
 * handshake resume a cached session? BearSSL 0.6 crashes when it does so
 * while the client's ALPN list shares no name with ours (the "no match"
 * index skips the check that runs on full handshakes only and indexes the
 * name array out of bounds in the ServerHello), so such a hello gets a
 * full handshake, which fails cleanly with alert 120. Every doubt answers
 * "no": a hello cut across records, a second ALPN extension, any length
 * that does not add up. Lengths are checked as exactly as BearSSL checks
 * them, so both read the same extensions.
 *
 * The engine acts on a record inside the ack that completes it, so the
 * first record is held back whole (tls_conn_read_first) and shown to the
 * role before the engine gets any of it. */

#define RECORD_MAX 16384 /* plaintext fragment limit (RFC 5246 §6.2.1) */

struct cur {
    const unsigned char *p, *end;
};

static int
take(struct cur *c, size_t n, const unsigned char **out)
{
    if ((size_t)(c->end - c->p) < n)
        return -1;
    *out = c->p;
    c->p += n;
    return 0;
}

/* A big-endian length of |w| bytes, then that many bytes as |sub|. */
static int
vec(struct cur *c, size_t w, struct cur *sub)
{
    const unsigned char *b;
    size_t n = 0;
    if (take(c, w, &b) != 0)
        return -1;
    for (size_t i = 0; i < w; i++)
        n = n << 8 | b[i];
    if (take(c, n, &b) != 0)
        return -1;
    sub->p = b;
    sub->end = b + n;
    return 0;
}

/* 1 if one name of the ALPN extension body |ext| is in |names|, 0 if none
 * is, -1 if it is malformed. */
static int
alpn_overlap(struct cur ext, const char *const *names, size_t nnames)
{
    struct cur list, name;
    int hit = 0;
    if (vec(&ext, 2, &list) != 0 || ext.p != ext.end || list.p == list.end)
        return -1;
    while (list.p < list.end) {
        if (vec(&list, 1, &name) != 0 || name.p == name.end)
            return -1;
        size_t len = (size_t)(name.end - name.p);
        for (size_t i = 0; i < nnames; i++)
            if (strlen(names[i]) == len && memcmp(names[i], name.p, len) == 0)
                hit = 1;
    }
    return hit;
}

int
tls_hello_resume_ok(const unsigned char *rec, size_t len, const char *const *names,
                    size_t nnames, unsigned char id[32], size_t *idlen)
{
    struct cur r = {rec, rec + len}, body, hello, sid, skip, exts, ext;
    const unsigned char *b;
    int alpn = -2; /* not seen */
    *idlen = 0;
    /* One handshake record holding the whole ClientHello. */
    if (take(&r, 3, &b) != 0 || b[0] != 22 || b[1] != 3 || vec(&r, 2, &body) != 0 ||
        r.p != r.end)
        return 0;
    if (take(&body, 1, &b) != 0 || b[0] != 1 || vec(&body, 3, &hello) != 0)
        return 0;
    if (take(&hello, 2 + 32, &b) != 0 || vec(&hello, 1, &sid) != 0 ||
        (size_t)(sid.end - sid.p) > 32 || vec(&hello, 2, &skip) != 0 ||
        vec(&hello, 1, &skip) != 0)
        return 0;
    if (hello.p != hello.end) {
        if (vec(&hello, 2, &exts) != 0 || hello.p != hello.end)
            return 0;
        while (exts.p < exts.end) {
            if (take(&exts, 2, &b) != 0 || vec(&exts, 2, &ext) != 0)
                return 0;
            if ((b[0] << 8 | b[1]) != 16) /* application_layer_protocol_negotiation */
                continue;
            if (alpn != -2)
                return 0;
            alpn = alpn_overlap(ext, names, nnames);
            if (alpn < 0)
                return 0;
        }
    }
    *idlen = (size_t)(sid.end - sid.p);
    memcpy(id, sid.p, *idlen);
    return alpn != 0;
}

/* ---- the first record ------------------------------------------------ */

/* Hands held record bytes to the engine (which processes a record the
 * moment it is whole). A closed engine drops the rest; its error tells. */
static void
feed(struct tls_conn *c, const unsigned char *p, size_t len)
{
    while (len > 0) {
        size_t room;
        unsigned char *buf = br_ssl_engine_recvrec_buf(c->eng, &room);
        if (buf == NULL)
            return;
        size_t k = len < room ? len : room;
        memcpy(buf, p, k);
        br_ssl_engine_recvrec_ack(c->eng, k);
        p += k;
        len -= k;
    }
}

static void
first_done(struct tls_conn *c, const unsigned char *rec, size_t len)
{
    c->peek = 0;
    c->role->first_record(c, rec, len);
    feed(c, rec, len);
    free(c->rec);
    c->rec = NULL;
}

ssize_t
tls_conn_read_first(struct tls_conn *c)
{
    ssize_t n;
    if (c->rec == NULL) {
        n = io_read(c->s.inner, c->hdr + c->rec_have, sizeof(c->hdr) - c->rec_have);
        if (n <= 0 || (c->rec_have += (size_t)n) < sizeof(c->hdr))
            return n;
        c->rec_len = (size_t)c->hdr[3] << 8 | c->hdr[4];
        if (c->hdr[0] != 22 || c->rec_len == 0 || c->rec_len > RECORD_MAX ||
            (c->rec = malloc(sizeof(c->hdr) + c->rec_len)) == NULL) {
            first_done(c, c->hdr, sizeof(c->hdr));
            return n;
        }
        memcpy(c->rec, c->hdr, sizeof(c->hdr));
        return n;
    }
    n = io_read(c->s.inner, c->rec + c->rec_have, sizeof(c->hdr) + c->rec_len - c->rec_have);
    if (n > 0 && (c->rec_have += (size_t)n) == sizeof(c->hdr) + c->rec_len)
        first_done(c, c->rec, c->rec_have);
    return n;
}
