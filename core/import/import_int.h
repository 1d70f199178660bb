#ifndef CHUTE_IMPORT_INT_H
#define CHUTE_IMPORT_INT_H

/* Private to core/import: the model both readers fill (clash.c, surge.c),
 * checked by model.c and written as Lua by emit.c. Every string of the
 * model is the model's (import_strdup), freed with it. */

#include <stddef.h>

#include "import/import.h"

enum import_vkind { IMPORT_STR, IMPORT_NUM, IMPORT_BOOL, IMPORT_LIST };

/* One field: "cipher" = "aes-128-gcm", "dns.upstream" = {"1.1.1.1"}. */
struct import_kv {
    const char *key;
    enum import_vkind kind;
    const char *s;
    double n;
    int b;
    const char **list;
    size_t nlist;
};

struct import_kvs {
    struct import_kv *v;
    size_t n, cap;
};

struct import_proxy {
    const char *name;
    unsigned line;
    struct import_kvs f; /* type first */
};

/* chute.provider / chute.ruleset { url = ... }: the fields as written. */
struct import_provider {
    const char *name;
    unsigned line;
    struct import_kvs f;
};

struct import_group {
    const char *name, *type;
    unsigned line;
    struct import_member {
        const char *name;
        unsigned line;
    } *members;
    size_t nmembers, mcap;
    const char **use;
    size_t nuse, ucap;
    struct import_kvs f; /* url, interval, timeout, tolerance, filter */
    int dropped;
};

/* A rule list: a bundle file (path) or a remote one (url). */
struct import_ruleset {
    const char *name;   /* the key rules name it by */
    unsigned line;
    const char *path;   /* in the bundle */
    const char *format; /* chute's: surge, domain-set, classical, domain, ipcidr */
    struct import_kvs f;   /* url form: url, interval, path, format */
    int remote;
};

struct import_cond {
    const char *type, *value;
    const char **opts;
    size_t nopts;
    struct import_cond *sub; /* AND / OR / NOT */
    size_t nsub;
    const char *ruleset;  /* RULE-SET: the import_ruleset name, or LAN / SYSTEM */
    int builtin;
};

struct import_rule {
    struct import_cond c;
    const char *policy;
    unsigned line;
};

struct import_model {
    const char *file;
    const struct import_opts *o;
    struct import_kvs config;        /* dotted keys: "listen.socks", "dns.mode" */
    struct import_proxy *proxies;
    size_t nproxies, pcap;
    struct import_provider *providers;
    size_t nproviders, prcap;
    struct import_group *groups;
    size_t ngroups, gcap;
    struct import_ruleset *rulesets;
    size_t nrulesets, rscap;
    struct import_rule *rules;
    size_t nrules, rcap;
    char *module;                 /* Surge rewrite sections, lines kept in place */
    size_t module_len;
    struct import_result *out;    /* notes and copies go here */
    /* NAME = direct / reject proxies: the names stand for DIRECT / REJECT */
    struct import_alias {
        const char *name, *to;
    } *aliases;
    size_t naliases, acap;
    /* every string and array of the model */
    void **owned;
    size_t nowned, ocap;
};

/* model.c */
void *import_alloc(struct import_model *m, size_t n);
const char *import_strndup(struct import_model *m, const char *s, size_t n);
const char *import_strdup(struct import_model *m, const char *s);
const char *import_fmt(struct import_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Grows |*v| (|*n| used of |*cap|) by one zeroed element of |size|. */
void *import_push(struct import_model *m, void *v, size_t *n, size_t *cap, size_t size);
void import_note(struct import_model *m, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct import_kv *import_kv_add(struct import_model *m, struct import_kvs *k, const char *key);
void import_kv_str(struct import_model *m, struct import_kvs *k, const char *key, const char *v);
void import_kv_num(struct import_model *m, struct import_kvs *k, const char *key, double v);
void import_kv_bool(struct import_model *m, struct import_kvs *k, const char *key, int v);
const struct import_kv *import_kv_get(const struct import_kvs *k, const char *key);
void import_add_copy(struct import_model *m, const char *from, const char *to);
/* The database a GEOIP/GEOSITE/IP-ASN rule of |type| reads, by mihomo's
 * file name, copied with the bundle when it is beside the config. */
void import_add_geo(struct import_model *m, const char *type);
/* |name| (a proxy of type direct / reject) stands for |to| in groups and
 * rules, with a note at |line|. */
void import_add_alias(struct import_model *m, const char *name, const char *to, unsigned line);
void import_group_member(struct import_model *m, struct import_group *g, const char *name, unsigned line);
/* Flattens groups of groups, drops unknown members, empty groups and the
 * rules naming policies that do not exist; each with a note. */
void import_model_check(struct import_model *m);
/* A Lua identifier-safe file name for a list: "my list" -> "my_list". */
const char *import_file_name(struct import_model *m, const char *name, const char *ext);

/* rule.c: "TYPE,VALUE,POLICY[,opt...]" (Clash and Surge) into a rule;
 * AND/OR/NOT with their ((A,B),(C)) payloads. Returns 0, or -1 with a
 * note made (the rule is left out). |policy_from| 0 for a sub-condition. */
int import_rule_parse(struct import_model *m, const char *text, size_t len, unsigned line,
                   struct import_rule *r, int surge);
/* Checks a leaf condition's type and value against chute's rule parser:
 * 0 usable, -1 with a note. */
int import_cond_check(struct import_model *m, const struct import_cond *c, unsigned line);

/* emit.c */
int import_emit(struct import_model *m, char *err, size_t errlen);

/* clash.c, surge.c */
int import_clash(struct import_model *m, const char *text, size_t len, char *err, size_t errlen);
int import_surge(struct import_model *m, const char *text, size_t len, char *err, size_t errlen);

#endif
