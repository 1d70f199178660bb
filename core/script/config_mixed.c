#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "script/script_int.h"

/* The port a listener binds, and whether its address is the wildcard. */
static int
same_port(const struct script_listener *a, const struct script_listener *b)
{
    const struct sockaddr_storage *x = &a->addr, *y = &b->addr;
    if (x->ss_family != y->ss_family)
        return 0;
    if (x->ss_family == AF_INET) {
        const struct sockaddr_in *p = (const void *)x, *q = (const void *)y;
        return p->sin_port == q->sin_port &&
               (p->sin_addr.s_addr == q->sin_addr.s_addr || p->sin_addr.s_addr == INADDR_ANY ||
                q->sin_addr.s_addr == INADDR_ANY);
    }
    const struct sockaddr_in6 *p = (const void *)x, *q = (const void *)y;
    return p->sin6_port == q->sin6_port &&
           (memcmp(&p->sin6_addr, &q->sin6_addr, 16) == 0 ||
            IN6_IS_ADDR_UNSPECIFIED(&p->sin6_addr) || IN6_IS_ADDR_UNSPECIFIED(&q->sin6_addr));
}

/* listen.mixed already serves SOCKS5 and HTTP: a socks or http listener on
 * its port is a mistake, said before bind() says "address in use". */
int
script_mixed_check(struct script *s, int st, char *err, size_t errlen)
{
    const struct script_config *c = &s->cfg;
    if (!c->mixed.enabled)
        return 0;
    const struct script_listener *other[2] = {&c->socks, &c->http};
    static const char *const names[2] = {"socks", "http"};
    for (int i = 0; i < 2; i++)
        if (other[i]->enabled && same_port(&c->mixed, other[i])) {
            lua_getfield(s->L, st, "config_where"); /* "main.lua:3: " */
            snprintf(err, errlen,
                     "%schute.config: listen.mixed (%s) and listen.%s (%s) share a port: the "
                     "mixed port already serves SOCKS5 and HTTP; drop listen.%s or move it",
                     lua_isstring(s->L, -1) ? lua_tostring(s->L, -1) : "", c->mixed.text,
                     names[i], other[i]->text, names[i]);
            lua_pop(s->L, 1);
            return -1;
        }
    return 0;
}
