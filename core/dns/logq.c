#include <stdio.h>
#include <string.h>

#include "dns/server_int.h"
#include "log/log.h"

/* The DNS server's answers at debug level, one line each: the question,
 * how it was answered, the rcode and the answer records. Parsed again from
 * the bytes sent, so the line shows what the asker got (a truncated answer
 * too); never at info, where it would cost a parse per query. */

static const char *
rcode_name(unsigned rc)
{
    static const char *const names[] = {"NOERROR", "FORMERR", "SERVFAIL",
                                        "NXDOMAIN", "NOTIMP", "REFUSED"};
    return rc < sizeof(names) / sizeof(names[0]) ? names[rc] : "RCODE?";
}

void
dns_server_log_answer(const uint8_t *msg, size_t len, const char *how)
{
    if (log_threshold < LOG_LEVEL_DEBUG)
        return;
    struct dns_msg m; /* 19 KB of stack, at debug level only */
    char tb[16], line[512];
    if (dns_msg_parse(&m, msg, len) != 0) {
        LOG_DEBUG("dns: answered (%s) with %zu bytes that do not parse", how, len);
        return;
    }
    size_t off = 0;
    for (size_t i = 0; i < m.nan && off + 64 < sizeof(line); i++) {
        const struct dns_rr *rr = &m.rr[i];
        int n = snprintf(line + off, sizeof(line) - off, " %s ",
                         dns_type_name(rr->type, tb, sizeof(tb)));
        if (n < 0)
            break;
        off += (size_t)n;
        n = dns_rr_text(msg, len, rr, line + off, sizeof(line) - off);
        if (n < 0) {
            line[off] = '\0';
            break;
        }
        off += (size_t)n;
    }
    line[off] = '\0';
    LOG_DEBUG("dns: %s %s: %s %s%s%s", m.qname[0] ? m.qname : ".",
              dns_type_name(m.qtype, tb, sizeof(tb)), how, rcode_name(DNS_RCODE(m.flags)),
              m.flags & DNS_FLAG_TC ? " (truncated)" : "", off ? line : " (no answer records)");
}
