#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "import/clash_int.h"

/* libyaml's document, read as a Clash config reads it. */

yaml_node_t *
import_ynode(struct doc *d, int id)
{
    return id ? yaml_document_get_node(&d->d, id) : NULL;
}

unsigned
import_yline(const yaml_node_t *n)
{
    return n ? (unsigned)n->start_mark.line + 1 : 0;
}

const char *
import_yscalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *get_depth(struct doc *d, yaml_node_t *map, const char *key, int depth);

/* "<<: *anchor" (or a list of them): the keys of the merged maps count
 * when the map does not have them itself (YAML 1.1 merge keys, which
 * Clash configs use for shared group settings). */
static yaml_node_t *
merged(struct doc *d, yaml_node_t *v, const char *key, int depth)
{
    if (v != NULL && v->type == YAML_MAPPING_NODE)
        return get_depth(d, v, key, depth + 1);
    if (v == NULL || v->type != YAML_SEQUENCE_NODE)
        return NULL;
    for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top; i++) {
        yaml_node_t *n = get_depth(d, import_ynode(d, *i), key, depth + 1);
        if (n != NULL)
            return n;
    }
    return NULL;
}

static yaml_node_t *
get_depth(struct doc *d, yaml_node_t *map, const char *key, int depth)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE || depth > 8)
        return NULL;
    yaml_node_t *merge = NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *k = import_yscalar(import_ynode(d, p->key));
        if (k != NULL && strcmp(k, key) == 0)
            return import_ynode(d, p->value);
        if (k != NULL && strcmp(k, "<<") == 0)
            merge = import_ynode(d, p->value);
    }
    return merged(d, merge, key, depth);
}

yaml_node_t *
import_yget(struct doc *d, yaml_node_t *map, const char *key)
{
    return get_depth(d, map, key, 0);
}

const char *
import_ygets(struct doc *d, yaml_node_t *map, const char *key)
{
    return import_yscalar(import_yget(d, map, key));
}

int
import_ytrue(const char *v)
{
    return v != NULL && (strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
                         strcasecmp(v, "on") == 0 || strcmp(v, "1") == 0);
}

int
import_ygetb(struct doc *d, yaml_node_t *map, const char *key)
{
    return import_ytrue(import_ygets(d, map, key));
}

/* An integer key: 1 with |*v|, 0 when absent, -1 (noted) when not a number. */
int
import_ygetn(struct doc *d, yaml_node_t *map, const char *key, double *v, const char *what)
{
    yaml_node_t *n = import_yget(d, map, key);
    const char *s = import_yscalar(n);
    if (n == NULL)
        return 0;
    char *end;
    errno = 0;
    *v = s ? strtod(s, &end) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || errno != 0) {
        import_note(d->m, import_yline(n), "%s: %s '%s' is not a number: ignored", what, key, s ? s : "");
        return -1;
    }
    return 1;
}

/* Keys a section knows: anything else in the map gets one note. */
void
import_yunknown(struct doc *d, yaml_node_t *map, const char *const *known, const char *what)
{
    FOR_MAP(d, map, k, v) {
        const char *ks = import_yscalar(k);
        size_t i;
        for (i = 0; ks != NULL && known[i] != NULL && strcmp(known[i], ks) != 0; i++)
            ;
        if (ks != NULL && strcmp(ks, "<<") == 0 && v != NULL && v->type == YAML_MAPPING_NODE)
            import_yunknown(d, v, known, what);
        else if (ks != NULL && strcmp(ks, "<<") == 0)
            FOR_SEQ(d, v, mv)
                import_yunknown(d, mv, known, what);
        else if (ks != NULL && known[i] == NULL)
            import_note(d->m, import_yline(k), "%s: '%s' is not supported by chute: ignored", what, ks);
    }
}

int
import_one_of(const char *v, const char *const *list)
{
    for (size_t i = 0; v != NULL && list[i] != NULL; i++)
        if (strcasecmp(v, list[i]) == 0)
            return 1;
    return 0;
}

int
import_yload(struct import_model *m, const char *text, size_t len, yaml_document_t *doc, char *err,
          size_t errlen)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        snprintf(err, errlen, "%s: out of memory", m->file);
        return -1;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int ok = yaml_parser_load(&p, doc);
    if (!ok) {
        /* libyaml's marks are 0-based. */
        char ctx[160] = "";
        if (p.context != NULL)
            snprintf(ctx, sizeof(ctx), " (%s from line %zu)", p.context, p.context_mark.line + 1);
        snprintf(err, errlen, "%s:%zu:%zu: %s%s", m->file, p.problem_mark.line + 1,
                 p.problem_mark.column + 1, p.problem ? p.problem : "not YAML", ctx);
    } else if (yaml_document_get_root_node(doc) == NULL ||
               yaml_document_get_root_node(doc)->type != YAML_MAPPING_NODE) {
        snprintf(err, errlen, "%s:%u: not a config: expected a map of keys (proxies:, rules:, ...)",
                 m->file, import_yline(yaml_document_get_root_node(doc)));
        yaml_document_delete(doc);
        ok = 0;
    }
    yaml_parser_delete(&p);
    return ok ? 0 : -1;
}

