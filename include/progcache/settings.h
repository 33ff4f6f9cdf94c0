/*
 * progcache/settings.h - the settings of a cache directory: the size cap and
 * the other values every program using the directory should agree on, kept
 * in the directory itself, overridden by the environment, and by the
 * program's own options above both.
 *
 * Precedence, lowest first (docs/CONFIG.md, "Settings"):
 *   1. the built-in default;
 *   2. the directory's settings file, <dir>/progcache/config;
 *   3. the environment variable (PROGCACHE_MAX_SIZE=10G, ...);
 *   4. an option the program passes (progcache_options, progcache_file_options),
 *      where it is set: 0 means "not set" for every numeric option, and
 *      PROGCACHE_SIZE_NONE says "none" explicitly (no cap, no memory tier).
 * A value that cannot be used, from the file or the environment, is an
 * error naming the setting and where it came from (the file's path and
 * line, or the variable): progcache_open() and progcache_store_file_new()
 * fail rather than run with less than was asked for.
 *
 * The settings file is text: one "name = value" per line, blank lines and
 * lines starting with '#' ignored, nothing else. It is read with a bound
 * (64 KiB) and never waited on (a FIFO there is an error, not a hang),
 * written whole (temp file, then rename) by progcache_settings_set(), and
 * ignored by cuda.core, which never looks into progcache/.
 *
 * Sizes are bytes, or a number (with an optional fraction: 1.5G) and a
 * suffix K, M, G, T, P, each a power of 1024, optionally followed by "i"
 * and/or "B": 10G = 10Gi = 10GiB = 10737418240 bytes. (ccache reads K as
 * 1000; progcache prints sizes in KiB, MiB, GiB, and reads them back the
 * same way.)
 */
#ifndef PROGCACHE_SETTINGS_H
#define PROGCACHE_SETTINGS_H

#include "common.h"
#include "file.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An explicit "none" for a size option: no size cap (max_size), no memory
 * tier (memory_size). 0 means "not set: take the setting". */
#define PROGCACHE_SIZE_NONE UINT64_MAX

/* The size cap of a cache directory when nothing sets one: 5 GiB (ccache's
 * default too). Compiled programs are kilobytes to a few megabytes, so
 * this holds thousands of them. */
#define PROGCACHE_MAX_SIZE_DEFAULT ((uint64_t)5 << 30)

/* Where a setting's value came from. */
typedef enum progcache_setting_source {
    PROGCACHE_SETTING_DEFAULT = 0, /* built in */
    PROGCACHE_SETTING_FILE = 1,    /* the directory's settings file */
    PROGCACHE_SETTING_ENV = 2,     /* an environment variable */
    PROGCACHE_SETTING_API = 3      /* an option the program passed */
} progcache_setting_source;

/* One setting and its value in force. Borrowed from the settings it came
 * from (new fields may be appended). */
typedef struct progcache_setting {
    const char *name;     /* "max_size": the name in the settings file */
    const char *variable; /* "PROGCACHE_MAX_SIZE": the environment variable */
    const char *summary;  /* what it does, one line */
    /* The value as text: as written in the file or the variable (trimmed),
     * or the default's text ("5Gi", "none", "90", "false"); "" for a
     * string setting that is not set. */
    const char *value;
    /* The value as a number: bytes for a size (0: none), the percentage,
     * 1 or 0 for a yes/no setting; 0 for a string setting. */
    uint64_t number;
    progcache_setting_source source;
    /* Where: "<dir>/progcache/config:3", "PROGCACHE_MAX_SIZE", "default",
     * or "the program's options". */
    const char *origin;
    /* 1 when the settings file may hold it; 0 for the environment-only
     * ones (remote, remote_secret_file: a URL may carry a password, and a
     * directory other users can write must not choose where a program
     * fetches code from). */
    int in_file;
    /* The built-in default as text ("5GiB", "90", "none", "" for a string
     * setting without one), whatever is in force: what `progcache config
     * --help` lists. */
    const char *default_value;
} progcache_setting;

/* The settings of one cache directory, resolved. */
typedef struct progcache_settings progcache_settings;

/*
 * progcache_settings_load() : the settings in force for programs that open
 * dir without options of their own: defaults, then dir's settings file,
 * then the environment. CONSTRUCTOR. Reads only; a missing directory or
 * file is not an error (the defaults and the environment apply).
 * @param out [out] release with progcache_settings_free().
 * @param dir the cache directory; NULL: progcache_default_dir(); "": no
 *            directory (the defaults and the environment alone).
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (a value that cannot be used, an
 *         unknown name in the file, a directory that is not a cache: the
 *         message names the setting and its file and line, or its
 *         variable); PROGCACHE_EIO (the file cannot be read, or is not a
 *         regular file); PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_settings_load(progcache_settings **out, const char *dir);

/* progcache_settings_free() : DESTRUCTOR. NULL-safe. */
PROGCACHE_API void progcache_settings_free(progcache_settings *settings);

/* progcache_settings_count() / progcache_settings_at() : every known
 * setting, in a fixed order (the one `progcache config` prints). _at
 * returns NULL past the end. Borrowed: lives as long as settings. */
PROGCACHE_API size_t progcache_settings_count(const progcache_settings *settings);
PROGCACHE_API const progcache_setting *progcache_settings_at(const progcache_settings *settings,
                                                             size_t i);

/* progcache_settings_find() : the setting called name ("max_size"), or
 * NULL for a name no setting has. Borrowed. */
PROGCACHE_API const progcache_setting *progcache_settings_find(const progcache_settings *settings,
                                                               const char *name);

/* progcache_settings_path() : the settings file these came from (whether
 * or not it exists): "<dir>/progcache/config"; NULL without a directory.
 * Borrowed. */
PROGCACHE_API const char *progcache_settings_path(const progcache_settings *settings);

/*
 * progcache_settings_set() : write name = value into dir's settings file
 * (creating the directory as a cache, and the file, when missing), or
 * remove name's line when value is NULL. The value is checked first, as
 * the readers check it. The rest of the file (comments, other settings,
 * lines it cannot parse) is kept as it is. The new file replaces the old
 * one whole (temp file, fsync, rename), under the directory's lock, so
 * readers see the old settings or the new ones and concurrent writers do
 * not lose each other's change.
 * @param dir NULL: progcache_default_dir().
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (unknown name, a value that
 *         cannot be used, an environment-only setting, a directory that
 *         is not a cache); PROGCACHE_EIO; PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_settings_set(const char *dir, const char *name, const char *value);

/* progcache_file_settings() : the settings in force for an open cache
 * directory: what its store resolved at open from its options, the
 * settings file and the environment, each value with its source (API for
 * the options the program set). Borrowed: lives as long as file. NULL for
 * NULL. */
PROGCACHE_API const progcache_settings *progcache_file_settings(const progcache_file *file);

/*
 * progcache_parse_size() : a size as the settings read it ("10G", "512Mi",
 * "1.5GiB", "4096", "0"). Surrounding blanks are allowed.
 * @return PROGCACHE_OK, or PROGCACHE_EINVAL for anything else (a negative
 *         number, an unknown suffix, a fraction of a byte, more than
 *         2^64 - 2 bytes), with no message.
 */
PROGCACHE_API int progcache_parse_size(uint64_t *out, const char *text);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_SETTINGS_H */
