/* The cache's back-off of a tier that fails (cache_tiers.c; docs/REMOTE.md,
 * "A tier that fails"): after PROGCACHE__TIER_FAILURES failures in a row a
 * tier below or above the home one is skipped for PROGCACHE__TIER_BACKOFF_MS
 * (its gets miss at once, copies into it are not written), counted in the
 * statistics file (tier_backoffs, tier_skipped) and said once; the first
 * call that succeeds after the period puts it back in use, said at INFO.
 * The home tier is never skipped: its failures are the caller's. */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache_fixture.h"
#include "progcache/file.h"
#include "progcache/stats.h"

/* The log: warnings about the back-off, and "answers again". */
typedef struct {
    int backoff_warnings;
    int back_in_use;
    int warnings;
} heard;

static void listen(void *ctx, int level, const char *message)
{
    heard *h = ctx;
    if (level == PROGCACHE_LOG_WARN)
        h->warnings++;
    if (level == PROGCACHE_LOG_WARN && strstr(message, "the flaky tier failed 3 times in a row") &&
        strstr(message, "not used for 5000 ms"))
        h->backoff_warnings++;
    if (level == PROGCACHE_LOG_INFO && strstr(message, "the flaky tier answers again"))
        h->back_in_use++;
}

static progcache_stats stats_of(progcache *c)
{
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, c));
    CHECK(s.available);
    return s;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A cache of a directory tier (the home one) and a flaky tier, below it
 * (below = 1) or above it, with h hearing its log. */
static progcache *open_pair(const char *dir, flaky_store *flaky, int below, heard *h)
{
    progcache_store *file = NULL;
    progcache_file_options fo = PROGCACHE_FILE_OPTIONS_INIT;
    CHECK_OK(progcache_store_file_new(&file, dir, &fo));
    progcache_store *tiers[2] = {file, &flaky->w.base};
    if (!below) {
        tiers[0] = &flaky->w.base;
        tiers[1] = file;
    }
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.log = listen;
    o.log_ctx = h;
    progcache *c = NULL;
    CHECK_OK(progcache_open_tiers(&c, tiers, 2, &o));
    return c;
}

/* A failing tier below the home directory (where a remote one sits). */
static void test_below(const char *dir)
{
    flaky_store *flaky = flaky_new();
    heard h = {0};
    progcache *c = open_pair(dir, flaky, 1, &h);

    flaky->fail_get = 1;
    for (int i = 0; i < 10; i++)
        expect_miss(c, "absent");
    /* Three calls reached it; the seven after were skipped. */
    CHECK(flaky->gets == 3);
    progcache_stats s = stats_of(c);
    CHECK(s.tier_backoffs == 1 && s.tier_skipped == 7);
    CHECK(h.backoff_warnings == 1);

    /* A put while it is off: the home tier has it, the flaky tier is not
     * called. */
    put_str(c, "k", "value");
    CHECK(flaky->puts == 0);
    expect_value(c, "k", "value");
    CHECK(stats_of(c).tier_skipped == 8); /* the put; the get hit at home */

    /* After the period: it answers, is back in use, said at INFO. */
    flaky->fail_get = 0;
    sleep_ms(5000 + 200);
    expect_miss(c, "absent");
    CHECK(flaky->gets == 4 && h.back_in_use == 1);
    put_str(c, "k2", "value2");
    CHECK(flaky->puts == 1);
    expect_store_value(&flaky->w.base, "k2", "value2");

    /* Failing again: off again after three, and said again (the recovery
     * re-armed the outage's message). */
    flaky->fail_get = 1;
    for (int i = 0; i < 4; i++)
        expect_miss(c, "absent");
    CHECK(flaky->gets == 8); /* 4, the direct read of k2, 3 */
    s = stats_of(c);
    CHECK(s.tier_backoffs == 2 && h.backoff_warnings == 2);
    progcache_close(c);
}

/* A failing tier above the home one (a memory tier a program stacked). Its
 * failed copies are not retried while it is off; the home tier answers. */
static void test_above(const char *dir)
{
    flaky_store *flaky = flaky_new();
    heard h = {0};
    progcache *c = open_pair(dir, flaky, 0, &h);
    progcache_stats before = stats_of(c);
    flaky->fail_get = flaky->fail_put = 1;
    put_str(c, "above", "home has it");
    for (int i = 0; i < 6; i++)
        expect_value(c, "above", "home has it");
    /* The put's copy, the first get, and that hit's copy back into it fail
     * (3: off); the five gets after skip it, and so do their copies. */
    CHECK(flaky->gets == 1 && flaky->puts == 2);
    progcache_stats s = stats_of(c);
    CHECK(s.tier_backoffs - before.tier_backoffs == 1);
    CHECK(s.tier_skipped - before.tier_skipped == 10);
    CHECK(h.backoff_warnings == 1);
    progcache_close(c);
}

/* The home tier's failures are the caller's: never skipped. */
static void test_home(void)
{
    flaky_store *flaky = flaky_new();
    progcache_store *tiers[] = {&flaky->w.base};
    progcache *c = NULL;
    CHECK_OK(progcache_open_tiers(&c, tiers, 1, NULL));
    flaky->fail_get = 1;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    for (int i = 0; i < 6; i++)
        CHECK_RC(PROGCACHE_EIO, progcache_get(&buf, c, "k", 1));
    CHECK(flaky->gets == 6);
    progcache_buf_free(&buf);
    progcache_close(c);
}

int main(void)
{
    char *dir = test_mkdtemp("tier-backoff");
    char below[4200], above[4200];
    snprintf(below, sizeof below, "%s/below", dir);
    snprintf(above, sizeof above, "%s/above", dir);
    test_below(below);
    test_above(above);
    test_home();
    test_rmdtemp(dir);
    return 0;
}
