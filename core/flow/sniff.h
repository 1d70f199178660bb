#ifndef CHUTE_FLOW_SNIFF_H
#define CHUTE_FLOW_SNIFF_H

/* Sniffers of a flow's first client bytes, for flows that arrive without a
 * name (a raw IP connect, no fake-IP mapping): the TLS ClientHello's SNI and
 * the HTTP/1 Host header. Sans-I/O: called again with more bytes as they
 * arrive, never reading past |len|. */

#include <stddef.h>

enum {
    FLOW_SNIFF_NEED_MORE = 0,  /* a prefix of what could still carry a name */
    FLOW_SNIFF_NONE = -1,      /* not this protocol, or no name in it */
};

/* TLS: a ClientHello (record type 22, handshake type 1), possibly split
 * across records and reads, with the server_name extension (type 0, host
 * name type 0). On success writes the name, lowercased, NUL-terminated, to
 * |out| (|outlen| >= 256) and returns its length (> 0). A name that is not a
 * valid host name (empty, over 253 bytes, bytes outside [A-Za-z0-9._-]) is
 * FLOW_SNIFF_NONE. Also stores in |*alpn_h2| whether ALPN offers "h2" (may
 * be NULL). Gives up (NONE) once |len| passes 16 KiB + record headers. */
int flow_sniff_tls(const unsigned char *p, size_t len, char *out, size_t outlen, int *alpn_h2);

/* HTTP/1.x: a request line with a known method token, then headers up to
 * the Host header (any case, value trimmed, port stripped, IPv6 literal
 * brackets kept out). Returns the name's length, NEED_MORE, or NONE (not
 * HTTP, or the head ended without Host, or 8 KiB passed without it). */
int flow_sniff_http(const unsigned char *p, size_t len, char *out, size_t outlen);

/* True if |name| is an IP literal: a Host header "192.0.2.7" names no host
 * beyond the address the flow already has. */
int flow_sniff_is_ip(const char *name);

/* The sniff step every inbound shares: a flow whose route() asked for the
 * host it lacks keeps its first client bytes, unacknowledged, until they
 * name the host or FLOW_SNIFF_WAIT passes, then is decided again. */
struct flow;
/* The sniff step's outcome at debug level: |name| found (NULL: none) in
 * |seen| bytes, or none before FLOW_SNIFF_WAIT ran out (|timed_out|). */
void flow_sniff_log(const struct flow *f, const char *name, size_t seen, int timed_out);

#define FLOW_SNIFF_WAIT 0.3   /* seconds for the first bytes (sing-box and mihomo: ~300 ms) */
#define FLOW_SNIFF_MAX 17000  /* a ClientHello of 16 KiB in records, or an HTTP head */

/* Looks at the |len| first bytes (|eof|: the client sent all it will).
 * Returns 1 when the sniff is over: |name| (|cap| >= 256) holds the host,
 * or "" when none came (an IP literal counts as none); 0 while more bytes
 * could still name it. */
int flow_sniff_step(const unsigned char *p, size_t len, int eof, char *name, size_t cap);

#endif
