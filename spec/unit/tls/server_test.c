/* core/tls's server: configurations and their errors, the ClientHello
 * check (hello.c) on built and on real hellos, and the server against
 * `openssl s_client`, including the resumption that crashes BearSSL 0.6
 * when the ALPN lists share no name. */

#include <sys/mman.h>

#include "tls_test.h"
#include "tls/tls_int.h"

static int
group_setup(void **state)
{
    int r = tt_setup();
    return r > 0 ? 0 : r; /* no openssl: the tests that need it skip */
}

static int
group_teardown(void **state)
{
    tt_teardown();
    return 0;
}

/* ---- configurations --------------------------------------------------------- */

static void
expect_cfg_error(const char *cert, const char *key, const char *why)
{
    char err[256] = "";
    struct tls_server_cfg *cfg = tt_cfg(cert, key, err, sizeof(err));
    if (cfg != NULL)
        tls_server_cfg_free(cfg);
    assert_null(cfg);
    assert_string_equal(err, why);
}

static void
expect_pem_error(const char *chain, const char *key, const char *why)
{
    char err[256] = "";
    struct tls_server_cfg *cfg = tls_server_cfg_new_pem(chain, key, err, sizeof(err));
    assert_null(cfg);
    assert_string_equal(err, why);
}

static void
test_cfg_errors(void **state)
{
    NEED_OPENSSL();
    char err[256];
    /* Every key encoding loads; a chain is kept in order. */
    static const char *const keys[] = {"dns.key", "dns_ec.key", "dns_param.key"};
    for (size_t i = 0; i < 3; i++) {
        struct tls_server_cfg *cfg = tt_cfg("dns.pem", keys[i], err, sizeof(err));
        if (cfg == NULL)
            fail_msg("%s: %s", keys[i], err);
        assert_int_equal(cfg->nchain, 1);
        tls_server_cfg_free(cfg);
    }
    struct tls_server_cfg *cfg = tt_cfg("chain.pem", "dns.key", err, sizeof(err));
    assert_non_null(cfg);
    assert_int_equal(cfg->nchain, 2);
    tls_server_cfg_free(cfg);

    expect_cfg_error("dns.pem", "other.key", "tls: private key does not match the certificate");
    expect_cfg_error("rsa.pem", "dns.key", "tls: certificate key is not EC P-256");
    expect_cfg_error("rsa.pem", "rsa.key", "tls: private key is not an EC key");
    expect_cfg_error("p384.pem", "p384.key", "tls: certificate key is not EC P-256");
    expect_cfg_error("dns.pem", "p384.key", "tls: private key is not P-256");
    expect_cfg_error("dns.pem", "rsa.key", "tls: private key is not an EC key");
    expect_cfg_error("dns.pem", "dns.pem", "tls: private key: no EC PRIVATE KEY or PRIVATE KEY in it");
    expect_cfg_error("dns.key", "dns.key", "tls: certificate chain: no certificate in it");
    expect_cfg_error("empty.pem", "dns.key", "tls: certificate chain: no certificate in it");

    char *key = tt_read("dns.key", NULL), *cert = tt_read("dns.pem", NULL);
    expect_pem_error("", key, "tls: certificate chain: no certificate in it");
    expect_pem_error(NULL, NULL, "tls: certificate chain: no certificate in it");
    expect_pem_error("-----BEGIN CERTIFICATE-----\n@@@@\n-----END CERTIFICATE-----\n", key,
                     "tls: certificate chain: malformed PEM");
    /* Base64 of bytes that are no certificate. */
    char err2[256];
    assert_null(tls_server_cfg_new_pem("-----BEGIN CERTIFICATE-----\nAAECAwQF\n"
                                       "-----END CERTIFICATE-----\n",
                                       key, err2, sizeof(err2)));
    assert_non_null(strstr(err2, "tls: certificate: cannot decode it (BearSSL error "));
    expect_pem_error(cert, "-----BEGIN PRIVATE KEY-----\n@@@@\n-----END PRIVATE KEY-----\n",
                     "tls: private key: malformed PEM");
    assert_null(tls_server_cfg_new_pem(cert, "-----BEGIN EC PRIVATE KEY-----\nAAECAwQF\n"
                                             "-----END EC PRIVATE KEY-----\n",
                                       err2, sizeof(err2)));
    assert_non_null(strstr(err2, "tls: private key: cannot decode it (BearSSL error "));
    free(key);
    free(cert);
}

/* ---- the ClientHello check --------------------------------------------------- */

/* Builds a ClientHello record: a 32-byte session ID when |sid|, the ALPN
 * names |alpn| (NULL: no extension; |twice|: the extension twice) between
 * two other extensions. Its length. */
static size_t
build_hello(unsigned char *out, int sid, const char *const *alpn, size_t nalpn, int twice)
{
    unsigned char ext[512], *e = ext;
    size_t n;
    /* server_name "localhost" */
    static const unsigned char sni[] = {0x00, 0x00, 0x00, 0x0e, 0x00, 0x0c, 0x00, 0x00, 0x09,
                                        'l',  'o',  'c',  'a',  'l',  'h',  'o',  's',  't'};
    memcpy(e, sni, sizeof(sni));
    e += sizeof(sni);
    for (int k = 0; alpn != NULL && k < (twice ? 2 : 1); k++) {
        unsigned char list[256], *l = list;
        for (size_t i = 0; i < nalpn; i++) {
            *l++ = (unsigned char)strlen(alpn[i]);
            memcpy(l, alpn[i], strlen(alpn[i]));
            l += strlen(alpn[i]);
        }
        n = (size_t)(l - list);
        *e++ = 0x00, *e++ = 0x10, *e++ = 0, *e++ = (unsigned char)(n + 2);
        *e++ = 0, *e++ = (unsigned char)n;
        memcpy(e, list, n);
        e += n;
    }
    static const unsigned char groups[] = {0x00, 0x0a, 0x00, 0x04, 0x00, 0x02, 0x00, 0x17};
    memcpy(e, groups, sizeof(groups));
    e += sizeof(groups);
    size_t elen = (size_t)(e - ext);

    unsigned char *h = out + 9, *q = h;
    *q++ = 3, *q++ = 3;
    memset(q, 0x5a, 32), q += 32;
    *q++ = sid ? 32 : 0;
    if (sid)
        memset(q, 0xa5, 32), q += 32;
    *q++ = 0, *q++ = 2, *q++ = 0xc0, *q++ = 0x2b; /* ECDHE_ECDSA_AES_128_GCM */
    *q++ = 1, *q++ = 0;                           /* null compression */
    *q++ = (unsigned char)(elen >> 8), *q++ = (unsigned char)elen;
    memcpy(q, ext, elen), q += elen;
    size_t hlen = (size_t)(q - h);
    out[0] = 22, out[1] = 3, out[2] = 1;
    out[3] = (unsigned char)((hlen + 4) >> 8), out[4] = (unsigned char)(hlen + 4);
    out[5] = 1, out[6] = 0, out[7] = (unsigned char)(hlen >> 8), out[8] = (unsigned char)hlen;
    return 9 + hlen;
}

static const char *const ours[] = {"h2", "http/1.1"};

static int
check(const unsigned char *rec, size_t len)
{
    unsigned char id[32];
    size_t idlen;
    return tls_hello_resume_ok(rec, len, ours, 2, id, &idlen);
}

static void
test_hello_check(void **state)
{
    unsigned char rec[1024], id[32];
    size_t n, idlen;
    static const char *const h2[] = {"h2"}, *const foo[] = {"foo"},
                             *const foo_h1[] = {"foo", "http/1.1"}, *const h[] = {"h"},
                             *const h22[] = {"h22"};
    n = build_hello(rec, 1, NULL, 0, 0);
    assert_int_equal(tls_hello_resume_ok(rec, n, ours, 2, id, &idlen), 1); /* no ALPN */
    assert_int_equal(idlen, 32);
    assert_int_equal(id[0], 0xa5);
    n = build_hello(rec, 0, h2, 1, 0);
    assert_int_equal(tls_hello_resume_ok(rec, n, ours, 2, id, &idlen), 1);
    assert_int_equal(idlen, 0);
    assert_int_equal(check(rec, build_hello(rec, 1, foo_h1, 2, 0)), 1);
    assert_int_equal(check(rec, build_hello(rec, 1, foo, 1, 0)), 0);
    assert_int_equal(check(rec, build_hello(rec, 1, h, 1, 0)), 0);   /* a prefix is no match */
    assert_int_equal(check(rec, build_hello(rec, 1, h22, 1, 0)), 0); /* nor a longer name */
    assert_int_equal(check(rec, build_hello(rec, 1, h2, 1, 1)), 0);  /* twice: refused */
    assert_int_equal(tls_hello_resume_ok(rec, build_hello(rec, 1, h2, 1, 0), ours, 0, id, &idlen),
                     0); /* no names of ours */

    /* Cut anywhere (a hello over several records, or a short read): no. */
    n = build_hello(rec, 1, h2, 1, 0);
    for (size_t len = 0; len < n; len++) {
        unsigned char *cut = malloc(len ? len : 1); /* exact size: overreads trip ASan */
        memcpy(cut, rec, len);
        assert_int_equal(check(cut, len), 0);
        free(cut);
    }
    /* Corrupted anywhere: no crash, no overread; a length that no longer
     * adds up is a no. */
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            unsigned char *bad = malloc(n);
            memcpy(bad, rec, n);
            bad[i] ^= (unsigned char)(1 << bit);
            (void)check(bad, n);
            free(bad);
        }
    }
    rec[3] ^= 1; /* record length */
    assert_int_equal(check(rec, n), 0);
    n = build_hello(rec, 1, h2, 1, 0);
    rec[0] = 23; /* application data */
    assert_int_equal(check(rec, n), 0);
}

/* ---- against openssl s_client -------------------------------------------------- */

/* `openssl s_client` against |S| for localhost, trusting the test CA,
 * with |extra| arguments. */
static int
s_client(struct tt_srv *S, const char *extra, char *log, size_t loglen)
{
    char args[900];
    snprintf(args, sizeof(args), "-servername localhost -CAfile %s/ca.pem %s", TT.dir, extra);
    return tt_s_client(S, args, log, loglen);
}

static void
test_s_client_alpn(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    char err[256], log[16384];
    struct tls_server_cfg *cfg = tt_cfg("chain.pem", "dns.key", err, sizeof(err));
    assert_non_null(cfg);
    struct tt_srv S;
    tt_srv_start(&S, loop, cfg);

    /* h2 chosen; the chain verifies against the CA; AES-GCM first. */
    assert_int_equal(s_client(&S, "-alpn http/1.1,h2 -verify_return_error", log, sizeof(log)), 0);
    assert_non_null(strstr(log, "ALPN protocol: h2"));
    assert_non_null(strstr(log, "Verify return code: 0 (ok)"));
    assert_non_null(strstr(log, "ECDHE-ECDSA-AES128-GCM-SHA256"));
    assert_int_equal(S.c[0].r.err, 0);
    assert_string_equal(S.c[0].alpn, "h2");
    assert_true(S.c[0].p.eof && !S.c[0].p.err); /* s_client ended with close_notify */

    assert_int_equal(s_client(&S, "-alpn http/1.1", log, sizeof(log)), 0);
    assert_non_null(strstr(log, "ALPN protocol: http/1.1"));

    /* Nothing in common: alert 120. */
    assert_int_not_equal(s_client(&S, "-alpn foo", log, sizeof(log)), 0);
    assert_string_equal(S.c[2].r.why, "tls: client offers no protocol we speak (ALPN)");
    assert_non_null(strstr(log, "no application protocol"));

    /* A client that does not trust our CA, and one that speaks TLS 1.3
     * only. */
    snprintf(err, sizeof(err), "-CAfile %s/other.pem -verify_return_error", TT.dir);
    assert_int_not_equal(s_client(&S, err, log, sizeof(log)), 0);
    print_message("untrusting client: %s\n", S.c[3].r.why);
    assert_non_null(strstr(S.c[3].r.why, "tls: client does not trust our certificate (alert "));
    assert_int_not_equal(s_client(&S, "-tls1_3", log, sizeof(log)), 0);
    assert_false(S.c[4].reading);
    assert_int_equal(S.c[4].r.err, EPROTONOSUPPORT);
    assert_string_equal(S.c[4].r.why, "tls: no cipher suite in common with the client "
                                      "(BearSSL 0.6 speaks TLS 1.2 only)");

    tt_expect_stats(cfg, 2, 0, 3, 0);
    tt_srv_end(&S);
}

/* -sess_out then -sess_in: resumed with h2, with no ALPN, and with a list
 * that holds h2; the crash input (the session, ALPN "foo" only) becomes a
 * full handshake that fails with alert 120, and the server goes on. */
static void
test_s_client_resumption(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    char err[256], log[16384], args[512];
    struct tls_server_cfg *cfg = tt_cfg("dns.pem", "dns.key", err, sizeof(err));
    assert_non_null(cfg);
    struct tt_srv S;
    tt_srv_start(&S, loop, cfg);
    snprintf(args, sizeof(args), "-alpn h2 -sess_out %s/sess.pem", TT.dir);
    assert_int_equal(s_client(&S, args, log, sizeof(log)), 0);
    assert_non_null(strstr(log, "New, TLSv1.2"));

    static const struct {
        const char *alpn;
        int resumed;
    } runs[] = {
        {"-alpn h2", 1}, {"", 1}, {"-alpn foo", -1}, {"-alpn foo,h2", 1}, {"-alpn foo", -1},
        {"-alpn http/1.1", 1},
    };
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        snprintf(args, sizeof(args), "%s -sess_in %s/sess.pem", runs[i].alpn, TT.dir);
        int rc = s_client(&S, args, log, sizeof(log));
        struct tt_srv_conn *c = &S.c[S.n - 1];
        if (runs[i].resumed < 0) {
            assert_int_not_equal(rc, 0);
            assert_false(c->reading);
            assert_string_equal(c->r.why, "tls: client offers no protocol we speak (ALPN)");
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(c->r.err, 0);
        assert_non_null(strstr(log, "Reused, TLSv1.2"));
        assert_int_equal(c->resumed, 1);
    }
    tt_expect_stats(cfg, 5, 4, 2, 2);
    tt_srv_end(&S);
}

/* The control: BearSSL 0.6 on its own, with a session cache and ALPN
 * names placed just before unmapped memory, dies on the same two
 * s_client runs. Proves the test above feeds the crash input. */
static int
raw_read(void *ctx, unsigned char *buf, size_t len)
{
    ssize_t n = read(*(int *)ctx, buf, len);
    return n > 0 ? (int)n : -1;
}

static int
raw_write(void *ctx, const unsigned char *buf, size_t len)
{
    ssize_t n = write(*(int *)ctx, buf, len);
    return n > 0 ? (int)n : -1;
}

static void
raw_server(int lfd, const struct tls_server_cfg *cfg)
{
    static br_ssl_server_context sc;
    static br_ssl_session_cache_lru lru;
    static unsigned char iobuf[BR_SSL_BUFSIZE_BIDI], store[100 * 16];
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), guard = 2 << 20;
    unsigned char *m = mmap(NULL, pg + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                            -1, 0);
    if (m == MAP_FAILED || mprotect(m + pg, guard, PROT_NONE) != 0)
        _exit(90);
    const char **names = (const char **)(void *)(m + pg) - 2;
    names[0] = "h2";
    names[1] = "http/1.1";
    br_ssl_session_cache_lru_init(&lru, store, sizeof(store));
    for (int i = 0; i < 2; i++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            _exit(91);
        br_ssl_server_init_full_ec(&sc, cfg->chain, cfg->nchain, BR_KEYTYPE_EC, &cfg->sk);
        br_ssl_engine_set_versions(&sc.eng, BR_TLS12, BR_TLS12);
        br_ssl_engine_set_buffer(&sc.eng, iobuf, sizeof(iobuf), 1);
        br_ssl_engine_set_protocol_names(&sc.eng, names, 2);
        br_ssl_server_set_cache(&sc, &lru.vtable);
        br_ssl_server_reset(&sc);
        br_sslio_context io;
        br_sslio_init(&io, &sc.eng, raw_read, &fd, raw_write, &fd);
        br_sslio_flush(&io);
        unsigned char b[256];
        while (br_sslio_read(&io, b, sizeof(b)) > 0)
            ;
        close(fd);
    }
    _exit(0);
}

static void
test_control_bearssl_alone_crashes(void **state)
{
    NEED_OPENSSL();
    char err[256], cmd[1024];
    struct tls_server_cfg *cfg = tt_cfg("dns.pem", "dns.key", err, sizeof(err));
    assert_non_null(cfg);
    unsigned short port;
    int lfd = tt_listen(&port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* cmocka's handlers would catch the fault and run the tests on in
         * this child: die of it instead. */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        raw_server(lfd, cfg);
    }
    close(lfd);
    snprintf(cmd, sizeof(cmd),
             "openssl s_client -connect 127.0.0.1:%u -tls1_2 -alpn h2 -sess_out %s/raw.pem "
             "</dev/null >%s/raw1.log 2>&1; "
             "timeout 10 openssl s_client -connect 127.0.0.1:%u -tls1_2 -alpn foo -sess_in "
             "%s/raw.pem </dev/null >%s/raw2.log 2>&1",
             port, TT.dir, TT.dir, port, TT.dir, TT.dir);
    tt_sh("%s", cmd);
    int status;
    for (int i = 0; i < 500 && waitpid(pid, &status, WNOHANG) != pid; i++)
        usleep(10 * 1000);
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    print_message("BearSSL alone: %s %d\n", WIFSIGNALED(status) ? "killed by signal" : "exit",
                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGSEGV);
    tls_server_cfg_free(cfg);
}

/* Real ClientHellos, as openssl sends them (many extensions, a key share
 * for TLS 1.3): the first record caught on a bare listener. */
static size_t
catch_hello(const char *args, unsigned char *rec, size_t cap)
{
    unsigned short port;
    int lfd = tt_listen(&port);
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "exec openssl s_client -connect 127.0.0.1:%u -servername localhost %s "
             "</dev/null >/dev/null 2>&1",
             port, args);
    pid_t pid = tt_spawn_sh(cmd);
    int fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    size_t n = 0;
    while (n < cap) {
        ssize_t k = read(fd, rec + n, cap - n);
        if (k <= 0)
            break;
        n += (size_t)k;
        if (n >= 5 && n >= 5 + (size_t)(rec[3] << 8 | rec[4]))
            break;
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    close(fd);
    close(lfd);
    assert_true(n >= 5);
    return 5 + (size_t)(rec[3] << 8 | rec[4]) <= n ? 5 + (size_t)(rec[3] << 8 | rec[4]) : n;
}

static void
test_hello_check_real_hellos(void **state)
{
    NEED_OPENSSL();
    unsigned char rec[17000];
    assert_int_equal(check(rec, catch_hello("-alpn h2,http/1.1", rec, sizeof(rec))), 1);
    assert_int_equal(check(rec, catch_hello("-alpn foo", rec, sizeof(rec))), 0);
    assert_int_equal(check(rec, catch_hello("-alpn foo,http/1.1", rec, sizeof(rec))), 1);
    assert_int_equal(check(rec, catch_hello("", rec, sizeof(rec))), 1);
    assert_int_equal(check(rec, catch_hello("-tls1_2 -alpn acme-tls/1", rec, sizeof(rec))), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cfg_errors),
        cmocka_unit_test(test_hello_check),
        cmocka_unit_test(test_hello_check_real_hellos),
        cmocka_unit_test(test_s_client_alpn),
        cmocka_unit_test(test_s_client_resumption),
        cmocka_unit_test(test_control_bearssl_alone_crashes),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
