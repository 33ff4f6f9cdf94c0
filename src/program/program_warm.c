/* progcache_warm: many programs times many architectures into a cache, in
 * parallel (include/progcache/warm.h). One queue of (program, arch)
 * compiles, taken in order by a pool of threads: architecture by
 * architecture within a program, so the threads busy themselves with
 * different compiles of one source at once and the progress a caller
 * draws moves evenly. Each compile is progcache_compile_or_load with
 * NO_LOAD, the path every program takes, so the keys are theirs. */
#include "progcache/warm.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cache/cache_stats.h"
#include "error.h"
#include "options.h"

#define WARM_MAX_JOBS 256

typedef struct job {
    size_t program, arch;
} job;

typedef struct warm_run {
    progcache *cache;
    const progcache_program *programs;
    const progcache_warm_options *opts;
    job *jobs;
    size_t njobs;
    pthread_mutex_t lock;
    size_t next, done;
    int stop; /* on_item's non-zero value */
    progcache_warm_result counts;
} warm_run;

void progcache_warm_options_init(progcache_warm_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_WARM_OPTIONS_VERSION);
}

int progcache_arch_valid(const char *arch)
{
    if (!arch)
        return 0;
    const char *p = !strncmp(arch, "sm_", 3)        ? arch + 3
                    : !strncmp(arch, "compute_", 8) ? arch + 8
                                                    : NULL;
    if (!p || !(*p >= '0' && *p <= '9'))
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == 'a' || *p == 'f')
        p++;
    return *p == '\0';
}

static int names_arch(const progcache_key_nvrtc_options *n)
{
    for (size_t i = 0; i < n->num_options; i++) {
        const char *o = n->options[i];
        if (o && (!strncmp(o, "-arch", 5) || !strncmp(o, "--gpu-architecture", 18)))
            return 1;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One compile, into item (message: a copy the caller frees). options and
 * arch_opt are the caller's: item points into them, and on_item reads
 * them after this returns. */
static void compile_one(warm_run *w, const job *j, progcache_warm_item *item, char **message,
                        const char **options, char arch_opt[64])
{
    const progcache_program *src = &w->programs[j->program];
    progcache_program prog = *src;
    size_t n = 0;
    item->program = j->program;
    item->arch = j->arch;
    item->arch_name = j->arch < w->opts->num_archs ? w->opts->archs[j->arch] : NULL;
    if (item->arch_name) {
        snprintf(arch_opt, 64, "-arch=%s", item->arch_name);
        options[n++] = arch_opt;
    }
    for (size_t i = 0; i < src->nvrtc.num_options; i++)
        options[n++] = src->nvrtc.options[i];
    prog.nvrtc.options = options;
    prog.nvrtc.num_options = n;
    prog.flags |= PROGCACHE_PROGRAM_NO_LOAD;
    item->options = options;
    item->num_options = n;

    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    double t = now_ms();
    item->rc = progcache_compile_or_load(&r, w->cache, &prog);
    item->ms = now_ms() - t;
    static const unsigned char no_key[PROGCACHE_KEY_SIZE];
    item->has_key = memcmp(r.key, no_key, sizeof no_key) != 0; /* even if compiling failed */
    memcpy(item->key, r.key, sizeof item->key);
    item->status = r.status;
    if (item->rc) {
        *message = progcache__strdup(progcache_error_last());
    } else if (r.store_error && !r.stored) {
        /* Compiled, but not in the cache: warming did not happen. (A failed
         * lookup or removal alone does not mean that.) Every failure, whole. */
        item->rc = r.store_error;
        *message = r.cache_detail.size ? progcache__strdup((const char *)r.cache_detail.data)
                                       : progcache__strdup(r.cache_message);
        size_t len = *message ? strlen(*message) : 0;
        if (len && (*message)[len - 1] == '\n')
            (*message)[len - 1] = '\0';
    } else if (r.status != PROGCACHE_STATUS_HIT && !r.stored &&
               progcache__cache_writes_off(w->cache)) {
        /* i35: a switch asked for it (said once at open); warming did not
         * happen all the same. */
        item->rc = PROGCACHE_EIO;
        *message = progcache__strdup("compiled, not stored: PROGCACHE_DISABLE or "
                                     "PROGCACHE_READONLY is set (unset it to warm the cache)");
    } else if (r.status != PROGCACHE_STATUS_HIT && !r.stored) {
        /* Compiled and, without a store error, not stored: the cache
         * directory is another user's, which is never written (said once
         * when the cache was opened). Warming did not happen. */
        item->rc = PROGCACHE_EIO;
        *message = progcache__strdup("compiled, not stored: the cache directory belongs to "
                                     "another user, and progcache never writes into another "
                                     "user's cache");
    }
    item->message = item->rc ? (*message ? *message : "out of memory") : NULL;
    progcache_program_result_release(&r);
}

static void *worker(void *arg)
{
    warm_run *w = arg;
    size_t most = 0;
    for (size_t i = 0; i < w->njobs; i++)
        if (w->programs[w->jobs[i].program].nvrtc.num_options > most)
            most = w->programs[w->jobs[i].program].nvrtc.num_options;
    const char **options = progcache__calloc(most + 1, sizeof *options);
    for (;;) {
        pthread_mutex_lock(&w->lock);
        size_t i = w->stop ? w->njobs : w->next++;
        pthread_mutex_unlock(&w->lock);
        if (i >= w->njobs)
            break;
        progcache_warm_item item;
        char *message = NULL, arch_opt[64];
        memset(&item, 0, sizeof item);
        if (options) {
            compile_one(w, &w->jobs[i], &item, &message, options, arch_opt);
        } else {
            item.program = w->jobs[i].program;
            item.arch = w->jobs[i].arch;
            item.rc = PROGCACHE_ENOMEM;
            item.message = "out of memory";
        }
        pthread_mutex_lock(&w->lock);
        w->done++;
        if (item.rc == PROGCACHE_OK && item.status == PROGCACHE_STATUS_HIT)
            w->counts.cached++;
        else if (item.rc == PROGCACHE_OK)
            w->counts.compiled++;
        else
            w->counts.failed++;
        if (item.rc == PROGCACHE_ECOMPILE || item.rc == PROGCACHE_EUNSAFEKEY)
            w->counts.program_errors++;
        if (w->opts->on_item && !w->stop)
            w->stop = w->opts->on_item(w->opts->ctx, &item, w->done, w->njobs);
        pthread_mutex_unlock(&w->lock);
        progcache__free(message);
    }
    progcache__free(options);
    return NULL;
}

/* The queue: for each program, its architectures (or itself, as given). */
static int plan(warm_run *w, size_t count)
{
    size_t archs = w->opts->num_archs;
    if (archs && count > SIZE_MAX / archs)
        return progcache__error(PROGCACHE_ENOMEM, "progcache_warm: too many compiles");
    w->jobs = progcache__calloc(count * (archs ? archs : 1), sizeof *w->jobs);
    if (!w->jobs)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory planning a warm");
    for (size_t p = 0; p < count; p++) {
        if (!archs || names_arch(&w->programs[p].nvrtc)) {
            w->jobs[w->njobs++] = (job){p, archs};
            continue;
        }
        for (size_t a = 0; a < archs; a++)
            w->jobs[w->njobs++] = (job){p, a};
    }
    return PROGCACHE_OK;
}

static int check_archs(const progcache_warm_options *o)
{
    if (o->num_archs && !o->archs)
        return progcache__error(PROGCACHE_EINVAL, "progcache_warm: num_archs is %zu but archs "
                                                  "is NULL",
                                o->num_archs);
    for (size_t i = 0; i < o->num_archs; i++) {
        if (!progcache_arch_valid(o->archs[i]))
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_warm: \"%s\" is not an architecture; give "
                                    "names such as sm_80, sm_90a or compute_90",
                                    o->archs[i] ? o->archs[i] : "(null)");
        for (size_t k = 0; k < i; k++)
            if (!strcmp(o->archs[k], o->archs[i]))
                return progcache__error(PROGCACHE_EINVAL,
                                        "progcache_warm: architecture %s is listed twice",
                                        o->archs[i]);
    }
    return PROGCACHE_OK;
}

static const size_t warm_options_size[] = {0, sizeof(progcache_warm_options)};

int progcache_warm(progcache_warm_result *out, progcache *cache,
                   const progcache_program *programs, size_t count,
                   const progcache_warm_options *opts)
{
    progcache_warm_options o;
    progcache_warm_options_init(&o);
    int rc = progcache__options_load(&o, opts, warm_options_size, PROGCACHE_WARM_OPTIONS_VERSION,
                                     "progcache_warm", "progcache_warm_options");
    if (rc)
        return rc;
    if (out && (rc = progcache__version_check(out, PROGCACHE_WARM_RESULT_VERSION,
                                              "progcache_warm", "out", "progcache_warm_result")))
        return rc;
    if (!cache || !programs || !count)
        return progcache__error(PROGCACHE_EINVAL, "progcache_warm: give a cache and programs");
    if ((rc = check_archs(&o)))
        return rc;
    warm_run w;
    memset(&w, 0, sizeof w);
    w.cache = cache;
    w.programs = programs;
    w.opts = &o;
    if ((rc = plan(&w, count)))
        return rc;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t jobs = o.jobs ? o.jobs : cpus > 0 ? (size_t)cpus : 1;
    if (jobs > WARM_MAX_JOBS)
        jobs = WARM_MAX_JOBS;
    if (jobs > w.njobs)
        jobs = w.njobs;
    pthread_mutex_init(&w.lock, NULL);
    pthread_t threads[WARM_MAX_JOBS];
    size_t started = 0;
    for (; started < jobs; started++)
        if (pthread_create(&threads[started], NULL, worker, &w) != 0)
            break;
    if (started == 0)
        worker(&w); /* no thread could start: do it here */
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_destroy(&w.lock);
    progcache__free(w.jobs);
    if (out) {
        w.counts.version = out->version;
        *out = w.counts;
    }
    return w.stop;
}
