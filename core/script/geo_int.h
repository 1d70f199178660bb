#ifndef CHUTE_SCRIPT_GEO_INT_H
#define CHUTE_SCRIPT_GEO_INT_H

/* Private to geo.c (the files, the sites, the swaps) and geo_match.c (the
 * lookups of a flow's addresses): the script's GEO state. */

#include <stdint.h>

#include "rules/geoip.h"
#include "rules/geosite.h"
#include "script/geo.h"

struct rules_domains;
struct rules_regexes;

#define SCRIPT_GEO_MEMO 8 /* addresses of one flow remembered */

struct script_geo_site {
    char *name;                     /* as written, the want's slices point into it */
    struct rules_geosite_want want;
    struct rules_domains *domains;  /* Full, RootDomain (suffix) and Plain (keyword) */
    struct rules_regexes *regexes;  /* Regex */
    size_t count, skipped;
    char where[96];
    char first_skip[96];
};

struct memo_entry {
    uint8_t kind;       /* 0 country, 1 ASN */
    uint8_t family;
    uint8_t addr[16];
    uint8_t n;          /* codes, or 1 when the ASN is known */
    uint32_t asn;
    const char *codes[RULES_GEOIP_MAX_CODES]; /* the database's (rules_geoip_codes) */
};

struct script_geo {
    char *path[SCRIPT_GEO_FILES];   /* resolved; NULL until finish */
    int given[SCRIPT_GEO_FILES];    /* named in chute.config */
    int remote[SCRIPT_GEO_FILES];   /* geo.<file> = { url = ... } */
    struct rules_geoip *db[2];      /* MMDB, ASN */
    unsigned need[SCRIPT_GEO_FILES];
    char need_where[SCRIPT_GEO_FILES][96];
    struct script_geo_site **sites;
    size_t nsites;
    int finished;
    const struct flow *memo_flow;   /* the flow whose lookups memo[] holds */
    uint64_t memo_id;
    unsigned nmemo;
    struct memo_entry memo[SCRIPT_GEO_MEMO];
};

#endif
