/* ccache's switches through progcache_open (issue 35, item 6;
 * docs/OPERATIONS.md, "Kill switches"): PROGCACHE_DISABLE reads and writes
 * nothing (not even the directory) and says so once; PROGCACHE_READONLY
 * reads, stores nothing and writes no counter; PROGCACHE_RECACHE never
 * reads and stores over the entry; a value that is not a yes or no fails
 * the open naming the variable; each is a setting of the table. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static const unsigned char KEY_A[32] = {1};
static const unsigned char KEY_B[32] = {2};

typedef struct said {
    int count; /* messages naming the switch */
    const char *what;
} said;

static void log_cb(void *ctx, int level, const char *message)
{
    said *s = ctx;
    (void)level;
    if (strstr(message, s->what))
        s->count++;
}

static progcache *open_with(const char *dir, said *s)
{
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.log = log_cb;
    o.log_ctx = s;
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, dir, &o));
    return cache;
}

/* The bytes under key in dir without any switch, or "" for a miss. */
static void read_plain(char *out, size_t len, const char *dir, const unsigned char *key)
{
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_buf b = PROGCACHE_BUF_INIT;
    int rc = progcache_get(&b, cache, key, 32);
    CHECK(rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND);
    snprintf(out, len, "%.*s", rc ? 0 : (int)b.size, rc ? "" : (const char *)b.data);
    progcache_buf_free(&b);
    progcache_close(cache);
}

/* The directory's shared counters, read without counting anything. */
static progcache_stats counters(const char *dir)
{
    progcache_file *f;
    progcache_file_options fo = PROGCACHE_FILE_OPTIONS_INIT;
    fo.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_file_open(&f, dir, &fo));
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&s, progcache_file_store(f)));
    progcache_file_close(f);
    return s;
}

static char *seeded(const char *tag)
{
    char *dir = test_mkdtemp(tag);
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    CHECK_OK(progcache_put(cache, KEY_A, 32, "old", 3));
    progcache_close(cache);
    return dir;
}

static void test_disable(void)
{
    char *dir = seeded("sw-disable");
    progcache_stats before = counters(dir);
    setenv("PROGCACHE_DISABLE", "1", 1);
    said s = {0, "PROGCACHE_DISABLE"};
    progcache *cache = open_with(dir, &s);
    CHECK(progcache_path(cache) == NULL);
    progcache_buf b = PROGCACHE_BUF_INIT;
    for (int i = 0; i < 3; i++) {
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&b, cache, KEY_A, 32));
        CHECK_OK(progcache_put(cache, KEY_B, 32, "new", 3));
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&b, cache, KEY_B, 32));
    }
    progcache_close(cache);
    CHECK(s.count == 1); /* said once, not once per call */
    /* A directory that does not exist is not made. */
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/not-made", dir);
    cache = open_with(missing, &s);
    progcache_close(cache);
    struct stat st;
    CHECK(stat(missing, &st) != 0);
    unsetenv("PROGCACHE_DISABLE");
    char got[16];
    read_plain(got, sizeof got, dir, KEY_B);
    CHECK(!strcmp(got, ""));
    progcache_stats after = counters(dir);
    /* Nothing counted either: the hits and misses above are read_plain's. */
    CHECK(after.hits == before.hits && after.stores == before.stores);
    CHECK(after.misses == before.misses + 1);
    progcache_buf_free(&b);
    test_rmdtemp(dir);
}

static void test_readonly(void)
{
    char *dir = seeded("sw-readonly");
    progcache_stats before = counters(dir);
    setenv("PROGCACHE_READONLY", "yes", 1);
    said s = {0, "PROGCACHE_READONLY"};
    progcache *cache = open_with(dir, &s);
    progcache_buf b = PROGCACHE_BUF_INIT;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(progcache_get(&b, cache, KEY_A, 32));
        CHECK(b.size == 3 && !memcmp(b.data, "old", 3));
        CHECK_OK(progcache_put(cache, KEY_B, 32, "new", 3));
        CHECK_OK(progcache_put(cache, KEY_A, 32, "xyz", 3));
    }
    progcache_close(cache);
    CHECK(s.count == 1);
    unsetenv("PROGCACHE_READONLY");
    progcache_stats after = counters(dir);
    CHECK(after.hits == before.hits && after.stores == before.stores);
    char got[16];
    read_plain(got, sizeof got, dir, KEY_B);
    CHECK(!strcmp(got, ""));
    read_plain(got, sizeof got, dir, KEY_A);
    CHECK(!strcmp(got, "old"));
    /* No directory yet: nothing to read, and none is made. */
    setenv("PROGCACHE_READONLY", "1", 1);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/not-made", dir);
    cache = open_with(missing, &s);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&b, cache, KEY_A, 32));
    CHECK_OK(progcache_put(cache, KEY_A, 32, "new", 3));
    progcache_close(cache);
    struct stat st;
    CHECK(stat(missing, &st) != 0);
    unsetenv("PROGCACHE_READONLY");
    progcache_buf_free(&b);
    test_rmdtemp(dir);
}

static void test_recache(void)
{
    char *dir = seeded("sw-recache");
    setenv("PROGCACHE_RECACHE", "on", 1);
    said s = {0, "PROGCACHE_RECACHE"};
    progcache *cache = open_with(dir, &s);
    progcache_buf b = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&b, cache, KEY_A, 32));
    CHECK_OK(progcache_put(cache, KEY_A, 32, "fresh", 5));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&b, cache, KEY_A, 32));
    progcache_close(cache);
    CHECK(s.count == 1);
    unsetenv("PROGCACHE_RECACHE");
    char got[16];
    read_plain(got, sizeof got, dir, KEY_A);
    CHECK(!strcmp(got, "fresh"));
    progcache_buf_free(&b);
    test_rmdtemp(dir);
}

static void test_bad_value_and_table(void)
{
    char *dir = seeded("sw-bad");
    static const char *const vars[] = {"PROGCACHE_DISABLE", "PROGCACHE_READONLY",
                                       "PROGCACHE_RECACHE"};
    static const char *const names[] = {"disable", "readonly", "recache"};
    for (int i = 0; i < 3; i++) {
        setenv(vars[i], "maybe", 1);
        progcache *cache = NULL;
        CHECK_RC(PROGCACHE_EINVAL, progcache_open(&cache, dir, NULL));
        CHECK(cache == NULL && strstr(progcache_error_last(), vars[i]));
        setenv(vars[i], "0", 1);
        CHECK_OK(progcache_open(&cache, dir, NULL));
        progcache_buf b = PROGCACHE_BUF_INIT;
        CHECK_OK(progcache_get(&b, cache, KEY_A, 32)); /* off: a plain cache */
        progcache_buf_free(&b);
        progcache_close(cache);
        setenv(vars[i], "true", 1);
        progcache_settings *set;
        CHECK_OK(progcache_settings_load(&set, dir));
        const progcache_setting *it = progcache_settings_find(set, names[i]);
        CHECK(it && it->source == PROGCACHE_SETTING_ENV && it->number == 1 && !it->in_file);
        CHECK(it && !strcmp(it->variable, vars[i]));
        progcache_settings_free(set);
        unsetenv(vars[i]);
    }
    test_rmdtemp(dir);
}

int main(void)
{
    unsetenv("PROGCACHE_REMOTE");
    test_disable();
    test_readonly();
    test_recache();
    test_bad_value_and_table();
    puts("test_switches: ok");
    return 0;
}
