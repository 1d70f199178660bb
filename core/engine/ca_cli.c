/* `chute ca init | export [--der] | path`: the local CA the MITM signs its
 * leaves with, made once per install in chute's state folder (never in a
 * bundle), and handed to the user to trust. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "fetch/fetch.h"
#include "tls/tls.h"

static const char usage_ca[] =
    "usage: chute ca init | export [--der] | path\n"
    "\n"
    "The local CA that signs the leaves chute mints for MITM hosts. It lives in\n"
    "chute's state folder ($CHUTE_STATE_DIR, else $XDG_STATE_HOME/chute, else\n"
    "~/.local/state/chute) as ca.pem and ca.key (mode 0600).\n"
    "\n"
    "  init           make a new P-256 CA there (never overwrites one)\n"
    "  export         print the CA certificate as PEM, for users to trust\n"
    "  export --der   the same as DER (to a file or a pipe, not a terminal)\n"
    "  path           print the CA certificate's path\n";

/* see engine.h */
int
engine_state_dir(char *dir, size_t n)
{
    return fetch_state_dir(dir, n); /* the remote lists' caches live there too */
}

/* see engine.h */
int
engine_ca_paths(char *cert, size_t certlen, char *key, size_t keylen)
{
    char dir[4096];
    if (engine_state_dir(dir, sizeof(dir)) != 0)
        return -1;
    int a = snprintf(cert, certlen, "%s/ca.pem", dir), b = snprintf(key, keylen, "%s/ca.key", dir);
    return a > 0 && (size_t)a < certlen && b > 0 && (size_t)b < keylen ? 0 : -1;
}

static int
ca_init(const char *cert, const char *key)
{
    char err[512];
    if (tls_ca_create(cert, key, err, sizeof(err)) != 0) {
        fprintf(stderr, "chute: ca init: %s\n", err);
        if (strstr(err, "EEXIST") != NULL)
            fprintf(stderr, "chute: ca init: a CA is there already (`chute ca export` prints it); "
                            "remove both files first to make a new one, then trust it again\n");
        return 1;
    }
    printf("chute: made a CA: certificate %s, key %s (mode 0600, keep it private)\n"
           "Trust the certificate where the MITM'd clients run, e.g.:\n"
           "  Debian/Ubuntu:  sudo cp %s /usr/local/share/ca-certificates/chute.crt && "
           "sudo update-ca-certificates\n"
           "  Chromium (NSS): certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n chute -i %s\n"
           "  Firefox:        the same certutil on the profile folder, or its Certificates policy\n",
           cert, key, cert, cert);
    return 0;
}

static int
ca_export(const char *cert, const char *key, int der)
{
    char err[512];
    if (der && isatty(STDOUT_FILENO)) {
        fprintf(stderr, "chute: ca export --der: refusing to write binary to a terminal "
                        "(redirect it: chute ca export --der >chute-ca.der)\n");
        return 1;
    }
    struct tls_ca *ca = tls_ca_load(cert, key, err, sizeof(err));
    if (ca == NULL) {
        fprintf(stderr, "chute: ca export: %s%s\n", err,
                access(cert, F_OK) != 0 && errno == ENOENT ? " (make one with `chute ca init`)"
                                                           : "");
        return 1;
    }
    size_t len;
    const unsigned char *p = der ? tls_ca_der(ca, &len) : (const unsigned char *)tls_ca_pem(ca);
    if (!der)
        len = strlen((const char *)p);
    int ok = fwrite(p, 1, len, stdout) == len && fflush(stdout) == 0;
    tls_ca_free(ca);
    if (!ok) {
        fprintf(stderr, "chute: ca export: cannot write to stdout (%s)\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* see engine.h */
int
engine_ca_main(int argc, char **argv)
{
    char cert[4200], key[4200];
    const char *sub = argc > 2 ? argv[2] : "";
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        fputs(usage_ca, stdout);
        return 0;
    }
    int der = argc == 4 && strcmp(sub, "export") == 0 && strcmp(argv[3], "--der") == 0;
    if (!der && (argc != 3 || (strcmp(sub, "init") != 0 && strcmp(sub, "export") != 0 &&
                               strcmp(sub, "path") != 0))) {
        fputs(usage_ca, stderr);
        return 2;
    }
    if (engine_ca_paths(cert, sizeof(cert), key, sizeof(key)) != 0) {
        fprintf(stderr, "chute: ca: no state folder: set CHUTE_STATE_DIR, XDG_STATE_HOME or HOME\n");
        return 1;
    }
    if (strcmp(sub, "init") == 0)
        return ca_init(cert, key);
    if (strcmp(sub, "path") == 0) {
        printf("%s\n", cert);
        return 0;
    }
    return ca_export(cert, key, der);
}
