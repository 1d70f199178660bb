#ifndef CHUTE_FETCH_SUB_H
#define CHUTE_FETCH_SUB_H

/* Subscription bodies: the proxies a provider's URL serves, in one of the
 * three forms providers use:
 *   clash   a Clash YAML document with a proxies: list (a whole config or
 *           just the list)
 *   base64  base64 (standard or URL-safe, padded or not) of URI lines
 *   lines   proxy URIs, one a line (outbound/uri.h)
 * Sans-I/O and allocation-bounded by the body. */

#include <stddef.h>

#include "fetch/yaml.h"
#include "outbound/uri.h"

enum fetch_sub_format { FETCH_SUB_CLASH = 0, FETCH_SUB_BASE64, FETCH_SUB_LINES };

struct fetch_sub_ops {
    /* One proxy; |line| is where it is in the body (for base64: the line
     * of the decoded text). */
    void (*proxy)(void *arg, const struct outbound_uri *p, unsigned line);
    /* An entry chute cannot use, and why ("vmess is not supported", a
     * URI's error): said once per entry, never dropped silently. */
    void (*skip)(void *arg, unsigned line, const char *why);
};

/* Decodes |buf|. Returns the number of proxies given to ops->proxy (>= 1),
 * or -1 with |err| saying why: a body with no usable proxy, or one that is
 * none of the forms, with what it looked like ("looks like an HTML page",
 * "looks like JSON", "a YAML document without a proxies: list", ...).
 * |fmt| (may be NULL) gets the form it was read as. */
long fetch_sub_decode(const char *buf, size_t len, const struct fetch_sub_ops *ops, void *arg,
                      enum fetch_sub_format *fmt, char *err, size_t errlen);
const char *fetch_sub_format_name(enum fetch_sub_format f);

/* clash_proxy.c: one entry of a Clash proxies: list as proxy fields. 0, or
 * -1 with |why| ("type vmess is not supported", "plugin obfs is not
 * supported", "needs a port 1..65535"). */
int fetch_clash_proxy(const struct fetch_yaml *y, fetch_yaml_node n, struct outbound_uri *out,
                      char *why, size_t whylen);

#endif
