/* Rule-list files to entries: line ends (LF, CRLF, CR), a UTF-8 BOM,
 * comment and blank lines, the YAML subset rule providers use, format
 * detection and dispatch. What one line means is list_line.c's job. */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rules/list.h"
#include "rules/list_int.h"


#define MAX_ENTRIES 32 /* per line: mihomo port lists "80/443/..." */
#define DETECT_ITEMS 4096

#define is_space(c) ((c) == ' ' || (c) == '\t')

enum { END, ITEM, INVALID, SKIP };

struct cursor {
    const char *p, *end;
    unsigned line;
    int yaml;       /* a YAML payload list, not one entry per line */
    int in_list;    /* the payload key was seen */
    int flow_empty; /* "payload: []", or a flow list closed: no more items */
    int flow;       /* inside "payload: [ ... ]" (YAML flow style, over any lines) */
    int flow_sep;   /* in it, an item was read: a ',' or the ']' comes next */
    size_t indent;  /* of the first item, SIZE_MAX before it */
};

static struct mem_slice
trim(struct mem_slice s)
{
    while (s.len > 0 && is_space(s.ptr[0])) {
        s.ptr++;
        s.len--;
    }
    while (s.len > 0 && is_space(s.ptr[s.len - 1]))
        s.len--;
    return s;
}

static struct mem_slice
take_line(struct cursor *c)
{
    const char *s = c->p;
    struct mem_slice line;

    while (c->p < c->end && *c->p != '\n' && *c->p != '\r')
        c->p++;
    line = mem_slice(s, (size_t)(c->p - s));
    if (c->p < c->end && *c->p++ == '\r' && c->p < c->end && *c->p == '\n')
        c->p++;
    c->line++;
    return line;
}

static int
is_comment(struct mem_slice t)
{
    return t.ptr[0] == '#' || t.ptr[0] == ';' || (t.len > 1 && t.ptr[0] == '/' && t.ptr[1] == '/');
}

/* Surge allows a comment after a rule ("DOMAIN,a.com // why"). Its marker
 * needs a blank before it, so that '#' and ';' stay usable inside values,
 * and does not count inside a quoted field. */
static struct mem_slice
strip_comment(struct mem_slice t)
{
    size_t i;
    char quote = 0;
    int field_start = 1;

    for (i = 0; i < t.len; i++) {
        char ch = t.ptr[i];

        if (quote != 0) {
            quote = ch == quote ? 0 : quote;
        } else if (i > 0 && is_space(t.ptr[i - 1]) &&
                   (ch == '#' || ch == ';' ||
                    (ch == '/' && i + 1 < t.len && t.ptr[i + 1] == '/'))) {
            return trim(mem_slice(t.ptr, i));
        } else if (field_start && (ch == '"' || ch == '\'')) {
            quote = ch;
            field_start = 0;
        } else if (!is_space(ch)) {
            field_start = ch == ',';
        }
    }
    return t;
}

/* A top-level YAML key: "name:" at column 0, then a blank or the end. */
static int
yaml_key(struct mem_slice raw, struct mem_slice *name, struct mem_slice *rest)
{
    size_t i = 0;

    while (i < raw.len && (raw.ptr[i] == '_' || raw.ptr[i] == '-' ||
                           ((raw.ptr[i] | 0x20) >= 'a' && (raw.ptr[i] | 0x20) <= 'z') ||
                           (raw.ptr[i] >= '0' && raw.ptr[i] <= '9')))
        i++;
    *name = mem_slice(raw.ptr, i);
    while (i < raw.len && is_space(raw.ptr[i]))
        i++;
    if (name->len == 0 || name->ptr[0] == '-' || i == raw.len || raw.ptr[i] != ':' ||
        (i + 1 < raw.len && !is_space(raw.ptr[i + 1])))
        return 0;
    *rest = trim(mem_slice(raw.ptr + i + 1, raw.len - i - 1));
    return 1;
}

/* mihomo reads a "rules:" list as well as "payload:". */
static int
list_key(struct mem_slice name)
{
    return mem_slice_eq(name, MEM_SLICE_LIT("payload")) ||
           mem_slice_eq(name, MEM_SLICE_LIT("rules"));
}

static int
has_list_key(struct cursor c)
{
    struct mem_slice name, rest;

    while (c.p < c.end) {
        if (yaml_key(take_line(&c), &name, &rest) && list_key(name))
            return 1;
    }
    return 0;
}

/* Values in messages go through RULES_SHOWN(): messages end up in logs. */
static int __attribute__((format(printf, 3, 4)))
invalid(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    return INVALID;
}

/* The scalar of a "- " item without its quotes. Entries point into the
 * caller's buffer, so YAML escapes ('' and \), which would need a copy, are
 * refused; an empty scalar comes back empty, to be skipped as mihomo does. */
static int
yaml_scalar(struct mem_slice t, struct mem_slice *out, char *msg, size_t msglen)
{
    const char *q, *end = t.ptr + t.len;
    size_t i;

    *out = mem_slice(t.ptr, 0);
    if (t.len == 0 || t.ptr[0] == '#')
        return ITEM;
    if (t.ptr[0] == '\'' || t.ptr[0] == '"') {
        q = memchr(t.ptr + 1, t.ptr[0], t.len - 1);
        if (q == NULL)
            return invalid(msg, msglen, "unterminated quote in '%s'", RULES_SHOWN(t));
        if ((t.ptr[0] == '\'' && q + 1 < end && q[1] == '\'') ||
            (t.ptr[0] == '"' && memchr(t.ptr, '\\', (size_t)(q - t.ptr))))
            return invalid(msg, msglen, "YAML escapes are not supported in '%s'", RULES_SHOWN(t));
        *out = mem_slice(t.ptr + 1, (size_t)(q - t.ptr - 1));
        t = trim(mem_slice(q + 1, (size_t)(end - q - 1)));
        if (t.len > 0 && (t.ptr[0] != '#' || !is_space(q[1])))
            return invalid(msg, msglen, "text after a closing quote: '%s'", RULES_SHOWN(t));
        return ITEM;
    }
    if (strchr("*&!|>%@`{}[]", t.ptr[0]) ||
        ((t.ptr[0] == '-' || t.ptr[0] == '?' || t.ptr[0] == ':') &&
         (t.len == 1 || is_space(t.ptr[1]))))
        return invalid(msg, msglen, "unsupported YAML '%s' (quote the item)", RULES_SHOWN(t));
    for (i = 1; i < t.len; i++) {
        if (t.ptr[i] == '#' && is_space(t.ptr[i - 1])) {
            t = trim(mem_slice(t.ptr, i));
            break;
        }
    }
    for (i = 0; i < t.len; i++) {
        if (t.ptr[i] == ':' && (i + 1 == t.len || is_space(t.ptr[i + 1])))
            return invalid(msg, msglen, "YAML mapping in a payload list: '%s' (quote the item)",
                           RULES_SHOWN(t));
    }
    *out = t;
    return ITEM;
}

static int
yaml_line(struct cursor *c, struct mem_slice raw, struct mem_slice t, struct mem_slice *out,
          char *msg, size_t msglen)
{
    struct mem_slice name, rest;
    size_t indent = 0;

    if (yaml_key(raw, &name, &rest)) {
        if (!list_key(name))
            return invalid(msg, msglen, "unsupported YAML key '%s' (only 'payload:')",
                           RULES_SHOWN(name));
        if (c->in_list)
            return invalid(msg, msglen, "a second '%s:' list", RULES_SHOWN(name));
        c->in_list = 1;
        if (rest.len == 0 || rest.ptr[0] == '#')
            return SKIP;
        if (rest.len >= 2 && rest.ptr[0] == '[' && rest.ptr[1] == ']' &&
            (rest.len == 2 || trim(mem_slice(rest.ptr + 2, rest.len - 2)).ptr[0] == '#')) {
            c->flow_empty = 1;
            return SKIP;
        }
        if (rest.ptr[0] == '[') { /* read on from just after the '[' */
            c->flow = 1;
            c->p = rest.ptr + 1;
            c->flow_sep = 0; /* c->line stays this one: flow_next counts line ends */
            return SKIP;
        }
        return invalid(msg, msglen, "unsupported YAML after the key: '%s'", RULES_SHOWN(rest));
    }
    if (!c->in_list)
        return invalid(msg, msglen, "expected 'payload:' before '%s'", RULES_SHOWN(t));
    while (indent < raw.len && raw.ptr[indent] == ' ')
        indent++;
    if (raw.ptr[indent] == '\t')
        return invalid(msg, msglen, "tab in the YAML indentation of '%s'", RULES_SHOWN(t));
    if (t.ptr[0] != '-' || (t.len > 1 && !is_space(t.ptr[1])))
        return invalid(msg, msglen, "expected a '- ' list item, got '%s'", RULES_SHOWN(t));
    if (c->flow_empty)
        return invalid(msg, msglen, "list item after 'payload: []': '%s'", RULES_SHOWN(t));
    if (c->indent == SIZE_MAX)
        c->indent = indent;
    if (indent != c->indent)
        return invalid(msg, msglen, "list item indented unlike the first one: '%s'",
                       RULES_SHOWN(t));
    return yaml_scalar(trim(mem_slice(t.ptr + 1, t.len - 1)), out, msg, msglen);
}

/* Invalid YAML in a flow list: the rest of the list is not read (where it
 * resumes is a guess), and the parse ends after this error. */
static int
flow_abandon(struct cursor *c)
{
    c->flow = 0;
    c->flow_empty = 1;
    c->p = c->end;
    return INVALID;
}

/* The next item of "payload: [a, 'b', ...]", which may span lines and hold
 * "#" comments. As in YAML, an unquoted ',' ends an item: a classical rule
 * ("DOMAIN,a.com") or a regex with {m,n} must be quoted. SKIP after ']'. */
static int
flow_next(struct cursor *c, struct mem_slice *out, char *msg, size_t msglen)
{
    for (;;) {
        while (c->p < c->end && (is_space(*c->p) || *c->p == '\n' || *c->p == '\r'))
            if (*c->p++ == '\n')
                c->line++;
        if (c->p >= c->end) {
            invalid(msg, msglen, "'payload: [' without its closing ']'");
            return flow_abandon(c);
        }
        const char *s = c->p;
        if (*s == '#') {
            while (c->p < c->end && *c->p != '\n' && *c->p != '\r')
                c->p++;
            continue;
        }
        if (*s == ']') {
            c->p++;
            c->line--; /* take_line counts the rest of this line again */
            struct mem_slice rest = trim(take_line(c));
            c->flow = 0;
            c->flow_empty = 1;
            if (rest.len > 0 && rest.ptr[0] != '#')
                return invalid(msg, msglen, "text after the payload list's ']': '%s'",
                               RULES_SHOWN(rest));
            return SKIP;
        }
        if (*s == ',') {
            c->p++;
            if (!c->flow_sep) {
                invalid(msg, msglen, "an empty item in the payload list (',,' or '[,')");
                return flow_abandon(c);
            }
            c->flow_sep = 0;
            continue;
        }
        if (c->flow_sep) {
            invalid(msg, msglen, "expected ',' or ']' between payload items, got '%s'",
                    RULES_SHOWN(mem_slice(s, (size_t)(c->end - s))));
            return flow_abandon(c);
        }
        c->flow_sep = 1;
        if (*s == '\'' || *s == '"') {
            const char *q = s + 1;
            while (q < c->end && *q != *s && *q != '\n' && *q != '\r')
                q++;
            struct mem_slice t = mem_slice(s, (size_t)(q - s));
            if (q >= c->end || *q != *s) {
                invalid(msg, msglen, "unterminated quote in '%s'", RULES_SHOWN(t));
                return flow_abandon(c);
            }
            if ((*s == '\'' && q + 1 < c->end && q[1] == '\'') ||
                (*s == '"' && memchr(s, '\\', (size_t)(q - s)))) {
                invalid(msg, msglen, "YAML escapes are not supported in '%s'", RULES_SHOWN(t));
                return flow_abandon(c);
            }
            *out = mem_slice(s + 1, (size_t)(q - s - 1));
            c->p = q + 1;
            return ITEM;
        }
        while (c->p < c->end && *c->p != ',' && *c->p != ']' && *c->p != '\n' &&
               *c->p != '\r' && !(*c->p == '#' && is_space(c->p[-1])))
            c->p++;
        *out = trim(mem_slice(s, (size_t)(c->p - s)));
        if (strchr("*&!|>%@`{}[", *s) != NULL) {
            invalid(msg, msglen, "unsupported YAML '%s' (quote the item)", RULES_SHOWN(*out));
            return flow_abandon(c);
        }
        return ITEM;
    }
}

/* The next significant line or payload item, or INVALID with |msg|. */
static int
next(struct cursor *c, struct mem_slice *out, char *msg, size_t msglen)
{
    for (;;) {
        int r;
        if (c->flow) {
            r = flow_next(c, out, msg, msglen);
            if (r == INVALID || (r == ITEM && out->len > 0))
                return r;
            continue;
        }
        if (c->p >= c->end)
            break;
        struct mem_slice raw = take_line(c), t = trim(raw), name, rest;

        if (t.len == 0 || is_comment(t))
            continue;
        if (!c->yaml) {
            if (yaml_key(raw, &name, &rest) && list_key(name))
                return invalid(msg, msglen,
                               "YAML '%s:' in a text-only list (load it as "
                               "classical, domain or ipcidr)",
                               RULES_SHOWN(name));
            if (t.ptr[0] == '-' && (t.len == 1 || is_space(t.ptr[1])))
                return invalid(msg, msglen, "YAML list item without a 'payload:' key: '%s'",
                               RULES_SHOWN(t));
            *out = strip_comment(t);
            return ITEM;
        }
        r = yaml_line(c, raw, t, out, msg, msglen);
        if (r == INVALID || (r == ITEM && out->len > 0))
            return r;
    }
    return END;
}

static void
cursor_init(struct cursor *c, const char *buf, size_t len, int yaml_ok)
{
    memset(c, 0, sizeof(*c));
    if (buf == NULL) /* NULL + 0 is undefined */
        buf = "";
    c->p = buf;
    c->end = buf + len;
    c->indent = SIZE_MAX;
    if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
        c->p += 3;
    c->yaml = yaml_ok && has_list_key(*c);
}

enum { K_RULE, K_CIDR, K_DOMAIN, K_DOT, K_CLASH, K_OTHER, K_COUNT };

static int
classify(struct mem_slice t)
{
    struct rules_entry e[1];

    if (rules_list_line_parse(RULES_FORMAT_CLASH_IPCIDR, t, e, 1, NULL, 0) > 0)
        return K_CIDR;
    if (rules_list_line_parse(RULES_FORMAT_DOMAIN_SET, t, e, 1, NULL, 0) > 0)
        return t.ptr[0] == '.' ? K_DOT : K_DOMAIN;
    if (rules_list_line_parse(RULES_FORMAT_CLASH_DOMAIN, t, e, 1, NULL, 0) > 0)
        return K_CLASH;
    return memchr(t.ptr, ',', t.len) ? K_RULE : K_OTHER;
}

/* By majority over the first items; ties go to rules, then CIDRs. One
 * Clash-only pattern (+. or *) makes a text domain list Clash's, where
 * ".a.com" leaves out a.com itself. */
static enum rules_format
detect(const char *buf, size_t len, size_t *items, int *ambiguous)
{
    size_t n[K_COUNT] = {0}, dom;
    char msg[8];
    struct cursor c;
    struct mem_slice t;
    int r;

    cursor_init(&c, buf, len, 1);
    *items = 0;
    *ambiguous = 0;
    while (*items < DETECT_ITEMS && (r = next(&c, &t, msg, sizeof(msg))) != END) {
        n[r == ITEM ? classify(t) : K_OTHER]++;
        (*items)++;
    }
    dom = n[K_DOMAIN] + n[K_CLASH] + n[K_DOT];
    if (n[K_RULE] + n[K_CIDR] + dom == 0)
        return RULES_FORMAT_AUTO;
    if (n[K_RULE] >= n[K_CIDR] && n[K_RULE] >= dom)
        return c.yaml ? RULES_FORMAT_CLASSICAL : RULES_FORMAT_SURGE;
    if (n[K_CIDR] >= dom)
        return RULES_FORMAT_CLASH_IPCIDR;
    if (c.yaml || n[K_CLASH] > 0)
        return RULES_FORMAT_CLASH_DOMAIN;
    /* ".a.com" is a.com and below in a Surge DOMAIN-SET, only below in a
     * Clash text list, and nothing else tells them apart: the bundle says. */
    if (n[K_DOT] > 0)
        *ambiguous = 1;
    return RULES_FORMAT_DOMAIN_SET;
}

enum rules_format
rules_list_detect(const char *buf, size_t len)
{
    size_t items;
    int ambiguous;
    enum rules_format f = detect(buf, len, &items, &ambiguous);

    return ambiguous ? RULES_FORMAT_AUTO : f;
}

int
rules_list_ambiguous(const char *buf, size_t len)
{
    size_t items;
    int ambiguous;

    detect(buf, len, &items, &ambiguous);
    return ambiguous;
}

int
rules_list_parse(const char *buf, size_t len, enum rules_format fmt, int skip_invalid,
                 rules_entry_cb cb, void *arg, size_t *skipped, struct rules_list_error *err)
{
    struct rules_entry e[MAX_ENTRIES];
    struct rules_list_error local;
    struct cursor c;
    struct mem_slice t;
    char msg[sizeof(err->msg)];
    size_t nskipped = 0, items;
    int r, n, i;

    if (err == NULL)
        err = &local;
    err->line = 0;
    err->msg[0] = '\0';
    if (skipped != NULL)
        *skipped = 0;
    if (fmt == RULES_FORMAT_AUTO) {
        int ambiguous;

        fmt = detect(buf, len, &items, &ambiguous);
        if (fmt == RULES_FORMAT_AUTO && items == 0)
            return 0;
        if (ambiguous) {
            snprintf(err->msg, sizeof(err->msg),
                     "a domain list with '.name' lines reads as a Surge DOMAIN-SET ('.a.com' "
                     "is a.com too) and as a Clash domain list (only below a.com): give "
                     "format = \"domain-set\" or \"domain\"");
            return RULES_LIST_ERR_AMBIGUOUS;
        }
        if (fmt == RULES_FORMAT_AUTO) {
            snprintf(err->msg, sizeof(err->msg),
                     "cannot tell the list format: no line reads as a rule, a CIDR or a domain");
            return RULES_LIST_ERR_FORMAT;
        }
    }
    if (fmt < RULES_FORMAT_SURGE || fmt > RULES_FORMAT_CLASH_IPCIDR) {
        snprintf(err->msg, sizeof(err->msg), "unknown list format %d", (int)fmt);
        return RULES_LIST_ERR_FORMAT;
    }
    cursor_init(&c, buf, len, fmt != RULES_FORMAT_SURGE && fmt != RULES_FORMAT_DOMAIN_SET);
    while ((r = next(&c, &t, msg, sizeof(msg))) != END) {
        if (r == ITEM) {
            n = rules_list_line_parse(fmt, t, e, MAX_ENTRIES, msg, sizeof(msg));
            for (i = 0; i < n; i++) {
                e[i].line = c.line;
                if (cb != NULL && (r = cb(arg, &e[i])) != 0)
                    return r;
            }
            if (n > 0)
                continue;
        }
        /* With skip_invalid, |err| keeps the first bad line for the log. */
        if (!skip_invalid || nskipped == 0) {
            err->line = c.line;
            memcpy(err->msg, msg, sizeof(err->msg));
        }
        if (!skip_invalid)
            return RULES_LIST_ERR_LINE;
        nskipped++;
        if (skipped != NULL)
            *skipped = nskipped;
    }
    return 0;
}

int
rules_format_parse(const char *name)
{
    static const char *const names[] = {
        [RULES_FORMAT_AUTO] = "auto",
        [RULES_FORMAT_SURGE] = "surge",
        [RULES_FORMAT_DOMAIN_SET] = "domain-set",
        [RULES_FORMAT_CLASSICAL] = "classical",
        [RULES_FORMAT_CLASH_DOMAIN] = "domain",
        [RULES_FORMAT_CLASH_IPCIDR] = "ipcidr",
    };
    size_t i;

    for (i = 0; name != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(name, names[i]) == 0)
            return (int)i;
    }
    return -1;
}
