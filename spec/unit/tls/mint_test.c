/* core/tls's local CA and minted leaves: tls_ca_create's files and
 * refusals, tls_ca_load's errors, leaves that `openssl verify
 * -x509_strict -purpose sslserver` accepts for their host (and for no
 * other), the profile as `openssl x509 -text` shows it, the LRU and its
 * re-minting, and a handshake with a minted leaf against `openssl
 * s_client -verify_return_error`. */

#include <sys/stat.h>

#include "tls_test.h"
#include "tls/tls_int.h"

static double
wall(void)
{
    return (double)time(NULL);
}

static int
group_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    strcpy(TT.dir, "/tmp/chute-mint-XXXXXX");
    if (mkdtemp(TT.dir) == NULL) {
        TT.dir[0] = '\0';
        return -1;
    }
    TT.ok = tt_sh("openssl version >/dev/null 2>&1") == 0;
    return 0;
}

static int
group_teardown(void **state)
{
    tt_teardown();
    return 0;
}

/* A CA made in TT.dir/|sub|/ (ca.pem, ca.key), loaded. */
static struct tls_ca *
make_ca(const char *sub)
{
    char cert[128], key[128], err[256];
    snprintf(cert, sizeof(cert), "%s/%s/ca.pem", TT.dir, sub);
    snprintf(key, sizeof(key), "%s/%s/ca.key", TT.dir, sub);
    if (tls_ca_create(cert, key, err, sizeof(err)) != 0)
        fail_msg("tls_ca_create: %s", err);
    struct tls_ca *ca = tls_ca_load(cert, key, err, sizeof(err));
    if (ca == NULL)
        fail_msg("tls_ca_load: %s", err);
    return ca;
}

static void
write_file(const char *name, const void *data, size_t len)
{
    char path[128];
    tt_path(path, sizeof(path), name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* The leaf of |cfg| as TT.dir/|name|.pem (via DER and openssl). */
static void
write_leaf(const struct tls_server_cfg *cfg, const char *name)
{
    char der[64];
    snprintf(der, sizeof(der), "%s.der", name);
    write_file(der, cfg->chain[0].data, cfg->chain[0].data_len);
    assert_int_equal(tt_sh("cd %s && openssl x509 -inform DER -in %s.der -out %s.pem", TT.dir,
                           name, name),
                     0);
}

/* `openssl verify` of TT.dir/|leaf|.pem under |ca_sub|/ca.pem with |how|
 * ("-verify_hostname H", "-verify_ip A"): its exit status. */
static int
verify(const char *ca_sub, const char *leaf, const char *how)
{
    return tt_sh("cd %s && openssl verify -x509_strict -purpose sslserver %s -CAfile %s/ca.pem "
                 "%s.pem >>verify.log 2>&1",
                 TT.dir, how, ca_sub, leaf);
}

/* 0 if `openssl x509 -text` of TT.dir/|pem| shows |text| (grep -F). */
static int
shows(const char *pem, const char *text)
{
    return tt_sh("cd %s && openssl x509 -noout -text -in %s | grep -qF -- '%s'", TT.dir, pem, text);
}

static void
test_ca_create(void **state)
{
    char cert[128], key[128], err[256];
    struct stat st;
    /* The folder is missing: made, mode 0700. */
    snprintf(cert, sizeof(cert), "%s/state/chute/ca.pem", TT.dir);
    snprintf(key, sizeof(key), "%s/state/chute/ca.key", TT.dir);
    assert_int_equal(tls_ca_create(cert, key, err, sizeof(err)), 0);
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(cert, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    tt_path(err, sizeof(err), "state/chute");
    assert_int_equal(stat(err, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);

    /* Never overwritten: either file there is a refusal, naming it. */
    assert_int_equal(tls_ca_create(cert, key, err, sizeof(err)), -1);
    assert_non_null(strstr(err, cert));
    assert_non_null(strstr(err, "EEXIST"));
    char other[128];
    snprintf(other, sizeof(other), "%s/state/chute/other.pem", TT.dir);
    assert_int_equal(tls_ca_create(other, key, err, sizeof(err)), -1);
    assert_non_null(strstr(err, key));
    assert_int_not_equal(access(other, F_OK), 0); /* nothing half made */

    struct tls_ca *ca = tls_ca_load(cert, key, err, sizeof(err));
    if (ca == NULL)
        fail_msg("%s", err);
    size_t len;
    const unsigned char *der = tls_ca_der(ca, &len);
    assert_true(len > 300 && len < 1024 && der[0] == 0x30);
    char *pem = tt_read("state/chute/ca.pem", NULL);
    assert_string_equal(tls_ca_pem(ca), pem); /* what was written */
    free(pem);
    tls_ca_free(ca);

    if (!TT.ok)
        TT_PEER_MISSING("is not on PATH");
    /* What openssl makes of it: a v3 P-256 root of its own name. */
    assert_int_equal(tt_sh("cd %s && openssl verify -x509_strict -CAfile state/chute/ca.pem "
                           "state/chute/ca.pem >>verify.log 2>&1",
                           TT.dir),
                     0);
    assert_int_equal(shows("state/chute/ca.pem", "CA:TRUE, pathlen:0"), 0);
    assert_int_equal(shows("state/chute/ca.pem", "X509v3 Basic Constraints: critical"), 0);
    assert_int_equal(shows("state/chute/ca.pem", "X509v3 Key Usage: critical"), 0);
    assert_int_equal(shows("state/chute/ca.pem", "Digital Signature, Certificate Sign, CRL Sign"),
                     0);
    assert_int_equal(shows("state/chute/ca.pem", "Subject: O = chute, CN = chute CA "), 0);
    assert_int_equal(shows("state/chute/ca.pem", "ecdsa-with-SHA256"), 0);
    assert_int_equal(shows("state/chute/ca.pem", "X509v3 Subject Key Identifier"), 0);
    assert_int_not_equal(shows("state/chute/ca.pem", "Extended Key Usage"), 0);
    assert_int_equal(tt_sh("cd %s && openssl pkey -in state/chute/ca.key -noout -check "
                           ">>verify.log 2>&1",
                           TT.dir),
                     0);
    /* ~10 years; a unique name per install. */
    assert_int_equal(tt_sh("cd %s && openssl x509 -in state/chute/ca.pem -noout "
                           "-checkend %d >/dev/null",
                           TT.dir, 3640 * 86400),
                     0);
    assert_int_not_equal(tt_sh("cd %s && openssl x509 -in state/chute/ca.pem -noout "
                               "-checkend %d >/dev/null",
                               TT.dir, 3660 * 86400),
                         0);
    struct tls_ca *ca2 = make_ca("two");
    assert_int_not_equal(tt_sh("cd %s && test \"$(openssl x509 -noout -subject -in two/ca.pem)\" "
                               "= \"$(openssl x509 -noout -subject -in state/chute/ca.pem)\"",
                               TT.dir),
                         0);
    tls_ca_free(ca2);
}

static void
expect_load_error(const char *cert, const char *key, const char *part)
{
    char c[128], k[128], err[512] = "";
    tt_path(c, sizeof(c), cert);
    tt_path(k, sizeof(k), key);
    struct tls_ca *ca = tls_ca_load(c, k, err, sizeof(err));
    tls_ca_free(ca);
    assert_null(ca);
    print_message("tls_ca_load %s %s: %s\n", cert, key, err);
    assert_non_null(strstr(err, part));
}

static void
test_ca_load_errors(void **state)
{
    tls_ca_free(make_ca("a"));
    tls_ca_free(make_ca("b"));
    write_file("junk.pem", "junk\n", 5);
    expect_load_error("nope.pem", "a/ca.key", "tls: CA certificate ");
    expect_load_error("nope.pem", "a/ca.key", "nope.pem: cannot open it (No such file");
    expect_load_error("a/ca.pem", "nope.key", "nope.key: cannot open it");
    expect_load_error("a/ca.pem", "b/ca.key", "does not match the certificate");
    expect_load_error("junk.pem", "a/ca.key", "junk.pem: certificate chain: no certificate");
    expect_load_error("a/ca.pem", "junk.pem", "junk.pem: private key: no EC PRIVATE KEY");
    expect_load_error("a/ca.pem", "a/ca.pem", "a/ca.pem: private key");

    if (!TT.ok)
        TT_PEER_MISSING("is not on PATH");
    /* A leaf is no CA; a CA's EC PRIVATE KEY form loads too. */
    assert_int_equal(tt_sh("cd %s && openssl req -x509 -newkey ec -pkeyopt "
                           "ec_paramgen_curve:P-256 -nodes -keyout leaf.key -out leaf.pem "
                           "-days 3 -subj /CN=x -addext basicConstraints=critical,CA:FALSE "
                           ">>gen.log 2>&1 && openssl ec -in a/ca.key -out a/ec.key "
                           ">>gen.log 2>&1",
                           TT.dir),
                     0);
    expect_load_error("leaf.pem", "leaf.key", "leaf.pem: not a CA certificate");
    char c[128], k[128], err[256];
    tt_path(c, sizeof(c), "a/ca.pem");
    tt_path(k, sizeof(k), "a/ec.key");
    struct tls_ca *ca = tls_ca_load(c, k, err, sizeof(err));
    if (ca == NULL)
        fail_msg("%s", err);
    tls_ca_free(ca);
}

static struct tls_server_cfg *
get(struct tls_mint *m, const char *host, double now)
{
    char err[256];
    struct tls_server_cfg *cfg = tls_mint_get(m, host, now, err, sizeof(err));
    if (cfg == NULL)
        fail_msg("tls_mint_get %s: %s", host, err);
    return cfg;
}

static void
test_leaves_verify(void **state)
{
    if (!TT.ok)
        TT_PEER_MISSING("is not on PATH");
    char err[256];
    struct tls_ca *ca = make_ca("v");
    struct tls_mint *m = tls_mint_new(ca, 0, err, sizeof(err));
    assert_non_null(m);

    struct tls_server_cfg *cfg = get(m, "WWW.Example.TEST.", wall());
    write_leaf(cfg, "name");
    assert_int_equal(verify("v", "name", "-verify_hostname www.example.test"), 0);
    assert_int_not_equal(verify("v", "name", "-verify_hostname other.example.test"), 0);
    assert_int_not_equal(verify("v", "name", "-verify_hostname example.test"), 0);
    assert_int_not_equal(verify("a", "name", "-verify_hostname www.example.test"), 0); /* another CA */
    assert_int_equal(shows("name.pem", "DNS:www.example.test"), 0);
    assert_int_equal(shows("name.pem", "Subject: CN = www.example.test"), 0);
    assert_int_equal(shows("name.pem", "TLS Web Server Authentication"), 0);
    assert_int_equal(shows("name.pem", "X509v3 Key Usage: critical"), 0);
    assert_int_equal(tt_sh("cd %s && openssl x509 -noout -text -in name.pem | "
                           "grep -A1 'X509v3 Key Usage' | tail -1 | grep -qE '^ *Digital Signature$'",
                           TT.dir),
                     0);
    assert_int_equal(shows("name.pem", "CA:FALSE"), 0);
    assert_int_equal(shows("name.pem", "X509v3 Authority Key Identifier"), 0);
    assert_int_equal(shows("name.pem", "X509v3 Subject Key Identifier"), 0);
    /* The serial: 16 octets, positive, 0x40 set. */
    assert_int_equal(tt_sh("cd %s && openssl x509 -noout -serial -in name.pem | "
                           "grep -qE '^serial=[4-7][0-9A-F]{31}$'",
                           TT.dir),
                     0);
    /* Valid from a day ago for 46 days: still valid in 44 days, not in 46. */
    assert_int_equal(tt_sh("cd %s && openssl x509 -noout -in name.pem -checkend %d >/dev/null",
                           TT.dir, 44 * 86400),
                     0);
    assert_int_not_equal(tt_sh("cd %s && openssl x509 -noout -in name.pem -checkend %d "
                               ">/dev/null",
                               TT.dir, 46 * 86400),
                         0);
    br_x509_decoder_context dc;
    br_x509_decoder_init(&dc, NULL, NULL);
    br_x509_decoder_push(&dc, cfg->chain[0].data, cfg->chain[0].data_len);
    assert_non_null(br_x509_decoder_get_pkey(&dc));
    uint64_t span = (uint64_t)(dc.notafter_days - dc.notbefore_days) * 86400 +
                    dc.notafter_seconds - dc.notbefore_seconds;
    assert_true(span <= 47 * 86400);
    assert_true(cfg->chain[0].data_len < 600);
    print_message("leaf: %zu bytes DER\n", cfg->chain[0].data_len);
    assert_int_equal(cfg->nchain, 2); /* the CA follows */
    tls_server_cfg_free(cfg);

    cfg = get(m, "127.0.0.1", wall());
    write_leaf(cfg, "ip4");
    assert_int_equal(verify("v", "ip4", "-verify_ip 127.0.0.1"), 0);
    assert_int_not_equal(verify("v", "ip4", "-verify_ip 127.0.0.2"), 0);
    assert_int_equal(shows("ip4.pem", "IP Address:127.0.0.1"), 0);
    tls_server_cfg_free(cfg);
    /* With a final dot it is a name: its own leaf, not the address's
     * (both canonicalise to "127.0.0.1"; a fuzz run found the mix-up). */
    cfg = get(m, "127.0.0.1.", wall());
    write_leaf(cfg, "ip4dot");
    assert_int_equal(shows("ip4dot.pem", "DNS:127.0.0.1"), 0);
    assert_int_not_equal(shows("ip4dot.pem", "IP Address:"), 0);
    tls_server_cfg_free(cfg);
    cfg = get(m, "[2001:DB8::1]", wall());
    write_leaf(cfg, "ip6");
    assert_int_equal(verify("v", "ip6", "-verify_ip 2001:db8::1"), 0);
    tls_server_cfg_free(cfg);

    /* Too long for a CN: an empty subject and a critical SAN. */
    char lng[128];
    snprintf(lng, sizeof(lng), "%s.%s.test", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    cfg = get(m, lng, wall());
    write_leaf(cfg, "long");
    char how[200];
    snprintf(how, sizeof(how), "-verify_hostname %s", lng);
    assert_int_equal(verify("v", "long", how), 0);
    assert_int_equal(shows("long.pem", "X509v3 Subject Alternative Name: critical"), 0);
    tls_server_cfg_free(cfg);

    /* Names no certificate can carry. */
    static const char *const bad[] = {"", ".", "a..b", "bad host", "caf\xc3\xa9.test", "*.x.test",
                                      "[1.2.3.4]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_null(tls_mint_get(m, bad[i], wall(), err, sizeof(err)));
        assert_non_null(strstr(err, "tls: no leaf for '"));
    }
    struct tls_mint_stats st;
    tls_mint_stats(m, &st);
    assert_int_equal(st.minted, 5);
    tls_mint_free(m);
    tls_ca_free(ca);
}

/* A CA made elsewhere, whose SKI is no SHA-1 of its key: the leaves' AKI
 * is that SKI, so openssl still chains them. */
static void
test_foreign_ca(void **state)
{
    if (!TT.ok)
        TT_PEER_MISSING("is not on PATH");
    char cert[128], key[128], err[256];
    assert_int_equal(tt_sh("cd %s && mkdir -p odd && openssl req -x509 -newkey ec -pkeyopt "
                           "ec_paramgen_curve:P-256 -nodes -keyout odd/ca.key -out odd/ca.pem "
                           "-days 30 -subj '/CN=odd SKI CA' "
                           "-addext basicConstraints=critical,CA:TRUE "
                           "-addext keyUsage=critical,keyCertSign,cRLSign "
                           "-addext subjectKeyIdentifier=01:02:03:04 "
                           "-addext authorityKeyIdentifier=keyid >>gen.log 2>&1",
                           TT.dir),
                     0);
    tt_path(cert, sizeof(cert), "odd/ca.pem");
    tt_path(key, sizeof(key), "odd/ca.key");
    struct tls_ca *ca = tls_ca_load(cert, key, err, sizeof(err));
    if (ca == NULL)
        fail_msg("%s", err);
    struct tls_mint *m = tls_mint_new(ca, 0, err, sizeof(err));
    assert_non_null(m);
    struct tls_server_cfg *cfg = get(m, "odd.test", wall());
    write_leaf(cfg, "odd");
    assert_int_equal(verify("odd", "odd", "-verify_hostname odd.test"), 0);
    assert_int_equal(tt_sh("cd %s && openssl x509 -noout -text -in odd.pem | "
                           "grep -A1 'Authority Key Identifier' | grep -q '01:02:03:04'",
                           TT.dir),
                     0);
    /* It ends in 30 days: so does the leaf. */
    assert_int_not_equal(tt_sh("cd %s && openssl x509 -noout -in odd.pem -checkend %d "
                               ">/dev/null",
                               TT.dir, 31 * 86400),
                         0);
    /* Near the CA's end no new leaf can be made: the cached one serves
     * while it lasts, then the mint says why. */
    struct tls_server_cfg *late = get(m, "odd.test", wall() + 29.5 * 86400);
    assert_ptr_equal(late, cfg);
    tls_server_cfg_free(late);
    assert_null(tls_mint_get(m, "odd.test", wall() + 30.5 * 86400, err, sizeof(err)));
    assert_string_equal(err, "tls: the CA certificate expires within a day: make a new CA");
    tls_server_cfg_free(cfg);
    tls_mint_free(m);
    tls_ca_free(ca);
}

static void
test_lru(void **state)
{
    char err[256];
    struct tls_ca *ca = make_ca("lru");
    struct tls_mint *m = tls_mint_new(ca, 2, err, sizeof(err));
    struct tls_mint_stats st;
    double now = wall();
    assert_non_null(m);

    struct tls_server_cfg *a = get(m, "a.test", now), *b;
    b = get(m, "A.TEST.", now + 60); /* the same host */
    assert_ptr_equal(a, b);
    tls_mint_stats(m, &st);
    assert_int_equal(st.minted, 1);
    assert_int_equal(st.cached, 1);
    assert_int_equal(st.held, 1);
    tls_server_cfg_free(b);
    tls_server_cfg_free(get(m, "b.test", now));
    tls_server_cfg_free(get(m, "c.test", now)); /* a.test goes: the least recent */
    tls_mint_stats(m, &st);
    assert_int_equal(st.minted, 3);
    assert_int_equal(st.held, 2);
    tls_server_cfg_free(get(m, "b.test", now));
    tls_server_cfg_free(get(m, "c.test", now));
    tls_mint_stats(m, &st);
    assert_int_equal(st.minted, 3);
    assert_int_equal(st.cached, 3);
    b = get(m, "a.test", now); /* minted again, and b.test goes */
    assert_ptr_not_equal(a, b); /* the first still lives: the caller holds it */
    assert_int_equal(a->chain[0].data[0], 0x30);
    tls_server_cfg_free(a);
    tls_mint_stats(m, &st);
    assert_int_equal(st.minted, 4);
    assert_int_equal(st.held, 2);
    tls_server_cfg_free(get(m, "c.test", now));
    tls_mint_stats(m, &st);
    assert_int_equal(st.minted, 4);

    /* Re-minted within a day of notAfter (now + 45 days), not before. */
    struct tls_server_cfg *c = get(m, "a.test", now + 44 * 86400.0 - 60);
    assert_ptr_equal(c, b);
    tls_server_cfg_free(c);
    c = get(m, "a.test", now + 44 * 86400.0 + 60);
    assert_ptr_not_equal(c, b);
    tls_mint_stats(m, &st);
    assert_int_equal(st.minted, 5);
    assert_int_equal(st.held, 2);
    br_x509_decoder_context dc;
    br_x509_decoder_init(&dc, NULL, NULL);
    br_x509_decoder_push(&dc, c->chain[0].data, c->chain[0].data_len);
    assert_non_null(br_x509_decoder_get_pkey(&dc));
    /* notBefore a day before the |now| it was minted at */
    assert_int_equal(((int64_t)dc.notbefore_days - 719528) * 86400 + dc.notbefore_seconds,
                     (int64_t)(now + 44 * 86400.0 + 60) - 86400);
    tls_server_cfg_free(c);
    tls_server_cfg_free(b);
    tls_mint_free(m);
    tls_ca_free(ca);
}

/* The cost of a mint and of a cached get, for the log. */
static void
test_cost(void **state)
{
    char err[256], host[64];
    struct tls_ca *ca = make_ca("cost");
    enum { N = 200 };
    struct tls_mint *m = tls_mint_new(ca, N, err, sizeof(err));
    assert_non_null(m);
    double now = wall(), t0 = tt_now_ms();
    for (int i = 0; i < N; i++) {
        snprintf(host, sizeof(host), "host%d.example.test", i);
        tls_server_cfg_free(get(m, host, now));
    }
    double t1 = tt_now_ms();
    for (int k = 0; k < 50; k++)
        for (int i = 0; i < N; i++) {
            snprintf(host, sizeof(host), "host%d.example.test", i);
            tls_server_cfg_free(get(m, host, now));
        }
    double t2 = tt_now_ms();
    struct tls_mint_stats st;
    tls_mint_stats(m, &st);
    assert_int_equal(st.minted, N);
    assert_int_equal(st.cached, 50 * N);
    print_message("mint: %.0f us per leaf (%.0f/s), cached get %.2f us\n",
                  (t1 - t0) * 1e3 / N, N / ((t1 - t0) / 1e3), (t2 - t1) * 1e3 / (50 * N));
    tls_mint_free(m);
    tls_ca_free(ca);
}

/* A handshake with a minted leaf: s_client trusts only the CA. */
static void
test_handshake(void **state)
{
    if (!TT.ok)
        TT_PEER_MISSING("is not on PATH");
    char err[256], log[16384], args[512];
    struct tls_ca *ca = make_ca("hs");
    struct tls_mint *m = tls_mint_new(ca, 0, err, sizeof(err));
    assert_non_null(m);
    struct tt_srv S;

    tt_srv_start(&S, ev_loop_new(EVFLAG_AUTO), get(m, "mint.test", wall()));
    snprintf(args, sizeof(args),
             "-servername mint.test -verify_hostname mint.test -verify_return_error "
             "-CAfile %s/hs/ca.pem -alpn h2,http/1.1",
             TT.dir);
    assert_int_equal(tt_s_client(&S, args, log, sizeof(log)), 0);
    assert_non_null(strstr(log, "Verify return code: 0 (ok)"));
    assert_non_null(strstr(log, "ALPN protocol: h2"));
    assert_int_equal(S.c[0].r.err, 0);
    snprintf(args, sizeof(args),
             "-servername mint.test -verify_hostname other.test -verify_return_error "
             "-CAfile %s/hs/ca.pem",
             TT.dir);
    assert_int_not_equal(tt_s_client(&S, args, log, sizeof(log)), 0);
    assert_non_null(strstr(log, "hostname mismatch"));
    tt_srv_end(&S);

    tt_srv_start(&S, ev_loop_new(EVFLAG_AUTO), get(m, "127.0.0.1", wall()));
    snprintf(args, sizeof(args), "-verify_ip 127.0.0.1 -verify_return_error -CAfile %s/hs/ca.pem",
             TT.dir);
    assert_int_equal(tt_s_client(&S, args, log, sizeof(log)), 0);
    assert_non_null(strstr(log, "Verify return code: 0 (ok)"));
    tt_srv_end(&S);
    tls_mint_free(m);
    tls_ca_free(ca);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ca_create),  cmocka_unit_test(test_ca_load_errors),
        cmocka_unit_test(test_leaves_verify), cmocka_unit_test(test_foreign_ca),
        cmocka_unit_test(test_lru),
        cmocka_unit_test(test_cost),       cmocka_unit_test(test_handshake),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
