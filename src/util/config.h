/* Internal: settings read from the environment besides the public ones
 * (progcache_default_dir, progcache_default_remote); config.c is the only
 * file that reads it, docs/CONFIG.md lists every variable. */
#ifndef PROGCACHE_UTIL_CONFIG_H
#define PROGCACHE_UTIL_CONFIG_H

#include <stdint.h>
#include <sys/types.h>

#include "buf.h"

/* The bodies of progcache_default_dir (progcache/cache.h),
 * progcache_default_remote and progcache_remote_secret_read
 * (progcache/remote.h), which cache/cache_remote.c defines with them, as
 * documented there. */
int progcache__config_default_dir(progcache_buf *out);
int progcache__config_default_remote(progcache_buf *url, progcache_buf *secret);
int progcache__config_secret_read(progcache_buf *secret, const char *path);
/* Secret files this thread could not use so far (any cause but memory):
 * counted with the remote tiers' other files (remote/remote_file.h). */
unsigned long progcache__config_secrets_refused(void);
/* The shortest secret: PROGCACHE_REDIS_MIN_SECRET (checked where both are
 * seen, cache/cache_remote.c). */
#define PROGCACHE__MIN_SECRET 16

/* For the rooms above, which read settings that belong to them (the PCH
 * tier's, src/pch/pch_settings.c) without calling getenv themselves:
 * setting idx's variable parsed by the settings table (PROGCACHE_OK;
 * PROGCACHE_ENOTFOUND when unset or empty; PROGCACHE_EINVAL with *why and
 * *value, no message); a variable no setting describes (NVRTC's own), NULL
 * when unset or empty; whether a variable is set at all; the environment
 * itself (what a helper process is given is chosen from it). */
int progcache__config_setting(uint64_t *out, const char **value, const char **why, int idx);
const char *progcache__config_env(const char *name);
int progcache__config_is_set(const char *name);
char **progcache__config_environ(void);

/* $PROGCACHE_WAIT_TIMEOUT in milliseconds: the bound on waiting for
 * another compile (docs/CONFIG.md). PROGCACHE_OK; PROGCACHE_ENOTFOUND when
 * unset or empty (no message); PROGCACHE_EINVAL when it is not a duration
 * from 1 ms to 24 hours (the message names the variable and its value). */
int progcache__config_wait_timeout(unsigned int *out_ms);

/* $PROGCACHE_NVRTC_LIBRARY: the NVRTC library to load instead of the
 * default chain (src/key/nvrtc_lib.c), or NULL when unset or empty. */
const char *progcache__config_nvrtc_library(void);

/* $PROGCACHE_NVRTC_VERSION ("13.0"): the NVRTC version keys carry when
 * NVRTC is not loaded. PROGCACHE_OK; PROGCACHE_ENOTFOUND when unset or
 * empty (no message); PROGCACHE_EINVAL when it is not <major>.<minor>. */
int progcache__config_nvrtc_version(int *major, int *minor);
/* PROGCACHE_SHARED_GROUP: the group of a team's cache directory, a name or
 * a number. PROGCACHE_OK with *gid (and the text in name), ENOTFOUND when
 * unset or empty, EINVAL (message names the variable) for a group that
 * does not exist. */
int progcache__config_shared_group(gid_t *gid, char *name, size_t name_len);

/* PROGCACHE_LOG ("warn", "debug:/tmp/pc.log"): the level of the library's
 * own log writer (util/log.c; -1 for off) and the file it appends to (NULL:
 * stderr). PROGCACHE_OK; PROGCACHE_ENOTFOUND when unset or empty;
 * PROGCACHE_EINVAL (no message) with *bad the value. */
int progcache__config_log(int *level, const char **file, const char **bad);

#endif
