/* Issue 32: the catch-up with another program's writes is spread over puts
 * (file_catch_up.c, FORMAT.md "Other writers: the drift bound"), so that
 * no put lists a whole shard of ~3,900 names at a million entries. In a
 * shard of 4,000 entries, with slices of 256 names and 64 stats:
 *
 * - one cuda.core-shaped write is counted once the slices are done, ~16
 *   puts later, and not by the first put; no put stats more than a slice
 *   allows;
 * - the slices go on across processes (each put in a process of its own);
 * - names added, replaced and removed while the slices run: the counters
 *   equal the directory once the next catch-up has ended;
 * - a whole catch-up (a read-only open) in the middle ends it, nothing
 *   counted twice;
 * - progcache/shards/next damaged: the measurement starts afresh; a FIFO
 *   there: left alone, counted, the shard measured whole;
 * - progcache's own puts and removes in the shard meanwhile (a remove
 *   and a put of one size too), a clear meanwhile: counted exactly (the
 *   measurement begins afresh, and is made whole after two restarts); a
 *   clear's progress may call into the cache (it runs outside the lock);
 * - a hard link or another user's file at progcache/shards/next:
 *   refused before it is touched, counted;
 * - a cap in force: over it by no more than the other program's write
 *   while the slices run, under it a few puts after they end.
 * Asserted as counters against a walk of the directory, never as time. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "scale_fixture.h"
#include "store_file_fixture.h"
#include "store/file/file_store.h"

#define SHARD 0x3c
#define ENTRIES 4000

/* A put of a key that goes to shard when want, else to any other; the
 * key in out when not NULL. */
static void put_named(progcache_store *s, int *i, int shard_wanted, int want, char out[32])
{
    char k[32], rel[FILE_REL_PATH_MAX];
    int shard;
    do {
        snprintf(k, sizeof k, "key-%d-%d", (int)getpid(), ++*i);
        CHECK_OK(progcache__file_rel_path(rel, &shard, k, strlen(k)));
    } while ((shard == shard_wanted) != want);
    CHECK_OK(progcache_store_put(s, k, strlen(k), "value", 5));
    if (out)
        memcpy(out, k, sizeof k);
}

static void put_key(progcache_store *s, int *i, int shard_wanted, int want)
{
    put_named(s, i, shard_wanted, want, NULL);
}

static uint64_t other_bytes(progcache_store *s)
{
    return scale_stats(s).other_writer_bytes;
}

static int under_way(progcache_store *s)
{
    return (int)((file_store *)progcache_store_as_file(s))->state->round_active;
}

/* Puts elsewhere until the catch-up has ended; how many it took. */
static int puts_to_catch_up(progcache_store *s, int *key)
{
    int puts = 0;
    do {
        uint64_t before = progcache__file_shard_names_statted();
        put_key(s, key, SHARD, 0);
        /* A slice's stats, and the put's own shard whole (a few names). */
        CHECK(progcache__file_shard_names_statted() - before <= progcache__file_catch_stats + 16);
        puts++;
    } while (under_way(s) && puts < 1000);
    CHECK(!under_way(s));
    return puts;
}

static void one_write(progcache_store *w, const char *dir, int *key)
{
    uint64_t found = other_bytes(w);
    scale_foreign_write(dir, ENTRIES + 1, 777, SHARD, NULL);
    usleep(50 * 1000); /* settled: 20 ms */
    put_key(w, key, SHARD, 0);
    CHECK(under_way(w));
    CHECK(other_bytes(w) == found); /* not counted by the first put */
    int puts = 1 + puts_to_catch_up(w, key);
    printf("one foreign write into a shard of %d: counted after %d puts\n", ENTRIES, puts);
    CHECK(puts >= ENTRIES / 256 / 2 && puts <= 3 * ENTRIES / 256);
    CHECK(other_bytes(w) - found == 777);
    scale_check_counters(w, dir, 0);
}

/* Each put in a process of its own: the slices go on where the last
 * process left them. */
static void across_processes(progcache_store *w, const char *dir, int *key)
{
    uint64_t found = other_bytes(w);
    scale_foreign_write(dir, ENTRIES + 2, 1500, SHARD, NULL);
    usleep(50 * 1000);
    int procs = 0;
    for (; procs < 200 && (procs == 0 || under_way(w)); procs++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            progcache_store *c = open_store(dir, 1ull << 40);
            put_key(c, key, SHARD, 0);
            progcache_store_free(c);
            _exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0);
    }
    printf("one foreign write, one put per process: counted after %d processes\n", procs);
    CHECK(!under_way(w) && procs > 1);
    CHECK(other_bytes(w) - found == 1500);
    scale_check_counters(w, dir, 0);
}

/* Names added, replaced and removed by the other program while the slices
 * run: right once the next catch-up has ended. */
static void changes_meanwhile(progcache_store *w, const char *dir, int *key, char names[][65])
{
    scale_foreign_write(dir, ENTRIES + 3, 300, SHARD, NULL);
    usleep(50 * 1000);
    for (int i = 0; i < 5; i++)
        put_key(w, key, SHARD, 0);
    CHECK(under_way(w));
    scale_foreign_write(dir, ENTRIES + 4, 400, SHARD, NULL);
    scale_foreign_write(dir, 11, 9000, SHARD, NULL); /* replaced, other bytes */
    char path[4096];
    for (int i = 20; i < 3000; i += 700) { /* removed, spread over the listing */
        snprintf(path, sizeof path, "%s/entries/%.2s/%.62s", dir, names[i], names[i] + 2);
        CHECK(unlink(path) == 0);
    }
    usleep(50 * 1000);
    (void)puts_to_catch_up(w, key);
    (void)puts_to_catch_up(w, key); /* the changes made after the first began */
    printf("names added, replaced and removed during the slices:\n");
    scale_check_counters(w, dir, 0);
}

/* A read-only open (progcache stats) catches up whole: the catch-up under
 * way ends with it, and what its slices had seen is not counted again. */
static void whole_in_the_middle(progcache_store *w, const char *dir, int *key)
{
    uint64_t found = other_bytes(w);
    scale_foreign_write(dir, ENTRIES + 5, 2500, SHARD, NULL);
    usleep(50 * 1000);
    for (int i = 0; i < 4; i++)
        put_key(w, key, SHARD, 0);
    CHECK(under_way(w));
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.flags = PROGCACHE_FILE_READONLY;
    progcache_store *r = NULL;
    CHECK_OK(progcache_store_file_new(&r, dir, &opts));
    uint64_t bytes = 0;
    CHECK_OK(progcache_store_total_size(&bytes, r));
    progcache_store_free(r);
    CHECK(!under_way(w));
    for (int i = 0; i < 20; i++)
        put_key(w, key, SHARD, 0);
    CHECK(other_bytes(w) == found); /* the read-only open counts no statistics */
    printf("a whole catch-up in the middle of the slices:\n");
    scale_check_counters(w, dir, 0);
}

/* One foreign write and one put with progcache/shards/next unusable: the
 * shard measured whole by that put, the refusal counted. */
static void measured_whole(progcache_store *w, const char *dir, int *key, uint64_t n,
                           size_t size)
{
    uint64_t refused = scale_stats(w).files_refused;
    scale_foreign_write(dir, n, size, SHARD, NULL);
    usleep(50 * 1000);
    put_key(w, key, SHARD, 0);
    CHECK(!under_way(w));
    CHECK(scale_stats(w).files_refused > refused);
}

static void damaged_next(progcache_store *w, const char *dir, int *key)
{
    char next[4096];
    snprintf(next, sizeof next, "%s/progcache/shards/next", dir);
    scale_foreign_write(dir, ENTRIES + 6, 640, SHARD, NULL);
    usleep(50 * 1000);
    for (int i = 0; i < 4; i++)
        put_key(w, key, SHARD, 0);
    CHECK(under_way(w));
    int fd = open(next, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, "garbage!", 8, 40) == 8);
    close(fd);
    (void)puts_to_catch_up(w, key);
    printf("progcache/shards/next damaged in the middle:\n");
    scale_check_counters(w, dir, 0);

    /* A FIFO there: never opened for reading (it would block), counted. */
    CHECK(unlink(next) == 0 && mkfifo(next, 0600) == 0);
    measured_whole(w, dir, key, ENTRIES + 7, 650);
    struct stat fst;
    CHECK(lstat(next, &fst) == 0 && S_ISFIFO(fst.st_mode));
    printf("a FIFO at progcache/shards/next: left alone, counted, measured whole\n");
    scale_check_counters(w, dir, 0);
    CHECK(unlink(next) == 0);
}

/* progcache's own changes to the shard while its slices run (every put
 * into it, removes, a clear; any version's: they go through the
 * counters): the measurement begins afresh, and after two such restarts
 * the shard is measured whole in one put. Counted exactly either way. */
static void own_changes_meanwhile(progcache_store *w, const char *dir, int *key)
{
    scale_foreign_write(dir, ENTRIES + 8, 128, SHARD, NULL);
    usleep(50 * 1000);
    int puts = 0;
    do
        put_key(w, key, SHARD, 1);
    while (under_way(w) && ++puts < 1000);
    printf("own puts into the shard, each during its slices: ended after %d\n", puts + 1);
    CHECK(puts <= 4);
    scale_check_counters(w, dir, 0);

    char keys[30][32];
    for (int i = 0; i < 30; i++)
        put_named(w, key, SHARD, 1, keys[i]);
    scale_foreign_write(dir, ENTRIES + 10, 777, SHARD, NULL);
    usleep(50 * 1000);
    put_key(w, key, SHARD, 0);
    CHECK(under_way(w));
    for (int i = 0; i < 30; i++) /* names on both sides of the listing's offset */
        CHECK_OK(progcache_store_remove(w, keys[i], strlen(keys[i])));
    (void)puts_to_catch_up(w, key);
    printf("own removes during the slices:\n");
    scale_check_counters(w, dir, 0);

    /* A remove and a put of the same size cancel out in the counters' sums:
     * the shard's change bits still show them. Where the listing had the
     * removed name and finds the new one, the sums alone counted it twice. */
    for (int round = 0; round < 6; round++) {
        put_named(w, key, SHARD, 1, keys[0]);
        scale_foreign_write(dir, ENTRIES + 20 + (uint64_t)round, 200, SHARD, NULL);
        usleep(50 * 1000);
        put_key(w, key, SHARD, 0);
        put_key(w, key, SHARD, 0);
        CHECK(under_way(w));
        CHECK_OK(progcache_store_remove(w, keys[0], strlen(keys[0])));
        put_key(w, key, SHARD, 1); /* 5 bytes again, and the next slice */
        (void)puts_to_catch_up(w, key);
        /* (each time: one counted twice and one missed would cancel out) */
        printf("a remove and a put of one size during the slices:\n");
        scale_check_counters(w, dir, 0);
    }
}

/* clear's progress hears of each shard outside the lock it clears under:
 * a callback may call into the cache (here a prune of the same handle,
 * which takes that lock; SIGALRM ends the test if it waits for ever). */
static int prune_from_progress(void *ctx, const char *what, uint64_t done, uint64_t total)
{
    (void)what;
    (void)total;
    if (done % 64 == 1) {
        progcache_prune_options po = PROGCACHE_PRUNE_OPTIONS_INIT;
        po.max_size = 1ull << 40;
        progcache_prune_result pr = PROGCACHE_PRUNE_RESULT_INIT;
        CHECK_OK(progcache_file_prune(&pr, progcache_store_as_file(ctx), &po));
    }
    return 0;
}

/* A clear while a shard is measured in slices, and another program's
 * entries written after it: each shard is measured once emptied, under
 * the lock, and the measurement under way begins afresh. */
static void clear_meanwhile(const char *dir, int *key)
{
    progcache_store *w = open_store(dir, 1ull << 40);
    for (int i = 0; i < 1200; i++)
        scale_foreign_write(dir, 500000 + (uint64_t)i, 300, SHARD, NULL);
    usleep(50 * 1000);
    for (int i = 0; i < 3; i++)
        put_key(w, key, SHARD, 0);
    CHECK(under_way(w));
    progcache_prune_result pr = PROGCACHE_PRUNE_RESULT_INIT;
    alarm(60);
    CHECK_OK(progcache_file_clear(&pr, progcache_store_as_file(w), prune_from_progress, w));
    alarm(0);
    printf("a clear in the middle of the slices:\n");
    scale_check_counters(w, dir, 0);
    for (int i = 0; i < 300; i++)
        scale_foreign_write(dir, 600000 + (uint64_t)i, 300, SHARD, NULL);
    usleep(50 * 1000);
    (void)puts_to_catch_up(w, key);
    printf("and other writes after it, caught up:\n");
    scale_check_counters(w, dir, 0);
    progcache_store_free(w);
}

/* progcache/shards/next with a second name (a hard link a team member
 * made to a file of the user's outside the cache), or another user's:
 * refused before it is touched, counted, said; shards measured whole. */
static void next_refused(progcache_store *w, const char *dir, int *key)
{
    char next[4096], victim[4096];
    snprintf(next, sizeof next, "%s/progcache/shards/next", dir);
    snprintf(victim, sizeof victim, "%s.victim", dir);
    int fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "the user's own file\n", 20) == 20);
    close(fd);
    CHECK(chmod(victim, 0644) == 0);
    (void)unlink(next);
    CHECK(link(victim, next) == 0);
    measured_whole(w, dir, key, ENTRIES + 11, 310);
    struct stat vst;
    CHECK(stat(victim, &vst) == 0 && vst.st_size == 20 && (vst.st_mode & 0777) == 0644);
    printf("a hard link at progcache/shards/next: refused, the other name untouched\n");
    scale_check_counters(w, dir, 0);
    CHECK(unlink(next) == 0 && unlink(victim) == 0);
    if (geteuid() != 0)
        return;
    fd = open(next, O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0 && fchown(fd, 65534, 65534) == 0);
    close(fd);
    measured_whole(w, dir, key, ENTRIES + 12, 320);
    printf("another user's progcache/shards/next: refused, counted\n");
    scale_check_counters(w, dir, 0);
    CHECK(unlink(next) == 0);
}

/* The cap with the catch-up spread over puts (FORMAT.md, "The bound"):
 * while it runs, the directory holds at most the cap plus what the other
 * program wrote since it began; once it has ended, eviction (64 removals
 * a put) brings the directory under the cap within a few puts. */
static void cap_held(progcache_store *w, const char *dir, int *key)
{
    uint64_t total = 0;
    CHECK_OK(progcache_store_total_size(&total, w));
    uint64_t cap = total + 4000, written = 60000;
    progcache_store *c = open_store(dir, cap);
    /* One pass of at most 64 removals a put (exact LRU: the oldest are the
     * other program's entries here; a step's shard-by-shard order would
     * take the puts' small ones first in this one-shard layout). */
    progcache__file_evict_batch = 1u << 20;
    scale_foreign_write(dir, ENTRIES + 9, (size_t)written, SHARD, NULL);
    usleep(50 * 1000);
    int puts = 0, after = -1;
    uint64_t held = 0;
    for (; puts < 200 && (after < 0 || held > cap); puts++) {
        put_key(c, key, SHARD, 0);
        held = scale_measure(dir, NULL);
        CHECK(held <= cap + written + 5 * (uint64_t)(puts + 1));
        if (after < 0 && !under_way(c))
            after = puts;
    }
    printf("cap %llu: over it by the other write until the catch-up ended (put %d), under "
           "it again after put %d\n", (unsigned long long)cap, after, puts);
    CHECK(after > 0 && held <= cap && puts - after <= 40);
    progcache_store_free(c);
}

int main(void)
{
    char *dir = test_mkdtemp("catch-up");
    static char names[ENTRIES][65];
    for (int i = 0; i < ENTRIES; i++)
        scale_foreign_write(dir, (uint64_t)i, 100 + (size_t)(i % 89), SHARD, names[i]);
    usleep(50 * 1000);
    progcache_store *w = open_store(dir, 1ull << 40);
    int key = 0;
    uint64_t n = 0;
    CHECK_OK(progcache_store_count(&n, w)); /* seeded: one scan */
    CHECK(n == ENTRIES);
    put_key(w, &key, SHARD, 0);
    CHECK(!under_way(w));

    one_write(w, dir, &key);
    across_processes(w, dir, &key);
    changes_meanwhile(w, dir, &key, names);
    whole_in_the_middle(w, dir, &key);
    damaged_next(w, dir, &key);
    own_changes_meanwhile(w, dir, &key);
    next_refused(w, dir, &key);
    cap_held(w, dir, &key);
    clear_meanwhile(dir, &key);

    progcache_store_free(w);
    test_rmtree(dir);
    free(dir);
    printf("test_catch_up: ok\n");
    return 0;
}
