/* The PCH tier's directory: <cache>/progcache/pch-<uid>/ (docs/FORMAT.md).
 *
 *   <key>.manifest          what the PCH was made from; names its file
 *   <key>-<16 hex>.pch      the PCH, as NVRTC wrote it; never changed after
 *   <key>.stamp             the PCH file's identity when last hashed (pch_verify.c)
 *   <key>.seen              a prefix seen without a PCH: its plain compile time
 *   <key>.making            a detached helper is making its PCH (pch_detach.c)
 *   <key>.made              what that helper answered, for the next compile to publish
 *   nopin-<nvrtc build>     this NVRTC's heap cannot be pinned (30 days)
 *   lock                    eviction, one process at a time (flock)
 *   proc-<16 hex>/          a process's own PCHs (pch_inproc.c), locked while it lives
 *   tmp-<16 hex>            a manifest or record being written
 *
 * One directory per user, mode 0700, checked at open: a PCH is a memory
 * image NVRTC maps back with raw pointers, so nobody else may write one
 * (docs/SECURITY.md). A PCH file is never written in place: NVRTC maps it,
 * and a PCH truncated under a process that maps it kills that process with
 * SIGBUS. It is published by linking its manifest in after it is complete
 * and synced, and removed by unlinking, which a process using it survives. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "pch/pch_tier.h"
#include "dir/dir.h"
#include "store/store_calls.h"
#include "fs.h"
#include "lru.h"
#include "sha256.h"

/* Temp files older than this belong to a process that died. */
#define STALE_SECONDS 3600
/* Seen records and nopin markers expire: conditions change. */
#define RECORD_SECONDS (30 * 86400)
#define MANIFEST_MAX ((size_t)64 << 20)

void progcache__pch_dir_open(progcache__pch_tier *tier, progcache_store *home,
                             const char *cache_dir)
{
    char name[64], why[200];
    progcache__store_place_path(name, sizeof name, PROGCACHE__PLACE_PCH);
    /* The file store owns the directory's layout and makes it: exactly
     * 0700 whatever the umask, and without the setgid bit a team's
     * progcache/ would pass on (PCHs are one user's). */
    int fd = progcache__store_open_private_dir(home, PROGCACHE__PLACE_PCH, why, sizeof why);
    if (fd >= 0) {
        tier->dir_fd = fd;
        return;
    }
    size_t len = strlen(cache_dir) + strlen(name) + strlen(why) + 32;
    tier->dir_error = progcache__malloc(len);
    if (tier->dir_error)
        snprintf(tier->dir_error, len, "%s/%s: %s", cache_dir, name, why);
}

/* ---- small files --------------------------------------------------------------- */

/* Read a small file of ours (regular, this user's) into buf; 0 or -1. */
static int read_small(int dirfd, const char *name, progcache_buf *buf, size_t max)
{
    struct stat st;
    int fd = progcache__fs_open_regular(dirfd, name, O_RDONLY, 0, &st);
    if (fd < 0)
        return -1;
    int rc = -1;
    if (st.st_uid == geteuid() && (uint64_t)st.st_size <= max &&
        progcache__buf_reserve(buf, (size_t)st.st_size) == PROGCACHE_OK) {
        ssize_t n = progcache__fs_read_full(fd, buf->data, (size_t)st.st_size);
        if (n == (ssize_t)st.st_size) {
            progcache__buf_set_size(buf, (size_t)n);
            rc = 0;
        }
    }
    close(fd);
    return rc;
}

static void seen_name(char out[PCH_NAME_MAX], const char *hex)
{
    snprintf(out, PCH_NAME_MAX, "%s.seen", hex);
}

static void manifest_name(char out[PCH_NAME_MAX], const char *hex)
{
    snprintf(out, PCH_NAME_MAX, "%s.manifest", hex);
}

int progcache__pch_seen_read(progcache__pch_tier *tier, const char *hex, pch_seen *out)
{
    char name[PCH_NAME_MAX];
    seen_name(name, hex);
    progcache_buf text = PROGCACHE_BUF_INIT;
    memset(out, 0, sizeof *out);
    int found = 0;
    unsigned long long plain, heap;
    if (read_small(tier->dir_fd, name, &text, 4096) == 0 &&
        sscanf((const char *)text.data,
               "progcache-pch-seen 1\nplain_ms %llu\nheap_required %llu\nno_pay %d\nfailures %d\n",
               &plain, &heap, &out->no_pay, &out->failures) == 4) {
        out->plain_ms = plain;
        out->heap_required = heap;
        found = 1;
    }
    progcache_buf_free(&text);
    return found;
}

void progcache__pch_seen_write(progcache__pch_tier *tier, const char *hex, const pch_seen *seen)
{
    char name[PCH_NAME_MAX], text[256];
    seen_name(name, hex);
    int n = snprintf(text, sizeof text,
                     "progcache-pch-seen 1\nplain_ms %llu\nheap_required %llu\nno_pay %d\n"
                     "failures %d\n",
                     (unsigned long long)seen->plain_ms, (unsigned long long)seen->heap_required,
                     seen->no_pay, seen->failures);
    /* Best effort: without it a prefix is only seen once more. */
    (void)progcache__fs_publish(tier->dir_fd, name, "tmp-", text, (size_t)n, 1);
}

int progcache__pch_nopin_read(progcache__pch_tier *tier)
{
    char name[PCH_ID_HEX + 8];
    struct stat st;
    snprintf(name, sizeof name, "nopin-%s", tier->nvrtc_id);
    return fstatat(tier->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

void progcache__pch_nopin_write(progcache__pch_tier *tier)
{
    char name[PCH_ID_HEX + 8];
    snprintf(name, sizeof name, "nopin-%s", tier->nvrtc_id);
    (void)progcache__fs_publish(tier->dir_fd, name, "tmp-", "", 0, 0);
}

void progcache__pch_new_name(char out[PCH_NAME_MAX], const char *hex)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    }
    snprintf(out, PCH_NAME_MAX, "%s-%016llx.pch", hex, (unsigned long long)r);
}

/* ---- finding, removing, publishing ------------------------------------------------ */

/* The PCH file a manifest names (its third line), without parsing the rest. */
static int named_pch(int dirfd, const char *manifest, char out[PCH_NAME_MAX])
{
    struct stat st;
    int fd = progcache__fs_open_regular(dirfd, manifest, O_RDONLY, 0, &st);
    if (fd < 0)
        return -1;
    char head[512];
    ssize_t n = progcache__fs_read_full(fd, head, sizeof head - 1);
    close(fd);
    if (n <= 0)
        return -1;
    head[n] = '\0';
    const char *p = strstr(head, "\npch ");
    return p && sscanf(p + 5, "%95s", out) == 1 ? 0 : -1;
}

void progcache__pch_remove(progcache__pch_tier *tier, const char *hex, const char *pch_name)
{
    char manifest[PCH_NAME_MAX], aside[32], named[PCH_NAME_MAX];
    manifest_name(manifest, hex);
    /* Moved aside first, so a manifest another process published meanwhile
     * (for a new PCH) is put back instead of deleted. */
    if (progcache__fs_rename_aside(tier->dir_fd, manifest, tier->dir_fd, "tmp-", aside,
                                   sizeof aside) == 0) {
        if (pch_name && named_pch(tier->dir_fd, aside, named) == 0 && strcmp(named, pch_name))
            (void)progcache__fs_linkat(tier->dir_fd, aside, tier->dir_fd, manifest);
        (void)unlinkat(tier->dir_fd, aside, 0);
    }
    if (pch_name && *pch_name) {
        (void)unlinkat(tier->dir_fd, pch_name, 0);
        progcache__pch_stamp_remove(tier->dir_fd, pch_name);
    }
}

void progcache__pch_found_release(pch_found *f)
{
    progcache__pch_manifest_free(&f->manifest);
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

static int reject(pch_found *out, const pch_job *job, const char *pch, char *why, size_t len,
                  const char *fmt, const char *detail)
{
    if (fmt)
        snprintf(why, len, fmt, detail);
    progcache__pch_remove(job->tier, job->hex, pch);
    progcache__pch_found_release(out);
    return PCH_STALE;
}

int progcache__pch_find(pch_found *out, const pch_job *job, char *why, size_t why_len)
{
    progcache__pch_tier *tier = job->tier;
    memset(out, 0, sizeof *out);
    out->fd = -1;
    char name[PCH_NAME_MAX];
    manifest_name(name, job->hex);
    progcache_buf text = PROGCACHE_BUF_INIT;
    if (read_small(tier->dir_fd, name, &text, MANIFEST_MAX) != 0) {
        progcache_buf_free(&text);
        return PCH_NONE;
    }
    int rc = progcache__pch_manifest_parse(&out->manifest, (const char *)text.data, text.size);
    progcache_buf_free(&text);
    pch_manifest *m = &out->manifest;
    if (rc)
        return reject(out, job, NULL, why, why_len, "its manifest is damaged (%s)",
                      progcache_error_last());
    if (strcmp(m->key, job->hex) != 0)
        return reject(out, job, NULL, why, why_len, "its manifest is of another key%s", "");
    int moved = 0;
    rc = progcache__pch_deps_check(m, why, why_len, &moved);
    if (rc < 0) {
        progcache__pch_found_release(out);
        return PCH_NONE;
    }
    if (rc)
        return reject(out, job, m->pch, why, why_len, NULL, NULL);
    struct stat st;
    out->fd = progcache__fs_open_regular(tier->dir_fd, m->pch, O_RDONLY, 0, &st);
    if (out->fd < 0)
        return reject(out, job, m->pch, why, why_len, "its file %s cannot be opened", m->pch);
    if (st.st_uid != geteuid() || (uint64_t)st.st_size != m->pch_size)
        return reject(out, job, m->pch, why, why_len, "its file %s has another size or owner",
                      m->pch);
    rc = progcache__pch_verify(tier->dir_fd, out->fd, m->pch, m->pch_size, m->pch_sha,
                               &out->full);
    if (rc < 0) {
        progcache__pch_found_release(out);
        return PCH_NONE;
    }
    if (rc)
        return reject(out, job, m->pch, why, why_len, "its file %s is damaged (SHA-256)", m->pch);
    if (moved)
        progcache__pch_republish(tier, m);
    return PCH_FOUND;
}

static int publish_manifest(progcache__pch_tier *tier, const pch_manifest *m, int replace)
{
    progcache_buf text = PROGCACHE_BUF_INIT;
    char name[PCH_NAME_MAX];
    manifest_name(name, m->key);
    int rc = progcache__pch_manifest_format(&text, m);
    if (!rc && progcache__fs_publish(tier->dir_fd, name, "tmp-", text.data, text.size, replace))
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write %s/%s", tier->dir, name);
    progcache_buf_free(&text);
    return rc;
}

void progcache__pch_republish(progcache__pch_tier *tier, const pch_manifest *m)
{
    (void)publish_manifest(tier, m, 1);
}

int progcache__pch_publish(progcache__pch_tier *tier, const pch_manifest *m)
{
    char named[PCH_NAME_MAX], manifest[PCH_NAME_MAX];
    struct stat st;
    int rc = PROGCACHE_OK;
    int fd = progcache__fs_open_regular(tier->dir_fd, m->pch, O_RDONLY, 0, &st);
    if (fd < 0 || (uint64_t)st.st_size != m->pch_size || progcache__fs_fsync(fd) != 0)
        rc = progcache__error_errno(PROGCACHE_EIO, fd < 0 ? errno : EIO, "cannot sync %s/%s",
                                    tier->dir, m->pch);
    if (fd >= 0)
        close(fd);
    if (!rc)
        rc = publish_manifest(tier, m, 0);
    manifest_name(manifest, m->key);
    /* Another process may have published a PCH for the key first: its
     * manifest stays, this PCH goes. */
    if (!rc && (named_pch(tier->dir_fd, manifest, named) != 0 || strcmp(named, m->pch) != 0))
        rc = progcache__error(PROGCACHE_EIO, "another process published a PCH for this prefix "
                                             "first");
    if (!rc) {
        int d = dup(tier->dir_fd);
        if (d >= 0) {
            (void)progcache__fs_fsync(d);
            close(d);
        }
    } else {
        (void)unlinkat(tier->dir_fd, m->pch, 0);
    }
    return rc;
}

/* ---- the budget and the sweep ---------------------------------------------------------- */

typedef struct pch_file {
    progcache__lru_item lru; /* first: atime and size, for util/lru.c */
    char name[PCH_NAME_MAX];
} pch_file;

typedef struct sweep {
    progcache__pch_tier *tier;
    time_t now;
    pch_file *files;
    size_t num, cap;
    int oom;
} sweep;

static int hex_name(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static int is_pch_name(const char *name)
{
    return strlen(name) == PCH_KEY_HEX + 21 && hex_name(name, PCH_KEY_HEX) &&
           name[PCH_KEY_HEX] == '-' && hex_name(name + PCH_KEY_HEX + 1, 16) &&
           !strcmp(name + PCH_KEY_HEX + 17, ".pch");
}

static int older(const struct stat *st, time_t now, time_t seconds)
{
    return st->st_mtime < now - seconds;
}

/* A process's private directory whose lock nobody holds: it died. */
static void sweep_private(int dirfd, const char *name)
{
    int d = progcache__fs_open_dir(dirfd, name);
    if (d < 0)
        return;
    int lock = openat(d, "lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0) {
        DIR *dir = fdopendir(dup(d));
        struct dirent *e;
        while (dir && (e = readdir(dir)) != NULL)
            if (is_pch_name(e->d_name) || (!strncmp(e->d_name, "tmp-", 4) &&
                                            strlen(e->d_name) == 20))
                (void)unlinkat(d, e->d_name, 0);
        if (dir)
            closedir(dir);
        (void)unlinkat(d, "lock", 0);
        (void)unlinkat(dirfd, name, AT_REMOVEDIR);
    }
    if (lock >= 0)
        close(lock);
    close(d);
}

static int sweep_one(void *ctx, int dirfd, const char *name, unsigned char type)
{
    sweep *sw = ctx;
    struct stat st;
    (void)type;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid())
        return 0;
    size_t len = strlen(name);
    if (S_ISDIR(st.st_mode)) {
        if (len == 21 && !strncmp(name, "proc-", 5) && hex_name(name + 5, 16))
            sweep_private(dirfd, name);
        return 0;
    }
    if (!S_ISREG(st.st_mode))
        return 0;
    int temp = len == 20 && !strncmp(name, "tmp-", 4) && hex_name(name + 4, 16);
    /* A detached creation's answer or claim (pch_detach.c) nobody took up
     * within the hour: stale, as a temp file is. */
    temp = temp || (hex_name(name, PCH_KEY_HEX) && (!strcmp(name + PCH_KEY_HEX, ".made") ||
                                                   !strcmp(name + PCH_KEY_HEX, ".making")));
    int record = (len == PCH_KEY_HEX + 5 && hex_name(name, PCH_KEY_HEX) &&
                  !strcmp(name + PCH_KEY_HEX, ".seen")) ||
                 (len == PCH_KEY_HEX + 6 && hex_name(name, PCH_KEY_HEX) &&
                  !strcmp(name + PCH_KEY_HEX, ".stamp")) ||
                 (!strncmp(name, "nopin-", 6) && hex_name(name + 6, len - 6));
    if ((temp && older(&st, sw->now, STALE_SECONDS)) ||
        (record && older(&st, sw->now, RECORD_SECONDS))) {
        (void)unlinkat(dirfd, name, 0);
        return 0;
    }
    if (!is_pch_name(name))
        return 0;
    /* A PCH no manifest names, an hour old: a creation that died. */
    char manifest[PCH_NAME_MAX], named[PCH_NAME_MAX];
    snprintf(manifest, sizeof manifest, "%.*s.manifest", PCH_KEY_HEX, name);
    if (older(&st, sw->now, STALE_SECONDS) &&
        (named_pch(dirfd, manifest, named) != 0 || strcmp(named, name) != 0)) {
        (void)unlinkat(dirfd, name, 0);
        return 0;
    }
    if (sw->num == sw->cap) {
        size_t cap = sw->cap ? 2 * sw->cap : 32;
        pch_file *f = progcache__realloc(sw->files, cap * sizeof *f);
        if (!f) {
            sw->oom = 1;
            return 1;
        }
        sw->files = f;
        sw->cap = cap;
    }
    pch_file *f = &sw->files[sw->num++];
    snprintf(f->name, sizeof f->name, "%s", name);
    f->lru.size = (uint64_t)st.st_size;
    f->lru.atime = st.st_atim;
    /* A use touches the PCH's stamp (pch_verify.c): the later of the two. */
    char stamp[PCH_NAME_MAX];
    struct stat sst;
    snprintf(stamp, sizeof stamp, "%.*s.stamp", PCH_KEY_HEX, name);
    if (fstatat(dirfd, stamp, &sst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sst.st_mode) &&
        sst.st_uid == geteuid() &&
        (sst.st_mtim.tv_sec > st.st_atim.tv_sec ||
         (sst.st_mtim.tv_sec == st.st_atim.tv_sec && sst.st_mtim.tv_nsec > st.st_atim.tv_nsec)))
        f->lru.atime = sst.st_mtim;
    return 0;
}

typedef struct evict_ctx {
    progcache__pch_tier *tier;
    const char *keep;
} evict_ctx;

static int evict_visit(void *ctx, void *item, size_t i)
{
    evict_ctx *e = ctx;
    const pch_file *f = item;
    (void)i;
    if (e->keep && !strcmp(f->name, e->keep))
        return 0;
    char hex[PCH_KEY_HEX + 1];
    snprintf(hex, sizeof hex, "%.*s", PCH_KEY_HEX, f->name);
    progcache__pch_remove(e->tier, hex, f->name);
    return PROGCACHE__LRU_GONE;
}

void progcache__pch_evict(progcache__pch_tier *tier, const char *keep)
{
    struct stat st;
    int lock = progcache__fs_open_regular(tier->dir_fd, "lock", O_RDWR | O_CREAT, 0600, &st);
    if (lock < 0)
        return;
    if (flock(lock, LOCK_EX | LOCK_NB) != 0 && !progcache__fs_lock_unsupported(errno)) {
        close(lock);
        return; /* another process is at it */
    }
    /* A file system that refuses locks (docs/SHARED.md): evict anyway,
     * uncoordinated, so the PCH cap holds; each removal is by name and a
     * second evictor finds the file gone. */
    sweep sw = {tier, time(NULL), NULL, 0, 0, 0};
    /* A descriptor of its own: a dup would share (and find at its end)
     * the offset of the last walk. */
    int d = openat(tier->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0)
        (void)progcache__fs_each_name(d, sweep_one, &sw);
    uint64_t total = 0;
    for (size_t i = 0; i < sw.num; i++)
        total += sw.files[i].lru.size;

    if (!sw.oom && total > tier->settings.max_size) {
        /* Least recently used first: a use touches the PCH's access time. */
        evict_ctx e = {tier, keep};
        progcache__lru_sort(sw.files, sw.num, sizeof *sw.files);
        (void)progcache__lru_evict(sw.files, sw.num, sizeof *sw.files, &total,
                                   tier->settings.max_size, 0, evict_visit, &e);
    }
    progcache__free(sw.files);
    close(lock); /* releases the flock */
}
