/* Internal: the PCH tier's settings (docs/CUDA.md, docs/CONFIG.md), read
 * from the environment through util/config.h and the settings table's
 * parser; and the environment a helper process gets. */
#ifndef PROGCACHE_PCH_SETTINGS_H
#define PROGCACHE_PCH_SETTINGS_H

#include <stdint.h>

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
    /* PROGCACHE_PCH_WARM: how long a warm helper waits for the next
     * compile before it exits (pch_warm.c); 0: a fresh helper for each. */
    unsigned int warm_ms;
} progcache__pch_settings;

/* The defaults: 2 GiB of PCHs, 500 ms. */
#define PROGCACHE__PCH_MAX_SIZE_DEFAULT ((uint64_t)2 << 30)
#define PROGCACHE__PCH_MIN_MS_DEFAULT 500u
#define PROGCACHE__PCH_WARM_MS_DEFAULT 60000u

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

#endif
