#include <string.h>

#include "control/control_int.h"

/* GET /ui/: the dashboard, from files compiled into the binary
 * (core/control/ui/, embedded by scripts/embed_ui.cmake): no network at
 * run time. */

struct control_ui_file {
    const char *name;
    const char *data;
    size_t len;
};
extern const struct control_ui_file control_ui_files[];

static const char *
ctype(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot == NULL)
        return "application/octet-stream";
    if (strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    return "application/octet-stream";
}

int
control_ui(struct control_client *cl, const struct control_target *t)
{
    if (t->nsegs == 0 || strcmp(t->segs[0], "ui") != 0 || t->nsegs > 2)
        return 0;
    const char *name = t->nsegs == 2 ? t->segs[1] : "index.html";
    /* "/ui" and "/ui/" both give index.html: its links are absolute. */
    for (const struct control_ui_file *f = control_ui_files; f->name != NULL; f++)
        if (strcmp(f->name, name) == 0) {
            control_reply(cl, 200, ctype(f->name), f->data, f->len);
            return 1;
        }
    return 0;
}
