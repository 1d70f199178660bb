#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "log/log_int.h"

/* log_format = "json": one object per line,
 *   {"time":"...Z","level":"info","event":"flow","msg":"<the text line>",<fields>}
 * The fields come from the format string, never from the formatted text: a
 * "key=" written in the format followed by conversions is a field whose
 * value is exactly what those conversions printed, so a client-chosen name
 * ("a.example policy=REJECT") cannot add or change a field. The event is
 * the format's first literal word, and "<event> %llu" gives the id field
 * ("flow": 12). Values printed by one integer conversion are numbers, as
 * are durations written "%.3fs" (seconds); "time=" is renamed "duration"
 * and "close=" "reason". Callers may add fields (log_write_fields) or
 * vouch that their whole message is key=value pairs of chute's own
 * (log_write_kv: the stats lines). */

#define MAX_PIECES 64
#define MAX_KEYS 160

struct piece {
    uint16_t fo, fl; /* in the format */
    uint16_t oo, ol; /* in the message */
    char conv;       /* 0: literal text, copied as is */
};

/* Formats as vsnprintf would, one conversion at a time, noting where in
 * |msg| each piece of |fmt| went. Returns the message's length. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static size_t
walk(char *msg, size_t cap, const char *fmt, va_list ap, struct piece *pc, size_t *npc)
{
    size_t o = 0, np = 0;
    const char *p = fmt;
    while (*p != '\0') {
        const char *start = p;
        size_t oo = o;
        char conv = 0;
        if (p[0] == '%' && p[1] == '%') {
            p += 2;
            if (o < cap - 1)
                msg[o++] = '%';
        } else if (*p != '%') {
            while (*p != '\0' && *p != '%') {
                if (o < cap - 1)
                    msg[o++] = *p;
                p++;
            }
        } else {
            char spec[40];
            size_t sl = 0;
            spec[sl++] = *p++;
            while (*p != '\0' && strchr("-+ #0", *p) != NULL && sl < 8)
                spec[sl++] = *p++;
            if (*p == '*') {
                sl += (size_t)snprintf(spec + sl, 12, "%d", va_arg(ap, int));
                p++;
            }
            while (*p >= '0' && *p <= '9' && sl < 20)
                spec[sl++] = *p++;
            if (*p == '.') {
                spec[sl++] = *p++;
                if (*p == '*') {
                    sl += (size_t)snprintf(spec + sl, 12, "%d", va_arg(ap, int));
                    p++;
                }
                while (*p >= '0' && *p <= '9' && sl < 32)
                    spec[sl++] = *p++;
            }
            char len = 0; /* 'H' hh, 'h', 'l', 'q' ll, 'z', 'j', 't', 'L' */
            if (*p == 'h' || *p == 'l') {
                len = *p;
                spec[sl++] = *p++;
                if (*p == len) {
                    len = len == 'h' ? 'H' : 'q';
                    spec[sl++] = *p++;
                }
            } else if (*p == 'z' || *p == 'j' || *p == 't' || *p == 'L') {
                len = *p;
                spec[sl++] = *p++;
            }
            conv = *p;
            if (conv == '\0')
                break;
            spec[sl++] = *p++;
            spec[sl] = '\0';
            char *out = msg + o;
            size_t room = cap - o;
            int n = 0;
            switch (conv) {
            case 'd':
            case 'i':
                n = len == 'q'   ? snprintf(out, room, spec, va_arg(ap, long long))
                    : len == 'l' ? snprintf(out, room, spec, va_arg(ap, long))
                    : len == 'z' ? snprintf(out, room, spec, va_arg(ap, ssize_t))
                    : len == 'j' ? snprintf(out, room, spec, va_arg(ap, intmax_t))
                    : len == 't' ? snprintf(out, room, spec, va_arg(ap, ptrdiff_t))
                                 : snprintf(out, room, spec, va_arg(ap, int));
                break;
            case 'u':
            case 'x':
            case 'X':
            case 'o':
                n = len == 'q'   ? snprintf(out, room, spec, va_arg(ap, unsigned long long))
                    : len == 'l' ? snprintf(out, room, spec, va_arg(ap, unsigned long))
                    : len == 'z' ? snprintf(out, room, spec, va_arg(ap, size_t))
                    : len == 'j' ? snprintf(out, room, spec, va_arg(ap, uintmax_t))
                    : len == 't' ? snprintf(out, room, spec, va_arg(ap, ptrdiff_t))
                                 : snprintf(out, room, spec, va_arg(ap, unsigned));
                break;
            case 'c':
                n = snprintf(out, room, spec, va_arg(ap, int));
                break;
            case 's':
                n = snprintf(out, room, spec, va_arg(ap, const char *));
                break;
            case 'p':
                n = snprintf(out, room, spec, va_arg(ap, void *));
                break;
            case 'f':
            case 'F':
            case 'e':
            case 'E':
            case 'g':
            case 'G':
            case 'a':
            case 'A':
                n = len == 'L' ? snprintf(out, room, spec, va_arg(ap, long double))
                               : snprintf(out, room, spec, va_arg(ap, double));
                break;
            default: /* not a conversion the compiler lets through: stop here */
                *npc = np;
                return o;
            }
            if (n > 0)
                o = o + (size_t)n < cap - 1 ? o + (size_t)n : cap - 1;
        }
        if (np < MAX_PIECES)
            pc[np++] = (struct piece){(uint16_t)(start - fmt), (uint16_t)(p - start), (uint16_t)oo,
                                      (uint16_t)(o - oo), conv};
    }
    msg[o] = '\0';
    *npc = np;
    return o;
}
#pragma GCC diagnostic pop

/* The output buffer: appends stop at its end (a line is cut, never overrun). */
struct out {
    char *b;
    size_t len, cap;
    int full;
};

static void
put(struct out *w, const char *s, size_t n)
{
    if (w->full || w->len + n > w->cap) {
        w->full = 1;
        return;
    }
    memcpy(w->b + w->len, s, n);
    w->len += n;
}

static void
puts_(struct out *w, const char *s)
{
    put(w, s, strlen(s));
}

/* The length of a valid UTF-8 sequence at |s| (at most |n| bytes), or 0. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t k;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        k = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        k = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        k = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0; /* overlong, out of range, or a surrogate */
    return k;
}

/* A JSON string: quotes and backslashes escaped, control bytes as \u00XX,
 * invalid UTF-8 as U+FFFD. Cut whole at the buffer's end. */
static void
put_str(struct out *w, const char *s, size_t n)
{
    put(w, "\"", 1);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n && !w->full;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(w, e, 2);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            char e[8];
            snprintf(e, sizeof(e), "\\u%04x", c);
            put(w, e, 6);
            i++;
        } else {
            size_t k = utf8_len(u + i, n - i);
            if (k == 0) {
                put(w, "\\ufffd", 6);
                i++;
            } else {
                put(w, s + i, k);
                i += k;
            }
        }
    }
    put(w, "\"", 1);
}

/* Keys already written: the first of a name wins. */
struct keys {
    const char *k[MAX_KEYS];
    size_t l[MAX_KEYS], n;
};

static int
key_taken(struct keys *ks, const char *k, size_t l)
{
    for (size_t i = 0; i < ks->n; i++)
        if (ks->l[i] == l && memcmp(ks->k[i], k, l) == 0)
            return 1;
    if (ks->n == MAX_KEYS)
        return 1;
    ks->k[ks->n] = k;
    ks->l[ks->n++] = l;
    return 0;
}

/* ,"key":VALUE with |num| written bare, whole or not at all. */
static void
put_field(struct out *w, struct keys *ks, const char *k, size_t kl, const char *v, size_t vl,
          int num)
{
    static const struct {
        const char *from, *to;
    } renames[] = {{"time", "duration"}, {"close", "reason"}};
    for (size_t i = 0; i < sizeof(renames) / sizeof(renames[0]); i++)
        if (kl == strlen(renames[i].from) && memcmp(k, renames[i].from, kl) == 0) {
            k = renames[i].to;
            kl = strlen(k);
        }
    if (key_taken(ks, k, kl))
        return;
    size_t at = w->len;
    put(w, ",", 1);
    put_str(w, k, kl);
    put(w, ":", 1);
    if (num)
        put(w, v, vl);
    else
        put_str(w, v, vl);
    if (w->full) { /* roll back: the object stays whole */
        w->len = at;
        w->full = 0;
    }
}

/* A JSON number: -?digits(.digits)? */
static int
is_number(const char *s, size_t n)
{
    size_t i = s[0] == '-' ? 1 : 0, d = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, d++;
    if (d == 0 || d > 17 || (d > 1 && s[s[0] == '-'] == '0'))
        return 0;
    if (i < n && s[i] == '.') {
        size_t f = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == f)
            return 0;
    }
    return i == n;
}

static int
key_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

/* One "key=" at fmt offset |eq| (the '=') of literal piece |i|: its value
 * runs to the first space (or, after key=", the closing quote) written by
 * the format itself, or the end of the message. */
static void
fmt_field(struct out *w, struct keys *ks, const char *fmt, const char *msg, size_t msglen,
          const struct piece *pc, size_t np, size_t i, size_t eq, size_t ks_off)
{
    size_t fo = eq + 1; /* fmt offset where the value starts */
    char stop = ' ';
    if (fo < (size_t)pc[i].fo + pc[i].fl && fmt[fo] == '"') {
        stop = '"';
        fo++;
    }
    size_t vstart = pc[i].oo + (fo - pc[i].fo), vend = msglen;
    size_t convs = 0, nconv = 0, after = 0; /* literal bytes after the conversion */
    char conv = 0;
    for (size_t j = i; j < np; j++) {
        if (pc[j].conv != 0) {
            nconv++;
            conv = pc[j].conv;
            convs = j;
            continue;
        }
        size_t from = j == i ? fo : pc[j].fo, end = (size_t)pc[j].fo + pc[j].fl;
        const char *hit = memchr(fmt + from, stop, end - from);
        if (pc[j].fl == 2 && fmt[pc[j].fo] == '%') /* "%%": one byte out */
            hit = NULL, end = from;
        if (hit != NULL) {
            vend = pc[j].oo + (size_t)(hit - fmt - pc[j].fo);
            after += (size_t)(hit - fmt) - from;
            break;
        }
        after += end - from;
    }
    if (vend < vstart || vend > msglen)
        return;
    const char *v = msg + vstart;
    size_t vl = vend - vstart;
    int num = 0;
    if (nconv == 1 && pc[convs].oo == vstart && strchr("diu", conv) != NULL && after == 0)
        num = is_number(v, vl);
    else if (nconv == 1 && pc[convs].oo == vstart && strchr("fg", conv) != NULL &&
             after == 1 && vl > 1 && v[vl - 1] == 's' && is_number(v, vl - 1))
        num = 1, vl--; /* "%.3fs": seconds */
    put_field(w, ks, fmt + ks_off, eq - ks_off, v, vl, num);
}

/* The event (the format's first literal word), the id after it, the
 * key= fields. */
static void
fmt_fields(struct out *w, struct keys *ks, const char *fmt, const char *msg, size_t msglen,
           const struct piece *pc, size_t np, int want_event, const char **ev, size_t *evl)
{
    *ev = NULL;
    *evl = 0;
    for (size_t i = 0; i < np; i++) {
        if (pc[i].conv != 0)
            continue;
        size_t a = pc[i].fo, end = a + pc[i].fl;
        for (size_t x = a; x < end; x++) {
            if (*ev == NULL && key_char(fmt[x], 1)) {
                size_t y = x;
                while (y < end && key_char(fmt[y], 0))
                    y++;
                *ev = fmt + x;
                *evl = y - x;
                /* "flow %llu": the id, named after the event */
                if (y + 1 == end && fmt[y] == ' ' && i + 1 < np &&
                    strchr("diu", pc[i + 1].conv ? pc[i + 1].conv : 'X') != NULL &&
                    is_number(msg + pc[i + 1].oo, pc[i + 1].ol) && want_event)
                    put_field(w, ks, *ev, *evl, msg + pc[i + 1].oo, pc[i + 1].ol, 1);
            }
            if (fmt[x] != '=' || x == a)
                continue;
            size_t k = x;
            while (k > a && key_char(fmt[k - 1], 0))
                k--;
            if (k == x || !key_char(fmt[k], 1) || (k > a && fmt[k - 1] != ' ' && fmt[k - 1] != '('))
                continue;
            if (k == a && i > 0 && pc[i - 1].conv != 0)
                continue; /* the key began inside a conversion's output */
            fmt_field(w, ks, fmt, msg, msglen, pc, np, i, x, k);
        }
    }
}

/* log_write_kv: every "key=value" token of the message, which holds only
 * chute's own names and numbers. */
static void
kv_fields(struct out *w, struct keys *ks, const char *msg, size_t len)
{
    for (size_t i = 0; i < len;) {
        while (i < len && msg[i] == ' ')
            i++;
        size_t t = i;
        while (i < len && msg[i] != ' ')
            i++;
        const char *eq = memchr(msg + t, '=', i - t);
        if (eq == NULL || eq == msg + t || !key_char(msg[t], 1))
            continue;
        const char *v = eq + 1;
        size_t vl = (size_t)(msg + i - v);
        put_field(w, ks, msg + t, (size_t)(eq - msg - t), v, vl, is_number(v, vl));
    }
}

size_t
log_json_format(char *buf, size_t cap, const char *level, const struct timespec *ts,
                const struct log_field *extra, size_t nextra, int kv, char *msg, size_t msgcap,
                size_t *msglen, const char *fmt, va_list ap)
{
    struct piece pc[MAX_PIECES];
    size_t np = 0;
    *msglen = walk(msg, msgcap, fmt, ap, pc, &np);
    struct out w = {buf, 0, cap - 2, 0}; /* room for the closing "}\n" */
    struct keys ks = {.n = 0};
    static const char *const reserved[] = {"time", "level", "event", "msg"};
    for (size_t i = 0; i < 4; i++)
        key_taken(&ks, reserved[i], strlen(reserved[i]));
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    char t[40];
    int tl = snprintf(t, sizeof(t), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                      ts->tv_nsec / 1000000);
    puts_(&w, "{\"time\":");
    put_str(&w, t, (size_t)tl);
    puts_(&w, ",\"level\":");
    put_str(&w, level, strlen(level));
    /* The event first needs the walk over the format; it is written, then
     * the message, then the fields (rolled back one by one when the line
     * is full: the message is always whole). */
    struct out probe = {NULL, 0, 0, 1}; /* a sink: nothing is written */
    const char *ev;
    size_t evl;
    struct keys pk = ks;
    fmt_fields(&probe, &pk, fmt, msg, *msglen, pc, np, 0, &ev, &evl);
    puts_(&w, ",\"event\":");
    put_str(&w, ev != NULL ? ev : "log", ev != NULL ? evl : 3);
    puts_(&w, ",\"msg\":");
    put_str(&w, msg, *msglen);
    for (size_t i = 0; i < nextra; i++) {
        const struct log_field *f = &extra[i];
        char num[32];
        if (f->type == LOG_FIELD_STR) {
            if (f->str != NULL)
                put_field(&w, &ks, f->key, strlen(f->key), f->str, strlen(f->str), 0);
            continue;
        }
        int n = f->type == LOG_FIELD_U64 ? snprintf(num, sizeof(num), "%llu", (unsigned long long)f->u)
                                         : snprintf(num, sizeof(num), "%.3f", f->d);
        put_field(&w, &ks, f->key, strlen(f->key), num, (size_t)n, is_number(num, (size_t)n));
    }
    fmt_fields(&w, &ks, fmt, msg, *msglen, pc, np, 1, &ev, &evl);
    if (kv)
        kv_fields(&w, &ks, msg, *msglen);
    /* The head and message fit (log.c sizes the line for them); a field
     * that did not is rolled back, so the object closes after a whole
     * value. Were even the message too long, the line would be cut but
     * still end. */
    memcpy(buf + w.len, "}\n", 2);
    return w.len + 2;
}
