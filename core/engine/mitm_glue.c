#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "log/log.h"
#include "mitm/mitm.h"
#include "mitm/rewrite.h"
#include "script/script.h"
#include "tls/tls.h"

/* The bundle's mitm = {...} and its modules' [MITM] lines, applied to the
 * engine's MITM: the host lists, the CA (the bundle's, or chute's own in
 * its state folder, made on first use) and its leaf cache, the hook sets.
 * The objects of the previous bundle are freed only after the MITM took
 * the new ones; the leaf cache survives a reload that keeps the CA. */

static int
hosts_add_all(struct mitm_hosts *h, char *const *v, size_t n, const char *what, char *err,
              size_t errlen)
{
    char why[160];
    for (size_t i = 0; i < n; i++)
        if (mitm_hosts_add(h, v[i], strlen(v[i]), why, sizeof(why)) != 0) {
            snprintf(err, errlen, "%s: \"%s\": %s", what, v[i], why);
            return -1;
        }
    return 0;
}

/* The CA: the bundle's files, or the state folder's (made when missing). */
static struct tls_ca *
load_ca(const struct script_mitm *mc, const char *bundle_dir, char *cert, size_t certlen,
        char *err, size_t errlen)
{
    char key[4096];
    if (mc->ca != NULL) {
        if (mc->ca[0] != '/' && bundle_dir != NULL)
            snprintf(cert, certlen, "%s/%s", bundle_dir, mc->ca);
        else
            snprintf(cert, certlen, "%s", mc->ca);
        if (mc->ca_key != NULL && mc->ca_key[0] != '/' && bundle_dir != NULL)
            snprintf(key, sizeof(key), "%s/%s", bundle_dir, mc->ca_key);
        else if (mc->ca_key != NULL)
            snprintf(key, sizeof(key), "%s", mc->ca_key);
        else {
            /* ca.pem beside ca.key, the layout `chute ca init` writes */
            snprintf(key, sizeof(key), "%s", cert);
            char *dot = strrchr(key, '.');
            if (dot != NULL && strchr(dot, '/') == NULL)
                *dot = '\0';
            strncat(key, ".key", sizeof(key) - strlen(key) - 1);
        }
        return tls_ca_load(cert, key, err, errlen);
    }
    if (engine_ca_paths(cert, certlen, key, sizeof(key)) != 0) {
        snprintf(err, errlen, "mitm: no state folder for chute's CA (set CHUTE_STATE_DIR or "
                              "HOME, or give mitm.ca)");
        return NULL;
    }
    struct stat st;
    if (stat(cert, &st) != 0 && errno == ENOENT) {
        if (tls_ca_create(cert, key, err, errlen) != 0)
            return NULL;
        LOG_INFO("mitm: made chute's CA at %s; clients must trust it: `chute ca export`", cert);
    }
    return tls_ca_load(cert, key, err, errlen);
}

int
engine_mitm_prepare(struct engine *e, struct script *s, struct engine_mitm *n, char *err,
                    size_t errlen)
{
    const struct script_config *cfg = script_config(s);
    const struct script_mitm *mc = &cfg->mitm;
    struct mitm_rewrites *rw = script_rewrites(s);
    const char *const *modhosts = NULL;
    size_t nmod = rw != NULL ? mitm_rewrites_hostnames(rw, &modhosts) : 0;
    const struct mitm_hooks *lua = script_mitm_hooks(s);

    memset(n, 0, sizeof(*n));
    if (!mc->enabled && nmod == 0 && lua == NULL && rw == NULL)
        return 0; /* no MITM in this bundle */
    n->on = 1;
    if ((n->hosts = mitm_hosts_new()) == NULL || (n->skip = mitm_hosts_new()) == NULL)
        goto oom;
    if (hosts_add_all(n->hosts, mc->hosts, mc->nhosts, "mitm.hosts", err, errlen) != 0 ||
        hosts_add_all(n->hosts, (char *const *)modhosts, nmod, "[MITM] hostname", err,
                      errlen) != 0 ||
        hosts_add_all(n->skip, mc->skip_verify, mc->nskip, "mitm.skip_verify_hosts", err,
                      errlen) != 0)
        goto fail;
    char cert[4096];
    if (e->mitm_cur.ca != NULL && mc->ca == NULL && e->mitm_cur.state_ca) {
        n->reuse_ca = 1; /* the same CA as before: its leaves stay cached */
    } else {
        if ((n->ca = load_ca(mc, e->bundle_dir, cert, sizeof(cert), err, errlen)) == NULL)
            goto fail;
        if ((n->mint = tls_mint_new(n->ca, 0, err, errlen)) == NULL)
            goto fail;
        if ((n->ca_path = strdup(cert)) == NULL)
            goto oom;
        n->state_ca = mc->ca == NULL;
    }
    if (e->out.tls == NULL) {
        char terr[256];
        if ((e->out.tls = tls_ctx_new(NULL, terr, sizeof(terr))) == NULL) {
            snprintf(err, errlen, "mitm: %s", terr);
            goto fail;
        }
    }
    if (e->mitm == NULL && (e->mitm = mitm_new(&e->fenv)) == NULL)
        goto oom;
    if (rw != NULL)
        n->hooks[n->nhooks++] = mitm_rewrites_hooks(rw);
    if (lua != NULL)
        n->hooks[n->nhooks++] = lua;
    n->auto_bypass = mc->auto_bypass;
    n->bypass_seconds = mc->bypass_seconds;
    n->block_quic = mc->block_quic;
    n->max_buffered = mc->max_buffered;
    for (size_t i = 0; i < mc->nskip; i++)
        LOG_WARN("mitm: certificate checks are off for origins matching \"%s\" "
                 "(mitm.skip_verify_hosts)",
                 mc->skip_verify[i]);
    return 0;
oom:
    snprintf(err, errlen, "mitm: out of memory");
fail:
    engine_mitm_release(n);
    return -1;
}

void
engine_mitm_commit(struct engine *e, struct engine_mitm *n)
{
    if (n->reuse_ca) {
        n->ca = e->mitm_cur.ca;
        n->mint = e->mitm_cur.mint;
        n->ca_path = e->mitm_cur.ca_path;
        n->state_ca = 1;
        e->mitm_cur.ca = NULL;
        e->mitm_cur.mint = NULL;
        e->mitm_cur.ca_path = NULL;
        n->reuse_ca = 0;
    }
    struct engine_mitm old = e->mitm_cur;
    e->mitm_cur = *n;
    memset(n, 0, sizeof(*n));
    struct engine_mitm *c = &e->mitm_cur;
    if (e->mitm != NULL) {
        struct mitm_opts o = {0};
        if (c->on)
            o = (struct mitm_opts){
                .hosts = c->hosts,
                .skip_verify = c->skip,
                .mint = c->mint,
                .trust = e->out.tls,
                .hooks = c->hooks,
                .nhooks = c->nhooks,
                .auto_bypass = c->auto_bypass,
                .bypass_seconds = c->bypass_seconds,
                .block_quic = c->block_quic,
                .h2_max_buffered = c->max_buffered,
            };
        mitm_configure(e->mitm, &o);
    }
    e->fenv.intercept = c->on && e->mitm != NULL ? mitm_intercept(e->mitm) : NULL;
    if (c->on)
        LOG_INFO("mitm: %zu host patterns, CA %s, %zu hook sets", mitm_hosts_count(c->hosts),
                 c->ca_path, c->nhooks);
    engine_mitm_release(&old);
}

void
engine_mitm_release(struct engine_mitm *m)
{
    mitm_hosts_free(m->hosts);
    mitm_hosts_free(m->skip);
    tls_mint_free(m->mint);
    tls_ca_free(m->ca);
    free(m->ca_path);
    memset(m, 0, sizeof(*m));
}
