/* chute import CONFIG -o BUNDLE: a Clash/mihomo config.yaml or a Surge
 * profile.conf written as a bundle (core/import): main.lua, the local rule
 * lists it names under rules/, and a Surge profile's rewrite sections as
 * a module. Every note (what chute cannot do, and what it did instead) is
 * printed, and kept at the top of main.lua. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "import/import.h"

#define MAX_FILE_BYTES (256u << 20)

static const char usage_import[] =
    "usage: chute import [--force] [--quiet] CONFIG -o BUNDLE\n"
    "\n"
    "Writes BUNDLE/main.lua from CONFIG, a Clash/mihomo config.yaml or a Surge\n"
    "profile.conf: proxies, groups, rule providers and rules, listen ports,\n"
    "DNS and TUN settings; the local rule lists it names go to BUNDLE/rules/,\n"
    "a profile's [MITM]/[URL Rewrite]/[Header Rewrite]/[Map Local] sections\n"
    "to a module beside main.lua. Whatever chute cannot do as the file says is\n"
    "listed with its file:line and what was done instead.\n"
    "\n"
    "  -o, --output DIR    the bundle's folder (made if missing)\n"
    "  --force             replace files already there\n"
    "  --quiet             print the notes' count, not each note\n"
    "\n"
    "To keep the config as it is and add Lua around it, use chute.clash\n"
    "\"config.yaml\" / chute.surge \"profile.conf\" in a bundle instead.\n";

static char *
read_all(const char *path, size_t *len, int *e)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *e = errno;
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b != NULL) {
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (n < cap)
            break;
        if (cap >= MAX_FILE_BYTES) {
            free(b);
            b = NULL;
            errno = EFBIG;
            break;
        }
        cap *= 2;
        char *nb = realloc(b, cap + 1);
        if (nb == NULL)
            free(b);
        b = nb;
    }
    *e = b == NULL ? (errno ? errno : ENOMEM) : ferror(f) ? EIO : 0;
    fclose(f);
    if (b != NULL && *e != 0) {
        free(b);
        return NULL;
    }
    if (b != NULL)
        b[n] = '\0';
    *len = n;
    return b;
}

struct dirs {
    char dir[4096]; /* the config's folder, with its '/' */
};

static int
read_rel(void *ud, const char *path, char **data, size_t *len)
{
    struct dirs *d = ud;
    char full[8192];
    int e;
    snprintf(full, sizeof(full), "%s%s", path[0] == '/' ? "" : d->dir, path);
    *data = read_all(full, len, &e);
    return *data ? 0 : e;
}

static int
write_file(const char *dir, const char *rel, const char *data, size_t len, int force)
{
    char path[8192];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    if (slash != NULL && slash > path + strlen(dir)) {
        *slash = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "chute import: %s: %s\n", path, strerror(errno));
            return -1;
        }
        *slash = '/';
    }
    FILE *f = fopen(path, force ? "wb" : "wbx");
    if (f == NULL) {
        fprintf(stderr, "chute import: %s: %s%s\n", path, strerror(errno),
                errno == EEXIST ? " (--force replaces it)" : "");
        return -1;
    }
    int ok = fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    if (!ok)
        fprintf(stderr, "chute import: %s: %s\n", path, strerror(errno));
    return ok ? 0 : -1;
}

int
engine_import_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL;
    int force = 0, quiet = 0, c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "o:fqh", opts, NULL)) != -1) {
        if (c == 'o') {
            out = optarg;
        } else if (c == 'f') {
            force = 1;
        } else if (c == 'q') {
            quiet = 1;
        } else if (c == 'h') {
            fputs(usage_import, stdout);
            return 0;
        } else {
            fputs(usage_import, stderr);
            return 2;
        }
    }
    if (optind != argc - 1 || out == NULL) {
        fputs(usage_import, stderr);
        return 2;
    }
    const char *cfg = argv[optind];
    size_t len;
    int e;
    char *text = read_all(cfg, &len, &e);
    if (text == NULL) {
        fprintf(stderr, "chute import: %s: %s\n", cfg, strerror(e));
        return 1;
    }
    struct dirs d;
    const char *slash = strrchr(cfg, '/');
    snprintf(d.dir, sizeof(d.dir), "%.*s", slash ? (int)(slash - cfg + 1) : 0, cfg);
    const char *name = slash ? slash + 1 : cfg;
    struct import_opts o = {.read = read_rel, .ud = &d};
    struct import_result r;
    char err[1024];
    int rc = import_convert(text, len, name, &o, &r, err, sizeof(err));
    free(text);
    if (rc != 0) {
        fprintf(stderr, "chute import: %s\n", err);
        return 1;
    }
    rc = 0;
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "chute import: %s: %s\n", out, strerror(errno));
        rc = 1;
    }
    for (size_t i = 0; rc == 0 && i < r.ncopies; i++) {
        char *data = NULL;
        size_t n = 0;
        e = read_rel(&d, r.copies[i].from, &data, &n);
        if (e != 0 && r.copies[i].optional) {
            fprintf(stderr, "note: %s: its GEO rules read %s, which is not beside it (%s): "
                            "put yours beside main.lua, or name it in chute.config { geo = ... }\n",
                    name, r.copies[i].from, strerror(e));
        } else if (e != 0) {
            fprintf(stderr, "chute import: %s%s (named by %s): %s\n", d.dir, r.copies[i].from,
                    name, strerror(e));
            rc = 1;
        } else if (write_file(out, r.copies[i].to, data, n, force) != 0) {
            rc = 1;
        }
        free(data);
    }
    if (rc == 0 && r.module != NULL &&
        write_file(out, r.module_name, r.module, r.module_len, force) != 0)
        rc = 1;
    if (rc == 0 && write_file(out, "main.lua", r.lua, r.lua_len, force) != 0)
        rc = 1;
    for (size_t i = 0; !quiet && i < r.nnotes; i++)
        fprintf(stderr, "note: %s\n", r.notes[i]);
    if (rc == 0)
        printf("wrote %s/main.lua, %zu file%s beside it%s (%zu note%s)\n", out, r.ncopies,
               r.ncopies == 1 ? "" : "s", r.module ? " and a module" : "", r.nnotes,
               r.nnotes == 1 ? "" : "s");
    import_result_free(&r);
    return rc;
}
