/* A host app embedding chute, as a NetworkExtension or a VpnService does:
 * it owns the TUN device, moves the packets between the device and the
 * engine only through chute.h, and protects chute's upstream sockets
 * itself (here: SO_MARK, which a policy rule lets past the TUN).
 *
 *   host [-m MARK] [-M MTU] [-L LIMIT] TUN BUNDLE
 *
 * TUN is an existing device (ip tuntap add dev TUN mode tun) whose
 * addresses and routes the system set up, as the OS does for an app; no
 * offload: MTU-sized packets. LIMIT is chute_options.memory_limit: bytes,
 * or with a K, M or G suffix ("15M", as an iOS NetworkExtension allows).
 * SIGINT/SIGTERM stop, SIGHUP reloads BUNDLE.
 * Build: cc host.c $(pkg-config --cflags --libs chute) -lpthread */

#include <chute/chute.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64

struct host {
    int fd, mtu;
    uint32_t mark;
    chute_engine *e;
    atomic_int done;
    uint64_t write_drops; /* loop thread only */
};

/* The engine's output batch: one write per packet, as the device takes
 * them. A full device queue drops the packet; TCP sends it again. */
static void
packets_out(void *arg, const struct chute_packet *p, size_t n)
{
    struct host *h = arg;
    for (size_t i = 0; i < n; i++)
        if (write(h->fd, p[i].data, p[i].len) != (ssize_t)p[i].len && h->write_drops++ == 0)
            fprintf(stderr, "host: tun write: %s (dropped; counting)\n", strerror(errno));
}

static int
protect(void *arg, int fd)
{
    struct host *h = arg;
    if (h->mark != 0 && setsockopt(fd, SOL_SOCKET, SO_MARK, &h->mark, sizeof(h->mark)) != 0)
        return errno;
    return 0;
}

/* The device to the engine: read a batch, hand it over; when the engine's
 * queue is full, hold the rest and try again (the device queues behind). */
static void *
reader(void *arg)
{
    struct host *h = arg;
    uint8_t *buf = malloc((size_t)BATCH * (size_t)h->mtu);
    struct chute_packet p[BATCH];
    struct pollfd pfd = {.fd = h->fd, .events = POLLIN};
    if (buf == NULL)
        return NULL;
    while (!atomic_load(&h->done)) {
        size_t n = 0;
        while (n < BATCH) {
            ssize_t r = read(h->fd, buf + n * (size_t)h->mtu, (size_t)h->mtu);
            if (r <= 0)
                break;
            p[n] = (struct chute_packet){buf + n * (size_t)h->mtu, (size_t)r};
            n++;
        }
        if (n == 0) {
            poll(&pfd, 1, 100);
            continue;
        }
        for (size_t off = 0; off < n && !atomic_load(&h->done);) {
            int rc = chute_engine_packets_in(h->e, p + off, n - off);
            if (rc > 0)
                off += (size_t)rc;
            else
                usleep(50);
        }
    }
    free(buf);
    return NULL;
}

static int
open_tun(const char *name)
{
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    struct ifreq ifr = {.ifr_flags = IFF_TUN | IFF_NO_PI};
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
    if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) != 0) {
        fprintf(stderr, "host: tun %s: %s\n", name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* "15M", "512K", "1G" or bytes. */
static size_t
parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'G': case 'g': v <<= 10; /* fall through */
    case 'M': case 'm': v <<= 10; /* fall through */
    case 'K': case 'k': v <<= 10; break;
    default: break;
    }
    return (size_t)v;
}

int
main(int argc, char **argv)
{
    struct host h = {.mtu = 1500};
    size_t limit = 0;
    int c;
    while ((c = getopt(argc, argv, "m:M:L:")) != -1) {
        if (c == 'm')
            h.mark = (uint32_t)strtoul(optarg, NULL, 0);
        else if (c == 'M')
            h.mtu = atoi(optarg);
        else if (c == 'L')
            limit = parse_size(optarg);
        else
            optind = argc + 1;
    }
    if (optind + 2 != argc) {
        fprintf(stderr, "usage: host [-m MARK] [-M MTU] [-L LIMIT] TUN BUNDLE\n");
        return 2;
    }
    if ((h.fd = open_tun(argv[optind])) < 0)
        return 1;
    struct chute_options o = {
        .handle_signals = 1,
        .packets_out = packets_out,
        .packets_arg = &h,
        .mtu = h.mtu,
        .batch = BATCH,
        .protect_socket = protect,
        .protect_arg = &h,
        .memory_limit = limit,
    };
    char err[1024];
    int rc = chute_engine_new(&h.e, &o);
    if (rc != 0) {
        fprintf(stderr, "host: chute_engine_new: %d\n", rc);
        return 1;
    }
    if (chute_engine_load_bundle(h.e, argv[optind + 1], err, sizeof(err)) != 0) {
        fprintf(stderr, "host: %s\n", err);
        return 1;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, reader, &h) != 0)
        return 1;
    fprintf(stderr, "host: tun %s, mtu %d, mark 0x%x, chute %s\n", argv[optind], h.mtu, h.mark,
            chute_version());
    rc = chute_engine_run(h.e, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "host: %s\n", err);
    atomic_store(&h.done, 1);
    pthread_join(th, NULL);
    chute_engine_free(h.e);
    close(h.fd);
    fprintf(stderr, "host: stopped (%llu tun write drops)\n", (unsigned long long)h.write_drops);
    return rc == 0 ? 0 : 1;
}
