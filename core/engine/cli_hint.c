/* The bundle argument of `chute run|check|route`: a folder. Users coming
 * from other tools pass a file: main.lua itself, or a Clash/Surge config. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "engine/engine.h"

static int
ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

int
engine_cli_bundle_arg(const char *cmd, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISDIR(st.st_mode))
        return 0; /* the loader names a missing folder */
    if (ends_with(path, ".lua")) {
        char dir[4096];
        const char *slash = strrchr(path, '/');
        if (slash == NULL)
            snprintf(dir, sizeof(dir), "./");
        else
            snprintf(dir, sizeof(dir), "%.*s/", (int)(slash - path), path);
        fprintf(stderr, "chute: %s is a file: pass the bundle's folder, the one that holds "
                "main.lua: chute %s %s\n", path, cmd, dir);
    } else if (ends_with(path, ".yaml") || ends_with(path, ".yml") || ends_with(path, ".conf")) {
        fprintf(stderr, "chute: %s is a %s config, not a bundle: turn it into one with chute "
                "import %s -o BUNDLE/, then chute %s BUNDLE/\n", path,
                ends_with(path, ".conf") ? "Surge" : "Clash", path, cmd);
    } else {
        fprintf(stderr, "chute: %s is a file: pass a bundle folder (one with main.lua)\n", path);
    }
    return -1;
}
