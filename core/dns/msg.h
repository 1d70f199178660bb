#ifndef CHUTE_DNS_MSG_H
#define CHUTE_DNS_MSG_H

/* DNS messages (RFC 1035): a parser that checks every length and follows
 * compression pointers with a bound, and builders for the answers chute
 * makes itself. The parser copies nothing: records point into the message.
 * Names come out in presentation form, lower-cased, without the final dot
 * ("www.example.com"; the root is ""). */

#include <stddef.h>
#include <stdint.h>

#define DNS_TYPE_A 1
#define DNS_TYPE_NS 2
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_SOA 6
#define DNS_TYPE_PTR 12
#define DNS_TYPE_MX 15
#define DNS_TYPE_TXT 16
#define DNS_TYPE_AAAA 28
#define DNS_TYPE_OPT 41
#define DNS_TYPE_HTTPS 65
#define DNS_TYPE_ANY 255
#define DNS_CLASS_IN 1

#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP 4
#define DNS_RCODE_REFUSED 5

#define DNS_HEADER_LEN 12
#define DNS_NAME_MAX 255   /* presentation form, without the final dot: 253 */
#define DNS_UDP_MAX 512    /* without EDNS0 */
#define DNS_MSG_MAX 65535

/* Header flag bits (host order, the 16 bits after the ID). */
#define DNS_FLAG_QR 0x8000
#define DNS_FLAG_AA 0x0400
#define DNS_FLAG_TC 0x0200
#define DNS_FLAG_RD 0x0100
#define DNS_FLAG_RA 0x0080
#define DNS_OPCODE(flags) (((flags) >> 11) & 0xF)
#define DNS_RCODE(flags) ((flags) & 0xF)

/* One resource record of a parsed message. |rdata| points into the message
 * (compressed names inside it are still compressed: use dns_name_read()
 * with the whole message). */
struct dns_rr {
    char name[DNS_NAME_MAX + 1];
    uint16_t type, klass;
    uint32_t ttl;
    uint16_t rdlen;
    const uint8_t *rdata;
    size_t rdata_off;       /* offset of rdata in the message (to patch TTLs) */
    size_t ttl_off;         /* offset of the TTL field in the message */
};

#define DNS_MAX_RRS 64      /* records kept per message; more are counted, not kept */

struct dns_msg {
    uint16_t id, flags;
    uint16_t qdcount, ancount, nscount, arcount;
    /* The first question (chute answers single-question queries only). */
    char qname[DNS_NAME_MAX + 1];
    uint16_t qtype, qclass;
    size_t question_end;    /* offset just past the first question */
    /* EDNS0: the OPT record of the additional section, if any. */
    int has_edns;
    uint16_t edns_udp_size; /* the requester's UDP payload size */
    /* Answer, authority and additional records in order, up to DNS_MAX_RRS;
     * |nrr| kept, |nan| of them from the answer section, |nns| authority. */
    size_t nrr, nan, nns;
    struct dns_rr rr[DNS_MAX_RRS];
};

/* Parses |len| bytes. Returns 0, or -1 for a malformed message (the caller
 * answers FORMERR when at least the 12-byte header and ID are there).
 * A message with no question parses (qname "" and qtype 0). */
int dns_msg_parse(struct dns_msg *m, const uint8_t *buf, size_t len);

/* Reads the (possibly compressed) name at |*off| of |msg| into |out|
 * (lower-cased, no final dot) and advances |*off| past it. 0 or -1. */
int dns_name_read(const uint8_t *msg, size_t len, size_t *off, char *out, size_t outlen);

/* Writes |name| ("a.b.c", "" for the root) in wire form, uncompressed.
 * Returns bytes written, or -1 when it does not fit or a label is empty or
 * longer than 63 bytes. */
int dns_name_write(uint8_t *out, size_t cap, const char *name);

/* Builders: each writes a whole response into |out| and returns its
 * length, or -1 when |cap| is too small. They copy the query's ID, RD flag
 * and first question from |q| (which must have a question), set QR and RA,
 * and add an OPT record (UDP size 1232) when the query had one. */

/* Answers with |n| addresses of the query's type (A: 4 bytes each, AAAA:
 * 16), all with |ttl|. n = 0 gives NOERROR with no answer (NODATA). */
int dns_build_addrs(uint8_t *out, size_t cap, const struct dns_msg *q, const uint8_t *addrs,
                    size_t n, uint32_t ttl);
/* An empty answer with |rcode| (NXDOMAIN, SERVFAIL, REFUSED, NOTIMP ...).
 * With |negative_ttl| > 0 and an NXDOMAIN/NODATA rcode, adds an SOA record
 * in the authority section so resolvers cache the negative answer for that
 * long (RFC 2308). */
int dns_build_error(uint8_t *out, size_t cap, const struct dns_msg *q, int rcode,
                    uint32_t negative_ttl);
/* A FORMERR reply to a message whose header (12 bytes) could be read but
 * not the rest: ID and opcode copied, no question. */
int dns_build_formerr(uint8_t *out, size_t cap, const uint8_t *query, size_t len);
/* A query for |name|/|type| with |id| and RD set, and an OPT record
 * advertising |udp_size| when it is non-zero. */
int dns_build_query(uint8_t *out, size_t cap, uint16_t id, const char *name, uint16_t type,
                    uint16_t udp_size);

/* Truncates the response |msg| of |len| bytes to fit |max| bytes for UDP:
 * keeps the header and question, drops all records, sets TC. Returns the
 * new length, or |len| when it already fits. */
size_t dns_msg_truncate(uint8_t *msg, size_t len, size_t max);

/* Smallest TTL over the answer and authority records of |m| (for an
 * NXDOMAIN/NODATA answer: the SOA's minimum per RFC 2308, capped by the
 * SOA TTL); |dflt| when there is none. */
uint32_t dns_msg_min_ttl(const struct dns_msg *m, const uint8_t *buf, size_t len, uint32_t dflt);

/* Rewrites every TTL of |m|'s records in |buf| to max(ttl - elapsed, 0)
 * (serving a cached answer), and the ID. OPT records are left alone. */
void dns_msg_age(uint8_t *buf, size_t len, const struct dns_msg *m, uint32_t elapsed,
                 uint16_t id);

/* "A", "AAAA", "TYPE65"... for logs. |buf| gets the numeric form. */
const char *dns_type_name(uint16_t type, char *buf, size_t len);
/* The type a name stands for ("A", "aaaa", "HTTPS", "TYPE65"), or -1. */
int dns_type_parse(const char *name);

/* rrtext.c: the record's data in presentation form, as a zone file writes
 * it after the type ("192.0.2.1", "10 mx.example.com.", "\"v=spf1 -all\""),
 * names with their final dot; types it does not know, and records whose
 * data does not parse, in RFC 3597's generic form ("\# 4 c0000201").
 * Returns the length written to |out| (NUL-terminated), or -1 when |cap| is
 * too small. */
int dns_rr_text(const uint8_t *msg, size_t len, const struct dns_rr *rr, char *out, size_t cap);

#endif
