/* The PCH tier's guards (docs/CUDA.md "Precompiled headers",
 * RELIABILITY.md): rule 2 (a PCH directory that is not the user's own is
 * left alone, names the tier does not make survive, the file store's
 * verify and clear leave the tier's files), rule 3 (a helper that dies,
 * hangs or goes mute cannot hold or fail the caller), a cache opened
 * read-only, and the off switches. Fixtures: pch_fixtures.c. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pch/pch_tier.h"
#include "pch_fixtures.h"
#include "progcache/admin.h"
#include "progcache/cuda.h"
#include "progcache/file.h"


/* A cache opened read-only gets nothing written, PCHs included: the tier
 * stays out (it would make, touch and remove PCHs there). */
static void test_read_only(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchro");
    progcache_close(cache);
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_open(&cache, dir, &o));
    for (int v = 0; v < 3; v++) {
        compiled c = compile_v(cache, 190 + v, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
        compiled p = plain_v(190 + v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK(lstat(path, &st) != 0);
    CHECK(stats_of(cache).pch_misses == 0);
    close_cache(cache, dir);
}

/* The off switches: PROGCACHE_PCH=0 (or off) and NVRTC_DISABLE_PCH keep
 * the tier out entirely (no PCH directory made, nothing counted); a setting
 * that cannot be used turns the tier off and says so, once per handle. The
 * compiles are the same either way. */
static void off_with(const char *var, const char *value, const char *said)
{
    setenv(var, value, 1);
    char *dir;
    progcache *cache = open_cache(&dir, "pchoff");
    logbook book = {""};
    compile_same(cache, 140, 3, &book);
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_misses == 0 && s.pch_hits == 0 && s.pch_created == 0 && s.pch_fallbacks == 0);
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK(lstat(path, &st) != 0);
    if (said) {
        const char *at = strstr(book.text, said);
        CHECK(at != NULL && strstr(at + 1, said) == NULL);
    }
    close_cache(cache, dir);
    unsetenv(var);
}

static void test_off(void)
{
    off_with("PROGCACHE_PCH", "0", NULL);
    off_with("PROGCACHE_PCH", "off", NULL);
    off_with("NVRTC_DISABLE_PCH", "1", "NVRTC_DISABLE_PCH is set");
    off_with("PROGCACHE_PCH", "maybe", "PROGCACHE_PCH=maybe cannot be used");
    off_with("PROGCACHE_PCH_MAX_SIZE", "lots", "PROGCACHE_PCH_MAX_SIZE=lots cannot be used");
    off_with("PROGCACHE_PCH_MIN_MS", "-1", "PROGCACHE_PCH_MIN_MS=-1 cannot be used");
}


/* Rule 3: a helper that is killed, one that hangs, and ones that close
 * their socket and then hang cannot hold or fail the caller: the helper is
 * killed at the deadline and reaped, the compile runs here with the same
 * bytes, counted and said once. (The deadline is shortened from ten
 * minutes for the test; nothing here asserts a time.) */
static void test_helper_hangs_or_dies(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/die.sh", work);
    write_script(path, "#!/bin/sh\nkill -KILL $$\n");
    without_helper(path, "died of signal 9");
    unsigned int saved = progcache__pch_helper_timeout_ms;
    progcache__pch_helper_timeout_ms = 1000;
    snprintf(path, sizeof path, "%s/hang.sh", work);
    write_script(path, "#!/bin/sh\nexec /bin/sleep 600\n");
    without_helper(path, "did not finish within 1000 ms");
    /* Reads the request, closes its socket, stays: not waited for past
     * the deadline. */
    snprintf(path, sizeof path, "%s/mute.sh", work);
    write_script(path, "#!/bin/sh\n/bin/cat >/dev/null\nexec 0<&- 1>&-\nexec /bin/sleep 600\n");
    without_helper(path, "did not finish within 1000 ms");
    /* Closes its socket unread and stays: killed a second later. */
    snprintf(path, sizeof path, "%s/rude.sh", work);
    write_script(path, "#!/bin/sh\nexec 0<&- 1>&-\nexec /bin/sleep 600\n");
    without_helper(path, "gave no usable answer");
    progcache__pch_helper_timeout_ms = saved;
}

static int count_names(const char *path)
{
    DIR *d = opendir(path);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* Compiles of three variants through a cache whose PCH directory is not
 * this user's private one: all succeed, the tier is off and says why. */
static void compile_refused(progcache *cache, int base)
{
    logbook book = {""};
    for (int v = 0; v < 3; v++) {
        compiled c = compile_v(cache, base + v, 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
        compiled p = plain_v(base + v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
    CHECK(strstr(book.text, "the PCH tier is off for this cache") != NULL);
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_created == 0 && s.pch_hits == 0);
}

static int on_foreign(void *ctx, const char *path, const char *what)
{
    (void)what;
    fprintf(stderr, "test_pch: foreign %s\n", path);
    ++*(int *)ctx;
    return 0;
}

/* Rule 2: the cache touches only what it made. A pch-<uid> directory that
 * others may enter, or a symbolic link in its place, turns the tier off
 * for that cache and is left exactly as it was (nothing created through
 * the link). In the tier's own directory, names it does not make survive
 * its sweeps, however old. The file store's verify does not call the PCH
 * directory foreign, and clearing the entries leaves the PCHs alone. */
static void test_foreign(void)
{
    char pdir[700];
    /* Others may enter it. */
    char *dir = test_mkdtemp("pchforeign");
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    snprintf(pdir, sizeof pdir, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK(mkdir(pdir, 0700) == 0 && chmod(pdir, 0755) == 0);
    compile_refused(cache, 150);
    struct stat st;
    CHECK(lstat(pdir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755);
    CHECK(count_names(pdir) == 0);
    close_cache(cache, dir);

    /* A symbolic link to a directory elsewhere. */
    char elsewhere[600];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", work);
    CHECK(mkdir(elsewhere, 0700) == 0);
    dir = test_mkdtemp("pchlink");
    CHECK_OK(progcache_open(&cache, dir, NULL));
    snprintf(pdir, sizeof pdir, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK(symlink(elsewhere, pdir) == 0);
    compile_refused(cache, 160);
    CHECK(lstat(pdir, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(count_names(elsewhere) == 0);
    close_cache(cache, dir);
    CHECK(rmdir(elsewhere) == 0);

    /* Names the tier does not make, in its own directory, two days old. */
    cache = open_cache(&dir, "pchnames2");
    warm(cache, 170, "h3");
    progcache_close(cache);
    snprintf(pdir, sizeof pdir, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    static const char *const strangers[] = {"notes.txt", "mine.pch", "tmp-x", "proc-zz",
                                            "nopin", "0123.seen"};
    struct timespec old[2] = {{time(NULL) - 2 * 86400, 0}, {time(NULL) - 2 * 86400, 0}};
    for (size_t i = 0; i < sizeof strangers / sizeof *strangers; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", pdir, strangers[i]);
        write_text(path, "not progcache's\n");
        CHECK(utimensat(AT_FDCWD, path, old, 0) == 0);
    }
    int before = count_names(pdir);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    compiled c = compile_v(cache, 180, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    free(c.bytes);
    CHECK(stats_of(cache).pch_hits == 2); /* warm's one, and this one */
    CHECK(count_names(pdir) == before);
    for (size_t i = 0; i < sizeof strangers / sizeof *strangers; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", pdir, strangers[i]);
        CHECK(access(path, F_OK) == 0);
    }

    /* The file store: verify finds nothing foreign, clear keeps the PCHs. */
    CHECK_OK(progcache_clear(cache));
    uint64_t total;
    CHECK(pch_files(dir, &total, NULL, 0) == 2); /* ours and mine.pch */
    progcache_file *file;
    CHECK_OK(progcache_file_open(&file, dir, NULL));
    int foreign = 0;
    progcache_verify_options vo = PROGCACHE_VERIFY_OPTIONS_INIT;
    vo.on_foreign = on_foreign;
    vo.ctx = &foreign;
    progcache_verify_result vr = PROGCACHE_VERIFY_RESULT_INIT;
    CHECK_OK(progcache_file_verify(&vr, file, &vo));
    CHECK(vr.foreign == 0 && foreign == 0);
    progcache_file_close(file);
    c = compile_v(cache, 181, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    free(c.bytes);
    CHECK(stats_of(cache).pch_hits == 3);
    close_cache(cache, dir);
}

/* test_off last: NVRTC_DISABLE_PCH stays set. */
PCH_TEST_MAIN("test_pch_guard", test_helper_hangs_or_dies, test_foreign, test_read_only,
              test_off)
