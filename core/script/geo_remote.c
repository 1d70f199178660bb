#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fetch/fetch.h"
#include "rules/geoip.h"
#include "rules/geosite.h"
#include "script/geo.h"
#include "script/script_int.h"

/* Remote GEO files: chute.config { geo = { mmdb = { url = ... } } }. They
 * are fetched by core/fetch like remote rule sets (the cache in chute's
 * state folder, ETag / If-Modified-Since, a size limit, a backoff), read
 * from the cache at load, and swapped in by script_geo_update when a
 * fetch brings a new one: the bundle is not reloaded. An mmdb is opened
 * (its index built, ~100-200 ms for a big file) on the fetch's worker
 * thread, when its body is checked, and handed to the loop, which only
 * swaps the pointer. */

#define DEFAULT_INTERVAL (7 * 86400.0) /* mihomo's geo-update-interval: a week */
#define DEFAULT_MAX (64u << 20)

static const char *const keys[SCRIPT_GEO_FILES] = {"mmdb", "asn", "geosite"};

/* "main.lua:3" for messages, from the chute.config call. */
static void
config_where(struct script *s, char *out, size_t n)
{
    lua_State *L = s->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->state_ref);
    lua_getfield(L, -1, "config_where");
    snprintf(out, n, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "chute.config");
    lua_pop(L, 2);
    size_t k = strlen(out);
    while (k > 0 && (out[k - 1] == ' ' || out[k - 1] == ':'))
        out[--k] = '\0';
}

int
script_geo_remote_cfg(struct script *s, int file, struct fetch_item_cfg *c, char *err,
                      size_t errlen)
{
    lua_State *L = s->L;
    int top = lua_gettop(L), rc = 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->state_ref);
    lua_getfield(L, -1, "config");
    if (!lua_istable(L, -1) || lua_getfield(L, -1, "geo") != LUA_TTABLE ||
        lua_getfield(L, -1, keys[file]) != LUA_TTABLE)
        goto done;
    int t = lua_gettop(L);
    memset(c, 0, sizeof(*c));
    c->kind = FETCH_GEO;
    c->format = file;
    c->interval = DEFAULT_INTERVAL;
    c->max_bytes = DEFAULT_MAX;
    config_where(s, c->where, sizeof(c->where));
    rc = -1;
    const char *url = lua_getfield(L, t, "url") == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    struct fetch_url u;
    char why[200];
    if (url == NULL) {
        snprintf(err, errlen, "%s: chute.config: geo.%s: a table needs url = \"https://...\" "
                 "(or give a file's path as a string)", c->where, keys[file]);
        goto done;
    }
    if (fetch_url_parse(url, &u, why, sizeof(why)) != 0 || strlen(url) >= sizeof(c->url)) {
        snprintf(err, errlen, "%s: chute.config: geo.%s.url: %s", c->where, keys[file],
                 strlen(url) >= sizeof(c->url) ? "too long" : why);
        goto done;
    }
    snprintf(c->url, sizeof(c->url), "%s", url);
    if (lua_getfield(L, t, "interval") == LUA_TNUMBER) {
        lua_Number v = lua_tonumber(L, -1);
        if (!(v >= 1 && v <= 30 * 86400)) {
            snprintf(err, errlen, "%s: chute.config: geo.%s.interval: seconds, 1..2592000",
                     c->where, keys[file]);
            goto done;
        }
        c->interval = (double)v;
    }
    if (lua_getfield(L, t, "max_size") == LUA_TNUMBER) {
        int isint;
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (!isint || v < 1024 || v > (lua_Integer)(512u << 20)) {
            snprintf(err, errlen, "%s: chute.config: geo.%s.max_size: bytes, an integer "
                     "1024..536870912", c->where, keys[file]);
            goto done;
        }
        c->max_bytes = (size_t)v;
    }
    snprintf(c->via, sizeof(c->via), "%s",
             lua_getfield(L, t, "via") == LUA_TSTRING ? lua_tostring(L, -1) : "DIRECT");
    const char *path = lua_getfield(L, t, "path") == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    char id[64];
    snprintf(id, sizeof(id), "%s-%016llx", keys[file], script_url_hash(c->url));
    if (fetch_cache_path(path, "geo", id, c->path, sizeof(c->path), why, sizeof(why)) != 0) {
        snprintf(err, errlen, "%s: chute.config: geo.%s: %s", c->where, keys[file], why);
        goto done;
    }
    snprintf(c->name, sizeof(c->name), "geo.%s", keys[file]);
    rc = 1;
done:
    lua_settop(L, top);
    return rc;
}

int
script_geo_remote_add(struct script *s, const struct fetch_item_cfg *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->nremotes; i++)
        if (strcmp(s->remotes[i].path, c->path) == 0) {
            snprintf(err, errlen, "%s: %s: cache %s is also %s's (declared at %s): give one a "
                     "path = ...", c->where, c->name, c->path, s->remotes[i].name,
                     s->remotes[i].where);
            return -1;
        }
    struct fetch_item_cfg *n = realloc(s->remotes, (s->nremotes + 1) * sizeof(*n));
    if (n == NULL) {
        snprintf(err, errlen, "geo: out of memory");
        return -1;
    }
    s->remotes = n;
    s->remotes[s->nremotes++] = *c;
    return 0;
}

/* ---- the worker's check, and the hand-off to the loop -------------------- */

/* The mmdb a check opened, waiting for script_geo_update on the loop: one
 * per cache path (a newer check replaces an older one's). */
#define PREPARED 4
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char path[4096];
    struct rules_geoip *db;
} prepared[PREPARED];

static void
prepared_put(const char *path, struct rules_geoip *db)
{
    struct rules_geoip *old = NULL;
    pthread_mutex_lock(&lock);
    int at = -1;
    for (int i = 0; i < PREPARED; i++)
        if ((prepared[i].db != NULL && strcmp(prepared[i].path, path) == 0) ||
            (at < 0 && prepared[i].db == NULL))
            at = i;
    if (at < 0)
        at = 0; /* more remote mmdb files than slots: cannot happen (2 kinds), but bounded */
    old = prepared[at].db;
    prepared[at].db = db;
    snprintf(prepared[at].path, sizeof(prepared[at].path), "%s", path);
    pthread_mutex_unlock(&lock);
    rules_geoip_free(old);
}

struct rules_geoip *
script_geo_prepared_take(const char *path)
{
    struct rules_geoip *db = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < PREPARED && db == NULL; i++)
        if (prepared[i].db != NULL && strcmp(prepared[i].path, path) == 0) {
            db = prepared[i].db;
            prepared[i].db = NULL;
        }
    pthread_mutex_unlock(&lock);
    return db;
}

static int
count_site(void *arg, size_t want, enum rules_geosite_kind kind, struct mem_slice v)
{
    (void)arg, (void)want, (void)kind, (void)v;
    return 0;
}

int
script_geo_validate(const struct fetch_item_cfg *c, const char *buf, size_t len, char *note,
                    size_t notelen)
{
    if (c->format == SCRIPT_GEO_SITE) {
        size_t total = 0;
        struct rules_geosite_error ge;
        if (rules_geosite_read(buf, len, NULL, 0, count_site, NULL, &total, &ge) != 0) {
            snprintf(note, notelen, "not a geosite.dat: at byte %zu: %s", ge.offset, ge.msg);
            return -1;
        }
        if (total == 0) {
            snprintf(note, notelen, "not a geosite.dat: no site in %zu bytes", len);
            return -1;
        }
        snprintf(note, notelen, "%zu sites", total);
        return 0;
    }
    /* libmaxminddb reads files only: the body goes to a file of its own
     * beside the cache, mapped, then unlinked (the mapping stays). */
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.check.%ld", c->path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 && errno == ENOENT) { /* no cache folder before the first write */
        const char *t = getenv("TMPDIR");
        snprintf(tmp, sizeof(tmp), "%s/chute-geo-check.%ld", t && t[0] ? t : "/tmp",
                 (long)getpid());
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    }
    if (fd < 0) {
        snprintf(note, notelen, "checking the mmdb: %s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(note, notelen, "checking the mmdb: %s: %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            return -1;
        }
        off += (size_t)w;
    }
    close(fd);
    char why[4400];
    struct rules_geoip *db = rules_geoip_open(tmp, why, sizeof(why));
    unlink(tmp);
    if (db == NULL) {
        const char *reason = strncmp(why, tmp, strlen(tmp)) == 0 ? why + strlen(tmp) + 2 : why;
        snprintf(note, notelen, "not a usable mmdb: %.300s", reason);
        return -1;
    }
    time_t built = (time_t)rules_geoip_built(db);
    struct tm tm;
    char day[32] = "?";
    if (gmtime_r(&built, &tm) != NULL)
        strftime(day, sizeof(day), "%Y-%m-%d", &tm);
    snprintf(note, notelen, "%s, built %s", rules_geoip_type(db), day);
    prepared_put(c->path, db);
    return 0;
}
