/* libFuzzer target for SOCKS5 UDP (core/outbound/udp_socks5.c): the
 * datagrams a SOCKS5 relay sends back, RSV(2) FRAG(1) ATYP ADDR PORT DATA
 * (RFC 1928 §7), read by outbound_udp_socks5_unwrap.
 *
 * Input: the datagram.
 *  - It is read from a heap block of exactly its size (ASan sees a read
 *    past it) and the verdict agrees with a tiny reference: taken exactly
 *    when RSV and FRAG are zero (fragments are dropped) and a whole
 *    IPv4, IPv6 or non-empty NUL-free name address and a port follow.
 *  - A datagram taken has its header and payload inside the bytes, the
 *    header exactly the address form, the payload the rest.
 *  - Its payload sent back to the address it came from with
 *    outbound_udp_socks5_send (over a datagram socket pair) is the same
 *    datagram byte for byte: the address forms are canonical. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flow/flow.h"
#include "outbound/proxy.h"
#include "outbound/udp_int.h"
#include "fuzz.h"

#define HDR_MAX (3 + 1 + 1 + 255 + 2)

static struct outbound_udp u; /* large (its seal buffer): static */
static int pair[2] = {-1, -1};
static uint8_t back[65536 + 512];

/* The header's length, or -1 when the datagram is not taken. */
static long
reference(const uint8_t *p, size_t n)
{
    if (n < 4 || p[0] != 0 || p[1] != 0 || p[2] != 0)
        return -1;
    size_t addr;
    switch (p[3]) {
    case 1:
        addr = 4;
        break;
    case 4:
        addr = 16;
        break;
    case 3:
        if (n < 5 || p[4] == 0)
            return -1;
        addr = 1 + (size_t)p[4];
        for (size_t i = 5; i < 4 + addr && i < n; i++)
            if (p[i] == 0)
                return -1;
        break;
    default:
        return -1;
    }
    size_t hdr = 3 + 1 + addr + 2;
    return n >= hdr ? (long)hdr : -1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    if (pair[0] < 0)
        CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) == 0);

    uint8_t *dg = malloc(size ? size : 1);
    CHECK(dg != NULL);
    memcpy(dg, data, size);
    size_t off = 0xdead;
    errno = 0;
    ssize_t r = outbound_udp_socks5_unwrap(&u, dg, size, &off);
    long want = reference(data, size);
    if (r < 0) {
        CHECK(r == -1 && errno == EPROTO && want < 0);
        free(dg);
        return 0;
    }
    CHECK(want >= 0 && off == (size_t)want);
    CHECK(off >= 3 + 1 + 1 + 1 + 2 && off <= HDR_MAX && off + (size_t)r == size);
    CHECK(memcmp(dg, data, size) == 0); /* read only */

    struct flow_addr from;
    CHECK(outbound_addr_parse(dg + 3, off - 3, &from) == (int)(off - 3));
    CHECK(from.kind != FLOW_ADDR_NAME ||
          (from.name_len > 0 && strlen(from.name) == from.name_len));

    u.dst = from;
    u.fd = pair[0];
    u.ctl_closed = 0;
    CHECK(outbound_udp_socks5_send(&u, dg + off, (size_t)r) == r);
    ssize_t got = recv(pair[1], back, sizeof(back), MSG_DONTWAIT);
    CHECK(got == (ssize_t)size && memcmp(back, data, size) == 0);

    /* Once the control connection is gone, sends fail and say so. */
    u.ctl_closed = 1;
    errno = 0;
    CHECK(outbound_udp_socks5_send(&u, dg + off, (size_t)r) == -1 && errno == ECONNRESET);
    free(dg);
    return 0;
}
