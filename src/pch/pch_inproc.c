/* PCHs of one process, for when the helper cannot share them (it cannot
 * pin NVRTC's heap with this NVRTC or kernel, or PROGCACHE_PCH=inprocess).
 *
 * NVRTC uses a PCH made by the same process, wherever its heap is: a
 * long-running program that compiles many variants still gains. The PCHs
 * live in a private directory of the handle, progcache/pch-<uid>/proc-<16
 * hex>/, whose lock the handle holds (the sweep removes the directories
 * of processes that died) and which is removed at close. NVRTC gets
 * explicit --create-pch and --use-pch paths through /proc/self/fd of that
 * directory, never automatic mode (which scans a directory and deletes
 * what it finds there), and its heap size is never set (resizing the heap
 * invalidates every PCH the process made).
 *
 * What NVRTC read to make a PCH cannot be seen from inside this process,
 * so the helper compiles the prefix alongside, recording it; the manifest
 * is then checked before every use, as for shared PCHs. Without a helper
 * there is no PCH. */
#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "clock.h"
#include "cuda/nvrtc.h"
#include "pch/pch_tier.h"
#include "pch/pch_wire.h"
#include "key/nvrtc_lib.h"
#include "fs.h"

/* PCHs a handle keeps at once (each 10-180 MB on disk); the oldest goes. */
#define MAX_ITEMS 8

enum { ITEM_MAKING = 1, ITEM_READY = 2, ITEM_FAILED = 3 };

typedef struct item {
    char hex[PCH_KEY_HEX + 1];
    int state;
    pch_manifest m; /* deps, pch name, size and SHA-256 */
    pch_ident ident; /* the PCH file's, when it was hashed */
    uint64_t made;  /* order of creation, for replacing the oldest */
} item;

struct pch_inproc {
    int dir_fd;  /* proc-<16 hex>, or -1 when it could not be made */
    int lock_fd; /* its lock, held while the handle lives */
    char name[32];
    item items[MAX_ITEMS];
    uint64_t made;
};

/* NVRTC keeps one PCH heap per process, which creating and using a PCH
 * both fill: one such compile at a time in the process, whichever handle
 * or thread asks. The one piece of process-wide state in the tier. */
static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;

static pch_inproc *open_private(progcache__pch_tier *tier)
{
    pch_inproc *ip = progcache__calloc(1, sizeof *ip);
    if (!ip)
        return NULL;
    ip->dir_fd = ip->lock_fd = -1;
    char temp[32];
    /* A fresh name: a temp file's, then the directory made under it. */
    int fd = progcache__fs_create_temp(tier->dir_fd, "proc-", 0600, temp, sizeof temp);
    if (fd >= 0) {
        close(fd);
        (void)unlinkat(tier->dir_fd, temp, 0);
        if (mkdirat(tier->dir_fd, temp, 0700) == 0 &&
            (ip->dir_fd = progcache__fs_open_dir(tier->dir_fd, temp)) >= 0) {
            snprintf(ip->name, sizeof ip->name, "%s", temp);
            ip->lock_fd = openat(ip->dir_fd, "lock", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (ip->lock_fd < 0 || flock(ip->lock_fd, LOCK_EX | LOCK_NB) != 0) {
                /* Without its lock (a file system that refuses locks) no
                 * sweep could tell the directory alive or dead, and one
                 * left by a dead process would stay forever: not kept. */
                if (ip->lock_fd >= 0) {
                    close(ip->lock_fd);
                    ip->lock_fd = -1;
                    (void)unlinkat(ip->dir_fd, "lock", 0);
                }
                close(ip->dir_fd);
                ip->dir_fd = -1;
                (void)unlinkat(tier->dir_fd, temp, AT_REMOVEDIR);
            }
        }
    }
    return ip;
}

static void drop(pch_inproc *ip, item *it)
{
    if (it->m.pch[0])
        (void)unlinkat(ip->dir_fd, it->m.pch, 0);
    progcache__pch_manifest_free(&it->m);
    memset(it, 0, sizeof *it);
}

void progcache__pch_inproc_free(pch_inproc *ip)
{
    if (!ip)
        return;
    for (int i = 0; i < MAX_ITEMS; i++)
        if (ip->items[i].state)
            drop(ip, &ip->items[i]);
    if (ip->dir_fd >= 0) {
        (void)unlinkat(ip->dir_fd, "lock", 0);
        close(ip->dir_fd);
    }
    if (ip->lock_fd >= 0)
        close(ip->lock_fd);
    progcache__free(ip);
}

/* The item for hex (under tier->lock), or NULL. */
static item *find(pch_inproc *ip, const char *hex)
{
    for (int i = 0; i < MAX_ITEMS; i++)
        if (ip->items[i].state && !strcmp(ip->items[i].hex, hex))
            return &ip->items[i];
    return NULL;
}

/* A free item for hex (the oldest ready one replaced), marked MAKING. */
static item *claim(pch_inproc *ip, const char *hex)
{
    item *oldest = NULL;
    for (int i = 0; i < MAX_ITEMS; i++) {
        item *it = &ip->items[i];
        if (!it->state) {
            oldest = it;
            break;
        }
        if (it->state != ITEM_MAKING && (!oldest || it->made < oldest->made))
            oldest = it;
    }
    if (!oldest)
        return NULL;
    if (oldest->state)
        drop(ip, oldest);
    snprintf(oldest->hex, sizeof oldest->hex, "%s", hex);
    oldest->state = ITEM_MAKING;
    oldest->made = ++ip->made;
    return oldest;
}

/* Remove "<name>": using precompiled header file ... lines from log;
 * returns whether NVRTC said it used the PCH. */
static int strip_verbose(progcache_buf *log)
{
    static const char marker[] = "\": using precompiled header file \"";
    if (!log->data)
        return 0;
    char *s = (char *)log->data, *w = s;
    int used = 0;
    for (char *line = s; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        int verbose = line[0] == '"' && memmem(line, len, marker, sizeof marker - 1);
        used |= verbose;
        if (!verbose) {
            memmove(w, line, len);
            w += len;
        }
        line += len;
    }
    progcache__buf_set_size(log, (size_t)(w - s));
    return used;
}

/* Compile the program here with the item's PCH: 1 used (out, log filled,
 * *rc the result), 0 not used. */
static int compile_with(progcache_buf *out, progcache_buf *log, pch_job *job, pch_inproc *ip,
                        const char *pch, int *rc)
{
    char opt[PCH_NAME_MAX + 48];
    snprintf(opt, sizeof opt, "--use-pch=/proc/self/fd/%d/%s", ip->dir_fd, pch);
    progcache__nvrtc_pch extra = {{opt, "--pch-verbose=true"}, 2, 0, 0, 0};
    progcache_buf own = PROGCACHE_BUF_INIT;
    progcache_buf *l = log ? log : &own;
    pthread_mutex_lock(&heap_lock);
    *rc = progcache__nvrtc_compile_pch(out, l, job->lowered, &job->program->nvrtc, &extra);
    pthread_mutex_unlock(&heap_lock);
    int used = strip_verbose(l);
    progcache_buf_free(&own);
    return used && !*rc;
}

/* What a use needs of a ready item, copied under the tier's lock (another
 * thread may replace the item meanwhile). */
typedef struct ready {
    char pch[PCH_NAME_MAX];
    uint64_t size, plain_ms;
    unsigned char sha[32];
    pch_ident ident;
} ready;

/* Under tier->lock: whether the item for hex is ready and its headers are
 * as they were (copied into *out), 0 with why otherwise. */
static int check_ready(pch_inproc *ip, const char *hex, ready *out, char *why, size_t len)
{
    item *it = find(ip, hex);
    why[0] = '\0';
    if (!it || it->state != ITEM_READY)
        return 0;
    int moved;
    if (progcache__pch_deps_check(&it->m, why, len, &moved) != 0)
        return -1;
    snprintf(out->pch, sizeof out->pch, "%s", it->m.pch);
    out->size = it->m.pch_size;
    memcpy(out->sha, it->m.pch_sha, sizeof out->sha);
    out->ident = it->ident;
    out->plain_ms = it->m.plain_ms;
    return 1;
}

/* Whether the PCH file's bytes are the ones made: read in full only when
 * its identity moved since it was hashed (pch_verify.c; this process's
 * own file, so the identity is kept here, not in a stamp). */
static int intact(pch_inproc *ip, const ready *r)
{
    struct stat st;
    pch_ident now;
    unsigned char sha[32];
    int fd = progcache__fs_open_regular(ip->dir_fd, r->pch, O_RDONLY, 0, &st);
    if (fd >= 0)
        progcache__pch_ident_of(&now, &st);
    int ok = fd >= 0 && (uint64_t)st.st_size == r->size &&
             (progcache__pch_ident_same(&now, &r->ident) ||
              (progcache__pch_digest(fd, r->size, sha) == 0 && !memcmp(sha, r->sha, 32)));
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Under tier->lock: drop the item for hex if it still holds pch. */
static void drop_if(pch_inproc *ip, const char *hex, const char *pch)
{
    item *it = find(ip, hex);
    if (it && it->state == ITEM_READY && !strcmp(it->m.pch, pch))
        drop(ip, it);
}

/* Make the item's PCH here, while the helper records what NVRTC reads. */
static int make(pch_job *job, pch_inproc *ip, item *it, char *why, size_t len)
{
    char name[PCH_NAME_MAX], opt[PCH_NAME_MAX + 32];
    progcache__pch_new_name(name, job->hex);
    snprintf(opt, sizeof opt, "--create-pch=/proc/self/fd/%d/%s", ip->dir_fd, name);
    pch_call call;
    int started = progcache__pch_helper_start(&call, job, PROGCACHE__WIRE_DEPS, -1, NULL, 0);
    /* The prefix alone: the PCH then serves every program that starts so. */
    progcache_key_nvrtc_options prefix = job->program->nvrtc;
    prefix.source = job->source;
    prefix.source_len = job->prefix_len;
    prefix.num_name_expressions = 0;
    progcache__nvrtc_pch extra = {{opt, NULL}, 1, 1, 0, 0};
    progcache_buf none = PROGCACHE_BUF_INIT, log = PROGCACHE_BUF_INIT;
    pthread_mutex_lock(&heap_lock);
    int rc = progcache__nvrtc_compile_pch(&none, &log, NULL, &prefix, &extra);
    pthread_mutex_unlock(&heap_lock);
    progcache_buf_free(&none);
    progcache_buf_free(&log);
    pch_result r;
    memset(&r, 0, sizeof r);
    int helped = started == PROGCACHE_OK && progcache__pch_helper_finish(&r, &call) == PROGCACHE_OK;
    int ok = 0;
    struct stat st;
    int fd = -1;
    if (rc || extra.create_status != NVRTC_SUCCESS)
        snprintf(why, len, "NVRTC made none (%s)",
                 progcache__nvrtc_loaded()
                     ? progcache__nvrtc_loaded()->nvrtcGetErrorString(
                           (nvrtcResult)extra.create_status)
                     : "NVRTC is not loaded");
    else if (!helped || r.status != PROGCACHE__WIRE_OK || r.deps_incomplete) {
        snprintf(why, len, "the helper could not record what NVRTC read");
        /* Its NVRTC is not this process's: its record would not be either. */
        if (helped && r.status == PROGCACHE__WIRE_MISMATCH)
            progcache__pch_tier_drop(job->tier, &job->tier->helper_ok);
    }
    else if ((fd = progcache__fs_open_regular(ip->dir_fd, name, O_RDONLY, 0, &st)) < 0)
        snprintf(why, len, "it cannot be opened: %s", strerror(errno));
    else {
        pch_manifest *m = &it->m;
        snprintf(m->key, sizeof m->key, "%s", job->hex);
        snprintf(m->pch, sizeof m->pch, "%s", name);
        m->deps = r.deps.deps;
        m->num_deps = r.deps.num_deps;
        r.deps.deps = NULL;
        r.deps.num_deps = 0;
        m->pch_size = (uint64_t)st.st_size;
        struct stat after;
        ok = progcache__pch_deps_hash(m, why, len) == 0 &&
             progcache__pch_digest(fd, m->pch_size, m->pch_sha) == 0 && fstat(fd, &after) == 0;
        pch_ident before;
        progcache__pch_ident_of(&before, &st);
        progcache__pch_ident_of(&it->ident, &after);
        /* Moved while it was hashed: the next use reads it again. */
        if (ok && !progcache__pch_ident_same(&before, &it->ident))
            it->ident.size = UINT64_MAX;
    }
    if (fd >= 0)
        close(fd);
    progcache__pch_result_release(&r);
    if (!ok)
        (void)unlinkat(ip->dir_fd, name, 0);
    return ok;
}

/* A use of this process's PCH for job: 1 done (*rc), 0 not. The first
 * use, right after making it, is part of the miss, not a hit. */
static int use(progcache_buf *out, progcache_buf *log, pch_job *job, pch_inproc *ip, int made,
               int *rc)
{
    progcache__pch_tier *tier = job->tier;
    char why[512];
    ready r;
    pthread_mutex_lock(&tier->lock);
    int state = check_ready(ip, job->hex, &r, why, sizeof why);
    if (state < 0)
        drop(ip, find(ip, job->hex));
    pthread_mutex_unlock(&tier->lock);
    if (state == 0)
        return 0;
    double t = progcache__clock_ms();
    if (state > 0) {
        if (intact(ip, &r) && compile_with(out, log, job, ip, r.pch, rc)) {
            if (made)
                return 1;
            progcache__pch_count(job, PROGCACHE_STAT_PCH_HITS, 1);
            double ms = progcache__clock_ms() - t;
            if ((double)r.plain_ms > ms)
                progcache__pch_count(job, PROGCACHE_STAT_PCH_MS_SAVED,
                                     (uint64_t)((double)r.plain_ms - ms));
            return 1;
        }
        snprintf(why, sizeof why, "its file is damaged, or NVRTC did not use it");
        pthread_mutex_lock(&tier->lock);
        drop_if(ip, job->hex, r.pch);
        pthread_mutex_unlock(&tier->lock);
    }
    progcache__pch_count(job, PROGCACHE_STAT_PCH_REJECTED, 1);
    progcache__pch_log(job->program, PROGCACHE_LOG_INFO,
                       "progcache: this process's PCH %.16s... not used: %s; removed", job->hex,
                       why);
    return 0;
}

int progcache__pch_inproc_compile(progcache_buf *out, progcache_buf *log, pch_job *job)
{
    progcache__pch_tier *tier = job->tier;
    pthread_mutex_lock(&tier->lock);
    if (!tier->inproc)
        tier->inproc = open_private(tier);
    pch_inproc *ip = tier->inproc;
    pthread_mutex_unlock(&tier->lock);
    if (!ip || ip->dir_fd < 0) {
        progcache__pch_log_once(tier, job->program, PCH_LOGGED_INPROC, PROGCACHE_LOG_WARN,
                                "progcache: no private PCH directory in %s; compiling without "
                                "PCHs", tier->dir ? tier->dir : "the cache");
        return progcache__pch_here(out, log, job);
    }
    int rc;
    if (use(out, log, job, ip, 0, &rc))
        return rc;
    progcache__pch_count(job, PROGCACHE_STAT_PCH_MISSES, 1);
    pch_seen seen;
    if (!progcache__pch_seen_read(tier, job->hex, &seen) || seen.no_pay ||
        seen.plain_ms < tier->settings.min_ms)
        return progcache__pch_plain(out, log, job);
    /* One maker per prefix; a prefix that failed here is not tried again. */
    pthread_mutex_lock(&tier->lock);
    item *it = find(ip, job->hex) ? NULL : claim(ip, job->hex);
    pthread_mutex_unlock(&tier->lock);
    if (!it)
        return progcache__pch_plain(out, log, job);
    char why[512] = "";
    int made = make(job, ip, it, why, sizeof why);
    pthread_mutex_lock(&tier->lock);
    it->m.plain_ms = seen.plain_ms;
    it->state = made ? ITEM_READY : ITEM_FAILED;
    pthread_mutex_unlock(&tier->lock);
    if (!made) {
        progcache__pch_log(job->program, PROGCACHE_LOG_INFO,
                           "progcache: no PCH for %.16s... in this process: %s", job->hex, why);
        return progcache__pch_plain(out, log, job);
    }
    progcache__pch_count(job, PROGCACHE_STAT_PCH_CREATED, 1);
    if (use(out, log, job, ip, 1, &rc))
        return rc;
    return progcache__pch_here(out, log, job);
}
