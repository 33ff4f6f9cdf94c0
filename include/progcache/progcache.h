/*
 * progcache/progcache.h - everything of progcache that needs no CUDA driver:
 * keys, artifacts, stores, the cache directory, the cache, statistics,
 * administration and the remote tier. Writing a store of your own needs
 * progcache/sys/store.h as well. For compile-or-load through NVRTC and the
 * driver, include progcache/cuda.h as well.
 */
#ifndef PROGCACHE_PROGCACHE_H
#define PROGCACHE_PROGCACHE_H

#include "common.h"
#include "key.h"
#include "artifact.h"
#include "store.h"
#include "file.h"
#include "settings.h"
#include "cache.h"
#include "stats.h"
#include "admin.h"
#include "remote.h"

#endif /* PROGCACHE_PROGCACHE_H */
