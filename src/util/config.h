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
/* The shortest secret: PROGCACHE_REDIS_MIN_SECRET (checked where both are
 * seen, cache/cache_remote.c). */
#define PROGCACHE__MIN_SECRET 16

/* The PCH tier's settings (src/pch/pch_*.c; docs/CUDA.md). */
typedef enum progcache__pch_mode {
    PROGCACHE__PCH_ON = 0,        /* the default: PCHs shared through the helper */
    PROGCACHE__PCH_OFF = 1,       /* PROGCACHE_PCH=0, or NVRTC_DISABLE_PCH set */
    PROGCACHE__PCH_INPROCESS = 2  /* PROGCACHE_PCH=inprocess: PCHs of this process only */
} progcache__pch_mode;

typedef struct progcache__pch_settings {
    progcache__pch_mode mode;
    /* Why the tier is off when the environment turned it off ("PROGCACHE_PCH=0",
     * "NVRTC_DISABLE_PCH is set"), for the log; NULL otherwise. */
    const char *off_because;
    uint64_t max_size;   /* PROGCACHE_PCH_MAX_SIZE: the PCHs' size budget */
    unsigned int min_ms; /* PROGCACHE_PCH_MIN_MS: a plain compile this slow makes a candidate */
    char *helper;        /* PROGCACHE_PCH_HELPER, or NULL: the helper to run */
    /* NVRTC_APPEND_FLAGS: NVRTC adds these to every compile's options, so
     * they are part of what a PCH was made with. NULL when unset. */
    char *nvrtc_append_flags;
    /* PROGCACHE_PCH_CREATE=inline (i23fleet): a PCH is made inside the
     * compile of the prefix's second slow sight, which waits for it (as
     * before; deterministic, for tests). The default, detached: made after
     * the first slow sight's compile has returned, by a helper nobody
     * waits for (src/pch/pch_detach.c). */
    int create_inline;
} progcache__pch_settings;

/* The defaults: 2 GiB of PCHs, 500 ms. */
#define PROGCACHE__PCH_MAX_SIZE_DEFAULT ((uint64_t)2 << 30)
#define PROGCACHE__PCH_MIN_MS_DEFAULT 500u

/* Read the PCH settings. A value that cannot be used (PROGCACHE_PCH=maybe,
 * a size that is not a number) gives PROGCACHE_EINVAL with a message
 * naming the variable; out is then filled with the tier turned off.
 * PROGCACHE_ENOMEM likewise. Free with progcache__pch_settings_free. */
int progcache__pch_settings_read(progcache__pch_settings *out);
void progcache__pch_settings_free(progcache__pch_settings *settings);

/* The environment of a helper process: TMPDIR=tmpdir, then NVRTC's own
 * variables (NVRTC_*) and LD_LIBRARY_PATH from this process's, so the
 * helper loads and configures NVRTC as the caller would; nothing else.
 * A NULL-terminated array in one allocation (progcache__free), or NULL
 * when out of memory (message set). */
char **progcache__pch_helper_env(const char *tmpdir);

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

#endif
