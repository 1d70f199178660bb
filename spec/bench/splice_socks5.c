/* A SOCKS5 server for benchmarks (scripts/bench/tun --hev): no auth,
 * CONNECT to an IPv4 or IPv6 address, then splice(2) between the two
 * sockets through a pipe per direction, a thread each: it copies nothing,
 * so the relay in front of it, not this server, sets the rate.
 *
 *   splice_socks5 ADDRESS PORT     (IPv4 listen address) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PIPE_BYTES (1 << 20)

struct pair {
    int from, to;
};

static int
need(int fd, void *buf, size_t n)
{
    return recv(fd, buf, n, MSG_WAITALL) == (ssize_t)n ? 0 : -1;
}

static void *
pump(void *arg)
{
    struct pair *p = arg;
    int pp[2];
    if (pipe(pp) == 0) {
        (void)fcntl(pp[1], F_SETPIPE_SZ, PIPE_BYTES);
        for (;;) {
            ssize_t n = splice(p->from, NULL, pp[1], NULL, PIPE_BYTES, SPLICE_F_MOVE | SPLICE_F_MORE);
            if (n <= 0)
                break;
            while (n > 0) {
                ssize_t w = splice(pp[0], NULL, p->to, NULL, (size_t)n, SPLICE_F_MOVE | SPLICE_F_MORE);
                if (w <= 0)
                    goto out;
                n -= w;
            }
        }
    out:
        close(pp[0]);
        close(pp[1]);
    }
    shutdown(p->to, SHUT_WR);
    return NULL;
}

static void *
serve(void *arg)
{
    int c = (int)(intptr_t)arg, u = -1;
    uint8_t b[262];
    struct sockaddr_storage ss = {0};
    socklen_t sl = 0;
    if (need(c, b, 2) != 0 || b[0] != 5 || need(c, b + 2, b[1]) != 0 || send(c, "\x05\x00", 2, 0) != 2 ||
        need(c, b, 4) != 0 || b[1] != 1)
        goto done;
    if (b[3] == 1) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        if (need(c, &a->sin_addr, 4) != 0 || need(c, &a->sin_port, 2) != 0)
            goto done;
        sl = sizeof(*a);
    } else if (b[3] == 4) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        if (need(c, &a->sin6_addr, 16) != 0 || need(c, &a->sin6_port, 2) != 0)
            goto done;
        sl = sizeof(*a);
    } else {
        goto done; /* names: not needed by the bench */
    }
    u = socket(ss.ss_family, SOCK_STREAM, 0);
    if (u < 0 || connect(u, (struct sockaddr *)&ss, sl) != 0) {
        send(c, "\x05\x05\x00\x01\0\0\0\0\0\0", 10, 0);
        goto done;
    }
    if (send(c, "\x05\x00\x00\x01\0\0\0\0\0\0", 10, 0) != 10)
        goto done;
    struct pair up = {c, u}, down = {u, c};
    pthread_t t;
    if (pthread_create(&t, NULL, pump, &down) != 0)
        goto done;
    pump(&up);
    pthread_join(t, NULL);
done:
    if (u >= 0)
        close(u);
    close(c);
    return NULL;
}

int
main(int argc, char **argv)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    if (argc != 3 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
        fprintf(stderr, "usage: splice_socks5 IPV4-ADDRESS PORT\n");
        return 2;
    }
    a.sin_port = htons((uint16_t)atoi(argv[2]));
    signal(SIGPIPE, SIG_IGN); /* a peer gone mid-splice ends that relay, not the server */
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1024) != 0) {
        perror("splice_socks5: bind/listen");
        return 1;
    }
    for (;;) {
        int c = accept(l, NULL, NULL);
        pthread_t t;
        if (c < 0)
            continue;
        if (pthread_create(&t, NULL, serve, (void *)(intptr_t)c) != 0) {
            close(c);
            continue;
        }
        pthread_detach(t);
    }
}
