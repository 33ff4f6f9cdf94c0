/* Tiers by name: the registry behind progcache_store_register and
 * progcache_store_find (progcache/sys/store.h), modelled on sqlite's
 * sqlite3_vfs_register/find. A small fixed table under one mutex: it is
 * read once per progcache_open that names a tier, never on a lookup. The
 * built-in Redis tier's names are refused here, so a URL that a user
 * expects to reach Redis (and its secret) cannot be taken over silently;
 * opening a URL is the cache's composition (cache/cache_remote.c). */
#include <pthread.h>
#include <string.h>

#include "error.h"
#include "progcache/sys/store.h"
#include "store/store_calls.h"

#define REGISTRY_MAX 32
#define NAME_MAX_LEN 31

typedef struct registered {
    char name[NAME_MAX_LEN + 1];
    progcache_store_factory factory;
    void *ctx;
} registered;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static registered registry[REGISTRY_MAX];

int progcache__store_builtin_name(const char *name, size_t len)
{
    static const char *const builtin[] = {"redis", "rediss", "unix"};
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (strlen(builtin[i]) == len && memcmp(builtin[i], name, len) == 0)
            return 1;
    return 0;
}

static int name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > NAME_MAX_LEN)
        return 0;
    return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789+.-_") == len;
}

int progcache_store_register(const char *name, progcache_store_factory factory, void *ctx)
{
    if (!name || !name_ok(name))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_register: the name \"%s\" is not 1-%d characters "
                                "of a-z, 0-9, '+', '.', '-', '_'",
                                name ? name : "(null)", NAME_MAX_LEN);
    if (progcache__store_builtin_name(name, strlen(name)))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_register: \"%s\" is the built-in Redis tier's "
                                "name; choose another",
                                name);
    int rc = PROGCACHE_OK;
    pthread_mutex_lock(&registry_lock);
    registered *slot = NULL, *free_slot = NULL;
    for (size_t i = 0; i < REGISTRY_MAX; i++) {
        if (registry[i].factory && strcmp(registry[i].name, name) == 0)
            slot = &registry[i];
        else if (!registry[i].factory && !free_slot)
            free_slot = &registry[i];
    }
    if (!slot && factory)
        slot = free_slot;
    if (slot) {
        memcpy(slot->name, name, strlen(name) + 1);
        slot->factory = factory;
        slot->ctx = factory ? ctx : NULL;
    } else if (factory) {
        rc = progcache__error(PROGCACHE_ENOMEM,
                              "progcache_store_register: %d tiers are registered already; "
                              "unregister one (factory NULL) first",
                              REGISTRY_MAX);
    }
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

progcache_store_factory progcache__store_find_n(const char *name, size_t len, void **ctx)
{
    progcache_store_factory found = NULL;
    if (!name || len == 0 || len > NAME_MAX_LEN)
        return NULL;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < REGISTRY_MAX && !found; i++)
        if (registry[i].factory && strlen(registry[i].name) == len &&
            memcmp(registry[i].name, name, len) == 0) {
            found = registry[i].factory;
            if (ctx)
                *ctx = registry[i].ctx;
        }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

progcache_store_factory progcache_store_find(const char *name, void **ctx)
{
    return name ? progcache__store_find_n(name, strlen(name), ctx) : NULL;
}

void progcache_store_params_init(progcache_store_params *params)
{
    if (params) {
        memset(params, 0, sizeof *params);
        params->version = PROGCACHE_STORE_PARAMS_VERSION;
    }
}
