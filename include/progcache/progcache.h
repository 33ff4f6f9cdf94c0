/*
 * progcache/progcache.h - everything of progcache that needs no CUDA driver:
 * keys, stores and the cache. For compile-or-load through NVRTC and the
 * driver, include progcache/cuda.h as well.
 */
#ifndef PROGCACHE_PROGCACHE_H
#define PROGCACHE_PROGCACHE_H

#include "common.h"
#include "key.h"
#include "sys/store.h"
#include "cache.h"
#include "stats.h"
#include "admin.h"
#include "remote.h"

#endif /* PROGCACHE_PROGCACHE_H */
