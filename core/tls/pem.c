#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls/tls_int.h"

/* PEM objects for the trust store (files read in chunks) and the server
 * configuration (text in memory): BearSSL's streaming decoder, with each
 * object gathered whole before the caller sees it. */

void
tls_bytes_append(void *ctx, const void *data, size_t len)
{
    struct tls_bytes *b = ctx;
    if (b->oom)
        return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 2048;
        while (cap < b->len + len)
            cap *= 2;
        unsigned char *np = malloc(cap);
        if (np == NULL) {
            b->oom = 1;
            return;
        }
        /* Not realloc: the old block may hold a key and is wiped. */
        if (b->p != NULL) {
            memcpy(np, b->p, b->len);
            explicit_bzero(b->p, b->cap);
            free(b->p);
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
}

void
tls_bytes_fini(struct tls_bytes *b)
{
    if (b->p != NULL)
        explicit_bzero(b->p, b->cap);
    free(b->p);
    memset(b, 0, sizeof(*b));
}

void
tls_pem_init(struct tls_pem *p,
             int (*on_obj)(void *arg, const char *name, const unsigned char *der, size_t len),
             void *arg)
{
    memset(p, 0, sizeof(*p));
    br_pem_decoder_init(&p->dec);
    p->on_obj = on_obj;
    p->arg = arg;
}

int
tls_pem_push(struct tls_pem *p, const void *data, size_t len)
{
    const unsigned char *q = data;
    while (len > 0) {
        size_t k = br_pem_decoder_push(&p->dec, q, len);
        q += k;
        len -= k;
        switch (br_pem_decoder_event(&p->dec)) {
        case BR_PEM_BEGIN_OBJ:
            snprintf(p->name, sizeof(p->name), "%s", br_pem_decoder_name(&p->dec));
            p->in_obj = 1;
            p->der.len = 0;
            p->der.oom = 0;
            br_pem_decoder_setdest(&p->dec, tls_bytes_append, &p->der);
            break;
        case BR_PEM_END_OBJ:
            if (p->in_obj) {
                p->in_obj = 0;
                if (p->der.oom)
                    return TLS_PEM_OOM;
                int r = p->on_obj(p->arg, p->name, p->der.p, p->der.len);
                if (r != 0)
                    return r;
            }
            break;
        case BR_PEM_ERROR:
            return TLS_PEM_MALFORMED;
        default:
            break;
        }
    }
    return 0;
}

int
tls_pem_finish(struct tls_pem *p)
{
    return tls_pem_push(p, "\n", 1);
}

void
tls_pem_fini(struct tls_pem *p)
{
    tls_bytes_fini(&p->der);
}

int
tls_pem_is_cert(const char *name)
{
    return strcmp(name, "CERTIFICATE") == 0 || strcmp(name, "X509 CERTIFICATE") == 0;
}
