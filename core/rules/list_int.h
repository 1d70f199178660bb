#ifndef CHUTE_RULES_LIST_INT_H
#define CHUTE_RULES_LIST_INT_H

/* Private to core/rules: one list line to entries (list_line.c). */

#include "rules/list.h"

/* Parses one line of a list (shared by list.c and list_line.c).
 * |text| is trimmed and free of comments; |fmt| is not AUTO; |max| >= 1.
 * Returns the number of entries written to |out| (1, or more for a port
 * list "80/443"), or -1 with the reason in |msg| (which may be NULL). */
int rules_list_line_parse(enum rules_format fmt, struct mem_slice text, struct rules_entry *out,
                          size_t max, char *msg, size_t msglen);

/* |v| as a message may show it (messages end up in logs): at most 64 bytes
 * then "...", control bytes masked as '?'. Writes into |buf|, which holds
 * RULES_SHOWN_MAX bytes, and returns it. RULES_SHOWN(v) gives it a buffer
 * that lasts to the end of the enclosing block, for a message's argument. */
#define RULES_SHOWN_MAX 68
#define RULES_SHOWN(v) rules_list_shown((v), (char[RULES_SHOWN_MAX]){0})
const char *rules_list_shown(struct mem_slice v, char *buf);

#endif
