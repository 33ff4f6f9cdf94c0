/* Making a PCH off the critical path (src/pch/pch_detach.c, the default
 * PROGCACHE_PCH_CREATE=detached): the compile that finds a prefix worth a
 * PCH returns the plain compile's artifact (the same bytes as without the
 * tier) and hands the creation to a detached helper once it has taken
 * PROGCACHE_PCH_MIN_MS, while it still runs: at its return pch_deferred
 * is 1 and nothing is made (pch_created 0, no PCH
 * file named by a manifest). The process may exit right away: the helper
 * outlives it and leaves its answer (<key>.made), which the next compile
 * of the prefix publishes and uses. One creation per prefix at a time. A
 * helper that cannot take the request is a fallback, said once. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pch_fixtures.h"
#include "progcache/cuda.h"

/* Whether <cache>/progcache/pch-<uid>/ holds a name ending in suffix. */
static int has_file(const char *cache_dir, const char *suffix)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/progcache/pch-%u", cache_dir, (unsigned)geteuid());
    DIR *d = opendir(dir);
    int found = 0;
    size_t sl = strlen(suffix);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        found |= n > sl && !strcmp(e->d_name + n - sl, suffix);
    }
    if (d)
        closedir(d);
    return found;
}

/* The detached helper's answer: waited for (a bound, not a timing: a
 * helper that never answers fails the test after two minutes). */
static void wait_made(const char *dir)
{
    for (int i = 0; i < 1200 && !has_file(dir, ".made"); i++) {
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    CHECK(has_file(dir, ".made"));
    CHECK(!has_file(dir, ".making")); /* the helper is done, and said so */
}

static void test_after_return(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchdet");
    /* A child compiles the first variant and exits at once, as a
     * short-lived tool does. */
    pid_t pid = fork();
    if (pid == 0) {
        progcache *c;
        if (progcache_open(&c, dir, NULL) != PROGCACHE_OK)
            _exit(2);
        compiled first = compile_v(c, 0, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
        compiled plain = plain_v(0, "h3", PROGCACHE_TARGET_CUBIN);
        progcache_stats s = stats_of(c);
        /* Returned: the plain compile's bytes; the creation was handed
         * off (deferred), nothing made yet. */
        uint64_t total;
        int ok = first.size > 0 && same(&first, &plain) && s.pch_deferred == 1 &&
                 s.pch_created == 0 && s.pch_hits == 0 && s.pch_fallbacks == 0 &&
                 pch_files(dir, &total, NULL, 0) <= 1 && !has_file(dir, ".manifest");
        if (!ok)
            printf("child: deferred %llu created %llu hits %llu fallbacks %llu\n",
                   (unsigned long long)s.pch_deferred, (unsigned long long)s.pch_created,
                   (unsigned long long)s.pch_hits, (unsigned long long)s.pch_fallbacks);
        _exit(ok ? 0 : 1); /* no close, no flush: the helper must not need us */
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    wait_made(dir);
    CHECK(!has_file(dir, ".manifest"));

    /* The next compile of the prefix publishes it and uses it. */
    compiled second = compile_v(cache, 1, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    compiled plain = plain_v(1, "h3", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&second, &plain));
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_created == 1 && s.pch_hits == 1 && s.pch_deferred == 1);
    CHECK(has_file(dir, ".manifest") && !has_file(dir, ".made"));
    free(second.bytes);
    free(plain.bytes);
    /* And the ones after it, with no new creation. */
    compiled third = compile_v(cache, 2, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    compiled plain3 = plain_v(2, "h3", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&third, &plain3));
    s = stats_of(cache);
    CHECK(s.pch_hits == 2 && s.pch_deferred == 1 && s.pch_created == 1);
    free(third.bytes);
    free(plain3.bytes);
    close_cache(cache, dir);
}

/* A creation under way (its marker fresh): no second one is started. */
static void test_one_at_a_time(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchdet1");
    compiled a = compile_v(cache, 0, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    free(a.bytes);
    CHECK(stats_of(cache).pch_deferred == 1);
    wait_made(dir);
    /* A marker as a running creation leaves it, and the answer taken away:
     * the next compiles are plain and start nothing. */
    char path[900];
    DIR *d;
    snprintf(path, sizeof path, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK((d = opendir(path)) != NULL);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".made")) {
            char from[1200], to[1200];
            snprintf(from, sizeof from, "%s/%s", path, e->d_name);
            snprintf(to, sizeof to, "%s/%.*s.making", path, (int)(n - 5), e->d_name);
            CHECK(rename(from, to) == 0);
        }
    }
    if (d)
        closedir(d);
    compiled b = compile_v(cache, 1, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    compiled plain = plain_v(1, "h3", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&b, &plain));
    CHECK(stats_of(cache).pch_deferred == 1 && stats_of(cache).pch_created == 0);
    free(b.bytes);
    free(plain.bytes);
    close_cache(cache, dir);
}

/* A helper that cannot take the request: the compile is the plain one,
 * a fallback is counted and said once. */
static void test_helper_fails(void)
{
    char script[700];
    snprintf(script, sizeof script, "%s/fail.sh", work);
    write_script(script, "#!/bin/sh\nexit 3\n");
    setenv("PROGCACHE_PCH_HELPER", script, 1);
    char *dir;
    progcache *cache = open_cache(&dir, "pchdetf");
    logbook book = {""};
    for (int v = 0; v < 3; v++) {
        compiled c = compile_v(cache, v, 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
        compiled plain = plain_v(v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &plain));
        free(c.bytes);
        free(plain.bytes);
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_deferred == 0 && s.pch_created == 0 && s.pch_fallbacks >= 1);
    const char *said = strstr(book.text, "did not take the request");
    CHECK(said != NULL && strstr(said + 1, "did not take the request") == NULL);
    close_cache(cache, dir);
    setenv("PROGCACHE_PCH_HELPER", helper, 1);
}

/* plain_ms of the one <key>.seen record in the cache's PCH directory. */
static long long seen_plain_ms(const char *cache_dir)
{
    char path[700];
    snprintf(path, sizeof path, "%s/progcache/pch-%u", cache_dir, (unsigned)geteuid());
    DIR *d = opendir(path);
    long long ms = -1;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".seen")) {
            char file[1000];
            snprintf(file, sizeof file, "%s/%s", path, e->d_name);
            size_t len;
            char *text = test_read_file(file, &len);
            const char *at = text ? strstr(text, "\nplain_ms ") : NULL;
            ms = at ? atoll(at + 10) : -1;
            free(text);
        }
    }
    if (d)
        closedir(d);
    return ms;
}

static long long realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* The creation starts while the compile that found the prefix slow still
 * runs: once it has taken PROGCACHE_PCH_MIN_MS (0 here), not after it. A
 * wrapper of the helper notes when it starts, which must be before the
 * call's start plus the plain compile's time (its seen record): before
 * the plain compile ended. Three prefixes are tried (a loaded machine may
 * schedule the wrapper late); a creation started only after the plain
 * compile fails all three. A slow-sight floor the
 * compile never reaches starts nothing. */
static void test_early_start(void)
{
    char script[700], spawns[700], text[1800];
    snprintf(script, sizeof script, "%s/early.sh", work);
    snprintf(spawns, sizeof spawns, "%s/early.spawns", work);
    snprintf(text, sizeof text, "#!/bin/sh\ndate +%%s%%N >> '%s'\nexec '%s'\n", spawns, helper);
    write_script(script, text);
    setenv("PROGCACHE_PCH_HELPER", script, 1);
    int early = 0;
    char define[32];
    for (int attempt = 0; attempt < 3 && !early; attempt++) {
        snprintf(define, sizeof define, "-DEARLY_ATTEMPT=%d", attempt);
        extra_option = define; /* a new prefix key: nothing known of it */
        (void)unlink(spawns);
        char *dir;
        progcache *cache = open_cache(&dir, "pchdetearly");
        long long started = realtime_ns();
        compiled c = compile_v(cache, 0, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
        CHECK(c.size > 0 && stats_of(cache).pch_deferred == 1);
        free(c.bytes);
        long long plain_ms = seen_plain_ms(dir);
        CHECK(plain_ms >= 0);
        size_t n;
        char *at = test_read_file(spawns, &n);
        early = at && atoll(at) > 0 && atoll(at) < started + plain_ms * 1000000;
        free(at);
        wait_made(dir);
        close_cache(cache, dir);
    }
    CHECK(early);
    /* A floor of a minute: the compile is fast, nothing is made. */
    setenv("PROGCACHE_PCH_MIN_MS", "60000", 1);
    extra_option = "-DEARLY_ATTEMPT=floor";
    (void)unlink(spawns);
    char *dir;
    progcache *cache = open_cache(&dir, "pchdetfloor");
    compiled c = compile_v(cache, 0, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    CHECK(c.size > 0 && stats_of(cache).pch_deferred == 0 && access(spawns, F_OK) != 0);
    free(c.bytes);
    close_cache(cache, dir);
    setenv("PROGCACHE_PCH_MIN_MS", "0", 1);
    extra_option = NULL;
    setenv("PROGCACHE_PCH_HELPER", helper, 1);
}

int main(void)
{
    setenv("PROGCACHE_PCH_CREATE", "detached", 1);
    if (!pch_fixtures_setup("test_pch_detach"))
        return 77;
    test_after_return();
    test_one_at_a_time();
    test_helper_fails();
    test_early_start();
    pch_fixtures_teardown();
    puts("test_pch_detach: ok");
    return 0;
}
