#ifndef CHUTE_FETCH_YAML_H
#define CHUTE_FETCH_YAML_H

/* A YAML document as a tree of nodes, on Debian's libyaml (its document
 * API: anchors resolve to shared nodes, nothing is expanded). A small
 * reading helper for Clash files: the subscription decoder's proxies:
 * list (sub.c, clash_proxy.c), and any other Clash reader that wants it.
 * Sans-I/O: the text comes in a buffer. */

#include <stddef.h>

struct fetch_yaml;
/* A node of the document: libyaml's node id (1..n), 0 for none. */
typedef int fetch_yaml_node;

/* Parses the first document of |buf|. NULL with |err| ("line 12: mapping
 * values are not allowed in this context") when it is not YAML, or empty. */
struct fetch_yaml *fetch_yaml_parse(const char *buf, size_t len, char *err, size_t errlen);
void fetch_yaml_free(struct fetch_yaml *y);

fetch_yaml_node fetch_yaml_root(const struct fetch_yaml *y);
int fetch_yaml_is_map(const struct fetch_yaml *y, fetch_yaml_node n);
int fetch_yaml_is_seq(const struct fetch_yaml *y, fetch_yaml_node n);
/* A scalar's text (not NUL-terminated) and length, or NULL (not a scalar). */
const char *fetch_yaml_scalar(const struct fetch_yaml *y, fetch_yaml_node n, size_t *len);
/* The 1-based line a node starts on. */
unsigned fetch_yaml_line(const struct fetch_yaml *y, fetch_yaml_node n);
/* A mapping's value for |key| (exact, case-sensitive), looking into "<<"
 * merge keys too; 0 when absent or |n| is no mapping. */
fetch_yaml_node fetch_yaml_get(const struct fetch_yaml *y, fetch_yaml_node n, const char *key);
/* A sequence's length and its |i|-th item (0 past the end). */
size_t fetch_yaml_len(const struct fetch_yaml *y, fetch_yaml_node n);
fetch_yaml_node fetch_yaml_item(const struct fetch_yaml *y, fetch_yaml_node n, size_t i);
/* A mapping's pairs: |i|-th key and value (0 past the end). */
size_t fetch_yaml_pairs(const struct fetch_yaml *y, fetch_yaml_node n);
fetch_yaml_node fetch_yaml_key(const struct fetch_yaml *y, fetch_yaml_node n, size_t i);
fetch_yaml_node fetch_yaml_value(const struct fetch_yaml *y, fetch_yaml_node n, size_t i);

#endif
