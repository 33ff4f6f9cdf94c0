/* The key of a program that reads headers, on compile-or-load's path.
 *
 * progcache_key_nvrtc_files reads and hashes every header on each call;
 * a cache hit must not (docs/CUDA.md, rule 3). So, as ccache's direct
 * mode does, the header list of the last compile is kept in the cache, as
 * an entry of its own under a key derived from everything but the header
 * files (progcache__manifest_key): a lookup stats each header it lists and
 * takes its recorded digest when the stat is unchanged. Any doubt (a stat
 * that differs, a header too new to trust its stat, a directory where a
 * header was looked for and not found that changed, another toolkit)
 * reads the header again, or scans everything again: the manifest only
 * ever saves work, it never decides a key on its own. */
#include "program/program_key.h"

#include <string.h>

#include "buf.h"
#include "cache/cache_stats.h"
#include "error.h"
#include "headers/header_manifest.h"
#include "headers/headers_digest.h"
#include "key/key_options.h"

void progcache__program_key_free(progcache__program_key *pk)
{
    if (!pk)
        return;
    progcache__header_scan_free(&pk->scan);
    memset(pk, 0, sizeof *pk);
}

/* The manifest of o in the cache, checked against the files. 1 when it
 * gave the key. Any failure here is a reason to scan, not an error. */
static int from_manifest(unsigned char out[32], progcache__program_key *pk, progcache *cache,
                         const progcache_key_nvrtc_options *o)
{
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    int got = 0;
    progcache__manifest_state state;
    if (progcache__cache_get_quiet(&bytes, NULL, cache, pk->manifest_key,
                                   sizeof pk->manifest_key) == PROGCACHE_OK &&
        progcache__manifest_decode(&pk->scan, bytes.data, bytes.size) == PROGCACHE_OK &&
        progcache__manifest_check(&pk->scan, &state) == PROGCACHE_OK &&
        state != PROGCACHE__MANIFEST_STALE &&
        progcache__key_from_scan(out, o, &pk->scan) == PROGCACHE_OK) {
        pk->write_manifest = state == PROGCACHE__MANIFEST_REFRESHED;
        got = 1;
    }
    progcache_buf_free(&bytes);
    progcache__error_restore(&saved);
    if (!got)
        progcache__header_scan_free(&pk->scan);
    return got;
}

PROGCACHE_HOT
int progcache__program_key_derive(unsigned char out[32], progcache__program_key *pk,
                                  progcache *cache, const progcache_key_nvrtc_options *o)
{
    /* The caller's digest is the explicit override: nothing is read. */
    if (o->extra_digest)
        return progcache_key_nvrtc(out, o);
    int reads = progcache__may_include(o);
    for (size_t i = 0; !reads && i < o->num_options; i++)
        reads = progcache__option_reads_headers(o->options[i]);
    if (!reads) {
        /* No include anywhere: cuda.core's key (with the headers in
         * memory, if any). Refusals as progcache_key_nvrtc_files's. */
        int rc = progcache__key_check_options_scanned(o->options, o->num_options);
        return rc ? rc : progcache__key_from_scan(out, o, NULL);
    }
    pk->reads = 1;
    int rc = progcache__key_check_options_scanned(o->options, o->num_options);
    if (rc)
        return rc;
    if (cache) {
        if ((rc = progcache__manifest_key(pk->manifest_key, o)))
            return rc;
        pk->have_manifest = 1;
        if (from_manifest(out, pk, cache, o))
            return PROGCACHE_OK;
    }
    rc = progcache__key_scan(out, o, &pk->scan);
    pk->write_manifest = !rc && cache != NULL;
    return rc;
}

int progcache__program_key_unchanged(const progcache__program_key *pk)
{
    const progcache__header_scan *s = &pk->scan;
    for (size_t i = 0; pk->reads && i < s->num_files; i++) {
        const progcache__header_file *f = &s->files[i];
        progcache__file_stat st;
        unsigned char sha[32];
        int same = progcache__file_stat_of(&st, f->path) == 0 &&
                   progcache__file_stat_same(&st, &f->st);
        /* Too new to trust its stat: its bytes decide. */
        if (same && f->too_new)
            same = progcache__header_read(f->path, &st, sha, NULL, NULL) == PROGCACHE_OK &&
                   !memcmp(sha, f->sha256, sizeof sha);
        if (!same)
            return progcache__error(PROGCACHE_EUNSAFEKEY,
                                    "header \"%s\" changed while the program was being "
                                    "compiled, so the artifact may not match its key: not "
                                    "stored (the next call compiles again)",
                                    f->path);
    }
    for (size_t i = 0; pk->reads && i < s->num_dirs; i++) {
        progcache__file_stat st;
        if (progcache__file_stat_of(&st, s->dirs[i].path) != 0 ||
            !progcache__file_stat_same(&st, &s->dirs[i].st))
            return progcache__error(PROGCACHE_EUNSAFEKEY,
                                    "directory \"%s\", where a header was looked for, changed "
                                    "while the program was being compiled, so the artifact may "
                                    "not match its key: not stored (the next call compiles "
                                    "again)",
                                    s->dirs[i].path);
    }
    return PROGCACHE_OK;
}

void progcache__program_key_store(progcache__program_key *pk, progcache *cache,
                                  progcache_log_fn log, void *log_ctx)
{
    if (!cache || !pk->have_manifest || !pk->write_manifest)
        return;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    int rc = progcache__manifest_encode(&bytes, &pk->scan);
    if (!rc)
        rc = progcache__cache_put_meta(cache, pk->manifest_key, sizeof pk->manifest_key,
                                       bytes.data, bytes.size, NULL);
    if (rc)
        progcache__log(log, log_ctx, PROGCACHE_LOG_WARN,
                       "progcache: could not store the header manifest (the next lookup reads "
                       "the headers again): %s",
                       progcache_error_last());
    else
        pk->write_manifest = 0;
    progcache_buf_free(&bytes);
    progcache__error_restore(&saved);
}
