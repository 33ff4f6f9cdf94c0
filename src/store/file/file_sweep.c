/* What crashed writers leave behind, and clearing: the only deletions of
 * the file store besides eviction, each limited to names the store makes
 * (file_names.c; docs/RELIABILITY.md, "What the cache may delete"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "fs.h"
#include "sha256.h"
#include "store/file/file_store.h"

/* Temp files older than this belong to a writer that crashed: no live
 * writer is still between create and rename (cuda.core uses the same). */
#define TMP_STALE_SECONDS 3600

/* ---- temp sweeping and clearing ---------------------------------------- */

/* Remove from the directory rel the files named as is_temp says that a
 * crashed writer of ours (or cuda.core's) left: regular files of this
 * user, untouched for an hour. Anything else there is not ours to judge. */
typedef struct {
    const file_store *fs;
    int (*is_temp)(const char *);
    time_t cutoff;
} sweep_ctx;

static int sweep_name(void *ctx, int dirfd, const char *name, unsigned char type)
{
    const sweep_ctx *sc = ctx;
    struct stat st;
    (void)type;
    if (sc->is_temp(name) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(st.st_mode) && st.st_uid == sc->fs->euid && st.st_mtime < sc->cutoff)
        (void)unlinkat(dirfd, name, 0);
    return 0;
}

static void sweep_dir(file_store *fs, const char *rel, int (*is_temp)(const char *))
{
    int dirfd = progcache__file_dir(fs, rel);
    if (dirfd < 0)
        return;
    /* Old enough that no live writer can still be between create and
     * rename; a young temp file may be another process's put in flight. */
    sweep_ctx sc = {fs, is_temp, time(NULL) - TMP_STALE_SECONDS};
    (void)progcache__fs_each_name(dirfd, sweep_name, &sc);
}

void progcache__file_sweep_tmp(file_store *fs, int state_dir_too)
{
    sweep_dir(fs, "tmp", progcache__file_is_tmp_name);
    sweep_dir(fs, FILE_TMP_DIR, progcache__file_is_own_tmp_name);
    if (state_dir_too)
        sweep_dir(fs, FILE_STATE_DIR, progcache__file_is_state_tmp_name);
    if (state_dir_too)
        sweep_dir(fs, FILE_SHARD_RECORD_DIR, progcache__file_is_shard_record_tmp_name);
    if (state_dir_too && __atomic_load_n(&fs->seal_sidecar, __ATOMIC_RELAXED))
        sweep_dir(fs, FILE_STATE_DIR "/seals", progcache__file_is_seal_tmp_name);
}

typedef struct {
    file_store *fs;
    int dirfd;
    int rc;
} clear_ctx;

static int clear_entry(void *ctx, int shard, const char *name, const struct stat *st)
{
    clear_ctx *cc = ctx;
    if (progcache__fs_unlinkat(cc->dirfd, name, 0) == 0) {
        progcache__file_account(cc->fs, shard, -(int64_t)st->st_size, -1);
        char entry[FILE_NAME_LEN];
        snprintf(entry, 3, "%02x", shard);
        memcpy(entry + 2, name, FILE_NAME_LEN - 2);
        progcache__file_sidecar_forget(cc->fs, entry);
    }
    else if (errno != ENOENT && !cc->rc)
        cc->rc = progcache__error_errno(progcache__code_from_errno(errno), errno,
                                        "cannot remove %s/entries/%02x/%s", cc->fs->root, shard,
                                        name);
    return 0;
}

int progcache__file_clear_shard(file_store *fs, int shard)
{
    char rel[16];
    snprintf(rel, sizeof rel, "entries/%02x", shard);
    clear_ctx cc = {fs, progcache__file_dir(fs, rel), PROGCACHE_OK};
    if (cc.dirfd < 0)
        return PROGCACHE_OK;
    progcache__file_scan_shard(fs, shard, clear_entry, &cc);
    close(cc.dirfd);
    return cc.rc;
}

/* ---- clear ------------------------------------------------------------------ */

/* Remove one name of an explain index shard when it is a regular file of
 * the index's names (an index file, or a publish's temp file): never a
 * link, a directory or anything else somebody put there (rule 2). */
static int clear_index_name(void *ctx, int dirfd, const char *name, unsigned char type)
{
    const file_store *fs = ctx;
    (void)type;
    size_t n = strlen(name);
    int ours = progcache__file_is_entry_name(name) ||
               (n == 12 + 16 && !strncmp(name, "explain-tmp-", 12) &&
                progcache__is_hex(name + 12, 16));
    struct stat st;
    if (ours && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        progcache__file_trusted(fs, &st))
        (void)unlinkat(dirfd, name, 0);
    return 0;
}

static int clear_index_shard(void *ctx, int dirfd, const char *name, unsigned char type)
{
    (void)dirfd;
    (void)type;
    file_store *fs = ctx;
    char rel[32];
    if (!progcache__file_is_shard_name(name))
        return 0;
    snprintf(rel, sizeof rel, FILE_EXPLAIN_DIR "/%s", name);
    int shard = progcache__file_dir(fs, rel); /* a link: refused, never followed */
    if (shard >= 0)
        progcache__fs_each_name(shard, clear_index_name, fs); /* closes shard */
    return 0;
}

/* The explain index (src/dir/dir_explain.c) names stored keys' inputs:
 * its records name no entry once the entries are gone. Shard directories
 * stay; failures are ignored (an index file left is a stale record,
 * never a wrong answer). */
static void clear_index(file_store *fs)
{
    int dir = progcache__file_dir(fs, FILE_EXPLAIN_DIR);
    if (dir >= 0)
        progcache__fs_each_name(dir, clear_index_shard, fs); /* closes dir */
}

int progcache__file_clear(file_store *fs, progcache_progress_fn progress, void *ctx,
                          file_clear_totals *totals)
{
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__file_refuse_write(fs, "clear");
    uint64_t bytes0, count0, bytes, count;
    int rc = PROGCACHE_OK;
    progcache__file_totals(fs, &bytes0, &count0);
    /* As the store's clear (file_store.c), shard by shard, saying so.
     * Each shard measured once emptied, under the lock (taken a shard at
     * a time, and never while progress runs: it may call into the cache):
     * a removal counted an entry of another program's that no counter
     * held yet, and a measurement under way in slices (file_catch_up.c)
     * saw names that are gone; this one stands for both. */
    for (int shard = 0; shard < FILE_SHARDS; shard++) {
        int locked = progcache__file_lock(fs);
        int r = progcache__file_clear_shard(fs, shard);
        (void)progcache__file_measure_shard(fs, shard, locked);
        progcache__file_unlock(fs);
        if (r && !rc)
            rc = r;
        if (progress && (r = progress(ctx, "removing", (uint64_t)shard + 1, FILE_SHARDS))) {
            rc = r;
            break;
        }
    }
    progcache__file_sweep_tmp(fs, 1);
    clear_index(fs); /* i35-explain: its records name no entry now */
    progcache__file_totals(fs, &bytes, &count);
    if (totals)
        *totals = (file_clear_totals){1, bytes0, count0, bytes, count};
    return rc;
}
