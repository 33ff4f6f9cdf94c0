/* The PCH tier's decisions, for one compile (docs/CUDA.md, "Precompiled
 * headers"):
 *
 *  - Not a candidate (no #include at the top, the tier off, the caller's
 *    own PCH options, no cache directory): compile as before.
 *  - A usable PCH for the prefix (its headers unchanged, its file whole):
 *    the helper compiles with it. Anything short of NVRTC saying it used
 *    the PCH and returning an artifact: the compile runs here, as before.
 *  - None: the compile runs here as before and, once it has taken
 *    PROGCACHE_PCH_MIN_MS, the prefix is remembered and a detached helper
 *    makes its PCH while this compile goes on (pch_detach.c), for the
 *    next compile to publish and use. With PROGCACHE_PCH_CREATE=inline the
 *    second slow sight makes the PCH in the helper and compiles the
 *    program with it there, waiting for both.
 *
 * The artifact is the same either way (NVRTC makes the same bytes with and
 * without a PCH; test_pch checks it), so the program's key does not
 * change, and nothing here can fail a compile that would have succeeded:
 * every failure of the tier ends in the compile it replaced. */
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

static int on(const int *field) { return __atomic_load_n(field, __ATOMIC_RELAXED); }

/* ---- is this compile a candidate? ------------------------------------------- */

/* An option of NVRTC's PCH family (--pch, --use-pch, --pch-dir,
 * --instantiate-templates-in-pch, ...): the caller's own PCH options are
 * the caller's business, and the tier stays out. Only the name before '='
 * counts, and not the value of -I, -D, -U or a separate value string. */
static int pch_option(const char *option)
{
    if (option[0] != '-' || !strncmp(option, "-I", 2) || !strncmp(option, "-D", 2) ||
        !strncmp(option, "-U", 2))
        return 0;
    size_t len = strcspn(option, "=");
    for (size_t i = 0; i + 3 <= len; i++)
        if (!memcmp(option + i, "pch", 3))
            return 1;
    return 0;
}

static int prepare(pch_job *job, progcache *cache, const progcache_program *program)
{
    memset(job, 0, sizeof *job);
    const progcache_key_nvrtc_options *p = &program->nvrtc;
    /* Headers in memory are neither files NVRTC reads (the manifest cannot
     * watch them) nor sent to the helper: such a program is no candidate. */
    if (!cache || (program->flags & PROGCACHE_PROGRAM_NO_PCH) || !progcache_path(cache) ||
        !p->source || p->num_headers)
        return 0;
    /* A cache opened read-only is not written to: PCHs are made, touched
     * and removed there. */
    if (progcache__cache_read_only(cache))
        return 0;
    size_t len = p->source_len ? p->source_len : strlen(p->source);
    size_t prefix = progcache__pch_prefix_len(p->source, len);
    if (!prefix)
        return 0;
    for (size_t i = 0; i < p->num_options; i++)
        if (pch_option(p->options[i]))
            return 0;
    double t = progcache__clock_ms();
    progcache__pch_tier *tier = progcache__pch_tier_of(cache);
    if (!tier)
        return 0;
    job->tier_ms = progcache__clock_ms() - t;
    job->cache = cache;
    job->program = program;
    job->tier = tier;
    if (tier->settings.mode == PROGCACHE__PCH_OFF) {
        if (tier->settings_error)
            progcache__pch_log_once(tier, program, PCH_LOGGED_SETTINGS, PROGCACHE_LOG_WARN,
                                    "progcache: %s", tier->settings_error);
        else if (!strcmp(tier->settings.off_because, "NVRTC_DISABLE_PCH is set"))
            progcache__pch_log_once(tier, program, PCH_LOGGED_SETTINGS, PROGCACHE_LOG_INFO,
                                    "progcache: the PCH tier is off: NVRTC_DISABLE_PCH is set");
        return 0;
    }
    if (tier->dir_fd < 0) {
        progcache__pch_log_once(tier, program, PCH_LOGGED_DIR, PROGCACHE_LOG_WARN,
                                "progcache: the PCH tier is off for this cache: %s",
                                tier->dir_error ? tier->dir_error : "out of memory");
        progcache__pch_count(job, PROGCACHE_STAT_PCH_FALLBACKS, 1);
        return 0;
    }
    job->source = p->source;
    job->source_len = len;
    job->prefix_len = prefix;
    job->name = p->name ? p->name : "default_program";
    job->argv = progcache__nvrtc_argv(p, &job->argc);
    if (!job->argv || progcache__pch_key(job) != PROGCACHE_OK) {
        progcache__free(job->argv);
        job->argv = NULL;
        return 0;
    }
    return 1;
}

/* The first line of NVRTC's log that says why, for a message. */
static const char *first_line(const progcache_buf *log, char *out, size_t len)
{
    const char *s = log->data ? (const char *)log->data : "";
    const char *w = strstr(s, "arning");
    if (w)
        while (w > s && w[-1] != '\n')
            w--;
    snprintf(out, len, "%.*s", (int)strcspn(w ? w : s, "\n"), w ? w : s);
    return out;
}

/* Hand the helper's artifact, log and lowered names over to the caller. */
static void take(const pch_job *job, progcache_buf *out, progcache_buf *log, pch_result *r)
{
    progcache_buf t = *out;
    *out = r->artifact;
    r->artifact = t;
    if (job->lowered) {
        t = *job->lowered;
        *job->lowered = r->lowered;
        r->lowered = t;
    }
    if (log) {
        t = *log;
        *log = r->log;
        r->log = t;
    }
}

/* ---- using a PCH ------------------------------------------------------------- */

/* 1 when the compile is done (*rc its result), 0 to compile without. */
static int use(pch_job *job, pch_found *found, progcache_buf *out, progcache_buf *log, int *rc)
{
    const pch_manifest *m = &found->manifest;
    double t = progcache__clock_ms();
    pch_result r;
    /* Always set: NVRTC_PCH_HEAP_SIZE could make the default too small. */
    uint64_t heap = m->heap_size > PROGCACHE__PCH_HEAP_DEFAULT ? m->heap_size
                                                              : PROGCACHE__PCH_HEAP_DEFAULT;
    int run = progcache__pch_helper_use(&r, job, found->fd, heap);
    int done = 0;
    char line[240];
    if (run == PROGCACHE_ECORRUPT) {
        /* A damaged PCH that passed the checksum can still kill NVRTC. */
        progcache__pch_count(job, PROGCACHE_STAT_PCH_REJECTED, 1);
        progcache__pch_count(job, PROGCACHE_STAT_PCH_FALLBACKS, 1);
        progcache__pch_log(job->program, PROGCACHE_LOG_WARN,
                           "progcache: NVRTC died on PCH %s (%s); removed, compiling without it",
                           m->pch, progcache_error_last());
        progcache__pch_remove(job->tier, job->hex, m->pch);
    } else if (run) {
        progcache__pch_helper_failed(job, "using a PCH");
    } else if (r.status == PROGCACHE__WIRE_MISMATCH) {
        progcache__pch_mismatch(job, &r);
    } else if (r.status != PROGCACHE__WIRE_OK) {
        progcache__error(PROGCACHE_EIO, "status %u", r.status);
        progcache__pch_helper_failed(job, "using a PCH");
    } else if (r.pch != PROGCACHE__WIRE_PCH_USED) {
        progcache__pch_count(job, PROGCACHE_STAT_PCH_REJECTED, 1);
        progcache__pch_log(job->program, PROGCACHE_LOG_INFO,
                           "progcache: NVRTC did not use PCH %s (%s); removed, compiling "
                           "without it",
                           m->pch, first_line(&r.log, line, sizeof line));
        progcache__pch_remove(job->tier, job->hex, m->pch);
    } else if (r.nvrtc_result == NVRTC_SUCCESS && r.artifact.size) {
        /* A compile error is left to the compile without a PCH, whose
         * message is the one the caller would get without the tier. */
        take(job, out, log, &r);
        progcache__pch_touch(job->tier->dir_fd, m->pch, found->fd);
        progcache__pch_count(job, PROGCACHE_STAT_PCH_HITS, 1);
        double ms = progcache__clock_ms() - t;
        /* Where a hit's time went, for whoever debugs its speed. */
        progcache__pch_log(job->program, PROGCACHE_LOG_DEBUG,
                           "progcache: PCH %.16s... used: find %.1f ms (file %s), helper %.1f "
                           "ms (its NVRTC compile %.1f ms; answer at %.1f ms, its end at %.1f "
                           "ms), the tier's state %.1f ms, in all %.1f ms",
                           job->hex, found->find_ms, found->full ? "read in full" : "stamped",
                           r.wall_ms, (double)r.compile_us / 1000.0, r.answer_ms, r.eof_ms,
                           job->tier_ms, found->find_ms + ms);
        if ((double)m->plain_ms > ms)
            progcache__pch_count(job, PROGCACHE_STAT_PCH_MS_SAVED, (uint64_t)(m->plain_ms - ms));
        *rc = PROGCACHE_OK;
        done = 1;
    }
    progcache__pch_result_release(&r);
    return done;
}

/* PROGCACHE_PCH_CREATE=inline: the helper makes the PCH and compiles the
 * program with it, and this compile waits for both. */
static int create(pch_job *job, pch_seen *seen, progcache_buf *out, progcache_buf *log)
{
    progcache__pch_tier *tier = job->tier;
    char name[PCH_NAME_MAX];
    progcache__pch_new_name(name, job->hex);
    uint64_t heap = seen->heap_required > PROGCACHE__PCH_HEAP_DEFAULT ? seen->heap_required
                                                                      : PROGCACHE__PCH_HEAP_DEFAULT;
    pch_result r;
    int run = progcache__pch_helper_run(&r, job, PROGCACHE__WIRE_CREATE, -1, name, heap);
    if (run) {
        (void)unlinkat(tier->dir_fd, name, 0);
        progcache__pch_helper_failed(job, "making a PCH");
        if (run == PROGCACHE_ECORRUPT) {
            seen->failures++;
            progcache__pch_seen_write(tier, job->hex, seen);
        }
        return progcache__pch_plain(out, log, job);
    }
    /* The program was compiled with the PCH in the helper: that artifact
     * is the one a compile here would make. */
    if (progcache__pch_judge(job, seen, &r, name) >= 2 && r.nvrtc_result == NVRTC_SUCCESS &&
        r.artifact.size) {
        take(job, out, log, &r);
        progcache__pch_result_release(&r);
        return PROGCACHE_OK;
    }
    progcache__pch_result_release(&r);
    return progcache__pch_plain(out, log, job);
}

/* ---- the tier ------------------------------------------------------------------ */

/* Whether this compile may leave NVRTC unloaded here: through the helper,
 * with the IDs of the NVRTC file whose record gave the key's version
 * (pch_prefix.c). Anything it ends in here loads NVRTC first. */
static int helper_only(const pch_job *job)
{
    const progcache__pch_tier *tier = job->tier;
    return on(&tier->helper_ok) && on(&tier->cross) && tier->ids_from_file && job->how &&
           !strcmp(job->how, "record") && job->program->nvrtc.nvrtc_major == tier->nvrtc_major &&
           job->program->nvrtc.nvrtc_minor == tier->nvrtc_minor;
}

static int run(pch_job *job, progcache_buf *out, progcache_buf *log)
{
    progcache__pch_tier *tier = job->tier;
    if (!progcache__nvrtc_loaded() && !helper_only(job)) {
        int rc = progcache__pch_nvrtc_here(job);
        if (rc)
            return rc;
    }
    if (!on(&tier->helper_ok)) {
        progcache__pch_count(job, PROGCACHE_STAT_PCH_MISSES, 1);
        progcache__pch_count(job, PROGCACHE_STAT_PCH_FALLBACKS, 1);
        if (tier->helper_error)
            progcache__pch_log_once(tier, job->program, PCH_LOGGED_HELPER, PROGCACHE_LOG_WARN,
                                    "progcache: the PCH tier is off: %s", tier->helper_error);
        return progcache__pch_here(out, log, job);
    }
    if (!on(&tier->cross))
        return progcache__pch_inproc_compile(out, log, job);
    char why[512];
    pch_found found;
    double t = progcache__clock_ms();
    int f = progcache__pch_find(&found, job, why, sizeof why);
    found.find_ms = progcache__clock_ms() - t;
    if (f == PCH_STALE) {
        progcache__pch_count(job, PROGCACHE_STAT_PCH_REJECTED, 1);
        progcache__pch_log(job->program, PROGCACHE_LOG_INFO,
                           "progcache: PCH %.16s... not used: %s; removed", job->hex, why);
    }
    if (f == PCH_FOUND) {
        int rc, done = use(job, &found, out, log, &rc);
        progcache__pch_found_release(&found);
        if (done)
            return rc;
        return progcache__pch_here(out, log, job);
    }
    progcache__pch_count(job, PROGCACHE_STAT_PCH_MISSES, 1);
    pch_seen seen;
    int had = progcache__pch_seen_read(tier, job->hex, &seen);
    if (tier->settings.create_inline)
        return !had || seen.no_pay || seen.failures >= 3 || seen.plain_ms < tier->settings.min_ms
                   ? progcache__pch_plain(out, log, job)
                   : create(job, &seen, out, log);
    /* A PCH a detached helper made since (pch_detach.c): published now,
     * and used. */
    t = progcache__clock_ms();
    if (progcache__pch_collect(job, &seen) &&
        progcache__pch_find(&found, job, why, sizeof why) == PCH_FOUND) {
        found.find_ms = progcache__clock_ms() - t;
        int rc, done = use(job, &found, out, log, &rc);
        progcache__pch_found_release(&found);
        if (done)
            return rc;
        return progcache__pch_here(out, log, job);
    }
    /* The compile itself is always the plain one: a PCH this prefix is
     * worth is made by a helper the caller does not wait for, started as
     * soon as the compile has run PROGCACHE_PCH_MIN_MS (or after it), so
     * making a PCH never costs the compile that needed it. */
    int wanted = !(had && (seen.no_pay || seen.failures >= 3));
    pch_early *early = wanted ? progcache__pch_early_start(job, &seen) : NULL;
    int rc = progcache__pch_plain(out, log, job);
    if (!progcache__pch_early_stop(early) && rc == PROGCACHE_OK && wanted &&
        progcache__pch_seen_read(tier, job->hex, &seen) && seen.plain_ms >= tier->settings.min_ms)
        progcache__pch_create_detached(job, &seen);
    return rc;
}

int progcache__pch_compile(progcache_buf *out, progcache_buf *log, progcache_buf *lowered,
                           progcache *cache, const progcache_program *program,
                           const char *how)
{
    pch_job job;
    if (!prepare(&job, cache, program)) {
        int rc = progcache__nvrtc_for_compile(cache, &program->nvrtc, how);
        return rc ? rc : progcache_nvrtc_compile(out, log, lowered, &program->nvrtc);
    }
    job.how = how;
    job.lowered = lowered;
    int rc = run(&job, out, log);
    progcache__free(job.argv);
    return rc;
}
