/* The PCH tier's plain compile and its judgement of what a helper made
 * (pch_tier.h, "the decisions"): below pch_compile.c, pch_detach.c and
 * pch_inproc.c, which all use them, so that the tier's files call one way
 * (pch_compile.c says what the tier decides and why). */
#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "alloc.h"
#include "buf.h"
#include "cache/cache_stats.h"
#include "clock.h"
#include "cuda/nvrtc.h"
#include "cuda/nvrtc_record.h"
#include "key/nvrtc_lib.h"
#include "pch/pch.h"
#include "pch/pch_tier.h"
#include "pch/pch_wire.h"
#include "fs.h"

/* ---- compiling here, as before ---------------------------------------------- */

int progcache__pch_nvrtc_here(const pch_job *job)
{
    return progcache__nvrtc_for_compile(job->cache, &job->program->nvrtc, job->how);
}

int progcache__pch_here(progcache_buf *out, progcache_buf *log, pch_job *job)
{
    int rc = progcache__pch_nvrtc_here(job);
    return rc ? rc : progcache_nvrtc_compile(out, log, job->lowered, &job->program->nvrtc);
}

int progcache__pch_plain(progcache_buf *out, progcache_buf *log, pch_job *job)
{
    double t = progcache__clock_ms();
    int rc = progcache__pch_here(out, log, job);
    double ms = progcache__clock_ms() - t;
    if (rc || ms < job->tier->settings.min_ms)
        return rc;
    /* A slow prefix: the next compile of it makes a PCH. */
    pch_seen seen;
    progcache__pch_seen_read(job->tier, job->hex, &seen);
    seen.plain_ms = (uint64_t)ms;
    progcache__pch_seen_write(job->tier, job->hex, &seen);
    return rc;
}

/* The helper failed to run a compile (it could not start, answered
 * nothing, or ran out of time): say so once, count it, and stop asking it
 * for this handle's compiles. */
void progcache__pch_helper_failed(pch_job *job, const char *what)
{
    progcache__pch_tier_drop(job->tier, &job->tier->helper_ok);
    progcache__pch_count(job, PROGCACHE_STAT_PCH_FALLBACKS, 1);
    progcache__pch_log_once(job->tier, job->program, PCH_LOGGED_HELPER, PROGCACHE_LOG_WARN,
                            "progcache: the PCH helper failed (%s: %s); compiling without it",
                            what, progcache_error_last());
}

/* The helper runs another build of NVRTC than this process: its compiles
 * and its record of what NVRTC reads are not this NVRTC's. */
void progcache__pch_mismatch(pch_job *job, const pch_result *r)
{
    progcache__pch_tier_drop(job->tier, &job->tier->helper_ok);
    progcache__pch_count(job, PROGCACHE_STAT_PCH_FALLBACKS, 1);
    progcache__pch_log_once(job->tier, job->program, PCH_LOGGED_MISMATCH, PROGCACHE_LOG_WARN,
                            "progcache: the PCH helper %s loads NVRTC build %s, this process "
                            "compiles with build %s; the PCH tier is off (LD_LIBRARY_PATH?)",
                            job->tier->helper, r->nvrtc_id, job->tier->nvrtc_id);
}

/* ---- making a PCH --------------------------------------------------------------- */

/* Whether the options name an include path (then NVRTC must have read or
 * probed something, and a record of nothing means the recording failed). */
static int has_include_path(const pch_job *job)
{
    for (size_t i = 0; i < job->argc; i++)
        if (!strncmp(job->argv[i], "-I", 2) || !strncmp(job->argv[i], "--include-path", 14))
            return 1;
    return 0;
}

/* Keep the PCH the helper made as name: its manifest from the helper's
 * record, checked and hashed here; 0 when it was published. */
static int keep(pch_job *job, pch_result *r, const char *name, const pch_seen *seen, uint64_t heap)
{
    progcache__pch_tier *tier = job->tier;
    pch_manifest m;
    memset(&m, 0, sizeof m);
    char why[512] = "";
    snprintf(m.key, sizeof m.key, "%s", job->hex);
    snprintf(m.pch, sizeof m.pch, "%s", name);
    m.heap_addr = PROGCACHE__PCH_HEAP_ADDR;
    m.heap_size = heap;
    m.plain_ms = seen->plain_ms;
    m.use_ms = r->compile_us / 1000;
    m.created = (int64_t)time(NULL);
    m.deps = r->deps.deps;
    m.num_deps = r->deps.num_deps;
    r->deps.deps = NULL;
    r->deps.num_deps = 0;
    struct stat st;
    int fd = -1, rc = -1;
    if (r->deps_incomplete || (!m.num_deps && has_include_path(job))) {
        progcache__pch_log_once(tier, job->program, PCH_LOGGED_HELPER, PROGCACHE_LOG_WARN,
                                "progcache: the PCH helper could not record what NVRTC read; "
                                "its PCHs are not kept");
    } else if (progcache__pch_deps_hash(&m, why, sizeof why)) {
        progcache__pch_log(job->program, PROGCACHE_LOG_INFO,
                           "progcache: PCH for %.16s... not kept: %s", job->hex, why);
    } else if ((fd = progcache__fs_open_regular(tier->dir_fd, name, O_RDONLY, 0, &st)) < 0 ||
               progcache__pch_digest(fd, (uint64_t)st.st_size, m.pch_sha) != 0) {
        progcache__pch_log(job->program, PROGCACHE_LOG_WARN,
                           "progcache: the PCH made for %.16s... cannot be read: %s", job->hex,
                           strerror(errno));
    } else if ((m.pch_size = (uint64_t)st.st_size) > tier->settings.max_size) {
        progcache__pch_log_once(tier, job->program, PCH_LOGGED_BUDGET, PROGCACHE_LOG_WARN,
                                "progcache: a PCH of %llu bytes is over the PCH budget of %llu "
                                "bytes (PROGCACHE_PCH_MAX_SIZE); not kept",
                                (unsigned long long)m.pch_size,
                                (unsigned long long)tier->settings.max_size);
    } else if (progcache__pch_publish(tier, &m) == PROGCACHE_OK) {
        rc = 0;
        /* Its stamp, with the identity it has now that it is published
         * (stat'ed again: the same file, unchanged since it was hashed),
         * so that no use need read it again until it changes. */
        struct stat now;
        pch_ident hashed, published;
        progcache__pch_ident_of(&hashed, &st);
        if (fstat(fd, &now) == 0 && (progcache__pch_ident_of(&published, &now),
                                     progcache__pch_ident_same(&hashed, &published)))
            progcache__pch_stamp_write(tier->dir_fd, name, m.pch_sha, &published);
    }
    if (fd >= 0)
        close(fd);
    if (rc)
        (void)unlinkat(tier->dir_fd, name, 0);
    progcache__pch_manifest_free(&m);
    return rc;
}

/* The helper made the PCH and used it in one process, but NVRTC's heap was
 * not at the pinned address: no other process can use it. */
static void no_pinning(pch_job *job, const pch_result *r)
{
    progcache__pch_nopin_write(job->tier);
    progcache__pch_tier_drop(job->tier, &job->tier->cross);
    progcache__pch_count(job, PROGCACHE_STAT_PCH_FALLBACKS, 1);
    progcache__pch_log_once(job->tier, job->program, PCH_LOGGED_NOPIN, PROGCACHE_LOG_WARN,
                            "progcache: the PCH helper could not place NVRTC's PCH heap at "
                            "0x%llx (%s); PCHs are kept per process from now on",
                            (unsigned long long)PROGCACHE__PCH_HEAP_ADDR,
                            r->heap == PROGCACHE__WIRE_HEAP_UNSEEN ? "NVRTC never asked for it"
                                                                   : "the address was taken");
}

int progcache__pch_judge(pch_job *job, pch_seen *seen, pch_result *r, const char *name)
{
    progcache__pch_tier *tier = job->tier;
    uint64_t heap = seen->heap_required > PROGCACHE__PCH_HEAP_DEFAULT ? seen->heap_required
                                                                      : PROGCACHE__PCH_HEAP_DEFAULT;
    int rc = 1; /* 1: nothing to keep */
    if (r->status == PROGCACHE__WIRE_MISMATCH) {
        progcache__pch_mismatch(job, r);
    } else if (r->status != PROGCACHE__WIRE_OK) {
        progcache__error(PROGCACHE_EIO, "status %u", r->status);
        progcache__pch_helper_failed(job, "making a PCH");
    } else if (r->pch == PROGCACHE__WIRE_PCH_HEAP_SHORT) {
        /* Made again next time, with the heap NVRTC asked for. */
        seen->heap_required = r->heap_required;
        progcache__pch_seen_write(tier, job->hex, seen);
    } else if (r->pch != PROGCACHE__WIRE_PCH_USED) {
        seen->failures++;
        progcache__pch_seen_write(tier, job->hex, seen);
        progcache__pch_log(job->program, PROGCACHE_LOG_INFO,
                           "progcache: no PCH could be made for %.16s...: %.200s", job->hex,
                           r->note.data ? (const char *)r->note.data : "");
    } else if (r->heap != PROGCACHE__WIRE_HEAP_PINNED) {
        no_pinning(job, r);
        rc = 2;
    } else if (tier->settings.min_ms && seen->plain_ms < r->compile_us / 1000 +
                                                         tier->settings.min_ms * 3 / 5) {
        /* Not worth its cost in time and disk: this prefix is left alone. */
        seen->no_pay = 1;
        progcache__pch_seen_write(tier, job->hex, seen);
        rc = 2;
    } else {
        if (keep(job, r, name, seen, heap) == 0) {
            progcache__pch_count(job, PROGCACHE_STAT_PCH_CREATED, 1);
            progcache__pch_evict(tier, name);
        }
        rc = 3;
    }
    if (rc != 3)
        (void)unlinkat(tier->dir_fd, name, 0);
    return rc;
}
