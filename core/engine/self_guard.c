#include "engine/engine.h"
#include "inbound/inbound.h"

/* outbound_env.is_self: an upstream connect to one of chute's own proxy
 * listeners would come back in as a new flow (a proxy whose name
 * resolves here, a CONNECT or SOCKS5 request to chute itself), and a
 * route that sends it out the same way again loops until descriptors run
 * out. The load-time check (script/selfloop.c) catches the literal
 * addresses; this catches the rest when it happens. */
int
engine_is_self(void *arg, const struct sockaddr_storage *ss)
{
    const struct engine *e = arg;
    if (inbound_listener_is(e->socks, ss) || inbound_listener_is(e->http, ss))
        return 1;
    for (size_t i = 0; i < e->nreverse; i++)
        if (inbound_listener_is(e->reverse[i], ss))
            return 1;
    return 0;
}
