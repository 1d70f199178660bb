#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "import/import_int.h"
#include "mitm/rewrite.h"

/* The converter's door: pick the reader, check the model, write the Lua. */

enum import_kind
import_detect(const char *name, const char *text, size_t len)
{
    const char *dot = name ? strrchr(name, '.') : NULL;
    if (dot != NULL && (strcasecmp(dot, ".yaml") == 0 || strcasecmp(dot, ".yml") == 0))
        return IMPORT_CLASH;
    if (dot != NULL && strcasecmp(dot, ".conf") == 0)
        return IMPORT_SURGE;
    /* A Surge profile's first significant line is a [section]. */
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            continue;
        if (c == '#' || c == ';') {
            while (i < len && text[i] != '\n')
                i++;
            continue;
        }
        return c == '[' ? IMPORT_SURGE : IMPORT_CLASH;
    }
    return IMPORT_CLASH;
}

static void
module_warn(void *ud, const char *msg)
{
    struct import_model *m = ud;
    struct import_result *r = m->out;
    char *s = strdup(msg);
    for (char *p = s; p != NULL && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    char **v = s ? realloc(r->notes, (r->nnotes + 1) * sizeof(*v)) : NULL;
    if (v == NULL) {
        free(s);
        return;
    }
    r->notes = v;
    r->notes[r->nnotes++] = s;
}

static int
module_read(void *ud, const char *path, char **data, size_t *len)
{
    struct import_model *m = ud;
    int e = m->o->read ? m->o->read(m->o->ud, path, data, len) : 2 /* ENOENT */;
    /* A Map Local data file goes into the bundle at the same path. */
    if (e == 0 && path[0] != '/' && strstr(path, "..") == NULL)
        import_add_copy(m, path, path);
    return e;
}

/* chute import: the rewrite sections as a module file of the bundle, read
 * once now so that their notes join the others and a malformed line fails
 * the import with the profile's file:line. */
static int
module_file(struct import_model *m, char *err, size_t errlen)
{
    struct mitm_rewrites *rw = mitm_rewrites_new();
    if (rw == NULL) {
        snprintf(err, errlen, "%s: out of memory", m->file);
        return -1;
    }
    int rc = mitm_rewrites_load(rw, m->module, m->module_len, m->file, module_read, module_warn,
                                m, err, errlen);
    mitm_rewrites_free(rw);
    if (rc != 0)
        return -1;
    struct import_result *r = m->out;
    r->module = malloc(m->module_len + 64);
    if (r->module == NULL) {
        snprintf(err, errlen, "%s: out of memory", m->file);
        return -1;
    }
    size_t n = (size_t)snprintf(r->module, 64, "#!name=%s\n", m->file);
    for (const char *s = m->module, *end = m->module + m->module_len; s < end;) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t l = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (l > 0) {
            memcpy(r->module + n, s, l);
            n += l;
            r->module[n++] = '\n';
        }
        s += l + 1;
    }
    r->module[n] = '\0';
    r->module_len = n;
    const char *base = strrchr(m->file, '/') ? strrchr(m->file, '/') + 1 : m->file;
    const char *dot = strrchr(base, '.');
    size_t stem = dot ? (size_t)(dot - base) : strlen(base);
    r->module_name = malloc(stem + 10);
    if (r->module_name == NULL) {
        snprintf(err, errlen, "%s: out of memory", m->file);
        return -1;
    }
    snprintf(r->module_name, stem + 10, "%.*s.sgmodule", (int)stem, base);
    return 0;
}

/* Notes in the order of the file: by line, the config's before those of
 * the files it names. */
static unsigned
note_line(const char *n, const char *file)
{
    size_t fl = strlen(file);
    if (strncmp(n, file, fl) != 0 || n[fl] != ':')
        return 0x7fffffff;
    return (unsigned)strtoul(n + fl + 1, NULL, 10);
}

static void
sort_notes(struct import_result *r, const char *file)
{
    for (size_t i = 1; i < r->nnotes; i++) { /* insertion sort: stable, and the list is short */
        char *x = r->notes[i];
        unsigned lx = note_line(x, file);
        size_t j = i;
        for (; j > 0 && note_line(r->notes[j - 1], file) > lx; j--)
            r->notes[j] = r->notes[j - 1];
        r->notes[j] = x;
    }
}

int
import_convert(const char *text, size_t len, const char *name, const struct import_opts *o,
               struct import_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct import_model m = {.file = name ? name : "(config)", .o = o, .out = out};
    enum import_kind kind = o->kind ? o->kind : import_detect(name, text, len);
    int rc = kind == IMPORT_SURGE ? import_surge(&m, text, len, err, errlen)
                                  : import_clash(&m, text, len, err, errlen);
    if (rc == 0) {
        import_model_check(&m);
        if (m.module != NULL && !o->chunk)
            rc = module_file(&m, err, errlen);
    }
    if (rc == 0) {
        sort_notes(out, m.file);
        rc = import_emit(&m, err, errlen);
    }
    for (size_t i = 0; i < m.nowned; i++)
        free(m.owned[i]);
    free(m.owned);
    if (rc != 0)
        import_result_free(out);
    return rc;
}

void
import_result_free(struct import_result *r)
{
    free(r->lua);
    free(r->module);
    free(r->module_name);
    for (size_t i = 0; i < r->nnotes; i++)
        free(r->notes[i]);
    free(r->notes);
    for (size_t i = 0; i < r->ncopies; i++) {
        free(r->copies[i].from);
        free(r->copies[i].to);
    }
    free(r->copies);
    memset(r, 0, sizeof(*r));
}
