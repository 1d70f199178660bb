#ifndef CHUTE_IMPORT_INT_H
#define CHUTE_IMPORT_INT_H

/* Private to core/import: the model both readers fill (clash.c, surge.c),
 * checked by model.c and written as Lua by emit.c. Every string of the
 * model is the model's (imp_strdup), freed with it. */

#include <stddef.h>

#include "import/import.h"

enum imp_vkind { IMP_STR, IMP_NUM, IMP_BOOL, IMP_LIST };

/* One field: "cipher" = "aes-128-gcm", "dns.upstream" = {"1.1.1.1"}. */
struct imp_kv {
    const char *key;
    enum imp_vkind kind;
    const char *s;
    double n;
    int b;
    const char **list;
    size_t nlist;
};

struct imp_kvs {
    struct imp_kv *v;
    size_t n, cap;
};

struct imp_proxy {
    const char *name;
    unsigned line;
    struct imp_kvs f; /* type first */
};

/* chute.provider / chute.ruleset { url = ... }: the fields as written. */
struct imp_provider {
    const char *name;
    unsigned line;
    struct imp_kvs f;
};

struct imp_group {
    const char *name, *type;
    unsigned line;
    struct imp_member {
        const char *name;
        unsigned line;
    } *members;
    size_t nmembers, mcap;
    const char **use;
    size_t nuse, ucap;
    struct imp_kvs f; /* url, interval, timeout, tolerance, filter */
    int dropped;
};

/* A rule list: a bundle file (path) or a remote one (url). */
struct imp_ruleset {
    const char *name;   /* the key rules name it by */
    unsigned line;
    const char *path;   /* in the bundle */
    const char *format; /* chute's: surge, domain-set, classical, domain, ipcidr */
    struct imp_kvs f;   /* url form: url, interval, path, format */
    int remote;
};

struct imp_cond {
    const char *type, *value;
    const char **opts;
    size_t nopts;
    struct imp_cond *sub; /* AND / OR / NOT */
    size_t nsub;
    const char *ruleset;  /* RULE-SET: the imp_ruleset name, or LAN / SYSTEM */
    int builtin;
};

struct imp_rule {
    struct imp_cond c;
    const char *policy;
    unsigned line;
};

struct imp_model {
    const char *file;
    const struct import_opts *o;
    struct imp_kvs config;        /* dotted keys: "listen.socks", "dns.mode" */
    struct imp_proxy *proxies;
    size_t nproxies, pcap;
    struct imp_provider *providers;
    size_t nproviders, prcap;
    struct imp_group *groups;
    size_t ngroups, gcap;
    struct imp_ruleset *rulesets;
    size_t nrulesets, rscap;
    struct imp_rule *rules;
    size_t nrules, rcap;
    char *module;                 /* Surge rewrite sections, lines kept in place */
    size_t module_len;
    struct import_result *out;    /* notes and copies go here */
    /* NAME = direct / reject proxies: the names stand for DIRECT / REJECT */
    struct imp_alias {
        const char *name, *to;
    } *aliases;
    size_t naliases, acap;
    /* every string and array of the model */
    void **owned;
    size_t nowned, ocap;
};

/* model.c */
void *imp_alloc(struct imp_model *m, size_t n);
const char *imp_strndup(struct imp_model *m, const char *s, size_t n);
const char *imp_strdup(struct imp_model *m, const char *s);
const char *imp_fmt(struct imp_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Grows |*v| (|*n| used of |*cap|) by one zeroed element of |size|. */
void *imp_push(struct imp_model *m, void *v, size_t *n, size_t *cap, size_t size);
void imp_note(struct imp_model *m, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct imp_kv *imp_kv_add(struct imp_model *m, struct imp_kvs *k, const char *key);
void imp_kv_str(struct imp_model *m, struct imp_kvs *k, const char *key, const char *v);
void imp_kv_num(struct imp_model *m, struct imp_kvs *k, const char *key, double v);
void imp_kv_bool(struct imp_model *m, struct imp_kvs *k, const char *key, int v);
const struct imp_kv *imp_kv_get(const struct imp_kvs *k, const char *key);
void imp_copy(struct imp_model *m, const char *from, const char *to);
/* |name| (a proxy of type direct / reject) stands for |to| in groups and
 * rules, with a note at |line|. */
void imp_alias(struct imp_model *m, const char *name, const char *to, unsigned line);
void imp_group_member(struct imp_model *m, struct imp_group *g, const char *name, unsigned line);
/* Flattens groups of groups, drops unknown members, empty groups and the
 * rules naming policies that do not exist; each with a note. */
void imp_model_check(struct imp_model *m);
/* A Lua identifier-safe file name for a list: "my list" -> "my_list". */
const char *imp_file_name(struct imp_model *m, const char *name, const char *ext);

/* rule.c: "TYPE,VALUE,POLICY[,opt...]" (Clash and Surge) into a rule;
 * AND/OR/NOT with their ((A,B),(C)) payloads. Returns 0, or -1 with a
 * note made (the rule is left out). |policy_from| 0 for a sub-condition. */
int imp_rule_parse(struct imp_model *m, const char *text, size_t len, unsigned line,
                   struct imp_rule *r, int surge);
/* Checks a leaf condition's type and value against chute's rule parser:
 * 0 usable, -1 with a note. */
int imp_cond_check(struct imp_model *m, const struct imp_cond *c, unsigned line);

/* emit.c */
int imp_emit(struct imp_model *m, char *err, size_t errlen);

/* clash.c, surge.c */
int imp_clash(struct imp_model *m, const char *text, size_t len, char *err, size_t errlen);
int imp_surge(struct imp_model *m, const char *text, size_t len, char *err, size_t errlen);

#endif
