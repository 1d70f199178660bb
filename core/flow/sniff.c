#include "flow/sniff.h"

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
