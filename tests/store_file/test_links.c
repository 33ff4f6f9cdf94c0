/* Issue 29, case 2, and the store's own directories (docs/SECURITY.md, "No
 * symbolic links are followed"): a symbolic link planted in place of a
 * directory of the cache is refused, counted (links_refused), named once
 * per handle, and never followed. Each case runs twice: with openat2, and
 * the way a kernel without it goes (one O_NOFOLLOW | O_DIRECTORY component
 * at a time: progcache__fs_force_walk).
 *
 * Shown, with the real shard moved out of the cache and a link to it put
 * in its place (so the bait is the real entry, seal and all):
 *   - remove of the key deletes nothing through the link;
 *   - get does not serve the bytes behind the link (a miss);
 *   - put fails and creates nothing behind the link;
 *   - the heal of a corrupt entry (moved aside into progcache/tmp/) does
 *     not move it through a link at progcache/tmp;
 *   - progcache/flight.d and progcache/pch-<uid> (lease files, PCHs) are
 *     refused when a link stands there, and nothing is made behind it;
 *   - the refusal is counted each time and each link named once per
 *     handle. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fs.h"
#include "progcache/file.h"
#include "progcache/stats.h"
#include "progcache/store.h"
#include "sha256.h"
#include "dir/dir.h"
#include "store/store_calls.h"

#define NAMED "where the cache keeps a directory"

static int named;

static void count_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    (void)level;
    if (strstr(msg, NAMED))
        named++;
}

static char base[64];

static progcache_file *open_cache(const char *dir)
{
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    o.log = count_log;
    o.flags = PROGCACHE_FILE_NO_FSYNC;
    progcache_file *f = NULL;
    CHECK_OK(progcache_file_open(&f, dir, &o));
    return f;
}

static uint64_t links_refused(progcache_file *f)
{
#if PROGCACHE_STATS_VERSION >= 5
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&s, progcache_file_store(f)));
    return s.links_refused;
#else
    (void)f;
    return 0; /* before issue 29: nothing counted */
#endif
}

/* The entry's 64-digit name of key. */
static void name_of(char out[65], const char *key)
{
    unsigned char d[32];
    CHECK_OK(progcache__sha256_oneshot(d, key, strlen(key)));
    progcache__hex(out, d, sizeof d);
    out[64] = '\0';
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* How many names dir holds. */
static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

/* Move rel of cache out to a fresh folder and put a link to it in its
 * place; the folder's path in out. */
static void swap_for_link(char *out, size_t len, const char *cache, const char *rel)
{
    static int n;
    n++;
    char real[512];
    snprintf(real, sizeof real, "%s/%s", cache, rel);
    snprintf(out, len, "%s/bait%d", base, n);
    if (exists(real))
        CHECK(rename(real, out) == 0);
    else
        CHECK(mkdir(out, 0700) == 0);
    CHECK(symlink(out, real) == 0);
}

static void test_shard(int walk, int n)
{
    progcache__fs_force_walk(walk);
    char cache[128], bait[256], name[65], in_bait[512];
    snprintf(cache, sizeof cache, "%s/shard%d", base, n);
    named = 0;
    progcache_file *f = open_cache(cache);
    progcache_store *s = progcache_file_store(f);
    CHECK_OK(progcache_store_put(s, "k1", 2, "artifact bytes", 14));
    name_of(name, "k1");
    char shard_rel[16];
    snprintf(shard_rel, sizeof shard_rel, "entries/%.2s", name);
    swap_for_link(bait, sizeof bait, cache, shard_rel);
    snprintf(in_bait, sizeof in_bait, "%s/%s", bait, name + 2);
    CHECK(exists(in_bait));
    uint64_t before = links_refused(f);

    /* remove: the entry behind the link stays. */
    int rc = progcache_store_remove(s, "k1", 2);
    CHECK(rc != PROGCACHE_OK);
    CHECK(exists(in_bait));
    /* get: the bytes behind the link are not served. */
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&out, s, "k1", 2));
    /* put: fails, nothing is written behind the link. */
    CHECK(progcache_store_put(s, "k1", 2, "other bytes", 11) != PROGCACHE_OK);
    int fd = open(in_bait, O_RDONLY);
    char buf[32] = "";
    CHECK(fd >= 0 && read(fd, buf, sizeof buf) == 14 && !memcmp(buf, "artifact bytes", 14));
    if (fd >= 0)
        close(fd);
    CHECK(count_files(bait) == 1); /* only the entry: nothing made there */
    /* clear: nothing behind the link. */
    CHECK_OK(progcache_store_clear(s));
    CHECK(exists(in_bait));
#if PROGCACHE_STATS_VERSION >= 5
    CHECK(links_refused(f) >= before + 3);
    CHECK(named == 1); /* named once per handle */
#endif
    (void)before;
    progcache_buf_free(&out);
    progcache_file_close(f);
    progcache__fs_force_walk(0);
}

/* A corrupt entry is healed by moving it aside into progcache/tmp/ and
 * removing it there: with a link at progcache/tmp, nothing goes there. */
static void test_heal(int walk, int n)
{
    progcache__fs_force_walk(walk);
    char cache[128], bait[256], name[65], entry[512];
    snprintf(cache, sizeof cache, "%s/heal%d", base, n);
    named = 0;
    progcache_file *f = open_cache(cache);
    progcache_store *s = progcache_file_store(f);
    CHECK_OK(progcache_store_put(s, "k2", 2, "artifact bytes", 14));
    name_of(name, "k2");
    snprintf(entry, sizeof entry, "%s/entries/%.2s/%s", cache, name, name + 2);
    int fd = open(entry, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, "X", 1, 0) == 1);
    if (fd >= 0)
        close(fd);
    swap_for_link(bait, sizeof bait, cache, "progcache/tmp");
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&out, s, "k2", 2));
    CHECK(count_files(bait) == 0);
    CHECK(exists(entry)); /* not removed: it could not be moved aside */
#if PROGCACHE_STATS_VERSION >= 5
    CHECK(links_refused(f) >= 1 && named == 1);
#endif
    progcache_buf_free(&out);
    progcache_file_close(f);
    progcache__fs_force_walk(0);
}

/* progcache/flight.d (lease files) and progcache/pch-<uid> (PCHs). */
static void test_places(int walk, int n)
{
    progcache__fs_force_walk(walk);
    char cache[128], bait[256], pch[64], why[256];
    snprintf(cache, sizeof cache, "%s/places%d", base, n);
    named = 0;
    progcache_file *f = open_cache(cache);
    progcache_store *s = progcache_file_store(f);
    swap_for_link(bait, sizeof bait, cache, "progcache/flight.d");
    errno = 0;
    CHECK(progcache__store_open_own_dir(s, PROGCACHE__PLACE_FLIGHT_D) < 0);
    CHECK(errno == ELOOP || errno == ENOTDIR);
    CHECK(count_files(bait) == 0);
    snprintf(pch, sizeof pch, "progcache/pch-%u", (unsigned)geteuid());
    swap_for_link(bait, sizeof bait, cache, pch);
    CHECK(progcache__store_open_private_dir(s, PROGCACHE__PLACE_PCH, why, sizeof why) < 0);
    CHECK(count_files(bait) == 0);
#if PROGCACHE_STATS_VERSION >= 5
    CHECK(links_refused(f) >= 2 && named == 2); /* each link named, once */
#endif
    progcache_file_close(f);
    progcache__fs_force_walk(0);
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/progcache-links-XXXXXX");
    CHECK(mkdtemp(base) != NULL);
    for (int walk = 0; walk < 2; walk++) {
        test_shard(walk, walk);
        test_heal(walk, walk);
        test_places(walk, walk);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    /* A leftover temp directory is not a failure of this test; glibc's
     * warn_unused_result on system() is not silenced by a (void) cast. */
    if (system(cmd) != 0)
        fprintf(stderr, "test_links: could not remove %s\n", base);
    puts("test_links: ok");
    return 0;
}
