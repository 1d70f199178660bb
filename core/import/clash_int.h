#ifndef CHUTE_IMPORT_CLASH_INT_H
#define CHUTE_IMPORT_CLASH_INT_H

/* Private to the Clash reader (clash*.c): the document being read and the
 * YAML helpers over it (clash_yaml.c). */

#include <yaml.h>

#include "import/import_int.h"

struct file_provider {
    const char *name;
    size_t first, n; /* its proxies in m->proxies */
};

struct doc {
    yaml_document_t d;
    struct import_model *m;
    struct file_provider *fps; /* the config's file providers read so far */
    size_t nfps, fpcap;
};

/* The node |id| of the document; NULL for 0. */
yaml_node_t *import_ynode(struct doc *d, int id);
/* 1-based line of |n|, 0 for NULL. */
unsigned import_yline(const yaml_node_t *n);
/* A scalar's text, or NULL for anything else. */
const char *import_yscalar(const yaml_node_t *n);
/* The value of |key| in the mapping |map| (merge keys "<<" followed), NULL if none. */
yaml_node_t *import_yget(struct doc *d, yaml_node_t *map, const char *key);
const char *import_ygets(struct doc *d, yaml_node_t *map, const char *key);
int import_ytrue(const char *v);
int import_ygetb(struct doc *d, yaml_node_t *map, const char *key);
/* A number: 1 with |*v|, 0 when absent, -1 (noted, |what| first) when not one. */
int import_ygetn(struct doc *d, yaml_node_t *map, const char *key, double *v, const char *what);
/* One note per key of |map| not in |known| (NULL-ended). */
void import_yunknown(struct doc *d, yaml_node_t *map, const char *const *known, const char *what);
int import_one_of(const char *v, const char *const *list);
/* Loads |text| into |doc| (a mapping at the top): 0, or -1 with |err| "file:line:col: why". */
int import_yload(struct import_model *m, const char *text, size_t len, yaml_document_t *doc, char *err,
              size_t errlen);

#define FOR_SEQ(d, seq, it)                                                                        \
    for (yaml_node_item_t *it##_i = (seq) && (seq)->type == YAML_SEQUENCE_NODE                     \
                                        ? (seq)->data.sequence.items.start : NULL;                 \
         it##_i != NULL && it##_i < (seq)->data.sequence.items.top; it##_i++)                      \
        for (yaml_node_t *it = import_ynode(d, *it##_i); it != NULL; it = NULL)

#define FOR_MAP(d, map, k, v)                                                                      \
    for (yaml_node_pair_t *k##_p = (map) && (map)->type == YAML_MAPPING_NODE                       \
                                       ? (map)->data.mapping.pairs.start : NULL;                   \
         k##_p != NULL && k##_p < (map)->data.mapping.pairs.top; k##_p++)                          \
        for (yaml_node_t *k = import_ynode(d, k##_p->key), *v = import_ynode(d, k##_p->value); k != NULL;          \
             k = NULL)

/* clash_proxy.c: one `proxies:` entry (0 added, -1 left out, noted), the
 * proxy-providers map, one proxy-groups entry. */
int import_clash_proxy(struct doc *d, yaml_node_t *p);
void import_clash_providers(struct doc *d, yaml_node_t *map);
void import_clash_group(struct doc *d, yaml_node_t *gn);

#endif
