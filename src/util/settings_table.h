/* Internal: the settings of a cache directory (progcache/settings.h,
 * docs/CONFIG.md): the table of known settings, the values they accept,
 * the text of the settings file, and the overlays that resolve them
 * (file < environment < the program's options). Reading the file is the
 * file store's (store/file/file_settings.c); reading the environment is
 * config.c's, the only file that calls getenv. */
#ifndef PROGCACHE_UTIL_SETTINGS_H
#define PROGCACHE_UTIL_SETTINGS_H

#include <stddef.h>

#include "buf.h"
#include "progcache/settings.h"

/* The settings, in the order progcache_settings_at() gives them. */
enum {
    PROGCACHE__SET_MAX_SIZE = 0,
    PROGCACHE__SET_LOW_WATER_PERCENT,
    PROGCACHE__SET_MEMORY_SIZE,
    PROGCACHE__SET_MAX_ARTIFACT_SIZE,
    PROGCACHE__SET_NO_FSYNC,
    PROGCACHE__SET_REMOTE,
    PROGCACHE__SET_REMOTE_SECRET_FILE,
    PROGCACHE__SET_REMOTE_MIN_RATE,
    PROGCACHE__SET_REMOTE_CA, /* i34-remote */
    PROGCACHE__SET_NVRTC_LIBRARY,
    PROGCACHE__SET_NVRTC_VERSION,
    PROGCACHE__SET_SHARED_GROUP,
    /* i22: read where they are used (progcache__settings_apart) */
    PROGCACHE__SET_WAIT_TIMEOUT,
    PROGCACHE__SET_PCH,
    PROGCACHE__SET_PCH_MAX_SIZE,
    PROGCACHE__SET_PCH_MIN_MS,
    PROGCACHE__SET_PCH_HELPER,
    PROGCACHE__SET_PCH_CREATE,
    PROGCACHE__SET_PCH_WARM,
    /* i35: ccache's switches, read by progcache_open (cache/cache_open.c) */
    PROGCACHE__SET_DISABLE,
    PROGCACHE__SET_READONLY,
    PROGCACHE__SET_RECACHE,
    PROGCACHE__SET_EXPLAIN, /* i35-explain */
    PROGCACHE__SET_COUNT
};

/* The largest settings file read (it holds a few short lines). */
#define PROGCACHE__SETTINGS_FILE_MAX 65536
/* The settings file, relative to the cache directory. */
#define PROGCACHE__SETTINGS_REL "progcache/config"

struct progcache_settings {
    progcache_setting item[PROGCACHE__SET_COUNT];
    char *owned[2 * PROGCACHE__SET_COUNT]; /* value and origin texts we allocated */
    char *path;                            /* <dir>/progcache/config, or NULL */
    /* A variable whose value cannot be used: ignored, the setting kept as
     * it was, and said by the reader (a warning naming the variable and
     * the value), as every malformed variable is (issue 35). */
    unsigned char ignored[PROGCACHE__SET_COUNT];
};

/* Fill s with the defaults; path is dir's settings file (dir may be NULL).
 * PROGCACHE_OK or PROGCACHE_ENOMEM. Release with progcache__settings_release. */
int progcache__settings_init(progcache_settings *s, const char *dir);
void progcache__settings_release(progcache_settings *s);

/* The index of the setting called name, or -1. */
int progcache__settings_index(const char *name);

/* Apply the settings file's text (len bytes, need not be NUL-terminated):
 * every "name = value" line sets that setting, source FILE, origin
 * "<path>:<line>". An unknown name, an environment-only setting, a name
 * given twice, a line that is not "name = value" or a value that cannot be
 * used fails with PROGCACHE_EINVAL naming the path and line. */
int progcache__settings_apply_file(progcache_settings *s, const char *text, size_t len);

/* Set setting idx from text, source and origin (the variable's name, or
 * "<path>:<line>"); the value is checked first: PROGCACHE_EINVAL with a
 * message naming origin, the value and what is accepted. */
int progcache__settings_assign(progcache_settings *s, int idx, const char *text,
                               progcache_setting_source source, const char *origin);

/* Overlay a program's option for a numeric setting: 0 leaves the setting
 * as it is (not set); PROGCACHE_SIZE_NONE sets "none" (sizes that allow
 * it); anything else sets the number. what names the option in messages
 * ("progcache_options.max_size"). PROGCACHE_OK, PROGCACHE_EINVAL (a value
 * the setting does not take), PROGCACHE_ENOMEM. */
int progcache__settings_api(progcache_settings *s, int idx, uint64_t number, const char *what);

/* The one parser of every setting's value (sizes, durations, booleans,
 * percentages): the number text stands for as setting idx, or
 * PROGCACHE_EINVAL (no message) with *why saying what is accepted. */
int progcache__settings_parse(uint64_t *number, const char **why, int idx, const char *text);
/* Whether setting idx is read where it is used rather than by a cache
 * directory's resolution (the environment overlay then skips a value it
 * cannot use: its reader reports it), and its variable. */
int progcache__settings_apart(int idx);
const char *progcache__settings_variable(int idx);
/* The pieces of that parser, for values that are not a setting's:
 * true/yes/on/1 and false/no/off/0 (any case) into *out; a duration of
 * digits and an optional ms, s or m (a bare number is bare_unit_ms each),
 * at most 24 hours, into milliseconds. 0 or -1. */
int progcache__parse_bool(int *out, const char *text);
int progcache__parse_duration_ms(uint64_t *out, const char *text, uint64_t bare_unit_ms);

/* Overlay the environment (config.c): each setting's variable, when set
 * and not empty, replaces the value, source ENV; one whose value cannot be
 * used is skipped and marked in s->ignored (its reader warns). */
int progcache__settings_apply_env(progcache_settings *s);

/* The settings file's text with name's line set to "name = value" (the
 * first such line replaced, later ones dropped, else appended), or, with
 * value NULL, without name's lines. Every other line is kept as it is.
 * old may be NULL (no file yet). */
int progcache__settings_edit(progcache_buf *out, const char *old, size_t old_len,
                             const char *name, const char *value);

#endif
