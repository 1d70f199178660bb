#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/log.h"
#include "script/hint.h"
#include "script/script_int.h"

/* Defaults a bundle gets for what it leaves out. */
#define DEFAULT_CONNECT_TIMEOUT 10.0
#define DEFAULT_IDLE_TIMEOUT 300.0
#define DEFAULT_BUDGET 100000u
#define DEFAULT_UDP_TIMEOUT 60.0
#define DEFAULT_DECISION_CACHE 4096
/* With auto_route, upstream sockets need a mark to skip the TUN's table. */
#define DEFAULT_AUTO_ROUTE_FWMARK 0x2022
#define DEFAULT_LUA_MEMORY_MB 64
#define DEFAULT_MITM_MAX_BODY (128u << 10)
#define DEFAULT_BYPASS_SECONDS 300.0

int
script_check_address(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text)
        return -1;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || colon[1] < '0' || colon[1] > '9' || port < 0 || port > 65535)
        return -1;
    char host[64];
    const char *h = text;
    size_t hl = (size_t)(colon - text);
    if (h[0] == '[') {
        if (hl < 2 || h[hl - 1] != ']')
            return -1;
        h++;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (text[0] != '[' && inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        *len = sizeof(*s4);
        return 0;
    }
    if (text[0] == '[' && inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*s6);
        return 0;
    }
    return -1;
}

static double
opt_number(lua_State *L, int t, const char *k, double def)
{
    double v = def;
    if (lua_getfield(L, t, k) == LUA_TNUMBER)
        v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Reads a validated list of CIDR strings at the top of the stack. */
static size_t
read_cidrs(lua_State *L, struct ip_cidr *out, size_t max)
{
    size_t n = 0;
    for (lua_Integer i = 1; n < max && lua_rawgeti(L, -1, i) == LUA_TSTRING; i++) {
        ip_cidr_parse(lua_tostring(L, -1), &out[n++]);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return n;
}

static void
read_tun(lua_State *L, int t, struct script_tun *tun)
{
    if (lua_getfield(L, t, "tun") != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    int k = lua_gettop(L);
    tun->enabled = 1;
    snprintf(tun->name, sizeof(tun->name), "chute0");
    tun->batch = 64;
    if (lua_getfield(L, k, "name") == LUA_TSTRING)
        snprintf(tun->name, sizeof(tun->name), "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    if (lua_getfield(L, k, "address") == LUA_TTABLE)
        tun->num_addrs = read_cidrs(L, tun->addrs, SCRIPT_TUN_MAX_ADDRS);
    else
        lua_pop(L, 1);
    if (lua_getfield(L, k, "exclude") == LUA_TTABLE) {
        size_t n = lua_rawlen(L, -1);
        tun->exclude = calloc(n ? n : 1, sizeof(*tun->exclude));
        tun->num_exclude = tun->exclude ? read_cidrs(L, tun->exclude, n) : (lua_pop(L, 1), 0);
    } else {
        lua_pop(L, 1);
    }
    tun->mtu = (int)opt_number(L, k, "mtu", 0);
    tun->batch = (int)opt_number(L, k, "batch", tun->batch);
    lua_getfield(L, k, "auto_route");
    tun->auto_route = lua_toboolean(L, -1);
    lua_pop(L, 1);
    tun->offload = lua_getfield(L, k, "offload") == LUA_TNIL || lua_toboolean(L, -1);
    lua_pop(L, 2);
}


static int
read_listener(lua_State *L, int listen, const char *k, struct script_listener *out, char *err,
              size_t errlen)
{
    if (lua_getfield(L, listen, k) != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    int t = lua_gettop(L);
    if (lua_getfield(L, t, "address") != LUA_TSTRING) {
        snprintf(err, errlen, "chute.config: listen.%s needs an address", k);
        lua_pop(L, 2);
        return -1;
    }
    snprintf(out->text, sizeof(out->text), "%s", lua_tostring(L, -1));
    script_check_address(out->text, &out->addr, &out->addrlen);
    out->enabled = 1;
    lua_pop(L, 1);
    if (lua_getfield(L, t, "users") == LUA_TTABLE) {
        size_t n = 0;
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            n++;
            lua_pop(L, 1);
        }
        out->users = calloc(2 * n + 1, sizeof(char *));
        lua_pushnil(L);
        while (out->users != NULL && lua_next(L, -2)) {
            out->users[2 * out->num_users] = strdup(lua_tostring(L, -2));
            out->users[2 * out->num_users + 1] = strdup(lua_tostring(L, -1));
            out->num_users++;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 2);
    return 0;
}

/* control = { listen = "127.0.0.1:9090", secret = "...", cors = "..." }
 * (types checked by lua/chute.lua). A listen address off loopback needs a
 * secret: anyone who reaches it could otherwise close flows and pick
 * proxies. */
static int
read_control(lua_State *L, int t, struct script_control *ctl, char *err, size_t errlen)
{
    if (lua_getfield(L, t, "control") != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    int k = lua_gettop(L);
    ctl->enabled = 1;
    snprintf(ctl->listen, sizeof(ctl->listen), "127.0.0.1:9090");
    if (lua_getfield(L, k, "listen") == LUA_TSTRING)
        snprintf(ctl->listen, sizeof(ctl->listen), "%s", lua_tostring(L, -1));
    if (lua_getfield(L, k, "secret") == LUA_TSTRING)
        snprintf(ctl->secret, sizeof(ctl->secret), "%s", lua_tostring(L, -1));
    if (lua_getfield(L, k, "cors") == LUA_TSTRING)
        snprintf(ctl->cors, sizeof(ctl->cors), "%s", lua_tostring(L, -1));
    lua_pop(L, 4);
    script_check_address(ctl->listen, &ctl->addr, &ctl->addrlen);
    int loopback = 0;
    if (ctl->addr.ss_family == AF_INET)
        loopback = (ntohl(((struct sockaddr_in *)&ctl->addr)->sin_addr.s_addr) >> 24) == 127;
    else if (ctl->addr.ss_family == AF_INET6)
        loopback = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ctl->addr)->sin6_addr);
    if (!loopback && ctl->secret[0] == '\0') {
        snprintf(err, errlen,
                 "chute.config: control.listen \"%s\" is not a loopback address: give "
                 "control.secret, or listen on 127.0.0.1",
                 ctl->listen);
        return -1;
    }
    return 0;
}

/* listen.reverse, checked by chute.lua: "ADDR -> https://HOST[:PORT]". */
static int
read_reverse(lua_State *L, int listen, struct script_config *c, char *err, size_t errlen)
{
    if (lua_getfield(L, listen, "reverse") != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    size_t n = lua_rawlen(L, -1);
    c->reverse = calloc(n ? n : 1, sizeof(*c->reverse));
    if (c->reverse == NULL) {
        snprintf(err, errlen, "chute.config: out of memory");
        lua_pop(L, 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        const char *v = lua_tostring(L, -1);
        struct script_reverse *r = &c->reverse[c->nreverse];
        const char *arrow = strstr(v, "->"), *url = arrow ? strstr(arrow, "https://") : NULL;
        size_t al = arrow ? (size_t)(arrow - v) : 0;
        while (al > 0 && (v[al - 1] == ' ' || v[al - 1] == '\t'))
            al--;
        while (al > 0 && (*v == ' ' || *v == '\t'))
            v++, al--;
        if (url == NULL || al == 0 || al >= sizeof(r->text)) {
            snprintf(err, errlen, "chute.config: listen.reverse[%zu]: bad entry", i + 1);
            lua_pop(L, 2);
            return -1;
        }
        memcpy(r->text, v, al);
        r->text[al] = '\0';
        script_check_address(r->text, &r->addr, &r->addrlen);
        const char *h = url + 8, *end = h + strcspn(h, "/ \t");
        const char *colon = h[0] == '[' ? strchr(h, ']') : memchr(h, ':', (size_t)(end - h));
        if (h[0] == '[' && colon != NULL) {
            snprintf(r->host, sizeof(r->host), "%.*s", (int)(colon - h - 1), h + 1);
            colon = colon[1] == ':' ? colon + 1 : NULL;
        } else {
            size_t hl = colon ? (size_t)(colon - h) : (size_t)(end - h);
            snprintf(r->host, sizeof(r->host), "%.*s", (int)hl, h);
        }
        r->port = colon != NULL ? (uint16_t)strtol(colon + 1, NULL, 10) : 443;
        c->nreverse++;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 0;
}

/* The list of strings at the top of the stack (checked by chute.lua), as
 * malloc'd copies; pops it. */
static char **
read_strings(lua_State *L, size_t *n)
{
    size_t len = lua_rawlen(L, -1);
    char **v = calloc(len ? len : 1, sizeof(*v));
    *n = 0;
    for (size_t i = 0; v != NULL && i < len; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        if ((v[*n] = strdup(lua_tostring(L, -1))) != NULL)
            (*n)++;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return v;
}

/* "ca.pem" -> "ca.key": the key beside its certificate. */
static char *
key_beside(const char *ca)
{
    const char *dot = strrchr(ca, '.'), *slash = strrchr(ca, '/');
    size_t stem = dot != NULL && (slash == NULL || dot > slash) ? (size_t)(dot - ca) : strlen(ca);
    char *out = malloc(stem + 5);
    if (out != NULL) {
        memcpy(out, ca, stem);
        memcpy(out + stem, ".key", 5);
    }
    return out;
}

static int
check_readable(struct script *s, int st, const char *key, const char *path, char *err,
               size_t errlen)
{
    if (path != NULL && access(path, R_OK) == 0)
        return 0;
    int e = path != NULL ? errno : ENOMEM;
    lua_getfield(s->L, st, "config_where");
    snprintf(err, errlen, "%schute.config: mitm.%s: cannot read %s (%s)",
             lua_isstring(s->L, -1) ? lua_tostring(s->L, -1) : "", key, path ? path : "?",
             strerror(e));
    lua_pop(s->L, 1);
    return -1;
}

/* mitm = { ... } of the config table at |t| (validated by chute.lua). */
static int
read_mitm(struct script *s, int st, int t, char *err, size_t errlen)
{
    lua_State *L = s->L;
    struct script_mitm *m = &s->cfg.mitm;
    m->bypass_seconds = DEFAULT_BYPASS_SECONDS;
    m->block_quic = 1;
    m->max_body = DEFAULT_MITM_MAX_BODY;
    if (lua_getfield(L, t, "mitm") != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    int k = lua_gettop(L);
    m->enabled = 1;
    if (lua_getfield(L, k, "hosts") == LUA_TTABLE)
        m->hosts = read_strings(L, &m->nhosts);
    else
        lua_pop(L, 1);
    if (lua_getfield(L, k, "skip_verify_hosts") == LUA_TTABLE)
        m->skip_verify = read_strings(L, &m->nskip);
    else
        lua_pop(L, 1);
    lua_getfield(L, k, "auto_bypass");
    m->auto_bypass = lua_toboolean(L, -1);
    lua_pop(L, 1);
    m->block_quic = lua_getfield(L, k, "block_quic") == LUA_TNIL || lua_toboolean(L, -1);
    lua_pop(L, 1);
    m->bypass_seconds = opt_number(L, k, "bypass_seconds", m->bypass_seconds);
    m->max_body = (size_t)opt_number(L, k, "max_body", (double)m->max_body);
    m->max_buffered = (size_t)opt_number(L, k, "max_buffered", 0);
    int rc = 0;
    if (lua_getfield(L, k, "ca") == LUA_TSTRING) {
        m->ca = script_config_path(s, lua_tostring(L, -1));
        int given = lua_getfield(L, k, "ca_key") == LUA_TSTRING;
        if (given)
            m->ca_key = script_config_path(s, lua_tostring(L, -1));
        else
            m->ca_key = m->ca ? key_beside(m->ca) : NULL;
        lua_pop(L, 1);
        rc = check_readable(s, st, "ca", m->ca, err, errlen);
        if (rc == 0)
            rc = check_readable(s, st, given ? "ca_key" : "ca_key (by default the .key beside mitm.ca)",
                                m->ca_key, err, errlen);
    } else if (lua_getfield(L, k, "ca_key") == LUA_TSTRING) {
        lua_getfield(L, st, "config_where");
        snprintf(err, errlen, "%schute.config: mitm.ca_key needs mitm.ca (the certificate)",
                 lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
        lua_pop(L, 1);
        rc = -1;
    }
    lua_settop(L, k - 1);
    if (rc == 0 && m->nskip > 0) {
        char list[512] = "";
        size_t off = 0;
        for (size_t i = 0; i < m->nskip && off < sizeof(list); i++)
            off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
                                    m->skip_verify[i]);
        LOG_WARN("mitm: certificate checks are off for %s (mitm.skip_verify_hosts): anyone on "
                 "the path to those origins can read and change their traffic", list);
    }
    return rc;
}

static void
free_strings(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void
free_mitm(struct script_mitm *m)
{
    free_strings(m->hosts, m->nhosts);
    free_strings(m->skip_verify, m->nskip);
    free(m->ca);
    free(m->ca_key);
    memset(m, 0, sizeof(*m));
}

int
script_config_read(struct script *s, char *err, size_t errlen)
{
    lua_State *L = s->L;
    struct script_config *c = &s->cfg;
    c->log_level = -1;
    c->fallback = FLOW_POLICY_DIRECT;
    c->connect_timeout = DEFAULT_CONNECT_TIMEOUT;
    c->idle_timeout = DEFAULT_IDLE_TIMEOUT;
    c->budget = DEFAULT_BUDGET;
    c->udp_timeout = DEFAULT_UDP_TIMEOUT;
    c->lua_memory = (size_t)DEFAULT_LUA_MEMORY_MB << 20;

    lua_rawgeti(L, LUA_REGISTRYINDEX, s->state_ref);
    int st = lua_gettop(L);
    lua_getfield(L, st, "hooks");
    if (lua_getfield(L, -1, "route") == LUA_TFUNCTION)
        s->route_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    else
        lua_pop(L, 1);
    if (lua_getfield(L, -1, "on_dns") == LUA_TFUNCTION)
        s->on_dns_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    else
        lua_pop(L, 1);
    lua_pop(L, 1);

    script_config_site(s, st);
    lua_getfield(L, st, "config");
    int t = lua_gettop(L);
    int rc = 0;
    if (lua_getfield(L, t, "log_level") == LUA_TSTRING)
        c->log_level = log_level_parse(lua_tostring(L, -1));
    lua_pop(L, 1);
    script_log_read(s, t);
    if (lua_getfield(L, t, "fallback") == LUA_TSTRING) {
        /* Checked here, not in chute.config(): proxies may be declared after it. */
        c->fallback = script_policy_lookup(s, lua_tostring(L, -1));
        if (c->fallback < 0) {
            char where[512];
            script_config_key_where(s, "fallback", where, sizeof(where));
            char hint[160];
            script_policy_hint(s, lua_tostring(L, -1), hint, sizeof(hint));
            snprintf(err, errlen, "%schute.config: fallback: unknown policy \"%s\"%s%s", where,
                     lua_tostring(L, -1), hint[0] ? ": " : "", hint);
            lua_settop(L, st - 1);
            return -1;
        }
    }
    lua_pop(L, 1);
    if (lua_getfield(L, t, "timeouts") == LUA_TTABLE) {
        c->connect_timeout = opt_number(L, -1, "connect", c->connect_timeout);
        c->idle_timeout = opt_number(L, -1, "idle", c->idle_timeout);
        c->udp_timeout = opt_number(L, -1, "udp", c->udp_timeout);
    }
    lua_pop(L, 1);
    c->budget = (uint32_t)opt_number(L, t, "budget", c->budget);
    c->decision_cache = (size_t)opt_number(L, t, "decision_cache", DEFAULT_DECISION_CACHE);
    c->lua_memory = (size_t)opt_number(L, t, "lua_memory_mb", DEFAULT_LUA_MEMORY_MB) << 20;
    c->memory_limit = script_config_size(L, t, "memory_limit");
    read_tun(L, t, &c->tun);
    script_dns_read(s, t, err, errlen);
    if (read_mitm(s, st, t, err, errlen) != 0) {
        lua_settop(L, st - 1);
        return -1;
    }
    if (lua_getfield(L, t, "outbound") == LUA_TTABLE) {
        if (lua_getfield(L, -1, "interface") == LUA_TSTRING)
            snprintf(c->out_interface, sizeof(c->out_interface), "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        c->out_fwmark = (uint32_t)opt_number(L, -1, "fwmark", 0);
    }
    lua_pop(L, 1);
    if (read_control(L, t, &c->control, err, errlen) != 0) {
        lua_getfield(L, st, "config_where");
        if (lua_isstring(L, -1)) {
            char tmp[512];
            snprintf(tmp, sizeof(tmp), "%s%s", lua_tostring(L, -1), err);
            snprintf(err, errlen, "%s", tmp);
        }
        lua_settop(L, st - 1);
        return -1;
    }
    if (c->tun.auto_route && c->out_fwmark == 0)
        c->out_fwmark = DEFAULT_AUTO_ROUTE_FWMARK;
    if (lua_getfield(L, t, "listen") == LUA_TTABLE) {
        int l = lua_gettop(L);
        rc = read_listener(L, l, "socks", &c->socks, err, errlen);
        if (rc == 0)
            rc = read_listener(L, l, "http", &c->http, err, errlen);
        if (rc == 0)
            rc = read_listener(L, l, "mixed", &c->mixed, err, errlen);
        if (rc == 0)
            rc = script_mixed_check(s, st, err, errlen);
        if (rc == 0)
            rc = read_reverse(L, l, c, err, errlen);
    }
    lua_settop(L, st - 1);
    return rc;
}

static void
free_listener(struct script_listener *l)
{
    for (size_t i = 0; i < 2 * l->num_users; i++)
        free(l->users[i]);
    free(l->users);
    l->users = NULL;
    l->num_users = 0;
}

void
script_config_free(struct script_config *cfg)
{
    script_dns_free(&cfg->dns);
    free_mitm(&cfg->mitm);
    free(cfg->tun.exclude);
    cfg->tun.exclude = NULL;
    free_listener(&cfg->socks);
    free_listener(&cfg->http);
    free_listener(&cfg->mixed);
    free(cfg->log_file);
    cfg->log_file = NULL;
    free(cfg->reverse);
    cfg->reverse = NULL;
    cfg->nreverse = 0;
}
