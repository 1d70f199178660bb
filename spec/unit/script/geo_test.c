/* The seam remote geo files will use (script/geo.h: script_geo_replace):
 * a bundle loaded with one country mmdb decides by it; a new file swapped
 * in changes the decisions; a file that cannot be used is refused and the
 * old one stays. And GEOSITE sites asked for after the load (a rule list
 * swapped in later) are compiled then. Files from spec/fixtures/geo. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "flow/flow.h"
#include "script/geo.h"
#include "script/script.h"

static char fixtures[4096];

static const char *
fixture(const char *name)
{
    static char p[4200];
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;
    snprintf(fixtures, sizeof(fixtures), "%.*s/../../fixtures/geo", dir, slash ? __FILE__ : ".");
    snprintf(p, sizeof(p), "%s/%s", fixtures, name);
    return p;
}

static const char *
decide(struct script *s, const char *ip)
{
    struct flow f;
    memset(&f, 0, sizeof(f));
    f.id = 1;
    f.network = FLOW_TCP;
    f.inbound = FLOW_IN_SOCKS;
    f.dst.kind = FLOW_ADDR_IP4;
    f.dst.port = 443;
    assert_int_equal(inet_pton(AF_INET, ip, f.dst.ip), 1);
    script_route(s, &f);
    return script_policy_name(s, f.policy);
}

static void
test_replace(void **state)
{
    (void)state;
    char main_lua[8192], err[1024];
    snprintf(main_lua, sizeof(main_lua),
             "local chute = require \"chute\"\n"
             "chute.config { geo = { mmdb = \"%s\" } }\n"
             "chute.route = chute.rules { {\"GEOIP\", \"CN\", \"REJECT\"}, {\"FINAL\", \"DIRECT\"} }\n",
             fixture("country.mmdb"));
    struct script *s = script_load(NULL, main_lua, err, sizeof(err));
    if (s == NULL)
        fail_msg("%s", err);
    assert_string_equal(decide(s, "114.114.114.114"), "REJECT");
    assert_string_equal(decide(s, "10.9.8.7"), "DIRECT");

    /* meta4.mmdb: 10.0.0.0/8 is cn+private; 114.114/16 is in no network. */
    assert_int_equal(script_geo_replace(s, SCRIPT_GEO_MMDB, fixture("meta4.mmdb"), err,
                                        sizeof(err)), 0);
    assert_string_equal(decide(s, "114.114.114.114"), "DIRECT");
    assert_string_equal(decide(s, "10.9.8.7"), "REJECT");

    /* Refused: the old file stays in use. */
    assert_int_equal(script_geo_replace(s, SCRIPT_GEO_MMDB, fixture("README"), err, sizeof(err)),
                     -1);
    char want[8400];
    snprintf(want, sizeof(want), "%s: The MaxMind DB file contains invalid metadata",
             fixture("README"));
    assert_string_equal(err, want);
    assert_int_equal(script_geo_replace(s, SCRIPT_GEO_MMDB, fixture("none.mmdb"), err,
                                        sizeof(err)), -1);
    assert_string_equal(decide(s, "10.9.8.7"), "REJECT");

    /* The public door (script.h), by chute.config's key names. */
    assert_int_equal(script_geo_update(s, "mmdb", fixture("country.mmdb"), err, sizeof(err)), 0);
    assert_string_equal(decide(s, "114.114.114.114"), "REJECT");
    assert_int_equal(script_geo_update(s, "geoip", fixture("country.mmdb"), err, sizeof(err)), -1);
    assert_string_equal(err, "geo: no file kind 'geoip' (mmdb, asn, geosite)");
    script_free(s);
}

static void
test_site_after_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/geo_test.XXXXXX", path[4200], err[1024];
    assert_non_null(mkdtemp(dir));
    /* A two-site geosite.dat, as spec/fixtures/geo/mkgeosite.py writes it:
     * [A] domain:a.test  [B] full:b.test */
    static const uint8_t dat[] = {0x0a, 0x0b, 0x0a, 0x01, 'A',  0x12, 0x06, 0x08, 0x02,
                                  0x12, 0x02, 'a',  't',  0x0a, 0x0b, 0x0a, 0x01, 'B',
                                  0x12, 0x06, 0x08, 0x03, 0x12, 0x02, 'b',  't'};
    snprintf(path, sizeof(path), "%s/GeoSite.dat", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(dat, 1, sizeof(dat), f), sizeof(dat));
    fclose(f);
    snprintf(path, sizeof(path), "%s/main.lua", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("local chute = require \"chute\"\n"
          "chute.route = chute.rules { {\"GEOSITE\", \"a\", \"REJECT\"}, {\"FINAL\", \"DIRECT\"} }\n",
          f);
    fclose(f);
    struct script *s = script_load(dir, NULL, err, sizeof(err));
    if (s == NULL)
        fail_msg("%s", err);
    /* After the load: compiled at once from the same file, or refused. */
    struct script_geo_site *b = script_geo_site(s, mem_slice("b", 1), "later.list:1", err,
                                                sizeof(err));
    assert_non_null(b);
    assert_true(script_geo_site_match(b, "bt", 2));
    assert_false(script_geo_site_match(b, "x.bt", 4)); /* full: the name only */
    assert_null(script_geo_site(s, mem_slice("c", 1), "later.list:2", err, sizeof(err)));
    assert_non_null(strstr(err, "the file has no site 'c' (it has 2 sites"));
    script_free(s);
    snprintf(path, sizeof(path), "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace),
        cmocka_unit_test(test_site_after_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
