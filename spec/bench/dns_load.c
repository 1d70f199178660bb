/* A UDP DNS load generator: keeps a window of queries in flight to one
 * server over a few sockets, each query a random name of a fixed set, and
 * counts the answers for a while.
 *
 *   dns_load --server IP:PORT [--names N] [--suffix S] [--first K]
 *            [--seconds S] [--window W] [--sockets K] [--seed N]
 *            [--sequential] [--type A|AAAA] [--lost-ms MS] [--busy]
 *
 * Names are "n<i>.<suffix>" for i in [first, first + names). By default each
 * query draws one at random and the run lasts --seconds (after a 0.3 s
 * warm-up that is not counted); --sequential asks every name once, in
 * order, and stops (to warm caches or fill a fake-IP pool). Every socket is
 * connected and keeps window / sockets queries in flight, each with its own
 * ID (the ID is the slot it occupies, so an answer is matched in O(1));
 * answers come in with recvmmsg and their replacements go out with
 * sendmmsg. A query unanswered after --lost-ms (default 100) counts as
 * lost and its slot sends another (a lost query must not idle its slot
 * long: that would measure the timeout, not the server). Prints one line:
 *   qps=<answers per second> answers=N sent=N lost=N errors=N (rcode != 0)
 *   mismatched=N (answers whose ID was not in flight) secs=S
 * --busy polls without sleeping, so the generator's own wake-ups do not add
 * to the round trip (only with a core of its own: on a shared one it steals
 * the server's time).
 *   self_cpu=P (this generator's CPU use over the run, 100 = one core: near
 *   100 means the generator, not the server, set the pace)
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MAX_SOCKETS 16
#define MAX_WINDOW 4096
#define BATCH 64
#define QMAX 300
static uint64_t lost_ns = 100000000ull;

struct query {
    uint8_t len;
    uint8_t wire[QMAX];
};

static struct query *queries;
static size_t nnames;

struct sock {
    int fd;
    unsigned slots;          /* queries this socket keeps in flight */
    uint64_t sent_at[MAX_WINDOW]; /* 0: the slot is free */
};

static struct sock socks[MAX_SOCKETS];
static unsigned nsocks = 4, window = 256;
static uint64_t answers, sent, lost, errors, mismatched;
static int counting;
static size_t next_seq;
static int sequential;
static int busy;

static void
usage(void)
{
    fprintf(stderr, "usage: dns_load --server IP:PORT [--names N] [--suffix S] [--first K] "
                    "[--seconds S] [--window W] [--sockets K] [--seed N] [--sequential] "
                    "[--type A|AAAA] [--lost-ms MS] [--busy]\n");
    exit(2);
}

static int
build_query(struct query *q, const char *name, uint16_t type)
{
    uint8_t *p = q->wire;
    memset(p, 0, 12);
    p[2] = 0x01; /* RD */
    p[5] = 1;    /* one question */
    size_t o = 12;
    const char *s = name;
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (n == 0 || n > 63 || o + n + 6 > QMAX)
            return -1;
        p[o++] = (uint8_t)n;
        memcpy(p + o, s, n);
        o += n;
        s += n + (dot != NULL);
    }
    p[o++] = 0;
    p[o++] = (uint8_t)(type >> 8);
    p[o++] = (uint8_t)type;
    p[o++] = 0;
    p[o++] = 1; /* IN */
    q->len = (uint8_t)o;
    return 0;
}

/* The next name: random, or in order with --sequential (-1 when done). */
static long
pick(void)
{
    if (sequential)
        return next_seq < nnames ? (long)next_seq++ : -1;
    return (long)(rnd() % nnames);
}

/* Fills free slots of |s| with new queries, sent in batches. */
static void
refill(struct sock *s, uint64_t now)
{
    static struct mmsghdr msgs[BATCH];
    static struct iovec iov[BATCH];
    static uint8_t buf[BATCH][QMAX];
    unsigned n = 0, slot_of[BATCH];
    for (unsigned i = 0; i < s->slots; i++) {
        if (s->sent_at[i] != 0)
            continue;
        long k = pick();
        if (k < 0)
            break;
        const struct query *q = &queries[k];
        memcpy(buf[n], q->wire, q->len);
        buf[n][0] = (uint8_t)(i >> 8);
        buf[n][1] = (uint8_t)i;
        iov[n] = (struct iovec){buf[n], q->len};
        msgs[n].msg_hdr = (struct msghdr){.msg_iov = &iov[n], .msg_iovlen = 1};
        slot_of[n] = i;
        s->sent_at[i] = now;
        if (++n == BATCH) {
            int k2 = sendmmsg(s->fd, msgs, n, 0);
            for (int j = k2 < 0 ? 0 : k2; j < (int)n; j++)
                s->sent_at[slot_of[j]] = 0; /* not sent: free again */
            sent += k2 > 0 ? (uint64_t)k2 : 0;
            n = 0;
            if (k2 < BATCH)
                return;
        }
    }
    if (n > 0) {
        int k2 = sendmmsg(s->fd, msgs, n, 0);
        for (int j = k2 < 0 ? 0 : k2; j < (int)n; j++)
            s->sent_at[slot_of[j]] = 0;
        sent += k2 > 0 ? (uint64_t)k2 : 0;
    }
}

static void
drain(struct sock *s)
{
    static struct mmsghdr msgs[BATCH];
    static struct iovec iov[BATCH];
    static uint8_t buf[BATCH][1500];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){buf[i], sizeof(buf[i])};
            msgs[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i], .msg_iovlen = 1};
        }
        int n = recvmmsg(s->fd, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return;
        for (int i = 0; i < n; i++) {
            const uint8_t *m = buf[i];
            if (msgs[i].msg_len < 12 || !(m[2] & 0x80)) {
                mismatched++;
                continue;
            }
            unsigned id = (unsigned)m[0] << 8 | m[1];
            if (id >= s->slots || s->sent_at[id] == 0) {
                mismatched++;
                continue;
            }
            s->sent_at[id] = 0;
            if (counting || sequential) {
                answers++;
                if ((m[3] & 0xF) != 0)
                    errors++;
            }
        }
        if (n < BATCH)
            return;
    }
}

static void
expire(uint64_t now)
{
    for (unsigned k = 0; k < nsocks; k++)
        for (unsigned i = 0; i < socks[k].slots; i++)
            if (socks[k].sent_at[i] != 0 && now - socks[k].sent_at[i] > lost_ns) {
                socks[k].sent_at[i] = 0;
                lost++;
            }
}

static int
idle(void)
{
    for (unsigned k = 0; k < nsocks; k++)
        for (unsigned i = 0; i < socks[k].slots; i++)
            if (socks[k].sent_at[i] != 0)
                return 0;
    return 1;
}

int
main(int argc, char **argv)
{
    const char *server = NULL, *suffix = "bench.test";
    double seconds = 3;
    uint16_t type = 1;
    size_t first = 0;
    nnames = 10000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--sequential") == 0) {
            sequential = 1;
            continue;
        }
        if (strcmp(a, "--busy") == 0) {
            busy = 1;
            continue;
        }
        if (v == NULL)
            usage();
        if (strcmp(a, "--server") == 0)
            server = v;
        else if (strcmp(a, "--names") == 0)
            nnames = strtoul(v, NULL, 10);
        else if (strcmp(a, "--first") == 0)
            first = strtoul(v, NULL, 10);
        else if (strcmp(a, "--suffix") == 0)
            suffix = v;
        else if (strcmp(a, "--seconds") == 0)
            seconds = atof(v);
        else if (strcmp(a, "--window") == 0)
            window = (unsigned)atoi(v);
        else if (strcmp(a, "--sockets") == 0)
            nsocks = (unsigned)atoi(v);
        else if (strcmp(a, "--seed") == 0)
            rng = strtoull(v, NULL, 10) | 1;
        else if (strcmp(a, "--lost-ms") == 0)
            lost_ns = (uint64_t)(atof(v) * 1e6);
        else if (strcmp(a, "--type") == 0)
            type = strcmp(v, "AAAA") == 0 ? 28 : 1;
        else
            usage();
        i++;
    }
    if (server == NULL || nnames == 0 || nsocks == 0 || nsocks > MAX_SOCKETS || window < nsocks ||
        window / nsocks > MAX_WINDOW)
        usage();

    struct sockaddr_in sa = {.sin_family = AF_INET};
    char host[64];
    const char *colon = strrchr(server, ':');
    if (colon == NULL || (size_t)(colon - server) >= sizeof(host))
        usage();
    memcpy(host, server, (size_t)(colon - server));
    host[colon - server] = '\0';
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        usage();

    queries = calloc(nnames, sizeof(*queries));
    if (queries == NULL) {
        perror("calloc");
        return 1;
    }
    for (size_t i = 0; i < nnames; i++) {
        char name[256];
        snprintf(name, sizeof(name), "n%zu.%s", first + i, suffix);
        if (build_query(&queries[i], name, type) < 0) {
            fprintf(stderr, "dns_load: bad name %s\n", name);
            return 2;
        }
    }

    struct pollfd pfd[MAX_SOCKETS];
    for (unsigned k = 0; k < nsocks; k++) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        int size = 4 << 20;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            perror("dns_load: socket");
            return 1;
        }
        socks[k].fd = fd;
        socks[k].slots = window / nsocks;
        pfd[k] = (struct pollfd){.fd = fd, .events = POLLIN};
    }

    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t t0 = now_ns(), start = t0 + (sequential ? 0 : 300000000ull);
    uint64_t end = start + (uint64_t)(seconds * 1e9), last_expire = t0;
    counting = sequential;
    for (unsigned k = 0; k < nsocks; k++)
        refill(&socks[k], t0);
    for (;;) {
        uint64_t now = now_ns();
        if (!sequential) {
            if (!counting && now >= start)
                counting = 1;
            if (now >= end)
                break;
        } else if (next_seq >= nnames && idle()) {
            end = now;
            break;
        }
        if (poll(pfd, nsocks, busy ? 0 : 50) < 0 && errno != EINTR) {
            perror("dns_load: poll");
            return 1;
        }
        now = now_ns();
        for (unsigned k = 0; k < nsocks; k++) {
            if (pfd[k].revents & POLLIN)
                drain(&socks[k]);
            pfd[k].revents = 0;
        }
        if (now - last_expire > 100000000ull) {
            expire(now);
            last_expire = now;
        }
        for (unsigned k = 0; k < nsocks; k++)
            refill(&socks[k], now);
    }
    double secs = (double)(end - start) / 1e9, wall = (double)(now_ns() - t0) / 1e9;
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
                          ru0.ru_stime.tv_sec) +
                 (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                          ru0.ru_stime.tv_usec) / 1e6;
    printf("qps=%.0f answers=%llu sent=%llu lost=%llu errors=%llu mismatched=%llu secs=%.2f "
           "self_cpu=%.0f\n",
           secs > 0 ? (double)answers / secs : 0.0, (unsigned long long)answers,
           (unsigned long long)sent, (unsigned long long)lost, (unsigned long long)errors,
           (unsigned long long)mismatched, secs, wall > 0 ? 100 * cpu / wall : 0.0);
    return 0;
}
