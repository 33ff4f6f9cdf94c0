/* Fixtures of the issue 32 tests (scale_fixture.h). */
#include "scale_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

uint64_t scale_measure(const char *dir, uint64_t *entries)
{
    uint64_t total = 0, n = 0;
    for (int shard = 0; shard < 256; shard++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/entries/%02x", dir, shard);
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            struct stat st;
            if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0) {
                total += (uint64_t)st.st_size;
                n++;
            }
        }
        if (d)
            closedir(d);
    }
    if (entries)
        *entries = n;
    return total;
}

void scale_foreign_write(const char *dir, uint64_t n, size_t size, int shard, char name[65])
{
    char path[4096], to[4096], own[65];
    snprintf(path, sizeof path, "%s/tmp", dir);
    (void)mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/tmp/entry-XXXXXX", dir);
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    char *buf = calloc(1, size + 1);
    CHECK(buf && write(fd, buf, size) == (ssize_t)size);
    free(buf);
    close(fd);
    /* 64 hex digits from n (splitmix64, four rounds): distinct names. */
    uint64_t x = n * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    for (int i = 0; i < 64; i++) {
        if (i % 16 == 0) {
            x += 0x9e3779b97f4a7c15ull;
            x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
            x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
            x ^= x >> 31;
        }
        own[i] = "0123456789abcdef"[(x >> ((i % 16) * 4)) & 15];
    }
    own[64] = '\0';
    if (shard >= 0) {
        own[0] = "0123456789abcdef"[shard >> 4];
        own[1] = "0123456789abcdef"[shard & 15];
    }
    snprintf(to, sizeof to, "%s/entries", dir);
    (void)mkdir(to, 0700);
    snprintf(to, sizeof to, "%s/entries/%.2s", dir, own);
    (void)mkdir(to, 0700);
    snprintf(to, sizeof to, "%s/entries/%.2s/%s", dir, own, own + 2);
    CHECK(rename(path, to) == 0);
    if (name)
        snprintf(name, 65, "%s", own);
}

progcache_stats scale_stats(progcache_store *s)
{
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&st, s));
    return st;
}

void scale_check_counters(progcache_store *s, const char *dir, uint64_t slack)
{
    uint64_t bytes = 0, count = 0, n;
    uint64_t truth = scale_measure(dir, &n);
    CHECK_OK(progcache_store_total_size(&bytes, s));
    CHECK_OK(progcache_store_count(&count, s));
    printf("  counters %llu bytes in %llu entries, directory %llu in %llu\n",
           (unsigned long long)bytes, (unsigned long long)count, (unsigned long long)truth,
           (unsigned long long)n);
    CHECK(bytes >= truth && bytes - truth <= slack);
    if (!slack)
        CHECK(count == n);
}
