/* The PCH tier's variables (src/pch/pch_settings.c) go through the
 * settings table's one parser: sizes as every size setting takes them
 * (PROGCACHE_PCH_MAX_SIZE=5GiB as PROGCACHE_MAX_SIZE=5GiB), durations with
 * their units, booleans in every spelling; a value that cannot be used
 * turns the tier off with a message naming the variable. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pch/pch_settings.h"

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

int main(void)
{
    unsetenv("PROGCACHE_PCH");
    unsetenv("NVRTC_DISABLE_PCH");
    test_pch_variables();
    puts("test_pch_settings: ok");
    return 0;
}
