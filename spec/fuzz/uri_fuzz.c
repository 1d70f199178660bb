/* Proxy URIs (outbound/uri.c) on arbitrary bytes: whatever parses has
 * NUL-terminated fields, a port, a known type, and an error never shows
 * the secret; the mask always ends inside its buffer; base64 never writes
 * past the room it is given. */

#include <stdint.h>
#include <string.h>

#include "outbound/uri.h"
#include "fuzz.h"

static const char *const types[] = {"shadowsocks", "trojan", "socks5", "http", "https"};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct outbound_uri u;
    char err[256];
    int rc = outbound_uri_parse((const char *)data, size, &u, err, sizeof(err));
    if (rc == 0) {
        int known = 0;
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
            known |= strcmp(u.type, types[i]) == 0;
        CHECK(known);
        CHECK(u.port >= 1);
        CHECK(memchr(u.server, '\0', sizeof(u.server)) != NULL && u.server[0] != '\0');
        CHECK(memchr(u.pass, '\0', sizeof(u.pass)) != NULL);
        CHECK(memchr(u.name, '\0', sizeof(u.name)) != NULL);
        CHECK(memchr(u.cipher, '\0', sizeof(u.cipher)) != NULL);
        CHECK(u.udp == -1);
    } else {
        CHECK(rc == -1);
        CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    }
    char shown[64];
    for (size_t cap = 1; cap <= sizeof(shown); cap += 21) {
        outbound_uri_mask((const char *)data, size, shown, cap);
        CHECK(memchr(shown, '\0', cap) != NULL);
    }
    uint8_t out[64];
    long n = outbound_b64_decode((const char *)data, size, out, sizeof(out));
    CHECK(n >= -1 && n <= (long)sizeof(out));
    return 0;
}
