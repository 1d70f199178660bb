#ifndef CHUTE_MITM_REWRITE_H
#define CHUTE_MITM_REWRITE_H

/* Declarative rewrites: the sections of Surge modules and profiles that
 * need no JavaScript, parsed once at load and applied to MITM'd exchanges
 * through a struct mitm_hooks (mitm.h), sans-I/O, every regex on
 * rules/re.h (PCRE2 under match limits).
 *
 * What a module may hold (the lines as Surge writes them):
 *   [URL Rewrite]     REGEX REPLACEMENT [header|302|307|reject|reject-200|
 *                     reject-img|reject-tinygif|reject-dict|reject-array|reject-drop]
 *   [Header Rewrite]  [http-request|http-response] REGEX header-add NAME VALUE
 *                     ... header-del NAME | header-replace NAME VALUE |
 *                     header-replace-regex NAME VALUE-REGEX REPLACEMENT
 *   [Map Local]       REGEX [data="..."] [data-type=file|text|json|tiny-gif|base64]
 *                     [status-code=N] [header="k:v|k2:v2"]
 *   [Body Rewrite]    http-request|http-response REGEX RE1 REPL1 [RE2 REPL2 ...]
 *   [MITM]            hostname = [%APPEND%|%INSERT%] a.com, *.b.com, -c.com
 *   #!name=, #!desc=  metadata; lines starting with #, ; or // are comments.
 * Tokens are separated by spaces; a double-quoted part ("a b", data="x y")
 * keeps its spaces, \" inside quotes is a quote. VALUE and REPLACEMENT of
 * Header Rewrite run to the end of the line.
 *
 * What chute cannot run is listed once at load through |warn|, never
 * dropped silently: each [Script] entry, each section chute does not know
 * (with how many lines it had), unknown [Map Local] options and [MITM]
 * keys, Body Rewrite's jq lines, module arguments ({{{name}}}, left as
 * written). Malformed lines are errors naming
 * file:line and the value, with the syntax.
 *
 * How they apply, in Surge's order: a request's URL (mitm_request.url, as
 * it arrived: later phases match that too, not a rewritten one) goes
 * through [URL Rewrite] (the first matching line decides; 302/307/reject*
 * answer locally), then [Map Local] (the first match answers), then the
 * request's Header Rewrite lines and Body Rewrite lines, each matching
 * line in order. On the response: its Header Rewrite lines, then its Body
 * Rewrite lines. Replacements expand $1..$9, ${n}, $0/$&, $$ (rules_re_expand).
 *
 * A header-mode URL rewrite sets req->path, and when the host or port
 * changes, the Host field, req->host and req->port; m->scheme becomes
 * "http" or "https" as the new URL says. The owner compares req->host,
 * req->port and m->scheme with what the flow connects to and reroutes.
 *
 * Bodies: a Body Rewrite line asks for at most max_body bytes (default
 * MITM_REWRITE_MAX_BODY); the rewrites of one body may spend 8 × max_body
 * in all, where each byte written (each pair writes a new copy) and each
 * match costs one; past that the remaining pairs are left out (counted as
 * a failure). The matches count so that a pattern matching at every byte
 * cannot hold the loop thread for long. A body replaced here has
 * a new length: the owner re-frames it (Content-Length cannot be set
 * through http_fwd_field_*).
 *
 * Loop thread only; the hooks keep counters, so one mitm_rewrites serves
 * one thread. */

#include <stddef.h>
#include <stdint.h>

#include "log/counter.h"
#include "mitm/mitm.h"

struct mitm_rewrites;

#define MITM_REWRITE_MAX_BODY (128u << 10)

/* Rewrites applied, by kind; one X(field, key) each (log/counter.h). */
#define MITM_REWRITE_STATS(X)                                                                      \
    X(url_header, rewrite_url)              /* header-mode URL rewrites */                         \
    X(url_redirect, rewrite_redirect)       /* 302 / 307 answers */                                \
    X(url_reject, rewrite_reject)           /* reject* answers */                                  \
    X(map_local, rewrite_map_local)         /* Map Local answers */                                \
    X(header_request, rewrite_header_req)   /* request Header Rewrite lines applied */             \
    X(header_response, rewrite_header_resp) /* response Header Rewrite lines applied */            \
    X(body_request, rewrite_body_req)       /* request bodies rewritten */                         \
    X(body_response, rewrite_body_resp)     /* response bodies rewritten */                        \
    X(limit_cuts, rewrite_limit_cuts)       /* matches cut by the regex match limit */             \
    X(failures, rewrite_failures)           /* edits refused: bad URL or field, memory, budget */

struct mitm_rewrite_stats {
#define X(field, key) uint64_t field;
    MITM_REWRITE_STATS(X)
#undef X
};
/* MITM_REWRITE_STATS as a table over struct mitm_rewrite_stats. */
extern const struct log_counter mitm_rewrite_counters[];

/* Reads the bundle file |path| (a Map Local data= file, relative to the
 * bundle) into a malloc'd buffer the caller frees: 0, or an errno value
 * (ENOENT, EFBIG, ...). */
typedef int (*mitm_read_file_fn)(void *ud, const char *path, char **data, size_t *len);
/* One message ("file:line: what"), without a trailing newline. */
typedef void (*mitm_warn_fn)(void *ud, const char *msg);

/* An empty set (no rules, no host names), or NULL when out of memory. */
struct mitm_rewrites *mitm_rewrites_new(void);
void mitm_rewrites_free(struct mitm_rewrites *rw);

/* Parses the module or profile text |text| (|len| bytes; |file| names it
 * in messages) and adds its rules after those already loaded; [MITM]
 * hostname lines edit the host list (%APPEND% after, %INSERT% before, a
 * bare value replaces it, as a Surge module overrides a profile).
 * |read_file| may be NULL (then a data-type=file line is an error); |warn|
 * may be NULL (warnings are dropped); |ud| goes to both. All or nothing:
 * returns 0, or -1 with |err| naming "file:line: ..." and nothing added.
 * Does not keep |text|. */
int mitm_rewrites_load(struct mitm_rewrites *rw, const char *text, size_t len, const char *file,
                       mitm_read_file_fn read_file, mitm_warn_fn warn, void *ud, char *err,
                       size_t errlen);

/* Bytes of body a Body Rewrite line asks for (0: the default). */
void mitm_rewrites_set_max_body(struct mitm_rewrites *rw, size_t bytes);

/* The hooks over the rules (ud is |rw|), valid while |rw| lives. */
const struct mitm_hooks *mitm_rewrites_hooks(struct mitm_rewrites *rw);

/* The [MITM] hostname entries in order, an exclusion kept as "-host";
 * each already checked by mitm_hosts_add. |*out| is valid until the next
 * load or the free. */
size_t mitm_rewrites_hostnames(const struct mitm_rewrites *rw, const char *const **out);

/* Rules loaded (URL, header, map local and body lines). */
size_t mitm_rewrites_count(const struct mitm_rewrites *rw);

void mitm_rewrites_stats(const struct mitm_rewrites *rw, struct mitm_rewrite_stats *out);

#endif
