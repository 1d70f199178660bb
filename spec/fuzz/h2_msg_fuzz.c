/* libFuzzer target for core/mitm/h2_msg.c: an h2 header block (as
 * nghttp2 would hand it over, but with any bytes at all) becomes the
 * struct http_fwd_req the hooks see and goes back into nv pairs; a
 * response block the same way; a local answer's header lines too.
 * Input: the first byte picks options, then fields as (name length,
 * name, value length, value) with one-byte lengths. Whatever the input,
 * the conversions never crash, and every nv pair they write is one
 * nghttp2 accepts from a peer (lower-case token names, clean values), the
 * pseudo-fields first, no connection-specific field (te only as
 * "trailers"). */

#include <string.h>

#include "fuzz.h"
#include "mitm/h2_int.h"

static void
check_nv(const nghttp2_nv *v, size_t n, int request)
{
    int pseudo_done = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(v[i].namelen > 0);
        CHECK(nghttp2_check_header_value(v[i].value, v[i].valuelen));
        if (v[i].name[0] == ':') {
            CHECK(!pseudo_done);
            CHECK(nghttp2_check_header_name(v[i].name + 1, v[i].namelen - 1));
            continue;
        }
        pseudo_done = 1;
        CHECK(nghttp2_check_header_name(v[i].name, v[i].namelen));
        for (size_t k = 0; k < v[i].namelen; k++)
            CHECK(!(v[i].name[k] >= 'A' && v[i].name[k] <= 'Z'));
        if (v[i].namelen == 2 && memcmp(v[i].name, "te", 2) == 0) {
            CHECK(request && v[i].valuelen == 8 && memcmp(v[i].value, "trailers", 8) == 0);
            continue;
        }
        CHECK(!h2_msg_conn_specific(v[i].name, v[i].namelen));
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t opt = data[0];
    struct mem_arena a;
    mem_arena_init(&a);
    struct h2_fields in = {0}, resp = {0};
    size_t i = 1;
    int oom = 0;
    while (i + 2 <= size) {
        size_t nl = data[i++];
        if (i + nl + 1 > size)
            break;
        const uint8_t *name = data + i;
        i += nl;
        size_t vl = data[i++];
        if (i + vl > size)
            vl = size - i;
        /* Odd fields go to the response block, so both get a share. */
        struct h2_fields *f = (opt & 1) && nl > 0 && name[0] == ':' && nl == 7 &&
                                      memcmp(name, ":status", 7) == 0
                                  ? &resp
                                  : &in;
        if (h2_fields_add(f, &a, name, nl, data + i, vl) != 0)
            oom = 1;
        i += vl;
    }
    struct http_fwd_req req;
    int rc = h2_msg_request(&req, &a, &in, MEM_SLICE_LIT("test.example"), 443, opt & 2);
    CHECK(rc == 0 || rc == -1);
    if (rc == 0 && !req.refused) {
        nghttp2_nv *v;
        size_t n;
        if (opt & 4) /* a hook's edits */
            (void)http_fwd_field_set(&req.fields, MEM_SLICE_LIT("X-Chute"), MEM_SLICE_LIT("hooked"));
        if (h2_msg_request_nv(&req, &a, &v, &n) == 0) {
            CHECK(n >= 4);
            CHECK(v[0].namelen == 7 && memcmp(v[0].name, ":method", 7) == 0);
            check_nv(v, n, 1);
        }
        if (resp.n == 0)
            (void)h2_fields_add(&resp, &a, (const uint8_t *)":status", 7,
                                (const uint8_t *)"200", 3);
        /* The request's own fields as a response block too: any bytes. */
        for (size_t k = 0; k < in.n && !oom; k++)
            if (in.v[k].namelen == 0 || in.v[k].name[0] != ':')
                oom = h2_fields_add(&resp, &a, in.v[k].name, in.v[k].namelen, in.v[k].value,
                                    in.v[k].valuelen) != 0;
        struct http_fwd_resp r;
        if (h2_msg_response(&r, &a, &req, &resp) == 0 && h2_msg_response_nv(&r, &a, &v, &n) == 0) {
            CHECK(n >= 1 && v[0].namelen == 7 && memcmp(v[0].name, ":status", 7) == 0);
            check_nv(v, n, 0);
        }
    }
    /* A local answer's lines, as a hook writes them (checked names). */
    char extra[64];
    size_t el = size - 1 < sizeof(extra) - 1 ? size - 1 : sizeof(extra) - 1;
    memcpy(extra, data + 1, el);
    extra[el] = '\0';
    nghttp2_nv *v;
    size_t n;
    if (h2_msg_reply_nv(&a, 100 + opt, extra, size, &v, &n) == 0)
        CHECK(n >= 1 && v[0].name[0] == ':');
    mem_arena_fini(&a);
    return 0;
}
