/* examples/tier_dir.c selected by name: registered with
 * progcache_store_register and opened by progcache_open through
 * opts.remote_url and $PROGCACHE_REMOTE; the cache's max_artifact_size
 * reaching it; exists and foreach; the registry's rules (a built-in or bad
 * name refused, a name replaced and unregistered); and what a factory that
 * misbehaves gets. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_stats.h"
#include "tier_test.h"

static char url[4200];

static progcache *open_named(const char *home, const char *remote_url, uint64_t max_artifact)
{
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.remote_url = remote_url;
    o.max_artifact_size = max_artifact;
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, home, &o));
    return cache;
}

/* foreach over the tier: the names, sizes and bytes of what it holds. */
typedef struct listing {
    int n;
    uint64_t bytes;
    int with_records;
} listing;

static int count_entry(void *ctx, const progcache_entry *e)
{
    listing *l = ctx;
    CHECK(e->error == NULL);
    CHECK(strlen(e->name) == 64);
    CHECK(e->data != NULL && e->size == strlen(ptx) && memcmp(e->data, ptx, e->size) == 0);
    CHECK(e->artifact != NULL && e->artifact->kind == PROGCACHE_KIND_PTX);
    if (e->meta) {
        check_records(e->meta);
        l->with_records++;
    }
    l->n++;
    l->bytes += e->size;
    return 0;
}

static void test_selected_by_name(void)
{
    char *home1 = dir("home1"), *home2 = dir("home2"), *shared = dir("shared");
    snprintf(url, sizeof url, TIER_DIR_NAME ":%s", shared);
    CHECK(progcache_store_find(TIER_DIR_NAME, NULL) != NULL);

    /* Through the options: the put lands in the named tier too. */
    progcache *a = open_named(home1, url, 0);
    progcache_entry_meta m = PROGCACHE_ENTRY_META_INIT;
    meta_with_records(&m);
    CHECK_OK(progcache__cache_put_meta(a, key1, strlen(key1), ptx, strlen(ptx), &m));
    progcache_entry_meta_release(&m);
    CHECK_OK(progcache_flush(a));
    progcache_close(a);

    /* Through the environment: another home directory hits the tier. */
    CHECK(setenv("PROGCACHE_REMOTE", url, 1) == 0);
    progcache *b = NULL;
    CHECK_OK(progcache_open(&b, home2, NULL));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, b, key1, strlen(key1)));
    CHECK(buf.size == strlen(ptx) && memcmp(buf.data, ptx, buf.size) == 0);
    progcache_close(b);
    /* A secret file is for Redis: set for a registered tier, it is refused,
     * not ignored. */
    char *secret = dir("secret");
    FILE *f = fopen(secret, "w");
    CHECK(f != NULL);
    fputs("0123456789abcdef0123456789abcdef", f);
    fclose(f);
    chmod(secret, 0600);
    CHECK(setenv("PROGCACHE_REMOTE_SECRET_FILE", secret, 1) == 0);
    b = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&b, home2, NULL));
    CHECK(b == NULL && strstr(progcache_error_last(), "takes no secret") != NULL);
    unsetenv("PROGCACHE_REMOTE_SECRET_FILE");
    unsetenv("PROGCACHE_REMOTE");

    /* The tier on its own, opened by URL: exists and foreach. */
    progcache_store *t = NULL;
    CHECK_OK(progcache_store_open_url(&t, url, NULL));
    CHECK_OK(progcache_store_exists(t, key1, strlen(key1)));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_exists(t, key2, strlen(key2)));
    listing l = {0, 0, 0};
    CHECK_OK(progcache_store_foreach(t, PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS,
                                     count_entry, &l));
    CHECK(l.n == 1 && l.bytes == strlen(ptx) && l.with_records == 1);
    /* Exported as an archive, imported into a cache directory: the same
     * entry, with its records (a tier's entries can move to a machine). */
    char *tar = dir("tier.tar"), *home4 = dir("home4");
    int fd = open(tar, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    progcache_archive_result ar = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_store_export_fd(&ar, t, fd, "tier.tar", NULL));
    close(fd);
    CHECK(ar.entries == 1 && ar.bytes == strlen(ptx) && ar.invalid == 0);
    progcache_file *imported = NULL;
    CHECK_OK(progcache_file_open(&imported, home4, NULL));
    progcache_archive_result ir = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_file_import(&ir, imported, tar, NULL));
    CHECK(ir.entries == 1);
    check_holds(progcache_file_store(imported), key1, ptx, strlen(ptx), 1);
    progcache_file_close(imported);
    free(tar);
    free(home4);
    progcache_store_free(t);

    /* The cache's max_artifact_size reaches the tier: a tier opened for a
     * bound of 64 bytes refuses a larger put, and does not read one. */
    progcache_store_params p = PROGCACHE_STORE_PARAMS_INIT;
    p.max_artifact_size = 64;
    CHECK_OK(progcache_store_open_url(&t, url, &p));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_put(t, key2, strlen(key2), ptx, strlen(ptx)));
    CHECK(strstr(progcache_error_last(), "too large") != NULL);
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_store_get(&buf, t, key1, strlen(key1)));
    progcache_store_free(t);
    progcache_buf_free(&buf);
    free(secret);
    free(home1);
    free(home2);
    free(shared);
}

/* ---- the registry's rules ---------------------------------------------- */

static int calls;

static int bad_factory(progcache_store **out, const char *u, const progcache_store_params *p,
                       void *ctx)
{
    (void)u;
    (void)p;
    calls++;
    static progcache_store zero; /* version 0: never initialised */
    *out = ctx ? &zero : NULL;
    return PROGCACHE_OK;
}

static void test_registry_rules(void)
{
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_register("redis", bad_factory, NULL));
    CHECK(strstr(progcache_error_last(), "built-in") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_register("Has Space", bad_factory, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_register("", bad_factory, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_register(NULL, bad_factory, NULL));

    /* A factory handing back no store, or a vtable of version 0. */
    CHECK_OK(progcache_store_register("bad", bad_factory, NULL));
    progcache_store *s = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_open_url(&s, "bad:x", NULL));
    CHECK(s == NULL && calls == 1);
    int marker;
    CHECK_OK(progcache_store_register("bad", bad_factory, &marker)); /* replaced */
    void *ctx = NULL;
    CHECK(progcache_store_find("bad", &ctx) == bad_factory && ctx == &marker);
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_open_url(&s, "bad:x", NULL));
    CHECK(s == NULL && calls == 2 && strstr(progcache_error_last(), "version is 0") != NULL);
    CHECK_OK(progcache_store_register("bad", NULL, NULL)); /* unregistered */
    CHECK(progcache_store_find("bad", NULL) == NULL);

    /* A scheme nobody registered goes to the built-in Redis tier, which
     * refuses what it cannot use (or, without hiredis, says it is not
     * built in); a Redis URL opens without contacting anything. */
    CHECK(progcache_store_open_url(&s, "nosuch:x", NULL) < 0 && s == NULL);
    CHECK(*progcache_error_last());
    int rc = progcache_store_open_url(&s, "redis://127.0.0.1:1", NULL);
    CHECK(rc == PROGCACHE_OK || rc == PROGCACHE_EREMOTE);
    if (rc == PROGCACHE_OK)
        CHECK(s != NULL && (s->flags & PROGCACHE_STORE_SHARED));
    progcache_store_free(s);
    s = NULL;

    /* remote and remote_url together: one remote tier only. */
    char *home = dir("home3");
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = "redis://127.0.0.1:1";
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.remote = &ro;
    o.remote_url = url;
    progcache *c = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&c, home, &o));
    CHECK(strstr(progcache_error_last(), "remote_url") != NULL);
    free(home);
}

int main(void)
{
    base_dir = test_mkdtemp("tier-named");
    unsetenv("PROGCACHE_REMOTE");
    CHECK_OK(tier_dir_register());
    test_selected_by_name();
    test_registry_rules();
    test_rmdtemp(base_dir);
    return 0;
}
