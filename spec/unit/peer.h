#ifndef CHUTE_SPEC_UNIT_PEER_H
#define CHUTE_SPEC_UNIT_PEER_H

/* Interop tests against real programs (peers: openssl, microsocks,
 * tinyproxy, ss-server, dnsmasq). cmocka counts a skipped test as passed,
 * so a missing peer must not end in a bare skip():
 *
 *   peer_find(NAME)          NAME's path on PATH (where execvp and the
 *                            shell's `command -v` look), or NULL. The path
 *                            is in a static buffer the next call reuses.
 *   peer_need(NAME)          peer_find(NAME), or peer_missing(NAME, ...).
 *   peer_missing(NAME, WHY)  leaves the test. With CI=true in the
 *                            environment it fails, naming NAME and the
 *                            Debian package that installs it (spec/peers;
 *                            scripts/bootstrap installs them all); else it
 *                            prints the same line and skips.
 *
 * spec/e2e/lib.sh's have_cmd does the same for the shell suites. Include
 * this after cmocka.h; spec/CMakeLists.txt defines CHUTE_PEERS_FILE. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline const char *
peer_find(const char *name)
{
    static char path[4096];
    const char *dirs = getenv("PATH");
    struct stat st;

    if (dirs == NULL)
        dirs = "/usr/local/bin:/usr/bin:/bin";
    while (*dirs != '\0') {
        size_t len = strcspn(dirs, ":");
        if (len > 0) {
            snprintf(path, sizeof(path), "%.*s/%s", (int)len, dirs, name);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
                return path;
        }
        dirs += len + (dirs[len] == ':');
    }
    return NULL;
}

/* The package spec/peers lists for |name|, or "" when it lists none. */
static inline void
peer_package(const char *name, char *pkg, size_t cap)
{
    pkg[0] = '\0';
#ifdef CHUTE_PEERS_FILE
    FILE *f = fopen(CHUTE_PEERS_FILE, "r");
    char line[256], prog[128], found[128];

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (line[0] != '#' && sscanf(line, "%127s %127s", prog, found) == 2 &&
            strcmp(prog, name) == 0) {
            snprintf(pkg, cap, "%s", found);
            break;
        }
    }
    if (f != NULL)
        fclose(f);
#endif
}

static inline void
peer_missing(const char *name, const char *why)
{
    char pkg[128], msg[512];
    const char *ci = getenv("CI");

    peer_package(name, pkg, sizeof(pkg));
    snprintf(msg, sizeof(msg), "peer %s %s (%s%s%sscripts/bootstrap installs it)", name, why,
             pkg[0] ? "Debian package " : "", pkg, pkg[0] ? "; " : "");
    if (ci != NULL && strcmp(ci, "true") == 0)
        fail_msg("%s: with CI=true an interop test that cannot run fails", msg);
    print_message("SKIP: %s: this interop test does not run (with CI=true it fails)\n", msg);
    skip();
}

static inline const char *
peer_need(const char *name)
{
    const char *path = peer_find(name);

    if (path == NULL)
        peer_missing(name, "is not on PATH");
    return path;
}

#endif
