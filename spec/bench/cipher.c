/* Shadowsocks cipher throughput through chute's own code path
 * (scripts/bench/cipher runs it and sets it beside `openssl speed`).
 *
 *   cipher [--mib N] [--stream-mib N]
 *
 * codec: a stream of N MiB (default 1024) sealed in 16 KiB writes by
 *        ss_encoder_seal, each write's chunks opened again in place by
 *        ss_decoder_next; seal and open timed apart.
 * stream: two outbound_ss_streams back to back over a socketpair (default
 *        256 MiB): writev 16 KiB → seal → send ... recv → open → read,
 *        both ends in this thread, beside the same socketpair moving the
 *        same bytes with plain send/recv ("plain").
 * Prints one "row" line per cipher (MB/s = 10^6 bytes of payload per
 * second of this thread's CPU time) and one "plain" line. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "io/io.h"
#include "outbound/proxy.h"
#include "outbound/ss_codec.h"
#include "tls/crypto.h"

#define WRITE 16384

static const struct {
    const char *name;
    enum outbound_ss_cipher c;
} ciphers[] = {
    {"aes-128-gcm", OUTBOUND_SS_AES_128_GCM},
    {"aes-256-gcm", OUTBOUND_SS_AES_256_GCM},
    {"chacha20-ietf-poly1305", OUTBOUND_SS_CHACHA20_POLY1305},
};

#define BATCH 16 /* writes sealed, then opened: 256 KiB stays in L2 */
#define SLOT (SS_SALT_MAX + 2 * SS_CHUNK_OVERHEAD + WRITE)

static uint8_t src[WRITE], out[BATCH][SLOT];

static void
die(const char *what)
{
    fprintf(stderr, "cipher: %s\n", what);
    exit(1);
}

/* CPU time of this thread: `openssl speed` also divides by CPU time, so
 * both sides ignore other load on a shared machine. A syscall here, hence
 * timed per batch. */
static uint64_t
cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
codec_run(const struct outbound_proxy *p, size_t bytes, double *seal_mbps, double *open_mbps)
{
    struct ss_encoder e;
    struct ss_decoder d;
    uint64_t t_seal = 0, t_open = 0;
    struct iovec iov = {src, WRITE};
    size_t len[BATCH];

    ss_encoder_init(&e, p->cipher, p->key, NULL, NULL, 0);
    ss_decoder_init(&d, p->cipher, p->key);
    for (size_t done = 0; done < bytes; done += BATCH * WRITE) {
        size_t taken, got = 0, plen;
        ssize_t r = 0;
        uint64_t t0 = cpu_ns();
        for (int b = 0; b < BATCH; b++) {
            len[b] = ss_encoder_seal(&e, out[b], SLOT, &iov, 1, &taken);
            got += taken;
        }
        uint64_t t1 = cpu_ns();
        for (int b = 0; b < BATCH; b++) {
            size_t off = 0;
            while ((r = ss_decoder_next(&d, out[b] + off, len[b] - off, &plen)) > 0) {
                off += (size_t)r;
                got += plen;
            }
            if (r < 0 || off != len[b])
                die("codec round trip failed");
        }
        uint64_t t2 = cpu_ns();
        if (got != 2 * BATCH * WRITE)
            die("codec round trip lost bytes");
        if (done == 0 && memcmp(out[0] + e.salt_len + SS_CHUNK_HDR, src, 100) != 0)
            die("codec round trip changed the bytes");
        t_seal += t1 - t0;
        t_open += t2 - t1;
    }
    *seal_mbps = bytes / (t_seal / 1e3);
    *open_mbps = bytes / (t_open / 1e3);
}

/* Payload MB/s of a writer → socketpair → reader pipeline, one thread. */
static double
stream_run(struct ev_loop *loop, const struct outbound_proxy *p, size_t bytes)
{
    static uint8_t rbuf[64 * 1024];
    struct flow_addr dst = {.kind = FLOW_ADDR_IP4, .port = 443};
    int sv[2];
    size_t sent = 0, got = 0;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
        die("socketpair");
    /* Both ends share the key: b reads what a seals (a's address header
     * comes out as the first 7 bytes of payload). */
    struct io_stream *a = outbound_ss_stream(io_fd_new(loop, sv[0]), p, &dst);
    struct io_stream *b = outbound_ss_stream(io_fd_new(loop, sv[1]), p, &dst);
    if (a == NULL || b == NULL)
        die("outbound_ss_stream");
    bytes += 7;
    uint64_t t0 = cpu_ns();
    while (got < bytes) {
        while (sent < bytes - 7) {
            size_t n = bytes - 7 - sent < WRITE ? bytes - 7 - sent : WRITE;
            ssize_t k = io_write(a, src, n);
            if (k < 0 && errno == EAGAIN)
                break;
            if (k <= 0)
                die("stream write");
            sent += (size_t)k;
        }
        /* The last sealed bytes leave when a's socket drains (its on_drain). */
        if (sent == bytes - 7)
            ev_run(loop, EVRUN_NOWAIT);
        for (;;) {
            ssize_t k = io_read(b, rbuf, sizeof(rbuf));
            if (k < 0 && errno == EAGAIN)
                break;
            if (k <= 0)
                die("stream read");
            got += (size_t)k;
        }
    }
    uint64_t t = cpu_ns() - t0;
    io_close(a, 0);
    io_close(b, 0);
    return (bytes - 7) / (t / 1e3);
}

static double
plain_run(size_t bytes)
{
    static uint8_t rbuf[64 * 1024];
    int sv[2];
    size_t sent = 0, got = 0;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
        die("socketpair");
    uint64_t t0 = cpu_ns();
    while (got < bytes) {
        while (sent < bytes) {
            size_t n = bytes - sent < WRITE ? bytes - sent : WRITE;
            ssize_t k = send(sv[0], src, n, MSG_NOSIGNAL);
            if (k < 0 && errno == EAGAIN)
                break;
            if (k <= 0)
                die("send");
            sent += (size_t)k;
        }
        for (;;) {
            ssize_t k = recv(sv[1], rbuf, sizeof(rbuf), 0);
            if (k < 0 && errno == EAGAIN)
                break;
            if (k <= 0)
                die("recv");
            got += (size_t)k;
        }
    }
    uint64_t t = cpu_ns() - t0;
    close(sv[0]);
    close(sv[1]);
    return bytes / (t / 1e3);
}

int
main(int argc, char **argv)
{
    size_t mib = 1024, stream_mib = 256;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
            mib = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--stream-mib") == 0 && i + 1 < argc)
            stream_mib = strtoul(argv[++i], NULL, 10);
        else
            die("usage: cipher [--mib N] [--stream-mib N]");
    }
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)rnd();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    printf("# codec: %zu MiB in %d-byte writes; stream: %zu MiB over a socketpair\n", mib, WRITE,
           stream_mib);
    for (size_t c = 0; c < sizeof(ciphers) / sizeof(ciphers[0]); c++) {
        struct outbound_proxy p;
        double seal, open;
        memset(&p, 0, sizeof(p));
        if (outbound_ss_setup(&p, ciphers[c].name, "bench") != 0)
            die("outbound_ss_setup");
        codec_run(&p, mib << 20, &seal, &open);
        double both = 1.0 / (1.0 / seal + 1.0 / open);
        double stream = stream_run(loop, &p, stream_mib << 20);
        printf("row %s %s %.0f %.0f %.0f %.0f\n", ciphers[c].name,
               tls_aead_impl(ss_alg(ciphers[c].c)), seal, open, both, stream);
    }
    printf("plain %.0f\n", plain_run(stream_mib << 20));
    ev_loop_destroy(loop);
    return 0;
}
