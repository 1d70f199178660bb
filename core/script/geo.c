#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fetch/fetch.h"
#include "log/log.h"
#include "rules/geoip.h"
#include "rules/geosite.h"
#include "rules/rules.h"
#include "script/geo.h"
#include "script/geo_int.h"
#include "script/script_int.h"

/* GEOIP, IP-ASN and GEOSITE for the rules (geo.h has the contract). */

#define MAX_SITE_FILE (512u << 20)

static const char *const keys[SCRIPT_GEO_FILES] = {"mmdb", "asn", "geosite"};
static const char *const what[SCRIPT_GEO_FILES] = {
    "GEOIP rules need a country database (.mmdb)",
    "IP-ASN rules need an ASN database (.mmdb)",
    "GEOSITE rules need a geosite.dat",
};
/* mihomo's names in its home folder (and the case variants it also finds). */
static const char *const defaults[SCRIPT_GEO_FILES][2] = {
    {"Country.mmdb", "country.mmdb"},
    {"GeoLite2-ASN.mmdb", "ASN.mmdb"},
    {"GeoSite.dat", "geosite.dat"},
};


static struct script_geo *
geo_of(struct script *s)
{
    if (s->geo == NULL)
        s->geo = calloc(1, sizeof(*s->geo));
    return s->geo;
}

void
script_geo_need(struct script *s, enum script_geo_file file, const char *where)
{
    struct script_geo *g = geo_of(s);
    if (g == NULL)
        return; /* script_geo_finish reports the lack of memory */
    if (g->need[file]++ == 0)
        snprintf(g->need_where[file], sizeof(g->need_where[file]), "%s", where);
}

static void
site_free(struct script_geo_site *site)
{
    if (site == NULL)
        return;
    rules_domains_free(site->domains);
    rules_regexes_free(site->regexes);
    free(site->name);
    free(site);
}

void
script_geo_free(struct script *s)
{
    struct script_geo *g = s->geo;
    if (g == NULL)
        return;
    for (int i = 0; i < SCRIPT_GEO_FILES; i++)
        free(g->path[i]);
    rules_geoip_free(g->db[0]);
    rules_geoip_free(g->db[1]);
    for (size_t i = 0; i < g->nsites; i++)
        site_free(g->sites[i]);
    free(g->sites);
    free(g);
    s->geo = NULL;
}

/* The whole of |path|, mapped read-only (a geosite.dat is read once). */
static const uint8_t *
map_file(const char *path, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = fd < 0 ? errno : EINVAL;
        snprintf(err, errlen, "%s: %s", path, fd < 0 ? strerror(e) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (st.st_size == 0 || (uint64_t)st.st_size > MAX_SITE_FILE) {
        snprintf(err, errlen, "%s: %s (%lld bytes)", path,
                 st.st_size == 0 ? "empty file" : "larger than 512 MiB",
                 (long long)st.st_size);
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    *len = (size_t)st.st_size;
    return p;
}

/* New sets for sites[i], built from one read of the file. */
struct fill {
    struct script_geo_site **sites;
    struct rules_domains **domains;
    struct rules_regexes **regexes;
    size_t *count, *skipped;
    char (*first_skip)[96];
};

static int
on_domain(void *arg, size_t i, enum rules_geosite_kind kind, struct mem_slice v)
{
    struct fill *fl = arg;
    char re[1024], why[200];
    int rc;
    switch (kind) {
    case RULES_GEOSITE_REGEX:
        rc = -1;
        snprintf(why, sizeof(why), "regex over %zu bytes", sizeof(re) - 1);
        if (v.len < sizeof(re) && memchr(v.ptr, '\0', v.len) == NULL) {
            memcpy(re, v.ptr, v.len);
            re[v.len] = '\0';
            rc = rules_regexes_add(fl->regexes[i], re, 0, why, sizeof(why));
        }
        break;
    case RULES_GEOSITE_PLAIN:
        rc = rules_domains_add(fl->domains[i], RULES_DOMAIN_KEYWORD, v.ptr, v.len, 0);
        snprintf(why, sizeof(why), "not a usable keyword");
        break;
    default:
        rc = rules_domains_add(fl->domains[i],
                               kind == RULES_GEOSITE_FULL ? RULES_DOMAIN_EXACT : RULES_DOMAIN_SUFFIX,
                               v.ptr, v.len, 0);
        snprintf(why, sizeof(why), "not a usable domain");
        break;
    }
    if (rc == 0) {
        fl->count[i]++;
    } else if (fl->skipped[i]++ == 0) {
        snprintf(fl->first_skip[i], sizeof(fl->first_skip[i]), "'%.*s': %.40s",
                 (int)(v.len > 40 ? 40 : v.len), v.ptr, why);
    }
    return 0;
}

/* Compiles |n| sites from |path| and swaps their sets in only if every
 * one is there; -1 with |err| otherwise (the old sets stay). */
static int
fill_sites(struct script_geo_site **sites, size_t n, const char *path, char *err, size_t errlen)
{
    size_t len = 0, total = 0;
    int rc = -1;
    const uint8_t *buf = map_file(path, &len, err, errlen);
    if (buf == NULL)
        return -1;
    struct rules_geosite_want *wants = calloc(n, sizeof(*wants));
    struct fill fl = {
        .sites = sites,
        .domains = calloc(n, sizeof(*fl.domains)),
        .regexes = calloc(n, sizeof(*fl.regexes)),
        .count = calloc(n, sizeof(size_t)),
        .skipped = calloc(n, sizeof(size_t)),
        .first_skip = calloc(n, sizeof(*fl.first_skip)),
    };
    if (!wants || !fl.domains || !fl.regexes || !fl.count || !fl.skipped || !fl.first_skip) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        wants[i] = sites[i]->want;
        fl.domains[i] = rules_domains_new();
        fl.regexes[i] = rules_regexes_new();
        if (fl.domains[i] == NULL || fl.regexes[i] == NULL) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto done;
        }
    }
    struct rules_geosite_error ge;
    if (rules_geosite_read(buf, len, wants, n, on_domain, &fl, &total, &ge) != 0) {
        snprintf(err, errlen, "%s: not a geosite.dat: at byte %zu: %s", path, ge.offset, ge.msg);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (wants[i].sites == 0) {
            snprintf(err, errlen, "%s: GEOSITE,%s (%s): the file has no site '%.*s' (it has %zu "
                     "sites; names as in v2fly's domain-list-community: cn, google, "
                     "category-ads-all, ...)", path, sites[i]->name, sites[i]->where,
                     (int)wants[i].code.len, wants[i].code.ptr, total);
            goto done;
        }
        if (rules_domains_build(fl.domains[i]) != 0) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct script_geo_site *site = sites[i];
        rules_domains_free(site->domains);
        rules_regexes_free(site->regexes);
        site->domains = fl.domains[i];
        site->regexes = fl.regexes[i];
        fl.domains[i] = NULL;
        fl.regexes[i] = NULL;
        site->count = fl.count[i];
        site->skipped = fl.skipped[i];
        memcpy(site->first_skip, fl.first_skip[i], sizeof(site->first_skip));
        if (site->count == 0)
            LOG_WARN("geo: GEOSITE,%s (%s): no domain of %s matches it: the rule never matches",
                     site->name, site->where, path);
        if (site->skipped > 0)
            LOG_WARN("geo: GEOSITE,%s: %zu entries of %s left out (the first: %s)", site->name,
                     site->skipped, path, site->first_skip);
        LOG_DEBUG("geo: GEOSITE,%s: %zu entries from %s", site->name, site->count, path);
    }
    rc = 0;
done:
    for (size_t i = 0; fl.domains && fl.regexes && i < n; i++) {
        rules_domains_free(fl.domains[i]);
        rules_regexes_free(fl.regexes[i]);
    }
    free(fl.domains);
    free(fl.regexes);
    free(fl.count);
    free(fl.skipped);
    free(fl.first_skip);
    free(wants);
    munmap((void *)buf, len);
    return rc;
}

/* The configured path of |file|, else the first default that exists. */
static char *
choose_path(struct script *s, int file, int *given)
{
    lua_State *L = s->L;
    int top = lua_gettop(L);
    char *p = NULL;
    *given = 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->state_ref);
    lua_getfield(L, -1, "config");
    int type = lua_istable(L, -1) && lua_getfield(L, -1, "geo") == LUA_TTABLE
                   ? lua_getfield(L, -1, keys[file])
                   : LUA_TNIL;
    if (type == LUA_TSTRING) {
        p = script_config_path(s, lua_tostring(L, -1));
        *given = 1;
    }
    lua_settop(L, top);
    struct fetch_item_cfg c;
    char err[300];
    if (type == LUA_TTABLE) { /* remote: its cache (an error is open_file's to report) */
        *given = 1;
        if (script_geo_remote_cfg(s, file, &c, err, sizeof(err)) == 1)
            p = strdup(c.path);
    }
    return p;
}

/* The first of mihomo's names that exists, else the first. */
static char *
default_path(struct script *s, int file)
{
    char *p0 = script_config_path(s, defaults[file][0]), *p1 = script_config_path(s, defaults[file][1]);
    if (p0 != NULL && p1 != NULL && access(p0, F_OK) != 0 && access(p1, F_OK) == 0) {
        free(p0);
        return p1;
    }
    free(p1);
    return p0;
}

int
script_geo_available(struct script *s, enum script_geo_file file)
{
    int given;
    char *p = choose_path(s, file, &given);
    if (!given) {
        free(p);
        p = default_path(s, file);
        given = p != NULL && access(p, F_OK) == 0;
    }
    free(p);
    return given;
}

static int
open_file(struct script *s, struct script_geo *g, int file, char *err, size_t errlen)
{
    struct fetch_item_cfg rc;
    int remote = script_geo_remote_cfg(s, file, &rc, err, errlen);
    if (remote < 0 || (remote && script_geo_remote_add(s, &rc, err, errlen) != 0))
        return -1;
    g->remote[file] = remote;
    if (remote && access(rc.path, F_OK) != 0) {
        LOG_WARN("%s: geo.%s: no cache yet (%s): %s until the first fetch", rc.where, keys[file],
                 rc.path, file == SCRIPT_GEO_SITE ? "GEOSITE rules match nothing"
                          : file == SCRIPT_GEO_ASN ? "IP-ASN rules match nothing"
                                                   : "GEOIP rules match nothing (but GEOIP,LAN)");
        g->given[file] = 1;
        g->path[file] = strdup(rc.path);
        return g->path[file] != NULL ? 0 : (snprintf(err, errlen, "geo: out of memory"), -1);
    }
    g->path[file] = choose_path(s, file, &g->given[file]);
    if (!g->given[file]) {
        if (g->need[file] == 0)
            return 0;
        g->path[file] = default_path(s, file);
    }
    if (g->path[file] == NULL) {
        snprintf(err, errlen, "geo: out of memory");
        return -1;
    }
    char why[600];
    if (file == SCRIPT_GEO_SITE) {
        if (g->nsites == 0)
            return 0;
        if (fill_sites(g->sites, g->nsites, g->path[file], why, sizeof(why)) == 0)
            return 0;
    } else {
        g->db[file] = rules_geoip_open(g->path[file], why, sizeof(why));
        if (g->db[file] != NULL) {
            /* A file given for the other job loads, and its rules never match. */
            const char *type = rules_geoip_type(g->db[file]);
            int country = strcasestr(type, "Country") || strcasestr(type, "City");
            int asn_only = strcasestr(type, "ASN") && !country; /* "geo-whois-asn-country" */
            if (file == SCRIPT_GEO_MMDB ? asn_only : country)
                LOG_WARN("geo: geo.%s: %s is a %s database: %s rules will not match (it belongs "
                         "in geo.%s)", keys[file], g->path[file], type,
                         file == SCRIPT_GEO_ASN ? "IP-ASN" : "GEOIP", keys[!file]);
            LOG_DEBUG("geo: %s: %s, built %llu", g->path[file], rules_geoip_type(g->db[file]),
                      (unsigned long long)rules_geoip_built(g->db[file]));
            return 0;
        }
    }
    if (remote) { /* kept out, as a remote rule set's bad cache is */
        LOG_WARN("%s: geo.%s: cache unusable: %s; its rules match nothing until the next fetch",
                 rc.where, keys[file], why);
        return 0;
    }
    if (g->need[file] > 0 && !g->given[file]) {
        snprintf(err, errlen, "%s (the first: %s): %s (geo.%s in chute.config names the file)",
                 what[file], g->need_where[file], why, keys[file]);
    } else {
        lua_State *L = s->L;
        lua_rawgeti(L, LUA_REGISTRYINDEX, s->state_ref);
        lua_getfield(L, -1, "config_where");
        snprintf(err, errlen, "%schute.config: geo.%s: %s",
                 lua_isstring(L, -1) ? lua_tostring(L, -1) : "", keys[file], why);
        lua_pop(L, 2);
    }
    return -1;
}

int
script_geo_finish(struct script *s, char *err, size_t errlen)
{
    struct script_geo *g = geo_of(s);
    if (g == NULL) {
        snprintf(err, errlen, "geo: out of memory");
        return -1;
    }
    for (int f = 0; f < SCRIPT_GEO_FILES; f++)
        if (open_file(s, g, f, err, errlen) != 0)
            return -1;
    g->finished = 1;
    return 0;
}

struct script_geo_site *
script_geo_site(struct script *s, struct mem_slice name, const char *where, char *err,
                size_t errlen)
{
    struct script_geo *g = geo_of(s);
    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < g->nsites; i++)
        if (strlen(g->sites[i]->name) == name.len &&
            strncasecmp(g->sites[i]->name, name.ptr, name.len) == 0)
            return g->sites[i];
    struct script_geo_site *site = calloc(1, sizeof(*site));
    struct script_geo_site **v = realloc(g->sites, (g->nsites + 1) * sizeof(*v));
    if (v != NULL)
        g->sites = v;
    if (site == NULL || v == NULL || (site->name = strndup(name.ptr, name.len)) == NULL ||
        (site->domains = rules_domains_new()) == NULL ||
        (site->regexes = rules_regexes_new()) == NULL || rules_domains_build(site->domains)) {
        site_free(site);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (rules_geosite_want_parse(mem_slice(site->name, name.len), &site->want, err, errlen)) {
        site_free(site);
        return NULL;
    }
    snprintf(site->where, sizeof(site->where), "%s", where);
    if (g->finished) { /* after the load: compiled now, or refused */
        if (g->path[SCRIPT_GEO_SITE] == NULL) {
            int given;
            g->path[SCRIPT_GEO_SITE] = choose_path(s, SCRIPT_GEO_SITE, &given);
            g->given[SCRIPT_GEO_SITE] = given;
        }
        if (g->path[SCRIPT_GEO_SITE] == NULL)
            g->path[SCRIPT_GEO_SITE] = default_path(s, SCRIPT_GEO_SITE);
        /* A remote file with no usable cache yet: empty until its fetch. */
        int later = g->remote[SCRIPT_GEO_SITE] && g->path[SCRIPT_GEO_SITE] != NULL &&
                    access(g->path[SCRIPT_GEO_SITE], F_OK) != 0;
        if (g->path[SCRIPT_GEO_SITE] == NULL ||
            (!later && fill_sites(&site, 1, g->path[SCRIPT_GEO_SITE], err, errlen) != 0)) {
            site_free(site);
            return NULL;
        }
    }
    g->sites[g->nsites++] = site;
    if (!g->finished)
        script_geo_need(s, SCRIPT_GEO_SITE, where);
    return site;
}

int
script_geo_site_match(const struct script_geo_site *site, const char *host, size_t len)
{
    uint32_t tag;
    return rules_domains_match(site->domains, host, len, &tag) ||
           rules_regexes_match(site->regexes, host, len, &tag);
}


int
script_geo_update(struct script *s, const char *which, const char *path, char *err,
                  size_t errlen)
{
    for (int f = 0; f < SCRIPT_GEO_FILES; f++)
        if (strcmp(which, keys[f]) == 0)
            return script_geo_replace(s, (enum script_geo_file)f, path, err, errlen);
    snprintf(err, errlen, "geo: no file kind '%s' (mmdb, asn, geosite)", which);
    return -1;
}

int
script_geo_replace(struct script *s, enum script_geo_file file, const char *path, char *err,
                   size_t errlen)
{
    struct script_geo *g = geo_of(s);
    char *p = g != NULL ? strdup(path) : NULL;
    if (p == NULL) {
        snprintf(err, errlen, "geo: out of memory");
        return -1;
    }
    if (file == SCRIPT_GEO_SITE) {
        if (g->nsites > 0 && fill_sites(g->sites, g->nsites, p, err, errlen) != 0) {
            free(p);
            return -1;
        }
    } else {
        /* One opened off the loop by the fetch's check, if it has one. */
        struct rules_geoip *db = script_geo_prepared_take(p);
        if (db == NULL)
            db = rules_geoip_open(p, err, errlen);
        if (db == NULL) {
            free(p);
            return -1;
        }
        rules_geoip_free(g->db[file]);
        g->db[file] = db;
    }
    free(g->path[file]);
    g->path[file] = p;
    g->memo_flow = NULL; /* what it remembered came from the old file */
    return 0;
}
