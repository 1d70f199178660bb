#ifndef CHUTE_RULES_RE_H
#define CHUTE_RULES_RE_H

/* One compiled regular expression on PCRE2 (Debian's libpcre2-8): Perl/ICU
 * syntax as Surge lists and modules write it (\d, \w, (?i), {m,n}), JIT
 * compiled when the platform allows, and always run under a match limit
 * and a depth limit, so a pattern with backreferences or nested
 * quantifiers costs a bounded amount per subject whoever chose the
 * subject. Shared by the rule matchers, the MITM's URL patterns and the
 * declarative rewrites.
 *
 * Single-threaded: a compiled expression owns one match-data block, reused
 * by every match (no allocation in rules_re_match). */

#include <stddef.h>

struct rules_re;

/* Flags for rules_re_new. */
#define RULES_RE_CASELESS 0x1 /* as if the pattern began with (?i) */

/* How much work one match may do before it is cut (PCRE2's match limit:
 * calls of its internal match(); and its depth limit, in bytes' worth of
 * backtracking frames here in KiB). A cut match counts as no match and
 * rules_re_match returns RULES_RE_LIMIT. */
#define RULES_RE_MATCH_LIMIT 100000u
#define RULES_RE_DEPTH_LIMIT 1000u

#define RULES_RE_NOMATCH (-1)
#define RULES_RE_LIMIT (-2)

/* Compiles |pattern| (|len| bytes, NUL not needed). NULL with |err| saying
 * why and where, e.g. "missing closing parenthesis at offset 7". */
struct rules_re *rules_re_new(const char *pattern, size_t len, int flags, char *err,
                              size_t errlen);
void rules_re_free(struct rules_re *re);

/* Capturing groups in the pattern (not counting the whole match). */
int rules_re_groups(const struct rules_re *re);

/* Matches |subject| (|n| bytes). Returns the number of pairs set in
 * |ovec| (1 + the groups that took part), RULES_RE_NOMATCH, or
 * RULES_RE_LIMIT (the match or depth limit cut it: treated as no match by
 * callers, counted by them). |ovec| (may be NULL) gets up to |npairs|
 * [start, end) byte offset pairs: the whole match, then group 1, ...; an
 * unset group is (size_t)-1 twice. */
int rules_re_match(const struct rules_re *re, const char *subject, size_t n, size_t *ovec,
                   int npairs);

/* The same, starting the search at byte |start| of |subject| while what
 * lies before it still counts for lookbehinds and anchors (a multi-line
 * "^" does not match mid-line): for replacing every match in turn. */
int rules_re_match_at(const struct rules_re *re, const char *subject, size_t n, size_t start,
                      size_t *ovec, int npairs);

/* Expands |tmpl| for the match in |ovec| (|pairs| pairs, from
 * rules_re_match over |subject|): "$1".."$9" and "${12}" become the
 * groups, "$0" and "$&" the whole match, "$$" a dollar; an unset or
 * missing group is empty. Writes at most |cap| bytes to |out| (no NUL) and
 * returns the length the whole expansion needs, so a caller can size a
 * buffer and try again. */
size_t rules_re_expand(const char *tmpl, size_t tlen, const char *subject, const size_t *ovec,
                       int pairs, char *out, size_t cap);

#endif
