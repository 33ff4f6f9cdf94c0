/* The PCH tier's state per cache handle: its settings (read once, at the
 * first compile), its directory, NVRTC's identity, the helper, what has
 * been logged, and the PCHs of this process (pch_inproc.c). Kept with the
 * handle (progcache__cache_data, under "pch") and freed when it closes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cache/cache_stats.h"
#include "pch/pch_tier.h"
#include "dir/dir.h"
#include "store/store_calls.h"

static void *make(void *arg)
{
    progcache *cache = arg;
    progcache__pch_tier *tier = progcache__calloc(1, sizeof *tier);
    if (!tier)
        return NULL;
    pthread_mutex_init(&tier->lock, NULL);
    tier->dir_fd = -1;
    tier->helper_fd = -1;
    progcache__cache_log_of(cache, &tier->cache_log, &tier->cache_log_ctx);
    if (progcache__pch_settings_read(&tier->settings) != PROGCACHE_OK)
        tier->settings_error = progcache__strdup(progcache_error_last());
    const char *path = progcache_path(cache);
    if (tier->settings.mode == PROGCACHE__PCH_OFF || !path)
        return tier;
    progcache__pch_dir_open(tier, progcache__cache_home(cache), path);
    if (tier->dir_fd < 0)
        return tier;
    char place[64];
    progcache__store_place_path(place, sizeof place, PROGCACHE__PLACE_PCH);
    tier->dir = progcache__malloc(strlen(path) + strlen(place) + 2);
    if (tier->dir)
        snprintf(tier->dir, strlen(path) + strlen(place) + 2, "%s/%s", path, place);
    progcache__pch_ids(tier);
    progcache__pch_helper_find(tier);
    progcache__pch_helper_open(tier);
    tier->helper_ok = tier->helper != NULL;
    tier->warm_ok = tier->settings.warm_ms > 0;
    tier->cross = tier->helper_ok && tier->settings.mode == PROGCACHE__PCH_ON &&
                  !progcache__pch_nopin_read(tier);
    /* What processes that died left behind, once per handle. */
    progcache__pch_evict(tier, NULL);
    return tier;
}

static void destroy(void *state)
{
    progcache__pch_tier *tier = state;
    progcache__pch_inproc_free(tier->inproc);
    if (tier->dir_fd >= 0)
        close(tier->dir_fd);
    if (tier->helper_fd >= 0)
        close(tier->helper_fd);
    progcache__pch_settings_free(&tier->settings);
    progcache__free(tier->settings_error);
    progcache__free(tier->dir);
    progcache__free(tier->dir_error);
    progcache__free(tier->helper);
    progcache__free(tier->helper_error);
    pthread_mutex_destroy(&tier->lock);
    progcache__free(tier);
}

progcache__pch_tier *progcache__pch_tier_of(progcache *cache)
{
    return progcache__cache_data(cache, "pch", make, cache, destroy);
}
