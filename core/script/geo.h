#ifndef CHUTE_SCRIPT_GEO_H
#define CHUTE_SCRIPT_GEO_H

/* Private to core/script: GEOIP, SRC-GEOIP, IP-ASN, SRC-IP-ASN and
 * GEOSITE for chute.rules and rule lists (geo.c). The files come from
 * chute.config's geo = { mmdb = ..., asn = ..., geosite = ... } (paths
 * relative to the bundle, or absolute), or by default the names mihomo
 * keeps in its home folder, in the bundle. Rules register what they need
 * while main.lua runs; script_geo_finish, once it has run, opens the files
 * that are given or needed (a missing or corrupt one fails the load with
 * its path and the reason) and compiles the GEOSITE names asked for, and
 * only those, into C domain sets. */

#include <stddef.h>
#include <stdint.h>

#include "mem/slice.h"

struct script;
struct flow;

enum script_geo_file { SCRIPT_GEO_MMDB, SCRIPT_GEO_ASN, SCRIPT_GEO_SITE, SCRIPT_GEO_FILES };

/* A rule at |where| ("chute.rules: rule 3", "lists/a.list:7") needs |file|. */
void script_geo_need(struct script *s, enum script_geo_file file, const char *where);

/* Whether |file| is named in chute.config (called before) or lies in the
 * bundle under its default name: a rule list's geo lines are left out
 * with a warning when it is not, as lines chute cannot evaluate are. */
int script_geo_available(struct script *s, enum script_geo_file file);

/* GEOSITE,name ("cn", "google@ads"): the site's sets, shared by every rule
 * that names it; filled by script_geo_finish, or at once after the load
 * (a rule list swapped in later). NULL with |err| for a bad name, or
 * after the load for a file or a name that is not there. Owned by the
 * script. */
struct script_geo_site;
struct script_geo_site *script_geo_site(struct script *s, struct mem_slice name,
                                        const char *where, char *err, size_t errlen);
int script_geo_site_match(const struct script_geo_site *site, const char *host, size_t len);

/* After main.lua: -1 with |err| when a file cannot be used. */
int script_geo_finish(struct script *s, char *err, size_t errlen);
void script_geo_free(struct script *s);

/* GEOIP,|code| (upper-cased; "LAN" needs no file) / IP-ASN,|asn| against
 * |f|'s destination (a named flow's resolved addresses unless
 * |no_resolve|; reaching one unresolved marks it, as IP-CIDR does), or its
 * source with |src|. Each address is looked up once per flow. */
int script_geo_country(struct script *s, struct flow *f, const char *code, int src,
                       int no_resolve);
int script_geo_asn(struct script *s, struct flow *f, uint32_t asn, int src, int no_resolve);

/* Before route(): starts loading what a GEOIP or IP-ASN lookup of |f|'s
 * destination address reads first (nothing for a named flow, or without
 * a database), so that its cache miss overlaps the call's set-up. */
void script_geo_prefetch(struct script *s, const struct flow *f);

/* geo_remote.c: chute.config's geo.<file> given as { url = ..., interval,
 * via, path, max_size }: 1 with |c| filled (kind FETCH_GEO, format the
 * file, path its cache), 0 when it is not a table, -1 with |err|. */
struct fetch_item_cfg;
int script_geo_remote_cfg(struct script *s, int file, struct fetch_item_cfg *c, char *err,
                          size_t errlen);
/* Adds |c| to the bundle's remotes (script_remotes): 0, or -1 with |err|. */
int script_geo_remote_add(struct script *s, const struct fetch_item_cfg *c, char *err,
                          size_t errlen);
/* Any thread (the fetch's worker): whether |buf| is a usable file of
 * |c|'s kind; an mmdb is opened, and kept for script_geo_prepared_take.
 * 0 with |note| ("GeoLite2-Country, built 2026-11-30", "1420 sites"), or
 * -1 with |note| saying why not. */
int script_geo_validate(const struct fetch_item_cfg *c, const char *buf, size_t len, char *note,
                        size_t notelen);
/* The mmdb the last check of cache |path| opened, or NULL; the caller's. */
struct rules_geoip *script_geo_prepared_take(const char *path);

/* The seam for remote, auto-updated files (script.h: script_geo_update
 * is the door from outside core/script): opens |path| as |file| (a
 * country or ASN mmdb, or a geosite.dat whose sites are all compiled
 * again) and, only if that succeeds, swaps it in for the one in use.
 * -1 with |err|: the old one stays. The engine must drop its decision
 * cache after a swap (decisions may change). Call from the loop thread,
 * between route() calls. */
int script_geo_replace(struct script *s, enum script_geo_file file, const char *path, char *err,
                       size_t errlen);

#endif
