#ifndef CHUTE_MITM_REWRITE_INT_H
#define CHUTE_MITM_REWRITE_INT_H

/* Private to core/mitm: the parsed rules module.c builds and rewrite.c
 * applies. Every string is malloc'd and owned by the rule. */

#include "mitm/rewrite.h"
#include "rules/re.h"

enum rw_url_kind {
    RW_URL_HEADER,
    RW_URL_302,
    RW_URL_307,
    RW_URL_REJECT,       /* 403, no body (chute's REJECT answer) */
    RW_URL_REJECT_200,   /* 200, no body */
    RW_URL_REJECT_IMG,   /* 200, a 1x1 GIF */
    RW_URL_REJECT_DICT,  /* 200, "{}" */
    RW_URL_REJECT_ARRAY, /* 200, "[]" */
    RW_URL_REJECT_DROP,  /* close without an answer */
};

enum rw_hdr_op {
    RW_HDR_ADD,
    RW_HDR_DEL,
    RW_HDR_REPLACE,
    RW_HDR_REPLACE_REGEX,
};

/* A URL pattern: the regex, and what any URL it matches must start with,
 * read off the regex when it is plain enough ("^https?://ads\.example\.com/..."
 * must start with "http://ads.example.com/" or "https://..."), so that
 * most rules cost a memcmp on most URLs instead of a regex run. */
struct rw_pattern {
    struct rules_re *re;
    uint8_t scheme; /* 0: no prefilter; RW_SCHEME_HTTP, _HTTPS, or both */
    uint8_t len;
    char lit[62];
};
#define RW_SCHEME_HTTP 1
#define RW_SCHEME_HTTPS 2

/* Where a rule was written, for runtime messages. |file| points into the
 * set's file list. */
struct rw_where {
    const char *file;
    unsigned line;
    int warned; /* its runtime failure was logged once */
};

struct rw_url {
    struct rw_pattern pat;
    char *repl;
    size_t repl_len;
    int kind;
    struct rw_where at;
};

struct rw_header {
    struct rw_pattern pat;
    int response;
    int op;
    char *name;
    char *value; /* add/replace: the value; replace-regex: the template */
    size_t value_len;
    struct rules_re *vre; /* replace-regex: what to replace in the value */
    struct rw_where at;
};

struct rw_map {
    struct rw_pattern pat;
    int status;
    char *body;
    size_t body_len;
    char *extra; /* header lines with CRLF, Content-Type included */
    struct rw_where at;
};

struct rw_pair {
    struct rules_re *re;
    char *repl;
    size_t repl_len;
};

struct rw_body {
    struct rw_pattern pat;
    int response;
    struct rw_pair *pairs;
    size_t npairs;
    struct rw_where at;
};

/* What a [MITM] hostname line does to the host list. */
enum rw_host_mode { RW_HOSTS_SET, RW_HOSTS_APPEND, RW_HOSTS_INSERT };

struct rw_hostop {
    int mode;
    char **items;
    size_t n;
};

/* One load's worth of rules; a set is the concatenation of its loads. */
struct rw_rules {
    struct rw_url *url;
    size_t nurl;
    struct rw_header *hdr;
    size_t nhdr;
    struct rw_map *map;
    size_t nmap;
    struct rw_body *body;
    size_t nbody;
    struct rw_hostop *ops;
    size_t nops;
    char **files;
    size_t nfiles;
};

struct mitm_rewrites {
    struct rw_rules r;
    char **hosts; /* the host list after every load's [MITM] lines */
    size_t nhosts;
    size_t max_body;
    struct mitm_hooks hooks;
    struct mitm_rewrite_stats st;
};

/* A load in progress (module.c, module_lines.c). */
struct rw_parser {
    struct rw_rules *r;
    const char *fname; /* the copy in r->files */
    unsigned line;
    const char *sec;   /* the section's name, for messages */
    struct mem_slice text; /* the current line, trimmed */
    const char *lp;    /* what of it is not read yet */
    char *scratch;     /* token bytes of the current line (quotes removed) */
    size_t used;
    mitm_read_file_fn read_file;
    mitm_warn_fn warn;
    void *ud;
    struct mitm_hosts *check; /* validates [MITM] host names */
    char *err;
    size_t errlen;
};

/* The next token of the line: 1, 0 at its end, -1 (err set) on an
 * unterminated quote. */
int rw_next(struct rw_parser *p, struct mem_slice *t);
/* The rest of the line, trimmed, a pair of quotes around it dropped. */
struct mem_slice rw_rest(struct rw_parser *p);
/* Sets err to "file:line: [section] 'line': <fmt>"; returns -1. */
int rw_fail(struct rw_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Calls warn with "file:line: <fmt>". */
void rw_warn(struct rw_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* |t| compiled ("(?m)" first with |multiline|), or NULL with err set. */
struct rules_re *rw_regex(struct rw_parser *p, struct mem_slice t, int multiline);
/* pattern.c: compiles the URL regex |t| into |pat|: 0, or -1 with err set. */
int rw_pattern_init(struct rw_parser *p, struct rw_pattern *pat, struct mem_slice t);
/* rules_re_match over |url| when the prefilter lets it through: the pairs
 * set in |ov| (up to |npairs|), 0 on no match, RULES_RE_LIMIT when cut. */
int rw_pattern_match(const struct rw_pattern *pat, struct mem_slice url, size_t *ov, int npairs);

/* A malloc'd NUL-terminated copy of |t| (NULL when out of memory). */
char *rw_strdup(struct mem_slice t);
/* A zeroed new last element of the array |*v| of |*n| elements of |size|
 * bytes (grown by doubling), or NULL. */
void *rw_push(void *v, size_t *n, size_t size);
/* 1 when |t| is an HTTP token (a field name). */
int rw_is_token(struct mem_slice t);

/* module_lines.c: one line of each section; 0 or -1. */
int rw_parse_url(struct rw_parser *p);
int rw_parse_header(struct rw_parser *p);
int rw_parse_map(struct rw_parser *p);
int rw_parse_body(struct rw_parser *p);

/* module.c */
void rw_rules_fini(struct rw_rules *r);

/* rewrite.c */
void rw_hooks_init(struct mitm_rewrites *rw);
extern const unsigned char rw_tiny_gif[43];

#endif
