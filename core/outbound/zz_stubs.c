/* TEMPORARY (lead's integration in progress): weak stand-ins until set.c lands. */
#include <stddef.h>
#include "outbound/set.h"
#define W __attribute__((weak))
W struct outbound_set *outbound_set_new(struct outbound_proxy *p, size_t np, struct outbound_group_cfg *g, size_t ng) { (void)p; (void)np; (void)g; (void)ng; return NULL; }
W struct outbound_set *outbound_set_ref(struct outbound_set *s) { return s; }
W void outbound_set_unref(struct outbound_set *s) { (void)s; }
W void outbound_set_start(struct outbound_set *s, const struct outbound_env *e, const struct outbound_set *p) { (void)s; (void)e; (void)p; }
W void outbound_set_stop(struct outbound_set *s) { (void)s; }
W int outbound_set_lookup(const struct outbound_set *s, const char *n) { (void)s; (void)n; return -1; }
W const char *outbound_set_name(const struct outbound_set *s, int p) { (void)s; (void)p; return "?"; }
W const struct outbound_proxy *outbound_set_proxy(const struct outbound_set *s, int p) { (void)s; (void)p; return NULL; }
W int outbound_set_pick(struct outbound_set *s, int p, const struct flow_addr *d) { (void)s; (void)d; return p; }
W int outbound_set_select(struct outbound_set *s, const char *g, const char *m, char *e, size_t n) { (void)s; (void)g; (void)m; (void)e; (void)n; return -1; }
W void outbound_set_report(struct outbound_set *s, int p, int f) { (void)s; (void)p; (void)f; }
W int outbound_set_check_url(const char *u, char *e, size_t n) { (void)u; (void)e; (void)n; return 0; }
W int outbound_set_needs_tls(const struct outbound_set *s) { (void)s; return 0; }
