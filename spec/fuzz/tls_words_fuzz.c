/* libFuzzer target for core/tls/errors.c, which reads what a peer sent to
 * explain a failed handshake: the start of each certificate of the
 * server's chain (tls_der_validity, for "certificate expired on <date>")
 * and the first bytes of its answer (tls_bytes_not_tls, "did not speak
 * TLS"); and which turns any error code into a sentence.
 *
 * Input: a certificate's start as the server sent it, read from a block of
 * exactly its size (and from every shorter cut, which must never parse
 * into other dates than the whole does when both parse). Its first bytes
 * also make an error code, whose sentence must end inside its buffer. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tls/tls_int.h"
#include "fuzz.h"

#define HEAD_MAX 1024 /* what the certificate check keeps of each one */

static int
validity(const uint8_t *p, size_t len, long long *nb, long long *na)
{
    uint8_t *copy = malloc(len ? len : 1);
    CHECK(copy != NULL);
    memcpy(copy, p, len);
    int r = tls_der_validity(copy, len, nb, na);
    free(copy);
    CHECK(r == 0 || r == -1);
    return r;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    long long nb, na, nb2, na2;
    size_t len = size < HEAD_MAX ? size : HEAD_MAX;
    if (validity(data, len, &nb, &na) == 0) {
        /* Years 1950..9999 (UTCTime and GeneralizedTime) only. */
        CHECK(nb >= -631152000LL && nb <= 253402300799LL);
        CHECK(na >= -631152000LL && na <= 253402300799LL);
        char text[40];
        tls_time_text(na, text, sizeof(text));
        CHECK(strlen(text) < sizeof(text));
        for (size_t cut = 0; cut < len; cut += 1 + cut / 8)
            if (validity(data, cut, &nb2, &na2) == 0)
                CHECK(nb2 == nb && na2 == na);
    }
    if (size >= 1)
        (void)tls_bytes_not_tls(data, size < 5 ? size : 5);
    if (size >= 2) {
        char buf[48];
        int e = (int)((unsigned)data[0] << 8 | data[1]) % 1024;
        memset(buf, 'x', sizeof(buf));
        const char *s = tls_error_sentence(e, data[size - 1] & 1, buf, sizeof(buf));
        if (s == buf)
            CHECK(memchr(buf, '\0', sizeof(buf)) != NULL);
        else if (s != NULL)
            CHECK(strlen(s) > 0);
    }
    return 0;
}
