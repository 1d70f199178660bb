/* A small Shadowsocks AEAD server (SIP004), for benchmarks only: not part
 * of chute. scripts/bench/proxy puts it where ss-server stands, so that
 * the peer is not what limits one flow through chute.
 *
 *   ss_peer -p PORT -k PASSWORD -m aes-128-gcm|aes-256-gcm|chacha20-ietf-poly1305
 *           [-b BIND]
 *
 * TCP only. Per connection a thread: it reads the client's salt and the
 * address header (SOCKS5 form: ATYP 1 IPv4, 3 name, 4 IPv6; then the port),
 * connects to the target (getaddrinfo), then relays both ways with blocking
 * I/O, a second thread encrypting target -> client. The chunk format and
 * the crypto are chute's own (outbound/ss_codec.h over tls/crypto.h); the
 * master key is EVP_BytesToKey(MD5) of the password, as everywhere. */

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "outbound/proxy.h"
#include "outbound/ss_codec.h"
#include "tls/crypto.h"

#define IN_CAP (4 * SS_CHUNK_MAX)  /* ciphertext read from the client at once */
#define OUT_READ (4 * SS_PAYLOAD_MAX) /* plaintext read from the target at once */
#define OUT_CAP (SS_SALT_MAX + OUT_READ + 4 * SS_CHUNK_OVERHEAD)
#define MAX_IOV (IN_CAP / (SS_CHUNK_OVERHEAD + 1) + 1)

static enum outbound_ss_cipher cipher;
static uint8_t master[32];
static int verbose;

struct conn {
    int cli;
    int up;
};

static void
nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int
write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* writev of every byte of iov[0..cnt) (the array is consumed). */
static int
writev_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t w = writev(fd, iov, cnt > IOV_MAX ? IOV_MAX : cnt);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Target -> client: read plaintext, seal, send. */
static void *
down_main(void *arg)
{
    struct conn *c = arg;
    struct ss_encoder enc;
    uint8_t *in = malloc(OUT_READ), *out = malloc(OUT_CAP);
    int ok = 0;

    if (in == NULL || out == NULL)
        goto done;
    ss_encoder_init(&enc, cipher, master, NULL, NULL, 0);
    for (;;) {
        ssize_t r = recv(c->up, in, OUT_READ, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto done;
        if (r == 0) {
            ok = 1;
            break;
        }
        struct iovec iov = {in, (size_t)r};
        size_t taken = 0;
        size_t w = ss_encoder_seal(&enc, out, OUT_CAP, &iov, 1, &taken);
        if (taken != (size_t)r || write_all(c->cli, out, w) != 0)
            goto done;
    }
done:
    if (ok) {
        shutdown(c->cli, SHUT_WR);
    } else { /* unblock the other direction */
        shutdown(c->cli, SHUT_RDWR);
        shutdown(c->up, SHUT_RDWR);
    }
    free(in);
    free(out);
    return NULL;
}

/* The address header at p[0..n): its length, 0 (more bytes needed) or -1
 * (bad); the target's host and port as strings. */
static int
parse_addr(const uint8_t *p, size_t n, char *host, size_t hostcap, char port[8])
{
    size_t alen;

    if (n < 1)
        return 0;
    switch (p[0]) {
    case 1:
        alen = 4;
        break;
    case 4:
        alen = 16;
        break;
    case 3:
        if (n < 2)
            return 0;
        alen = 1 + (size_t)p[1];
        if (p[1] == 0)
            return -1;
        break;
    default:
        return -1;
    }
    if (n < 1 + alen + 2)
        return 0;
    if (p[0] == 1 || p[0] == 4) {
        if (inet_ntop(p[0] == 1 ? AF_INET : AF_INET6, p + 1, host, (socklen_t)hostcap) == NULL)
            return -1;
    } else {
        memcpy(host, p + 2, p[1]);
        host[p[1]] = '\0';
    }
    snprintf(port, 8, "%u", (unsigned)p[1 + alen] << 8 | p[2 + alen]);
    return (int)(1 + alen + 2);
}

static int
dial(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    int fd = -1, e;

    if ((e = getaddrinfo(host, port, &hints, &res)) != 0) {
        fprintf(stderr, "ss_peer: %s: %s\n", host, gai_strerror(e));
        return -1;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        fprintf(stderr, "ss_peer: connect %s:%s: %s\n", host, port, strerror(errno));
    freeaddrinfo(res);
    return fd;
}

/* Client -> target, on the connection's own thread. */
static void *
conn_main(void *arg)
{
    struct conn *c = arg;
    struct ss_decoder dec;
    uint8_t *buf = malloc(IN_CAP), *hdr = malloc(SS_ADDR_MAX + IN_CAP);
    struct iovec *iov = malloc(MAX_IOV * sizeof(*iov));
    size_t have = 0, hlen = 0;
    int cnt = 0, ok = 0, started = 0;
    pthread_t down;

    c->up = -1;
    if (buf == NULL || hdr == NULL || iov == NULL)
        goto done;
    nodelay(c->cli);
    ss_decoder_init(&dec, cipher, master);
    for (;;) {
        ssize_t r = recv(c->cli, buf + have, IN_CAP - have, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto done;
        if (r == 0) {
            ok = have == 0 && c->up >= 0;
            break;
        }
        have += (size_t)r;
        /* Open every whole chunk in the buffer; gather the payloads. */
        size_t pos = 0, plen;
        ssize_t k;
        cnt = 0;
        while ((k = ss_decoder_next(&dec, buf + pos, have - pos, &plen)) > 0) {
            if (plen > 0) {
                if (c->up >= 0) {
                    iov[cnt].iov_base = buf + pos + SS_CHUNK_HDR;
                    iov[cnt++].iov_len = plen;
                } else { /* still collecting the address header */
                    memcpy(hdr + hlen, buf + pos + SS_CHUNK_HDR, plen);
                    hlen += plen;
                }
            }
            pos += (size_t)k;
            if (c->up < 0 && hlen > 0) {
                char host[256], port[8];
                int a = parse_addr(hdr, hlen, host, sizeof(host), port);
                if (a < 0) {
                    fprintf(stderr, "ss_peer: bad address header\n");
                    goto done;
                }
                if (a > 0) {
                    if (verbose)
                        fprintf(stderr, "ss_peer: -> %s port %s\n", host, port);
                    if ((c->up = dial(host, port)) < 0)
                        goto done;
                    nodelay(c->up);
                    if (pthread_create(&down, NULL, down_main, c) != 0)
                        goto done;
                    started = 1;
                    if (hlen > (size_t)a && write_all(c->up, hdr + a, hlen - (size_t)a) != 0)
                        goto done;
                }
            }
        }
        if (k < 0) {
            fprintf(stderr, "ss_peer: bad chunk (wrong password or cipher?)\n");
            goto done;
        }
        if (cnt > 0 && writev_all(c->up, iov, cnt) != 0)
            goto done;
        /* Keep the partial item (its length may be opened in place). */
        memmove(buf, buf + pos, have - pos);
        have -= pos;
        if (c->up < 0 && hlen > SS_ADDR_MAX)
            goto done;
    }
done:
    if (c->up >= 0) {
        if (ok) {
            shutdown(c->up, SHUT_WR);
        } else {
            shutdown(c->up, SHUT_RDWR);
            shutdown(c->cli, SHUT_RDWR);
        }
    }
    if (started)
        pthread_join(down, NULL);
    if (c->up >= 0)
        close(c->up);
    close(c->cli);
    free(buf);
    free(hdr);
    free(iov);
    free(c);
    return NULL;
}

/* EVP_BytesToKey(MD5, no salt, one round): D1 = MD5(pw), Di = MD5(Di-1 || pw). */
static void
derive_master(const char *pw, size_t keylen)
{
    size_t plen = strlen(pw), have = 0;
    uint8_t *tmp = malloc(16 + plen), d[16];

    if (tmp == NULL)
        exit(1);
    while (have < keylen) {
        size_t n = 0;
        if (have > 0) {
            memcpy(tmp, d, 16);
            n = 16;
        }
        memcpy(tmp + n, pw, plen);
        tls_md5(tmp, n + plen, d);
        size_t k = keylen - have < 16 ? keylen - have : 16;
        memcpy(master + have, d, k);
        have += k;
    }
    free(tmp);
}

static void
usage(void)
{
    fprintf(stderr, "usage: ss_peer -p PORT -k PASSWORD -m aes-128-gcm|aes-256-gcm|"
                    "chacha20-ietf-poly1305 [-b BIND] [-v]\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    const char *port = NULL, *pw = NULL, *method = NULL, *bind_to = NULL;
    int opt;

    while ((opt = getopt(argc, argv, "p:k:m:b:vh")) != -1) {
        switch (opt) {
        case 'p':
            port = optarg;
            break;
        case 'k':
            pw = optarg;
            break;
        case 'm':
            method = optarg;
            break;
        case 'b':
            bind_to = optarg;
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            usage();
        }
    }
    if (port == NULL || pw == NULL || method == NULL || optind != argc)
        usage();
    if (strcmp(method, "aes-128-gcm") == 0)
        cipher = OUTBOUND_SS_AES_128_GCM;
    else if (strcmp(method, "aes-256-gcm") == 0)
        cipher = OUTBOUND_SS_AES_256_GCM;
    else if (strcmp(method, "chacha20-ietf-poly1305") == 0 || strcmp(method, "chacha20-poly1305") == 0)
        cipher = OUTBOUND_SS_CHACHA20_POLY1305;
    else
        usage();
    derive_master(pw, ss_key_len(cipher));
    signal(SIGPIPE, SIG_IGN);

    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res, *ai;
    int e, lfd = -1, one = 1;
    if ((e = getaddrinfo(bind_to, port, &hints, &res)) != 0) {
        fprintf(stderr, "ss_peer: %s: %s\n", bind_to ? bind_to : "*", gai_strerror(e));
        return 1;
    }
    /* Without -b: the IPv6 wildcard (dual-stack) when there is one. */
    for (ai = res; bind_to == NULL && ai != NULL && ai->ai_family != AF_INET6; ai = ai->ai_next)
        ;
    if (ai == NULL)
        ai = res;
    for (; ai != NULL; ai = ai->ai_next) {
        lfd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (lfd < 0)
            continue;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ai->ai_family == AF_INET6) {
            int zero = 0;
            setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        }
        if (bind(lfd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(lfd, 128) == 0)
            break;
        close(lfd);
        lfd = -1;
    }
    freeaddrinfo(res);
    if (lfd < 0) {
        fprintf(stderr, "ss_peer: cannot listen on %s port %s: %s\n", bind_to ? bind_to : "*", port,
                strerror(errno));
        return 1;
    }
    fprintf(stderr, "ss_peer: %s on %s port %s (%s)\n", method, bind_to ? bind_to : "*", port,
            tls_aead_impl(ss_alg(cipher)));

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
                continue;
            perror("ss_peer: accept");
            return 1;
        }
        struct conn *c = malloc(sizeof(*c));
        pthread_t t;
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->cli = fd;
        c->up = -1;
        if (pthread_create(&t, &attr, conn_main, c) != 0) {
            close(fd);
            free(c);
        }
    }
}
