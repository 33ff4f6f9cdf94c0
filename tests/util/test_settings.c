/* The settings' values and text (src/util/settings_table.c): sizes with every
 * suffix, the settings file's lines, the messages of bad values (naming
 * the setting and the file's line or the variable), and editing a file
 * while keeping what it holds. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "settings_table.h"

static uint64_t size_of(const char *text)
{
    uint64_t v = 12345;
    CHECK_OK(progcache_parse_size(&v, text));
    return v;
}

static void test_sizes(void)
{
    CHECK(size_of("0") == 0);
    CHECK(size_of("4096") == 4096);
    CHECK(size_of("4096B") == 4096);
    CHECK(size_of("1K") == 1024 && size_of("1k") == 1024 && size_of("1Ki") == 1024);
    CHECK(size_of("1KiB") == 1024 && size_of("1KB") == 1024);
    CHECK(size_of("512M") == 512ull << 20 && size_of("512Mi") == 512ull << 20);
    CHECK(size_of("10G") == 10ull << 30 && size_of("10GiB") == 10ull << 30);
    CHECK(size_of("2T") == 2ull << 40 && size_of("1P") == 1ull << 50);
    CHECK(size_of("1.5G") == 3ull << 29);
    CHECK(size_of("0.5K") == 512);
    CHECK(size_of(" 10G ") == 10ull << 30);
    CHECK(size_of("16383P") == 16383ull << 50);
    uint64_t v;
    const char *bad[] = {"", " ", "G", "-5", "+5", "10X", "10 G", "1.5", "0.1K", "1.", ".5",
                         "10GG", "10Gii", "1e9", "99999999999999999999", "16384P", "0x10",
                         "18446744073709551615", "5 GiB", "1.0000000001G", NULL};
    for (const char **p = bad; *p; p++) {
        int rc = progcache_parse_size(&v, *p);
        if (rc != PROGCACHE_EINVAL)
            fprintf(stderr, "accepted \"%s\"\n", *p);
        CHECK(rc == PROGCACHE_EINVAL);
    }
    CHECK(progcache_parse_size(NULL, "1") == PROGCACHE_EINVAL);
    CHECK(progcache_parse_size(&v, NULL) == PROGCACHE_EINVAL);
}

static void test_defaults(void)
{
    progcache_settings s;
    CHECK_OK(progcache__settings_init(&s, "/cache"));
    CHECK(!strcmp(progcache_settings_path(&s), "/cache/progcache/config"));
    CHECK(progcache_settings_count(&s) == PROGCACHE__SET_COUNT);
    const progcache_setting *max = progcache_settings_find(&s, "max_size");
    CHECK(max && max->number == PROGCACHE_MAX_SIZE_DEFAULT && max->number == 5ull << 30);
    CHECK(max->source == PROGCACHE_SETTING_DEFAULT && !strcmp(max->origin, "default"));
    CHECK(!strcmp(max->variable, "PROGCACHE_MAX_SIZE") && max->in_file);
    CHECK(progcache_settings_find(&s, "low_water_percent")->number == 90);
    CHECK(progcache_settings_find(&s, "memory_size")->number == 0);
    CHECK(progcache_settings_find(&s, "max_artifact_size")->number ==
          PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT);
    CHECK(progcache_settings_find(&s, "no_fsync")->number == 0);
    CHECK(!progcache_settings_find(&s, "remote")->in_file);
    CHECK(progcache_settings_find(&s, "nope") == NULL);
    CHECK(progcache_settings_at(&s, PROGCACHE__SET_COUNT) == NULL);
    for (size_t i = 0; i < progcache_settings_count(&s); i++)
        CHECK(progcache_settings_at(&s, i)->summary[0]);
    progcache__settings_release(&s);
}

static int apply(progcache_settings *s, const char *text)
{
    progcache__settings_release(s);
    CHECK_OK(progcache__settings_init(s, "/c"));
    return progcache__settings_apply_file(s, text, strlen(text));
}

static void expect_error(progcache_settings *s, const char *text, const char *needle)
{
    CHECK_RC(PROGCACHE_EINVAL, apply(s, text));
    if (!strstr(progcache_error_last(), needle))
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", progcache_error_last(), needle);
    CHECK(strstr(progcache_error_last(), needle));
}

static void test_file_text(void)
{
    progcache_settings s;
    CHECK_OK(progcache__settings_init(&s, "/c"));
    CHECK_OK(apply(&s, "# a comment\n\n  max_size = 10G  \r\nlow_water_percent=80\n"
                       "memory_size = none\nno_fsync = yes\nmax_artifact_size = 64M"));
    const progcache_setting *max = progcache_settings_find(&s, "max_size");
    CHECK(max->number == 10ull << 30 && !strcmp(max->value, "10G"));
    CHECK(max->source == PROGCACHE_SETTING_FILE && !strcmp(max->origin, "/c/progcache/config:3"));
    CHECK(progcache_settings_find(&s, "low_water_percent")->number == 80);
    CHECK(progcache_settings_find(&s, "memory_size")->number == 0);
    CHECK(progcache_settings_find(&s, "no_fsync")->number == 1);
    CHECK(progcache_settings_find(&s, "max_artifact_size")->number == 64ull << 20);
    CHECK(!strcmp(progcache_settings_find(&s, "max_artifact_size")->origin,
                  "/c/progcache/config:7"));
    CHECK_OK(apply(&s, "max_size = none\n"));
    CHECK(progcache_settings_find(&s, "max_size")->number == 0);
    CHECK_OK(apply(&s, "max_size = 0\n"));
    CHECK(progcache_settings_find(&s, "max_size")->number == 0);
    CHECK_OK(apply(&s, ""));

    /* A line that is refused, and what its message must say. */
    static const struct {
        const char *text, *words;
    } refused[] = {
        {"max_size = 10X\n", "/c/progcache/config:1: max_size = \"10X\": not a size"},
        {"\n\nlow_water_percent = 0\n", "config:3: low_water_percent = \"0\""},
        {"low_water_percent = 101\n", "from 1 to 100"},
        {"low_water_percent = 50K\n", "not a percentage"},
        {"max_artifact_size = 0\n", "max_artifact_size = \"0\""},
        {"no_fsync = maybe\n", "true or false"},
        {"max_szie = 1G\n", "config:1: unknown setting \"max_szie\""},
        {"max_size 1G\n", "config:1: \"max_size 1G\" is not a setting"},
        {"= 1G\n", "is not a setting"},
        {"max_size =\n", "max_size has no value"},
        {"max_size = 1G\nmax_size = 2G\n", "set twice (lines 1 and 2)"},
        {"remote = redis://x\n", "environment only (PROGCACHE_REMOTE)"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        expect_error(&s, refused[i].text, refused[i].words);
    const char nul[] = "max_size = 1G\n\0x\n";
    progcache__settings_release(&s);
    CHECK_OK(progcache__settings_init(&s, "/c"));
    CHECK_RC(PROGCACHE_EINVAL, progcache__settings_apply_file(&s, nul, sizeof nul - 1));
    CHECK(strstr(progcache_error_last(), "NUL byte"));
    progcache__settings_release(&s);
}

static void test_env_and_api(void)
{
    progcache_settings s;
    CHECK_OK(progcache__settings_init(&s, "/c"));
    const char *text = "max_size = 1G\nno_fsync = true\n";
    CHECK_OK(progcache__settings_apply_file(&s, text, strlen(text)));
    setenv("PROGCACHE_MAX_SIZE", "2G", 1);
    setenv("PROGCACHE_NO_FSYNC", "", 1); /* empty: unset */
    setenv("PROGCACHE_REMOTE", "redis://user:hunter2@host:6379/0", 1);
    CHECK_OK(progcache__settings_apply_env(&s));
    const progcache_setting *max = progcache_settings_find(&s, "max_size");
    CHECK(max->number == 2ull << 30 && max->source == PROGCACHE_SETTING_ENV);
    CHECK(!strcmp(max->origin, "PROGCACHE_MAX_SIZE"));
    CHECK(progcache_settings_find(&s, "no_fsync")->source == PROGCACHE_SETTING_FILE);
    const progcache_setting *remote = progcache_settings_find(&s, "remote");
    CHECK(remote->source == PROGCACHE_SETTING_ENV && !strstr(remote->value, "hunter2") &&
          !strcmp(remote->value, "redis://user:***@host:6379/0"));
    /* A password shorter than "***", one holding '@', a unix: socket's. */
    const char *const urls[][2] = {
        {"redis://:pw@127.0.0.1:1", "redis://:***@127.0.0.1:1"},
        {"redis://u:p@ss@h/0", "redis://u:***@h/0"},
        {"redis://h:6379/0", "redis://h:6379/0"},
        {"unix:/run/r.sock?db=1&password=x&user=u", "unix:/run/r.sock?db=1&password=***&user=u"}};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        setenv("PROGCACHE_REMOTE", urls[i][0], 1);
        CHECK_OK(progcache__settings_apply_env(&s));
        remote = progcache_settings_find(&s, "remote");
        CHECK(!strcmp(remote->value, urls[i][1]));
    }
    /* The program's option over both; 0 leaves the setting alone. */
    CHECK_OK(progcache__settings_api(&s, PROGCACHE__SET_MAX_SIZE, 0, "opt"));
    CHECK(max->number == 2ull << 30);
    CHECK_OK(progcache__settings_api(&s, PROGCACHE__SET_MAX_SIZE, 3ull << 30, "opt"));
    CHECK(max->number == 3ull << 30 && max->source == PROGCACHE_SETTING_API &&
          !strcmp(max->value, "3GiB"));
    CHECK_OK(progcache__settings_api(&s, PROGCACHE__SET_MAX_SIZE, PROGCACHE_SIZE_NONE, "opt"));
    CHECK(max->number == 0 && !strcmp(max->value, "none"));
    CHECK_RC(PROGCACHE_EINVAL, progcache__settings_api(&s, PROGCACHE__SET_MAX_ARTIFACT_SIZE,
                                                       PROGCACHE_SIZE_NONE, "opts.x"));
    CHECK(strstr(progcache_error_last(), "opts.x"));
    CHECK_RC(PROGCACHE_EINVAL,
             progcache__settings_api(&s, PROGCACHE__SET_LOW_WATER_PERCENT, 101, "opts.pct"));
    /* A bad variable is ignored, the setting kept, and marked for its
     * reader to say so (the words: tests/admin/test_tool_cli.py). */
    const progcache_setting *pct = progcache_settings_find(&s, "low_water_percent");
    CHECK(!s.ignored[PROGCACHE__SET_LOW_WATER_PERCENT]);
    setenv("PROGCACHE_LOW_WATER_PERCENT", "ninety", 1);
    CHECK_OK(progcache__settings_apply_env(&s));
    CHECK(s.ignored[PROGCACHE__SET_LOW_WATER_PERCENT] && pct->number == 90 &&
          pct->source == PROGCACHE_SETTING_DEFAULT);
    unsetenv("PROGCACHE_LOW_WATER_PERCENT");
    unsetenv("PROGCACHE_MAX_SIZE");
    unsetenv("PROGCACHE_NO_FSYNC");
    unsetenv("PROGCACHE_REMOTE");
    progcache__settings_release(&s);
}

static char *edited(const char *old, const char *name, const char *value)
{
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache__settings_edit(&out, old, old ? strlen(old) : 0, name, value));
    char *s = strdup(out.data ? (const char *)out.data : "");
    progcache_buf_free(&out);
    return s;
}

static void test_edit(void)
{
    char *s = edited(NULL, "max_size", "10G");
    CHECK(s[0] == '#' && strstr(s, "\nmax_size = 10G\n"));
    free(s);
    s = edited("# mine\nmax_size = 1G\nno_fsync = true\nmax_size = 2G\n", "max_size", "3G");
    CHECK(!strcmp(s, "# mine\nmax_size = 3G\nno_fsync = true\n"));
    free(s);
    s = edited("no_fsync = true", "max_size", "3G");
    CHECK(!strcmp(s, "no_fsync = true\nmax_size = 3G\n"));
    free(s);
    s = edited("# keep\nmax_size = 1G\ngarbage line\n", "max_size", NULL);
    CHECK(!strcmp(s, "# keep\ngarbage line\n"));
    free(s);
    /* Only the exact name: max_size_x and a comment mentioning it stay. */
    s = edited("#max_size = 1G\nmax_sizex = 2\n", "max_size", "5G");
    CHECK(!strcmp(s, "#max_size = 1G\nmax_sizex = 2\nmax_size = 5G\n"));
    free(s);
}

int main(void)
{
    unsetenv("PROGCACHE_REMOTE");
    test_sizes();
    test_defaults();
    test_file_text();
    test_env_and_api();
    test_edit();
    puts("test_settings: ok");
    return 0;
}
