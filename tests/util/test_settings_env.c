/* The variables read where they are used (the PCH tier's, the wait
 * timeout) go through the settings table's one parser: sizes as every
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
#include "settings.h"

static void pch_reads(const char *var, const char *value, int ok)
{
    progcache__pch_settings s;
    CHECK(setenv(var, value, 1) == 0);
    int rc = progcache__pch_settings_read(&s);
    if (ok) {
        CHECK(rc == PROGCACHE_OK);
    } else {
        CHECK(rc == PROGCACHE_EINVAL && s.mode == PROGCACHE__PCH_OFF);
        CHECK(strstr(progcache_error_last(), var) != NULL);
        CHECK(strstr(progcache_error_last(), "cannot be used") != NULL);
    }
    progcache__pch_settings_free(&s);
    unsetenv(var);
}

static void test_pch_variables(void)
{
    progcache__pch_settings s;
    CHECK(setenv("PROGCACHE_PCH_MAX_SIZE", "5GiB", 1) == 0);
    CHECK(setenv("PROGCACHE_PCH_MIN_MS", "2s", 1) == 0);
    CHECK_OK(progcache__pch_settings_read(&s));
    CHECK(s.max_size == (uint64_t)5 << 30 && s.min_ms == 2000);
    progcache__pch_settings_free(&s);
    pch_reads("PROGCACHE_PCH_MAX_SIZE", "2G", 1);
    pch_reads("PROGCACHE_PCH_MAX_SIZE", "0", 1);
    pch_reads("PROGCACHE_PCH_MAX_SIZE", "lots", 0);
    pch_reads("PROGCACHE_PCH_MAX_SIZE", "-1", 0);
    pch_reads("PROGCACHE_PCH_MIN_MS", "0", 1);
    pch_reads("PROGCACHE_PCH_MIN_MS", "-1", 0);
    pch_reads("PROGCACHE_PCH_MIN_MS", "25h", 0);
    pch_reads("PROGCACHE_PCH_MIN_MS", "90000000", 0); /* over 24 hours */
    unsetenv("PROGCACHE_PCH_MAX_SIZE");
    unsetenv("PROGCACHE_PCH_MIN_MS");
    /* PROGCACHE_PCH: the booleans of every setting, and inprocess. */
    static const char *off[] = {"0", "off", "OFF", "false", "no"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        CHECK(setenv("PROGCACHE_PCH", off[i], 1) == 0);
        CHECK_OK(progcache__pch_settings_read(&s));
        CHECK(s.mode == PROGCACHE__PCH_OFF);
        progcache__pch_settings_free(&s);
    }
    CHECK(setenv("PROGCACHE_PCH", "inprocess", 1) == 0);
    CHECK_OK(progcache__pch_settings_read(&s));
    CHECK(s.mode == PROGCACHE__PCH_INPROCESS);
    progcache__pch_settings_free(&s);
    pch_reads("PROGCACHE_PCH", "yes", 1);
    pch_reads("PROGCACHE_PCH", "maybe", 0);
}

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
    test_pch_variables();
    test_wait_timeout();
    test_in_the_table();
    test_version_check();
    return 0;
}
