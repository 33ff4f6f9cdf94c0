/* A cache directory's settings through progcache_open and the file store
 * (progcache/settings.h): file < environment < the program's options; the
 * default cap evicts when nothing sets one; each setting takes effect;
 * bad values fail the open naming their source; the settings file is
 * read with the rules of every file of ours (a FIFO, a huge file, a link
 * are refused at once) and written whole by progcache_settings_set. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fs.h"

static void write_text(const char *dir, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static void make_cache(const char *dir)
{
    progcache_file *f;
    CHECK_OK(progcache_file_open(&f, dir, NULL));
    progcache_file_close(f);
}

static uint64_t cap_of(const char *dir, const progcache_options *opts)
{
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, opts));
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    progcache_close(cache);
    return s.max_size;
}

static const progcache_setting *file_setting(progcache_file *f, const char *name)
{
    const progcache_setting *s = progcache_settings_find(progcache_file_settings(f), name);
    CHECK(s);
    return s;
}

static void test_precedence(void)
{
    char *dir = test_mkdtemp("settings");
    /* Nothing set: the default cap. */
    CHECK(cap_of(dir, NULL) == PROGCACHE_MAX_SIZE_DEFAULT);
    /* The file. */
    CHECK_OK(progcache_settings_set(dir, "max_size", "10K"));
    CHECK(cap_of(dir, NULL) == 10240);
    progcache_settings *s;
    CHECK_OK(progcache_settings_load(&s, dir));
    const progcache_setting *max = progcache_settings_find(s, "max_size");
    CHECK(max->source == PROGCACHE_SETTING_FILE && max->number == 10240);
    CHECK(strstr(max->origin, "/progcache/config:") && !strcmp(max->value, "10K"));
    progcache_settings_free(s);
    /* The environment over the file. */
    setenv("PROGCACHE_MAX_SIZE", "20K", 1);
    CHECK(cap_of(dir, NULL) == 20480);
    CHECK_OK(progcache_settings_load(&s, dir));
    max = progcache_settings_find(s, "max_size");
    CHECK(max->source == PROGCACHE_SETTING_ENV && !strcmp(max->origin, "PROGCACHE_MAX_SIZE"));
    progcache_settings_free(s);
    /* The program's option over both; PROGCACHE_SIZE_NONE is "no cap". */
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.max_size = 30000;
    CHECK(cap_of(dir, &o) == 30000);
    o.max_size = PROGCACHE_SIZE_NONE;
    CHECK(cap_of(dir, &o) == 0);
    /* The file store sees the same, with the sources. */
    progcache_file *f;
    progcache_file_options fo = PROGCACHE_FILE_OPTIONS_INIT;
    fo.max_artifact_size = 1 << 20;
    CHECK_OK(progcache_file_open(&f, dir, &fo));
    CHECK(file_setting(f, "max_size")->number == 20480);
    CHECK(file_setting(f, "max_size")->source == PROGCACHE_SETTING_ENV);
    CHECK(file_setting(f, "max_artifact_size")->source == PROGCACHE_SETTING_API);
    CHECK(file_setting(f, "low_water_percent")->source == PROGCACHE_SETTING_DEFAULT);
    progcache_file_close(f);
    /* PROGCACHE_FILE_NO_SETTINGS: neither the file nor the variable. */
    o.max_size = 0;
    o.flags = PROGCACHE_FILE_NO_SETTINGS;
    CHECK(cap_of(dir, &o) == PROGCACHE_MAX_SIZE_DEFAULT);
    unsetenv("PROGCACHE_MAX_SIZE");
    /* Unset: back to the default. */
    CHECK_OK(progcache_settings_set(dir, "max_size", NULL));
    CHECK(cap_of(dir, NULL) == PROGCACHE_MAX_SIZE_DEFAULT);
    test_rmdtemp(dir);
}

static void put_n(progcache *cache, unsigned n, size_t size)
{
    static unsigned char value[4096];
    for (unsigned i = 0; i < n; i++) {
        unsigned char key[8] = {(unsigned char)i, (unsigned char)(i >> 8), 1, 2, 3, 4, 5, 6};
        CHECK_OK(progcache_put(cache, key, sizeof key, value, size));
    }
}

/* The settings file's cap and low-water mark drive eviction. */
static void test_file_cap_evicts(void)
{
    char *dir = test_mkdtemp("settingscap");
    CHECK_OK(progcache_settings_set(dir, "max_size", "10K"));
    CHECK_OK(progcache_settings_set(dir, "low_water_percent", "50"));
    CHECK_OK(progcache_settings_set(dir, "no_fsync", "true"));
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    /* The 11th put takes it over 10 KiB: eviction down to 50 %. */
    put_n(cache, 11, 1000);
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    CHECK(s.evictions >= 6 && s.total_size <= 5120 && s.entries <= 5);
    test_cache_done(cache, dir);
}

/* With nothing set, the 5 GiB default evicts: six sparse 1 GiB entries
 * (st_size counts, no disk is used) and one put take the directory over
 * it, and the least recently used go until it is at 90 %. */
static void test_default_cap_evicts(void)
{
    char *dir = test_mkdtemp("settingsdefault");
    make_cache(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/entries/aa", dir);
    CHECK(mkdir(path, 0777) == 0);
    time_t now = time(NULL);
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/entries/aa/%062d", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
        CHECK(fd >= 0 && ftruncate(fd, (off_t)1 << 30) == 0);
        /* Older use first: entry 0 is the least recently used. */
        struct timespec times[2] = {{now - 10000 + i * 100, 0}, {now - 10000, 0}};
        CHECK(futimens(fd, times) == 0);
        close(fd);
    }
    progcache *cache;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_NO_FSYNC;
    CHECK_OK(progcache_open(&cache, dir, &o));
    put_n(cache, 1, 100);
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    CHECK(s.max_size == PROGCACHE_MAX_SIZE_DEFAULT);
    CHECK(s.evictions == 2 && s.evicted_bytes == 2ull << 30);
    CHECK(s.total_size <= PROGCACHE_MAX_SIZE_DEFAULT / 100 * 90);
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/entries/aa/%062d", dir, i);
        CHECK((access(path, F_OK) == 0) == (i >= 2));
    }
    test_cache_done(cache, dir);
}

/* Each setting takes effect, from the environment here. */
static void test_each_setting(void)
{
    char *dir = test_mkdtemp("settingseach");
    progcache *cache;
    unsigned char key[4] = {1, 2, 3, 4}, big[2048] = {0};
    /* max_artifact_size */
    setenv("PROGCACHE_MAX_ARTIFACT_SIZE", "1K", 1);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_put(cache, key, sizeof key, big, sizeof big));
    CHECK_OK(progcache_put(cache, key, sizeof key, big, 1024));
    progcache_close(cache);
    unsetenv("PROGCACHE_MAX_ARTIFACT_SIZE");
    /* no_fsync: a put whose fsync would fail succeeds without one; the
     * program's PROGCACHE_FILE_FSYNC overrides it. */
    setenv("PROGCACHE_NO_FSYNC", "yes", 1);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache__fs_fail(PROGCACHE_FS_FSYNC, 1, EIO);
    CHECK_OK(progcache_put(cache, key, sizeof key, big, 100));
    progcache__fs_fail_reset();
    progcache_close(cache);
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_FSYNC;
    CHECK_OK(progcache_open(&cache, dir, &o));
    progcache__fs_fail(PROGCACHE_FS_FSYNC, 1, EIO);
    CHECK_RC(PROGCACHE_EIO, progcache_put(cache, key, sizeof key, big, 100));
    progcache__fs_fail_reset();
    progcache_close(cache);
    o.flags = PROGCACHE_FILE_FSYNC | PROGCACHE_FILE_NO_FSYNC;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&cache, dir, &o));
    unsetenv("PROGCACHE_NO_FSYNC");
    /* memory_size: a memory tier answers after the file is gone. */
    setenv("PROGCACHE_MEMORY_SIZE", "1M", 1);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    CHECK_OK(progcache_put(cache, key, sizeof key, big, 100));
    progcache_file *raw;
    CHECK_OK(progcache_file_open(&raw, dir, NULL));
    CHECK_OK(progcache_store_clear(progcache_file_store(raw)));
    progcache_file_close(raw);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, cache, key, sizeof key));
    progcache_close(cache);
    /* PROGCACHE_SIZE_NONE: no memory tier, whatever the variable says. */
    o.flags = 0;
    o.memory_size = PROGCACHE_SIZE_NONE;
    CHECK_OK(progcache_open(&cache, dir, &o));
    CHECK_OK(progcache_put(cache, key, sizeof key, big, 100));
    CHECK_OK(progcache_file_open(&raw, dir, NULL));
    CHECK_OK(progcache_store_clear(progcache_file_store(raw)));
    progcache_file_close(raw);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, cache, key, sizeof key));
    progcache_close(cache);
    unsetenv("PROGCACHE_MEMORY_SIZE");
    progcache_buf_free(&buf);
    test_rmdtemp(dir);
}

static void expect_open_fails(const char *dir, int code, const char *needle)
{
    progcache *cache = NULL;
    CHECK_RC(code, progcache_open(&cache, dir, NULL));
    CHECK(cache == NULL);
    if (!strstr(progcache_error_last(), needle))
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", progcache_error_last(), needle);
    CHECK(strstr(progcache_error_last(), needle));
}

static void keep_warning(void *ctx, int level, const char *message)
{
    if (level == PROGCACHE_LOG_WARN)
        snprintf(ctx, 512, "%s", message);
}

static void test_bad_values(void)
{
    char *dir = test_mkdtemp("settingsbad");
    make_cache(dir);
    write_text(dir, "progcache/config", "# mine\nmax_size = lots\n");
    expect_open_fails(dir, PROGCACHE_EINVAL,
                      "/progcache/config:2: max_size = \"lots\": not a size");
    progcache_settings *s = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_load(&s, dir));
    CHECK(s == NULL);
    /* A read-only open is refused too: there is no cap in force to show. */
    progcache_file *f = NULL;
    progcache_file_options ro = PROGCACHE_FILE_OPTIONS_INIT;
    ro.flags = PROGCACHE_FILE_READONLY;
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_open(&f, dir, &ro));
    /* progcache_settings_set mends it, keeping the comment. */
    CHECK_OK(progcache_settings_set(dir, "max_size", "1G"));
    char path[4096];
    snprintf(path, sizeof path, "%s/progcache/config", dir);
    char *text = test_read_file(path, NULL);
    CHECK(text && !strcmp(text, "# mine\nmax_size = 1G\n"));
    free(text);
    /* A bad value is refused before anything is written. */
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_set(dir, "max_size", "1X"));
    CHECK(strstr(progcache_error_last(), "max_size \"1X\": not a size"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_set(dir, "low_water_percent", "0"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_set(dir, "max_sise", "1G"));
    CHECK(strstr(progcache_error_last(), "unknown setting \"max_sise\""));
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_set(dir, "remote", "redis://h"));
    CHECK(strstr(progcache_error_last(), "environment only"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_set(dir, "max_size", ""));
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_set(dir, "max_size", "1G\nno_fsync = 1"));
    text = test_read_file(path, NULL);
    CHECK(text && !strcmp(text, "# mine\nmax_size = 1G\n"));
    free(text);
    /* A bad variable names itself and is ignored: the cache stays on (the
     * settings file, which progcache config checks when it writes it, is
     * refused above with its line). */
    setenv("PROGCACHE_LOW_WATER_PERCENT", "200", 1);
    char said[512] = "";
    progcache_options lo = PROGCACHE_OPTIONS_INIT;
    lo.log = keep_warning;
    lo.log_ctx = said;
    progcache *open_one = NULL;
    CHECK_OK(progcache_open(&open_one, dir, &lo));
    CHECK(strstr(said, "PROGCACHE_LOW_WATER_PERCENT=\"200\": not a percentage") &&
          strstr(said, "ignored (low_water_percent stays 90, from default)"));
    progcache_close(open_one);
    unsetenv("PROGCACHE_LOW_WATER_PERCENT");
    /* A directory that is not a cache has no settings to show or set. */
    char other[4096];
    snprintf(other, sizeof other, "%s/entries/notacache", dir);
    CHECK(mkdir(other, 0777) == 0);
    write_text(other, "notes.txt", "mine\n");
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_load(&s, other));
    CHECK_RC(PROGCACHE_EINVAL, progcache_settings_set(other, "max_size", "1G"));
    /* A directory that does not exist yet: the defaults. */
    snprintf(other, sizeof other, "%s/entries/missing", dir);
    CHECK_OK(progcache_settings_load(&s, other));
    CHECK(progcache_settings_find(s, "max_size")->source == PROGCACHE_SETTING_DEFAULT);
    progcache_settings_free(s);
    test_rmdtemp(dir);
}

/* Whatever is at progcache/config, the open neither hangs nor reads
 * without bound. */
static void test_hostile_file(void)
{
    char *dir = test_mkdtemp("settingsfifo");
    make_cache(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/progcache/config", dir);
    alarm(60); /* a hang fails the test instead of stalling the suite */
    CHECK(mkfifo(path, 0600) == 0);
    expect_open_fails(dir, PROGCACHE_EIO, "is a FIFO, not a regular file");
    CHECK(unlink(path) == 0);
    /* A sparse file of 1 GiB: refused from its size, never read. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)1 << 30) == 0);
    close(fd);
    expect_open_fails(dir, PROGCACHE_EIO, "more than the 65536");
    CHECK(unlink(path) == 0);
    /* A symbolic link is not followed. */
    CHECK(symlink("/etc/passwd", path) == 0);
    expect_open_fails(dir, PROGCACHE_EIO, "symbolic link");
    CHECK(unlink(path) == 0);
    /* Writable by everyone: anyone could change the cap. */
    write_text(dir, "progcache/config", "max_size = 1G\n");
    CHECK(chmod(path, 0666) == 0);
    expect_open_fails(dir, PROGCACHE_EINVAL, "can be written by every user");
    /* progcache_settings_set replaces it with a file of the usual mode. */
    CHECK_OK(progcache_settings_set(dir, "max_size", "2G"));
    struct stat st;
    CHECK(stat(path, &st) == 0 && !(st.st_mode & S_IWOTH));
    CHECK(cap_of(dir, NULL) == 2ull << 30);
    alarm(0);
    test_rmdtemp(dir);
}

int main(void)
{
    test_precedence();
    test_file_cap_evicts();
    test_default_cap_evicts();
    test_each_setting();
    test_bad_values();
    test_hostile_file();
    puts("test_settings_open: ok");
    return 0;
}
