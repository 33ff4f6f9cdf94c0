/* The Redis store's back-off rules and counters (src/remote/remote_health.c),
 * driven by a clock the test sets. Needs no server. */
#include "check.h"
#include "remote/remote_health.h"

static progcache_redis_counters snapshot(const progcache__remote_health *h)
{
    progcache_redis_counters c = PROGCACHE_REDIS_COUNTERS_INIT;
    progcache__remote_counters_fill(&c, h);
    return c;
}

static void test_backoff_cycle(void)
{
    progcache__remote_health h;
    progcache__remote_health_init(&h, 3, 1000);
    CHECK(!progcache__remote_is_off(&h, 0));

    /* Two failures: still on. The third switches it off for 1000 ms. */
    CHECK(progcache__remote_failed(&h, 0, 0, 10) == 0);
    CHECK(progcache__remote_failed(&h, 1, 0, 20) == 0);
    CHECK(!progcache__remote_is_off(&h, 30));
    CHECK(progcache__remote_failed(&h, 0, 0, 100) == 3);
    CHECK(progcache__remote_is_off(&h, 100));
    CHECK(progcache__remote_is_off(&h, 1099));
    CHECK(!progcache__remote_is_off(&h, 1100));

    /* After the period, one failure switches it off again at once. */
    CHECK(progcache__remote_failed(&h, 0, 0, 1200) == 3);
    CHECK(progcache__remote_is_off(&h, 1300));
    CHECK(!progcache__remote_is_off(&h, 2200));

    /* One success resets everything: three failures are needed again. */
    progcache__remote_ok(&h);
    CHECK(progcache__remote_failed(&h, 0, 0, 2300) == 0);
    CHECK(!progcache__remote_is_off(&h, 2300));
    CHECK(progcache__remote_failed(&h, 0, 0, 2310) == 0);
    CHECK(progcache__remote_failed(&h, 0, 0, 2320) == 3);
    /* A success while off (another thread's call) switches it back on. */
    progcache__remote_ok(&h);
    CHECK(!progcache__remote_is_off(&h, 2330));

    progcache_redis_counters c = snapshot(&h);
    CHECK(c.errors == 7 && c.timeouts == 1 && c.backoffs == 3);
    CHECK(c.skipped_backoff == 3);
    CHECK(c.hits == 0 && c.stores == 0);
}

/* Error replies come from a server that answers: never a back-off. */
static void test_error_replies(void)
{
    progcache__remote_health h;
    progcache__remote_health_init(&h, 2, 1000);
    for (int i = 0; i < 10; i++)
        CHECK(progcache__remote_failed(&h, 0, 1, (uint64_t)i) == 0);
    CHECK(!progcache__remote_is_off(&h, 20));
    /* ... and they do not reset a run of real failures either. */
    CHECK(progcache__remote_failed(&h, 0, 0, 30) == 0);
    CHECK(progcache__remote_failed(&h, 0, 1, 31) == 0);
    CHECK(progcache__remote_failed(&h, 0, 0, 32) == 2);
    progcache_redis_counters c = snapshot(&h);
    CHECK(c.errors == 13 && c.backoffs == 1 && c.skipped_backoff == 0);
}

static void test_limits_and_counters(void)
{
    progcache__remote_health h;
    progcache__remote_health_init(&h, 0, 50); /* 0 behaves as 1 */
    CHECK(progcache__remote_failed(&h, 0, 0, 0) == 1);
    CHECK(progcache__remote_is_off(&h, 49));
    CHECK(!progcache__remote_is_off(&h, 50));

    progcache__remote_counter all[] = {
        PROGCACHE__RC_HITS,    PROGCACHE__RC_MISSES,       PROGCACHE__RC_ERRORS,
        PROGCACHE__RC_TIMEOUTS, PROGCACHE__RC_STORES,      PROGCACHE__RC_STORE_ERRORS,
        PROGCACHE__RC_REJECTED, PROGCACHE__RC_SKIPPED,     PROGCACHE__RC_DROPPED,
        PROGCACHE__RC_BACKOFFS, PROGCACHE__RC_NEWER,       PROGCACHE__RC_TOO_LARGE,
        PROGCACHE__RC_BAD_TAG,  PROGCACHE__RC_OVER_BOUND,  PROGCACHE__RC_DEADLINES};
    CHECK(sizeof all / sizeof all[0] == PROGCACHE__RC_COUNT);
    progcache__remote_health_init(&h, 3, 1000);
    for (int i = 0; i < PROGCACHE__RC_COUNT; i++)
        for (int j = 0; j <= i; j++)
            progcache__remote_count(&h, all[i]);
    progcache_redis_counters c = snapshot(&h);
    CHECK(c.hits == 1 && c.misses == 2 && c.errors == 3 && c.timeouts == 4);
    CHECK(c.stores == 5 && c.store_errors == 6 && c.rejected == 7);
    CHECK(c.skipped_backoff == 8 && c.dropped == 9 && c.backoffs == 10 && c.newer == 11);
    CHECK(c.too_large == 12 && c.bad_tag == 13);
    CHECK(c.over_bound == 14 && c.deadlines == 15);
    /* A caller of version 1 has no newer field: it is not written. */
    progcache_redis_counters v1 = {.version = 1, .newer = 12345};
    progcache__remote_counters_fill(&v1, &h);
    CHECK(v1.backoffs == 10 && v1.newer == 12345);
    progcache_redis_counters v2 = {.version = 2, .too_large = 777};
    progcache__remote_counters_fill(&v2, &h);
    CHECK(v2.newer == 11 && v2.too_large == 777);
    uint64_t t0 = progcache__remote_now_ms(), t1 = progcache__remote_now_ms();
    CHECK(t0 > 0 && t1 >= t0);
}

/* Each cause is told once; an outage's causes again after the tier came
 * back from a back-off, and only then. */
static void test_told_once(void)
{
    progcache__remote_health h;
    progcache__remote_health_init(&h, 2, 1000);
    CHECK(progcache__remote_first(&h, PROGCACHE__CAUSE_CONNECT));
    CHECK(!progcache__remote_first(&h, PROGCACHE__CAUSE_CONNECT));
    CHECK(progcache__remote_first(&h, PROGCACHE__CAUSE_BAD_TAG));
    CHECK(!progcache__remote_first(&h, PROGCACHE__CAUSE_BAD_TAG));
    /* A success without a back-off before it is no recovery. */
    CHECK(progcache__remote_ok(&h) == 0);
    CHECK(!progcache__remote_first(&h, PROGCACHE__CAUSE_CONNECT));
    CHECK(progcache__remote_failed(&h, 0, 0, 10) == 0);
    CHECK(progcache__remote_failed(&h, 0, 0, 11) == 2); /* off */
    CHECK(progcache__remote_first(&h, PROGCACHE__CAUSE_BACKOFF));
    CHECK(!progcache__remote_first(&h, PROGCACHE__CAUSE_BACKOFF));
    /* The first success after it: recovered, once; outage causes re-armed,
     * the others not. */
    CHECK(progcache__remote_ok(&h) == 1);
    CHECK(progcache__remote_ok(&h) == 0);
    CHECK(progcache__remote_first(&h, PROGCACHE__CAUSE_CONNECT));
    CHECK(progcache__remote_first(&h, PROGCACHE__CAUSE_BACKOFF));
    CHECK(!progcache__remote_first(&h, PROGCACHE__CAUSE_BAD_TAG));
    for (int c = 0; c < PROGCACHE__CAUSE_COUNT; c++)
        (void)progcache__remote_first(&h, (progcache__remote_cause)c);
    for (int c = 0; c < PROGCACHE__CAUSE_COUNT; c++)
        CHECK(!progcache__remote_first(&h, (progcache__remote_cause)c));
}

int main(void)
{
    test_told_once();
    test_backoff_cycle();
    test_error_replies();
    test_limits_and_counters();
    printf("test_redis_health: ok\n");
    return 0;
}
