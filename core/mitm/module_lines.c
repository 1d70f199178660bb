#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mitm/rewrite_int.h"

/* One line of [URL Rewrite], [Header Rewrite], [Map Local] or [Body
 * Rewrite] into a rule (rewrite_int.h), checked as far as can be at load:
 * regexes compile, header names are tokens, values carry no control
 * bytes, Map Local's data is read and decoded now. */

#define URL_SYNTAX "syntax: REGEX REPLACEMENT [header|302|307|reject|reject-200|reject-img|" \
                   "reject-dict|reject-array|reject-drop]"
#define HDR_SYNTAX "syntax: [http-request|http-response] REGEX header-add NAME VALUE | " \
                   "header-del NAME | header-replace NAME VALUE | header-replace-regex NAME " \
                   "REGEX REPLACEMENT"
#define MAP_SYNTAX "syntax: REGEX data=\"...\" data-type=file|text|json|tiny-gif|base64 " \
                   "status-code=200 header=\"Name:value|Name2:value2\""
#define BODY_SYNTAX "syntax: http-request|http-response REGEX RE1 REPLACEMENT1 [RE2 " \
                    "REPLACEMENT2 ...]"

static int
is_tok(struct mem_slice t, const char *lit)
{
    return mem_slice_ieq(t, lit);
}

/* No control bytes but HT: a value that cannot smuggle a header line. */
static int
clean_value(struct mem_slice v)
{
    for (size_t i = 0; i < v.len; i++) {
        unsigned char c = (unsigned char)v.ptr[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

int
rw_parse_url(struct rw_parser *p)
{
    static const struct {
        const char *name;
        int kind;
    } kinds[] = {
        {"header", RW_URL_HEADER},
        {"302", RW_URL_302},
        {"307", RW_URL_307},
        {"reject", RW_URL_REJECT},
        {"reject-200", RW_URL_REJECT_200},
        {"reject-img", RW_URL_REJECT_IMG},
        {"reject-tinygif", RW_URL_REJECT_IMG},
        {"reject-dict", RW_URL_REJECT_DICT},
        {"reject-array", RW_URL_REJECT_ARRAY},
        {"reject-drop", RW_URL_REJECT_DROP},
    };
    struct mem_slice re, repl, type = MEM_SLICE_LIT("header"), more;
    int rc;
    if ((rc = rw_next(p, &re)) <= 0 || (rc = rw_next(p, &repl)) <= 0)
        return rc < 0 ? -1 : rw_fail(p, "a replacement is missing (" URL_SYNTAX ")");
    if ((rc = rw_next(p, &type)) < 0 || (rc > 0 && (rc = rw_next(p, &more)) != 0))
        return rc < 0 ? -1 : rw_fail(p, "too many fields (" URL_SYNTAX ")");
    int kind = -1;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (is_tok(type, kinds[i].name))
            kind = kinds[i].kind;
    if (kind < 0)
        return rw_fail(p, "unknown type '%.*s' (" URL_SYNTAX ")", (int)type.len, type.ptr);
    if (!clean_value(repl))
        return rw_fail(p, "the replacement has control bytes");
    struct rw_url *u = rw_push(&p->r->url, &p->r->nurl, sizeof(*u));
    if (u == NULL)
        return rw_fail(p, "out of memory");
    u->kind = kind;
    u->at = (struct rw_where){p->fname, p->line, 0};
    u->repl = rw_strdup(repl);
    u->repl_len = repl.len;
    if (u->repl == NULL)
        return rw_fail(p, "out of memory");
    return rw_pattern_init(p, &u->pat, re);
}

int
rw_parse_header(struct rw_parser *p)
{
    static const char *const ops[] = {"header-add", "header-del", "header-replace",
                                      "header-replace-regex"};
    struct mem_slice re, op, name, vre = {0}, value = {0}, more;
    int response = 0, rc;
    if ((rc = rw_next(p, &re)) <= 0)
        return -1;
    if (is_tok(re, "http-request") || is_tok(re, "http-response")) {
        response = is_tok(re, "http-response");
        if ((rc = rw_next(p, &re)) <= 0)
            return rc < 0 ? -1 : rw_fail(p, "the URL regex is missing (" HDR_SYNTAX ")");
    }
    if ((rc = rw_next(p, &op)) <= 0)
        return rc < 0 ? -1 : rw_fail(p, "the action is missing (" HDR_SYNTAX ")");
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (is_tok(op, ops[i]))
            k = i;
    if (k < 0)
        return rw_fail(p, "unknown action '%.*s' (" HDR_SYNTAX ")", (int)op.len, op.ptr);
    if ((rc = rw_next(p, &name)) <= 0)
        return rc < 0 ? -1 : rw_fail(p, "the header name is missing (" HDR_SYNTAX ")");
    if (!rw_is_token(name))
        return rw_fail(p, "'%.*s' is not a header name", (int)name.len, name.ptr);
    if (k == RW_HDR_DEL) {
        if ((rc = rw_next(p, &more)) != 0)
            return rc < 0 ? -1 : rw_fail(p, "header-del takes only a name (" HDR_SYNTAX ")");
    } else {
        if (k == RW_HDR_REPLACE_REGEX && (rc = rw_next(p, &vre)) <= 0)
            return rc < 0 ? -1 : rw_fail(p, "the value regex is missing (" HDR_SYNTAX ")");
        value = rw_rest(p);
        if (value.len == 0 && k != RW_HDR_REPLACE_REGEX)
            return rw_fail(p, "the value is missing (" HDR_SYNTAX ")");
        if (!clean_value(value))
            return rw_fail(p, "the value has control bytes");
    }
    struct rw_header *h = rw_push(&p->r->hdr, &p->r->nhdr, sizeof(*h));
    if (h == NULL)
        return rw_fail(p, "out of memory");
    h->response = response;
    h->op = k;
    h->at = (struct rw_where){p->fname, p->line, 0};
    h->name = rw_strdup(name);
    h->value = rw_strdup(value.ptr ? value : MEM_SLICE_LIT(""));
    h->value_len = value.len;
    if (h->name == NULL || h->value == NULL)
        return rw_fail(p, "out of memory");
    if (k == RW_HDR_REPLACE_REGEX && (h->vre = rw_regex(p, vre, 0)) == NULL)
        return -1;
    return rw_pattern_init(p, &h->pat, re);
}

/* ---- [Map Local] ------------------------------------------------------------ */

enum { DT_FILE, DT_TEXT, DT_JSON, DT_GIF, DT_BASE64 };

static int
b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

/* Standard or URL-safe base64, padding optional. -1 on a bad byte, -2
 * when out of memory. */
static int
b64_decode(struct mem_slice in, char **out, size_t *outlen)
{
    while (in.len > 0 && in.ptr[in.len - 1] == '=')
        in.len--;
    if (in.len % 4 == 1)
        return -1;
    char *o = malloc(in.len * 3 / 4 + 1);
    if (o == NULL)
        return -2;
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < in.len; i++) {
        int v = b64_value((unsigned char)in.ptr[i]);
        if (v < 0) {
            free(o);
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    *out = o;
    *outlen = n;
    return 0;
}

static const char *
type_by_extension(const char *path)
{
    static const char *const types[][2] = {
        {"json", "application/json"}, {"html", "text/html"}, {"htm", "text/html"},
        {"txt", "text/plain"},         {"js", "application/javascript"},
        {"css", "text/css"},           {"xml", "application/xml"},
        {"gif", "image/gif"},          {"png", "image/png"},
        {"jpg", "image/jpeg"},         {"jpeg", "image/jpeg"},
        {"webp", "image/webp"},        {"svg", "image/svg+xml"},
    };
    const char *dot = strrchr(path, '.');
    if (dot != NULL && strchr(dot, '/') == NULL)
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
            if (strcasecmp(dot + 1, types[i][0]) == 0)
                return types[i][1];
    return "application/octet-stream";
}

/* header="a:b|c:d" as header lines, with |ctype| first unless the list
 * has its own Content-Type. */
static int
build_extra(struct rw_parser *p, struct rw_map *m, struct mem_slice hdrs, const char *ctype)
{
    size_t cap = hdrs.len * 2 + strlen(ctype) + 32, n = 0;
    int has_ctype = 0;
    char *x = malloc(cap);
    if (x == NULL)
        return rw_fail(p, "out of memory");
    m->extra = x;
    while (hdrs.len > 0) {
        const char *bar = memchr(hdrs.ptr, '|', hdrs.len);
        struct mem_slice kv = mem_slice(hdrs.ptr, bar ? (size_t)(bar - hdrs.ptr) : hdrs.len);
        hdrs = bar ? mem_slice(bar + 1, hdrs.len - kv.len - 1) : mem_slice(hdrs.ptr, 0);
        const char *colon = memchr(kv.ptr, ':', kv.len);
        struct mem_slice k = mem_slice(kv.ptr, colon ? (size_t)(colon - kv.ptr) : kv.len);
        struct mem_slice v = colon ? mem_slice(colon + 1, kv.len - k.len - 1) : mem_slice("", 0);
        while (k.len > 0 && k.ptr[k.len - 1] == ' ')
            k.len--;
        while (k.len > 0 && k.ptr[0] == ' ')
            k = mem_slice(k.ptr + 1, k.len - 1);
        while (v.len > 0 && v.ptr[0] == ' ')
            v = mem_slice(v.ptr + 1, v.len - 1);
        while (v.len > 0 && v.ptr[v.len - 1] == ' ')
            v.len--;
        if (colon == NULL || !rw_is_token(k) || !clean_value(v))
            return rw_fail(p, "header '%.*s' is not Name:value (" MAP_SYNTAX ")", (int)kv.len,
                           kv.ptr);
        if (mem_slice_ieq(k, "content-length") || mem_slice_ieq(k, "transfer-encoding"))
            return rw_fail(p, "header '%.*s': chute sets the body's length itself", (int)k.len,
                           k.ptr);
        has_ctype |= mem_slice_ieq(k, "content-type");
        n += (size_t)snprintf(x + n, cap - n, "%.*s: %.*s\r\n", (int)k.len, k.ptr, (int)v.len,
                              v.ptr);
    }
    if (!has_ctype && ctype[0] != '\0') {
        size_t need = strlen(ctype) + 17;
        memmove(x + need - 1, x, n + 1);
        memcpy(x, "Content-Type: ", 14);
        memcpy(x + 14, ctype, strlen(ctype));
        memcpy(x + need - 3, "\r\n", 2);
        n += need - 1;
    }
    x[n] = '\0';
    return 0;
}

static int
map_body(struct rw_parser *p, struct rw_map *m, int dt, struct mem_slice data, int have_data,
         const char **ctype)
{
    switch (dt) {
    case DT_FILE: {
        if (!have_data)
            return rw_fail(p, "data-type=file needs data=\"path\" (" MAP_SYNTAX ")");
        char *path = rw_strdup(data);
        if (path == NULL)
            return rw_fail(p, "out of memory");
        int e = p->read_file ? p->read_file(p->ud, path, &m->body, &m->body_len) : ENOTSUP;
        *ctype = type_by_extension(path);
        free(path);
        if (e != 0)
            return rw_fail(p, "data=\"%.*s\": %s (a path inside the bundle)", (int)data.len,
                           data.ptr, strerror(e));
        return 0;
    }
    case DT_GIF:
        *ctype = "image/gif";
        data = mem_slice(rw_tiny_gif, sizeof(rw_tiny_gif));
        break;
    case DT_BASE64:
        *ctype = "application/octet-stream";
        switch (b64_decode(data, &m->body, &m->body_len)) {
        case 0:
            return 0;
        case -1:
            return rw_fail(p, "data is not base64");
        default:
            return rw_fail(p, "out of memory");
        }
    case DT_JSON:
        *ctype = "application/json";
        break;
    default:
        *ctype = "text/plain; charset=utf-8";
        break;
    }
    m->body = malloc(data.len + 1);
    if (m->body == NULL)
        return rw_fail(p, "out of memory");
    memcpy(m->body, data.ptr, data.len);
    m->body_len = data.len;
    return 0;
}

int
rw_parse_map(struct rw_parser *p)
{
    static const char *const dtypes[] = {"file", "text", "json", "tiny-gif", "base64"};
    struct mem_slice re, t, data = {"", 0}, hdrs = {"", 0};
    int rc, dt = -1, have_data = 0;
    long status = 200;
    if (rw_next(p, &re) <= 0)
        return -1;
    while ((rc = rw_next(p, &t)) > 0) {
        const char *eq = memchr(t.ptr, '=', t.len);
        if (eq == NULL)
            return rw_fail(p, "'%.*s' is not key=value (" MAP_SYNTAX ")", (int)t.len, t.ptr);
        struct mem_slice k = mem_slice(t.ptr, (size_t)(eq - t.ptr));
        struct mem_slice v = mem_slice(eq + 1, t.len - k.len - 1);
        if (mem_slice_ieq(k, "data")) {
            data = v;
            have_data = 1;
        } else if (mem_slice_ieq(k, "data-type")) {
            for (int i = 0; i < 5; i++)
                if (mem_slice_ieq(v, dtypes[i]))
                    dt = i;
            if (dt < 0)
                return rw_fail(p, "unknown data-type '%.*s' (" MAP_SYNTAX ")", (int)v.len,
                               v.ptr);
        } else if (mem_slice_ieq(k, "status-code")) {
            char buf[8];
            char *endp;
            snprintf(buf, sizeof(buf), "%.*s", (int)(v.len < 7 ? v.len : 7), v.ptr);
            status = strtol(buf, &endp, 10);
            if (v.len == 0 || v.len > 3 || *endp != '\0' || status < 100 || status > 599)
                return rw_fail(p, "status-code '%.*s' is not 100..599", (int)v.len, v.ptr);
        } else if (mem_slice_ieq(k, "header")) {
            hdrs = v;
        } else {
            rw_warn(p, "[Map Local] option '%.*s' is not supported: ignored", (int)k.len, k.ptr);
        }
    }
    if (rc < 0)
        return -1;
    if (dt < 0) {
        if (!have_data)
            return rw_fail(p, "needs data= or data-type= (" MAP_SYNTAX ")");
        dt = DT_FILE; /* Surge's first form: the data is a file */
    }
    struct rw_map *m = rw_push(&p->r->map, &p->r->nmap, sizeof(*m));
    if (m == NULL)
        return rw_fail(p, "out of memory");
    m->status = (int)status;
    m->at = (struct rw_where){p->fname, p->line, 0};
    const char *ctype = "";
    if (map_body(p, m, dt, data, have_data, &ctype) != 0 || build_extra(p, m, hdrs, ctype) != 0)
        return -1;
    return rw_pattern_init(p, &m->pat, re);
}

/* ---- [Body Rewrite] --------------------------------------------------------- */

int
rw_parse_body(struct rw_parser *p)
{
    struct mem_slice dir, re, a, b;
    int rc;
    if (rw_next(p, &dir) <= 0)
        return -1;
    if (is_tok(dir, "http-request-jq") || is_tok(dir, "http-response-jq")) {
        rw_warn(p, "[Body Rewrite] %.*s (a jq expression) is not supported by chute: left out",
                (int)dir.len, dir.ptr);
        return 0;
    }
    if (!is_tok(dir, "http-request") && !is_tok(dir, "http-response"))
        return rw_fail(p, "'%.*s' is neither http-request nor http-response (" BODY_SYNTAX ")",
                       (int)dir.len, dir.ptr);
    if ((rc = rw_next(p, &re)) <= 0)
        return rc < 0 ? -1 : rw_fail(p, "the URL regex is missing (" BODY_SYNTAX ")");
    struct rw_body *body = rw_push(&p->r->body, &p->r->nbody, sizeof(*body));
    if (body == NULL)
        return rw_fail(p, "out of memory");
    body->response = is_tok(dir, "http-response");
    body->at = (struct rw_where){p->fname, p->line, 0};
    if (rw_pattern_init(p, &body->pat, re) != 0)
        return -1;
    while ((rc = rw_next(p, &a)) > 0) {
        if ((rc = rw_next(p, &b)) <= 0)
            return rc < 0 ? -1
                          : rw_fail(p, "regex '%.*s' has no replacement (" BODY_SYNTAX ")",
                                    (int)a.len, a.ptr);
        struct rw_pair *pr = rw_push(&body->pairs, &body->npairs, sizeof(*pr));
        if (pr == NULL)
            return rw_fail(p, "out of memory");
        pr->repl = rw_strdup(b);
        pr->repl_len = b.len;
        if (pr->repl == NULL)
            return rw_fail(p, "out of memory");
        /* Surge: ^ and $ match at every line of the body. */
        if ((pr->re = rw_regex(p, a, 1)) == NULL)
            return -1;
    }
    if (rc < 0)
        return -1;
    if (body->npairs == 0)
        return rw_fail(p, "no regex and replacement after the URL regex (" BODY_SYNTAX ")");
    return 0;
}
