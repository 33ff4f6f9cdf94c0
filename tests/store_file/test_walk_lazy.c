/* Issue 32 (`ls | head -1`, the sample of `stats --charts`): the walk of a
 * cache directory (progcache_file_foreach) stats an entry when it visits
 * it, not the whole shard before its first visit. Asserted as stats
 * counted (the store's test hooks), never as time, over a shard of 4,000
 * entries and two small ones:
 *
 * - the first visit comes after a stat of O(1) names, not 4,000, without
 *   reading (as the charts do) and with it (as ls does: the opened entry's
 *   fstat, no stat of its name on top);
 * - the whole walk still visits every entry once, in name order, with its
 *   size, and each entry stat'ed is counted once (entries_scanned);
 * - an entry removed after the listing and before its visit is skipped,
 *   with and without reading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scale_fixture.h"
#include "store/file/file_store.h"
#include "store/file/file_walk.h"

#define SHARD 0x00 /* the first shard walked */
#define ENTRIES 4000
#define SMALL 3 /* entries in each of shards 0x01 and 0xff */
#define TOTAL (ENTRIES + 2 * SMALL)

/* The entries written, in name order (by_name: the name comes first). */
static struct {
    char name[65];
    size_t size;
} ents[TOTAL];

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

typedef struct walker {
    const char *dir;
    size_t seen, stop_after; /* stop_after 0: the whole walk */
    char last[65];
    int in_order, sizes_ok, data_ok;
    uint64_t scanned0, statted0;           /* the hooks before the walk */
    uint64_t first_scanned, first_statted; /* and at the first visit */
    const char *remove;                    /* removed at the visit before it */
    int removed_seen;
} walker;

static size_t index_of(const char *name)
{
    const char *hit = bsearch(name, ents, TOTAL, sizeof ents[0], by_name);
    CHECK(hit != NULL);
    return (size_t)(hit - (const char *)ents) / sizeof ents[0];
}

static int visit(void *ctx, const progcache_entry *e)
{
    walker *w = ctx;
    if (w->seen == 0) {
        w->first_scanned = progcache__file_entries_scanned() - w->scanned0;
        w->first_statted = progcache__file_walk_names_statted() - w->statted0;
    }
    if (w->seen && strcmp(w->last, e->name) >= 0)
        w->in_order = 0;
    memcpy(w->last, e->name, 65);
    size_t i = index_of(e->name);
    if (e->size != ents[i].size)
        w->sizes_ok = 0;
    if (e->data && memcmp(e->data, (char[128]){0}, ents[i].size) != 0)
        w->data_ok = 0;
    if (w->remove && !strcmp(e->name, w->remove))
        w->removed_seen = 1;
    /* The next name in order goes now: listed, not yet visited. */
    if (w->remove && i + 1 < TOTAL && !strcmp(ents[i + 1].name, w->remove)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/entries/%.2s/%s", w->dir, w->remove, w->remove + 2);
        CHECK(unlink(path) == 0);
    }
    w->seen++;
    return w->stop_after && w->seen == w->stop_after ? 1 : 0;
}

static walker walk(progcache_file *f, const char *dir, unsigned int flags, size_t stop_after,
                   const char *remove)
{
    walker w = {dir, 0, stop_after, "", 1, 1, 1, 0, 0, 0, 0, remove, 0};
    w.scanned0 = progcache__file_entries_scanned();
    w.statted0 = progcache__file_walk_names_statted();
    int rc = progcache_file_foreach(f, flags, visit, &w);
    CHECK(rc == (stop_after ? 1 : PROGCACHE_OK));
    return w;
}

int main(void)
{
    char *dir = test_mkdtemp("walk-lazy");
    for (size_t i = 0; i < TOTAL; i++) {
        int shard = i < ENTRIES ? SHARD : i < ENTRIES + SMALL ? 0x01 : 0xff;
        ents[i].size = 10 + i % 97;
        scale_foreign_write(dir, (uint64_t)i, ents[i].size, shard, ents[i].name);
    }
    qsort(ents, TOTAL, sizeof ents[0], by_name);

    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.flags = PROGCACHE_FILE_READONLY;
    progcache_file *f = NULL;
    CHECK_OK(progcache_file_open(&f, dir, &opts));

    /* The first entry, without reading (the charts' walk): one stat. */
    walker w = walk(f, dir, 0, 1, NULL);
    printf("first of %d entries in a shard, not read: %llu entries scanned, %llu names "
           "stat'ed\n",
           ENTRIES, (unsigned long long)w.first_scanned, (unsigned long long)w.first_statted);
    CHECK(!strcmp(w.last, ents[0].name));
    CHECK(w.first_scanned == 1 && w.first_statted == 1);

    /* And read (ls): the opened entry's fstat, no stat of the name. */
    w = walk(f, dir, PROGCACHE_ENTRIES_READ, 1, NULL);
    printf("first of %d entries in a shard, read: %llu entries scanned, %llu names stat'ed\n",
           ENTRIES, (unsigned long long)w.first_scanned, (unsigned long long)w.first_statted);
    CHECK(!strcmp(w.last, ents[0].name) && w.data_ok && w.sizes_ok);
    CHECK(w.first_scanned == 1 && w.first_statted == 0);

    /* The whole walk: every entry once, in name order, each stat'ed once. */
    uint64_t shards0 = progcache__file_shards_scanned();
    w = walk(f, dir, 0, 0, NULL);
    printf("whole walk: %zu of %d entries, %llu scanned, %llu shards\n", w.seen, TOTAL,
           (unsigned long long)(progcache__file_entries_scanned() - w.scanned0),
           (unsigned long long)(progcache__file_shards_scanned() - shards0));
    CHECK(w.seen == TOTAL && w.in_order && w.sizes_ok && !strcmp(w.last, ents[TOTAL - 1].name));
    CHECK(progcache__file_entries_scanned() - w.scanned0 == TOTAL);
    CHECK(progcache__file_shards_scanned() - shards0 == 3);
    w = walk(f, dir, PROGCACHE_ENTRIES_READ, 0, NULL);
    CHECK(w.seen == TOTAL && w.in_order && w.sizes_ok && w.data_ok);
    CHECK(progcache__file_walk_names_statted() - w.statted0 == 0);

    /* An entry removed after the listing, before its visit: skipped (one
     * in the big shard without reading, one in the last shard read). */
    w = walk(f, dir, 0, 0, ents[100].name);
    printf("one removed during the walk, not read: %zu visited\n", w.seen);
    CHECK(w.seen == TOTAL - 1 && w.in_order && w.sizes_ok && !w.removed_seen);
    w = walk(f, dir, PROGCACHE_ENTRIES_READ, 0, ents[TOTAL - 2].name);
    printf("one removed during the walk, read: %zu visited\n", w.seen);
    CHECK(w.seen == TOTAL - 2 && w.in_order && w.data_ok && !w.removed_seen);

    progcache_file_close(f);
    test_rmdtemp(dir);
    puts("test_walk_lazy: ok");
    return 0;
}
