#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "fetch/yaml.h"

/* libyaml's document API holds the whole tree; these helpers only read it.
 * Node ids are checked on every access, so a caller can pass any id. */

struct fetch_yaml {
    yaml_document_t doc;
};

struct fetch_yaml *
fetch_yaml_parse(const char *buf, size_t len, char *err, size_t errlen)
{
    yaml_parser_t p;
    struct fetch_yaml *y = calloc(1, sizeof(*y));
    if (y == NULL || !yaml_parser_initialize(&p)) {
        free(y);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&p, &y->doc)) {
        snprintf(err, errlen, "line %zu: %s%s%s", p.problem_mark.line + 1,
                 p.problem ? p.problem : "not YAML", p.context ? " " : "",
                 p.context ? p.context : "");
        yaml_parser_delete(&p);
        free(y);
        return NULL;
    }
    yaml_parser_delete(&p);
    if (yaml_document_get_root_node(&y->doc) == NULL) {
        snprintf(err, errlen, "an empty document");
        fetch_yaml_free(y);
        return NULL;
    }
    return y;
}

void
fetch_yaml_free(struct fetch_yaml *y)
{
    if (y == NULL)
        return;
    yaml_document_delete(&y->doc);
    free(y);
}

static yaml_node_t *
node(const struct fetch_yaml *y, fetch_yaml_node n)
{
    return n > 0 ? yaml_document_get_node((yaml_document_t *)&y->doc, n) : NULL;
}

fetch_yaml_node
fetch_yaml_root(const struct fetch_yaml *y)
{
    return 1; /* libyaml numbers the root first */
}

int
fetch_yaml_is_map(const struct fetch_yaml *y, fetch_yaml_node n)
{
    yaml_node_t *x = node(y, n);
    return x != NULL && x->type == YAML_MAPPING_NODE;
}

int
fetch_yaml_is_seq(const struct fetch_yaml *y, fetch_yaml_node n)
{
    yaml_node_t *x = node(y, n);
    return x != NULL && x->type == YAML_SEQUENCE_NODE;
}

const char *
fetch_yaml_scalar(const struct fetch_yaml *y, fetch_yaml_node n, size_t *len)
{
    yaml_node_t *x = node(y, n);
    if (x == NULL || x->type != YAML_SCALAR_NODE)
        return NULL;
    *len = x->data.scalar.length;
    return (const char *)x->data.scalar.value;
}

unsigned
fetch_yaml_line(const struct fetch_yaml *y, fetch_yaml_node n)
{
    yaml_node_t *x = node(y, n);
    return x != NULL ? (unsigned)x->start_mark.line + 1 : 0;
}

static int
scalar_is(const struct fetch_yaml *y, fetch_yaml_node n, const char *s)
{
    size_t len;
    const char *v = fetch_yaml_scalar(y, n, &len);
    return v != NULL && len == strlen(s) && memcmp(v, s, len) == 0;
}

static fetch_yaml_node
get(const struct fetch_yaml *y, fetch_yaml_node n, const char *key, int depth)
{
    yaml_node_t *x = node(y, n);
    if (x == NULL || x->type != YAML_MAPPING_NODE || depth > 4)
        return 0;
    yaml_node_pair_t *p;
    for (p = x->data.mapping.pairs.start; p < x->data.mapping.pairs.top; p++)
        if (scalar_is(y, p->key, key))
            return p->value;
    for (p = x->data.mapping.pairs.start; p < x->data.mapping.pairs.top; p++) {
        if (!scalar_is(y, p->key, "<<"))
            continue;
        if (fetch_yaml_is_map(y, p->value)) {
            fetch_yaml_node v = get(y, p->value, key, depth + 1);
            if (v != 0)
                return v;
        }
        for (size_t i = 0; i < fetch_yaml_len(y, p->value); i++) {
            fetch_yaml_node v = get(y, fetch_yaml_item(y, p->value, i), key, depth + 1);
            if (v != 0)
                return v;
        }
    }
    return 0;
}

fetch_yaml_node
fetch_yaml_get(const struct fetch_yaml *y, fetch_yaml_node n, const char *key)
{
    return get(y, n, key, 0);
}

size_t
fetch_yaml_len(const struct fetch_yaml *y, fetch_yaml_node n)
{
    yaml_node_t *x = node(y, n);
    if (x == NULL || x->type != YAML_SEQUENCE_NODE)
        return 0;
    return (size_t)(x->data.sequence.items.top - x->data.sequence.items.start);
}

fetch_yaml_node
fetch_yaml_item(const struct fetch_yaml *y, fetch_yaml_node n, size_t i)
{
    return i < fetch_yaml_len(y, n) ? node(y, n)->data.sequence.items.start[i] : 0;
}

size_t
fetch_yaml_pairs(const struct fetch_yaml *y, fetch_yaml_node n)
{
    yaml_node_t *x = node(y, n);
    if (x == NULL || x->type != YAML_MAPPING_NODE)
        return 0;
    return (size_t)(x->data.mapping.pairs.top - x->data.mapping.pairs.start);
}

fetch_yaml_node
fetch_yaml_key(const struct fetch_yaml *y, fetch_yaml_node n, size_t i)
{
    return i < fetch_yaml_pairs(y, n) ? node(y, n)->data.mapping.pairs.start[i].key : 0;
}

fetch_yaml_node
fetch_yaml_value(const struct fetch_yaml *y, fetch_yaml_node n, size_t i)
{
    return i < fetch_yaml_pairs(y, n) ? node(y, n)->data.mapping.pairs.start[i].value : 0;
}
