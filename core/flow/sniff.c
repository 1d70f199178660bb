#include "flow/flow.h"
#include "flow/sniff.h"
#include "log/log.h"

int
flow_sniff_step(const unsigned char *p, size_t len, int eof, char *name, size_t cap)
{
    int tls = flow_sniff_tls(p, len, name, cap, NULL);
    int http = tls > 0 ? FLOW_SNIFF_NONE : flow_sniff_http(p, len, name, cap);

    if (tls > 0 || http > 0) {
        if (flow_sniff_is_ip(name))
            name[0] = '\0';
        return 1;
    }
    name[0] = '\0';
    if ((tls == FLOW_SNIFF_NEED_MORE || http == FLOW_SNIFF_NEED_MORE) && !eof &&
        len < FLOW_SNIFF_MAX)
        return 0;
    return 1;
}

void
flow_sniff_log(const struct flow *f, const char *name, size_t seen, int timed_out)
{
    if (name != NULL)
        LOG_DEBUG("flow %llu: sniffed host '%s' from the first %zu bytes",
                  (unsigned long long)f->id, name, seen);
    else if (timed_out)
        LOG_DEBUG("flow %llu: sniffed no host: the client sent %zu bytes in %.1f s",
                  (unsigned long long)f->id, seen, FLOW_SNIFF_WAIT);
    else
        LOG_DEBUG("flow %llu: sniffed no host in %zu bytes (neither a TLS SNI nor an HTTP Host)",
                  (unsigned long long)f->id, seen);
}
