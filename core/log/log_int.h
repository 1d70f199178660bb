#ifndef CHUTE_LOG_LOG_INT_H
#define CHUTE_LOG_LOG_INT_H

/* Private to log/: the JSON line (json.c) that log.c writes. */

#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include "log/log.h"

/* Formats |fmt| with |ap| into |msg| (|msgcap| bytes, as vsnprintf; its
 * length in |*msglen|) and the JSON object of that line, with its newline,
 * into |buf|. |cap| must hold the message escaped six times over plus the
 * fields' room; fields that do not fit are left out, so the object always
 * parses. |kv|: take every key=value token of the message too
 * (log_write_kv). Returns the line's length. */
size_t log_json_format(char *buf, size_t cap, const char *level, const struct timespec *ts,
                       const struct log_field *extra, size_t nextra, int kv, char *msg,
                       size_t msgcap, size_t *msglen, const char *fmt, va_list ap);

#endif
