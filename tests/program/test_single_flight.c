/* One compile per kernel: threads and processes that miss the same program
 * at once compile it once; the others wait and report a HIT (waited). With
 * PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT each compiles. A background store keeps
 * the lock until the entry exists. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_fixtures.h"
#include "procs.h"
#include "progcache/stats.h"

#define THREADS 8
#define PROCS 6

static progcache *cache;
static unsigned int flags;
static int compiles, waits;

static void *thread_main(void *arg)
{
    (void)arg;
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD | flags);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.artifact.size > 0);
    if (r.status == PROGCACHE_STATUS_MISS) {
        CHECK(r.compile_ms > 0);
        __atomic_add_fetch(&compiles, 1, __ATOMIC_SEQ_CST);
    } else {
        CHECK(r.status == PROGCACHE_STATUS_HIT && r.compile_ms == 0);
        if (r.waited) {
            CHECK(r.wait_ms > 0);
            __atomic_add_fetch(&waits, 1, __ATOMIC_SEQ_CST);
        }
    }
    progcache_program_result_release(&r);
    return NULL;
}

static void run_threads(const char *dir, unsigned int extra_flags)
{
    CHECK_OK(progcache_open(&cache, dir, NULL));
    CHECK_OK(progcache_clear(cache));
    flags = extra_flags;
    compiles = waits = 0;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, thread_main, NULL) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    progcache_close(cache);
}

int main(void)
{
    char *dir = test_mkdtemp("sflight");

    run_threads(dir, 0);
    printf("threads: %d compile(s), %d waited\n", compiles, waits);
    CHECK(compiles == 1);

    run_threads(dir, PROGCACHE_PROGRAM_ASYNC_STORE);
    printf("threads, background store: %d compile(s), %d waited\n", compiles, waits);
    CHECK(compiles == 1);

    /* Processes: each reports whether it compiled through its exit code. */
    CHECK_OK(progcache_open(&cache, dir, NULL));
    CHECK_OK(progcache_clear(cache));
    CHECK_OK(progcache_stats_reset(cache));
    progcache_close(cache);
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            progcache *c;
            if (progcache_open(&c, dir, NULL))
                _exit(3);
            progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
            progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
            if (progcache_compile_or_load(&r, c, &p))
                _exit(4);
            int compiled = r.status == PROGCACHE_STATUS_MISS;
            progcache_program_result_release(&r);
            progcache_close(c);
            _exit(compiled ? 10 : 11);
        }
    }
    int proc_compiles = 0, status[PROCS];
    test_reap(pids, PROCS, status);
    for (int i = 0; i < PROCS; i++) {
        CHECK(status[i] == 10 || status[i] == 11);
        proc_compiles += status[i] == 10;
    }
    printf("processes: %d compile(s)\n", proc_compiles);
    CHECK(proc_compiles == 1);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, cache));
    CHECK(st.stores == 1);
    progcache_close(cache);

    /* Without single-flight every thread that missed compiles: the count
     * is at least one, and usually more (not asserted: it is a race). */
    run_threads(dir, PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT);
    printf("threads without single-flight: %d compile(s)\n", compiles);
    CHECK(compiles >= 1 && waits == 0);

    test_rmdtemp(dir);
    printf("test_single_flight: all passed\n");
    return 0;
}
