#include <stdio.h>
#include <string.h>

#include "log/log.h"
#include "mitm/rewrite_int.h"

/* The hooks over a set of parsed rules (rewrite.h says in which order they
 * apply). Every string handed to the request or response is in the
 * request's arena; header edits go through http_fwd_field_*, which refuse
 * what would change the framing (Content-Length, Transfer-Encoding) or
 * drop Host. A rule whose edit fails is logged once with its file:line and
 * the message goes on without that edit. */

#define MAX_PAIRS 32 /* $0..$31 */

/* A transparent 1x1 GIF: what reject-img and data-type=tiny-gif answer. */
const unsigned char rw_tiny_gif[43] = {
    'G',  'I',  'F',  '8',  '9',  'a',  0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
};

static void
failed(struct mitm_rewrites *rw, struct rw_where *at, const char *what)
{
    rw->st.failures++;
    if (at->warned)
        return;
    at->warned = 1;
    LOG_WARN("rewrite: %s:%u: %s (logged once for this line)", at->file, at->line, what);
}

/* rules_re_match over the URL, counting cuts. */
static int
match(struct mitm_rewrites *rw, const struct rw_pattern *pat, struct mem_slice s, size_t *ov)
{
    int rc = rw_pattern_match(pat, s, ov, ov ? MAX_PAIRS : 0);
    if (rc == RULES_RE_LIMIT)
        rw->st.limit_cuts++;
    return rc <= 0 ? 0 : rc > MAX_PAIRS ? MAX_PAIRS : rc;
}

/* |tmpl| expanded for the match |ov| over |subj|, in the arena. */
static struct mem_slice
expand(struct mem_arena *a, const char *tmpl, size_t tlen, struct mem_slice subj,
       const size_t *ov, int pairs)
{
    size_t need = rules_re_expand(tmpl, tlen, subj.ptr, ov, pairs, NULL, 0);
    char *out = mem_arena_alloc(a, need);
    if (out == NULL)
        return (struct mem_slice){NULL, 0};
    rules_re_expand(tmpl, tlen, subj.ptr, ov, pairs, out, need);
    return mem_slice(out, need);
}

/* One pass of replacing every match of |re| in |s|: the output length, and
 * the bytes when |out| is not NULL. Sets *hits. After an empty match the
 * search moves on by one character (not inside a UTF-8 sequence). Gives
 * up with SIZE_MAX once the output and the matches so far pass |limit|, so
 * a pattern that matches at every byte costs no more than the caller may
 * still spend. */
static size_t
subst_pass(struct mitm_rewrites *rw, const struct rules_re *re, const char *tmpl, size_t tlen,
           struct mem_slice s, char *out, size_t *hits, size_t limit)
{
    size_t ov[2 * MAX_PAIRS], at = 0, pos = 0, n = 0;
    *hits = 0;
    while (pos <= s.len) {
        if (n > limit || *hits > limit - n)
            return SIZE_MAX;
        int rc = rules_re_match_at(re, s.ptr, s.len, pos, ov, MAX_PAIRS);
        if (rc == RULES_RE_LIMIT && out != NULL)
            rw->st.limit_cuts++;
        if (rc <= 0)
            break;
        if (rc > MAX_PAIRS)
            rc = MAX_PAIRS;
        if (out != NULL)
            memcpy(out + n, s.ptr + at, ov[0] - at);
        n += ov[0] - at;
        n += rules_re_expand(tmpl, tlen, s.ptr, ov, rc, out ? out + n : NULL, out ? SIZE_MAX : 0);
        (*hits)++;
        at = ov[1];
        if (ov[1] > ov[0]) {
            pos = ov[1];
            continue;
        }
        if (ov[1] >= s.len)
            break;
        pos = ov[1] + 1;
        while (pos < s.len && ((unsigned char)s.ptr[pos] & 0xc0) == 0x80)
            pos++;
    }
    if (out != NULL)
        memcpy(out + n, s.ptr + at, s.len - at);
    return n + (s.len - at);
}

/* Every match of |re| in |*s| replaced: 1 and |*s| the new text in the
 * arena, 0 when nothing matched, -1 when out of memory or over |*budget|.
 * The budget is what the message may still spend: each byte of the new
 * text and each match costs one, so it bounds both the arena and the time
 * the loop spends matching. */
static int
subst(struct mitm_rewrites *rw, struct mem_arena *a, const struct rules_re *re, const char *tmpl,
      size_t tlen, struct mem_slice *s, size_t *budget)
{
    size_t hits;
    size_t need = subst_pass(rw, re, tmpl, tlen, *s, NULL, &hits, *budget);
    if (hits == 0)
        return 0; /* (a pass gives up only after a match) */
    if (need == SIZE_MAX || need + hits > *budget)
        return -1;
    *budget -= need + hits;
    char *out = mem_arena_alloc(a, need);
    if (out == NULL)
        return -1;
    subst_pass(rw, re, tmpl, tlen, *s, out, &hits, SIZE_MAX);
    *s = mem_slice(out, need);
    return 1;
}

/* ---- requests ---------------------------------------------------------------- */

static int
wants_request(void *ud, const struct mitm_request *m)
{
    struct mitm_rewrites *rw = ud;
    const struct rw_rules *r = &rw->r;
    for (size_t i = 0; i < r->nurl; i++)
        if (match(rw, &r->url[i].pat, m->url, NULL))
            return 1;
    for (size_t i = 0; i < r->nmap; i++)
        if (match(rw, &r->map[i].pat, m->url, NULL))
            return 1;
    for (size_t i = 0; i < r->nhdr; i++)
        if (!r->hdr[i].response && match(rw, &r->hdr[i].pat, m->url, NULL))
            return 1;
    for (size_t i = 0; i < r->nbody; i++)
        if (!r->body[i].response && match(rw, &r->body[i].pat, m->url, NULL))
            return 1;
    return 0;
}

static size_t
body_wanted(struct mitm_rewrites *rw, const struct mitm_request *m, int response)
{
    for (size_t i = 0; i < rw->r.nbody; i++)
        if (rw->r.body[i].response == response && match(rw, &rw->r.body[i].pat, m->url, NULL))
            return rw->max_body;
    return 0;
}

static size_t
request_body(void *ud, const struct mitm_request *m)
{
    return body_wanted(ud, m, 0);
}

/* "scheme://authority[path]" split; 0, or -1 when it is not an http(s) or
 * ws(s) URL. |path| is "/" when the URL has none. */
static int
split_url(struct mem_slice u, const char **scheme, struct mem_slice *host, uint16_t *port,
          struct mem_slice *path)
{
    static const struct {
        const char *prefix;
        const char *scheme;
        uint16_t port;
    } schemes[] = {
        {"http://", "http", 80}, {"https://", "https", 443}, {"ws://", "http", 80},
        {"wss://", "https", 443},
    };
    size_t i, k = sizeof(schemes) / sizeof(schemes[0]);
    for (i = 0; i < k; i++) {
        size_t n = strlen(schemes[i].prefix);
        if (u.len >= n && strncasecmp(u.ptr, schemes[i].prefix, n) == 0) {
            u = mem_slice(u.ptr + n, u.len - n);
            break;
        }
    }
    if (i == k)
        return -1;
    *scheme = schemes[i].scheme;
    *port = schemes[i].port;
    size_t alen = 0;
    while (alen < u.len && u.ptr[alen] != '/' && u.ptr[alen] != '?' && u.ptr[alen] != '#')
        alen++;
    struct mem_slice auth = mem_slice(u.ptr, alen);
    *path = mem_slice(u.ptr + alen, u.len - alen);
    const char *frag = memchr(path->ptr, '#', path->len); /* never sent */
    if (frag != NULL)
        path->len = (size_t)(frag - path->ptr);
    if (path->len == 0)
        *path = MEM_SLICE_LIT("/");
    for (size_t j = 0; j < path->len; j++)
        if ((unsigned char)path->ptr[j] <= 0x20 || path->ptr[j] == 0x7f)
            return -1; /* the request line is "METHOD path HTTP/1.1" */
    const char *colon = NULL;
    if (auth.len > 0 && auth.ptr[0] == '[') {
        const char *close = memchr(auth.ptr, ']', auth.len);
        if (close == NULL)
            return -1;
        *host = mem_slice(auth.ptr + 1, (size_t)(close - auth.ptr - 1));
        if (close + 1 < auth.ptr + auth.len) {
            if (close[1] != ':')
                return -1;
            colon = close + 1;
        }
    } else {
        colon = memchr(auth.ptr, ':', auth.len);
        *host = mem_slice(auth.ptr, colon ? (size_t)(colon - auth.ptr) : auth.len);
    }
    for (size_t j = 0; j < host->len; j++) {
        char c = host->ptr[j];
        if (c == '@' || c == ' ' || c == '\\' || (unsigned char)c < 0x21)
            return -1;
    }
    if (host->len == 0)
        return -1;
    if (colon != NULL) {
        const char *pe = auth.ptr + auth.len;
        unsigned long v = 0;
        if (colon + 1 == pe || pe - colon > 6)
            return -1;
        for (const char *q = colon + 1; q < pe; q++) {
            if (*q < '0' || *q > '9')
                return -1;
            v = v * 10 + (unsigned long)(*q - '0');
        }
        if (v == 0 || v > 65535)
            return -1;
        *port = (uint16_t)v;
    }
    return 0;
}

static int
ieq(struct mem_slice a, struct mem_slice b)
{
    return a.len == b.len && strncasecmp(a.ptr, b.ptr, a.len) == 0;
}

/* Header mode: the request goes on to the URL |u|. 0, or -1 (left as it
 * was) when |u| is no URL. */
static int
rewrite_url(struct mitm_request *m, struct mem_slice u)
{
    const char *scheme;
    struct mem_slice host, path;
    uint16_t port;
    if (split_url(u, &scheme, &host, &port, &path) != 0)
        return -1;
    struct http_fwd_req *req = m->req;
    if (!ieq(host, req->host) || port != req->port) {
        int dflt = port == (strcmp(scheme, "https") == 0 ? 443 : 80);
        int v6 = memchr(host.ptr, ':', host.len) != NULL;
        char *hv = mem_arena_alloc(m->arena, host.len + 9);
        struct mem_slice h = mem_arena_slice(m->arena, host);
        if (hv == NULL || h.ptr == NULL)
            return -1;
        int n = snprintf(hv, host.len + 9, "%s%.*s%s", v6 ? "[" : "", (int)host.len, host.ptr,
                         v6 ? "]" : "");
        if (!dflt)
            n += snprintf(hv + n, host.len + 9 - (size_t)n, ":%u", port);
        if (http_fwd_field_set(&req->fields, MEM_SLICE_LIT("Host"), mem_slice(hv, (size_t)n)) != 0)
            return -1;
        req->host = h;
        req->port = port;
    }
    if (path.ptr[0] == '?') { /* "http://h?q": origin-form starts with the slash */
        char *p = mem_arena_alloc(m->arena, path.len + 1);
        if (p == NULL)
            return -1;
        p[0] = '/';
        memcpy(p + 1, path.ptr, path.len);
        req->path = mem_slice(p, path.len + 1);
    } else {
        req->path = mem_arena_slice(m->arena, path);
    }
    m->scheme = scheme;
    return req->path.ptr != NULL ? 0 : -1;
}

static int
url_reply(struct mitm_rewrites *rw, struct rw_url *r, struct mitm_request *m,
          struct mitm_reply *out, const size_t *ov, int pairs)
{
    memset(out, 0, sizeof(*out));
    out->body = mem_slice("", 0);
    out->status = 200;
    switch (r->kind) {
    case RW_URL_302:
    case RW_URL_307: {
        struct mem_slice loc = expand(m->arena, r->repl, r->repl_len, m->url, ov, pairs);
        char *x = loc.ptr ? mem_arena_alloc(m->arena, loc.len + 13) : NULL;
        if (x == NULL) {
            failed(rw, &r->at, "out of memory");
            return 0;
        }
        snprintf(x, loc.len + 13, "Location: %.*s\r\n", (int)loc.len, loc.ptr);
        out->status = r->kind == RW_URL_302 ? 302 : 307;
        out->extra = x;
        rw->st.url_redirect++;
        return 1;
    }
    case RW_URL_REJECT:
        out->status = 403;
        break;
    case RW_URL_REJECT_IMG:
        out->extra = "Content-Type: image/gif\r\n";
        out->body = mem_slice(rw_tiny_gif, sizeof(rw_tiny_gif));
        break;
    case RW_URL_REJECT_DICT:
        out->extra = "Content-Type: application/json\r\n";
        out->body = MEM_SLICE_LIT("{}");
        break;
    case RW_URL_REJECT_ARRAY:
        out->extra = "Content-Type: application/json\r\n";
        out->body = MEM_SLICE_LIT("[]");
        break;
    case RW_URL_REJECT_DROP:
        out->reject = 1;
        break;
    default: /* RW_URL_REJECT_200 */
        break;
    }
    rw->st.url_reject++;
    return 1;
}

/* Header Rewrite on |f| for the lines of one direction. */
static void
edit_headers(struct mitm_rewrites *rw, struct mitm_request *m, struct http_fwd_fields *f,
             int response)
{
    for (size_t i = 0; i < rw->r.nhdr; i++) {
        struct rw_header *h = &rw->r.hdr[i];
        if (h->response != response || !match(rw, &h->pat, m->url, NULL))
            continue;
        struct mem_slice name = mem_slice(h->name, strlen(h->name));
        struct mem_slice value = mem_slice(h->value, h->value_len);
        int rc = 0, applied = 1;
        switch (h->op) {
        case RW_HDR_ADD:
            rc = http_fwd_field_add(f, name, value);
            break;
        case RW_HDR_DEL:
            rc = http_fwd_field_del(f, name);
            applied = rc > 0;
            break;
        case RW_HDR_REPLACE:
            applied = http_fwd_field_get(f, h->name) != NULL;
            if (applied)
                rc = http_fwd_field_set(f, name, value);
            break;
        default: { /* RW_HDR_REPLACE_REGEX: every field of that name */
            size_t n = 0, k = 0;
            for (size_t j = 0; j < f->n; j++)
                n += ieq(f->v[j].name, name);
            struct mem_slice *vals = n ? mem_arena_alloc(m->arena, n * sizeof(*vals)) : NULL;
            applied = 0;
            if (n > 0 && vals == NULL) {
                rc = -1;
                break;
            }
            for (size_t j = 0; j < f->n; j++) {
                if (!ieq(f->v[j].name, name))
                    continue;
                vals[k] = f->v[j].value;
                size_t budget = HTTP_MAX_HEAD;
                int s = subst(rw, m->arena, h->vre, h->value, h->value_len, &vals[k], &budget);
                if (s < 0)
                    rc = -1;
                applied |= s > 0;
                k++;
            }
            if (!applied || rc != 0)
                break;
            if (n == 1) {
                rc = http_fwd_field_set(f, name, vals[0]);
                break;
            }
            http_fwd_field_del(f, name);
            for (k = 0; k < n && rc == 0; k++)
                rc = http_fwd_field_add(f, name, vals[k]);
        }
        }
        if (rc < 0) {
            char what[160];
            snprintf(what, sizeof(what), "cannot edit header '%s' (chute keeps Host, "
                     "Content-Length and Transfer-Encoding; values have no control bytes)",
                     h->name);
            failed(rw, &h->at, what);
        } else if (applied) {
            if (response)
                rw->st.header_response++;
            else
                rw->st.header_request++;
        }
    }
}

/* Body Rewrite on |*body| for the lines of one direction; 1 when changed. */
static int
edit_body(struct mitm_rewrites *rw, struct mitm_request *m, struct mem_slice *body, int response)
{
    int changed = 0;
    /* Each pair writes a new body into the arena: all of them together
     * may spend 8 x max_body (bytes written plus matches), so a module
     * with many pairs cannot make one message hold megabytes or hold the
     * loop for long. */
    size_t budget = rw->max_body * 8;
    for (size_t i = 0; i < rw->r.nbody; i++) {
        struct rw_body *b = &rw->r.body[i];
        if (b->response != response || !match(rw, &b->pat, m->url, NULL))
            continue;
        for (size_t k = 0; k < b->npairs; k++) {
            int s = subst(rw, m->arena, b->pairs[k].re, b->pairs[k].repl, b->pairs[k].repl_len,
                          body, &budget);
            if (s < 0) {
                failed(rw, &b->at, "the rewrites of this body would spend over 8 x max_body "
                                   "(bytes written plus matches), or memory ran out: the "
                                   "rest left out");
                return changed;
            }
            changed |= s > 0;
        }
    }
    return changed;
}

static int
on_request(void *ud, struct mitm_request *m, struct mitm_reply *out)
{
    struct mitm_rewrites *rw = ud;
    struct rw_rules *r = &rw->r;
    size_t ov[2 * MAX_PAIRS];
    for (size_t i = 0; i < r->nurl; i++) {
        int pairs = match(rw, &r->url[i].pat, m->url, ov);
        if (pairs == 0)
            continue;
        if (r->url[i].kind != RW_URL_HEADER) {
            if (url_reply(rw, &r->url[i], m, out, ov, pairs))
                return 1;
            break;
        }
        struct mem_slice u =
            expand(m->arena, r->url[i].repl, r->url[i].repl_len, m->url, ov, pairs);
        if (u.ptr == NULL || rewrite_url(m, u) != 0)
            failed(rw, &r->url[i].at, "the rewritten URL is not http(s)://host[:port]/path "
                                      "(or out of memory): request left as it was");
        else
            rw->st.url_header++;
        break; /* the first matching line decides */
    }
    for (size_t i = 0; i < r->nmap; i++) {
        struct rw_map *mp = &r->map[i];
        if (!match(rw, &mp->pat, m->url, NULL))
            continue;
        memset(out, 0, sizeof(*out));
        out->status = mp->status;
        out->extra = mp->extra[0] ? mp->extra : NULL;
        out->body = mem_slice(mp->body, mp->body_len);
        rw->st.map_local++;
        return 1;
    }
    edit_headers(rw, m, &m->req->fields, 0);
    if (m->body_set) {
        struct mem_slice b = mem_slice(m->body ? m->body : "", m->body_len);
        if (edit_body(rw, m, &b, 0)) {
            m->body = b.ptr;
            m->body_len = b.len;
            rw->st.body_request++;
        }
    }
    return 0;
}

/* ---- responses --------------------------------------------------------------- */

static int
wants_response(void *ud, const struct mitm_request *m)
{
    struct mitm_rewrites *rw = ud;
    for (size_t i = 0; i < rw->r.nhdr; i++)
        if (rw->r.hdr[i].response && match(rw, &rw->r.hdr[i].pat, m->url, NULL))
            return 1;
    return body_wanted(rw, m, 1) > 0;
}

static size_t
response_body(void *ud, const struct mitm_request *m, const struct http_fwd_resp *resp)
{
    (void)resp;
    return body_wanted(ud, m, 1);
}

static void
on_response(void *ud, struct mitm_request *m, struct http_fwd_resp *resp, const char **body,
            size_t *body_len)
{
    struct mitm_rewrites *rw = ud;
    edit_headers(rw, m, &resp->fields, 1);
    if (body == NULL || body_len == NULL)
        return;
    struct mem_slice b = mem_slice(*body ? *body : "", *body_len);
    if (edit_body(rw, m, &b, 1)) {
        *body = b.ptr;
        *body_len = b.len;
        rw->st.body_response++;
    }
}

void
rw_hooks_init(struct mitm_rewrites *rw)
{
    rw->hooks = (struct mitm_hooks){
        .wants_request = wants_request,
        .request_body = request_body,
        .on_request = on_request,
        .wants_response = wants_response,
        .response_body = response_body,
        .on_response = on_response,
        .ud = rw,
    };
}

const struct mitm_hooks *
mitm_rewrites_hooks(struct mitm_rewrites *rw)
{
    return &rw->hooks;
}
