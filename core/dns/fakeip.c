#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dns/fakeip.h"

/* Layout. A mapping lives in a 64-byte slot whose index is its address's
 * offset from the first usable address, so address -> name is an array
 * access and the v4 and v6 addresses of a name share one slot (v4 first4 + i,
 * v6 first6 + i). Slots come in chunks allocated on first use: an idle pool
 * costs a few KiB, a busy one ~64 bytes per slot touched. Names up to
 * NAME_INLINE bytes sit in the slot; longer ones (rare) get a heap copy.
 * A chained hash table of uint32 heads, grown with the entries, finds slots
 * by name; a doubly linked list through the slots keeps recency order. */

#define NIL UINT32_MAX
#define NAME_MAX_LEN 253
#define NAME_INLINE 46       /* + NUL: the slot is exactly 64 bytes */
#define CHUNK_SHIFT 10       /* 1024 slots, 64 KiB a chunk */
#define CHUNK_SLOTS (1u << CHUNK_SHIFT)
#define MIN_HEADS 64u
#define FAKE_PREFIX4_MAX 28  /* 13 addresses at least */

struct slot {
    uint32_t prev, next;        /* recency list: prev older, next newer */
    uint32_t hnext;             /* name hash chain */
    uint32_t hash;
    uint8_t len;                /* name length; 0 marks a free slot */
    char name[NAME_INLINE + 1]; /* the name, or a char * to its heap copy */
};
_Static_assert(sizeof(struct slot) == 64, "a slot is one cache line");

struct dns_fakeip {
    uint32_t net4, mask4, first4; /* host order; first4 = network + 2 */
    int has_v6;
    uint8_t net6[16];
    int prefix6;
    uint64_t first6_hi, first6_lo; /* network6 + 2 */
    uint32_t capacity, entries;
    uint32_t cursor;               /* where the search for a free slot resumes */
    uint32_t lru, mru;             /* recency list ends */
    struct slot **chunks;
    uint32_t nchunks;
    size_t chunk_bytes;
    uint32_t *heads, hmask, hmax;  /* hmask + 1 heads, at most hmax */
    uint64_t seed;
    uint64_t allocated, recycled, hits;
    size_t name_bytes;             /* heap copies of long names */
    uint32_t reserved[8];          /* slots never handed out (the TUN's own addresses) */
    unsigned nreserved;
};

static void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* What glibc's malloc really takes for |n| bytes (header, 16-byte rounding),
 * so the stats' |bytes| is what the process pays, not what was asked. */
static size_t
heap_cost(size_t n)
{
    size_t c = (n + sizeof(size_t) + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

/* Word-at-a-time multiply-xorshift with a per-pool random seed: cheap for
 * 20-byte names, and clients cannot aim names at one chain. */
static uint32_t
name_hash(const struct dns_fakeip *f, const char *s, size_t n)
{
    const uint64_t k = 0x9e3779b97f4a7c15ULL;
    uint64_t h = f->seed ^ (n * k), w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * k;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ULL;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* Printable ASCII, no spaces (the state file is "address name"), labels of
 * 1..63 bytes, no final dot. */
static int
name_ok(const char *s, size_t n)
{
    if (n == 0 || n > NAME_MAX_LEN)
        return 0;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (label == 0)
                return 0;
            label = 0;
        } else if (c <= ' ' || c >= 0x7f || ++label > 63) {
            return 0;
        }
    }
    return label != 0;
}

static inline struct slot *
slot_at(const struct dns_fakeip *f, uint32_t i)
{
    return &f->chunks[i >> CHUNK_SHIFT][i & (CHUNK_SLOTS - 1)];
}

/* NULL for a free slot (or one whose chunk was never allocated). */
static inline struct slot *
live_slot(const struct dns_fakeip *f, uint32_t i)
{
    struct slot *c = f->chunks[i >> CHUNK_SHIFT];
    if (c == NULL || c[i & (CHUNK_SLOTS - 1)].len == 0)
        return NULL;
    return &c[i & (CHUNK_SLOTS - 1)];
}

static inline const char *
slot_name(const struct slot *s)
{
    if (s->len <= NAME_INLINE)
        return s->name;
    const char *p;
    memcpy(&p, s->name, sizeof(p));
    return p;
}

static uint32_t
chunk_len(const struct dns_fakeip *f, uint32_t c)
{
    uint32_t left = f->capacity - (c << CHUNK_SHIFT);
    return left < CHUNK_SLOTS ? left : CHUNK_SLOTS;
}

static int
chunk_need(struct dns_fakeip *f, uint32_t i)
{
    uint32_t c = i >> CHUNK_SHIFT;
    if (f->chunks[c] != NULL)
        return 0;
    f->chunks[c] = calloc(chunk_len(f, c), sizeof(struct slot));
    if (f->chunks[c] == NULL)
        return -1;
    f->chunk_bytes += heap_cost(chunk_len(f, c) * sizeof(struct slot));
    return 0;
}

/* A hit moves to the front of its chain: hot names are found first try. */
static uint32_t
find(struct dns_fakeip *f, const char *name, size_t len, uint32_t h)
{
    uint32_t *head = &f->heads[h & f->hmask], *link = head;
    for (uint32_t i = *link; i != NIL;) {
        struct slot *s = slot_at(f, i);
        if (s->hash == h && s->len == len && memcmp(slot_name(s), name, len) == 0) {
            if (link != head) {
                *link = s->hnext;
                s->hnext = *head;
                *head = i;
            }
            return i;
        }
        link = &s->hnext;
        i = *link;
    }
    return NIL;
}

static void
lru_unlink(struct dns_fakeip *f, uint32_t i)
{
    struct slot *s = slot_at(f, i);
    if (s->prev != NIL)
        slot_at(f, s->prev)->next = s->next;
    else
        f->lru = s->next;
    if (s->next != NIL)
        slot_at(f, s->next)->prev = s->prev;
    else
        f->mru = s->prev;
}

static void
lru_push(struct dns_fakeip *f, uint32_t i)
{
    struct slot *s = slot_at(f, i);
    s->prev = f->mru;
    s->next = NIL;
    if (f->mru != NIL)
        slot_at(f, f->mru)->next = i;
    else
        f->lru = i;
    f->mru = i;
}

static inline void
touch(struct dns_fakeip *f, uint32_t i)
{
    if (f->mru != i) {
        lru_unlink(f, i);
        lru_push(f, i);
    }
}

static void
slot_drop(struct dns_fakeip *f, uint32_t i)
{
    struct slot *s = slot_at(f, i);
    uint32_t *p = &f->heads[s->hash & f->hmask];
    while (*p != i)
        p = &slot_at(f, *p)->hnext;
    *p = s->hnext;
    lru_unlink(f, i);
    if (s->len > NAME_INLINE) {
        free((char *)slot_name(s));
        f->name_bytes -= heap_cost(s->len + 1u);
    }
    s->len = 0;
    f->entries--;
}

/* Doubles the heads while the entries outnumber them, so chains stay ~1
 * long; a failed grow only means longer chains. */
static void
heads_grow(struct dns_fakeip *f)
{
    uint32_t n = (f->hmask + 1) * 2;
    uint32_t *h = malloc((size_t)n * sizeof(*h));
    if (h == NULL)
        return;
    memset(h, 0xff, (size_t)n * sizeof(*h));
    for (uint32_t i = f->lru; i != NIL;) {
        struct slot *s = slot_at(f, i);
        s->hnext = h[s->hash & (n - 1)];
        h[s->hash & (n - 1)] = i;
        i = s->next;
    }
    free(f->heads);
    f->heads = h;
    f->hmask = n - 1;
}

/* Fills the free slot |i| with |name| as the most recent mapping. */
static int
slot_fill(struct dns_fakeip *f, uint32_t i, const char *name, size_t len, uint32_t h)
{
    struct slot *s = slot_at(f, i);
    if (len > NAME_INLINE) {
        char *p = malloc(len + 1);
        if (p == NULL)
            return -1;
        memcpy(p, name, len);
        p[len] = '\0';
        memcpy(s->name, &p, sizeof(p));
        f->name_bytes += heap_cost(len + 1);
    } else {
        memcpy(s->name, name, len);
        s->name[len] = '\0';
    }
    s->len = (uint8_t)len;
    s->hash = h;
    if (f->entries >= f->hmask + 1 && f->hmask + 1 < f->hmax)
        heads_grow(f);
    s->hnext = f->heads[h & f->hmask];
    f->heads[h & f->hmask] = i;
    lru_push(f, i);
    f->entries++;
    return 0;
}

static int
is_reserved(const struct dns_fakeip *f, uint32_t i)
{
    for (unsigned k = 0; k < f->nreserved; k++)
        if (f->reserved[k] == i)
            return 1;
    return 0;
}

/* A slot for a new mapping: the next free one in address order while the
 * pool is not full, else the least recently used, dropped. Entries never
 * shrink except to be refilled, so the cursor sweeps the range about once. */
static uint32_t
slot_take(struct dns_fakeip *f)
{
    if (f->entries + f->nreserved < f->capacity) {
        for (;;) {
            uint32_t i = f->cursor;
            if (chunk_need(f, i) < 0)
                return NIL;
            f->cursor = i + 1 == f->capacity ? 0 : i + 1;
            if (slot_at(f, i)->len == 0 && !is_reserved(f, i))
                return i;
        }
    }
    uint32_t i = f->lru;
    slot_drop(f, i);
    f->recycled++;
    return i;
}

static void
addr_of(const struct dns_fakeip *f, uint32_t i, int version, uint8_t *out)
{
    if (version == 4) {
        uint32_t a = htonl(f->first4 + i);
        memcpy(out, &a, 4);
        return;
    }
    uint64_t lo = f->first6_lo + i, hi = f->first6_hi + (lo < f->first6_lo);
    for (int b = 0; b < 8; b++) {
        out[b] = (uint8_t)(hi >> (56 - 8 * b));
        out[8 + b] = (uint8_t)(lo >> (56 - 8 * b));
    }
}

/* The slot index |ip| maps to, or NIL outside the usable addresses. */
static uint32_t
index_of(const struct dns_fakeip *f, const uint8_t *ip, int version)
{
    if (version == 4) {
        uint32_t a;
        memcpy(&a, ip, 4);
        uint32_t d = ntohl(a) - f->first4;
        return d < f->capacity ? d : NIL;
    }
    if (version != 6 || !f->has_v6)
        return NIL;
    uint64_t hi = 0, lo = 0;
    for (int b = 0; b < 8; b++) {
        hi = hi << 8 | ip[b];
        lo = lo << 8 | ip[8 + b];
    }
    uint64_t dlo = lo - f->first6_lo, dhi = hi - f->first6_hi - (lo < f->first6_lo);
    return dhi == 0 && dlo < f->capacity ? (uint32_t)dlo : NIL;
}

/* "a.b.c.d/p" or "x::/p" into |addr| and |*prefix|. */
static int
parse_cidr(const char *s, int af, uint8_t *addr, int *prefix)
{
    const char *slash = strchr(s, '/');
    char buf[INET6_ADDRSTRLEN];
    if (slash == NULL || (size_t)(slash - s) >= sizeof(buf))
        return -1;
    memcpy(buf, s, (size_t)(slash - s));
    buf[slash - s] = '\0';
    if (inet_pton(af, buf, addr) != 1)
        return -1;
    const char *p = slash + 1;
    int n = 0;
    if (*p == '\0' || strlen(p) > 3)
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        n = n * 10 + (*p - '0');
    }
    *prefix = n;
    return 0;
}

struct dns_fakeip *
dns_fakeip_new(const char *v4, const char *v6, size_t max_entries, char *err, size_t errlen)
{
    uint8_t a4[4], a6[16];
    int p4, p6 = 0;
    if (v4 == NULL || parse_cidr(v4, AF_INET, a4, &p4) < 0) {
        seterr(err, errlen, "fake-ip range \"%s\": not an IPv4 a.b.c.d/prefix",
               v4 ? v4 : "(none)");
        return NULL;
    }
    /* A /29 or /30 leaves 5 or 1 addresses: every name past them takes an
     * address another name's flows still use (a /30 maps every name to
     * one address). */
    if (p4 < 8 || p4 > FAKE_PREFIX4_MAX) {
        seterr(err, errlen,
               "fake-ip range \"%s\": prefix must be 8..%d (a /%d has %u usable; "
               "names past them would take addresses other names' flows still use)",
               v4, FAKE_PREFIX4_MAX, p4, p4 >= 8 && p4 <= 30 ? (1u << (32 - p4)) - 3 : 0);
        return NULL;
    }
    /* network, network + 1 (the gateway) and broadcast are not handed out */
    uint32_t range = (uint32_t)((1ull << (32 - p4)) - 3);
    uint32_t cap = max_entries == 0 || max_entries > range ? range : (uint32_t)max_entries;
    if (v6 != NULL) {
        if (parse_cidr(v6, AF_INET6, a6, &p6) < 0) {
            seterr(err, errlen, "fake-ip range \"%s\": not an IPv6 x::/prefix", v6);
            return NULL;
        }
        if (p6 < 8 || p6 > 126 || (128 - p6 < 64 && (1ull << (128 - p6)) < (uint64_t)cap + 3)) {
            seterr(err, errlen, "fake-ip range \"%s\": prefix must be 8..126 and hold %u addresses",
                   v6, cap);
            return NULL;
        }
    }

    struct dns_fakeip *f = calloc(1, sizeof(*f));
    if (f == NULL)
        goto fail;
    /* Host bits are cleared: "198.18.0.1/16" (Clash's spelling) is 198.18.0.0/16. */
    f->mask4 = (uint32_t)(0xffffffffull << (32 - p4));
    f->net4 = ((uint32_t)a4[0] << 24 | (uint32_t)a4[1] << 16 | (uint32_t)a4[2] << 8 | a4[3]) &
              f->mask4;
    f->first4 = f->net4 + 2;
    if (v6 != NULL) {
        f->has_v6 = 1;
        f->prefix6 = p6;
        for (int b = 0; b < 16; b++) {
            int keep = p6 - 8 * b;
            f->net6[b] = keep >= 8 ? a6[b] : keep <= 0 ? 0 : a6[b] & (uint8_t)(0xff << (8 - keep));
        }
        for (int b = 0; b < 8; b++) {
            f->first6_hi = f->first6_hi << 8 | f->net6[b];
            f->first6_lo = f->first6_lo << 8 | f->net6[8 + b];
        }
        f->first6_lo += 2; /* no carry: the host part is at least 2 bits of zeros */
    }
    f->capacity = cap;
    f->cursor = 0;
    f->lru = f->mru = NIL;
    f->nchunks = (cap + CHUNK_SLOTS - 1) >> CHUNK_SHIFT;
    f->hmax = MIN_HEADS;
    while (f->hmax < cap)
        f->hmax <<= 1;
    f->hmask = MIN_HEADS - 1;
    f->chunks = calloc(f->nchunks, sizeof(*f->chunks));
    f->heads = malloc(MIN_HEADS * sizeof(*f->heads));
    if (f->chunks == NULL || f->heads == NULL)
        goto fail;
    memset(f->heads, 0xff, MIN_HEADS * sizeof(*f->heads));
    if (getrandom(&f->seed, sizeof(f->seed), GRND_NONBLOCK) != sizeof(f->seed))
        f->seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)f;
    return f;
fail:
    dns_fakeip_free(f);
    seterr(err, errlen, "fake-ip pool: out of memory");
    return NULL;
}

void
dns_fakeip_free(struct dns_fakeip *f)
{
    if (f == NULL)
        return;
    if (f->chunks != NULL) {
        for (uint32_t i = f->lru; i != NIL; i = slot_at(f, i)->next)
            if (slot_at(f, i)->len > NAME_INLINE)
                free((char *)slot_name(slot_at(f, i)));
        for (uint32_t c = 0; c < f->nchunks; c++)
            free(f->chunks[c]);
    }
    free(f->chunks);
    free(f->heads);
    free(f);
}

int
dns_fakeip_reserve(struct dns_fakeip *f, const uint8_t *ip, int version)
{
    uint32_t i = index_of(f, ip, version);
    if (i == NIL || f->nreserved == sizeof(f->reserved) / sizeof(f->reserved[0]))
        return -1;
    if (is_reserved(f, i))
        return 0;
    if (f->nreserved + 1 >= f->capacity)
        return -1; /* the pool must keep an address to hand out */
    if (live_slot(f, i) != NULL) /* loaded from the state file before we knew */
        slot_drop(f, i);
    f->reserved[f->nreserved++] = i;
    return 0;
}

int
dns_fakeip_addr(struct dns_fakeip *f, const char *name, int version, uint8_t *out)
{
    if (version != 4 && (version != 6 || !f->has_v6))
        return -1;
    size_t len = strlen(name);
    uint32_t h = name_hash(f, name, len);
    uint32_t i = find(f, name, len, h);
    if (i != NIL) {
        f->hits++;
        touch(f, i);
    } else {
        if (!name_ok(name, len) || (i = slot_take(f)) == NIL)
            return -1;
        if (slot_fill(f, i, name, len, h) < 0)
            return -1;
        f->allocated++;
    }
    addr_of(f, i, version, out);
    return 0;
}

const char *
dns_fakeip_name(struct dns_fakeip *f, const uint8_t *ip, int version)
{
    uint32_t i = index_of(f, ip, version);
    struct slot *s = i == NIL ? NULL : live_slot(f, i);
    if (s == NULL)
        return NULL;
    f->hits++;
    touch(f, i);
    return slot_name(s);
}

/* The whole prefix counts, network and gateway included: any address in it
 * is a fake one, mapped or not. */
int
dns_fakeip_contains(const struct dns_fakeip *f, const uint8_t *ip, int version)
{
    if (version == 4) {
        uint32_t a;
        memcpy(&a, ip, 4);
        return (ntohl(a) & f->mask4) == f->net4;
    }
    if (version != 6 || !f->has_v6)
        return 0;
    int full = f->prefix6 / 8, rest = f->prefix6 % 8;
    if (memcmp(ip, f->net6, (size_t)full) != 0)
        return 0;
    return rest == 0 || ((ip[full] ^ f->net6[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* fsync of the directory makes the rename itself durable; best effort. */
static void
sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (slash == NULL)
        strcpy(dir, ".");
    else if (slash == path)
        strcpy(dir, "/");
    else if ((size_t)(slash - path) < sizeof(dir))
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    else
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int
dns_fakeip_save(const struct dns_fakeip *f, const char *path, char *err, size_t errlen)
{
    int ret = -1, fd = -1;
    FILE *fp = NULL;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof(".XXXXXX"));
    if (tmp == NULL) {
        seterr(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".XXXXXX", sizeof(".XXXXXX"));
    fd = mkostemp(tmp, O_CLOEXEC); /* in the same directory, so rename is atomic */
    if (fd < 0 || fchmod(fd, 0600) < 0 || (fp = fdopen(fd, "w")) == NULL)
        goto io_error;
    fd = -1; /* fclose closes it now */
    char a[INET_ADDRSTRLEN];
    for (uint32_t i = f->lru; i != NIL; i = slot_at(f, i)->next) {
        uint8_t ip[4];
        addr_of(f, i, 4, ip);
        inet_ntop(AF_INET, ip, a, sizeof(a));
        fprintf(fp, "%s %s\n", a, slot_name(slot_at(f, i)));
    }
    if (fflush(fp) != 0 || ferror(fp) || fsync(fileno(fp)) < 0)
        goto io_error;
    int rc = fclose(fp);
    fp = NULL;
    if (rc != 0 || rename(tmp, path) < 0)
        goto io_error;
    sync_dir(path);
    ret = 0;
    goto done;
io_error:
    seterr(err, errlen, "%s: %s", path, strerror(errno));
    if (fp != NULL)
        fclose(fp);
    if (fd >= 0)
        close(fd);
    unlink(tmp);
done:
    free(tmp);
    return ret;
}

/* Puts |name| at slot |i| as the most recent mapping, displacing whatever
 * held the slot and the name's old slot: the file's later line wins. */
static int
place(struct dns_fakeip *f, uint32_t i, const char *name, size_t len)
{
    uint32_t h = name_hash(f, name, len);
    uint32_t old = find(f, name, len, h);
    if (old == i) {
        touch(f, i);
        return 0;
    }
    if (old != NIL)
        slot_drop(f, old);
    if (chunk_need(f, i) < 0)
        return -1;
    if (slot_at(f, i)->len != 0)
        slot_drop(f, i);
    return slot_fill(f, i, name, len, h);
}

int
dns_fakeip_load(struct dns_fakeip *f, const char *path, size_t *skipped, char *err,
                size_t errlen)
{
    size_t bad = 0;
    int ret = -1;
    if (skipped != NULL)
        *skipped = 0;
    FILE *fp = fopen(path, "re");
    if (fp == NULL) {
        if (errno == ENOENT)
            return 0;
        seterr(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    while (fgets(line, sizeof(line), fp) != NULL) {
        size_t n = strlen(line);
        if (n == sizeof(line) - 1 && line[n - 1] != '\n') { /* too long: skip the rest */
            int c;
            while ((c = getc(fp)) != EOF && c != '\n')
                ;
            bad++;
            continue;
        }
        /* "address name", blanks around; blank lines are ignored */
        char *save, *a = strtok_r(line, " \t\r\n", &save), *name = NULL;
        if (a == NULL)
            continue;
        if ((name = strtok_r(NULL, " \t\r\n", &save)) == NULL ||
            strtok_r(NULL, " \t\r\n", &save) != NULL) {
            bad++;
            continue;
        }
        uint8_t ip[16];
        int version = strchr(a, ':') ? 6 : 4;
        uint32_t i = NIL;
        if (inet_pton(version == 4 ? AF_INET : AF_INET6, a, ip) == 1)
            i = index_of(f, ip, version);
        size_t len = strlen(name);
        if (i == NIL || !name_ok(name, len)) {
            bad++;
            continue;
        }
        if (place(f, i, name, len) < 0) {
            seterr(err, errlen, "%s: out of memory", path);
            goto done;
        }
    }
    if (ferror(fp)) {
        seterr(err, errlen, "%s: %s", path, strerror(errno));
        goto done;
    }
    ret = 0;
done:
    fclose(fp);
    if (skipped != NULL)
        *skipped = bad;
    return ret;
}

void
dns_fakeip_stats(const struct dns_fakeip *f, struct dns_fakeip_stats *out)
{
    out->entries = f->entries;
    out->capacity = f->capacity;
    out->allocated = f->allocated;
    out->recycled = f->recycled;
    out->hits = f->hits;
    size_t b = heap_cost(sizeof(*f)) + heap_cost(f->nchunks * sizeof(*f->chunks)) +
               heap_cost(((size_t)f->hmask + 1) * sizeof(*f->heads)) + f->chunk_bytes +
               f->name_bytes;
    out->bytes = b;
}
