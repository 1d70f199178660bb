/* Sniffers of SNI and Host (core/flow/sniff_*.c). The ClientHellos below
 * were captured on loopback from `openssl s_client` 3.0 (-servername
 * example.test) into a Python listener: tls13 with -alpn h2,http/1.1;
 * tls12 the same with -tls1_2; padded with -alpn http/1.1 -bugs, which adds
 * the RFC 7685 padding extension; split with a long ALPN list and
 * -max_send_frag 512, which sends the hello as two records (512 + 16). The
 * Chrome-shaped hello with GREASE is built here, as OpenSSL sends none. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flow/sniff.h"

static const unsigned char tls13[] = /* 336 bytes */
    "\x16\x03\x01\x01\x4b\x01\x00\x01\x47\x03\x03\x71\xea\x57\x0d\x8a\x1e\x01\xf5\x03\x5c\xcd\x01\xdf"
    "\xa9\x77\x4c\x98\x74\x39\x34\x9f\x3f\x63\x21\xc3\x55\x68\x77\x8a\xd6\xdb\xda\x20\x77\xb0\xb9\xae"
    "\xc3\x88\xf4\x0d\xa2\xa4\x09\x6d\x08\x78\x9a\xbe\x7d\x1c\x0d\x80\xb9\x0e\x97\x59\x5b\x21\x41\xfe"
    "\xac\x79\x88\x58\x00\x3e\x13\x02\x13\x03\x13\x01\xc0\x2c\xc0\x30\x00\x9f\xcc\xa9\xcc\xa8\xcc\xaa"
    "\xc0\x2b\xc0\x2f\x00\x9e\xc0\x24\xc0\x28\x00\x6b\xc0\x23\xc0\x27\x00\x67\xc0\x0a\xc0\x14\x00\x39"
    "\xc0\x09\xc0\x13\x00\x33\x00\x9d\x00\x9c\x00\x3d\x00\x3c\x00\x35\x00\x2f\x00\xff\x01\x00\x00\xc0"
    "\x00\x00\x00\x11\x00\x0f\x00\x00\x0c\x65\x78\x61\x6d\x70\x6c\x65\x2e\x74\x65\x73\x74\x00\x0b\x00"
    "\x04\x03\x00\x01\x02\x00\x0a\x00\x16\x00\x14\x00\x1d\x00\x17\x00\x1e\x00\x19\x00\x18\x01\x00\x01"
    "\x01\x01\x02\x01\x03\x01\x04\x00\x23\x00\x00\x00\x10\x00\x0e\x00\x0c\x02\x68\x32\x08\x68\x74\x74"
    "\x70\x2f\x31\x2e\x31\x00\x16\x00\x00\x00\x17\x00\x00\x00\x0d\x00\x2a\x00\x28\x04\x03\x05\x03\x06"
    "\x03\x08\x07\x08\x08\x08\x09\x08\x0a\x08\x0b\x08\x04\x08\x05\x08\x06\x04\x01\x05\x01\x06\x01\x03"
    "\x03\x03\x01\x03\x02\x04\x02\x05\x02\x06\x02\x00\x2b\x00\x09\x08\x03\x04\x03\x03\x03\x02\x03\x01"
    "\x00\x2d\x00\x02\x01\x01\x00\x33\x00\x26\x00\x24\x00\x1d\x00\x20\x05\xe9\x3d\x5e\x34\x17\x9f\xf0"
    "\xb8\xd6\xdd\x7d\xd5\x9b\x02\x9c\x9c\x0c\x38\xef\x8b\x20\x06\x80\x99\x55\x2f\x80\x51\x35\xc1\x66"
    ;
static const unsigned char tls12[] = /* 227 bytes */
    "\x16\x03\x01\x00\xde\x01\x00\x00\xda\x03\x03\x73\xba\xde\x80\x55\xca\xc2\x07\x8c\xd0\xd4\xd6\x39"
    "\x59\x6d\xf4\x3f\xe2\xc6\x08\xb5\xf9\x58\x2a\x0c\xbc\x66\x5b\xb8\xa8\x73\x20\x00\x00\x38\xc0\x2c"
    "\xc0\x30\x00\x9f\xcc\xa9\xcc\xa8\xcc\xaa\xc0\x2b\xc0\x2f\x00\x9e\xc0\x24\xc0\x28\x00\x6b\xc0\x23"
    "\xc0\x27\x00\x67\xc0\x0a\xc0\x14\x00\x39\xc0\x09\xc0\x13\x00\x33\x00\x9d\x00\x9c\x00\x3d\x00\x3c"
    "\x00\x35\x00\x2f\x00\xff\x01\x00\x00\x79\x00\x00\x00\x11\x00\x0f\x00\x00\x0c\x65\x78\x61\x6d\x70"
    "\x6c\x65\x2e\x74\x65\x73\x74\x00\x0b\x00\x04\x03\x00\x01\x02\x00\x0a\x00\x0c\x00\x0a\x00\x1d\x00"
    "\x17\x00\x1e\x00\x19\x00\x18\x00\x23\x00\x00\x00\x10\x00\x0e\x00\x0c\x02\x68\x32\x08\x68\x74\x74"
    "\x70\x2f\x31\x2e\x31\x00\x16\x00\x00\x00\x17\x00\x00\x00\x0d\x00\x2a\x00\x28\x04\x03\x05\x03\x06"
    "\x03\x08\x07\x08\x08\x08\x09\x08\x0a\x08\x0b\x08\x04\x08\x05\x08\x06\x04\x01\x05\x01\x06\x01\x03"
    "\x03\x03\x01\x03\x02\x04\x02\x05\x02\x06\x02"
    ;
static const unsigned char padded[] = /* 517 bytes */
    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x24\x39\x81\xf4\xac\x1f\x3d\xb9\x7a\xc5\xa6\x4b\x14"
    "\x4d\xce\xa4\xec\x3a\xda\x26\x15\x66\x06\xb0\x31\x49\x15\x24\x79\x86\x45\x79\x20\x93\xeb\x34\x55"
    "\x0a\x5e\x31\x72\x67\x2e\xda\x75\xaf\xaf\xed\x3e\x77\x59\x5d\x99\xae\x43\xdf\xb6\xeb\x41\xf1\x90"
    "\x37\xa0\x5f\x90\x00\x3e\x13\x02\x13\x03\x13\x01\xc0\x2c\xc0\x30\x00\x9f\xcc\xa9\xcc\xa8\xcc\xaa"
    "\xc0\x2b\xc0\x2f\x00\x9e\xc0\x24\xc0\x28\x00\x6b\xc0\x23\xc0\x27\x00\x67\xc0\x0a\xc0\x14\x00\x39"
    "\xc0\x09\xc0\x13\x00\x33\x00\x9d\x00\x9c\x00\x3d\x00\x3c\x00\x35\x00\x2f\x00\xff\x01\x00\x01\x75"
    "\x00\x00\x00\x11\x00\x0f\x00\x00\x0c\x65\x78\x61\x6d\x70\x6c\x65\x2e\x74\x65\x73\x74\x00\x0b\x00"
    "\x04\x03\x00\x01\x02\x00\x0a\x00\x16\x00\x14\x00\x1d\x00\x17\x00\x1e\x00\x19\x00\x18\x01\x00\x01"
    "\x01\x01\x02\x01\x03\x01\x04\x00\x23\x00\x00\x00\x10\x00\x0b\x00\x09\x08\x68\x74\x74\x70\x2f\x31"
    "\x2e\x31\x00\x16\x00\x00\x00\x17\x00\x00\x00\x0d\x00\x2a\x00\x28\x04\x03\x05\x03\x06\x03\x08\x07"
    "\x08\x08\x08\x09\x08\x0a\x08\x0b\x08\x04\x08\x05\x08\x06\x04\x01\x05\x01\x06\x01\x03\x03\x03\x01"
    "\x03\x02\x04\x02\x05\x02\x06\x02\x00\x2b\x00\x09\x08\x03\x04\x03\x03\x03\x02\x03\x01\x00\x2d\x00"
    "\x02\x01\x01\x00\x33\x00\x26\x00\x24\x00\x1d\x00\x20\x4e\xf3\x0a\xd8\x98\x52\x91\x9a\x08\xed\x88"
    "\x8d\x7c\xbd\x4c\xf3\x35\x3c\x1b\x5d\xbf\x57\xc1\xba\x4f\xe2\x24\xe4\x13\x80\x40\x24\x00\x15\x00"
    "\xb4\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    ;
static const unsigned char split[] = /* 538 bytes */
    "\x16\x03\x01\x02\x00\x01\x00\x02\x0c\x03\x03\x04\x93\xd5\xa6\xb1\x99\x63\x8c\x1e\x66\xc5\x5d\x75"
    "\xff\x8a\x2f\xba\xc4\x30\x4a\x2b\x14\x91\x71\x60\x20\x4e\xf2\x4d\x00\xf2\xa5\x20\xf2\x87\x34\x13"
    "\xb9\xd6\xf7\x71\xde\x70\x49\x44\x45\x3f\x72\xdc\x49\x3b\xac\x4e\xbc\x8e\x63\xc3\x6d\xb9\x17\x48"
    "\xd6\x9b\x18\xfc\x00\x3e\x13\x02\x13\x03\x13\x01\xc0\x2c\xc0\x30\x00\x9f\xcc\xa9\xcc\xa8\xcc\xaa"
    "\xc0\x2b\xc0\x2f\x00\x9e\xc0\x24\xc0\x28\x00\x6b\xc0\x23\xc0\x27\x00\x67\xc0\x0a\xc0\x14\x00\x39"
    "\xc0\x09\xc0\x13\x00\x33\x00\x9d\x00\x9c\x00\x3d\x00\x3c\x00\x35\x00\x2f\x00\xff\x01\x00\x01\x85"
    "\x00\x00\x00\x11\x00\x0f\x00\x00\x0c\x65\x78\x61\x6d\x70\x6c\x65\x2e\x74\x65\x73\x74\x00\x0b\x00"
    "\x04\x03\x00\x01\x02\x00\x0a\x00\x16\x00\x14\x00\x1d\x00\x17\x00\x1e\x00\x19\x00\x18\x01\x00\x01"
    "\x01\x01\x02\x01\x03\x01\x04\x00\x23\x00\x00\x00\x10\x00\xd3\x00\xd1\x02\x68\x32\x08\x68\x74\x74"
    "\x70\x2f\x31\x2e\x31\x08\x73\x70\x64\x79\x2f\x33\x2e\x31\x06\x73\x70\x64\x79\x2f\x33\x06\x73\x70"
    "\x64\x79\x2f\x32\x08\x68\x74\x74\x70\x2f\x31\x2e\x30\x03\x68\x32\x63\x09\x73\x74\x75\x6e\x2e\x74"
    "\x75\x72\x6e\x06\x77\x65\x62\x72\x74\x63\x08\x63\x2d\x77\x65\x62\x72\x74\x63\x03\x66\x74\x70\x04"
    "\x69\x6d\x61\x70\x04\x70\x6f\x70\x33\x0b\x6d\x61\x6e\x61\x67\x65\x73\x69\x65\x76\x65\x04\x63\x6f"
    "\x61\x70\x0b\x78\x6d\x70\x70\x2d\x63\x6c\x69\x65\x6e\x74\x0b\x78\x6d\x70\x70\x2d\x73\x65\x72\x76"
    "\x65\x72\x0a\x61\x63\x6d\x65\x2d\x74\x6c\x73\x2f\x31\x04\x6d\x71\x74\x74\x03\x64\x6f\x74\x07\x6e"
    "\x74\x73\x6b\x65\x2f\x31\x06\x73\x75\x6e\x72\x70\x63\x02\x68\x33\x03\x73\x6d\x62\x03\x69\x72\x63"
    "\x04\x6e\x6e\x74\x70\x04\x6e\x6e\x73\x70\x03\x64\x6f\x71\x05\x73\x69\x70\x2f\x32\x07\x74\x64\x73"
    "\x2f\x38\x2e\x30\x05\x64\x69\x63\x6f\x6d\x00\x16\x00\x00\x00\x17\x00\x00\x00\x0d\x00\x2a\x00\x28"
    "\x04\x03\x05\x03\x06\x03\x08\x07\x08\x08\x08\x09\x08\x0a\x08\x0b\x08\x04\x08\x05\x08\x06\x04\x01"
    "\x05\x01\x06\x01\x03\x03\x03\x01\x03\x02\x04\x02\x05\x02\x06\x02\x00\x2b\x00\x09\x08\x03\x04\x03"
    "\x03\x03\x02\x03\x01\x00\x2d\x00\x02\x01\x01\x00\x33\x00\x26\x00\x24\x00\x1d\x00\x20\xf4\xd1\xcc"
    "\x61\xde\xd2\x72\xea\x53\xa8\xc3\x62\x62\x26\x95\xfb\x16\x03\x01\x00\x10\x98\x98\x78\x70\x32\xa7"
    "\x25\x57\x1d\x5c\x49\x5e\x54\xd5\x78\x33"
    ;

#define CAP(a) (a), sizeof(a) - 1

/* Runs on a heap copy of exactly |n| bytes, so ASan sees any read past it. */
static int
sniff_exact(int tls, const void *p, size_t n, char *out, size_t outlen, int *h2)
{
    unsigned char *c = malloc(n > 0 ? n : 1);
    int r;

    assert_non_null(c);
    memcpy(c, p, n);
    r = tls ? flow_sniff_tls(c, n, out, outlen, h2) : flow_sniff_http(c, n, out, outlen);
    if (r > 0)
        assert_int_equal(strlen(out), r);
    free(c);
    return r;
}

/* Every proper prefix asks for more; the whole gives |name|. */
static void
whole(int tls, const void *p, size_t n, const char *name, int h2)
{
    char out[256];
    int got = -1;

    for (size_t k = 0; k < n; k++)
        assert_int_equal(sniff_exact(tls, p, k, out, 256, &got), FLOW_SNIFF_NEED_MORE);
    assert_int_equal(sniff_exact(tls, p, n, out, 256, &got), strlen(name));
    assert_string_equal(out, name);
    if (tls)
        assert_int_equal(got, h2);
}

/* Never a name, NONE by the full length, and NONE stays NONE. */
static void
refused(int tls, const void *p, size_t n)
{
    char out[256];
    int none = 0, r = 0;

    for (size_t k = 0; k <= n; k++) {
        r = sniff_exact(tls, p, k, out, 256, NULL);
        assert_true(r == FLOW_SNIFF_NONE || (r == FLOW_SNIFF_NEED_MORE && !none));
        none |= r == FLOW_SNIFF_NONE;
    }
    assert_int_equal(r, FLOW_SNIFF_NONE);
}

static size_t
put(unsigned char *b, size_t v, int w)
{
    for (int i = 0; i < w; i++)
        b[i] = (unsigned char)(v >> 8 * (w - 1 - i));
    return (size_t)w;
}

static size_t
ext(unsigned char *b, unsigned type, const void *data, size_t n)
{
    put(b, type, 2);
    put(b + 2, n, 2);
    memcpy(b + 4, data, n);
    return 4 + n;
}

static size_t
sni(unsigned char *b, const char *name, size_t n)
{
    unsigned char d[300] = {0};

    put(d, n + 3, 2);
    put(d + 3, n, 2);
    memcpy(d + 5, name, n);
    return ext(b, 0, d, n + 5);
}

/* Wraps handshake bytes in records of at most |frag| bytes. */
static size_t
records(unsigned char *out, const unsigned char *msg, size_t n, size_t frag)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i += frag) {
        size_t k = n - i < frag ? n - i : frag;

        memcpy(out + o, (unsigned char[]){22, 3, 1, k >> 8, k & 0xff}, 5);
        memcpy(out + o + 5, msg + i, k);
        o += 5 + k;
    }
    return o;
}

/* A ClientHello around |exts|, the GREASE cipher suite first as in Chrome. */
static size_t
hello(unsigned char *out, const unsigned char *exts, size_t elen, size_t frag)
{
    static const unsigned char suites[] = {0x0a, 0x0a, 0x13, 0x01, 0x13, 0x02, 0xc0, 0x2b};
    static unsigned char m[20000];
    size_t o = 4;

    o += put(m + o, 0x0303, 2);
    memset(m + o, 0x5a, 32 + 1 + 32);
    m[o + 32] = 32;
    o += 32 + 1 + 32;
    o += put(m + o, sizeof(suites), 2);
    memcpy(m + o, suites, sizeof(suites));
    o += sizeof(suites);
    o += put(m + o, 0x0100, 2);
    o += put(m + o, elen, 2);
    memcpy(m + o, exts, elen);
    o += elen;
    m[0] = 1;
    put(m + 1, o - 4, 3);
    return records(out, m, o, frag);
}

/* Chrome's extension list as of 2023: GREASE first and last, GREASE in
 * groups, key shares and versions, then padding to a 512-byte hello. */
static size_t
chrome(unsigned char *e, const char *name)
{
    static const unsigned char groups[] = {0, 8, 0x2a, 0x2a, 0, 0x1d, 0, 0x17, 0, 0x18};
    static const char alpn[] = "\x00\x0c\x02h2\x08http/1.1";
    static const char sigalgs[] = "\x00\x08\x04\x03\x08\x04\x04\x01\x05\x03";
    unsigned char share[43] = {0, 41, 0x0a, 0x0a, 0, 1, 0, 0, 0x1d, 0, 32}, pad[512] = {0};
    size_t o = 0;

    o += ext(e + o, 0x1a1a, "", 0);
    o += sni(e + o, name, strlen(name));
    o += ext(e + o, 23, "", 0);
    o += ext(e + o, 0xff01, "", 1);
    o += ext(e + o, 10, groups, sizeof(groups));
    o += ext(e + o, 11, "\x01\x00", 2);
    o += ext(e + o, 35, "", 0);
    o += ext(e + o, 16, alpn, sizeof(alpn) - 1);
    o += ext(e + o, 5, "\x01\x00\x00\x00\x00", 5);
    o += ext(e + o, 13, sigalgs, sizeof(sigalgs) - 1);
    o += ext(e + o, 18, "", 0);
    o += ext(e + o, 51, share, sizeof(share));
    o += ext(e + o, 45, "\x01\x01", 2);
    o += ext(e + o, 43, "\x06\x3a\x3a\x03\x04\x03\x03", 7);
    o += ext(e + o, 27, "\x02\x00\x02", 3);
    o += ext(e + o, 17513, "\x00\x03\x02h2", 5);
    o += ext(e + o, 0x4a4a, "", 1);
    /* hello() puts 85 bytes before the extensions, 4 of them the header. */
    return o + ext(e + o, 21, pad, 512 - 85 - o - 4);
}

static void
test_tls_captures(void **state)
{
    unsigned char buf[2048], e[1024];
    char out[256];
    (void)state;
    whole(1, CAP(tls13), "example.test", 1);
    whole(1, CAP(tls12), "example.test", 1);
    whole(1, CAP(padded), "example.test", 0);
    whole(1, CAP(split), "example.test", 1);
    whole(1, buf, hello(buf, e, chrome(e, "www.Example.test"), 16384), "www.example.test", 1);
    assert_int_equal(buf[3] << 8 | buf[4], 512);
    /* Bytes after the hello (a CCS record, early data) change nothing. */
    memcpy(buf, tls13, sizeof(tls13) - 1);
    memcpy(buf + sizeof(tls13) - 1, "\x14\x03\x03\x00\x01\x01\x17", 7);
    assert_int_equal(sniff_exact(1, buf, sizeof(tls13) - 1 + 7, out, 256, NULL), 12);
}

/* The handshake message of tls13 cut into records of every size given;
 * a record of another type in the middle ends it. */
static void
test_tls_records(void **state)
{
    static const size_t frags[] = {1, 2, 3, 4, 5, 7, 100, 330};
    unsigned char buf[2048];
    size_t n;
    (void)state;
    for (size_t i = 0; i < sizeof(frags) / sizeof(frags[0]); i++)
        whole(1, buf, records(buf, tls13 + 5, sizeof(tls13) - 6, frags[i]), "example.test", 1);
    n = records(buf, tls13 + 5, sizeof(tls13) - 6, 100);
    memmove(buf + 111, buf + 105, n - 105);
    memcpy(buf + 105, "\x14\x03\x03\x00\x01\x01", 6);
    refused(1, buf, n + 6);
}

static void
test_tls_names(void **state)
{
    static const struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"Example.TEST", 12, "example.test"}, {"a_b-c.9", 7, "a_b-c.9"},
        {"exa mple.test", 13, NULL},          {"a/b", 3, NULL},
        {"a:443", 5, NULL},                   {"caf\xc3\xa9.test", 10, NULL},
        {"nul\0.test", 9, NULL},              {"", 0, NULL},
        {"[::1]", 5, NULL},                   {"a*b", 3, NULL},
    };
    unsigned char buf[2048], e[1024];
    char name[300];
    size_t n;
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        n = hello(buf, e, sni(e, cases[i].in, cases[i].n), 16384);
        if (cases[i].want != NULL)
            whole(1, buf, n, cases[i].want, 0);
        else
            refused(1, buf, n);
    }
    memset(name, 'a', sizeof(name));
    name[253] = '\0';
    whole(1, buf, hello(buf, e, sni(e, name, 253), 16384), name, 0);
    name[253] = 'a';
    refused(1, buf, hello(buf, e, sni(e, name, 254), 16384));
    assert_int_equal(flow_sniff_tls(CAP(tls13), name, 12, NULL), FLOW_SNIFF_NONE);
    assert_int_equal(flow_sniff_tls(CAP(tls13), name, 13, NULL), 12);
}

static void
test_tls_sni_shapes(void **state)
{
    unsigned char buf[2048], e[1024];
    size_t o;
    (void)state;
    /* An unknown name type is skipped with the host_name framing; the
     * first host_name wins. */
    o = ext(e, 0, "\x00\x0e\x01\x00\x03x.y\x00\x00\x01" "a\x00\x00\x01" "b", 16);
    whole(1, buf, hello(buf, e, o, 16384), "a", 0);
    o = sni(e, "a.test", 6);
    o += sni(e + o, "b.test", 6);
    refused(1, buf, hello(buf, e, o, 16384)); /* two server_name extensions */
    o = ext(e, 0, "\x00\x00", 2);
    refused(1, buf, hello(buf, e, o, 16384)); /* an empty list */
    o = ext(e, 0, "\x00\x06\x00\x00\x02" "ab", 7);
    refused(1, buf, hello(buf, e, o, 16384)); /* list longer than the extension */
    o = ext(e, 16, "\x00\x03\x02h2", 5);
    refused(1, buf, hello(buf, e, o, 16384)); /* ALPN but no SNI */
    o = sni(e, "a.test", 6);
    o += ext(e + o, 16, "\x00\x03\x02h2", 5);
    o += ext(e + o, 16, "\x00\x03\x02h2", 5);
    refused(1, buf, hello(buf, e, o, 16384)); /* two ALPN extensions */
    /* No extensions block at all (TLS 1.2 allows it): no name. */
    o = hello(buf, e, 0, 16384) - 2;
    buf[4] -= 2;
    buf[8] -= 2;
    refused(1, buf, o);
    assert_int_equal(flow_sniff_tls(CAP(tls13), NULL, 256, NULL), FLOW_SNIFF_NONE);
    assert_int_equal(flow_sniff_tls(CAP(tls13), (char *)e, 0, NULL), FLOW_SNIFF_NONE);
}

static void
test_tls_alpn(void **state)
{
    unsigned char buf[2048], e[1024];
    char out[256];
    int h2 = -1;
    size_t o;
    (void)state;
    assert_int_equal(flow_sniff_tls(CAP(tls13), out, 256, NULL), 12);
    assert_int_equal(flow_sniff_tls(CAP(padded), out, 256, &h2), 12);
    assert_int_equal(h2, 0);
    assert_int_equal(flow_sniff_tls(CAP(tls13), out, 256, &h2), 12);
    assert_int_equal(h2, 1);
    assert_int_equal(flow_sniff_tls(tls13, 100, out, 256, &h2), FLOW_SNIFF_NEED_MORE);
    assert_int_equal(h2, 0);
    o = sni(e, "a.test", 6);
    o += ext(e + o, 16, "\x00\x0d\x03h2c\x08http/1.1", 15);
    whole(1, buf, hello(buf, e, o, 16384), "a.test", 0);
    o = sni(e, "a.test", 6);
    o += ext(e + o, 16, "\x00\x07\x03h2c\x02h2", 9);
    whole(1, buf, hello(buf, e, o, 16384), "a.test", 1);
    o = sni(e, "a.test", 6);
    o += ext(e + o, 16, "\x00\x04\x00\x02h2", 6);
    refused(1, buf, hello(buf, e, o, 16384)); /* an empty protocol name */
}

/* Not TLS: refused on the first byte. A lying length anywhere: refused,
 * never read past (sniff_exact), whatever the cut. */
static void
test_tls_refusals(void **state)
{
    static const struct {
        size_t at;
        unsigned char v;
        size_t by; /* refused from this length on */
    } lies[] = {
        {0, 23, 1},   {1, 2, 2},     {2, 0, 3},        {3, 0x41, 4},   {5, 2, 6},
        {6, 1, 9},    {7, 0x40, 9},  {9, 2, 11},       {43, 33, 44},   {77, 1, 78},
        {143, 0xc1, 144}, {143, 0xbf, 144}, {147, 18, 150}, {149, 16, 150}, {152, 13, 153},
    };
    static unsigned char buf[20000], e[20000], zeros[16384];
    char out[256];
    size_t n;
    (void)state;
    assert_int_equal(flow_sniff_tls((const unsigned char *)"GET / HTTP/1.1", 1, out, 256, NULL),
                     FLOW_SNIFF_NONE);
    assert_int_equal(flow_sniff_tls((const unsigned char *)"SSH-2.0-", 1, out, 256, NULL),
                     FLOW_SNIFF_NONE);
    assert_int_equal(flow_sniff_tls(tls13, 0, out, 256, NULL), FLOW_SNIFF_NEED_MORE);
    for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
        memcpy(buf, tls13, sizeof(tls13) - 1);
        buf[lies[i].at] = lies[i].v;
        refused(1, buf, sizeof(tls13) - 1);
        assert_int_equal(sniff_exact(1, buf, lies[i].by, out, 256, NULL), FLOW_SNIFF_NONE);
        assert_int_equal(sniff_exact(1, buf, lies[i].by - 1, out, 256, NULL),
                         FLOW_SNIFF_NEED_MORE);
    }
    /* Every byte of a real hello bumped up and down: any answer is in range
     * and no cut reads past the end. */
    for (size_t at = 0; at < sizeof(tls12) - 1; at++)
        for (int d = -1; d <= 1; d += 2)
            for (size_t k = 0; k <= sizeof(tls12) - 1; k++) {
                memcpy(buf, tls12, sizeof(tls12) - 1);
                buf[at] = (unsigned char)(buf[at] + d);
                assert_true(sniff_exact(1, buf, k, out, 256, NULL) >= FLOW_SNIFF_NONE);
            }
    refused(1, "\x16\x03\x01\x00\x00", 5); /* empty record */
    refused(1, "\x16\x03\x01\x40\x01", 5); /* over 2^14 */
    /* The 16 KiB cap on the hello body, told from its header. */
    n = sni(e, "a.test", 6);
    n = hello(buf, e, n + ext(e + n, 21, zeros, 16284), 16384);
    assert_int_equal(n, 2 * 5 + 4 + 16384);
    assert_int_equal(sniff_exact(1, buf, n, out, 256, NULL), 6);
    n = sni(e, "a.test", 6);
    n = hello(buf, e, n + ext(e + n, 21, zeros, 16285), 16384);
    assert_int_equal(sniff_exact(1, buf, 9, out, 256, NULL), FLOW_SNIFF_NONE);
}

/* Each head ends with its Host line: the name comes with that line's LF. */
static void
test_http_host(void **state)
{
    static const char *const heads[][2] = {
        {"GET / HTTP/1.1\r\nHost: example.test\r\n", "example.test"},
        {"POST /x?y=1 HTTP/1.0\r\nUser-Agent: t\r\nAccept: */*\r\nhOsT:\t Example.TEST:8080 \t\r\n",
         "example.test"},
        {"PUT /a HTTP/1.1\nContent-Length: 0\nHOST: a.b\n", "a.b"},
        {"OPTIONS * HTTP/1.1\r\nHost: [2001:DB8::1]:443\r\n", "2001:db8::1"},
        {"HEAD / HTTP/1.1\r\nHost: [::1]\r\n", "::1"},
        {"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n", "example.test"},
        {"DELETE /r HTTP/1.1\r\nX-Host: no\r\nHostname: no\r\nHost: 192.0.2.7:\r\n", "192.0.2.7"},
        {"PATCH /p HTTP/1.1\r\nHost:a_b-c\r\n", "a_b-c"},
        {"TRACE / HTTP/1.9\r\nHost: t\n", "t"},
    };
    char buf[512], out[256];
    (void)state;
    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        size_t n = strlen(heads[i][0]);

        whole(0, heads[i][0], n, heads[i][1], 0);
        /* The rest of the head and a body change nothing. */
        strcpy(buf, heads[i][0]);
        strcat(buf, "Host: other.test\r\nX: y\r\n\r\nbody");
        assert_int_equal(sniff_exact(0, buf, strlen(buf), out, 256, NULL), strlen(heads[i][1]));
        assert_string_equal(out, heads[i][1]);
    }
}

static void
test_http_refusals(void **state)
{
    static const char *const heads[] = {
        "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", /* the head ends without Host */
        "GET / HTTP/1.0\n\n",
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "get / HTTP/1.1\r\nHost: a\r\n",
        "GETX / HTTP/1.1\r\nHost: a\r\n",
        "GET  / HTTP/1.1\r\nHost: a\r\n",
        "GET / HTTP/2.0\r\nHost: a\r\n",
        "GET / HTTP/1.x\r\nHost: a\r\n",
        "GET / HTTP/1.1\rHost: a\r\n",
        "GET / HTTP/1.1\r\nHost : a\r\n",
        "GET / HTTP/1.1\r\nX: y\r\n folded\r\nHost: a\r\n",
        "GET / HTTP/1.1\r\nX: a\rb\r\nHost: a\r\n",
        "GET / HTTP/1.1\r\n: a\r\nHost: a\r\n",
        "GET / HTTP/1.1\r\nHost: a b\r\n",
        "GET / HTTP/1.1\r\nHost: \r\n",
        "GET / HTTP/1.1\r\nHost: [::1\r\n",
        "GET / HTTP/1.1\r\nHost: []:80\r\n",
        "GET / HTTP/1.1\r\nHost: [::1]x\r\n",
        "GET / HTTP/1.1\r\nHost: [g::1]\r\n",
        "GET / HTTP/1.1\r\nHost: a:b:80\r\n",
        "GET / HTTP/1.1\r\nHost: a:80x\r\n",
        "GET / HTTP/1.1\r\nHost: u@a\r\n",
        "GET / HTTP/1.1\r\nHost: caf\xc3\xa9.test\r\n",
    };
    static char big[9000];
    char out[256];
    size_t n;
    (void)state;
    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++)
        refused(0, heads[i], strlen(heads[i]));
    refused(0, CAP("GET / HTTP/1.1\r\nX: a\0b\r\nHost: a\r\n"));
    refused(0, CAP("GET / HTTP/1.1\r\nAccept: */*\r\n\n"));
    assert_int_equal(sniff_exact(0, "\x16\x03\x01", 1, out, 256, NULL), FLOW_SNIFF_NONE);
    assert_int_equal(sniff_exact(0, "SSH-2.0-OpenSSH_9.2", 1, out, 256, NULL), FLOW_SNIFF_NONE);
    assert_int_equal(sniff_exact(0, tls13, sizeof(tls13) - 1, out, 256, NULL), FLOW_SNIFF_NONE);
    assert_int_equal(sniff_exact(0, "PR", 2, out, 256, NULL), FLOW_SNIFF_NONE);
    assert_int_equal(flow_sniff_http((const unsigned char *)"G", 1, NULL, 256), FLOW_SNIFF_NONE);
    assert_int_equal(sniff_exact(0, "OPTIONSX", 8, out, 256, NULL), FLOW_SNIFF_NONE);

    /* 8 KiB: a Host line ending at byte 8192 counts, one byte later not. */
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET / HTTP/1.1\r\nX-Pad: ", 23);
    memcpy(big + 23 + 8153, "\r\nHost: a.test\r\n", 16);
    whole(0, big, 8192, "a.test", 0);
    memmove(big + 23 + 8154, big + 23 + 8153, 16);
    big[23 + 8153] = 'a';
    refused(0, big, 8193);
    assert_int_equal(sniff_exact(0, big, 8191, out, 256, NULL), FLOW_SNIFF_NEED_MORE);
    assert_int_equal(sniff_exact(0, big, 8192, out, 256, NULL), FLOW_SNIFF_NONE);
    n = strlen("GET / HTTP/1.1\r\nHost: example.test\r\n");
    assert_int_equal(flow_sniff_http((const unsigned char *)"GET / HTTP/1.1\r\nHost: example.test\r\n",
                                     n, out, 12), FLOW_SNIFF_NONE);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_captures),  cmocka_unit_test(test_tls_records),
        cmocka_unit_test(test_tls_names),     cmocka_unit_test(test_tls_sni_shapes),
        cmocka_unit_test(test_tls_alpn),      cmocka_unit_test(test_tls_refusals),
        cmocka_unit_test(test_http_host),     cmocka_unit_test(test_http_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
