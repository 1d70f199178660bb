#ifndef CHUTE_FETCH_FETCH_H
#define CHUTE_FETCH_FETCH_H

/* Remote rule sets and proxy providers: what a bundle's
 * chute.ruleset { url = ... } and chute.provider "name" { url = ... }
 * fetch in the background.
 *
 *   get.c    one HTTP/1.1 GET (http:// or https:// with chute's TLS client,
 *            checked against the system's trust store or $SSL_CERT_FILE)
 *            through a policy of the bundle (outbound_open), with
 *            If-None-Match / If-Modified-Since, a size limit and a deadline
 *   cache.c  the on-disk copies in chute's state folder, written whole
 *            (a temporary file renamed over the old one) with their ETag
 *            and Last-Modified beside them
 *   sched.c  the items' timers: each fetched when its interval has passed
 *            since its cache was written, retried after a failure with a
 *            doubling backoff (5 s up to the interval, at most 15 min);
 *            a body is checked (the caller's validate, on a worker thread:
 *            the loop never parses) before it replaces the cache, and a
 *            failed fetch, a body over the limit or one that does not
 *            parse leaves the cache and the loaded copy as they were.
 *
 * Loop thread only, but for the validate hook (sched.c's worker). */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

struct outbound_env;
struct tls_ctx;

#define FETCH_DEFAULT_MAX_BYTES (16u << 20)
#define FETCH_TIMEOUT 30.0 /* seconds for one whole GET */

struct fetch_url {
    int https;
    char host[256];       /* no brackets */
    uint16_t port;
    char authority[300];  /* the Host header: as written */
    char path[2048];      /* path?query, "/" at least */
};

/* "http[s]://host[:port][/path][?query]" (no userinfo, no fragment). 0, or
 * -1 with |err| ("https? only: ftp://...", "bad port"). */
int fetch_url_parse(const char *url, struct fetch_url *u, char *err, size_t errlen);
/* |url| without its query (which may hold a token), for logs. */
void fetch_url_shown(const char *url, char *out, size_t outlen);

struct fetch_resp {
    int status;             /* 200 (body) or 304 (not modified); 0 on failure */
    char *body;             /* 200: malloc'd, NUL after len bytes; the callback's to free */
    size_t len;
    char etag[256];         /* the response's validators, "" none */
    char last_modified[64];
    const char *why;        /* failure: what went wrong, valid during the call */
};
typedef void (*fetch_get_cb)(void *arg, struct fetch_resp *r);

struct fetch_get_opts {
    int policy;             /* DIRECT or a proxy/group id of env->set */
    size_t max_bytes;       /* a longer body is refused */
    double timeout;         /* seconds for the whole exchange */
    const char *etag;       /* NULL/"" none: If-None-Match */
    const char *last_modified; /* NULL/"" none: If-Modified-Since */
};

/* Starts a GET of |u| (copied). The callback fires exactly once, never
 * from inside this call, unless cancelled. |env| (and its tls, needed for
 * https) must outlive the GET. NULL when out of memory. */
struct fetch_get *fetch_get_start(const struct outbound_env *env, const struct fetch_url *u,
                                  const struct fetch_get_opts *o, fetch_get_cb cb, void *arg);
void fetch_get_cancel(struct fetch_get *g);

/* cache.c. chute's state folder: $CHUTE_STATE_DIR, else
 * $XDG_STATE_HOME/chute, else $HOME/.local/state/chute; 0 or -1 (none set,
 * or |n| too small). */
int fetch_state_dir(char *dir, size_t n);
/* Where an item's cache lives: |path| as given when absolute, else under
 * "<state>/cache/" (|path| NULL: "<kind>-<name>"; a relative path never
 * leaves that folder: no ".."). 0, or -1 with |err|. */
int fetch_cache_path(const char *path, const char *kind, const char *name, char *out, size_t n,
                     char *err, size_t errlen);
/* The whole cache file (at most |max| bytes), malloc'd, NUL after *len;
 * NULL with errno (ENOENT: none yet; EFBIG: over |max|) and |why|. */
char *fetch_cache_read(const char *path, size_t max, size_t *len, char *why, size_t whylen);
/* Replaces the cache with |buf| and its validators (in "<path>.meta"):
 * the folders made (0700), a temporary file written and fsync'd, renamed
 * over the old. 0, or -1 with |err|. Blocks on the disk: worker or CLI. */
int fetch_cache_write(const char *path, const char *buf, size_t len, const char *etag,
                      const char *last_modified, char *err, size_t errlen);
/* The validators written with the cache ("" none) and its age in seconds
 * (-1: no cache). */
double fetch_cache_meta(const char *path, char *etag, size_t etaglen, char *lm, size_t lmlen);
/* A 304: the cache is fresh as of now (its mtime). */
void fetch_cache_touch(const char *path);

/* sched.c: the items of the loaded bundle. */
enum fetch_kind { FETCH_RULESET = 0, FETCH_PROVIDER, FETCH_GEO /* a GEOIP/GEOSITE file */ };

struct fetch_item_cfg {
    enum fetch_kind kind;
    char name[128];        /* for logs: the provider's name, the ruleset's path */
    char url[2048];
    char via[64];          /* a policy name of the bundle ("DIRECT") */
    double interval;       /* seconds */
    size_t max_bytes;
    char path[4096];       /* the cache file (absolute) */
    int format;            /* the ruleset's format (rules_format), or the geo file's
                            * kind (script/geo.h), for validate */
    int skip_invalid, strict;
    char where[96];        /* "main.lua:12": where the bundle declared it */
    size_t count;          /* at load: the rule set's rules, the provider's proxies */
};

enum fetch_outcome { FETCH_FETCHED = 0, FETCH_NOT_MODIFIED, FETCH_FAILED };

struct fetch_hooks {
    /* Worker thread: 0 when |buf| is a good body for |c| (|note| may say
     * "512 rules"), or -1 with |note| saying why not. */
    int (*validate)(void *ud, const struct fetch_item_cfg *c, const char *buf, size_t len,
                    char *note, size_t notelen);
    /* Loop: |c|'s cache was replaced by a good body. */
    void (*updated)(void *ud, const struct fetch_item_cfg *c);
    /* Loop, may be NULL: each fetch's end (fetch_set_update_all's report). */
    void (*report)(void *ud, const struct fetch_item_cfg *c, enum fetch_outcome o,
                   const char *why);
    /* The policy id of a name in the current bundle, or -1. */
    int (*policy)(void *ud, const char *name);
    void *ud;
};

struct fetch_set;
/* |env| is the engine's (read at each fetch: its set and TLS context may
 * change with reloads). NULL when out of memory. */
struct fetch_set *fetch_set_new(const struct outbound_env *env, const struct fetch_hooks *h);
/* Makes |items| the set's (a load or a reload): an item of the same cache
 * path and URL keeps its state (validators, backoff, next fetch); new
 * items are due when their cache is |interval| old (now, if none). 0, or
 * -1 when out of memory (the set is left as it was). */
int fetch_set_sync(struct fetch_set *fs, const struct fetch_item_cfg *items, size_t n);
/* Fetches the item of |kind| called |name| now (the control API's PUT
 * /providers/...: its timer restarts after). 0, 1 when a fetch of it is
 * already under way, -1 when there is no such item. */
int fetch_set_refresh(struct fetch_set *fs, enum fetch_kind kind, const char *name);
/* Fetches every item now, once, and stops there (chute update). */
void fetch_set_update_all(struct fetch_set *fs);
/* Items fetching or being checked now (0: all done). */
size_t fetch_set_busy(const struct fetch_set *fs);
/* Stops everything: GETs in flight are cancelled, a running check is
 * waited for. */
void fetch_set_free(struct fetch_set *fs);

#endif
