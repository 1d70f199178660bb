/* TEMPORARY (lead's integration in progress): weak stand-ins until client.c lands. */
#include "tls/tls.h"
#define W __attribute__((weak))
W struct tls_ctx *tls_ctx_new(const char *f, char *e, size_t n) { (void)f; (void)e; (void)n; return NULL; }
W void tls_ctx_free(struct tls_ctx *t) { (void)t; }
W struct tls_handshake *tls_client_start(struct tls_ctx *t, struct ev_loop *l, int fd, const struct tls_client_opts *o, tls_handshake_cb cb, void *a) { (void)t; (void)l; (void)fd; (void)o; (void)cb; (void)a; return NULL; }
W void tls_handshake_cancel(struct tls_handshake *h) { (void)h; }
