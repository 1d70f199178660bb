/* The HTTP/1 forwarding rules (h1_forward.h lists them). Heads are copied
 * into the request's arena once, so a request outlives the read buffer it
 * was parsed from (a hook may take its time); every string made later
 * goes there too. */

#include <stdio.h>
#include <string.h>

#include "http/h1_forward.h"
#include "http/http_int.h"

static int
slice_ieq(struct mem_slice a, struct mem_slice b)
{
    return a.len == b.len && strncasecmp(a.ptr, b.ptr, a.len) == 0;
}

/* A view of the caller's head moved to the same bytes in the arena copy;
 * views elsewhere (the static "/" of http_target_split) stay. */
static struct mem_slice
rebase(struct mem_slice s, const char *head, size_t len, const char *copy)
{
    uintptr_t p = (uintptr_t)s.ptr, h = (uintptr_t)head;

    if (p < h || p > h + len)
        return s;
    return mem_slice(copy + (s.ptr - head), s.len);
}

static struct http_header *
rebase_headers(struct mem_arena *a, const struct http_header *h, size_t n, size_t spare,
               const char *head, size_t len, const char *copy)
{
    struct http_header *v = mem_arena_alloc(a, (n + spare) * sizeof(*v));

    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        v[i].name = rebase(h[i].name, head, len, copy);
        v[i].value = rebase(h[i].value, head, len, copy);
    }
    return v;
}

static int
hop_by_hop(struct mem_slice name)
{
    return mem_slice_ieq(name, "connection") || mem_slice_ieq(name, "proxy-connection") ||
           mem_slice_ieq(name, "keep-alive") || mem_slice_ieq(name, "proxy-authorization") ||
           mem_slice_ieq(name, "te") || mem_slice_ieq(name, "upgrade");
}

static int
framing_field(struct mem_slice name)
{
    return mem_slice_ieq(name, "content-length") || mem_slice_ieq(name, "transfer-encoding");
}

static int
keep_upstream(const struct http_header *in, size_t n, struct mem_slice name)
{
    if (hop_by_hop(name))
        return 0;
    if (framing_field(name) || mem_slice_ieq(name, "host"))
        return 1;
    return !http_connection_lists(in, n, name);
}

/* "host[:port]", with brackets for an IPv6 literal, no port when it is
 * the default one. The value is built in the arena. */
static int
authority(struct http_fwd_req *req, uint16_t default_port, struct mem_slice *out)
{
    int v6 = memchr(req->host.ptr, ':', req->host.len) != NULL;
    size_t cap = req->host.len + 16;
    char *v = mem_arena_alloc(req->fields._arena, cap);
    int n;

    if (v == NULL)
        return -1;
    n = req->port != default_port
            ? snprintf(v, cap, v6 ? "[%.*s]:%u" : "%.*s:%u", (int)req->host.len, req->host.ptr,
                       req->port)
            : snprintf(v, cap, v6 ? "[%.*s]" : "%.*s", (int)req->host.len, req->host.ptr);
    *out = mem_slice(v, (size_t)n);
    return 0;
}

static int
add_host(struct http_fwd_req *req, uint16_t default_port)
{
    struct mem_slice v;
    if (authority(req, default_port, &v) != 0)
        return -1;
    req->fields.v[req->fields.n].name = MEM_SLICE_LIT("Host");
    req->fields.v[req->fields.n].value = v;
    req->fields.n++;
    return 0;
}

/* Origin-form (RFC 9112 §3.2.1), or "*" for OPTIONS (§3.2.4). */
static int
origin_target(struct http_fwd_req *req)
{
    if (req->target.ptr[0] == '/' ||
        (mem_slice_eq(req->target, MEM_SLICE_LIT("*")) &&
         mem_slice_eq(req->method, MEM_SLICE_LIT("OPTIONS")))) {
        req->path = req->target;
        return 0;
    }
    return -1;
}

/* The authority of an origin-form request: exactly one valid Host field
 * (RFC 9112 §3.2 answers 400 otherwise), or for HTTP/1.0 the default. */
static int
origin_authority(struct http_fwd_req *req, const struct http_fwd_opts *o)
{
    const struct http_header *host = NULL;
    struct mem_slice path;

    for (size_t i = 0; i < req->num_in; i++) {
        if (!mem_slice_ieq(req->in[i].name, "host"))
            continue;
        if (host != NULL)
            return -1;
        host = &req->in[i];
    }
    if (host == NULL) {
        if (req->minor_version != 0 || o->default_host.len == 0)
            return -1;
        req->host = o->default_host;
        req->port = o->default_port;
        return 0;
    }
    if (http_target_split(host->value, 1, &req->host, &req->port, &path) != 0)
        return -1;
    if (req->port == 0)
        req->port = o->default_port;
    return 0;
}

static int
target(struct http_fwd_req *req, const struct http_fwd_opts *o)
{
    if (o->form == HTTP_FWD_ORIGIN)
        return origin_target(req) == 0 && origin_authority(req, o) == 0 ? 0 : -1;
    req->connect = mem_slice_ieq(req->method, "CONNECT");
    if (http_target_split(req->target, req->connect, &req->host, &req->port, &req->path) != 0 ||
        req->port == 0)
        return -1;
    return 0;
}

static int
build_fields(struct http_fwd_req *req, const struct http_fwd_opts *o)
{
    struct http_fwd_fields *f = &req->fields;

    /* Room for Host and for a few fields a hook adds. */
    f->_cap = req->num_in + 5;
    f->v = mem_arena_alloc(f->_arena, f->_cap * sizeof(*f->v));
    if (f->v == NULL)
        return -1;
    for (size_t i = 0; i < req->num_in; i++)
        if (keep_upstream(req->in, req->num_in, req->in[i].name))
            f->v[f->n++] = req->in[i];
    const struct http_header *up = http_header_find(req->in, req->num_in, "upgrade");
    if (o->upgrade && up != NULL && up->value.len > 0 &&
        http_connection_has(req->in, req->num_in, "upgrade")) {
        req->upgrade = 1;
        f->v[f->n++] = *up;
        f->v[f->n].name = MEM_SLICE_LIT("Connection");
        f->v[f->n++].value = MEM_SLICE_LIT("Upgrade");
    }
    /* An absolute-form target decides where the request goes (and route()
     * decided on its host): the client's Host is replaced by the target's
     * authority (RFC 9112 §3.2.2), or "GET http://allowed/ + Host: denied"
     * would reach a host the rules refused on any virtual-hosting server. */
    if (o->form == HTTP_FWD_PROXY) {
        struct mem_slice v = {0};
        for (size_t i = 0; i < f->n; i++)
            if (mem_slice_ieq(f->v[i].name, "host")) {
                if (v.ptr == NULL && authority(req, 80, &v) != 0)
                    return -1;
                f->v[i].value = v;
            }
    }
    if (http_header_find(req->in, req->num_in, "host") == NULL)
        return add_host(req, o->form == HTTP_FWD_PROXY ? 80 : o->default_port);
    return 0;
}

int
http_fwd_request_init(struct http_fwd_req *req, struct mem_arena *a, const struct http_fwd_opts *o,
                      const char *head, size_t head_len, const struct http_request *parsed)
{
    char *copy = mem_arena_memdup(a, head, head_len);
    struct http_header *in;

    memset(req, 0, sizeof(*req));
    req->fields._arena = a;
    if (copy == NULL)
        return -1;
    in = rebase_headers(a, parsed->headers, parsed->num_headers, 0, head, head_len, copy);
    if (in == NULL)
        return -1;
    req->in = in;
    req->num_in = parsed->num_headers;
    req->method = rebase(parsed->method, head, head_len, copy);
    req->target = rebase(parsed->target, head, head_len, copy);
    req->minor_version = parsed->minor_version;
    req->close = http_connection_has(in, req->num_in, "close") ||
                 (req->minor_version == 0 && !http_connection_has(in, req->num_in, "keep-alive"));
    req->body.kind = HTTP_BODY_NONE;
    req->body.done = 1;
    if (target(req, o) != 0 || (!req->connect && http_body_init_request(&req->body, parsed) != 0)) {
        req->refused = 400;
        req->connect = 0;
        req->host = req->path = mem_slice(NULL, 0);
        req->port = 0;
        memset(&req->body, 0, sizeof(req->body));
        req->body.done = 1;
        return 0;
    }
    req->path = rebase(req->path, head, head_len, copy);
    req->host = rebase(req->host, head, head_len, copy);
    if (req->connect)
        return 0;
    return build_fields(req, o);
}

/* The fields as "name: value" lines and the empty line, after |first|. */
static int
write_head(struct mem_arena *a, const char *first, size_t first_len,
           const struct http_fwd_fields *f, struct mem_slice *out)
{
    size_t len = first_len + 2, off;
    char *p;

    for (size_t i = 0; i < f->n; i++)
        len += f->v[i].name.len + f->v[i].value.len + 4;
    if ((p = mem_arena_alloc(a, len)) == NULL)
        return -1;
    memcpy(p, first, first_len);
    off = first_len;
    for (size_t i = 0; i < f->n; i++) {
        memcpy(p + off, f->v[i].name.ptr, f->v[i].name.len);
        off += f->v[i].name.len;
        memcpy(p + off, ": ", 2);
        memcpy(p + off + 2, f->v[i].value.ptr, f->v[i].value.len);
        off += f->v[i].value.len + 2;
        memcpy(p + off, "\r\n", 2);
        off += 2;
    }
    memcpy(p + off, "\r\n", 2);
    *out = mem_slice(p, off + 2);
    return 0;
}

int
http_fwd_request_head(const struct http_fwd_req *req, struct mem_slice *out)
{
    size_t len = req->method.len + req->path.len + 12;
    char *line;

    if (req->refused || req->connect || req->fields.v == NULL)
        return -1;
    if ((line = mem_arena_alloc(req->fields._arena, len)) == NULL)
        return -1;
    memcpy(line, req->method.ptr, req->method.len);
    line[req->method.len] = ' ';
    memcpy(line + req->method.len + 1, req->path.ptr, req->path.len);
    memcpy(line + req->method.len + 1 + req->path.len, " HTTP/1.1\r\n", 11);
    return write_head(req->fields._arena, line, len, &req->fields, out);
}

int
http_fwd_response_init(struct http_fwd_resp *resp, struct mem_arena *a,
                       const struct http_fwd_req *req, const char *head, size_t head_len,
                       const struct http_response *parsed, int copy)
{
    const struct http_header *h = parsed->headers;
    size_t n = parsed->num_headers;

    memset(resp, 0, sizeof(*resp));
    resp->fields._arena = a;
    resp->status = parsed->status;
    resp->minor_version = parsed->minor_version;
    resp->reason = parsed->reason;
    resp->interim = parsed->status >= 100 && parsed->status < 200;
    resp->_raw = mem_slice(head, head_len);
    if (http_body_init_response(&resp->body, parsed, req->method) != 0)
        return HTTP_ERR_BAD;
    resp->close = !resp->interim && (http_connection_has(h, n, "close") ||
                                     resp->body.kind == HTTP_BODY_CLOSE || resp->minor_version == 0);
    if (!copy)
        return 0;
    {
        char *c = mem_arena_memdup(a, head, head_len);

        if (c == NULL)
            return -1;
        resp->fields._cap = n + 4;
        resp->fields.v = rebase_headers(a, h, n, 4, head, head_len, c);
        if (resp->fields.v == NULL)
            return -1;
        resp->fields.n = n;
        resp->reason = rebase(parsed->reason, head, head_len, c);
        resp->_raw = mem_slice(c, head_len);
    }
    return 0;
}

int
http_fwd_response_head(const struct http_fwd_resp *resp, struct mem_slice *out)
{
    char line[32];
    size_t len;
    struct mem_slice first;
    char *p;

    if (!resp->fields._edited) {
        *out = resp->_raw;
        return 0;
    }
    len = (size_t)snprintf(line, sizeof(line), "HTTP/1.%d %d ", resp->minor_version,
                           resp->status);
    p = mem_arena_alloc(resp->fields._arena, len + resp->reason.len + 2);
    if (p == NULL)
        return -1;
    memcpy(p, line, len);
    memcpy(p + len, resp->reason.ptr, resp->reason.len);
    memcpy(p + len + resp->reason.len, "\r\n", 2);
    first = mem_slice(p, len + resp->reason.len + 2);
    return write_head(resp->fields._arena, first.ptr, first.len, &resp->fields, out);
}

int
http_fwd_fields_edited(const struct http_fwd_fields *f)
{
    return f->_edited;
}

int
http_fwd_reply(struct mem_arena *a, const struct http_fwd_req *req, int status, const char *reason,
               const char *extra, int close, struct mem_slice *out)
{
    /* The statuses that never carry a body (RFC 9112 §6.3), as
     * http_body_init_response frames them, so the client reads it right. */
    int connect = req != NULL && mem_slice_eq(req->method, MEM_SLICE_LIT("CONNECT"));
    int no_body = (status >= 100 && status < 200) || status == 204 || status == 304 ||
                  (connect && status >= 200 && status < 300);
    int head_only = req != NULL && mem_slice_eq(req->method, MEM_SLICE_LIT("HEAD"));
    size_t rlen = strlen(reason), cap = 160 + 2 * rlen + (extra ? strlen(extra) : 0);
    char *p = mem_arena_alloc(a, cap);
    int n;

    if (p == NULL)
        return -1;
    n = snprintf(p, cap, "HTTP/1.1 %d %s\r\n", status, reason);
    if (!no_body)
        n += snprintf(p + n, cap - (size_t)n,
                      "Content-Type: text/plain\r\nContent-Length: %zu\r\n", rlen + 1);
    if (close)
        n += snprintf(p + n, cap - (size_t)n, "Connection: close\r\n");
    n += snprintf(p + n, cap - (size_t)n, "%s\r\n", extra ? extra : "");
    if (!no_body && !head_only)
        n += snprintf(p + n, cap - (size_t)n, "%s\n", reason);
    *out = mem_slice(p, (size_t)n);
    return 0;
}

/* The reason phrase of the statuses local answers use; "" for others
 * (a status line may carry an empty reason). */
static const char *
reason_of(int status)
{
    static const struct { int status; const char *reason; } t[] = {
        {200, "OK"}, {201, "Created"}, {204, "No Content"}, {301, "Moved Permanently"},
        {302, "Found"}, {303, "See Other"}, {304, "Not Modified"},
        {307, "Temporary Redirect"}, {308, "Permanent Redirect"}, {400, "Bad Request"},
        {401, "Unauthorized"}, {403, "Forbidden"}, {404, "Not Found"},
        {429, "Too Many Requests"}, {500, "Internal Server Error"}, {502, "Bad Gateway"},
        {503, "Service Unavailable"}, {504, "Gateway Timeout"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (t[i].status == status)
            return t[i].reason;
    return "";
}

int
http_fwd_reply_body(struct mem_arena *a, const struct http_fwd_req *req, int status,
                    const char *extra, struct mem_slice body, int close, struct mem_slice *out)
{
    int no_body = (status >= 100 && status < 200) || status == 204 || status == 304;
    int head_only = req != NULL && mem_slice_eq(req->method, MEM_SLICE_LIT("HEAD"));
    const char *reason = reason_of(status);
    size_t cap = 96 + strlen(reason) + (extra ? strlen(extra) : 0) + body.len;
    char *p = mem_arena_alloc(a, cap);
    int n;

    if (p == NULL)
        return -1;
    n = snprintf(p, cap, "HTTP/1.1 %d %s\r\n", status, reason);
    if (extra != NULL)
        n += snprintf(p + n, cap - (size_t)n, "%s", extra);
    if (!no_body)
        n += snprintf(p + n, cap - (size_t)n, "Content-Length: %zu\r\n", body.len);
    if (close)
        n += snprintf(p + n, cap - (size_t)n, "Connection: close\r\n");
    n += snprintf(p + n, cap - (size_t)n, "\r\n");
    if (!no_body && !head_only && body.len > 0) {
        memcpy(p + n, body.ptr, body.len);
        n += (int)body.len;
    }
    *out = mem_slice(p, (size_t)n);
    return 0;
}

enum http_fwd_next
http_fwd_after(const struct http_fwd_req *req, const struct http_fwd_resp *resp, int upstream_clean)
{
    if (req->close || resp->close || !req->body.done)
        return HTTP_FWD_CLOSE;
    return upstream_clean ? HTTP_FWD_KEEP : HTTP_FWD_DROP_UPSTREAM;
}

static int
field_ok(struct mem_slice name, struct mem_slice value)
{
    if (name.len == 0 || framing_field(name))
        return 0;
    for (size_t i = 0; i < name.len; i++)
        if (!http_is_tchar((unsigned char)name.ptr[i]))
            return 0;
    for (size_t i = 0; i < value.len; i++) {
        unsigned char c = (unsigned char)value.ptr[i];

        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

/* Values are stored as the parser hands them out: without surrounding
 * SP/HT, which are not part of a field value (RFC 9110 §5.5). */
static struct mem_slice
trim(struct mem_slice v)
{
    while (v.len > 0 && (v.ptr[0] == ' ' || v.ptr[0] == '\t'))
        v = mem_slice(v.ptr + 1, v.len - 1);
    while (v.len > 0 && (v.ptr[v.len - 1] == ' ' || v.ptr[v.len - 1] == '\t'))
        v.len--;
    return v;
}

int
http_fwd_field_add(struct http_fwd_fields *f, struct mem_slice name, struct mem_slice value)
{
    struct http_header h;

    value = trim(value);
    if (!field_ok(name, value) || f->_arena == NULL)
        return -1;
    h.name = mem_arena_slice(f->_arena, name);
    h.value = mem_arena_slice(f->_arena, value);
    if (h.name.ptr == NULL || h.value.ptr == NULL)
        return -1;
    if (f->n == f->_cap) {
        size_t cap = f->_cap * 2 + 4;
        struct http_header *v = mem_arena_alloc(f->_arena, cap * sizeof(*v));

        if (v == NULL)
            return -1;
        if (f->n > 0)
            memcpy(v, f->v, f->n * sizeof(*v));
        f->v = v;
        f->_cap = cap;
    }
    f->v[f->n++] = h;
    f->_edited = 1;
    return 0;
}

static size_t
remove_all(struct http_fwd_fields *f, struct mem_slice name)
{
    size_t k = 0, gone;

    for (size_t i = 0; i < f->n; i++)
        if (!slice_ieq(f->v[i].name, name))
            f->v[k++] = f->v[i];
    gone = f->n - k;
    f->n = k;
    if (gone > 0)
        f->_edited = 1;
    return gone;
}

int
http_fwd_field_set(struct http_fwd_fields *f, struct mem_slice name, struct mem_slice value)
{
    size_t i, w;

    value = trim(value);
    if (!field_ok(name, value) || f->_arena == NULL)
        return -1;
    /* In place of the first one, so the order stays what it was. */
    for (i = 0; i < f->n; i++)
        if (slice_ieq(f->v[i].name, name))
            break;
    if (i == f->n)
        return http_fwd_field_add(f, name, value);
    value = mem_arena_slice(f->_arena, value);
    if (value.ptr == NULL)
        return -1;
    f->v[i].value = value;
    f->_edited = 1;
    w = i + 1;
    for (size_t k = i + 1; k < f->n; k++)
        if (!slice_ieq(f->v[k].name, name))
            f->v[w++] = f->v[k];
    f->n = w;
    return 0;
}

int
http_fwd_field_del(struct http_fwd_fields *f, struct mem_slice name)
{
    /* An HTTP/1.1 request without Host is one every origin must refuse. */
    if (framing_field(name) || mem_slice_ieq(name, "host"))
        return -1;
    return (int)remove_all(f, name);
}

const struct http_header *
http_fwd_field_get(const struct http_fwd_fields *f, const char *name)
{
    return f->v != NULL ? http_header_find(f->v, f->n, name) : NULL;
}

int
http_fwd_fields_reframe(struct http_fwd_fields *f, size_t len)
{
    char num[24];
    struct http_header h;
    int n = snprintf(num, sizeof(num), "%zu", len);

    if (f->_arena == NULL)
        return -1;
    remove_all(f, MEM_SLICE_LIT("Content-Length"));
    remove_all(f, MEM_SLICE_LIT("Transfer-Encoding"));
    h.name = MEM_SLICE_LIT("Content-Length");
    h.value = mem_arena_slice(f->_arena, mem_slice(num, (size_t)n));
    if (h.value.ptr == NULL)
        return -1;
    if (f->n == f->_cap) {
        size_t cap = f->_cap * 2 + 4;
        struct http_header *v = mem_arena_alloc(f->_arena, cap * sizeof(*v));

        if (v == NULL)
            return -1;
        if (f->n > 0)
            memcpy(v, f->v, f->n * sizeof(*v));
        f->v = v;
        f->_cap = cap;
    }
    f->v[f->n++] = h;
    f->_edited = 1;
    return 0;
}
