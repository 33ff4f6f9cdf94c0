/* The variables read where they are used (the wait timeout here, the PCH
 * tier's in tests/pch/test_pch_settings.c) go through the settings
 * table's one parser: sizes as every
 * size setting takes them (PROGCACHE_PCH_MAX_SIZE=5GiB as
 * PROGCACHE_MAX_SIZE=5GiB), durations with their units, booleans in every
 * spelling; a value that cannot be used is reported by its reader and
 * does not fail a cache directory's open. And the one version check of
 * structs handed in. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "options.h"
#include "progcache/progcache.h"
#include "settings_table.h"

static void test_wait_timeout(void)
{
    static const struct {
        const char *text;
        unsigned int ms;
    } good[] = {{"90", 90000}, {"90s", 90000}, {"1500ms", 1500}, {"2m", 120000}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        unsigned int ms = 0;
        CHECK(setenv("PROGCACHE_WAIT_TIMEOUT", good[i].text, 1) == 0);
        CHECK_OK(progcache__config_wait_timeout(&ms));
        CHECK(ms == good[i].ms);
    }
    static const char *bad[] = {"0", "0ms", "soon", "1h", "1441m", "-5", "1.5s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned int ms = 7;
        CHECK(setenv("PROGCACHE_WAIT_TIMEOUT", bad[i], 1) == 0);
        CHECK_RC(PROGCACHE_EINVAL, progcache__config_wait_timeout(&ms));
        CHECK(ms == 7 && strstr(progcache_error_last(), "PROGCACHE_WAIT_TIMEOUT is \"") != NULL);
    }
    unsetenv("PROGCACHE_WAIT_TIMEOUT");
    unsigned int ms = 7;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache__config_wait_timeout(&ms));
}

/* The rows are in the table, seen by progcache config; a bad one is
 * skipped by a directory's resolution (its reader reports it). */
static void test_in_the_table(void)
{
    progcache_settings s;
    CHECK_OK(progcache__settings_init(&s, NULL));
    CHECK(setenv("PROGCACHE_PCH_MAX_SIZE", "3GiB", 1) == 0);
    CHECK(setenv("PROGCACHE_PCH_MIN_MS", "never", 1) == 0);
    CHECK_OK(progcache__settings_apply_env(&s));
    const progcache_setting *max = progcache_settings_find(&s, "pch_max_size");
    CHECK(max && max->number == (uint64_t)3 << 30 && max->source == PROGCACHE_SETTING_ENV);
    const progcache_setting *min = progcache_settings_find(&s, "pch_min_ms");
    CHECK(min && min->number == 500 && min->source == PROGCACHE_SETTING_DEFAULT);
    CHECK(progcache_settings_find(&s, "wait_timeout")->number == 60000);
    CHECK(!progcache_settings_find(&s, "pch")->in_file);
    progcache__settings_release(&s);
    unsetenv("PROGCACHE_PCH_MAX_SIZE");
    unsetenv("PROGCACHE_PCH_MIN_MS");
}

static void test_version_check(void)
{
    progcache_prune_result r = PROGCACHE_PRUNE_RESULT_INIT;
    CHECK_OK(progcache__version_check(&r, PROGCACHE_PRUNE_RESULT_VERSION, "fn", "out",
                                      "progcache_prune_result"));
    r.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache__version_check(&r, PROGCACHE_PRUNE_RESULT_VERSION, "fn",
                                                        "out", "progcache_prune_result"));
    CHECK(strstr(progcache_error_last(), "fn: out->version is 0") &&
          strstr(progcache_error_last(), "PROGCACHE_PRUNE_RESULT_INIT"));
    r.version = PROGCACHE_PRUNE_RESULT_VERSION + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache__version_check(&r, PROGCACHE_PRUNE_RESULT_VERSION, "fn",
                                                        "out", "progcache_prune_result"));
    CHECK(strstr(progcache_error_last(), "newer than this library knows") != NULL);
}

int main(void)
{
    unsetenv("PROGCACHE_PCH");
    unsetenv("NVRTC_DISABLE_PCH");
    test_wait_timeout();
    test_in_the_table();
    test_version_check();
    return 0;
}
