/* Issue 32: eviction is bounded per put, and the cap holds with several
 * writers while eviction is spread over puts.
 *
 * Four writer processes put into one directory with a small cap and small
 * eviction steps (progcache__file_evict_batch set low, so that a directory
 * of a few hundred entries takes the path a million-entry one takes).
 * After every put each writer checks, as counts of work and bytes, never
 * time:
 * - the entries its put examined (fstatat in scans, the store's test hook)
 *   are at most one batch plus the shard it ended in: no put scans the
 *   directory; and it evicted at most EVICT_MAX entries (removals are the
 *   slow part on a busy disk: the rest is left to later puts);
 * - what entries/ holds (the truth, walked) is at most the cap plus the
 *   low-water spare (10%) plus one entry per writer: a put that finds
 *   another writer's step running goes on without waiting while the total
 *   is within cap + spare, and waits for it past that (FORMAT.md, "Bounded
 *   steps"); each writer may have one entry renamed in and not yet
 *   followed by its eviction check.
 * At the end evictions were counted and the directory is not emptied.
 * The same again with the default batch, where the directory is one batch
 * and each eviction a whole pass: its removals are bounded as a step's.
 * And one writer in a directory of 1,000 entries with the default bounds:
 * no put evicts more than 64 (a whole pass would evict 100 at once). */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "scale_fixture.h"
#include "store/file/file_store.h"

#define WRITERS 4
#define PUTS 300
#define VALUE 1000
#define CAP (200 * VALUE)
#define BATCH 40
#define SHARD_MAX 24 /* far above what one shard of ~200 entries holds */
#define EVICT_MAX 3
#define SLACK (CAP / 10) /* the low-water spare (90% by default) */

/* The entries one put may examine (one batch and a shard, or the batch). */
static uint64_t work_bound;

static int writer(const char *dir, int id)
{
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.max_size = CAP;
    opts.flags = PROGCACHE_FILE_NO_FSYNC;
    progcache_store *s = NULL;
    if (progcache_store_file_new(&s, dir, &opts) != PROGCACHE_OK)
        return 2;
    static char value[VALUE];
    memset(value, 'a' + id, sizeof value);
    uint64_t worst_work = 0, worst_bytes = 0, n;
    for (int i = 0; i < PUTS; i++) {
        char k[32];
        snprintf(k, sizeof k, "w%d-%d", id, i);
        uint64_t before = progcache__file_entries_scanned();
        uint64_t evicted = progcache__file_entries_evicted();
        if (progcache_store_put(s, k, strlen(k), value, sizeof value) != PROGCACHE_OK)
            return 3;
        uint64_t work = progcache__file_entries_scanned() - before;
        evicted = progcache__file_entries_evicted() - evicted;
        if (evicted > EVICT_MAX) {
            fprintf(stderr, "writer %d put %d evicted %llu entries (bound %d)\n", id, i,
                    (unsigned long long)evicted, EVICT_MAX);
            return 6;
        }
        uint64_t held = scale_measure(dir, &n);
        worst_work = work > worst_work ? work : worst_work;
        worst_bytes = held > worst_bytes ? held : worst_bytes;
        if (work > work_bound) {
            fprintf(stderr, "writer %d put %d examined %llu entries (bound %llu)\n", id, i,
                    (unsigned long long)work, (unsigned long long)work_bound);
            return 4;
        }
        if (held > CAP + SLACK + WRITERS * VALUE) {
            fprintf(stderr, "writer %d put %d: the directory holds %llu bytes, cap %d + %d\n",
                    id, i, (unsigned long long)held, CAP, SLACK + WRITERS * VALUE);
            return 5;
        }
    }
    printf("writer %d: at most %llu entries examined by a put, %llu bytes held (cap %d)\n", id,
           (unsigned long long)worst_work, (unsigned long long)worst_bytes, CAP);
    fflush(stdout);
    progcache_store_free(s);
    return 0;
}

/* Four writers at once; small: with the default batch (the directory,
 * a few hundred entries, is one batch: each eviction is a whole pass,
 * exact LRU), else with steps of BATCH. Either way no put evicts more than
 * EVICT_MAX, and the cap holds. */
static void four_writers(int small)
{
    char *dir = test_mkdtemp("evict-step");
    progcache__file_evict_batch = small ? 4096 : BATCH; /* inherited by the writers */
    work_bound = small ? 4096 : BATCH + SHARD_MAX;
    progcache__file_evict_max = EVICT_MAX;
    fflush(stdout); /* (nothing buffered is printed again by the writers) */
    pid_t kids[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        kids[i] = fork();
        CHECK(kids[i] >= 0);
        if (kids[i] == 0)
            _exit(writer(dir, i));
    }
    for (int i = 0; i < WRITERS; i++) {
        int status = 0;
        CHECK(waitpid(kids[i], &status, 0) == kids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    uint64_t n, held = scale_measure(dir, &n);
    progcache_store *s = NULL;
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.max_size = CAP;
    opts.flags = PROGCACHE_FILE_NO_FSYNC;
    CHECK_OK(progcache_store_file_new(&s, dir, &opts));
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&st, s));
    printf("%s: %llu entries (%llu bytes) left, %llu evicted\n", small ? "passes" : "steps",
           (unsigned long long)n, (unsigned long long)held, (unsigned long long)st.evictions);
    /* The last puts may have left it over the cap (by the spare at
     * most: each removes EVICT_MAX at most); the next puts bring it under. */
    CHECK(held <= CAP + SLACK + WRITERS * VALUE && n >= CAP / VALUE / 2);
    int more = 0;
    static char value[VALUE];
    while (held > CAP && more < 40) {
        char k[32];
        snprintf(k, sizeof k, "after-%d", more++);
        CHECK_OK(progcache_store_put(s, k, strlen(k), value, sizeof value));
        held = scale_measure(dir, &n);
    }
    printf("  %d more puts to be within the cap\n", more);
    CHECK(held <= CAP);
    CHECK_OK(progcache_store_stats_get(&st, s));
    CHECK(st.evictions >= WRITERS * PUTS - CAP / VALUE);
    CHECK(small ? st.evict_steps == 0
                : st.evict_steps > 0 && st.evict_step_entries >= st.evict_steps);
    progcache_store_free(s);
    test_rmdtemp(dir);
}

/* One writer, the default bounds (64 removals a put): a directory of
 * 1,000 entries at its cap, whose whole pass would evict 100 (down to the
 * low-water mark, 90%), evicts at most 64 a put, the rest in later puts,
 * and stays within the cap plus the entry being put. */
static void small_directory(void)
{
    char *dir = test_mkdtemp("evict-small");
    progcache__file_evict_batch = 4096;
    progcache__file_evict_max = 64;
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.max_size = 1000 * VALUE;
    opts.flags = PROGCACHE_FILE_NO_FSYNC;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_file_new(&s, dir, &opts));
    static char value[VALUE];
    uint64_t worst = 0, n;
    for (int i = 0; i < 1300; i++) {
        char k[32];
        snprintf(k, sizeof k, "small-%d", i);
        uint64_t evicted = progcache__file_entries_evicted();
        CHECK_OK(progcache_store_put(s, k, strlen(k), value, sizeof value));
        evicted = progcache__file_entries_evicted() - evicted;
        worst = evicted > worst ? evicted : worst;
        CHECK(evicted <= 64);
        CHECK(scale_measure(dir, &n) <= 1000 * VALUE + VALUE);
    }
    printf("a directory of 1,000 entries: at most %llu evicted by a put\n",
           (unsigned long long)worst);
    CHECK(worst >= 1);
    progcache_store_free(s);
    test_rmdtemp(dir);
}

int main(void)
{
    small_directory();
    fflush(stdout);
    four_writers(0);
    four_writers(1);
    puts("test_evict_step: ok");
    return 0;
}
