#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch/fetch.h"
#include "log/log.h"
#include "outbound/outbound.h"

/* The bundle's remote items on the loop: a timer each, one GET at a time
 * per item, and one worker thread at a time that checks a fetched body
 * (the caller's validate: parsing a list of 100k lines takes longer than
 * a loop turn may) and writes the cache. The loop only swaps pointers and
 * reads files' metadata. */

#define BACKOFF_FIRST 5.0
#define BACKOFF_MAX 900.0

struct item {
    struct fetch_item_cfg cfg;
    struct fetch_set *fs;
    ev_timer due;
    struct fetch_get *get;
    int checking;          /* a job of it is queued or running */
    char etag[256], lm[64];
    unsigned failures;
    int report;            /* fetch_set_update_all: report this fetch */
};

struct job {
    struct job *next;
    struct fetch_item_cfg cfg;
    char *body;
    size_t len;
    char etag[256], lm[64];
    int ok, report;
    char note[400];
};

struct fetch_set {
    const struct outbound_env *env;
    struct fetch_hooks h;
    struct item **items;
    size_t n;
    struct job *queue, **tail; /* waiting for the worker */
    struct job *running;
    pthread_t worker;
    ev_async done;
    size_t busy;
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static const char *
what(const struct fetch_item_cfg *c)
{
    return c->kind == FETCH_RULESET ? "ruleset" : c->kind == FETCH_GEO ? "geo file" : "provider";
}

static void
report(struct fetch_set *fs, const struct fetch_item_cfg *c, int on, enum fetch_outcome o,
       const char *why)
{
    if (on && fs->h.report != NULL)
        fs->h.report(fs->h.ud, c, o, why);
}

static struct item *
find(struct fetch_set *fs, const struct fetch_item_cfg *c)
{
    for (size_t i = 0; i < fs->n; i++)
        if (strcmp(fs->items[i]->cfg.path, c->path) == 0 &&
            strcmp(fs->items[i]->cfg.url, c->url) == 0)
            return fs->items[i];
    return NULL;
}

static void
arm(struct item *it, double after)
{
    struct ev_loop *loop = it->fs->env->loop;
    ev_timer_stop(loop, &it->due);
    ev_timer_set(&it->due, after > 0 ? after : 0, 0);
    ev_timer_start(loop, &it->due);
}

static double
backoff(const struct item *it)
{
    double d = BACKOFF_FIRST;
    for (unsigned i = 1; i < it->failures && d < BACKOFF_MAX; i++)
        d *= 2;
    if (d > it->cfg.interval)
        d = it->cfg.interval;
    return d > BACKOFF_MAX ? BACKOFF_MAX : d;
}

static void
failed(struct item *it, const char *why)
{
    char shown[300];
    fetch_url_shown(it->cfg.url, shown, sizeof(shown));
    it->failures++;
    double retry = backoff(it);
    LOG_WARN("%s %s: fetching %s failed: %s; keeping the %s it has; retry in %.0f s", what(&it->cfg),
             it->cfg.name, shown, why,
             it->cfg.kind == FETCH_RULESET ? "list" : it->cfg.kind == FETCH_GEO ? "file" : "proxies",
             retry);
    report(it->fs, &it->cfg, it->report, FETCH_FAILED, why);
    it->report = 0;
    arm(it, retry);
}

/* ---- the worker ----------------------------------------------------------- */

static void *
work(void *arg)
{
    struct fetch_set *fs = arg;
    struct job *j = fs->running;
    char err[400];
    j->ok = fs->h.validate(fs->h.ud, &j->cfg, j->body, j->len, j->note, sizeof(j->note)) == 0;
    if (j->ok && fetch_cache_write(j->cfg.path, j->body, j->len, j->etag, j->lm, err,
                                   sizeof(err)) != 0) {
        j->ok = 0;
        snprintf(j->note, sizeof(j->note), "writing the cache: %.370s", err);
    }
    ev_async_send(fs->env->loop, &fs->done);
    return NULL;
}

static void
next_job(struct fetch_set *fs)
{
    if (fs->running != NULL || fs->queue == NULL)
        return;
    struct job *j = fs->queue;
    fs->queue = j->next;
    if (fs->queue == NULL)
        fs->tail = &fs->queue;
    fs->running = j;
    if (pthread_create(&fs->worker, NULL, work, fs) != 0) {
        work(fs); /* no thread: check it here, once */
        fs->worker = pthread_self();
    }
}

static void
on_done(struct ev_loop *loop, ev_async *w, int revents)
{
    struct fetch_set *fs = CONTAINER(w, struct fetch_set, done);
    struct job *j = fs->running;
    if (j == NULL)
        return;
    if (!pthread_equal(fs->worker, pthread_self()))
        pthread_join(fs->worker, NULL);
    fs->running = NULL;
    fs->busy--;
    struct item *it = find(fs, &j->cfg);
    if (it != NULL) {
        it->checking = 0;
        if (j->ok) {
            snprintf(it->etag, sizeof(it->etag), "%s", j->etag);
            snprintf(it->lm, sizeof(it->lm), "%s", j->lm);
            it->failures = 0;
            LOG_INFO("%s %s: fetched %zu bytes%s%s; cache %s", what(&j->cfg), j->cfg.name, j->len,
                     j->note[0] ? ", " : "", j->note, j->cfg.path);
            arm(it, it->cfg.interval);
        } else {
            it->report = j->report;
            char why[480];
            snprintf(why, sizeof(why), "%s", j->note[0] ? j->note : "the body was refused");
            failed(it, why);
        }
    }
    if (j->ok) {
        report(fs, &j->cfg, j->report, FETCH_FETCHED, j->note);
        fs->h.updated(fs->h.ud, &j->cfg);
    }
    free(j->body);
    free(j);
    next_job(fs);
}

/* ---- fetching ------------------------------------------------------------- */

static void
on_got(void *arg, struct fetch_resp *r)
{
    struct item *it = arg;
    struct fetch_set *fs = it->fs;
    it->get = NULL;
    if (r->status == 0) {
        fs->busy--;
        failed(it, r->why);
        return;
    }
    if (r->status == 304) {
        fs->busy--;
        it->failures = 0;
        fetch_cache_touch(it->cfg.path);
        LOG_INFO("%s %s: not modified (304); next check in %.0f s", what(&it->cfg), it->cfg.name,
                 it->cfg.interval);
        report(fs, &it->cfg, it->report, FETCH_NOT_MODIFIED, NULL);
        it->report = 0;
        arm(it, it->cfg.interval);
        return;
    }
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        free(r->body);
        fs->busy--;
        failed(it, "out of memory");
        return;
    }
    j->cfg = it->cfg;
    j->body = r->body;
    j->len = r->len;
    j->report = it->report;
    it->report = 0;
    snprintf(j->etag, sizeof(j->etag), "%s", r->etag);
    snprintf(j->lm, sizeof(j->lm), "%s", r->last_modified);
    it->checking = 1;
    *fs->tail = j;
    fs->tail = &j->next;
    next_job(fs); /* busy stays counted until the check is done */
}

static void
start(struct item *it)
{
    struct fetch_set *fs = it->fs;
    if (it->get != NULL || it->checking)
        return;
    char err[200];
    struct fetch_url u;
    int policy = fs->h.policy(fs->h.ud, it->cfg.via);
    fs->busy++;
    if (fetch_url_parse(it->cfg.url, &u, err, sizeof(err)) != 0) {
        fs->busy--;
        failed(it, err);
        return;
    }
    if (policy < 0) {
        snprintf(err, sizeof(err), "via '%.64s' is not a policy of the bundle", it->cfg.via);
        fs->busy--;
        failed(it, err);
        return;
    }
    struct fetch_get_opts o = {.policy = policy, .max_bytes = it->cfg.max_bytes,
                               .timeout = FETCH_TIMEOUT, .etag = it->etag,
                               .last_modified = it->lm};
    it->get = fetch_get_start(fs->env, &u, &o, on_got, it);
    if (it->get == NULL) {
        fs->busy--;
        failed(it, "out of memory");
    }
}

static void
on_due(struct ev_loop *loop, ev_timer *w, int revents)
{
    start(CONTAINER(w, struct item, due));
}

/* ---- the set -------------------------------------------------------------- */

struct fetch_set *
fetch_set_new(const struct outbound_env *env, const struct fetch_hooks *h)
{
    struct fetch_set *fs = calloc(1, sizeof(*fs));
    if (fs == NULL)
        return NULL;
    fs->env = env;
    fs->h = *h;
    fs->tail = &fs->queue;
    ev_async_init(&fs->done, on_done);
    ev_async_start(env->loop, &fs->done); /* keeps a loop waiting while a check runs */
    return fs;
}

static void
item_free(struct item *it)
{
    struct fetch_set *fs = it->fs;
    ev_timer_stop(fs->env->loop, &it->due);
    if (it->get != NULL) {
        fetch_get_cancel(it->get);
        fs->busy--;
    }
    free(it);
}

int
fetch_set_sync(struct fetch_set *fs, const struct fetch_item_cfg *items, size_t n)
{
    struct item **next = calloc(n ? n : 1, sizeof(*next));
    if (next == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        struct item *old = find(fs, &items[i]);
        if (old != NULL) {
            /* Kept: a new interval or via applies from its next fetch. */
            old->cfg = items[i];
            next[i] = old;
            continue;
        }
        struct item *it = calloc(1, sizeof(*it));
        if (it == NULL) {
            for (size_t k = 0; k < i; k++)
                if (find(fs, &next[k]->cfg) != next[k])
                    free(next[k]);
            free(next);
            return -1;
        }
        it->cfg = items[i];
        it->fs = fs;
        ev_init(&it->due, on_due);
        next[i] = it;
    }
    /* The items the new list does not have stop. */
    for (size_t i = 0; i < fs->n; i++) {
        size_t k;
        for (k = 0; k < n && next[k] != fs->items[i]; k++)
            ;
        if (k == n)
            item_free(fs->items[i]);
    }
    free(fs->items);
    fs->items = next;
    fs->n = n;
    for (size_t i = 0; i < n; i++) {
        struct item *it = next[i];
        if (ev_is_active(&it->due) || it->get != NULL || it->checking)
            continue;
        double age = fetch_cache_meta(it->cfg.path, it->etag, sizeof(it->etag), it->lm,
                                      sizeof(it->lm));
        arm(it, age < 0 ? 0 : it->cfg.interval - age);
    }
    return 0;
}

void
fetch_set_update_all(struct fetch_set *fs)
{
    for (size_t i = 0; i < fs->n; i++) {
        struct item *it = fs->items[i];
        ev_timer_stop(fs->env->loop, &it->due);
        it->report = 1;
        start(it);
    }
}

int
fetch_set_refresh(struct fetch_set *fs, enum fetch_kind kind, const char *name)
{
    for (size_t i = 0; i < fs->n; i++) {
        struct item *it = fs->items[i];
        if (it->cfg.kind != kind || strcmp(it->cfg.name, name) != 0)
            continue;
        if (it->get != NULL || it->checking)
            return 1;
        ev_timer_stop(fs->env->loop, &it->due);
        start(it);
        return 0;
    }
    return -1;
}

size_t
fetch_set_busy(const struct fetch_set *fs)
{
    return fs->busy;
}

void
fetch_set_free(struct fetch_set *fs)
{
    if (fs == NULL)
        return;
    if (fs->running != NULL && !pthread_equal(fs->worker, pthread_self()))
        pthread_join(fs->worker, NULL);
    if (fs->running != NULL) {
        free(fs->running->body);
        free(fs->running);
    }
    for (struct job *j = fs->queue, *nx; j != NULL; j = nx) {
        nx = j->next;
        free(j->body);
        free(j);
    }
    for (size_t i = 0; i < fs->n; i++)
        item_free(fs->items[i]);
    free(fs->items);
    ev_async_stop(fs->env->loop, &fs->done);
    free(fs);
}
