#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rules/rules.h"

#define HOST_MAX 253
#define LABEL_MAX 63
/* A slot holds a name's first HEAD bytes, so matching most names touches
 * one cache line; buffers have PAD zero bytes after a name, so the head
 * compares as a fixed 16 bytes and labels hash a word at a time. */
#define HEAD 16
#define PAD 16
/* At most 2 names per 3 slots keeps linear probing short (2.3 probes per
 * hit measured): 100k names take 4.6 MiB of 32-byte slots. */
#define LOAD_NUM 3
#define LOAD_DEN 2
/* Entries wait in |bytes| until _build as records: tag, kind, length, the
 * lowercased name. */
#define REC 6
#define NONE UINT64_MAX

/* A slot's |off| also says which kinds its name holds: a name can be both
 * an exact and a suffix entry, each with its own smallest tag. */
#define F_EXACT 0x80000000u
#define F_SUFFIX 0x40000000u
#define OFF_MASK 0x3fffffffu
#define ACCEPT 0x80000000u

struct slot {
    uint32_t check; /* 24 hash bits and the length: 0 marks an empty slot */
    uint32_t off;   /* flags, and where bytes HEAD.. of a long name are */
    uint32_t exact, suffix;
    char head[HEAD]; /* zero padded */
};

/* Aho-Corasick as a full DFA over byte classes: bytes in no keyword share
 * class 0, which leads back to the root, so a row is as wide as the
 * keywords' alphabet (~40 for host names), not 256. A transition holds
 * the target's row offset, with ACCEPT set if a keyword ends there. Even
 * one keyword is faster this way than memmem (45 against 60-80 ns a host
 * measured; 5 keywords: 45 against 150). */
struct automaton {
    uint32_t *delta;
    uint64_t *out; /* per state: the smallest tag of the keywords ending in it */
    uint32_t nstates, nclass;
    uint16_t cls[256]; /* 257 classes if a keyword set holds every byte */
};

struct rules_domains {
    char *bytes; /* records until _build, then long names' tails */
    size_t nbytes, cap, count, nkw;
    uint64_t seed;
    int built;
    struct slot *slots;
    uint32_t nslots;
    uint64_t *bloom; /* 2 bits per name in one word; NULL if small */
    uint32_t bloom_mask;
    struct automaton ac;
};

static inline uint64_t
min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* SWAR over 8 bytes: ASCII letters lowercased, other bytes unchanged
 * (bit 7 of each byte of the sums says ">= 'A'" and "> 'Z'"). */
static inline uint64_t
lower8(uint64_t w)
{
    uint64_t low7 = w & 0x7f7f7f7f7f7f7f7full;
    uint64_t ge_a = low7 + 0x3f3f3f3f3f3f3f3full, gt_z = low7 + 0x2525252525252525ull;
    return w | ((ge_a ^ gt_z) & ~w & 0x8080808080808080ull) >> 2;
}

/* Bit 7 set in each byte of |w| that is a dot (exact: no borrows). */
static inline uint64_t
dots8(uint64_t w)
{
    uint64_t x = w ^ 0x2e2e2e2e2e2e2e2eull;
    return ~(((x & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) | x) & 0x8080808080808080ull;
}

/* wyhash's multiply-mix. */
static inline uint64_t
mum(uint64_t a, uint64_t b)
{
    __uint128_t m = (__uint128_t)a * b;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

/* The hash of label p[0..n) in front of a suffix whose hash is |h|, a word
 * at a time: a suffix walk needs one hash per label, not per byte. Reads
 * up to 7 bytes past the label (the caller's padding or the next label). */
static inline uint64_t
hash_label(uint64_t h, const char *p, size_t n)
{
    uint64_t w;
    size_t k = n;
    for (; k > 8; k -= 8, p += 8) {
        memcpy(&w, p, 8);
        h = mum(h ^ w, 0x9e3779b97f4a7c15ull);
    }
    memcpy(&w, p, 8);
    w &= k ? ~0ull >> (64 - 8 * k) : 0;
    return mum(h ^ w, 0xe7037ed1a0b428dbull + 2 * n);
}

/* Bits 0-31 of a hash place the slot, 32-51 pick the bloom word and 52-63
 * two bits in it; bits 40-63 are kept in the slot as a check. */
static inline uint64_t
bloom_bits(uint64_t m)
{
    return (1ull << (m >> 58)) | (1ull << ((m >> 52) & 63));
}

struct rules_domains *
rules_domains_new(void)
{
    struct rules_domains *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    /* A random seed: a list author cannot aim names at one run of slots. */
    if (getrandom(&d->seed, sizeof(d->seed), GRND_NONBLOCK) != sizeof(d->seed))
        d->seed = (uint64_t)(uintptr_t)d * 0x9e3779b97f4a7c15ull;
    return d;
}

void
rules_domains_free(struct rules_domains *d)
{
    if (d == NULL)
        return;
    free(d->bytes);
    free(d->slots);
    free(d->bloom);
    free(d->ac.delta);
    free(d->ac.out);
    free(d);
}

/* Lowercases |name| into |out|; names lose their root dot and need labels
 * of 1-63 bytes, keywords are any 1-253 bytes. Returns the length or -1. */
static int
normalise(const char *name, size_t len, char *out, int keyword)
{
    if (name == NULL)
        return -1;
    if (!keyword && len > 0 && name[len - 1] == '.')
        len--;
    if (len == 0 || len > HOST_MAX)
        return -1;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        out[i] = (char)((unsigned)(c - 'A') < 26u ? c | 0x20 : c);
        label = c == '.' ? 0 : label + 1;
        if (!keyword && (label > LABEL_MAX || (label == 0 && (i == 0 || name[i - 1] == '.'))))
            return -1;
    }
    return !keyword && label == 0 ? -1 : (int)len;
}

int
rules_domains_add(struct rules_domains *d, enum rules_domain_kind kind, const char *name,
                  size_t len, uint32_t tag)
{
    if (d == NULL || d->built || (unsigned)kind > RULES_DOMAIN_KEYWORD)
        return -1;
    if (d->cap - d->nbytes < REC + HOST_MAX) {
        size_t cap = d->cap ? d->cap * 2 : 4096;
        char *p = cap <= OFF_MASK ? realloc(d->bytes, cap) : NULL;
        if (p == NULL)
            return -1;
        d->bytes = p;
        d->cap = cap;
    }
    char *r = d->bytes + d->nbytes;
    int n = normalise(name, len, r + REC, kind == RULES_DOMAIN_KEYWORD);
    if (n < 0)
        return -1;
    memcpy(r, &tag, 4);
    r[4] = (char)kind;
    r[5] = (char)n;
    d->nbytes += REC + (size_t)n;
    d->count++;
    d->nkw += kind == RULES_DOMAIN_KEYWORD;
    return 0;
}

/* Finds |s| (n bytes, PAD zeros after) in the table, or the empty slot
 * where it belongs. */
static struct slot *
lookup(const struct rules_domains *d, const char *tails, const char *s, size_t n, uint64_t m)
{
    uint32_t check = (uint32_t)(m >> 40) << 8 | (uint32_t)n;
    uint32_t i = (uint32_t)(((m & 0xffffffffu) * d->nslots) >> 32);
    for (;;) {
        struct slot *sl = &d->slots[i];
        if (sl->check == 0 ||
            (sl->check == check && memcmp(sl->head, s, HEAD) == 0 &&
             (n <= HEAD || memcmp(tails + (sl->off & OFF_MASK), s + HEAD, n - HEAD) == 0)))
            return sl;
        if (++i == d->nslots)
            i = 0;
    }
}

/* Fills the table from the records; each distinct long name leaves its
 * tail in |tails| at |*used|. */
static int
build_names(struct rules_domains *d, char *tails, size_t *used)
{
    char buf[HOST_MAX + PAD] = {0};
    size_t nnames = d->count - d->nkw, n;
    d->nslots = (uint32_t)(nnames * LOAD_NUM / LOAD_DEN + 1);
    d->slots = calloc(d->nslots, sizeof(*d->slots));
    if (d->slots == NULL)
        return -1;
    /* Small tables sit in cache anyway; big ones get a bloom filter of
     * 8-16 bits a name, so most misses cost a word, not a probe. */
    if (nnames >= 4096) {
        uint32_t words = 64;
        while (words < nnames / 8 && words < (1u << 20))
            words *= 2;
        if ((d->bloom = calloc(words, sizeof(*d->bloom))) == NULL)
            return -1;
        d->bloom_mask = words - 1;
    }
    for (size_t o = 0; o < d->nbytes; o += REC + n) {
        const char *r = d->bytes + o;
        n = (unsigned char)r[5];
        if (r[4] == RULES_DOMAIN_KEYWORD)
            continue;
        memcpy(buf, r + REC, n);
        memset(buf + n, 0, PAD);
        /* Labels from the right, as a match walks them. */
        uint64_t m = d->seed;
        for (size_t end = n, start;; end = start - 1) {
            for (start = end; start > 0 && buf[start - 1] != '.'; start--)
                ;
            m = hash_label(m, buf + start, end - start);
            if (start == 0)
                break;
        }
        struct slot *sl = lookup(d, tails, buf, n, m);
        if (sl->check == 0) {
            sl->check = (uint32_t)(m >> 40) << 8 | (uint32_t)n;
            memcpy(sl->head, buf, HEAD);
            if (n > HEAD) {
                memcpy(tails + *used, buf + HEAD, n - HEAD);
                sl->off = (uint32_t)*used;
                *used += n - HEAD;
            }
            if (d->bloom)
                d->bloom[(m >> 32) & d->bloom_mask] |= bloom_bits(m);
        }
        uint32_t tag, flag = r[4] == RULES_DOMAIN_EXACT ? F_EXACT : F_SUFFIX;
        uint32_t *t = r[4] == RULES_DOMAIN_EXACT ? &sl->exact : &sl->suffix;
        memcpy(&tag, r, 4);
        if (!(sl->off & flag) || tag < *t)
            *t = tag;
        sl->off |= flag;
    }
    return 0;
}

static int
build_automaton(struct rules_domains *d)
{
    struct automaton *a = &d->ac;
    uint8_t seen[256] = {0};
    size_t total = 1, n;
    for (size_t o = 0; o < d->nbytes; o += REC + n) {
        n = (unsigned char)d->bytes[o + 5];
        for (size_t j = 0; d->bytes[o + 4] == RULES_DOMAIN_KEYWORD && j < n; j++)
            seen[(unsigned char)d->bytes[o + REC + j]] = 1;
        total += d->bytes[o + 4] == RULES_DOMAIN_KEYWORD ? n : 0;
    }
    a->nclass = 1;
    for (int b = 0; b < 256; b++)
        a->cls[b] = seen[b] ? (uint16_t)a->nclass++ : 0;
    uint32_t nc = a->nclass, *fail = calloc(total, 2 * sizeof(*fail));
    a->delta = total * nc < ACCEPT ? calloc(total * nc, sizeof(*a->delta)) : NULL;
    a->out = malloc(total * sizeof(*a->out));
    if (fail == NULL || a->delta == NULL || a->out == NULL) {
        free(fail);
        return -1;
    }
    uint32_t *queue = fail + total;
    /* The trie, in the DFA's own table (0: no child yet). */
    a->nstates = 1;
    a->out[0] = NONE;
    for (size_t o = 0; o < d->nbytes; o += REC + n) {
        const char *r = d->bytes + o;
        uint32_t s = 0, tag;
        n = (unsigned char)r[5];
        if (r[4] != RULES_DOMAIN_KEYWORD)
            continue;
        for (size_t j = 0; j < n; j++) {
            uint32_t *t = &a->delta[s * nc + a->cls[(unsigned char)r[REC + j]]];
            if (*t == 0) {
                a->out[a->nstates] = NONE;
                *t = a->nstates++;
            }
            s = *t;
        }
        memcpy(&tag, r, 4);
        a->out[s] = min64(a->out[s], tag);
    }
    /* Breadth first, a state's failure state is complete before it: its
     * missing edges are borrowed, its smallest tag inherited. */
    size_t head = 0, tail = 0;
    for (uint32_t c = 1; c < nc; c++)
        if (a->delta[c] != 0)
            queue[tail++] = a->delta[c]; /* their fail[] is 0: the root */
    while (head < tail) {
        uint32_t s = queue[head++], f = fail[s];
        a->out[s] = min64(a->out[s], a->out[f]);
        for (uint32_t c = 1; c < nc; c++) {
            uint32_t *t = &a->delta[s * nc + c];
            if (*t != 0) {
                fail[*t] = a->delta[f * nc + c];
                queue[tail++] = *t;
            } else {
                *t = a->delta[f * nc + c];
            }
        }
    }
    free(fail);
    /* Row offsets instead of state numbers keep a multiply off the chain
     * of dependent loads a match walks. */
    for (size_t i = 0; i < (size_t)a->nstates * nc; i++)
        a->delta[i] = a->delta[i] * nc | (a->out[a->delta[i]] != NONE ? ACCEPT : 0);
    void *p = realloc(a->delta, (size_t)a->nstates * nc * sizeof(*a->delta));
    a->delta = p ? p : a->delta;
    p = realloc(a->out, a->nstates * sizeof(*a->out));
    a->out = p ? p : a->out;
    return 0;
}

int
rules_domains_build(struct rules_domains *d)
{
    if (d == NULL || d->built)
        return -1;
    size_t used = 0, need = 1, n;
    for (size_t o = 0; o < d->nbytes; o += REC + n) {
        n = (unsigned char)d->bytes[o + 5];
        if (d->bytes[o + 4] != RULES_DOMAIN_KEYWORD && n > HEAD)
            need += n - HEAD;
    }
    char *tails = malloc(need);
    /* A failed build leaves the set for _free only: built is -1. */
    d->built = -1;
    if (tails == NULL || (d->count > d->nkw && build_names(d, tails, &used) < 0) ||
        (d->nkw > 0 && build_automaton(d) < 0)) {
        free(tails);
        return -1;
    }
    free(d->bytes);
    d->bytes = tails;
    d->nbytes = used;
    d->cap = need;
    d->built = 1;
    return 0;
}

int
rules_domains_match(const struct rules_domains *d, const char *host, size_t len, uint32_t *tag)
{
    char buf[HOST_MAX + PAD];
    uint8_t dot[HOST_MAX + 1];
    if (d == NULL || d->built != 1 || host == NULL)
        return 0;
    if (len > 0 && host[len - 1] == '.')
        len--;
    if (len == 0 || len > HOST_MAX)
        return 0;
    /* Eight bytes at a time: lowercase, and note where the dots are. */
    memcpy(buf, host, len);
    memset(buf + len, 0, PAD);
    size_t nd = 0;
    for (size_t j = 0; j < len; j += 8) {
        uint64_t w;
        memcpy(&w, buf + j, 8);
        w = lower8(w);
        memcpy(buf + j, &w, 8);
        for (uint64_t m = dots8(w); m != 0; m &= m - 1)
            dot[nd++] = (uint8_t)(j + (__builtin_ctzll(m) >> 3));
    }
    uint64_t best = NONE, h = d->seed;
    /* Right to left, each label start begins a suffix to look up. */
    for (size_t k = nd + 1, end = len; d->nslots > 0 && k-- > 0;) {
        size_t start = k > 0 ? dot[k - 1] + 1u : 0;
        h = hash_label(h, buf + start, end - start);
        end = start - 1;
        if (d->bloom != NULL) {
            uint64_t bits = bloom_bits(h);
            if ((d->bloom[(h >> 32) & d->bloom_mask] & bits) != bits)
                continue;
        }
        const struct slot *sl = lookup(d, d->bytes, buf + start, len - start, h);
        if (sl->off & F_SUFFIX)
            best = min64(best, sl->suffix);
        if (start == 0 && (sl->off & F_EXACT))
            best = min64(best, sl->exact);
    }
    const struct automaton *a = &d->ac;
    for (size_t i = 0, v = 0; d->nkw > 0 && i < len; i++) {
        v = a->delta[(v & ~ACCEPT) + a->cls[(unsigned char)buf[i]]];
        if (v & ACCEPT)
            best = min64(best, a->out[(v & ~ACCEPT) / a->nclass]);
    }
    if (best != NONE && tag != NULL)
        *tag = (uint32_t)best;
    return best != NONE;
}

size_t
rules_domains_count(const struct rules_domains *d)
{
    return d ? d->count : 0;
}

size_t
rules_domains_memory(const struct rules_domains *d)
{
    if (d == NULL)
        return 0;
    return sizeof(*d) + d->cap + (size_t)d->nslots * sizeof(*d->slots) +
           (d->bloom ? ((size_t)d->bloom_mask + 1) * sizeof(*d->bloom) : 0) +
           (size_t)d->ac.nstates * (d->ac.nclass * sizeof(*d->ac.delta) + sizeof(*d->ac.out));
}
