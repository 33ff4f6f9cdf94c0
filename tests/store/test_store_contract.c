/* The store contract (store_contract.c) over progcache's own tiers, the
 * example tier and the least tier (get, put, free): test_store_contract
 * memory|file|tier_dir|redis|minimal|minimal_foreach, one CTest test each,
 * and "broken": tiers that break it, which it must fail
 * (tests/store/CMakeLists.txt). Redis starts a private server
 * (tests/redis/redis_fixture.c) and is skipped (77) without hiredis or
 * redis-server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "redis_fixture.h"
#include "store_contract.h"
#include "tier_dir.h"
#include "wrap_store.h"

static int memory_factory(progcache_store **out, const char *url,
                          const progcache_store_params *p, void *ctx)
{
    (void)url;
    (void)ctx;
    progcache_memory_options o = PROGCACHE_MEMORY_OPTIONS_INIT;
    o.max_artifact_size = p->max_artifact_size;
    return progcache_store_memory_new(out, &o);
}

/* A cache directory; the settings of the machine's environment are not
 * this test's (NO_SETTINGS). */
static int file_factory(progcache_store **out, const char *url, const progcache_store_params *p,
                        void *ctx)
{
    (void)ctx;
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    o.max_artifact_size = p->max_artifact_size;
    o.flags = PROGCACHE_FILE_NO_SETTINGS;
    return progcache_store_file_new(out, url, &o);
}

static int redis_factory(progcache_store **out, const char *url, const progcache_store_params *p,
                         void *ctx)
{
    (void)ctx;
    progcache_redis_options o = PROGCACHE_REDIS_OPTIONS_INIT;
    o.url = url;
    o.max_artifact_size = p->max_artifact_size;
    return progcache_store_redis_new(out, &o);
}

/* A tier that breaks the contract in one way each (ctx says which): the
 * suite must fail it, or it proves nothing. Wraps a memory store. */
typedef struct broken {
    fixture_wrap w;
    int how; /* 1: a get returns one byte short; 2: a miss sets a message;
              * 3: put ignores max_artifact_size (a memory store of no bound) */
} broken;

static int broken_get(progcache_buf *out, progcache_store *s, const void *k, size_t n)
{
    broken *b = (broken *)s;
    int rc = fixture_wrap_get(out, s, k, n);
    if (rc == PROGCACHE_OK && b->how == 1 && out->size)
        out->size--;
    if (rc == PROGCACHE_ENOTFOUND && b->how == 2)
        progcache_error_set(PROGCACHE_ENOTFOUND, "a miss with a message");
    return rc;
}

static int broken_factory(progcache_store **out, const char *url,
                          const progcache_store_params *p, void *ctx)
{
    broken *b = calloc(1, sizeof *b);
    CHECK(b != NULL);
    b->how = *(int *)ctx;
    progcache_store_params unbounded = *p;
    unbounded.max_artifact_size = b->how == 3 ? 0 : p->max_artifact_size;
    progcache_store *inner = NULL;
    CHECK_OK(memory_factory(&inner, url, &unbounded, NULL));
    fixture_wrap_init(&b->w, "broken", inner);
    b->w.base.get = broken_get;
    *out = &b->w.base;
    return PROGCACHE_OK;
}

/* The least a tier can be (progcache/sys/store.h): get, put and free over
 * a memory store, every other op NULL; with ctx non-NULL, foreach too,
 * which count and total_size then default to. Each store comes empty, as
 * a tier that cannot clear must. */
static int inner_foreach(progcache_store *s, unsigned int flags, progcache_entry_fn fn,
                         void *ctx)
{
    return progcache_store_foreach(((fixture_wrap *)s)->inner, flags, fn, ctx);
}

static int minimal_factory(progcache_store **out, const char *url,
                           const progcache_store_params *p, void *ctx)
{
    fixture_wrap *w = calloc(1, sizeof *w);
    CHECK(w != NULL);
    progcache_store *inner = NULL;
    CHECK_OK(memory_factory(&inner, url, p, NULL));
    fixture_wrap_init(w, "minimal", inner);
    progcache_store least = PROGCACHE_STORE_INIT;
    least.name = w->base.name;
    least.get = w->base.get;
    least.put = w->base.put;
    least.free = w->base.free;
    if (ctx)
        least.foreach = inner_foreach;
    w->base = least;
    *out = &w->base;
    return PROGCACHE_OK;
}

/* Each in a child that leaves by _exit: a failed run ends in the middle
 * of a test, holding what that test allocated, which is not a leak of
 * the library's. */
static int broken_tiers_fail(void)
{
    for (int how = 1; how <= 3; how++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            _exit(store_contract_run("a broken tier, as it should", broken_factory, NULL, &how));
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 1) {
            fprintf(stderr, "the contract passed a tier broken in way %d\n", how);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    char *base = test_mkdtemp("store-contract");
    char url[4200];
    int rc = 2;
    if (strcmp(which, "memory") == 0) {
        rc = store_contract_run("memory", memory_factory, NULL, NULL);
    } else if (strcmp(which, "file") == 0) {
        snprintf(url, sizeof url, "%s/cache", base);
        rc = store_contract_run("file", file_factory, url, NULL);
    } else if (strcmp(which, "tier_dir") == 0) {
        /* The example tier as a cache would open it: by its registered
         * name, through its factory. */
        CHECK_OK(tier_dir_register());
        void *ctx = NULL;
        progcache_store_factory f = progcache_store_find(TIER_DIR_NAME, &ctx);
        CHECK(f != NULL);
        snprintf(url, sizeof url, TIER_DIR_NAME ":%s/tier", base);
        rc = store_contract_run("tier_dir", f, url, ctx);
    } else if (strcmp(which, "minimal") == 0) {
        rc = store_contract_run("minimal", minimal_factory, NULL, NULL);
    } else if (strcmp(which, "minimal_foreach") == 0) {
        static int with_foreach = 1;
        rc = store_contract_run("minimal with foreach", minimal_factory, NULL, &with_foreach);
    } else if (strcmp(which, "broken") == 0) {
        rc = broken_tiers_fail();
    } else if (strcmp(which, "redis") == 0) {
        test_redis_require(); /* exits 77, saying why, when it cannot run */
        test_redis r;
        test_redis_start(&r, NULL);
        rc = store_contract_run("redis", redis_factory, r.url, NULL);
        test_redis_stop(&r);
    } else {
        fprintf(stderr, "usage: %s memory|file|tier_dir|redis|minimal|minimal_foreach|broken\n",
                argv[0]);
    }
    test_rmdtemp(base);
    return rc;
}
