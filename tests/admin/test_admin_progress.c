/* Progress of the long admin operations (progcache/admin.h,
 * progcache_progress_fn): prune scans 256 shards then removes what it
 * planned, clear goes shard by shard, export counts entries, import
 * checks bytes then imports entries; a callback can stop each; version 1
 * option structs (before on_progress) are still accepted. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct seen {
    char what[4][16];
    uint64_t last_done[4], last_total[4], calls[4];
    int phases;
    int stop_after; /* stop (return 7) after this many calls; 0: never */
    int calls_total;
} seen;

static int on_progress(void *ctx, const char *what, uint64_t done, uint64_t total)
{
    seen *s = ctx;
    int i = 0;
    while (i < s->phases && strcmp(s->what[i], what))
        i++;
    if (i == s->phases) {
        CHECK(s->phases < 4);
        snprintf(s->what[s->phases++], sizeof s->what[0], "%s", what);
    }
    CHECK(done >= s->last_done[i] && (total == 0 || done <= total));
    s->last_done[i] = done;
    s->last_total[i] = total;
    s->calls[i]++;
    return s->stop_after && ++s->calls_total >= s->stop_after ? 7 : 0;
}

static progcache_file *filled(const char *dir, unsigned n)
{
    progcache_file *f;
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_NO_FSYNC;
    CHECK_OK(progcache_file_open(&f, dir, &o));
    static unsigned char value[1000];
    for (unsigned i = 0; i < n; i++) {
        unsigned char key[4] = {(unsigned char)i, (unsigned char)(i >> 8), 9, 9};
        CHECK_OK(
            progcache_store_put(progcache_file_store(f), key, sizeof key, value, sizeof value));
    }
    return f;
}

static void test_prune(void)
{
    char *dir = test_mkdtemp("progprune");
    progcache_file *f = filled(dir, 50);
    seen s = {0};
    progcache_prune_options po = PROGCACHE_PRUNE_OPTIONS_INIT;
    po.max_size = 20000;
    po.on_progress = on_progress;
    po.ctx = &s;
    progcache_prune_result pr = PROGCACHE_PRUNE_RESULT_INIT;
    CHECK_OK(progcache_file_prune(&pr, f, &po));
    CHECK(pr.removed == 30);
    CHECK(s.phases == 2 && !strcmp(s.what[0], "scanning") && !strcmp(s.what[1], "removing"));
    CHECK(s.last_done[0] == 256 && s.last_total[0] == 256 && s.calls[0] == 256);
    CHECK(s.last_done[1] == 30 && s.last_total[1] == 30);
    /* A callback that says stop stops it. */
    memset(&s, 0, sizeof s);
    s.stop_after = 10;
    po.max_size = 1000;
    CHECK_RC(7, progcache_file_prune(&pr, f, &po));
    /* Version 1 of the struct: no callback, still accepted. */
    progcache_prune_options full = PROGCACHE_PRUNE_OPTIONS_INIT;
    full.version = 1;
    full.max_size = 5000;
    void *v1 = malloc(offsetof(progcache_prune_options, on_progress));
    CHECK(v1);
    memcpy(v1, &full, offsetof(progcache_prune_options, on_progress));
    CHECK_OK(progcache_file_prune(&pr, f, v1));
    CHECK(pr.total_size <= 5000);
    free(v1);
    progcache_file_close(f);
    test_rmdtemp(dir);
}

static void test_clear(void)
{
    char *dir = test_mkdtemp("progclear");
    progcache_file *f = filled(dir, 20);
    seen s = {0};
    progcache_prune_result pr = PROGCACHE_PRUNE_RESULT_INIT;
    CHECK_OK(progcache_file_clear(&pr, f, on_progress, &s));
    CHECK(pr.removed == 20 && pr.removed_bytes == 20000 && pr.entries == 0);
    CHECK(s.phases == 1 && !strcmp(s.what[0], "removing") && s.last_done[0] == 256);
    CHECK_OK(progcache_file_clear(NULL, f, NULL, NULL));
    progcache_file_close(f);
    /* Read-only: refused. */
    progcache_file_options ro = PROGCACHE_FILE_OPTIONS_INIT;
    ro.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_file_open(&f, dir, &ro));
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_clear(NULL, f, NULL, NULL));
    progcache_file_close(f);
    test_rmdtemp(dir);
}

static void test_archives(void)
{
    char *dir = test_mkdtemp("progarchive"), *into = test_mkdtemp("progarchive2");
    progcache_file *f = filled(dir, 12);
    char tar[4096];
    snprintf(tar, sizeof tar, "%s.tar", into);
    seen s = {0};
    progcache_archive_options ao = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    ao.on_progress = on_progress;
    ao.ctx = &s;
    progcache_archive_result ar = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_file_export(&ar, f, tar, &ao));
    CHECK(ar.entries == 12);
    CHECK(s.phases == 1 && !strcmp(s.what[0], "exporting") && s.last_done[0] == 12 &&
          s.last_total[0] == 12);
    progcache_file *g = filled(into, 0);
    memset(&s, 0, sizeof s);
    CHECK_OK(progcache_file_import(&ar, g, tar, &ao));
    CHECK(ar.entries == 12);
    CHECK(s.phases == 2 && !strcmp(s.what[0], "checking") && !strcmp(s.what[1], "importing"));
    CHECK(s.last_total[0] > 12 * 1000 && s.last_done[0] <= s.last_total[0]);
    CHECK(s.last_done[1] == 12 && s.last_total[1] == 12);
    /* Stopped while checking: nothing imported. */
    CHECK_OK(progcache_store_clear(progcache_file_store(g)));
    memset(&s, 0, sizeof s);
    s.stop_after = 2;
    CHECK_RC(7, progcache_file_import(&ar, g, tar, &ao));
    uint64_t n = 99;
    CHECK_OK(progcache_store_count(&n, progcache_file_store(g)));
    CHECK(n == 0);
    /* Version 1: accepted. */
    progcache_archive_options full = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    full.version = 1;
    void *v1 = malloc(offsetof(progcache_archive_options, on_progress));
    CHECK(v1);
    memcpy(v1, &full, offsetof(progcache_archive_options, on_progress));
    CHECK_OK(progcache_file_import(&ar, g, tar, v1));
    CHECK(ar.entries == 12);
    free(v1);
    progcache_file_close(g);
    progcache_file_close(f);
    remove(tar);
    test_rmtree(dir);
    test_rmtree(into);
    free(dir);
    free(into);
}

int main(void)
{
    test_prune();
    test_clear();
    test_archives();
    puts("test_admin_progress: ok");
    return 0;
}
