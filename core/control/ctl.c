#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/control.h"

/* `chute ctl`: the control API from a shell, for headless boxes. A
 * blocking HTTP/1.1 client (one request per connection) over the same
 * endpoints the dashboards use. */

static const char usage[] =
    "usage: chute ctl [--addr HOST:PORT] [--secret S] COMMAND\n"
    "\n"
    "commands:\n"
    "  status                 version, flows and byte totals\n"
    "  flows                  the live flows, one a line\n"
    "  close ID               close flow ID (\"all\": every flow)\n"
    "  select GROUP MEMBER    make a select group use MEMBER\n"
    "  reload                 reload the bundle\n"
    "  logs [LEVEL]           follow the log (error, warning, info, debug)\n"
    "\n"
    "--addr defaults to $CHUTE_CONTROL or 127.0.0.1:9090, --secret to $CHUTE_SECRET.\n";

struct conn {
    int fd;
    char buf[65536];
    size_t len, off;
};

static int
dial(const char *addr, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host)) {
        snprintf(err, errlen, "--addr '%s': expected HOST:PORT", addr);
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(h, colon + 1, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "--addr '%s': %s", addr, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            snprintf(err, errlen, "connect to %s: %s (is control = { listen = ... } set?)", addr,
                     strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* Reads more into c->buf; 0 at the end. */
static ssize_t
fill(struct conn *c)
{
    if (c->off > 0) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    if (c->len == sizeof(c->buf))
        return -1;
    ssize_t n;
    do
        n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
    while (n < 0 && errno == EINTR);
    if (n > 0)
        c->len += (size_t)n;
    return n;
}

/* A line of at most the buffer, without its CRLF; NULL at the end. */
static char *
line(struct conn *c)
{
    for (;;) {
        char *nl = memchr(c->buf + c->off, '\n', c->len - c->off);
        if (nl != NULL) {
            char *l = c->buf + c->off;
            *nl = '\0';
            if (nl > l && nl[-1] == '\r')
                nl[-1] = '\0';
            c->off = (size_t)(nl + 1 - c->buf);
            return l;
        }
        if (fill(c) <= 0)
            return NULL;
    }
}

struct reply {
    int status;
    int chunked;
    long long length; /* -1: to the end */
};

static int
request(struct conn *c, const char *method, const char *path, const char *secret,
        const char *body, struct reply *r)
{
    char req[2048];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: chute\r\nUser-Agent: chute-ctl\r\n"
                     "Connection: close\r\n%s%s%s"
                     "Content-Length: %zu\r\n%s\r\n%s",
                     method, path, secret[0] ? "Authorization: Bearer " : "", secret,
                     secret[0] ? "\r\n" : "", body ? strlen(body) : 0,
                     body ? "Content-Type: application/json\r\n" : "", body ? body : "");
    if (n < 0 || (size_t)n >= sizeof(req) || write(c->fd, req, (size_t)n) != n)
        return -1;
    char *l = line(c);
    if (l == NULL || sscanf(l, "HTTP/1.%*d %d", &r->status) != 1)
        return -1;
    r->chunked = 0;
    r->length = -1;
    while ((l = line(c)) != NULL && l[0] != '\0') {
        if (strncasecmp(l, "content-length:", 15) == 0)
            r->length = atoll(l + 15);
        else if (strncasecmp(l, "transfer-encoding:", 18) == 0 && strstr(l, "chunked") != NULL)
            r->chunked = 1;
    }
    return l == NULL ? -1 : 0;
}

/* Calls |fn| with each piece of the body as it comes. */
static int
body_each(struct conn *c, const struct reply *r, void (*fn)(void *, const char *, size_t), void *arg)
{
    if (!r->chunked) {
        long long left = r->length;
        for (;;) {
            size_t have = c->len - c->off;
            if (left >= 0 && (long long)have > left)
                have = (size_t)left;
            if (have > 0)
                fn(arg, c->buf + c->off, have);
            c->off += have;
            if (left >= 0 && (left -= (long long)have) == 0)
                return 0;
            ssize_t n = fill(c);
            if (n <= 0)
                return left > 0 ? -1 : 0;
        }
    }
    for (;;) {
        char *l = line(c);
        if (l == NULL)
            return -1;
        unsigned long long size = strtoull(l, NULL, 16);
        if (size == 0)
            return 0;
        while (size > 0) {
            if (c->off == c->len && fill(c) <= 0)
                return -1;
            size_t have = c->len - c->off;
            if (have > size)
                have = (size_t)size;
            fn(arg, c->buf + c->off, have);
            c->off += have;
            size -= have;
        }
        if (line(c) == NULL)
            return -1;
    }
}

struct text {
    char *p;
    size_t len;
};

static void
collect(void *arg, const char *p, size_t n)
{
    struct text *t = arg;
    char *q = realloc(t->p, t->len + n + 1);
    if (q == NULL)
        return;
    memcpy(q + t->len, p, n);
    t->len += n;
    q[t->len] = '\0';
    t->p = q;
}

struct opts {
    const char *addr, *secret;
};

/* One request; the body (NUL-terminated, malloc'd) in |out|. The status,
 * or -1 after printing why. */
static int
call(const struct opts *o, const char *method, const char *path, const char *body, char **out)
{
    char err[512];
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -1;
    c->fd = dial(o->addr, err, sizeof(err));
    if (c->fd < 0) {
        fprintf(stderr, "chute ctl: %s\n", err);
        free(c);
        return -1;
    }
    struct reply r;
    struct text t = {NULL, 0};
    int rc = request(c, method, path, o->secret, body, &r);
    if (rc == 0)
        rc = body_each(c, &r, collect, &t);
    close(c->fd);
    free(c);
    if (rc != 0) {
        fprintf(stderr, "chute ctl: %s %s: the connection ended early\n", method, path);
        free(t.p);
        return -1;
    }
    *out = t.p != NULL ? t.p : strdup("");
    if (r.status == 401) {
        fprintf(stderr, "chute ctl: 401 Unauthorized: give --secret (or $CHUTE_SECRET)\n");
        free(*out);
        return -1;
    }
    if (r.status >= 400) {
        json_t *j = json_loads(*out, 0, NULL);
        const char *m = json_string_value(json_object_get(j, "message"));
        fprintf(stderr, "chute ctl: %s %s: %d %s\n", method, path, r.status, m ? m : *out);
        json_decref(j);
        free(*out);
        return -1;
    }
    return r.status;
}

static void
path_escape(const char *s, char *out, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            out[o++] = (char)ch;
        } else {
            out[o++] = '%';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = '\0';
}

static int
cmd_status(const struct opts *o)
{
    char *v, *s;
    if (call(o, "GET", "/version", NULL, &v) < 0)
        return 1;
    if (call(o, "GET", "/chute/stats", NULL, &s) < 0) {
        free(v);
        return 1;
    }
    json_t *jv = json_loads(v, 0, NULL), *js = json_loads(s, 0, NULL);
    json_t *cnt = json_object_get(js, "counters");
    printf("%s at %s\n", json_string_value(json_object_get(jv, "version")) ?: "chute", o->addr);
    const char *keys[] = {"flows_active", "flows_total", "bytes_up", "bytes_down", "route_calls",
                          "route_errors", "dcache_hits", "rule_version"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *x = json_object_get(cnt, keys[i]);
        if (x != NULL)
            printf("%s%s=%lld", i ? " " : "", keys[i], (long long)json_integer_value(x));
    }
    printf("\n");
    json_decref(jv);
    json_decref(js);
    free(v);
    free(s);
    return 0;
}

static int
cmd_flows(const struct opts *o)
{
    char *b;
    if (call(o, "GET", "/connections", NULL, &b) < 0)
        return 1;
    json_error_t je;
    json_t *j = json_loads(b, 0, &je);
    free(b);
    if (j == NULL) {
        fprintf(stderr, "chute ctl: GET /connections: not JSON: %s\n", je.text);
        return 1;
    }
    printf("%-6s %-4s %-6s %-22s %-32s %-16s %10s %10s\n", "ID", "NET", "IN", "SOURCE",
           "DESTINATION", "POLICY", "UP", "DOWN");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(j, "connections"), i, c) {
        json_t *m = json_object_get(c, "metadata");
        char src[80], dst[300];
        const char *host = json_string_value(json_object_get(m, "host"));
        snprintf(src, sizeof(src), "%s:%s", json_string_value(json_object_get(m, "sourceIP")) ?: "",
                 json_string_value(json_object_get(m, "sourcePort")) ?: "");
        snprintf(dst, sizeof(dst), "%s:%s",
                 host && host[0] ? host : json_string_value(json_object_get(m, "destinationIP")) ?: "",
                 json_string_value(json_object_get(m, "destinationPort")) ?: "");
        json_t *chains = json_object_get(c, "chains");
        const char *pol = json_string_value(json_array_get(chains, json_array_size(chains) - 1));
        printf("%-6s %-4s %-6s %-22s %-32s %-16s %10lld %10lld\n",
               json_string_value(json_object_get(c, "id")) ?: "?",
               json_string_value(json_object_get(m, "network")) ?: "",
               json_string_value(json_object_get(m, "type")) ?: "", src, dst, pol ? pol : "",
               (long long)json_integer_value(json_object_get(c, "upload")),
               (long long)json_integer_value(json_object_get(c, "download")));
    }
    json_decref(j);
    return 0;
}

static void
print_logs(void *arg, const char *p, size_t n)
{
    /* Each chunk is one {"type":..,"payload":..} line. */
    struct text *t = arg;
    collect(t, p, n);
    char *nl;
    while (t->p != NULL && (nl = memchr(t->p, '\n', t->len)) != NULL) {
        *nl = '\0';
        json_t *j = json_loads(t->p, 0, NULL);
        if (j != NULL)
            printf("%-7s %s\n", json_string_value(json_object_get(j, "type")) ?: "",
                   json_string_value(json_object_get(j, "payload")) ?: "");
        fflush(stdout);
        json_decref(j);
        size_t rest = t->len - (size_t)(nl + 1 - t->p);
        memmove(t->p, nl + 1, rest);
        t->len = rest;
    }
}

static int
cmd_logs(const struct opts *o, const char *level)
{
    char err[512], path[64];
    snprintf(path, sizeof(path), "/logs?level=%s", level);
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return 1;
    c->fd = dial(o->addr, err, sizeof(err));
    if (c->fd < 0) {
        fprintf(stderr, "chute ctl: %s\n", err);
        free(c);
        return 1;
    }
    struct reply r;
    struct text t = {NULL, 0};
    int rc = request(c, "GET", path, o->secret, NULL, &r);
    if (rc == 0 && r.status != 200) {
        fprintf(stderr, "chute ctl: GET %s: %d%s\n", path, r.status,
                r.status == 401 ? " Unauthorized: give --secret" : "");
        rc = -1;
    } else if (rc == 0) {
        rc = body_each(c, &r, print_logs, &t);
    }
    close(c->fd);
    free(c);
    free(t.p);
    return rc == 0 ? 0 : 1;
}

static int
simple(const struct opts *o, const char *method, const char *path, const char *body,
       const char *done)
{
    char *b;
    if (call(o, method, path, body, &b) < 0)
        return 1;
    free(b);
    printf("%s\n", done);
    return 0;
}

int
control_ctl_main(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"addr", required_argument, NULL, 'a'},
        {"secret", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {getenv("CHUTE_CONTROL"), getenv("CHUTE_SECRET")};
    if (o.addr == NULL)
        o.addr = "127.0.0.1:9090";
    if (o.secret == NULL)
        o.secret = "";
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "+a:s:h", lopts, NULL)) != -1) {
        if (ch == 'a') {
            o.addr = optarg;
        } else if (ch == 's') {
            o.secret = optarg;
        } else if (ch == 'h') {
            fputs(usage, stdout);
            return 0;
        } else {
            fputs(usage, stderr);
            return 2;
        }
    }
    int n = argc - optind;
    char **a = argv + optind;
    if (n == 1 && strcmp(a[0], "status") == 0)
        return cmd_status(&o);
    if (n == 1 && strcmp(a[0], "flows") == 0)
        return cmd_flows(&o);
    if (n == 2 && strcmp(a[0], "close") == 0) {
        char path[96];
        if (strcmp(a[1], "all") == 0)
            snprintf(path, sizeof(path), "/connections");
        else if (strspn(a[1], "0123456789") == strlen(a[1]) && a[1][0] && strlen(a[1]) < 21)
            snprintf(path, sizeof(path), "/connections/%s", a[1]);
        else {
            fprintf(stderr, "chute ctl close: '%s' is not a flow id (see `chute ctl flows`)\n", a[1]);
            return 2;
        }
        return simple(&o, "DELETE", path, NULL, "closed");
    }
    if (n == 3 && strcmp(a[0], "select") == 0) {
        char g[512], path[600];
        path_escape(a[1], g, sizeof(g));
        snprintf(path, sizeof(path), "/proxies/%s", g);
        json_t *j = json_pack("{s:s}", "name", a[2]);
        char *body = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        int rc = body ? simple(&o, "PUT", path, body, "selected") : 1;
        free(body);
        return rc;
    }
    if (n == 1 && strcmp(a[0], "reload") == 0)
        return simple(&o, "PUT", "/configs", "{}", "reload requested (see the log)");
    if ((n == 1 || n == 2) && strcmp(a[0], "logs") == 0)
        return cmd_logs(&o, n == 2 ? a[1] : "info");
    fputs(usage, stderr);
    return 2;
}
