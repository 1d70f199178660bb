/* Internet checksum (RFC 1071). Words are summed in host order: the
 * ones'-complement sum commutes with byte swapping (RFC 1071 §2(B)), so the
 * folded result stored with memcpy lands in network order without one
 * byte swap per word, and the pseudo-header's small fields are added
 * pre-swapped instead.
 *
 * Chunks: ip_csum_add may be called on consecutive pieces of one summed
 * region, but every piece except the last must have an even length (start
 * at an even offset of the region). An odd piece would shift the next one
 * by a byte, and summing bytes at odd offsets needs the byte-swapped sum
 * (RFC 1071 §2(B)), which this interface has no offset to apply (lwIP
 * swaps the running sum itself after an odd pbuf). The last piece may be
 * odd: its final byte is padded with a zero as RFC 1071 says. */

#include <arpa/inet.h>
#include <string.h>

#include "ip/ip.h"

/* Folds a 64-bit accumulator to 16 bits with end-around carries; four fixed
 * steps suffice (each halves the width plus at most one carry). */
static uint32_t
fold64(uint64_t acc)
{
    acc = (acc & 0xffffffffu) + (acc >> 32);
    acc = (acc & 0xffffffffu) + (acc >> 32);
    acc = (acc & 0xffffu) + (acc >> 16);
    acc = (acc & 0xffffu) + (acc >> 16);
    return (uint32_t)acc;
}

/* The result always fits in 16 bits (not complemented): lwIP's LWIP_CHKSUM
 * hook (core/netstack/sys.c) keeps 16 bits of it, as lwip_standard_chksum
 * returns, and callers may add a few more words without overflowing the
 * uint32_t. The 64-bit accumulator takes at most 2^33 per 8 bytes: no
 * overflow below 16 GiB per call. Loads go through memcpy because TUN
 * buffers promise no alignment; compilers turn it into plain loads. */
uint32_t
ip_csum_add(uint32_t sum, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t acc = sum;

    while (len >= 32) {
        uint64_t a, b, c, d;

        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        memcpy(&c, p + 16, 8);
        memcpy(&d, p + 24, 8);
        /* Adding two halves of a 64-bit word into a 64-bit accumulator
         * keeps every carry, which the final fold gives back. */
        acc += (a & 0xffffffffu) + (a >> 32) + (b & 0xffffffffu) + (b >> 32);
        acc += (c & 0xffffffffu) + (c >> 32) + (d & 0xffffffffu) + (d >> 32);
        p += 32;
        len -= 32;
    }
    while (len >= 4) {
        uint32_t w;

        memcpy(&w, p, 4);
        acc += w;
        p += 4;
        len -= 4;
    }
    if (len >= 2) {
        uint16_t w;

        memcpy(&w, p, 2);
        acc += w;
        p += 2;
        len -= 2;
    }
    if (len) {
        /* The odd byte is the high-order byte of a zero-padded word, i.e.
         * the first byte in memory whatever the host order. */
        uint16_t w = 0;

        memcpy(&w, p, 1);
        acc += w;
    }
    return fold64(acc);
}

uint16_t
ip_csum_fold(uint32_t sum)
{
    return (uint16_t)~fold64(sum);
}

/* RFC 768 / RFC 8200 §8.1 pseudo-header. v6 carries a 32-bit length, whose
 * two 16-bit halves are both summed; for v4 the high half is zero, so one
 * formula serves both. */
uint32_t
ip_csum_pseudo(int version, const uint8_t *src, const uint8_t *dst, uint8_t proto, uint32_t l4_len)
{
    size_t alen = version == 6 ? 16 : 4;
    uint32_t sum;

    sum = ip_csum_add(0, src, alen);
    sum = ip_csum_add(sum, dst, alen);
    sum += htons(proto) + htons((uint16_t)(l4_len >> 16)) + htons((uint16_t)l4_len);
    return fold64(sum);
}
