#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mitm/rewrite_int.h"

/* The text of a Surge module or profile, line by line: sections, comments,
 * metadata and [MITM]; the rewrite sections' lines go to module_lines.c.
 * A load parses into rules of its own and joins them to the set only once
 * the whole text parsed, so a failed load leaves the set as it was. */

enum section {
    SEC_NONE,
    SEC_URL,
    SEC_HEADER,
    SEC_MAP,
    SEC_BODY,
    SEC_MITM,
    SEC_SCRIPT,
    SEC_UNKNOWN,
};

static const struct {
    const char *name;
    int sec;
} sections[] = {
    {"URL Rewrite", SEC_URL}, {"Header Rewrite", SEC_HEADER}, {"Map Local", SEC_MAP},
    {"Body Rewrite", SEC_BODY}, {"MITM", SEC_MITM},          {"Script", SEC_SCRIPT},
};

/* ---- helpers shared with module_lines.c ---------------------------------- */

void *
rw_push(void *arrayp, size_t *n, size_t size)
{
    char *v;
    memcpy(&v, arrayp, sizeof(v));
    /* Capacity is the next power of two from 4: grow on 0, 4, 8, 16... */
    if (*n == 0 || (*n >= 4 && (*n & (*n - 1)) == 0)) {
        size_t cap = *n == 0 ? 4 : *n * 2;
        char *nv = realloc(v, cap * size);
        if (nv == NULL)
            return NULL;
        v = nv;
        memcpy(arrayp, &v, sizeof(v));
    }
    void *slot = v + *n * size;
    memset(slot, 0, size);
    (*n)++;
    return slot;
}

char *
rw_strdup(struct mem_slice t)
{
    char *s = malloc(t.len + 1);
    if (s != NULL) {
        memcpy(s, t.ptr, t.len);
        s[t.len] = '\0';
    }
    return s;
}

int
rw_is_token(struct mem_slice t)
{
    if (t.len == 0)
        return 0;
    for (size_t i = 0; i < t.len; i++) {
        unsigned char c = (unsigned char)t.ptr[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c) != NULL) || c == '\0')
            return 0;
    }
    return 1;
}

static int
is_space(char c)
{
    return c == ' ' || c == '\t';
}

int
rw_next(struct rw_parser *p, struct mem_slice *t)
{
    const char *end = p->text.ptr + p->text.len;
    while (p->lp < end && is_space(*p->lp))
        p->lp++;
    if (p->lp == end)
        return 0;
    char *out = p->scratch + p->used;
    size_t n = 0, eq = SIZE_MAX;
    int quoted = 0, opened = 0;
    while (p->lp < end && (quoted || !is_space(*p->lp))) {
        char c = *p->lp++;
        if (quoted) {
            if (c == '"') {
                quoted = 0;
                continue;
            }
            if (c == '\\' && p->lp < end && *p->lp == '"')
                c = *p->lp++;
            out[n++] = c;
            continue;
        }
        /* A quote opens only at the token's start or right after its first
         * '=' (data="a b"); anywhere else it is a byte like any other, so
         * {"a":1} needs no quoting. */
        if (c == '"' && !opened && (n == 0 || (eq != SIZE_MAX && eq == n - 1))) {
            quoted = opened = 1;
            continue;
        }
        if (c == '=' && eq == SIZE_MAX)
            eq = n;
        out[n++] = c;
    }
    if (quoted)
        return rw_fail(p, "a quote is not closed (quote values with spaces: data=\"a b\")");
    p->used += n;
    *t = mem_slice(out, n);
    return 1;
}

struct mem_slice
rw_rest(struct rw_parser *p)
{
    const char *end = p->text.ptr + p->text.len;
    while (p->lp < end && is_space(*p->lp))
        p->lp++;
    struct mem_slice t = mem_slice(p->lp, (size_t)(end - p->lp));
    p->lp = end;
    if (t.len >= 2 && t.ptr[0] == '"' && t.ptr[t.len - 1] == '"')
        t = mem_slice(t.ptr + 1, t.len - 2);
    return t;
}

int
rw_fail(struct rw_parser *p, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    int n = (int)(p->text.len > 120 ? 120 : p->text.len);
    snprintf(p->err, p->errlen, "%s:%u: [%s] '%.*s%s': %s", p->fname, p->line, p->sec, n,
             p->text.ptr, p->text.len > 120 ? "..." : "", what);
    return -1;
}

void
rw_warn(struct rw_parser *p, const char *fmt, ...)
{
    char what[400], msg[600];
    va_list ap;
    if (p->warn == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof(msg), "%s:%u: %s", p->fname, p->line, what);
    p->warn(p->ud, msg);
}

struct rules_re *
rw_regex(struct rw_parser *p, struct mem_slice t, int multiline)
{
    char why[200];
    char *pat = malloc(t.len + 5);
    if (pat == NULL) {
        rw_fail(p, "out of memory");
        return NULL;
    }
    size_t off = multiline ? 4 : 0;
    memcpy(pat, "(?m)", off);
    memcpy(pat + off, t.ptr, t.len);
    struct rules_re *re = rules_re_new(pat, t.len + off, 0, why, sizeof(why));
    free(pat);
    if (re == NULL)
        rw_fail(p, "regex '%.*s': %s", (int)t.len, t.ptr, why);
    return re;
}

/* ---- the rules ---------------------------------------------------------- */

static void
free_strv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void
rw_rules_fini(struct rw_rules *r)
{
    for (size_t i = 0; i < r->nurl; i++) {
        rules_re_free(r->url[i].pat.re);
        free(r->url[i].repl);
    }
    for (size_t i = 0; i < r->nhdr; i++) {
        rules_re_free(r->hdr[i].pat.re);
        rules_re_free(r->hdr[i].vre);
        free(r->hdr[i].name);
        free(r->hdr[i].value);
    }
    for (size_t i = 0; i < r->nmap; i++) {
        rules_re_free(r->map[i].pat.re);
        free(r->map[i].body);
        free(r->map[i].extra);
    }
    for (size_t i = 0; i < r->nbody; i++) {
        rules_re_free(r->body[i].pat.re);
        for (size_t k = 0; k < r->body[i].npairs; k++) {
            rules_re_free(r->body[i].pairs[k].re);
            free(r->body[i].pairs[k].repl);
        }
        free(r->body[i].pairs);
    }
    for (size_t i = 0; i < r->nops; i++)
        free_strv(r->ops[i].items, r->ops[i].n);
    free(r->url);
    free(r->hdr);
    free(r->map);
    free(r->body);
    free(r->ops);
    free_strv(r->files, r->nfiles);
    memset(r, 0, sizeof(*r));
}

/* Moves the |*nb| elements of |*from| to the end of |*to| (|*na|). */
static int
join(void *to, size_t *na, void *from, size_t *nb, size_t size)
{
    char *a, *b;
    memcpy(&a, to, sizeof(a));
    memcpy(&b, from, sizeof(b));
    if (*nb == 0)
        return 0;
    char *v = realloc(a, (*na + *nb) * size);
    if (v == NULL)
        return -1;
    memcpy(v + *na * size, b, *nb * size);
    memcpy(to, &v, sizeof(v));
    *na += *nb;
    *nb = 0;
    return 0;
}

/* Applies one [MITM] hostname line to the set's list; takes its items. */
static int
apply_hostop(struct mitm_rewrites *rw, struct rw_hostop *op)
{
    size_t keep = op->mode == RW_HOSTS_SET ? 0 : rw->nhosts;
    char **v = malloc((keep + op->n + 1) * sizeof(*v));
    if (v == NULL)
        return -1;
    /* memcpy may not be given NULL, even for no bytes. */
    size_t at_items = op->mode == RW_HOSTS_INSERT ? 0 : keep;
    if (op->n > 0)
        memcpy(v + at_items, op->items, op->n * sizeof(*v));
    if (keep > 0)
        memcpy(v + (at_items == 0 ? op->n : 0), rw->hosts, keep * sizeof(*v));
    if (op->mode == RW_HOSTS_SET)
        free_strv(rw->hosts, rw->nhosts);
    else
        free(rw->hosts);
    rw->hosts = v;
    rw->nhosts = keep + op->n;
    free(op->items);
    op->items = NULL;
    op->n = 0;
    return 0;
}

/* Moves a parsed load into the set. Out of memory half-way leaves the set
 * with part of the load (every rule owned once: by the set or the load). */
static int
merge(struct mitm_rewrites *rw, struct rw_rules *t)
{
    struct rw_rules *r = &rw->r;
    /* The file names first: the rules point at them. */
    if (join(&r->files, &r->nfiles, &t->files, &t->nfiles, sizeof(*t->files)) ||
        join(&r->url, &r->nurl, &t->url, &t->nurl, sizeof(*t->url)) ||
        join(&r->hdr, &r->nhdr, &t->hdr, &t->nhdr, sizeof(*t->hdr)) ||
        join(&r->map, &r->nmap, &t->map, &t->nmap, sizeof(*t->map)) ||
        join(&r->body, &r->nbody, &t->body, &t->nbody, sizeof(*t->body)))
        return -1;
    for (size_t i = 0; i < t->nops; i++)
        if (apply_hostop(rw, &t->ops[i]) != 0)
            return -1;
    return 0;
}

/* ---- [MITM] ----------------------------------------------------------------- */

static int
parse_mitm(struct rw_parser *p)
{
    struct mem_slice line = p->text;
    const char *eq = memchr(line.ptr, '=', line.len);
    if (eq == NULL)
        return rw_fail(p, "expected 'key = value' (hostname = %%APPEND%% *.example.com, "
                          "-pinned.example.com)");
    struct mem_slice key = mem_slice(line.ptr, (size_t)(eq - line.ptr));
    while (key.len > 0 && is_space(key.ptr[key.len - 1]))
        key.len--;
    p->lp = eq + 1;
    struct mem_slice v = rw_rest(p);
    if (!mem_slice_ieq(key, "hostname")) {
        const char *why = "not a [MITM] key chute knows";
        if (mem_slice_ieq(key, "h2"))
            why = "chute picks the protocol from the origin's ALPN";
        else if (mem_slice_ieq(key, "skip-server-cert-verify"))
            why = "use mitm.skip_verify_hosts in chute.config";
        else if (mem_slice_ieq(key, "ca-p12") || mem_slice_ieq(key, "ca-passphrase"))
            why = "chute uses its own CA (chute ca init) or mitm.ca";
        else if (mem_slice_ieq(key, "tcp-connection") || mem_slice_ieq(key, "hostname-disabled"))
            why = "chute has no such setting";
        rw_warn(p, "[MITM] %.*s is ignored: %s", (int)key.len, key.ptr, why);
        return 0;
    }
    struct rw_hostop *op = rw_push(&p->r->ops, &p->r->nops, sizeof(*op));
    if (op == NULL)
        return rw_fail(p, "out of memory");
    op->mode = RW_HOSTS_SET;
    if (v.len >= 8 && strncmp(v.ptr, "%APPEND%", 8) == 0)
        op->mode = RW_HOSTS_APPEND;
    else if (v.len >= 8 && strncmp(v.ptr, "%INSERT%", 8) == 0)
        op->mode = RW_HOSTS_INSERT;
    if (op->mode != RW_HOSTS_SET)
        v = mem_slice(v.ptr + 8, v.len - 8);
    while (v.len > 0) {
        const char *comma = memchr(v.ptr, ',', v.len);
        struct mem_slice item = mem_slice(v.ptr, comma ? (size_t)(comma - v.ptr) : v.len);
        v = comma ? mem_slice(comma + 1, v.len - item.len - 1) : mem_slice(v.ptr + v.len, 0);
        while (item.len > 0 && is_space(item.ptr[0]))
            item = mem_slice(item.ptr + 1, item.len - 1);
        while (item.len > 0 && is_space(item.ptr[item.len - 1]))
            item.len--;
        if (item.len == 0)
            continue;
        char why[300];
        if (mitm_hosts_add(p->check, item.ptr, item.len, why, sizeof(why)) != 0)
            return rw_fail(p, "%s", why);
        char *s = rw_strdup(item);
        char **slot = s ? rw_push(&op->items, &op->n, sizeof(char *)) : NULL;
        if (slot == NULL) {
            free(s);
            return rw_fail(p, "out of memory");
        }
        *slot = s;
    }
    return 0;
}

/* ---- the line loop ---------------------------------------------------------- */

struct sec_state {
    int sec;
    char name[64];
    unsigned line; /* of its [header] */
    size_t lines;  /* left out, for an unknown section */
};

static void
end_section(struct rw_parser *p, struct sec_state *st)
{
    if (st->sec != SEC_UNKNOWN)
        return;
    unsigned line = p->line;
    p->line = st->line;
    rw_warn(p, "section [%s] is not supported by chute: %zu line%s left out", st->name,
            st->lines, st->lines == 1 ? "" : "s");
    p->line = line;
}

static int
start_section(struct rw_parser *p, struct sec_state *st, struct mem_slice line)
{
    if (line.ptr[line.len - 1] != ']')
        return rw_fail(p, "a section header ends with ']' ([URL Rewrite], [MITM], ...)");
    struct mem_slice name = mem_slice(line.ptr + 1, line.len - 2);
    end_section(p, st);
    st->sec = SEC_UNKNOWN;
    st->line = p->line;
    st->lines = 0;
    snprintf(st->name, sizeof(st->name), "%.*s", (int)name.len, name.ptr);
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        if (mem_slice_ieq(name, sections[i].name)) {
            st->sec = sections[i].sec;
            snprintf(st->name, sizeof(st->name), "%s", sections[i].name);
        }
    p->sec = st->name;
    return 0;
}

static int
parse_line(struct rw_parser *p, struct sec_state *st)
{
    switch (st->sec) {
    case SEC_URL:
        return rw_parse_url(p);
    case SEC_HEADER:
        return rw_parse_header(p);
    case SEC_MAP:
        return rw_parse_map(p);
    case SEC_BODY:
        return rw_parse_body(p);
    case SEC_MITM:
        return parse_mitm(p);
    case SEC_SCRIPT: {
        const char *eq = memchr(p->text.ptr, '=', p->text.len);
        size_t n = eq ? (size_t)(eq - p->text.ptr) : p->text.len;
        while (n > 0 && is_space(p->text.ptr[n - 1]))
            n--;
        rw_warn(p, "[Script] '%.*s' is JavaScript, which chute does not run: left out "
                   "(write it as a chute.on_request/on_response hook)", (int)n, p->text.ptr);
        return 0;
    }
    case SEC_UNKNOWN:
        st->lines++;
        return 0;
    default:
        p->sec = "no section";
        return rw_fail(p, "a line before any section (start with [URL Rewrite], "
                          "[Header Rewrite], [Map Local], [Body Rewrite] or [MITM])");
    }
}

static int
is_comment(struct mem_slice l)
{
    return l.ptr[0] == '#' || l.ptr[0] == ';' || (l.len >= 2 && l.ptr[0] == '/' && l.ptr[1] == '/');
}

int
mitm_rewrites_load(struct mitm_rewrites *rw, const char *text, size_t len, const char *file,
                   mitm_read_file_fn read_file, mitm_warn_fn warn, void *ud, char *err,
                   size_t errlen)
{
    struct rw_rules t = {0};
    struct rw_parser p = {.r = &t, .sec = "no section", .read_file = read_file, .warn = warn,
                          .ud = ud, .err = err, .errlen = errlen};
    struct sec_state st = {.sec = SEC_NONE};
    int rc = -1, warned_args = 0;
    char **slot = rw_push(&t.files, &t.nfiles, sizeof(char *));
    if (slot != NULL)
        *slot = rw_strdup(file ? mem_slice(file, strlen(file)) : MEM_SLICE_LIT("(inline)"));
    p.scratch = malloc(len + 1);
    p.check = mitm_hosts_new();
    if (slot == NULL || *slot == NULL || p.scratch == NULL || p.check == NULL) {
        snprintf(err, errlen, "%s: out of memory", file ? file : "(inline)");
        goto done;
    }
    p.fname = *slot;
    const char *s = text, *end = text + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        struct mem_slice l = mem_slice(s, (size_t)(le - s));
        s = nl ? nl + 1 : end;
        p.line++;
        while (l.len > 0 && (is_space(l.ptr[0]) || l.ptr[0] == '\r'))
            l = mem_slice(l.ptr + 1, l.len - 1);
        while (l.len > 0 && (is_space(l.ptr[l.len - 1]) || l.ptr[l.len - 1] == '\r'))
            l.len--;
        if (l.len == 0)
            continue;
        p.text = l;
        p.lp = l.ptr;
        p.used = 0;
        if (memchr(l.ptr, '\0', l.len) != NULL) {
            rw_fail(&p, "a NUL byte (a module is text)");
            goto done;
        }
        if (l.len >= 2 && l.ptr[0] == '#' && l.ptr[1] == '!')
            continue; /* #!name=, #!desc=, ...: metadata, nothing to run */
        if (!warned_args && memmem(l.ptr, l.len, "{{{", 3) != NULL) {
            warned_args = 1;
            rw_warn(&p, "module arguments ({{{name}}}) are not filled in by chute: the lines "
                        "keep them as written");
        }
        if (is_comment(l))
            continue;
        if (l.ptr[0] == '[') {
            if (start_section(&p, &st, l) != 0)
                goto done;
            continue;
        }
        if (parse_line(&p, &st) != 0)
            goto done;
    }
    end_section(&p, &st);
    if (merge(rw, &t) != 0) {
        snprintf(err, errlen, "%s: out of memory", p.fname);
        goto done;
    }
    rc = 0;
done:
    rw_rules_fini(&t);
    mitm_hosts_free(p.check);
    free(p.scratch);
    return rc;
}

/* ---- the set ---------------------------------------------------------------- */

struct mitm_rewrites *
mitm_rewrites_new(void)
{
    struct mitm_rewrites *rw = calloc(1, sizeof(*rw));
    if (rw == NULL)
        return NULL;
    rw->max_body = MITM_REWRITE_MAX_BODY;
    rw_hooks_init(rw);
    return rw;
}

void
mitm_rewrites_free(struct mitm_rewrites *rw)
{
    if (rw == NULL)
        return;
    rw_rules_fini(&rw->r);
    free_strv(rw->hosts, rw->nhosts);
    free(rw);
}

void
mitm_rewrites_set_max_body(struct mitm_rewrites *rw, size_t bytes)
{
    rw->max_body = bytes ? bytes : MITM_REWRITE_MAX_BODY;
}

size_t
mitm_rewrites_hostnames(const struct mitm_rewrites *rw, const char *const **out)
{
    *out = (const char *const *)rw->hosts;
    return rw->nhosts;
}

size_t
mitm_rewrites_count(const struct mitm_rewrites *rw)
{
    return rw->r.nurl + rw->r.nhdr + rw->r.nmap + rw->r.nbody;
}

void
mitm_rewrites_stats(const struct mitm_rewrites *rw, struct mitm_rewrite_stats *out)
{
    *out = rw->st;
}

const struct log_counter mitm_rewrite_counters[] = {
#define X(field, key) LOG_COUNTER(struct mitm_rewrite_stats, field, key)
    MITM_REWRITE_STATS(X)
#undef X
    LOG_COUNTER_END};
