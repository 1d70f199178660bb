#ifndef CHUTE_OUTBOUND_HS_WIRE_H
#define CHUTE_OUTBOUND_HS_WIRE_H

/* The bytes of the client side of SOCKS5 (RFC 1928, RFC 1929) and HTTP
 * CONNECT (RFC 9110 §9.3.6) handshakes, without I/O: builders write a whole
 * message into the caller's buffer, parsers read the proxy's replies from
 * whatever has arrived so far.
 *
 * Builders return the length written, or -1 when |cap| is too small or the
 * input cannot be sent. Parsers return >0 the bytes of one complete message
 * (anything after it is not theirs), 0 when more bytes are needed, <0 when
 * the bytes can never become a valid message. A complete message reads as
 * 0 at every shorter length. */

#include <stddef.h>
#include <stdint.h>

#include "flow/flow-t.h"

#define OUTBOUND_SOCKS5_NOAUTH 0x00
#define OUTBOUND_SOCKS5_USERPASS 0x02
#define OUTBOUND_SOCKS5_NO_METHOD 0xff

/* Upper bounds for the callers' buffers. */
#define OUTBOUND_SOCKS5_AUTH_MAX (3 + 255 + 255)
#define OUTBOUND_SOCKS5_REQUEST_MAX (3 + 1 + 1 + 255 + 2)
#define OUTBOUND_SOCKS5_REPLY_MAX (4 + 1 + 255 + 2)
/* CONNECT line, Host, Proxy-Authorization with base64 of 255:255. */
#define OUTBOUND_HTTP_REQUEST_MAX 1536
#define OUTBOUND_HTTP_HEAD_MAX 16384

/* "05 01 00", or "05 02 00 02" when the client has credentials (offering
 * no-auth too lets a proxy that needs none accept). Returns 3 or 4. */
size_t outbound_hs_socks5_greeting(uint8_t out[4], int with_auth);
/* "01 ULEN USER PLEN PASS"; -1 when |user| is empty or either is > 255. */
int outbound_hs_socks5_auth(uint8_t *out, size_t cap, const char *user, const char *pass);
/* "05 01 00" + the address form of |dst| (a name is sent as a name). */
int outbound_hs_socks5_request(uint8_t *out, size_t cap, const struct flow_addr *dst);
/* "CONNECT host:port HTTP/1.1", Host, and Proxy-Authorization Basic when
 * |user| is not empty. IPv6 goes in brackets. -1 also for a name with
 * bytes that cannot appear in a request line (controls, space). */
int outbound_hs_http_request(char *out, size_t cap, const struct flow_addr *dst, const char *user,
                             const char *pass);

/* "05 METHOD" -> |*method|. */
int outbound_hs_socks5_parse_method(const uint8_t *p, size_t n, uint8_t *method);
/* "01 STATUS" -> |*status| (0 = accepted). */
int outbound_hs_socks5_parse_auth(const uint8_t *p, size_t n, uint8_t *status);
/* "05 REP RSV ATYP BND.ADDR BND.PORT" -> |*rep|. |*rep| is set as soon as
 * two bytes are there (0xff before), so a caller can name a refusal even
 * when the rest never comes or is malformed. */
int outbound_hs_socks5_parse_reply(const uint8_t *p, size_t n, uint8_t *rep);
/* "HTTP/1.x NNN reason" and header lines up to the empty line (CRLF or bare
 * LF), at most OUTBOUND_HTTP_HEAD_MAX bytes -> |*status| (100..599). */
int outbound_hs_http_parse_head(const uint8_t *p, size_t n, int *status);
/* The start of a status line alone: "HTTP/1.x NNN" and the byte after it
 * (SP, CR or LF), OUTBOUND_HTTP_STATUS_LEN bytes. Returns the status
 * (100..599) once they are in, 0 while the bytes so far may still become
 * one, -1 when they cannot. Reads at most the first
 * OUTBOUND_HTTP_STATUS_LEN bytes. Health checks time the path to it. */
#define OUTBOUND_HTTP_STATUS_LEN 13
int outbound_hs_http_status(const uint8_t *p, size_t n);

#endif
