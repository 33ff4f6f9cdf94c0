/* Helpers of the tests of examples/tier_dir.c (tier_test.h). */
#include "tier_test.h"

#include <stdlib.h>
#include <string.h>

char *base_dir;

const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                   ".visible .entry k()\n{\n\tret;\n}\n";
const char key1[] = "key one", key2[] = "key two", key3[] = "key three";
const char lowered[8] = "k\0_Z1kv";

char *dir(const char *name)
{
    char *p = malloc(strlen(base_dir) + strlen(name) + 2);
    CHECK(p != NULL);
    sprintf(p, "%s/%s", base_dir, name);
    return p;
}

progcache_store *open_tier(const char *path, unsigned int flags)
{
    progcache_store *s = NULL;
    CHECK_OK(tier_dir_new(&s, path, flags));
    return s;
}

progcache_store *open_home(const char *path)
{
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_file_new(&s, path, NULL));
    return s;
}

progcache *open_cache(progcache_store *a, progcache_store *b, progcache_store *c)
{
    progcache_store *tiers[3] = {a, b, c};
    progcache *cache = NULL;
    CHECK_OK(progcache_open_tiers(&cache, tiers, c ? 3 : 2, NULL));
    return cache;
}

void meta_with_records(progcache_entry_meta *m)
{
    m->kind = PROGCACHE_KIND_PTX;
    CHECK_OK(progcache_entry_meta_add(m, PROGCACHE_RECORD_LOWERED_NAMES, lowered,
                                      sizeof lowered));
    CHECK_OK(progcache_entry_meta_add(m, USER_TAG, "mine", 4));
}

void check_records(const progcache_entry_meta *m)
{
    const unsigned char *d = NULL;
    size_t n = 0;
    CHECK_OK(progcache_entry_meta_find(&d, &n, m, PROGCACHE_RECORD_LOWERED_NAMES));
    CHECK(n == sizeof lowered && memcmp(d, lowered, n) == 0);
    CHECK_OK(progcache_entry_meta_find(&d, &n, m, USER_TAG));
    CHECK(n == 4 && memcmp(d, "mine", 4) == 0);
}

void check_holds(progcache_store *store, const char *key, const void *data, size_t size,
                 int with_records)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache_entry_meta m = PROGCACHE_ENTRY_META_INIT;
    CHECK_OK(progcache_store_get_meta(&buf, &m, store, key, strlen(key)));
    CHECK(buf.size == size && memcmp(buf.data, data, size) == 0);
    if (with_records)
        check_records(&m);
    else
        CHECK(m.records.size == 0);
    progcache_entry_meta_release(&m);
    progcache_buf_free(&buf);
}

void check_missing(progcache_store *store, const char *key)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, store, key, strlen(key)));
    progcache_buf_free(&buf);
}
