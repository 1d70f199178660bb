#ifndef CHUTE_INBOUND_SOCKS5_H
#define CHUTE_INBOUND_SOCKS5_H

/* SOCKS5 wire format (RFC 1928, RFC 1929), sans-I/O: the parsers read from a
 * byte buffer and never block; the listener in socks5.c drives them. */

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "flow/flow-t.h"
#include "mem/slice.h"

enum {
    SOCKS5_METHOD_NOAUTH = 0x00,
    SOCKS5_METHOD_USERPASS = 0x02,
    SOCKS5_METHOD_NONE = 0xff,
};

enum {
    SOCKS5_CMD_CONNECT = 1,
    SOCKS5_CMD_BIND = 2,
    SOCKS5_CMD_UDP_ASSOCIATE = 3,
};

/* Reply codes (REP). */
enum {
    SOCKS5_REP_OK = 0,
    SOCKS5_REP_FAILURE = 1,
    SOCKS5_REP_NOT_ALLOWED = 2,
    SOCKS5_REP_NET_UNREACH = 3,
    SOCKS5_REP_HOST_UNREACH = 4,
    SOCKS5_REP_REFUSED = 5,
    SOCKS5_REP_TTL_EXPIRED = 6,
    SOCKS5_REP_CMD_UNSUPPORTED = 7,
    SOCKS5_REP_ATYP_UNSUPPORTED = 8,
};

/* Parser results: > 0 bytes consumed, 0 need more bytes, < 0 malformed. */
#define SOCKS5_NEED_MORE 0
#define SOCKS5_ERR_VERSION (-1) /* not version 5 (or 1 for RFC 1929) */
#define SOCKS5_ERR_BAD (-2)     /* any other malformation */

/* Greeting: VER NMETHODS METHODS. Sets bit m of |*methods| (an array of 256
 * bits as 32 bytes) for each method m offered. NMETHODS = 0 is malformed. */
int inbound_socks5_parse_greeting(const uint8_t *p, size_t n, uint8_t methods[32]);

/* RFC 1929: VER(1) ULEN UNAME PLEN PASSWD. ULEN 0 is malformed; PLEN 0 is
 * allowed. |user| and |pass| point into |p|. */
int inbound_socks5_parse_userpass(const uint8_t *p, size_t n, struct mem_slice *user,
                                  struct mem_slice *pass);

/* Request: VER CMD RSV ATYP DST.ADDR DST.PORT. Fills |*cmd| and |*dst|
 * (IPv4, IPv6, or a name; a name of length 0 or containing NUL is malformed,
 * with |*rep| = SOCKS5_REP_FAILURE). For an unknown ATYP returns SOCKS5_ERR_BAD
 * with |*rep| = SOCKS5_REP_ATYP_UNSUPPORTED; a nonzero RSV or other error:
 * SOCKS5_REP_FAILURE. The caller answers CMD it does not support with
 * SOCKS5_REP_CMD_UNSUPPORTED. */
int inbound_socks5_parse_request(const uint8_t *p, size_t n, uint8_t *cmd, struct flow_addr *dst,
                                 uint8_t *rep);

/* Writes a reply VER REP RSV ATYP BND.ADDR BND.PORT into |out| (at least 22
 * bytes) for |bnd| (AF_INET or AF_INET6; NULL gives 0.0.0.0:0). Returns its
 * length. */
size_t inbound_socks5_write_reply(uint8_t out[22], uint8_t rep, const struct sockaddr *bnd);

#endif
