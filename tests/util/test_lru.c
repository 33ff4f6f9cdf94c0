/* util/lru.c, the one least-recently-used routine of the file store's
 * eviction and prune and of the PCH directory's budget: oldest first
 * (nanoseconds count), the size bound, the age bound, a candidate that
 * stays (kept or changed since it was seen), a stop, and the plan. */
#include <string.h>

#include "check.h"
#include "lru.h"

typedef struct item {
    progcache__lru_item lru;
    int id;
} item;

typedef struct visit {
    int order[8], n;
    int keep;    /* an id that stays */
    int stop_at; /* stop after this id (0: never) */
} visit;

static int on_item(void *ctx, void *p, size_t i)
{
    visit *v = ctx;
    item *it = p;
    (void)i;
    v->order[v->n++] = it->id;
    int r = it->id == v->keep ? 0 : PROGCACHE__LRU_GONE;
    return it->id == v->stop_at ? r | PROGCACHE__LRU_STOP : r;
}

static void fill(item *a)
{
    /* ids by age: 1 oldest ... 5 newest; 2 and 3 share a second. */
    static const struct {
        time_t s;
        long ns;
        int id;
    } t[5] = {{500, 0, 5}, {100, 0, 1}, {200, 7, 3}, {300, 0, 4}, {200, 5, 2}};
    for (int i = 0; i < 5; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].lru.atime.tv_sec = t[i].s;
        a[i].lru.atime.tv_nsec = t[i].ns;
        a[i].lru.size = 10;
        a[i].id = t[i].id;
    }
}

int main(void)
{
    item a[5];
    visit v;
    uint64_t total;

    /* Down to 25 of 50 bytes: the three oldest go, oldest first. */
    fill(a);
    progcache__lru_sort(a, 5, sizeof a[0]);
    for (int i = 0; i < 5; i++)
        CHECK(a[i].id == i + 1);
    CHECK(progcache__lru_planned(a, 5, sizeof a[0], 50, 25, 0) == 3);
    memset(&v, 0, sizeof v);
    total = 50;
    CHECK(progcache__lru_evict(a, 5, sizeof a[0], &total, 25, 0, on_item, &v) == 3);
    CHECK(total == 20 && v.n == 3 && v.order[0] == 1 && v.order[2] == 3);

    /* One that stays is passed over: the next one goes instead. */
    memset(&v, 0, sizeof v);
    v.keep = 2;
    total = 50;
    CHECK(progcache__lru_evict(a, 5, sizeof a[0], &total, 25, 0, on_item, &v) == 3);
    CHECK(total == 20 && v.n == 4 && v.order[1] == 2 && v.order[3] == 4);

    /* The age bound alone (nothing over the size bound): used before 250. */
    memset(&v, 0, sizeof v);
    total = 50;
    CHECK(progcache__lru_planned(a, 5, sizeof a[0], 50, 1000, 250) == 3);
    CHECK(progcache__lru_evict(a, 5, sizeof a[0], &total, 1000, 250, on_item, &v) == 3);
    CHECK(total == 20);

    /* A stop ends the walk after that one, which still counts. */
    memset(&v, 0, sizeof v);
    v.stop_at = 2;
    total = 50;
    CHECK(progcache__lru_evict(a, 5, sizeof a[0], &total, 0, 0, on_item, &v) == 2);
    CHECK(total == 30 && v.n == 2);

    /* Under both bounds: nothing is visited. */
    memset(&v, 0, sizeof v);
    total = 50;
    CHECK(progcache__lru_evict(a, 5, sizeof a[0], &total, 50, 0, on_item, &v) == 0 && v.n == 0);
    CHECK(progcache__lru_evict(a, 0, sizeof a[0], &total, 0, 0, on_item, &v) == 0);
    return 0;
}
