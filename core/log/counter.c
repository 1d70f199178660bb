#include <stdio.h>
#include <string.h>

#include "log/counter.h"

size_t
log_counters_format(char *buf, size_t len, const struct log_counter_group *groups, size_t n)
{
    size_t off = strlen(buf);
    for (size_t g = 0; g < n; g++)
        for (const struct log_counter *c = groups[g].table; c->key != NULL; c++) {
            int m = snprintf(buf + off, len - off, " %s%s=%llu", groups[g].prefix, c->key,
                             (unsigned long long)log_counter_value(c, groups[g].stats));
            if (m < 0 || (size_t)m >= len - off)
                return m < 0 ? off : len - 1; /* snprintf cut it short */
            off += (size_t)m;
        }
    return off;
}
