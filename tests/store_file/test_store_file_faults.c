/* The file store when things go wrong: recovery from removed directories,
 * symbolic links not followed, clear errors for unusable directories and
 * failing system calls. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "fs_faults.h"
#include "sha256.h"
#include "store_file_fixture.h"

/* Directories removed by hand are recreated; stale temp files are swept,
 * young ones (a put in flight elsewhere) are kept. */
static void test_recovery(void)
{
    char *dir = test_mkdtemp("recover");
    progcache_store *s = open_store(dir, 0);
    char p[4200];
    snprintf(p, sizeof p, "%s/progcache/tmp", dir);
    test_rmtree(p);
    CHECK_OK(progcache_store_put(s, "k", 1, "v1", 2));
    char entry[4400];
    entry_path(entry, sizeof entry, dir, "k", 1);
    char shard[4400];
    snprintf(shard, sizeof shard, "%s", entry);
    *strrchr(shard, '/') = '\0';
    test_rmtree(shard);
    CHECK_OK(progcache_store_put(s, "k", 1, "v2", 2));
    snprintf(p, sizeof p, "%s/entries", dir);
    test_rmtree(p);
    CHECK_OK(progcache_store_put(s, "k", 1, "v3", 2));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, s, "k", 1));
    CHECK(buf.size == 2 && memcmp(buf.data, "v3", 2) == 0);
    progcache_store_free(s);

    char old[4400], young[4400];
    snprintf(p, sizeof p, "%s/tmp", dir); /* as cuda.core makes it */
    CHECK(mkdir(p, 0700) == 0);
    snprintf(old, sizeof old, "%s/tmp/entry-crashed_", dir);
    snprintf(young, sizeof young, "%s/tmp/entry-inflight", dir);
    FILE *f = fopen(old, "w");
    CHECK(f && fclose(f) == 0);
    f = fopen(young, "w");
    CHECK(f && fclose(f) == 0);
    struct timespec times[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    CHECK(utimensat(AT_FDCWD, old, times, 0) == 0);
    s = open_store(dir, 0);
    struct stat st;
    CHECK(stat(old, &st) != 0 && errno == ENOENT);
    CHECK(stat(young, &st) == 0);
    progcache_store_free(s);
    progcache_buf_free(&buf);
    test_rmdtemp(dir);
}

/* Symbolic links in place of entries or shard directories are not followed. */
static void test_symlinks_not_followed(void)
{
    char *dir = test_mkdtemp("links");
    progcache_store *s = open_store(dir, 0);
    char target[4200], entry[4400];
    snprintf(target, sizeof target, "%s/secret", dir);
    FILE *f = fopen(target, "w");
    CHECK(f && fputs("not an artifact", f) >= 0 && fclose(f) == 0);
    entry_path(entry, sizeof entry, dir, "k", 1);
    char shard[4400];
    snprintf(shard, sizeof shard, "%s", entry);
    *strrchr(shard, '/') = '\0';
    CHECK(mkdir(shard, 0755) == 0);
    CHECK(symlink(target, entry) == 0);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "k", 1));
    /* Keys are hashed into names: no key reaches outside the root. */
    const char evil[] = "../../../../../../tmp/progcache-escape";
    CHECK_OK(progcache_store_put(s, evil, sizeof evil - 1, "x", 1));
    char evil_path[4400];
    entry_path(evil_path, sizeof evil_path, dir, evil, sizeof evil - 1);
    CHECK(strncmp(evil_path, dir, strlen(dir)) == 0 && strstr(evil_path, "..") == NULL);
    struct stat escaped;
    CHECK(stat("/tmp/progcache-escape", &escaped) != 0);
    CHECK(stat(evil_path, &escaped) == 0);

    /* A put replaces the link itself, never writes through it. */
    CHECK_OK(progcache_store_put(s, "k", 1, "real", 4));
    CHECK_OK(progcache_store_get(&buf, s, "k", 1));
    CHECK(buf.size == 4);
    size_t n;
    char *secret = test_read_file(target, &n);
    CHECK(secret && n == 15);
    free(secret);

    /* progcache/tmp/ replaced by a link to elsewhere: puts refuse to write
     * through it. */
    char tmp[4300], elsewhere[4300];
    snprintf(tmp, sizeof tmp, "%s/progcache/tmp", dir);
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", dir);
    CHECK(mkdir(elsewhere, 0700) == 0);
    test_rmtree(tmp);
    CHECK(symlink(elsewhere, tmp) == 0);
    CHECK_RC(PROGCACHE_EIO, progcache_store_put(s, "via-link", 8, "x", 1));
    CHECK(strstr(progcache_error_last(), "tmp") != NULL);
    DIR *d = opendir(elsewhere);
    CHECK(d != NULL);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        files += e->d_name[0] != '.';
    closedir(d);
    CHECK(files == 0);
    CHECK(unlink(tmp) == 0);

    /* A shard directory that is a link to elsewhere: a miss. */
    char outside[4200];
    snprintf(outside, sizeof outside, "%s/outside", dir);
    CHECK(mkdir(outside, 0755) == 0);
    char entry2[4400];
    entry_path(entry2, sizeof entry2, dir, "other", 5);
    char shard2[4400], name2[128];
    snprintf(shard2, sizeof shard2, "%s", entry2);
    snprintf(name2, sizeof name2, "%s", strrchr(entry2, '/') + 1);
    *strrchr(shard2, '/') = '\0';
    test_rmtree(shard2);
    CHECK(symlink(outside, shard2) == 0);
    char planted[4500];
    snprintf(planted, sizeof planted, "%s/%s", outside, name2);
    f = fopen(planted, "w");
    CHECK(f && fputs("planted", f) >= 0 && fclose(f) == 0);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "other", 5));
    progcache_buf_free(&buf);
    progcache_store_free(s);
    test_rmdtemp(dir);
}

static void test_bad_directories(void)
{
    char *dir = test_mkdtemp("bad");
    progcache_store *s = NULL;
    char file[4200];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    FILE *f = fopen(file, "w");
    CHECK(f && fclose(f) == 0);
    CHECK_RC(PROGCACHE_EIO, progcache_store_file_new(&s, file, NULL));
    CHECK(s == NULL);
    CHECK(strstr(progcache_error_last(), file) != NULL);
    char below[4300];
    snprintf(below, sizeof below, "%s/sub", file);
    CHECK_RC(PROGCACHE_EIO, progcache_store_file_new(&s, below, NULL));
    CHECK(strstr(progcache_error_last(), "not a directory") != NULL);

    CHECK_RC(PROGCACHE_EINVAL, progcache_store_file_new(&s, "", NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_file_new(&s, NULL, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_file_new(NULL, dir, NULL));
    progcache_file_options opts = {0};
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_file_new(&s, dir, &opts));
    CHECK(strstr(progcache_error_last(), "version") != NULL);
    progcache_file_options_init(&opts);
    opts.low_water_percent = 150;
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_file_new(&s, dir, &opts));

    /* Read-only open: an existing cache serves hits, refuses writes; a
     * missing one is an error, not created. */
    char ro[4200];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    s = open_store(ro, 0);
    CHECK_OK(progcache_store_put(s, "k", 1, "v", 1));
    progcache_store_free(s);
    progcache_file_options_init(&opts);
    opts.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_store_file_new(&s, ro, &opts));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, s, "k", 1));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_put(s, "k", 1, "w", 1));
    CHECK(strstr(progcache_error_last(), "read-only") != NULL);
    uint64_t count;
    CHECK_OK(progcache_store_count(&count, s));
    CHECK(count == 1);
    progcache_store_free(s);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    CHECK_RC(PROGCACHE_EIO, progcache_store_file_new(&s, missing, &opts));
    CHECK(!path_exists(dir, "missing"));
    progcache_buf_free(&buf);
    test_rmdtemp(dir);
}

/* A directory without permission, seen by an unprivileged user. */
static void test_permission_denied(void)
{
    char *dir = test_mkdtemp("perm");
    char locked[4200];
    snprintf(locked, sizeof locked, "%s/locked", dir);
    CHECK(mkdir(locked, 0500) == 0);
    CHECK(chmod(dir, 0755) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && setuid(65534) != 0)
            _exit(3);
        char sub[4300];
        snprintf(sub, sizeof sub, "%s/cache", locked);
        progcache_store *s = NULL;
        int rc = progcache_store_file_new(&s, sub, NULL);
        if (rc != PROGCACHE_EIO || !strstr(progcache_error_last(), "ermission"))
            _exit(1);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    test_rmdtemp(dir);
}

/* Failing system calls (full disk, I/O errors, read-only media): a clear
 * error, the previous value intact, no temp file left behind. */
static void test_injected_faults(void)
{
    char *dir = test_mkdtemp("faults");
    progcache_store *s = open_store(dir, 0);
    CHECK_OK(progcache_store_put(s, "k", 1, "old", 3));
    const test_fs_fault *cases = test_fs_faults;
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT; /* with fsync */
    progcache_store *synced = NULL;
    CHECK_OK(progcache_store_file_new(&synced, dir, &opts));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/progcache/tmp", dir);
    for (size_t i = 0; i < test_fs_num_faults; i++) {
        progcache__fs_fail(cases[i].op, 1, cases[i].err);
        CHECK_RC(PROGCACHE_EIO, progcache_store_put(synced, "k", 1, "new", 3));
        if (!strstr(progcache_error_last(), cases[i].words)) {
            fprintf(stderr, "case %zu: message '%s' lacks '%s'\n", i, progcache_error_last(),
                    cases[i].words);
            CHECK(0);
        }
        CHECK(strstr(progcache_error_last(), dir) != NULL);
        progcache__fs_fail_reset();
        CHECK_OK(progcache_store_get(&buf, synced, "k", 1));
        CHECK(buf.size == 3 && memcmp(buf.data, "old", 3) == 0);
        CHECK(test_count_names(tmp, 0) == 0);
    }
    /* mkdir: progcache/tmp/ was removed and cannot be made again
     * (read-only now). */
    test_rmtree(tmp);
    progcache__fs_fail(PROGCACHE_FS_MKDIR, 1, EROFS);
    CHECK_RC(PROGCACHE_EIO, progcache_store_put(synced, "k", 1, "new", 3));
    CHECK(strstr(progcache_error_last(), "read-only") != NULL);
    progcache__fs_fail_reset();
    CHECK_OK(progcache_store_get(&buf, synced, "k", 1));
    CHECK(buf.size == 3 && memcmp(buf.data, "old", 3) == 0);
    /* flock: an eviction pass that cannot lock (EIO) runs without the
     * lock, on the lock-free path, and keeps the cap (test_lock_fail). */
    progcache_file_options capped = PROGCACHE_FILE_OPTIONS_INIT;
    capped.max_size = 2000;
    capped.flags = PROGCACHE_FILE_NO_FSYNC;
    progcache_store *small = NULL;
    char small_dir[4300];
    snprintf(small_dir, sizeof small_dir, "%s/small", dir);
    CHECK_OK(progcache_store_file_new(&small, small_dir, &capped));
    char big[1500] = {0};
    CHECK_OK(progcache_store_put(small, "a", 1, big, sizeof big));
    progcache__fs_fail(PROGCACHE_FS_FLOCK, 1, EIO);
    CHECK_OK(progcache_store_put(small, "b", 1, big, sizeof big)); /* over the cap: evicted */
    progcache__fs_fail_reset();
    uint64_t bytes;
    CHECK_OK(progcache_store_total_size(&bytes, small));
    CHECK(bytes <= 2000);
    CHECK_OK(progcache_store_put(small, "c", 1, big, sizeof big));
    CHECK_OK(progcache_store_total_size(&bytes, small));
    CHECK(bytes <= 2000);
    progcache_store_free(small);

    uint64_t count;
    CHECK_OK(progcache_store_count(&count, s));
    CHECK(count == 1);
    /* And the store works normally afterwards. */
    CHECK_OK(progcache_store_put(synced, "k", 1, "new", 3));
    CHECK_OK(progcache_store_get(&buf, s, "k", 1));
    CHECK(buf.size == 3 && memcmp(buf.data, "new", 3) == 0);
    /* Out of memory while reading a hit: ENOMEM, no crash. */
    progcache_buf fresh = PROGCACHE_BUF_INIT;
    progcache__alloc_fail_after(1);
    CHECK_RC(PROGCACHE_ENOMEM, progcache_store_get(&fresh, s, "k", 1));
    progcache__alloc_fail_after(0);
    progcache_buf_free(&fresh);
    progcache_buf_free(&buf);
    progcache_store_free(synced);
    progcache_store_free(s);
    test_rmdtemp(dir);
}

int main(void)
{
    test_recovery();
    test_symlinks_not_followed();
    test_bad_directories();
    test_permission_denied();
    test_injected_faults();
    printf("test_store_file_faults: all passed\n");
    return 0;
}
