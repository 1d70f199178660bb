#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"

#define WORKERS 4

struct dns_query {
    struct dns_query *next;
    dns_resolve_cb cb;
    void *arg;
    int cancelled; /* loop thread only */
    const char *err;
    size_t n;
    struct sockaddr_storage addrs[DNS_MAX_ADDRS];
    char name[256];
};

struct dns_resolver {
    struct ev_loop *loop;
    ev_async done_async;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct dns_query *todo, **todo_tail;
    struct dns_query *done;
    int quit;
    pthread_t threads[WORKERS];
    int nthreads;
};

static void
resolve(struct dns_query *q)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(q->name, NULL, &hints, &res);
    if (rc != 0) {
        q->err = rc == EAI_NONAME ? "name not found" : "resolver failure";
        return;
    }
    /* Interleave families, v6 first (RFC 8305 §4). */
    struct sockaddr_storage v4[DNS_MAX_ADDRS], v6[DNS_MAX_ADDRS];
    size_t n4 = 0, n6 = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET && n4 < DNS_MAX_ADDRS)
            memcpy(&v4[n4++], ai->ai_addr, sizeof(struct sockaddr_in));
        else if (ai->ai_family == AF_INET6 && n6 < DNS_MAX_ADDRS)
            memcpy(&v6[n6++], ai->ai_addr, sizeof(struct sockaddr_in6));
    }
    freeaddrinfo(res);
    size_t i4 = 0, i6 = 0;
    while (q->n < DNS_MAX_ADDRS && (i4 < n4 || i6 < n6)) {
        if (i6 < n6)
            q->addrs[q->n++] = v6[i6++];
        if (i4 < n4 && q->n < DNS_MAX_ADDRS)
            q->addrs[q->n++] = v4[i4++];
    }
    if (q->n == 0)
        q->err = "name has no address";
}

static void *
worker(void *p)
{
    struct dns_resolver *r = p;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (r->todo == NULL && !r->quit)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->quit)
            break;
        struct dns_query *q = r->todo;
        r->todo = q->next;
        if (r->todo == NULL)
            r->todo_tail = &r->todo;
        pthread_mutex_unlock(&r->mu);
        resolve(q);
        pthread_mutex_lock(&r->mu);
        q->next = r->done;
        r->done = q;
        ev_async_send(r->loop, &r->done_async);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void
on_done(struct ev_loop *loop, ev_async *w, int revents)
{
    struct dns_resolver *r = (struct dns_resolver *)((char *)w - offsetof(struct dns_resolver, done_async));
    pthread_mutex_lock(&r->mu);
    struct dns_query *list = r->done;
    r->done = NULL;
    pthread_mutex_unlock(&r->mu);
    while (list != NULL) {
        struct dns_query *q = list;
        list = q->next;
        if (!q->cancelled)
            q->cb(q->arg, q->err, q->addrs, q->n);
        free(q);
    }
}

/* Interim: the getaddrinfo workers stand behind the new interface until the
 * non-blocking client replaces this file. */
void
dns_resolver_opts_default(struct dns_resolver_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->timeout = 2.0;
    o->attempts = 2;
    o->cache_entries = 4096;
}

int
dns_resolver_configure(struct dns_resolver *r, const struct dns_resolver_opts *o, char *err,
                       size_t errlen)
{
    (void)r, (void)o, (void)err, (void)errlen;
    return 0;
}

struct dns_query *
dns_forward(struct dns_resolver *r, const uint8_t *q, size_t len, dns_forward_cb cb, void *arg)
{
    (void)r, (void)q, (void)len, (void)cb, (void)arg;
    return NULL;
}

const char *
dns_resolver_name_of(struct dns_resolver *r, const uint8_t *ip, int version)
{
    (void)r, (void)ip, (void)version;
    return NULL;
}

void
dns_resolver_stats(const struct dns_resolver *r, struct dns_resolver_stats *out)
{
    (void)r;
    memset(out, 0, sizeof(*out));
}

struct dns_resolver *
dns_resolver_new(struct ev_loop *loop, const struct dns_resolver_opts *o, char *err, size_t errlen)
{
    (void)o, (void)err, (void)errlen;
    struct dns_resolver *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->loop = loop;
    r->todo_tail = &r->todo;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    ev_async_init(&r->done_async, on_done);
    ev_async_start(loop, &r->done_async);
    ev_unref(loop); /* an idle resolver must not keep the loop alive */
    return r;
}

static void
free_list(struct dns_query *q)
{
    while (q != NULL) {
        struct dns_query *next = q->next;
        free(q);
        q = next;
    }
}

void
dns_resolver_free(struct dns_resolver *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->quit = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < r->nthreads; i++)
        pthread_join(r->threads[i], NULL);
    ev_ref(r->loop);
    ev_async_stop(r->loop, &r->done_async);
    free_list(r->todo);
    free_list(r->done);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

struct dns_query *
dns_resolve(struct dns_resolver *r, const char *name, dns_resolve_cb cb, void *arg)
{
    struct dns_query *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return NULL;
    q->cb = cb;
    q->arg = arg;
    strncpy(q->name, name, sizeof(q->name) - 1);
    pthread_mutex_lock(&r->mu);
    /* Threads start on first use: a bundle that never resolves pays nothing. */
    if (r->nthreads < WORKERS && r->todo != NULL) {
        if (pthread_create(&r->threads[r->nthreads], NULL, worker, r) == 0)
            r->nthreads++;
    }
    if (r->nthreads == 0 && pthread_create(&r->threads[0], NULL, worker, r) == 0)
        r->nthreads = 1;
    *r->todo_tail = q;
    r->todo_tail = &q->next;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return q;
}

void
dns_query_cancel(struct dns_query *q)
{
    q->cancelled = 1;
}
