/*
 * tier_dir_demo.c - stacking a tier of your own under a cache.
 *
 *   tier_dir_demo HOME SHARED_DIR
 *
 * opens a cache over memory -> HOME (the home directory) -> SHARED_DIR (a
 * tier_dir, as a remote tier), looks one key up, stores it on a miss, and
 * says which. Run it twice with two different HOME directories and one
 * SHARED_DIR: the first run misses and stores the entry in both
 * directories; the second finds it in the shared tier ("hit") and copies it
 * into its own, empty, HOME.
 */
#include <stdio.h>
#include <string.h>

#include <progcache/sys/store.h>

#include "tier_dir.h"

int tier_dir_open_cache(progcache **out, const char *home, const char *shared_dir)
{
    progcache_store *tiers[3] = {NULL, NULL, NULL};
    progcache_buf dir = PROGCACHE_BUF_INIT;
    int rc = home ? PROGCACHE_OK : progcache_default_dir(&dir);
    if (!home && rc == PROGCACHE_OK)
        home = (const char *)dir.data;
    /* Top first: the order of the array is the order of the tiers. Which
     * one is the home comes from the flags: the file store is PERSISTENT
     * and not SHARED, so it is the home; the tier_dir below it is SHARED,
     * so a remote tier: written after the home, and never failing a call
     * (progcache_open_tiers has no hook for $PROGCACHE_REMOTE: a Redis tier
     * would be one more entry here). */
    if (rc == PROGCACHE_OK)
        rc = progcache_store_memory_new(&tiers[0], NULL);
    if (rc == PROGCACHE_OK)
        rc = progcache_store_file_new(&tiers[1], home, NULL);
    if (rc == PROGCACHE_OK)
        rc = tier_dir_new(&tiers[2], shared_dir,
                          PROGCACHE_STORE_PERSISTENT | PROGCACHE_STORE_SHARED);
    if (rc == PROGCACHE_OK)
        rc = progcache_open_tiers(out, tiers, 3, NULL);
    if (rc) /* the cache owns the stores only once it is open */
        for (int i = 0; i < 3; i++)
            progcache_store_free(tiers[i]);
    progcache_buf_free(&dir);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s HOME SHARED_DIR\n", argv[0]);
        return 2;
    }
    progcache *cache = NULL;
    if (tier_dir_open_cache(&cache, argv[1], argv[2]) != PROGCACHE_OK) {
        fprintf(stderr, "tier_dir_demo: %s\n", progcache_error_last());
        return 1;
    }
    static const char key[] = "tier_dir_demo: one key";
    static const char value[] = "the bytes of an artifact";
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int rc = progcache_get(&buf, cache, key, sizeof key - 1);
    if (rc == PROGCACHE_OK) {
        printf("hit: %s\n", (const char *)buf.data);
    } else if (rc == PROGCACHE_ENOTFOUND) {
        rc = progcache_put(cache, key, sizeof key - 1, value, strlen(value));
        if (rc == PROGCACHE_OK)
            printf("miss: stored in %s and %s\n", argv[1], argv[2]);
    }
    if (rc != PROGCACHE_OK)
        fprintf(stderr, "tier_dir_demo: %s\n", progcache_error_last());
    progcache_buf_free(&buf);
    progcache_close(cache);
    return rc == PROGCACHE_OK ? 0 : 1;
}
