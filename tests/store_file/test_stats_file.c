/* Statistics (src/store/file/file_stats.c and the counting hooks): what each
 * operation counts, many processes and threads counting at once without a
 * lost increment, reset, replacing a file of the wrong layout, and
 * read-only caches that read but never write the counters. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cache/cache_stats.h"
#include "check.h"
#include "fs.h"

#define PROCS 8
#define THREADS 4
#define OPS 3000

static progcache_stats stats_of(progcache *cache)
{
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    return s;
}

static void key_of(unsigned char key[8], unsigned n)
{
    memcpy(key, "statkey", 7);
    key[7] = (unsigned char)n;
}

/* Key n (in key) put into cache with value (a string). */
static void put_key(progcache *cache, unsigned char key[8], unsigned n, const char *value)
{
    key_of(key, n);
    CHECK_OK(progcache_put(cache, key, 8, value, strlen(value)));
}

static int remember_name(void *ctx, const progcache_entry *e)
{
    memcpy(ctx, e->name, 65);
    return 0;
}

/* The path of the only entry in dir. */
static void only_entry(char *out, size_t len, const char *dir)
{
    progcache_store *fs;
    progcache_file_options ro = PROGCACHE_FILE_OPTIONS_INIT;
    ro.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_store_file_new(&fs, dir, &ro));
    char name[65] = "";
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), 0, remember_name, name));
    CHECK(strlen(name) == 64);
    snprintf(out, len, "%s/entries/%.2s/%s", dir, name, name + 2);
    progcache_store_free(fs);
}

static void test_counting(void)
{
    char *dir = test_mkdtemp("stats");
    progcache *cache;
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.memory_size = 1 << 20;
    CHECK_OK(progcache_open(&cache, dir, &opts));

    progcache_stats s = stats_of(cache);
    CHECK(s.available && s.hits == 0 && s.misses == 0 && s.stores == 0);
    CHECK(s.since > 0 && s.max_size == PROGCACHE_MAX_SIZE_DEFAULT); /* the cap in force */

    /* The file has the documented size. */
    char path[1024];
    snprintf(path, sizeof path, "%s/progcache/stats", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 256 + 64 * 1024);

    unsigned char key[8];
    progcache_buf buf = PROGCACHE_BUF_INIT;
    key_of(key, 1);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, cache, key, sizeof key));
    CHECK_OK(progcache_put(cache, key, sizeof key, "value", 5));
    CHECK_OK(progcache_get(&buf, cache, key, sizeof key)); /* from the memory tier */
    CHECK_OK(progcache_get(&buf, cache, key, sizeof key));
    s = stats_of(cache);
    CHECK(s.hits == 2 && s.misses == 1 && s.stores == 1 && s.store_errors == 0);
    CHECK(s.entries == 1 && s.total_size == 5);

    /* A second handle (cold memory tier) hits in the directory and shares
     * the counters. */
    progcache *other;
    CHECK_OK(progcache_open(&other, dir, NULL));
    CHECK_OK(progcache_get(&buf, other, key, sizeof key));
    CHECK(stats_of(cache).hits == 3);

    /* Failures: a put that cannot rename, a get that cannot read. */
    key_of(key, 2);
    progcache__fs_fail(PROGCACHE_FS_RENAME, 1, ENOSPC);
    CHECK_RC(PROGCACHE_EIO, progcache_put(other, key, sizeof key, "v2", 2));
    progcache__fs_fail_reset();
    key_of(key, 1);
    progcache__fs_fail(PROGCACHE_FS_READ, 1, EIO);
    CHECK_RC(PROGCACHE_EIO, progcache_get(&buf, other, key, sizeof key));
    progcache__fs_fail_reset();
    s = stats_of(other);
    CHECK(s.store_errors == 1 && s.lookup_errors == 1 && s.stores == 1 && s.hits == 3);

    /* A flipped bit in an entry progcache wrote: the get finds the SHA-256
     * mismatch and removes the entry; counted as corrupt_removed. */
    char entry[1024];
    only_entry(entry, sizeof entry, dir);
    if (getxattr(entry, "user.progcache.sha256", NULL, 0) > 0) { /* sealed */
        test_flip_byte(entry, 2, 0x20);
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, other, key, sizeof key));
        s = stats_of(other);
        CHECK(s.corrupt_removed == 1 && s.misses == 2);
        CHECK(access(entry, F_OK) != 0);
    } else {
        printf("corrupt_removed on read: skipped (no user xattrs on this file system)\n");
    }

    /* Reset: every counter to zero, the clock restarted, entries kept. */
    CHECK_OK(progcache_put(cache, key, sizeof key, "value", 5));
    CHECK_OK(progcache_stats_reset(cache));
    s = stats_of(other);
    CHECK(s.hits == 0 && s.misses == 0 && s.stores == 0 && s.store_errors == 0 &&
          s.lookup_errors == 0 && s.corrupt_removed == 0 && s.entries == 1);

    progcache_buf_free(&buf);
    progcache_close(other);
    test_cache_done(cache, dir);
}

static void test_evictions_and_cap(void)
{
    char *dir = test_mkdtemp("statsevict");
    progcache *cache;
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.max_size = 10000;
    opts.flags = PROGCACHE_FILE_NO_FSYNC;
    CHECK_OK(progcache_open(&cache, dir, &opts));
    static unsigned char value[1000];
    unsigned char key[8];
    for (unsigned i = 0; i < 40; i++) {
        key_of(key, i);
        CHECK_OK(progcache_put(cache, key, sizeof key, value, sizeof value));
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.max_size == 10000);
    CHECK(s.stores == 40 && s.evictions > 0);
    CHECK(s.evicted_bytes == s.evictions * sizeof value);
    CHECK(s.entries + s.evictions == 40);

    /* Pruning counts as eviction too. */
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, dir, NULL));
    progcache_prune_options po = PROGCACHE_PRUNE_OPTIONS_INIT;
    po.max_size = 3000;
    progcache_prune_result pr = PROGCACHE_PRUNE_RESULT_INIT;
    CHECK_OK(progcache_file_prune(&pr, progcache_store_as_file(fs), &po));
    CHECK(pr.removed > 0 && pr.total_size <= 3000);
    progcache_stats after = stats_of(cache);
    CHECK(after.evictions == s.evictions + pr.removed);
    CHECK(after.evicted_bytes == s.evicted_bytes + pr.removed_bytes);
    progcache_store_free(fs);
    test_cache_done(cache, dir);
}

/* ---- many counters at once ------------------------------------------------ */

typedef struct thread_arg {
    progcache *cache;
    int id;
} thread_arg;

static void *hit_thread(void *p)
{
    thread_arg *a = p;
    unsigned char key[8];
    key_of(key, 200);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    for (int i = 0; i < OPS; i++) {
        if (progcache_get(&buf, a->cache, key, sizeof key) != PROGCACHE_OK)
            abort();
    }
    progcache_buf_free(&buf);
    return NULL;
}

/* Each process: THREADS threads of OPS hits on one key, plus OPS misses
 * on its own. */
static int child(const char *dir, int id)
{
    progcache *cache;
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.memory_size = 1 << 20; /* hits without system calls: tight races */
    if (progcache_open(&cache, dir, &opts) != PROGCACHE_OK)
        return 2;
    pthread_t t[THREADS];
    thread_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i].cache = cache;
        args[i].id = id;
        if (pthread_create(&t[i], NULL, hit_thread, &args[i]) != 0)
            return 3;
    }
    unsigned char key[8];
    key_of(key, (unsigned)id);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    for (int i = 0; i < OPS; i++)
        if (progcache_get(&buf, cache, key, sizeof key) != PROGCACHE_ENOTFOUND)
            return 4;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    progcache_buf_free(&buf);
    progcache_close(cache);
    return 0;
}

static void test_processes(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "statsprocs");
    unsigned char key[8];
    put_key(cache, key, 200, "shared");
    CHECK_OK(progcache_stats_reset(cache));
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        CHECK(pids[p] >= 0);
        if (pids[p] == 0)
            _exit(child(dir, p));
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        CHECK(waitpid(pids[p], &status, 0) == pids[p]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    progcache_stats s = stats_of(cache);
    /* Exact: atomic adds lose nothing, however the slots were shared. */
    CHECK(s.hits == (uint64_t)PROCS * THREADS * OPS);
    CHECK(s.misses == (uint64_t)PROCS * OPS);
    test_cache_done(cache, dir);
}

/* ---- layout, read-only, no directory ------------------------------------ */

static void test_bad_layout_replaced(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "statslayout");
    unsigned char key[8];
    key_of(key, 1);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, cache, key, sizeof key));
    progcache_close(cache);

    char path[1024];
    snprintf(path, sizeof path, "%s/progcache/stats", dir);
    /* Wrong size, wrong magic, wrong slot count. */
    for (int d = 0; d < 3; d++) {
        int fd = open(path, O_RDWR);
        CHECK(fd >= 0);
        if (d == 0)
            CHECK(ftruncate(fd, 100) == 0);
        else if (d == 1)
            CHECK(pwrite(fd, "PCSTATS9", 8, 0) == 8);
        else
            CHECK(pwrite(fd, "\x40\x00\x00\x01", 4, 16) == 4); /* num_slots */
        close(fd);
        CHECK_OK(progcache_open(&cache, dir, NULL));
        progcache_stats s = stats_of(cache);
        CHECK(s.available && s.misses == 0);
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, cache, key, sizeof key));
        CHECK(stats_of(cache).misses == 1);
        progcache_close(cache);
        struct stat st;
        CHECK(stat(path, &st) == 0 && st.st_size == 256 + 64 * 1024);
    }
    progcache_buf_free(&buf);
    test_rmdtemp(dir);
}

static void test_readonly(void)
{
    char *dir = test_mkdtemp("statsro");
    progcache *cache, *ro;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    unsigned char key[8];
    put_key(cache, key, 1, "value");
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_open(&ro, dir, &opts));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, ro, key, sizeof key));
    key_of(key, 2);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, ro, key, sizeof key));
    /* Read through the read-only handle: the writer's put is there, the
     * read-only lookups are not counted. */
    progcache_stats s = stats_of(ro);
    CHECK(s.available && s.stores == 1 && s.hits == 0 && s.misses == 0 && s.entries == 1);
    CHECK_RC(PROGCACHE_EINVAL, progcache_stats_reset(ro));
    CHECK(strstr(progcache_error_last(), "read-only"));
    progcache_close(ro);

    /* A directory only cuda.core used has no statistics file: read-only
     * opens report none and create nothing. */
    char *plain = test_mkdtemp("statsplain");
    CHECK_OK(progcache_open(&ro, plain, &opts));
    s = stats_of(ro);
    CHECK(!s.available && s.hits == 0 && s.since == 0);
    progcache_close(ro);
    char path[1024];
    snprintf(path, sizeof path, "%s/progcache", plain);
    CHECK(access(path, F_OK) != 0);

    /* A cache without a directory has no statistics either. */
    progcache_store *mem;
    CHECK_OK(progcache_store_memory_new(&mem, NULL));
    progcache *mc;
    CHECK_OK(progcache_open_tiers(&mc, &mem, 1, NULL));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, mc, "k", 1));
    s = stats_of(mc);
    CHECK(!s.available && s.misses == 0);
    CHECK_RC(PROGCACHE_EINVAL, progcache_stats_reset(mc));
    progcache_close(mc);

    /* Argument checks. */
    progcache_stats bad;
    memset(&bad, 0, sizeof bad);
    CHECK_RC(PROGCACHE_EINVAL, progcache_stats_get(&bad, cache));
    CHECK_RC(PROGCACHE_EINVAL, progcache_stats_get(NULL, cache));
    CHECK_RC(PROGCACHE_EINVAL, progcache_stats_get(&s, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_stats_reset(NULL));

    progcache_buf_free(&buf);
    test_cache_done(cache, plain);
    test_rmdtemp(dir);
}

/* A caller built against version 1 of progcache_stats has a shorter
 * struct: the library fills exactly that much, whatever lies beyond. */
static void test_version_1(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "statsv1");
    unsigned char key[8];
    put_key(cache, key, 1, "abc");
    progcache__cache_record(cache, PROGCACHE_STAT_PCH_HITS, 5);
    progcache__cache_record(cache, PROGCACHE_STAT_NAMES_LEARNED, 3);
    /* Version 2 starts with names_learned; the remote tier's fields and
     * the PCH tier's follow. */
    size_t v1 = offsetof(progcache_stats, names_learned);
    union {
        progcache_stats s;
        unsigned char bytes[sizeof(progcache_stats)];
    } u;
    memset(u.bytes, 0xa5, sizeof u.bytes);
    u.s.version = 1;
    CHECK_OK(progcache_stats_get(&u.s, cache));
    CHECK(u.s.version == 1 && u.s.stores == 1 && u.s.entries == 1 && u.s.available == 1);
    for (size_t i = v1; i < sizeof u.bytes; i++)
        CHECK(u.bytes[i] == 0xa5);
    progcache_stats s = stats_of(cache);
    CHECK(s.version == PROGCACHE_STATS_VERSION && s.pch_hits == 5 && s.names_learned == 3 &&
          s.stores == 1);
    test_cache_done(cache, dir);
}

/* Version 2 of progcache_stats: names_learned first (position 30), then
 * the remote counters (positions 14-23), then the PCH tier's (24-29), each
 * read from its own position. A version-1 struct gets its own size back: nothing
 * past `available` is written. */
static void test_versions(void)
{
    char *dir = test_mkdtemp("stats-versions");
    progcache *cache;
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_NO_REMOTE;
    CHECK_OK(progcache_open(&cache, dir, &opts));
    for (int pos = 14; pos <= 29; pos++)
        progcache__cache_record(cache, (progcache_stat)pos, (uint64_t)pos * 10);
    progcache__cache_record(cache, PROGCACHE_STAT_NAMES_LEARNED, 300);
    progcache__cache_record(cache, PROGCACHE_STAT_HITS, 7);
    /* i20nfs */
    progcache__cache_record(cache, PROGCACHE_STAT_SIDECAR_SEALS, 31);
    progcache__cache_record(cache, PROGCACHE_STAT_FLIGHT_LEASES, 32);
    progcache__cache_record(cache, PROGCACHE_STAT_FLIGHT_TAKEOVERS, 33);
    for (int pos = 34; pos <= 37; pos++) /* i20cap: version 3 */
        progcache__cache_record(cache, (progcache_stat)pos, (uint64_t)pos * 10);
    for (int pos = 38; pos <= 40; pos++) /* i20perm */
        progcache__cache_record(cache, (progcache_stat)pos, (uint64_t)pos * 10);
    progcache__cache_record(cache, PROGCACHE_STAT_REMOTE_OVER_BOUND, 410); /* i21 */
    progcache__cache_record(cache, PROGCACHE_STAT_REMOTE_DEADLINES, 420);
    progcache__cache_record(cache, PROGCACHE_STAT_LINKS_REFUSED, 500); /* i29-paths */
    progcache__cache_record(cache, PROGCACHE_STAT_NVRTC_KEY_LOADS, 45); /* i23nvrtc */
    progcache__cache_record(cache, PROGCACHE_STAT_NVRTC_MISSING, 46);
    progcache__cache_record(cache, PROGCACHE_STAT_RECORDS_UNTRUSTED, 51); /* i29-trust */
    progcache__cache_record(cache, PROGCACHE_STAT_ENTRIES_UNTRUSTED, 52);
    progcache__cache_record(cache, PROGCACHE_STAT_SHARDS_RESCANNED, 66); /* i32-scale */
    progcache__cache_record(cache, PROGCACHE_STAT_EVICT_STEPS, 67);
    progcache__cache_record(cache, PROGCACHE_STAT_EVICT_STEP_ENTRIES, 68);
    progcache__cache_record(cache, PROGCACHE_STAT_STATE_SEEDS, 69);

    progcache_stats s = stats_of(cache);
    CHECK(s.version == PROGCACHE_STATS_VERSION && s.hits == 7 && s.names_learned == 300);
    CHECK(s.sidecar_seals == 31 && s.flight_leases == 32 && s.flight_takeovers == 33);
    CHECK(s.lock_failures == 340 && s.lock_fallbacks == 350 && s.other_writer_rescans == 360 &&
          s.other_writer_bytes == 370);
    CHECK(s.remote_over_bound == 410 && s.remote_deadlines == 420);
    CHECK(s.links_refused == 500);
    CHECK(s.nvrtc_key_loads == 45 && s.nvrtc_missing == 46);
    CHECK(s.records_untrusted == 51 && s.entries_untrusted == 52);
    CHECK(s.shards_rescanned == 66 && s.evict_steps == 67 && s.evict_step_entries == 68 &&
          s.state_seeds == 69);
    CHECK(s.foreign_not_stored == 380 && s.modes_fixed == 390 && s.files_refused == 400);
    const uint64_t got[] = {s.remote_timeouts,  s.remote_backoffs, s.remote_store_errors,
                            s.remote_dropped,   s.remote_newer,    s.remote_too_large,
                            s.remote_bad_tag,   s.remote_waits,    s.wait_timeouts,
                            s.remote_takeovers};
    for (int i = 0; i < 10; i++)
        CHECK(got[i] == (uint64_t)(14 + i) * 10);
    const uint64_t pch[] = {s.pch_hits,     s.pch_misses,   s.pch_created,
                            s.pch_rejected, s.pch_ms_saved, s.pch_fallbacks};
    for (int i = 0; i < 6; i++)
        CHECK(pch[i] == (uint64_t)(24 + i) * 10);
    CHECK(offsetof(progcache_stats, remote_takeovers) < offsetof(progcache_stats, pch_hits));
    CHECK(offsetof(progcache_stats, names_learned) < offsetof(progcache_stats, remote_timeouts));

    _Alignas(progcache_stats) unsigned char raw[sizeof(progcache_stats) + 16];
    memset(raw, 0xab, sizeof raw);
    progcache_stats *v1 = (progcache_stats *)(void *)raw;
    v1->version = 1;
    CHECK_OK(progcache_stats_get(v1, cache));
    CHECK(v1->version == 1 && v1->hits == 7 && v1->available == 1);
    for (size_t i = offsetof(progcache_stats, names_learned); i < sizeof raw; i++)
        CHECK(raw[i] == 0xab);
    /* i23fleet: pch_deferred (47); a version-2 struct ends before all of
     * version 3. */
    progcache__cache_record(cache, PROGCACHE_STAT_PCH_DEFERRED, 470);
    CHECK(stats_of(cache).pch_deferred == 470);
    memset(raw, 0xab, sizeof raw);
    v1->version = 2;
    CHECK_OK(progcache_stats_get(v1, cache));
    CHECK(v1->version == 2 && v1->pch_fallbacks == 290);
    for (size_t i = offsetof(progcache_stats, sidecar_seals); i < sizeof raw; i++)
        CHECK(raw[i] == 0xab);
    test_cache_done(cache, dir);
}

int main(void)
{
    test_version_1();
    test_counting();
    test_versions();
    test_evictions_and_cap();
    test_bad_layout_replaced();
    test_readonly();
    test_processes();
    puts("test_stats_file: ok");
    return 0;
}
