/* Rule-list parsers: every rule type of Surge and Clash classical lists,
 * DOMAIN-SET, Clash domain and ipcidr lists in text and YAML, comments,
 * CRLF and BOM, errors that name the line and the value, skip_invalid, and
 * format detection. */

#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rules/list.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct got {
    struct rules_entry e[64];
    char value[64][80];
    size_t n, skipped;
    int stop_at; /* return 7 from the callback on this entry (1-based) */
    struct rules_list_error err;
};

static int
collect(void *arg, const struct rules_entry *e)
{
    struct got *g = arg;

    assert_true(g->n < COUNT(g->e));
    g->e[g->n] = *e;
    snprintf(g->value[g->n], sizeof(g->value[0]), "%.*s", (int)e->value.len, e->value.ptr);
    g->n++;
    return (int)g->n == g->stop_at ? 7 : 0;
}

static int
parse(const char *text, enum rules_format fmt, int skip, struct got *g)
{
    memset(g, 0, sizeof(*g));
    return rules_list_parse(text, strlen(text), fmt, skip, collect, g, &g->skipped, &g->err);
}

/* One line as |fmt|: 0 with the single entry in g->e[0], or the error. */
static int
one(const char *line, enum rules_format fmt, struct got *g)
{
    int r = parse(line, fmt, 0, g);

    if (r == 0 && g->n != 1)
        fail_msg("'%s' gave %zu entries", line, g->n);
    return r;
}

static void
assert_error(const char *text, enum rules_format fmt, unsigned line, const char *msg)
{
    struct got g;

    if (parse(text, fmt, 0, &g) != RULES_LIST_ERR_LINE)
        fail_msg("'%s' was accepted", text);
    if (g.err.line != line || strstr(g.err.msg, msg) == NULL)
        fail_msg("'%s': got line %u '%s', want line %u '%s'", text, g.err.line, g.err.msg, line,
                 msg);
}

static void
test_every_surge_type(void **state)
{
    static const struct {
        const char *line;
        enum rules_type type;
        const char *value;
    } ok[] = {
        {"DOMAIN,www.apple.com", RULES_T_DOMAIN, "www.apple.com"},
        {"DOMAIN-SUFFIX,apple.com", RULES_T_DOMAIN_SUFFIX, "apple.com"},
        {"DOMAIN-KEYWORD,google", RULES_T_DOMAIN_KEYWORD, "google"},
        {"DOMAIN-WILDCARD,api-*.exa?ple.com", RULES_T_DOMAIN_WILDCARD, "api-*.exa?ple.com"},
        {"DOMAIN-REGEX,^ad[0-9]+\\.example\\.com$", RULES_T_DOMAIN_REGEX,
         "^ad[0-9]+\\.example\\.com$"},
        {"IP-CIDR,192.168.0.0/16", RULES_T_IP_CIDR, "192.168.0.0/16"},
        {"IP-CIDR6,2001:db8::/32", RULES_T_IP_CIDR, "2001:db8::/32"},
        {"SRC-IP,192.168.20.100", RULES_T_SRC_IP_CIDR, "192.168.20.100"},
        {"SRC-IP-CIDR,10.0.0.0/8", RULES_T_SRC_IP_CIDR, "10.0.0.0/8"},
        {"DST-PORT,443", RULES_T_DST_PORT, "443"},
        {"DEST-PORT,80-81", RULES_T_DST_PORT, "80-81"},
        {"SRC-PORT,>=50000", RULES_T_SRC_PORT, ">=50000"},
        {"PROCESS-NAME,Telegram", RULES_T_PROCESS_NAME, "Telegram"},
        {"PROCESS-PATH,/Applications/Google Chrome.app", RULES_T_PROCESS_PATH,
         "/Applications/Google Chrome.app"},
        {"PROTOCOL,UDP", RULES_T_NETWORK, "UDP"},
        {"NETWORK,tcp", RULES_T_NETWORK, "tcp"},
        {"GEOIP,CN", RULES_T_GEOIP, "CN"},
        {"IP-ASN,13335", RULES_T_IP_ASN, "13335"},
        {"SRC-GEOIP,CN", RULES_T_SRC_GEOIP, "CN"},
        {"SRC-IP-ASN,64500", RULES_T_SRC_IP_ASN, "64500"},
        {"GEOSITE,geolocation-!cn", RULES_T_GEOSITE, "geolocation-!cn"},
        {"GEOSITE,google@cn", RULES_T_GEOSITE, "google@cn"},
    };
    struct got g;
    size_t i;
    int f;

    (void)state;
    for (f = RULES_FORMAT_SURGE; f <= RULES_FORMAT_CLASSICAL; f += 2) {
        for (i = 0; i < COUNT(ok); i++) {
            if (one(ok[i].line, (enum rules_format)f, &g) != 0)
                fail_msg("%s: %s", ok[i].line, g.err.msg);
            assert_int_equal(g.e[0].type, ok[i].type);
            assert_string_equal(g.value[0], ok[i].value);
            assert_int_equal(g.e[0].line, 1);
            assert_int_equal(g.e[0].options, 0);
        }
    }
}

static void
test_type_names_case_and_blanks(void **state)
{
    struct got g;

    (void)state;
    assert_int_equal(one("  domain-suffix ,  Example.COM  ", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(g.e[0].type, RULES_T_DOMAIN_SUFFIX);
    assert_string_equal(g.value[0], "Example.COM");
    assert_int_equal(one("Ip-Cidr\t,\t10.0.0.0/8\t,\tNo-Resolve", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(g.e[0].options, RULES_OPT_NO_RESOLVE);
    assert_int_equal(one("DOMAIN,example.com.", RULES_FORMAT_SURGE, &g), 0);

    assert_string_equal(rules_type_name(RULES_T_DOMAIN_SUFFIX), "DOMAIN-SUFFIX");
    assert_string_equal(rules_type_name(RULES_T_IP_CIDR), "IP-CIDR");
    assert_string_equal(rules_type_name(RULES_T_DST_PORT), "DST-PORT");
    assert_string_equal(rules_type_name(RULES_T_NETWORK), "NETWORK");
    assert_string_equal(rules_type_name(RULES_T_DOMAIN_SUBS), "DOMAIN-SUBS");
    assert_string_equal(rules_type_name(RULES_T_TYPE_COUNT), "?");
    for (int t = 0; t < RULES_T_TYPE_COUNT; t++)
        assert_string_not_equal(rules_type_name((enum rules_type)t), "?");
}

static void
test_cidrs(void **state)
{
    static const struct {
        const char *line;
        int family;
        const char *addr;
        unsigned prefix;
    } ok[] = {
        {"IP-CIDR,1.2.3.0/24", AF_INET, "1.2.3.0", 24},
        {"IP-CIDR,1.2.3.4", AF_INET, "1.2.3.4", 32},
        {"IP-CIDR,0.0.0.0/0", AF_INET, "0.0.0.0", 0},
        {"IP-CIDR,1.2.3.4/32", AF_INET, "1.2.3.4", 32},
        {"IP-CIDR6,2001:db8::/32", AF_INET6, "2001:db8::", 32},
        {"IP-CIDR6,::/0", AF_INET6, "::", 0},
        {"IP-CIDR6,::1", AF_INET6, "::1", 128},
        {"IP-CIDR6,fe80::/10", AF_INET6, "fe80::", 10},
        {"IP-CIDR6,::ffff:1.2.3.0/120", AF_INET6, "::ffff:1.2.3.0", 120},
        /* Surge users mix them up; the address decides. */
        {"IP-CIDR6,10.0.0.0/8", AF_INET, "10.0.0.0", 8},
        {"IP-CIDR,2400:cb00::/32", AF_INET6, "2400:cb00::", 32},
        {"SRC-IP-CIDR,fd00::/8", AF_INET6, "fd00::", 8},
    };
    static const char *bad[] = {
        "1.2.3.0/33", "2001:db8::/129",    "1.2.3/24",    "1.2.3.4/",  "/24",
        "1.2.3.4/08", "1.2.3.4/-1",        "1.2.3.4/+8",  "256.1.1.1", "fe80::1%eth0",
        "1.2.3.4 /8", "1.2.3.4/8/8",       "example.com", "01.2.3.4",  "1.2.3.4/1000",
        "[::1]/128",  "1:2:3:4:5:6:7:8:9", "1.2.3.4.5",
    };
    struct got g;
    char a[INET6_ADDRSTRLEN], line[64];
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(ok); i++) {
        if (one(ok[i].line, RULES_FORMAT_SURGE, &g) != 0)
            fail_msg("%s: %s", ok[i].line, g.err.msg);
        assert_int_equal(g.e[0].family, ok[i].family);
        assert_non_null(inet_ntop(g.e[0].family, g.e[0].addr, a, sizeof(a)));
        assert_string_equal(a, ok[i].addr);
        assert_int_equal(g.e[0].prefix, ok[i].prefix);
    }
    for (i = 0; i < COUNT(bad); i++) {
        char want[64];

        snprintf(line, sizeof(line), "IP-CIDR,%s", bad[i]);
        snprintf(want, sizeof(want), "bad CIDR '%s'", bad[i]);
        assert_error(line, RULES_FORMAT_SURGE, 1, want);
        assert_error(bad[i], RULES_FORMAT_CLASH_IPCIDR, 1, want);
    }
    /* A NUL inside the value must not let inet_pton see a shorter string. */
    assert_int_equal(
        rules_list_parse("IP-CIDR,1.2.3.4\0x", 17, RULES_FORMAT_SURGE, 0, NULL, NULL, NULL, NULL),
        RULES_LIST_ERR_LINE);
}

static void
test_ports(void **state)
{
    static const struct {
        const char *value;
        unsigned lo, hi;
    } ok[] = {
        {"80", 80, 80},          {"0", 0, 0},
        {"65535", 65535, 65535}, {"8000-9000", 8000, 9000},
        {"443-443", 443, 443},   {">=1024", 1024, 65535},
        {">1023", 1024, 65535},  {"<=1023", 0, 1023},
        {"<1024", 0, 1023},      {"00080", 80, 80},
    };
    static const char *bad[] = {
        "65536", "-1", "80-",     "-80",   "9000-8000", "a",   "80a",  ">65535", "<0",
        ">",     "<=", "80 - 90", "1-2-3", "123456",    "=80", ">=-1", "0x50",
    };
    struct got g;
    char line[64], want[64];
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(ok); i++) {
        snprintf(line, sizeof(line), "DST-PORT,%s", ok[i].value);
        if (one(line, RULES_FORMAT_SURGE, &g) != 0)
            fail_msg("%s: %s", line, g.err.msg);
        assert_int_equal(g.e[0].port_lo, ok[i].lo);
        assert_int_equal(g.e[0].port_hi, ok[i].hi);
    }
    for (i = 0; i < COUNT(bad); i++) {
        snprintf(line, sizeof(line), "SRC-PORT,%s", bad[i]);
        snprintf(want, sizeof(want), "bad port '%s'", bad[i]);
        assert_error(line, RULES_FORMAT_SURGE, 1, want);
    }

    /* mihomo's lists: one entry per range, each pointing at its own text. */
    assert_int_equal(parse("DST-PORT,80/443/8000-9000", RULES_FORMAT_CLASSICAL, 0, &g), 0);
    assert_int_equal(g.n, 3);
    assert_string_equal(g.value[0], "80");
    assert_string_equal(g.value[1], "443");
    assert_string_equal(g.value[2], "8000-9000");
    assert_int_equal(g.e[2].port_lo, 8000);
    assert_int_equal(g.e[2].port_hi, 9000);
    for (i = 0; i < 3; i++) {
        assert_int_equal(g.e[i].line, 1);
        assert_int_equal(g.e[i].type, RULES_T_DST_PORT);
    }
    /* A bad range anywhere refuses the whole line before any entry. */
    assert_int_equal(parse("DST-PORT,80/99999", RULES_FORMAT_CLASSICAL, 0, &g),
                     RULES_LIST_ERR_LINE);
    assert_int_equal(g.n, 0);
    assert_string_equal(g.err.msg, "bad port '99999'");
    assert_error("DST-PORT,80//443", RULES_FORMAT_SURGE, 1, "bad port ''");
    assert_error("DST-PORT,80/", RULES_FORMAT_SURGE, 1, "bad port ''");
    assert_error("DST-PORT,1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/20/21/22/23/24/25/"
                 "26/27/28/29/30/31/32/33",
                 RULES_FORMAT_SURGE, 1, "too many port ranges");
}

static void
test_values(void **state)
{
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"DOMAIN,a..com", "bad domain 'a..com'"},
        {"DOMAIN,.a.com", "bad domain '.a.com'"},
        {"DOMAIN-SUFFIX,a.com/x", "bad domain 'a.com/x'"},
        {"DOMAIN,*.a.com", "bad domain '*.a.com'"},
        {"DOMAIN,a b.com", "bad domain 'a b.com'"},
        {"DOMAIN,.", "bad domain '.'"},
        {"DOMAIN-WILDCARD,a.*/x", "bad wildcard 'a.*/x'"},
        {"DOMAIN-KEYWORD,goo gle", "bad keyword 'goo gle'"},
        {"NETWORK,quic", "bad network 'quic' (tcp or udp; PROTOCOL also takes"},
        {"GEOIP,C N", "bad country 'C N'"},
        {"GEOSITE,cn/x", "bad GEOSITE name 'cn/x'"},
        {"SRC-IP-ASN,AS1", "bad ASN 'AS1'"},
        {"IP-ASN,AS13335", "bad ASN 'AS13335'"},
        {"IP-ASN,4294967296", "bad ASN '4294967296'"},
        {"PROCESS-NAME,a\tb", "bad value 'a?b'"},
        {"DOMAIN,", "missing value after 'DOMAIN'"},
        {"DOMAIN-SUFFIX", "missing value after 'DOMAIN-SUFFIX'"},
    };
    struct got g;
    char label[64], name[300];
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(bad); i++)
        assert_error(bad[i].line, RULES_FORMAT_SURGE, 1, bad[i].msg);

    /* Domain limits as the matcher will take them. */
    memset(label, 'a', 63);
    snprintf(name, sizeof(name), "DOMAIN,%.63s.com", label);
    assert_int_equal(one(name, RULES_FORMAT_SURGE, &g), 0);
    snprintf(name, sizeof(name), "DOMAIN,%.63sa.com", label);
    assert_error(name, RULES_FORMAT_SURGE, 1, "bad domain");
    snprintf(name, sizeof(name), "DOMAIN,%.63s.%.63s.%.63s.%.61s", label, label, label, label);
    assert_int_equal(one(name, RULES_FORMAT_SURGE, &g), 0);
    snprintf(name, sizeof(name), "DOMAIN,%.63s.%.63s.%.63s.%.62s", label, label, label, label);
    assert_error(name, RULES_FORMAT_SURGE, 1, "bad domain");
    /* Punycode and underscores are names; UTF-8 is left for the matcher. */
    assert_int_equal(one("DOMAIN,xn--bcher-kva.example", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(one("DOMAIN-SUFFIX,_dmarc.example.com", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(one("GEOIP,private", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(one("IP-ASN,4294967295", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(one("PROCESS-PATH,C:\\Program Files\\app.exe", RULES_FORMAT_SURGE, &g), 0);
    assert_string_equal(g.value[0], "C:\\Program Files\\app.exe");
}

static void
test_options(void **state)
{
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"DOMAIN,a.com,no-resolve", "option 'no-resolve' does not apply to DOMAIN"},
        {"DST-PORT,80,no-resolve", "option 'no-resolve' does not apply to DST-PORT"},
        {"IP-CIDR,1.0.0.0/8,extended-matching",
         "option 'extended-matching' does not apply to IP-CIDR"},
        {"GEOIP,CN,src", "option 'src' does not apply to GEOIP"},
        {"DOMAIN-SUFFIX,a.com,Proxy", "unknown option 'Proxy' (a rule list has no policy"},
        {"IP-CIDR,1.0.0.0/8,DIRECT,no-resolve", "unknown option 'DIRECT'"},
        {"DOMAIN,a.com,", "empty option after DOMAIN"},
        {"DOMAIN,a.com,,no-resolve", "empty option after DOMAIN"},
        {"DOMAIN,a,b,c,d,e,f,g,h", "too many fields"},
    };
    struct got g;
    size_t i;

    (void)state;
    assert_int_equal(one("IP-CIDR,1.0.0.0/8,no-resolve", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(g.e[0].options, RULES_OPT_NO_RESOLVE);
    assert_int_equal(one("IP-CIDR6,2001:db8::/32,NO-RESOLVE", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(g.e[0].options, RULES_OPT_NO_RESOLVE);
    assert_int_equal(one("GEOIP,US,no-resolve", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(g.e[0].options, RULES_OPT_NO_RESOLVE);
    assert_int_equal(one("IP-ASN,13335,no-resolve", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(g.e[0].options, RULES_OPT_NO_RESOLVE);
    assert_int_equal(one("SRC-IP,10.0.0.1,no-resolve", RULES_FORMAT_SURGE, &g), 0);
    /* Surge's extended-matching is accepted on domain rules, and dropped. */
    assert_int_equal(one("DOMAIN-SUFFIX,a.com,extended-matching", RULES_FORMAT_SURGE, &g), 0);
    assert_int_equal(g.e[0].options, 0);
    /* mihomo's src turns an IP-CIDR into a source match. */
    assert_int_equal(one("IP-CIDR,192.168.1.0/24,src,no-resolve", RULES_FORMAT_CLASSICAL, &g), 0);
    assert_int_equal(g.e[0].type, RULES_T_SRC_IP_CIDR);
    assert_int_equal(g.e[0].options, RULES_OPT_NO_RESOLVE);
    for (i = 0; i < COUNT(bad); i++)
        assert_error(bad[i].line, RULES_FORMAT_SURGE, 1, bad[i].msg);
}

static void
test_rule_types_refused(void **state)
{
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"FOO,bar", "unknown rule type 'FOO'"},
        {"HOST-SUFFIX,a.com", "unknown rule type 'HOST-SUFFIX'"},
        {"MATCH", "'MATCH' cannot appear in a rule list"},
        {"MATCH,DIRECT", "'MATCH' cannot appear in a rule list"},
        {"FINAL,Proxy", "'FINAL' cannot appear in a rule list"},
        {"RULE-SET,https://example.com/a.list", "'RULE-SET' cannot appear in a rule list"},
        {"GEOSITE", "missing value after 'GEOSITE'"},
        {"USER-AGENT,", "missing value after 'USER-AGENT'"},
        {"example.com", "expected TYPE,VALUE, got 'example.com'"},
    };
    /* Real types chute cannot evaluate come back as UNSUPPORTED, named,
     * whatever their value holds, for the caller to skip and count. */
    static const struct {
        const char *line, *type;
    } skipped[] = {
        {"SUB-RULE,(NETWORK,tcp),sub", "SUB-RULE"},
        {"DSCP,4", "DSCP"},
        {"AND,((DOMAIN,a.com),(DST-PORT,443))", "AND"},
        {"USER-AGENT,Instagram*", "USER-AGENT"},
        {"url-regex,^https?://a\\.com/(x|y),z", "url-regex"},
        {"PROTOCOL,HTTPS", "PROTOCOL"}, /* what the flow carries: not told apart yet */
        {"PROTOCOL,quic", "PROTOCOL"},
    };
    struct got g;
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(bad); i++) {
        assert_error(bad[i].line, RULES_FORMAT_SURGE, 1, bad[i].msg);
        assert_error(bad[i].line, RULES_FORMAT_CLASSICAL, 1, bad[i].msg);
    }
    for (i = 0; i < COUNT(skipped); i++) {
        assert_int_equal(one(skipped[i].line, RULES_FORMAT_SURGE, &g), 0);
        assert_int_equal(g.e[0].type, RULES_T_UNSUPPORTED);
        assert_string_equal(g.value[0], skipped[i].type);
        assert_int_equal(one(skipped[i].line, RULES_FORMAT_CLASSICAL, &g), 0);
        assert_int_equal(g.e[0].type, RULES_T_UNSUPPORTED);
    }
}

static void
test_quoted_fields(void **state)
{
    struct got g;

    (void)state;
    /* Surge: quote a value that holds commas. */
    assert_int_equal(one("DOMAIN-REGEX,\"^(a|b){1,3}\\.com$\"", RULES_FORMAT_SURGE, &g), 0);
    assert_string_equal(g.value[0], "^(a|b){1,3}\\.com$");
    assert_int_equal(one("DOMAIN-REGEX, '^x,y$' ,no-resolve", RULES_FORMAT_SURGE, &g),
                     RULES_LIST_ERR_LINE);
    assert_int_equal(one("PROCESS-NAME,'a, b' // app", RULES_FORMAT_SURGE, &g), 0);
    assert_string_equal(g.value[0], "a, b");
    assert_int_equal(one("PROCESS-NAME,Bob's App", RULES_FORMAT_SURGE, &g), 0);
    assert_string_equal(g.value[0], "Bob's App");
    assert_error("DOMAIN-REGEX,'^a,b$", RULES_FORMAT_SURGE, 1, "unterminated quote");
    assert_error("DOMAIN,'a.com'x", RULES_FORMAT_SURGE, 1, "text after a closing quote");
    /* A comma inside {m,n}, (...) or [...] of an unquoted regex is part of
     * it, as Surge and mihomo read such lines; one outside starts an option. */
    assert_int_equal(one("DOMAIN-REGEX,^ad\\d{1,3}\\.example\\.com$", RULES_FORMAT_SURGE, &g), 0);
    assert_string_equal(g.value[0], "^ad\\d{1,3}\\.example\\.com$");
    assert_int_equal(one("DOMAIN-REGEX,^(a,b|[,x])\\,c$", RULES_FORMAT_CLASSICAL, &g), 0);
    assert_string_equal(g.value[0], "^(a,b|[,x])\\,c$");
    assert_int_equal(one("PROCESS-NAME-REGEX,(?i)^chrom(e|ium){0,1}$", RULES_FORMAT_SURGE, &g), 0);
    assert_string_equal(g.value[0], "(?i)^chrom(e|ium){0,1}$");
    assert_error("DOMAIN-REGEX,^a{1,3}$,bogus", RULES_FORMAT_SURGE, 1,
                 "unknown option 'bogus' (a rule list has no policy; quote values with commas)");
}

static void
test_comments_and_blanks(void **state)
{
    static const char text[] = "# comment\n"
                               "// comment\n"
                               "; comment\n"
                               "   # indented comment\n"
                               "\n"
                               "   \t  \n"
                               "DOMAIN,a.com // why\n"
                               "DOMAIN,b.com # why\n"
                               "DOMAIN,c.com\t; why\n"
                               "DOMAIN-KEYWORD,c#d\n"
                               "DOMAIN-REGEX,'x #y'  # real comment\n"
                               "PROCESS-PATH,/a;b//c\n";
    struct got g;

    (void)state;
    assert_int_equal(parse(text, RULES_FORMAT_SURGE, 0, &g), 0);
    assert_int_equal(g.n, 6);
    assert_string_equal(g.value[0], "a.com");
    assert_int_equal(g.e[0].line, 7);
    assert_string_equal(g.value[1], "b.com");
    assert_string_equal(g.value[2], "c.com");
    assert_string_equal(g.value[3], "c#d");
    assert_string_equal(g.value[4], "x #y");
    assert_string_equal(g.value[5], "/a;b//c");
    assert_int_equal(g.e[5].line, 12);

    assert_int_equal(parse("a.com # x\n.b.com // y\n", RULES_FORMAT_DOMAIN_SET, 0, &g), 0);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.value[1], "b.com");
    assert_int_equal(parse("1.0.0.0/8 ; x\n", RULES_FORMAT_CLASH_IPCIDR, 0, &g), 0);
    assert_int_equal(g.e[0].prefix, 8);
    assert_int_equal(parse("", RULES_FORMAT_SURGE, 0, &g), 0);
    assert_int_equal(g.n, 0);
    assert_int_equal(parse("# only\n\n", RULES_FORMAT_AUTO, 0, &g), 0);
    assert_int_equal(g.n, 0);
}

static void
test_line_ends_and_bom(void **state)
{
    static const char crlf[] = "\xef\xbb\xbf"
                               "DOMAIN,a.com\r\n"
                               "\r\n"
                               "DOMAIN,b.com\r\n"
                               "DOMAIN,c.com\r" /* a lone CR (classic Mac) */
                               "DOMAIN,d.com\n"
                               "\n\r\n"
                               "DOMAIN,e.com"; /* no final line end */
    struct got g;

    (void)state;
    assert_int_equal(parse(crlf, RULES_FORMAT_SURGE, 0, &g), 0);
    assert_int_equal(g.n, 5);
    assert_string_equal(g.value[0], "a.com");
    assert_int_equal(g.e[0].line, 1);
    assert_string_equal(g.value[1], "b.com");
    assert_int_equal(g.e[1].line, 3);
    assert_int_equal(g.e[2].line, 4);
    assert_int_equal(g.e[3].line, 5);
    assert_string_equal(g.value[4], "e.com");
    assert_int_equal(g.e[4].line, 8);
    assert_error("\xef\xbb\xbf\r\n\r\nFOO,x\r\n", RULES_FORMAT_SURGE, 3, "unknown rule type 'FOO'");
    /* A BOM anywhere but the start is a byte of the line. */
    assert_error("DOMAIN,a.com\n\xef\xbb\xbf"
                 "DOMAIN,b.com\n",
                 RULES_FORMAT_SURGE, 2, "unknown rule type");
    assert_int_equal(parse("\xef\xbb\xbfpayload:\r\n  - '+.a.com'\r\n", RULES_FORMAT_AUTO, 0, &g),
                     0);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.e[0].line, 2);
}

static void
test_domain_set(void **state)
{
    static const char text[] = "# Surge DOMAIN-SET\n"
                               "apple.com\n"
                               ".icloud.com\n"
                               "  .Example.ORG.  \n";
    struct got g;

    (void)state;
    assert_int_equal(parse(text, RULES_FORMAT_DOMAIN_SET, 0, &g), 0);
    assert_int_equal(g.n, 3);
    assert_int_equal(g.e[0].type, RULES_T_DOMAIN);
    assert_string_equal(g.value[0], "apple.com");
    assert_int_equal(g.e[1].type, RULES_T_DOMAIN_SUFFIX);
    assert_string_equal(g.value[1], "icloud.com");
    assert_int_equal(g.e[1].line, 3);
    assert_string_equal(g.value[2], "Example.ORG.");
    assert_error("a.com\n..b.com\n", RULES_FORMAT_DOMAIN_SET, 2, "bad domain '..b.com'");
    assert_error("+.b.com\n", RULES_FORMAT_DOMAIN_SET, 1, "(Clash syntax: a domain list?)");
    assert_error("*.b.com\n", RULES_FORMAT_DOMAIN_SET, 1, "(Clash syntax");
    assert_error("DOMAIN,b.com\n", RULES_FORMAT_DOMAIN_SET, 1,
                 "(a TYPE,VALUE line: a surge list?)");
    assert_error("a.com b.com\n", RULES_FORMAT_DOMAIN_SET, 1, "bad domain 'a.com b.com'");
    assert_error(".\n", RULES_FORMAT_DOMAIN_SET, 1, "bad domain '.'");
    assert_error("payload:\n  - a.com\n", RULES_FORMAT_DOMAIN_SET, 1,
                 "YAML 'payload:' in a text-only list");
}

static void
test_clash_domain(void **state)
{
    static const struct {
        const char *item;
        enum rules_type type;
        const char *value;
    } ok[] = {
        {"a.com", RULES_T_DOMAIN, "a.com"},
        {"+.a.com", RULES_T_DOMAIN_SUFFIX, "a.com"},
        {".a.com", RULES_T_DOMAIN_SUBS, "a.com"},
        {"*.a.com", RULES_T_DOMAIN_WILDCARD, "*.a.com"},
        {"*.*.microsoft.com", RULES_T_DOMAIN_WILDCARD, "*.*.microsoft.com"},
        {"www.*.example.com", RULES_T_DOMAIN_WILDCARD, "www.*.example.com"},
        {"cdn.*", RULES_T_DOMAIN_WILDCARD, "cdn.*"},
        {"*", RULES_T_DOMAIN_WILDCARD, "*"},
        {"localhost", RULES_T_DOMAIN, "localhost"},
    };
    static const struct {
        const char *item, *msg;
    } bad[] = {
        {"x*.a.com", "bad domain 'x*.a.com'"},
        {"a.**.com", "bad domain 'a.**.com'"},
        {"+.*.a.com", "unsupported pattern '+.*.a.com' ('*' after '+.')"},
        {".*.a.com", "unsupported pattern '.*.a.com' ('*' after '.')"},
        {"+", "bad domain '+'"},
        {"+.", "bad domain '+.'"},
        {"a?.com", "bad domain 'a?.com'"},
        {"DOMAIN-SUFFIX,a.com", "bad domain 'DOMAIN-SUFFIX,a.com'"},
    };
    struct got g;
    char yaml[128];
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(ok); i++) {
        if (one(ok[i].item, RULES_FORMAT_CLASH_DOMAIN, &g) != 0)
            fail_msg("%s: %s", ok[i].item, g.err.msg);
        assert_int_equal(g.e[0].type, ok[i].type);
        assert_string_equal(g.value[0], ok[i].value);
        snprintf(yaml, sizeof(yaml), "payload:\n  - '%s'\n", ok[i].item);
        assert_int_equal(one(yaml, RULES_FORMAT_CLASH_DOMAIN, &g), 0);
        assert_int_equal(g.e[0].type, ok[i].type);
        assert_string_equal(g.value[0], ok[i].value);
        assert_int_equal(g.e[0].line, 2);
    }
    for (i = 0; i < COUNT(bad); i++) {
        assert_error(bad[i].item, RULES_FORMAT_CLASH_DOMAIN, 1, bad[i].msg);
        snprintf(yaml, sizeof(yaml), "payload:\n  - \"%s\"\n", bad[i].item);
        assert_error(yaml, RULES_FORMAT_CLASH_DOMAIN, 2, bad[i].msg);
    }
}

static void
test_clash_ipcidr(void **state)
{
    static const char yaml[] = "payload:\n"
                               "  - '91.108.4.0/22'\n"
                               "  - \"2001:b28:f23d::/48\"\n"
                               "  - 149.154.160.0/20 # unquoted\n"
                               "  - '10.0.0.1'\n"
                               "  - '2001:db8::1'\n";
    struct got g;
    char a[INET6_ADDRSTRLEN];

    (void)state;
    assert_int_equal(parse(yaml, RULES_FORMAT_CLASH_IPCIDR, 0, &g), 0);
    assert_int_equal(g.n, 5);
    assert_int_equal(g.e[0].type, RULES_T_IP_CIDR);
    assert_int_equal(g.e[0].family, AF_INET);
    assert_int_equal(g.e[0].prefix, 22);
    assert_int_equal(g.e[1].family, AF_INET6);
    assert_int_equal(g.e[1].prefix, 48);
    inet_ntop(AF_INET6, g.e[1].addr, a, sizeof(a));
    assert_string_equal(a, "2001:b28:f23d::");
    assert_string_equal(g.value[2], "149.154.160.0/20");
    assert_int_equal(g.e[3].prefix, 32);
    assert_int_equal(g.e[4].prefix, 128);
    assert_int_equal(g.e[4].line, 6);
    for (size_t i = 0; i < g.n; i++)
        assert_int_equal(g.e[i].options, 0);

    assert_int_equal(parse("1.0.0.0/8\n::/0\n", RULES_FORMAT_CLASH_IPCIDR, 0, &g), 0);
    assert_int_equal(g.n, 2);
    assert_error("1.0.0.0/8\nIP-CIDR,2.0.0.0/8\n", RULES_FORMAT_CLASH_IPCIDR, 2,
                 "bad CIDR 'IP-CIDR,2.0.0.0/8'");
    /* Unquoted, a trailing ':' makes a YAML mapping. */
    assert_error("payload:\n  - 2001:db8::\n", RULES_FORMAT_CLASH_IPCIDR, 2, "YAML mapping");
}

static void
test_classical_yaml(void **state)
{
    static const char yaml[] = "# NAME: Telegram\n"
                               "# TOTAL: 5\n"
                               "payload:\n"
                               "  # domains\n"
                               "  - DOMAIN-SUFFIX,t.me\n"
                               "  - 'DOMAIN-KEYWORD,telegram'\n"
                               "  - \"IP-CIDR,91.108.4.0/22,no-resolve\"\n"
                               "\n"
                               "  - IP-CIDR6,2001:b28:f23d::/48,no-resolve # v6\n"
                               "  - 'PROCESS-NAME,Telegram Desktop'\n"
                               "  -\n"
                               "  - ''\n";
    struct got g;

    (void)state;
    assert_int_equal(parse(yaml, RULES_FORMAT_CLASSICAL, 0, &g), 0);
    assert_int_equal(g.n, 5);
    assert_int_equal(g.e[0].type, RULES_T_DOMAIN_SUFFIX);
    assert_string_equal(g.value[0], "t.me");
    assert_int_equal(g.e[0].line, 5);
    assert_string_equal(g.value[1], "telegram");
    assert_int_equal(g.e[2].options, RULES_OPT_NO_RESOLVE);
    assert_int_equal(g.e[3].family, AF_INET6);
    assert_int_equal(g.e[3].line, 9);
    assert_string_equal(g.value[4], "Telegram Desktop");

    /* Zero indent, and mihomo's "rules:" key. */
    assert_int_equal(
        parse("rules:\n- DOMAIN,a.com\n- 'DOMAIN,b.com'\n", RULES_FORMAT_CLASSICAL, 0, &g), 0);
    assert_int_equal(g.n, 2);
    assert_int_equal(parse("payload: []\n", RULES_FORMAT_CLASSICAL, 0, &g), 0);
    assert_int_equal(g.n, 0);
    assert_int_equal(parse("payload: [] # none\n", RULES_FORMAT_CLASSICAL, 0, &g), 0);
    assert_int_equal(parse("payload:   # the list\n  - DOMAIN,a.com # a\n  - 'DOMAIN,b.com'  # b\n",
                           RULES_FORMAT_CLASSICAL, 0, &g),
                     0);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.value[1], "b.com");
    /* Text classical lists read like Surge's. */
    assert_int_equal(parse("DOMAIN,a.com\nIP-CIDR,1.0.0.0/8\n", RULES_FORMAT_CLASSICAL, 0, &g), 0);
    assert_int_equal(g.n, 2);
}

/* YAML flow style: "payload: [...]" on one line or over several, with
 * comments, quoted items keeping their commas, and each entry's own line. */
static void
test_yaml_flow(void **state)
{
    struct got g;
    (void)state;

    assert_int_equal(parse("payload: ['DOMAIN,a.com', 'DOMAIN-REGEX,^x\\d{1,3}$']\n",
                           RULES_FORMAT_CLASSICAL, 0, &g), 0);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.value[1], "^x\\d{1,3}$");
    assert_int_equal(parse("# c\r\npayload: [ '+.a.com', # why\r\n  b.com,\r\n\r\n"
                           "  '.c.com' ,'' ] # end\r\n",
                           RULES_FORMAT_CLASH_DOMAIN, 0, &g), 0);
    assert_int_equal(g.n, 3);
    assert_int_equal(g.e[0].line, 2);
    assert_int_equal(g.e[1].line, 3);
    assert_string_equal(g.value[1], "b.com");
    assert_int_equal(g.e[2].line, 5);
    assert_int_equal(g.e[2].type, RULES_T_DOMAIN_SUBS);
    assert_int_equal(parse("payload: [1.0.0.0/8, '2001:db8::/32']", RULES_FORMAT_AUTO, 0, &g), 0);
    assert_int_equal(g.n, 2);
    assert_int_equal(rules_list_detect("payload: [1.0.0.0/8, '2001:db8::/32']", 37),
                     RULES_FORMAT_CLASH_IPCIDR);
}

static void
test_yaml_errors(void **state)
{
    static const struct {
        const char *text;
        unsigned line;
        const char *msg;
    } bad[] = {
        {"name: x\npayload:\n  - DOMAIN,a.com\n", 1,
         "unsupported YAML key 'name' (only 'payload:')"},
        {"  - DOMAIN,a.com\npayload:\n", 1, "expected 'payload:' before '- DOMAIN,a.com'"},
        {"payload:\n  - DOMAIN,a.com\nrules:\n", 3, "a second 'rules:' list"},
        {"payload:\n  - DOMAIN,a.com\nfoo: 1\n", 3, "unsupported YAML key 'foo'"},
        /* Flow style splits at an unquoted comma, as YAML does. */
        {"payload: [DOMAIN,a.com]\n", 1, "missing value after 'DOMAIN'"},
        {"payload: ['DOMAIN,a.com'\n", 2, "'payload: [' without its closing ']'"},
        {"payload: ['DOMAIN,a.com' 'DOMAIN,b.com']\n", 1, "expected ',' or ']' between"},
        {"payload: ['DOMAIN,a.com',, 'DOMAIN,b.com']\n", 1, "an empty item"},
        {"payload:\n  [ 'DOMAIN,a.com' ]\n", 2, "expected a '- ' list item"},
        {"payload: ['DOMAIN,a.com] # x\n", 1, "unterminated quote"},
        {"payload: [*.a.com]\n", 1, "unsupported YAML '*.a.com' (quote the item)"},
        {"payload: ['DOMAIN,a.com'] x\n", 1, "text after the payload list's ']': 'x'"},
        {"payload: ['DOMAIN,a.com']\n  - DOMAIN,b.com\n", 2, "list item after 'payload: []'"},
        {"payload: []\n  - DOMAIN,a.com\n", 2, "list item after 'payload: []'"},
        {"payload:\n  DOMAIN,a.com\n", 2, "expected a '- ' list item, got 'DOMAIN,a.com'"},
        {"payload:\n  -DOMAIN,a.com\n", 2, "expected a '- ' list item"},
        {"payload:\n\t- DOMAIN,a.com\n", 2, "tab in the YAML indentation"},
        {"payload:\n  - DOMAIN,a.com\n    - DOMAIN,b.com\n", 3, "indented unlike the first one"},
        {"payload:\n  - DOMAIN,a.com\n - DOMAIN,b.com\n", 3, "indented unlike the first one"},
        {"payload:\n  - 'DOMAIN,a.com\n", 2, "unterminated quote"},
        {"payload:\n  - 'it''s'\n", 2, "YAML escapes are not supported"},
        {"payload:\n  - \"DOMAIN-REGEX,a\\\\.com\"\n", 2, "YAML escapes are not supported"},
        {"payload:\n  - 'DOMAIN,a.com' x\n", 2, "text after a closing quote: 'x'"},
        {"payload:\n  - 'DOMAIN,a.com'# x\n", 2, "text after a closing quote"},
        {"payload:\n  - key: value\n", 2, "YAML mapping in a payload list: 'key: value'"},
        {"payload:\n  - *.a.com\n", 2, "unsupported YAML '*.a.com' (quote the item)"},
        {"payload:\n  - &x DOMAIN,a.com\n", 2, "unsupported YAML"},
        {"payload:\n  - - DOMAIN,a.com\n", 2, "unsupported YAML '- DOMAIN,a.com'"},
        {"payload:\n  - [a, b]\n", 2, "unsupported YAML"},
        {"payload:\n  - |\n", 2, "unsupported YAML"},
        {"payload:\n  - DOMAIN,a.com\n  - MATCH,DIRECT\n", 3, "'MATCH' cannot appear"},
        {"payload:\n  - DOMAIN,a.com\n---\n", 3, "expected a '- ' list item, got '---'"},
        {"payload:\n  - ? DOMAIN,a.com\n", 2, "unsupported YAML '? DOMAIN,a.com'"},
        {"payload:\n  - :\n", 2, "unsupported YAML ':'"},
        {"payload: []x\n", 1, "text after the payload list's ']': 'x'"},
        {"payload: {a: b}\n", 1, "unsupported YAML after the key: '{a: b}'"},
        {"payload:\n  \x01\n", 2, "expected a '- ' list item, got '?'"},
        {"payload:\n  xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", 2,
         "got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(bad); i++)
        assert_error(bad[i].text, RULES_FORMAT_CLASSICAL, bad[i].line, bad[i].msg);
    /* Text-only formats refuse YAML; text lists refuse stray items. */
    assert_error("# x\npayload:\n  - DOMAIN,a.com\n", RULES_FORMAT_SURGE, 2,
                 "YAML 'payload:' in a text-only list (load it as classical, domain or ipcidr)");
    assert_error("DOMAIN,a.com\n- DOMAIN,b.com\n", RULES_FORMAT_CLASSICAL, 2,
                 "YAML list item without a 'payload:' key: '- DOMAIN,b.com'");
    assert_error("- a.com\n", RULES_FORMAT_CLASH_DOMAIN, 1, "YAML list item without a 'payload:'");
}

static void
test_skip_invalid(void **state)
{
    static const char text[] = "DOMAIN,a.com\n"
                               "FOO,bar\n"
                               "DOMAIN,b.com,Proxy\n"
                               "IP-CIDR,1.2.3.0/24\n"
                               "IP-CIDR,1.2.3.0/99\n"
                               "MATCH,DIRECT\n"
                               "DST-PORT,80/443\n";
    struct got g;

    (void)state;
    assert_int_equal(parse(text, RULES_FORMAT_SURGE, 0, &g), RULES_LIST_ERR_LINE);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.err.line, 2);
    assert_string_equal(g.err.msg, "unknown rule type 'FOO'");
    assert_int_equal(g.skipped, 0);

    assert_int_equal(parse(text, RULES_FORMAT_SURGE, 1, &g), 0);
    assert_int_equal(g.n, 4);
    assert_int_equal(g.skipped, 4);
    assert_string_equal(g.value[1], "1.2.3.0/24");
    assert_int_equal(g.e[1].line, 4);
    assert_int_equal(g.e[3].line, 7);
    /* The first bad line stays in |err| for the log. */
    assert_int_equal(g.err.line, 2);
    assert_string_equal(g.err.msg, "unknown rule type 'FOO'");

    /* YAML structure errors are lines to skip as well. */
    assert_int_equal(parse("payload:\n  - '+.a.com'\n  - x: y\n\t- b.com\n  - c.com\n",
                           RULES_FORMAT_CLASH_DOMAIN, 1, &g),
                     0);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.skipped, 2);
    assert_int_equal(g.err.line, 3);

    /* A clean parse leaves |err| empty. */
    assert_int_equal(parse("DOMAIN,a.com\n", RULES_FORMAT_SURGE, 1, &g), 0);
    assert_int_equal(g.skipped, 0);
    assert_int_equal(g.err.line, 0);
    assert_string_equal(g.err.msg, "");
}

static void
test_callback_stops(void **state)
{
    struct got g;
    int r;

    (void)state;
    memset(&g, 0, sizeof(g));
    g.stop_at = 2;
    r = rules_list_parse("DOMAIN,a\nDOMAIN,b\nDOMAIN,c\n", 27, RULES_FORMAT_SURGE, 0, collect, &g,
                         NULL, NULL);
    assert_int_equal(r, 7);
    assert_int_equal(g.n, 2);
    /* No callback, no out-parameters: a validation pass. */
    assert_int_equal(
        rules_list_parse("DOMAIN,a\n", 9, RULES_FORMAT_SURGE, 0, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(rules_list_parse("FOO,a\n", 6, RULES_FORMAT_SURGE, 1, NULL, NULL, NULL, NULL),
                     0);
    assert_int_equal(rules_list_parse(NULL, 0, RULES_FORMAT_SURGE, 0, NULL, NULL, NULL, NULL), 0);
}

static void
test_error_message_is_clipped(void **state)
{
    char text[320];
    struct got g;

    (void)state;
    memset(text, 'x', sizeof(text));
    memcpy(text, "FOO\x01", 4);
    memcpy(text + 300, ",v", 3);
    assert_int_equal(parse(text, RULES_FORMAT_SURGE, 0, &g), RULES_LIST_ERR_LINE);
    assert_true(strlen(g.err.msg) < sizeof(g.err.msg));
    assert_non_null(strstr(g.err.msg, "unknown rule type 'FOO?xxx"));
    assert_non_null(strstr(g.err.msg, "...'"));
}

static void
test_detect(void **state)
{
    static const struct {
        const char *text;
        enum rules_format fmt;
    } cases[] = {
        {"DOMAIN,a.com\nIP-CIDR,1.0.0.0/8\n", RULES_FORMAT_SURGE},
        {"\xef\xbb\xbf# c\n", RULES_FORMAT_AUTO},
        {"payload:\n  - DOMAIN-SUFFIX,a.com\n", RULES_FORMAT_CLASSICAL},
        {"payload:\n  - '+.a.com'\n  - b.com\n", RULES_FORMAT_CLASH_DOMAIN},
        {"payload:\n  - a.com\n  - b.com\n", RULES_FORMAT_CLASH_DOMAIN},
        {"payload:\n  - '1.0.0.0/8'\n  - '::/0'\n", RULES_FORMAT_CLASH_IPCIDR},
        /* ".b.com" means b.com too in a DOMAIN-SET, not in a Clash list:
         * with nothing Clash-only beside it, the list is ambiguous. */
        {"a.com\n.b.com\n", RULES_FORMAT_AUTO},
        {".a.com\n.b.com\n", RULES_FORMAT_AUTO},
        {"a.com\nb.com\n", RULES_FORMAT_DOMAIN_SET},
        {"a.com\n.b.com\n+.c.com\n", RULES_FORMAT_CLASH_DOMAIN},
        {"a.com\n*.b.com\n", RULES_FORMAT_CLASH_DOMAIN},
        {"1.0.0.0/8\n2001:db8::/32\n10.0.0.1\n", RULES_FORMAT_CLASH_IPCIDR},
        /* The majority decides; ties go to rules, then CIDRs. */
        {"1.0.0.0/8\n2.0.0.0/8\nDOMAIN,a.com\n", RULES_FORMAT_CLASH_IPCIDR},
        {"1.0.0.0/8\nDOMAIN,a.com\n", RULES_FORMAT_SURGE},
        {"1.0.0.0/8\na.com\n", RULES_FORMAT_CLASH_IPCIDR},
        {"a.com # x, y\nb.com\n", RULES_FORMAT_DOMAIN_SET},
        {"hello world\n!!\n", RULES_FORMAT_AUTO},
        {"", RULES_FORMAT_AUTO},
    };
    struct got g;
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(cases); i++) {
        if (rules_list_detect(cases[i].text, strlen(cases[i].text)) != cases[i].fmt)
            fail_msg("case %zu: got %d", i,
                     rules_list_detect(cases[i].text, strlen(cases[i].text)));
    }
    assert_true(rules_list_ambiguous(".a.com\n.b.com\n", 14));
    assert_false(rules_list_ambiguous("a.com\n+.b.com\n.c.com\n", 21));
    assert_false(rules_list_ambiguous("DOMAIN,a.com\n", 13));
    /* AUTO refuses the ambiguous list; a declared format reads it. */
    assert_int_equal(parse(".a.com\n.b.com\n", RULES_FORMAT_AUTO, 0, &g),
                     RULES_LIST_ERR_AMBIGUOUS);
    assert_non_null(strstr(g.err.msg, "give format = \"domain-set\" or \"domain\""));
    assert_int_equal(parse("a.com\n.b.com\n", RULES_FORMAT_DOMAIN_SET, 0, &g), 0);
    assert_int_equal(g.e[1].type, RULES_T_DOMAIN_SUFFIX);
    assert_int_equal(parse("a.com\n.b.com\n", RULES_FORMAT_CLASH_DOMAIN, 0, &g), 0);
    assert_int_equal(g.e[1].type, RULES_T_DOMAIN_SUBS);
    /* AUTO parses as the detected format. */
    assert_int_equal(parse("a.com\nb.com\n", RULES_FORMAT_AUTO, 0, &g), 0);
    assert_int_equal(g.e[1].type, RULES_T_DOMAIN);
    assert_int_equal(parse("a.com\n.b.com\n+.c.com\n", RULES_FORMAT_AUTO, 0, &g), 0);
    assert_int_equal(g.e[1].type, RULES_T_DOMAIN_SUBS);
    assert_int_equal(parse("hello world\n", RULES_FORMAT_AUTO, 0, &g), RULES_LIST_ERR_FORMAT);
    assert_int_equal(g.err.line, 0);
    assert_non_null(strstr(g.err.msg, "cannot tell the list format"));
    /* The losers of the vote are still errors, named by line. */
    assert_int_equal(parse("1.0.0.0/8\n2.0.0.0/8\nDOMAIN,a.com\n", RULES_FORMAT_AUTO, 0, &g),
                     RULES_LIST_ERR_LINE);
    assert_int_equal(g.err.line, 3);
    assert_int_equal(rules_list_parse("x", 1, (enum rules_format)99, 0, NULL, NULL, NULL, NULL),
                     RULES_LIST_ERR_FORMAT);
}

/* Detection reads the first 4096 items only, so that it stays cheap on
 * lists of a million lines. */
static void
test_detect_reads_a_prefix(void **state)
{
    static char text[6000 * 8];
    size_t i, n = 0;

    (void)state;
    for (i = 0; i < 4096; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "a%zu.com\n", i % 10);
    for (i = 0; i < 1900; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "D,a\n");
    assert_int_equal(rules_list_detect(text, n), RULES_FORMAT_DOMAIN_SET);
    assert_int_equal(rules_list_detect(text + 4096 * 7, n - 4096 * 7), RULES_FORMAT_SURGE);
}

static void
test_format_names(void **state)
{
    (void)state;
    assert_int_equal(rules_format_parse("auto"), RULES_FORMAT_AUTO);
    assert_int_equal(rules_format_parse("surge"), RULES_FORMAT_SURGE);
    assert_int_equal(rules_format_parse("domain-set"), RULES_FORMAT_DOMAIN_SET);
    assert_int_equal(rules_format_parse("classical"), RULES_FORMAT_CLASSICAL);
    assert_int_equal(rules_format_parse("Domain"), RULES_FORMAT_CLASH_DOMAIN);
    assert_int_equal(rules_format_parse("ipcidr"), RULES_FORMAT_CLASH_IPCIDR);
    assert_int_equal(rules_format_parse("mrs"), -1);
    assert_int_equal(rules_format_parse(""), -1);
    assert_int_equal(rules_format_parse(NULL), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_surge_type),
        cmocka_unit_test(test_type_names_case_and_blanks),
        cmocka_unit_test(test_cidrs),
        cmocka_unit_test(test_ports),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_rule_types_refused),
        cmocka_unit_test(test_quoted_fields),
        cmocka_unit_test(test_comments_and_blanks),
        cmocka_unit_test(test_line_ends_and_bom),
        cmocka_unit_test(test_domain_set),
        cmocka_unit_test(test_clash_domain),
        cmocka_unit_test(test_clash_ipcidr),
        cmocka_unit_test(test_classical_yaml),
        cmocka_unit_test(test_yaml_flow), cmocka_unit_test(test_yaml_errors),
        cmocka_unit_test(test_skip_invalid),
        cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_error_message_is_clipped),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_detect_reads_a_prefix),
        cmocka_unit_test(test_format_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
