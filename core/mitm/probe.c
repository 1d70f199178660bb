#include <stdio.h>
#include <strings.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/mitm_int.h"

/* The first handshake to an origin tells whether it speaks h2, and so
 * whether later flows need an upstream handshake of their own at all. While
 * one flow's handshake to an origin runs, flows to the same origin (and
 * policy) that arrive meanwhile wait for its outcome instead of starting
 * theirs: a burst of 100 new clients costs one upstream handshake to an h2
 * origin, not 100. Each waiter keeps its own connection to the origin, so
 * an h1 origin (or a failed probe) costs them no extra connect; an origin
 * found to speak only HTTP/1.1 is remembered for MITM_H1_KNOWN_SECS, so
 * flows to it do not wait at all. */

static int
same_key(const struct mitm_sess *a, const struct mitm_sess *b)
{
    return a->port == b->port && a->f->policy == b->f->policy &&
           a->f->policy_name == b->f->policy_name && strcasecmp(a->host, b->host) == 0;
}

static struct mitm_h1_known *
known_h1(struct mitm *m, const char *host, uint16_t port)
{
    double now = io_mono_now();
    for (size_t i = 0; i < MITM_H1_KNOWN; i++) {
        struct mitm_h1_known *k = &m->h1known[i];
        if (k->until > now && k->port == port && strcasecmp(k->host, host) == 0)
            return k;
    }
    return NULL;
}

int
mitm_h1_known(struct mitm *m, const char *host, uint16_t port)
{
    return known_h1(m, host, port) != NULL;
}

void
mitm_h1_known_add(struct mitm *m, const char *host, uint16_t port)
{
    if (known_h1(m, host, port) != NULL)
        return;
    struct mitm_h1_known *k = &m->h1known[m->h1known_next++ % MITM_H1_KNOWN];
    snprintf(k->host, sizeof(k->host), "%s", host);
    k->port = port;
    k->until = io_mono_now() + MITM_H1_KNOWN_SECS;
}

int
mitm_probe_wait(struct mitm_sess *s, struct io_stream *raw)
{
    struct mitm *m = s->m;
    if (known_h1(m, s->host, s->port) != NULL)
        return 0; /* each flow needs its own connection anyway */
    for (struct mitm_sess *p = m->probes; p != NULL; p = p->probe_next) {
        if (!same_key(p, s))
            continue;
        s->raw_up = raw;
        s->probe_next = m->waiters;
        m->waiters = s;
        s->probe_state = MITM_PROBE_WAITING;
        LOG_DEBUG("mitm: flow %llu to %s:%u waits for another flow's handshake",
                  (unsigned long long)s->f->id, s->host, s->port);
        return 1;
    }
    s->probe_next = m->probes;
    m->probes = s;
    s->probe_state = MITM_PROBE_PROBING;
    return 0;
}

static void
unlink_from(struct mitm_sess **head, struct mitm_sess *s)
{
    for (struct mitm_sess **pp = head; *pp != NULL; pp = &(*pp)->probe_next)
        if (*pp == s) {
            *pp = s->probe_next;
            break;
        }
    s->probe_next = NULL;
}

void
mitm_probe_done(struct mitm_sess *s, int h1)
{
    struct mitm *m = s->m;
    if (s->probe_state != MITM_PROBE_PROBING)
        return;
    if (h1)
        mitm_h1_known_add(m, s->host, s->port);
    unlink_from(&m->probes, s);
    s->probe_state = MITM_PROBE_NONE;
    /* The waiters of this origin leave the list first: telling one starts
     * nothing synchronous that could free another. */
    struct mitm_sess *ready = NULL, **pp = &m->waiters;
    while (*pp != NULL) {
        struct mitm_sess *w = *pp;
        if (!same_key(w, s)) {
            pp = &w->probe_next;
            continue;
        }
        *pp = w->probe_next;
        w->probe_next = ready;
        ready = w;
    }
    while (ready != NULL) {
        struct mitm_sess *w = ready;
        ready = w->probe_next;
        w->probe_next = NULL;
        w->probe_state = MITM_PROBE_NONE;
        struct io_stream *raw = w->raw_up;
        w->raw_up = NULL;
        mitm_sess_probed(w, raw);
    }
}

void
mitm_probe_forget(struct mitm_sess *s)
{
    if (s->probe_state == MITM_PROBE_PROBING) {
        mitm_probe_done(s, 0);
    } else if (s->probe_state == MITM_PROBE_WAITING) {
        unlink_from(&s->m->waiters, s);
        s->probe_state = MITM_PROBE_NONE;
        if (s->raw_up != NULL)
            io_close(s->raw_up, 1);
        s->raw_up = NULL;
    }
}
