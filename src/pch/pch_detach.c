/* Making a PCH off the critical path (docs/CUDA.md, "Precompiled headers").
 *
 * The compile that finds a prefix worth a PCH is compiled plain and
 * returned; the helper is started once that compile has taken
 * PROGCACHE_PCH_MIN_MS (a timer thread, progcache__pch_early_start: the
 * PCH is then ready a whole plain compile sooner for the next one), or
 * after it, in PROGCACHE__WIRE_CREATE_DETACHED mode: it reads the request
 * and exits (reaped here, within 5 s), and its own child, in a session of
 * its own and bounded by an alarm (PROGCACHE__WIRE_DETACHED_SECONDS),
 * makes the PCH and leaves the answer a CREATE would have given as
 * <key>.made in the PCH directory. It never
 * touches the caller's result, and it outlives a short-lived caller (a
 * `progcache warm`, one process per compile): the caller exiting right
 * after costs nothing but the wait of whoever uses the PCH next. Its
 * parent being gone, init (or the nearest subreaper) reaps it.
 *
 * The next compile of the prefix that finds no PCH claims <key>.made (a
 * rename to a temp name: one process wins), and judges and publishes it as
 * a CREATE's answer (pch_compile.c): the PCH is then checked and used like
 * any other.
 *
 * One creation per prefix at a time: <key>.making, created exclusively
 * before the helper starts and removed by it when it is done; a marker
 * older than the helper's bound is a creation that died, and is taken
 * over. What a killed creation leaves (a PCH no manifest names, a stale
 * <key>.made or marker) is swept by the directory's eviction. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "clock.h"
#include "pch/pch_tier.h"
#include "pch/pch_wire.h"
#include "fs.h"

/* A <key>.made holds no artifact: the helper's log, note and record of
 * what NVRTC read; far below this. */
#define MADE_MAX ((size_t)16 << 20)

static int on(const int *field) { return __atomic_load_n(field, __ATOMIC_RELAXED); }

/* Claim <key>.making: 1 when this process may start the creation. */
static int claim_making(progcache__pch_tier *tier, const char *name)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = openat(tier->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                        0600);
        if (fd >= 0) {
            close(fd);
            return 1;
        }
        struct stat st;
        if (errno != EEXIST || fstatat(tier->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            time(NULL) - st.st_mtime < PROGCACHE__WIRE_DETACHED_SECONDS + 60)
            return 0; /* one is under way (or the directory refuses) */
        (void)unlinkat(tier->dir_fd, name, 0); /* a creation that died */
    }
    return 0;
}

/* What starting a creation came to: silent, so that a thread of the
 * library's may do it; told and counted on the compiling thread. */
typedef enum { DETACH_NONE, DETACH_STARTED, DETACH_FAILED } detach_outcome;

static detach_outcome start_detached(pch_job *job, const pch_seen *seen, char *why, size_t len)
{
    progcache__pch_tier *tier = job->tier;
    if (!on(&tier->helper_ok) || !on(&tier->cross))
        return DETACH_NONE;
    char making[PCH_NAME_MAX], name[PCH_NAME_MAX];
    snprintf(making, sizeof making, "%s.making", job->hex);
    if (!claim_making(tier, making))
        return DETACH_NONE;
    progcache__pch_new_name(name, job->hex);
    uint64_t heap = seen->heap_required > PROGCACHE__PCH_HEAP_DEFAULT ? seen->heap_required
                                                                      : PROGCACHE__PCH_HEAP_DEFAULT;
    pch_call call;
    int rc = progcache__pch_helper_start(&call, job, PROGCACHE__WIRE_CREATE_DETACHED, -1, name,
                                         heap);
    if (!rc)
        rc = progcache__pch_helper_detach(&call);
    if (!rc)
        return DETACH_STARTED;
    (void)unlinkat(tier->dir_fd, making, 0);
    snprintf(why, len, "%s", progcache_error_last());
    return DETACH_FAILED;
}

static void account_detached(pch_job *job, detach_outcome outcome, const char *why)
{
    progcache__pch_tier *tier = job->tier;
    if (outcome == DETACH_STARTED) {
        progcache__pch_count(job, PROGCACHE_STAT_PCH_DEFERRED, 1);
    } else if (outcome == DETACH_FAILED) {
        progcache__pch_tier_drop(tier, &tier->helper_ok);
        progcache__pch_count(job, PROGCACHE_STAT_PCH_FALLBACKS, 1);
        progcache__pch_log_once(tier, job->program, PCH_LOGGED_HELPER, PROGCACHE_LOG_WARN,
                                "progcache: the PCH helper failed (making a PCH: %s); "
                                "compiling without it",
                                why);
    }
}

void progcache__pch_create_detached(pch_job *job, const pch_seen *seen)
{
    char why[512] = "";
    account_detached(job, start_detached(job, seen, why, sizeof why), why);
}

/* ---- started while the plain compile still runs ---------------------------- */

struct pch_early {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    pch_job *job;
    pch_seen seen;
    double at;   /* when to start the creation (progcache__clock_ms) */
    int done;    /* the compile returned: do not start */
    int fired;   /* the thread tried to start the creation */
    detach_outcome outcome;
    char why[512];
};

static void *early_main(void *arg)
{
    pch_early *e = arg;
    pthread_mutex_lock(&e->lock);
    while (!e->done) {
        double left = e->at - progcache__clock_ms();
        if (left <= 0)
            break;
        /* On the monotonic clock: a step of the date must not stretch it. */
        struct timespec ts;
        progcache__clock_monotonic_after(&ts, (unsigned int)left + 1);
        (void)pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    int go = !e->done;
    pthread_mutex_unlock(&e->lock);
    if (go) {
        /* The compile has run min_ms: it is slow, make the PCH now. What
         * came of it is told on the compiling thread (early_stop): the
         * program's log callback is never called from this one. */
        e->outcome = start_detached(e->job, &e->seen, e->why, sizeof e->why);
        e->fired = 1;
    }
    return NULL;
}

pch_early *progcache__pch_early_start(pch_job *job, const pch_seen *seen)
{
    progcache__pch_tier *tier = job->tier;
    if (!on(&tier->helper_ok) || !on(&tier->cross))
        return NULL;
    pch_early *e = progcache__calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->job = job;
    e->seen = *seen;
    e->at = progcache__clock_ms() + tier->settings.min_ms;
    pthread_attr_t attr;
    if (pthread_mutex_init(&e->lock, NULL) != 0)
        goto no_lock;
    if (progcache__cond_init_monotonic(&e->cond) != 0)
        goto no_cond;
    if (pthread_attr_init(&attr) != 0)
        goto no_thread;
    int ok = pthread_attr_setstacksize(&attr, (size_t)256 << 10) == 0 &&
             pthread_create(&e->thread, &attr, early_main, e) == 0;
    pthread_attr_destroy(&attr);
    if (ok)
        return e;
no_thread:
    pthread_cond_destroy(&e->cond);
no_cond:
    pthread_mutex_destroy(&e->lock);
no_lock:
    progcache__free(e);
    return NULL;
}

int progcache__pch_early_stop(pch_early *e)
{
    if (!e)
        return 0;
    pthread_mutex_lock(&e->lock);
    e->done = 1;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    int started = e->fired;
    if (e->fired)
        account_detached(e->job, e->outcome, e->why);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    progcache__free(e);
    return started;
}

/* ---- collecting what a detached helper made ------------------------------- */

/* The whole of a claimed file, bounded. 0, or -1. */
static int read_claimed(int dir_fd, const char *name, progcache_buf *out)
{
    struct stat st;
    int fd = progcache__fs_open_regular(dir_fd, name, O_RDONLY, 0, &st);
    if (fd < 0)
        return -1;
    int rc = -1;
    if ((uint64_t)st.st_size <= MADE_MAX &&
        progcache__buf_reserve(out, (size_t)st.st_size) == PROGCACHE_OK) {
        size_t done = 0;
        while (done < (size_t)st.st_size) {
            ssize_t n = pread(fd, out->data + done, (size_t)st.st_size - done, (off_t)done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            done += (size_t)n;
        }
        if (done == (size_t)st.st_size) {
            progcache__buf_set_size(out, done);
            rc = 0;
        }
    }
    close(fd);
    return rc;
}

int progcache__pch_collect(pch_job *job, pch_seen *seen)
{
    progcache__pch_tier *tier = job->tier;
    char made[PCH_NAME_MAX], claim[32];
    snprintf(made, sizeof made, "%s.made", job->hex);
    /* A fresh name no other process holds (RENAME_NOREPLACE): the claim. */
    if (progcache__fs_rename_aside(tier->dir_fd, made, tier->dir_fd, "tmp-", claim, sizeof claim) !=
        0)
        return 0; /* none, or another process has it */
    progcache_buf text = PROGCACHE_BUF_INIT;
    int got = read_claimed(tier->dir_fd, claim, &text);
    (void)unlinkat(tier->dir_fd, claim, 0);
    int published = 0;
    const char *head = PROGCACHE__WIRE_MADE "\n";
    size_t head_len = strlen(head);
    char name[PCH_NAME_MAX] = "";
    const char *p = (const char *)text.data, *nl;
    if (!got && text.size > head_len && !memcmp(p, head, head_len) &&
        (nl = memchr(p + head_len, '\n', text.size - head_len)) &&
        (size_t)(nl - (p + head_len)) < sizeof name) {
        memcpy(name, p + head_len, (size_t)(nl - (p + head_len)));
        name[nl - (p + head_len)] = '\0';
    }
    /* The helper was asked for a PCH of this key in this directory: any
     * other name is not one to keep. */
    if (!name[0] || strncmp(name, job->hex, PCH_KEY_HEX) || strchr(name, '/')) {
        progcache_buf_free(&text);
        return 0;
    }
    size_t at = (size_t)(nl + 1 - p);
    progcache_buf resp = {text.data + at, text.size - at, 0};
    pch_result r;
    if (progcache__pch_result_parse(&r, &resp) == 0) {
        published = progcache__pch_judge(job, seen, &r, name) == 3;
        progcache__pch_result_release(&r);
    } else {
        (void)unlinkat(tier->dir_fd, name, 0);
    }
    progcache_buf_free(&text);
    return published;
}
