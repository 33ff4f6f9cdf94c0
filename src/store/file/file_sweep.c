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
#include "options.h"
#include "fs.h"
#include "store/file/file_admin.h"
#include "store/file/file_explain.h"
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

int progcache_file_clear(progcache_prune_result *out, progcache_file *file,
                         progcache_progress_fn progress, void *ctx)
{
    file_store *fs = file;
    int rc = progcache__admin_file(file, "progcache_file_clear");
    if (rc)
        return rc;
    if (out && (rc = progcache__version_check(out, PROGCACHE_PRUNE_RESULT_VERSION,
                                              "progcache_file_clear", "out",
                                              "progcache_prune_result")))
        return rc;
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__file_refuse_write(fs, "clear");
    uint64_t bytes0, count0, bytes, count;
    progcache__file_totals(fs, &bytes0, &count0);
    /* As the store's clear (file_store.c), shard by shard, saying so. */
    for (int shard = 0; shard < FILE_SHARDS; shard++) {
        int r = progcache__file_clear_shard(fs, shard);
        if (r && !rc)
            rc = r;
        if (progress && (r = progress(ctx, "removing", (uint64_t)shard + 1, FILE_SHARDS))) {
            rc = r;
            break;
        }
    }
    progcache__file_sweep_tmp(fs, 1);
    progcache__file_explain_clear(fs); /* i35-explain: its records name no entry now */
    progcache__file_totals(fs, &bytes, &count);
    if (out) {
        unsigned int version = out->version;
        memset(out, 0, sizeof *out);
        out->version = version;
        out->removed = count0 > count ? count0 - count : 0;
        out->removed_bytes = bytes0 > bytes ? bytes0 - bytes : 0;
        out->entries = count;
        out->total_size = bytes;
    }
    return rc;
}
