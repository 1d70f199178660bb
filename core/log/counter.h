#ifndef CHUTE_LOG_COUNTER_H
#define CHUTE_LOG_COUNTER_H

/* Counter tables, so one consumer walks any module's counters without
 * knowing them: the stats log line today, the control API's JSON and
 * Prometheus output later.
 *
 * A module lists its counters once, as an X-macro in its public header
 * (lwIP's memp_std.h is the model, STYLE §9), one X(field, key) per counter:
 * |field| is the uint64_t member of its stats struct, |key| the counter's
 * name outside chute (a key of the stats line; mostly the field's own name).
 * Consumers show the counters in the list's order. From that one list the
 * module generates its stats struct and a table:
 *
 *   #define NETSTACK_STATS(X) X(heap_used, heap_used) X(conns_active, tcp_active)
 *   struct netstack_stats {
 *   #define X(field, key) uint64_t field;
 *       NETSTACK_STATS(X)
 *   #undef X
 *   };
 *   extern const struct log_counter netstack_counters[];
 *
 *   const struct log_counter netstack_counters[] = {   (in one of its .c)
 *   #define X(field, key) LOG_COUNTER(struct netstack_stats, field, key)
 *       NETSTACK_STATS(X)
 *   #undef X
 *       LOG_COUNTER_END};
 */

#include <stddef.h>
#include <stdint.h>

struct log_counter {
    const char *key; /* NULL ends a table */
    size_t offset;   /* of a uint64_t in the module's stats struct */
};

/* One table entry for member |field| of stats struct |type|. */
#define LOG_COUNTER(type, field, key) {#key, offsetof(type, field)},
#define LOG_COUNTER_END {NULL, 0}

/* The value of counter |c| in |stats|, a struct of the table's type. */
static inline uint64_t
log_counter_value(const struct log_counter *c, const void *stats)
{
    return *(const uint64_t *)(const void *)((const char *)stats + c->offset);
}

/* A module's counters as a consumer shows them: its table, a snapshot of its
 * stats struct, a prefix for the keys ("dns_", or ""), and the section it
 * belongs to for consumers that group them ("dcache", "lwip"; NULL none:
 * the control API's /chute/<section>). */
struct log_counter_group {
    const char *prefix;
    const struct log_counter *table;
    const void *stats;
    const char *section;
};

/* Appends " <prefix><key>=<value>" for every counter of the |n| groups, in
 * order, to the string in |buf| (|len| bytes, NUL-terminated), cutting it
 * short when full. Returns the string's new length (at most |len| - 1). */
size_t log_counters_format(char *buf, size_t len, const struct log_counter_group *groups,
                           size_t n);

#endif
