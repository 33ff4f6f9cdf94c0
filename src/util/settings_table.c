/* The settings of a cache directory: what each one accepts, the settings
 * file's text, and the overlays (progcache/settings.h, docs/CONFIG.md). */
#include "settings_table.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "error.h"
#include "url_mask.h"

typedef enum kind {
    SIZE_OR_NONE, /* bytes; 0 or "none": none */
    SIZE,         /* bytes, at least 1 */
    PERCENT,      /* 1 to 100 */
    YES_NO,       /* true/false, yes/no, on/off, 1/0 */
    TEXT,         /* a string (environment only) */
    BYTES,        /* bytes, 0 allowed */
    DURATION_S,   /* milliseconds, 1 ms to 24 hours; a bare number is seconds */
    DURATION_MS   /* milliseconds, 0 to 24 hours; a bare number is milliseconds */
} kind;

typedef struct spec {
    const char *name;
    const char *variable;
    kind kind;
    const char *def;   /* the default's text */
    uint64_t number;   /* the default's number */
    int in_file;
    const char *summary;
} spec;

static const spec specs[PROGCACHE__SET_COUNT] = {
    {"max_size", "PROGCACHE_MAX_SIZE", SIZE_OR_NONE, "5GiB", PROGCACHE_MAX_SIZE_DEFAULT, 1,
     "size cap of the cache directory; least recently used entries are evicted above it "
     "(none: no cap)"},
    {"low_water_percent", "PROGCACHE_LOW_WATER_PERCENT", PERCENT, "90", 90, 1,
     "eviction stops when the directory is this full, in percent of max_size"},
    {"memory_size", "PROGCACHE_MEMORY_SIZE", SIZE_OR_NONE, "none", 0, 1,
     "bytes of in-process memory tier in front of the directory (none: no memory tier)"},
    {"max_artifact_size", "PROGCACHE_MAX_ARTIFACT_SIZE", SIZE, "1GiB",
     PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT, 1,
     "the largest artifact stored or read, in every tier"},
    {"no_fsync", "PROGCACHE_NO_FSYNC", YES_NO, "false", 0, 1,
     "skip fsync on put: faster, but a put may be lost (never torn) on power loss"},
    {"remote", "PROGCACHE_REMOTE", TEXT, "", 0, 0,
     "URL of a shared Redis tier below the directory (environment only)"},
    {"remote_secret_file", "PROGCACHE_REMOTE_SECRET_FILE", TEXT, "", 0, 0,
     "file holding the remote tier's shared secret (environment only)"},
    {"remote_min_rate", "PROGCACHE_REMOTE_MIN_RATE", SIZE, "1MiB", UINT64_C(1) << 20, 1,
     "bytes per second a remote command's deadline allows: each must end within "
     "command_timeout_ms plus the bytes it moved at this rate"},
    {"remote_ca", "PROGCACHE_REMOTE_CA", TEXT, "", 0, 1,
     "PEM file of the CAs an https:// or s3:// remote tier's certificate is checked against "
     "(none: the system's)"},
    {"nvrtc_library", "PROGCACHE_NVRTC_LIBRARY", TEXT, "", 0, 0,
     "the NVRTC library to load for compiles, instead of the toolkit's found at build time "
     "and then the loader's search path (environment only)"},
    {"nvrtc_version", "PROGCACHE_NVRTC_VERSION", TEXT, "", 0, 0,
     "the NVRTC version (13.0) keys carry when NVRTC is not loaded, instead of the cache's "
     "record of it (environment only)"},
    {"shared_group", "PROGCACHE_SHARED_GROUP", TEXT, "", 0, 0,
     "the group of a team's cache directory, whose members' entries are trusted (environment "
     "or --shared-group only)"},
    /* i22: the variables that were parsed apart (util/config.c reads them
     * through this table now; docs/CONFIG.md). */
    {"wait_timeout", "PROGCACHE_WAIT_TIMEOUT", DURATION_S, "60s", 60000, 0,
     "how long a compile waits for another process's compile of the same program "
     "(environment only)"},
    {"pch", "PROGCACHE_PCH", TEXT, "on", 0, 0,
     "the PCH tier: on (the default), off or inprocess (environment only)"},
    {"pch_max_size", "PROGCACHE_PCH_MAX_SIZE", BYTES, "2GiB", (uint64_t)2 << 30, 0,
     "size budget of the precompiled headers (environment only)"},
    {"pch_min_ms", "PROGCACHE_PCH_MIN_MS", DURATION_MS, "500ms", 500, 0,
     "a plain compile this slow makes its headers a PCH candidate (environment only)"},
    {"pch_helper", "PROGCACHE_PCH_HELPER", TEXT, "", 0, 0,
     "the helper program PCH compiles run in (environment only)"},
    {"pch_create", "PROGCACHE_PCH_CREATE", TEXT, "detached", 0, 0,
     "when a PCH is made: detached (after the compile that needed it returned, the default) "
     "or inline (environment only)"},
    {"pch_warm", "PROGCACHE_PCH_WARM", DURATION_MS, "60s", 60000, 0,
     "how long a warm PCH helper waits for the next compile before it exits; 0: a fresh "
     "helper for every compile (environment only)"},
    /* i35: ccache's switches (CCACHE_DISABLE, _READONLY, _RECACHE), for a
     * run, not a directory: environment only (docs/OPERATIONS.md). */
    {"disable", "PROGCACHE_DISABLE", YES_NO, "false", 0, 0,
     "no cache at all: every compile runs, nothing is read from or written to any tier "
     "(environment only)"},
    {"readonly", "PROGCACHE_READONLY", YES_NO, "false", 0, 0,
     "read the cache but never write it: nothing stored, no counters or state written "
     "(environment only)"},
    {"recache", "PROGCACHE_RECACHE", YES_NO, "false", 0, 0,
     "never read the cache: every compile runs and its result is stored over the entry "
     "(environment only)"},
    /* i35-explain: say on each MISS which inputs differ from the nearest
     * stored entries (docs/OPERATIONS.md, "Explained misses"). */
    {"explain", "PROGCACHE_EXPLAIN", YES_NO, "false", 0, 0,
     "explain each compile-or-load MISS through the log: the nearest stored entries of the "
     "program and which inputs differ (environment only)"},
};

/* "5GiB", "512MiB", "1000": the exact size in the largest whole unit. */
static void format_size(char *out, size_t len, uint64_t bytes)
{
    static const char *units[] = {"", "KiB", "MiB", "GiB", "TiB", "PiB"};
    unsigned u = 0;
    while (u + 1 < sizeof units / sizeof units[0] && bytes && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, len, "%llu%s", (unsigned long long)bytes, units[u]);
}

/* ---- values --------------------------------------------------------------- */

/* The number text stands for, for setting idx. 0 or -1 (*why says what is
 * accepted). */
static int parse_value(int idx, const char *text, uint64_t *number, const char **why)
{
    const spec *sp = &specs[idx];
    uint64_t n = 0;
    if (strchr(text, '\n')) {
        *why = "one line only";
        return -1;
    }
    switch (sp->kind) {
    case SIZE_OR_NONE:
        *why = "not a size: give bytes, or a number and K, M, G or T (powers of 1024) such as "
                "10G, or none";
        if (strcasecmp(text, "none") == 0) {
            *number = 0;
            return 0;
        }
        if (progcache_parse_size(&n, text))
            return -1;
        *number = n;
        return 0;
    case SIZE:
        *why = "not a size: give bytes (not 0), or a number and K, M, G or T (powers of 1024) "
               "such as 512M";
        if (progcache_parse_size(&n, text) || n == 0)
            return -1;
        *number = n;
        return 0;
    case PERCENT:
        *why = "not a percentage: give a whole number from 1 to 100";
        if (progcache_parse_size(&n, text) || n < 1 || n > 100 || strpbrk(text, ".kKmMgGtTpPbB"))
            return -1;
        *number = n;
        return 0;
    case YES_NO: {
        *why = "not a yes or no: give true or false (also yes/no, on/off, 1/0)";
        int yes = 0;
        if (progcache__parse_bool(&yes, text))
            return -1;
        *number = (uint64_t)yes;
        return 0;
    }
    case TEXT:
        *number = 0;
        return 0;
    case BYTES:
        *why = "not a size: give bytes, or a number and K, M, G or T (powers of 1024) such as 5GiB";
        if (progcache_parse_size(&n, text))
            return -1;
        *number = n;
        return 0;
    case DURATION_S:
    case DURATION_MS:
        *why = sp->kind == DURATION_S
                   ? "not a duration from 1ms to 24 hours: give seconds (\"60\", \"60s\"), "
                     "\"1500ms\" or \"2m\""
                   : "not a duration up to 24 hours: give milliseconds (\"500\", \"500ms\"), "
                     "\"2s\" or \"1m\"";
        if (progcache__parse_duration_ms(&n, text, sp->kind == DURATION_S ? 1000 : 1) ||
            (sp->kind == DURATION_S && n == 0))
            return -1;
        *number = n;
        return 0;
    }
    return -1;
}

/* Replace item idx's value and origin texts (either may be a static
 * string when owned is 0). */
static int set_item(progcache_settings *s, int idx, char *value, char *origin, int owned,
                    uint64_t number, progcache_setting_source source)
{
    progcache_setting *it = &s->item[idx];
    progcache__free(s->owned[2 * idx]);
    progcache__free(s->owned[2 * idx + 1]);
    s->owned[2 * idx] = owned ? value : NULL;
    s->owned[2 * idx + 1] = owned ? origin : NULL;
    it->value = value;
    it->origin = origin;
    it->number = number;
    it->source = source;
    return PROGCACHE_OK;
}

int progcache__settings_parse(uint64_t *number, const char **why, int idx, const char *text)
{
    *why = "";
    return parse_value(idx, text, number, why) ? PROGCACHE_EINVAL : PROGCACHE_OK;
}

/* Read where they are used (the PCH tier, the wait of a compile), not by
 * a cache directory's resolution: a value its reader cannot use is
 * reported there (the PCH tier turns itself off and says why), so the
 * environment overlay skips it rather than failing the open. */
int progcache__settings_apart(int idx)
{
    return idx >= PROGCACHE__SET_WAIT_TIMEOUT && idx <= PROGCACHE__SET_PCH_CREATE;
}

const char *progcache__settings_variable(int idx) { return specs[idx].variable; }

int progcache__settings_assign(progcache_settings *s, int idx, const char *text,
                               progcache_setting_source source, const char *origin)
{
    uint64_t number;
    const char *why = "";
    const spec *sp = &specs[idx];
    if (parse_value(idx, text, &number, &why)) {
        if (source == PROGCACHE_SETTING_FILE)
            return progcache__error(PROGCACHE_EINVAL, "%s: %s = \"%s\": %s", origin, sp->name,
                                    text, why);
        if (source == PROGCACHE_SETTING_ENV)
            return progcache__error(PROGCACHE_EINVAL, "%s=\"%s\" (the setting %s): %s", origin,
                                    text, sp->name, why);
        return progcache__error(PROGCACHE_EINVAL, "%s \"%s\": %s", sp->name, text, why);
    }
    /* A URL's password is never kept: what `progcache config` prints must be
     * safe to paste into a bug report. */
    char *value =
        idx == PROGCACHE__SET_REMOTE ? progcache__url_masked(text) : progcache__strdup(text);
    char *where = progcache__strdup(origin);
    if (!value || !where) {
        progcache__free(value);
        progcache__free(where);
        return progcache__error(PROGCACHE_ENOMEM, "out of memory reading the settings");
    }
    return set_item(s, idx, value, where, 1, number, source);
}

int progcache__settings_api(progcache_settings *s, int idx, uint64_t number, const char *what)
{
    if (number == 0)
        return PROGCACHE_OK;
    const spec *sp = &specs[idx];
    char text[48];
    if (number == PROGCACHE_SIZE_NONE) {
        if (sp->kind != SIZE_OR_NONE)
            return progcache__error(PROGCACHE_EINVAL,
                                    "%s is PROGCACHE_SIZE_NONE, but %s must be a number of bytes "
                                    "(0: the setting, %s by default)",
                                    what, sp->name, sp->def);
        snprintf(text, sizeof text, "none");
        number = 0;
    } else if (sp->kind == PERCENT && number > 100) {
        return progcache__error(PROGCACHE_EINVAL, "%s is %llu; use 1-100 (0: the setting, 90 by "
                                                  "default)",
                                what, (unsigned long long)number);
    } else if (sp->kind == YES_NO) {
        snprintf(text, sizeof text, "true");
        number = 1;
    } else if (sp->kind == PERCENT) {
        snprintf(text, sizeof text, "%llu", (unsigned long long)number);
    } else {
        format_size(text, sizeof text, number);
    }
    char *value = progcache__strdup(text);
    char *where = progcache__strdup("the program's options");
    if (!value || !where) {
        progcache__free(value);
        progcache__free(where);
        return progcache__error(PROGCACHE_ENOMEM, "out of memory resolving the settings");
    }
    return set_item(s, idx, value, where, 1, number, PROGCACHE_SETTING_API);
}

/* ---- the table ------------------------------------------------------------ */

int progcache__settings_index(const char *name)
{
    for (int i = 0; name && i < PROGCACHE__SET_COUNT; i++)
        if (!strcmp(name, specs[i].name))
            return i;
    return -1;
}

int progcache__settings_init(progcache_settings *s, const char *dir)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < PROGCACHE__SET_COUNT; i++) {
        progcache_setting *it = &s->item[i];
        it->name = specs[i].name;
        it->variable = specs[i].variable;
        it->summary = specs[i].summary;
        it->value = specs[i].def;
        it->number = specs[i].number;
        it->source = PROGCACHE_SETTING_DEFAULT;
        it->origin = "default";
        it->in_file = specs[i].in_file;
        it->default_value = specs[i].def;
    }
    if (dir) {
        size_t n = strlen(dir) + sizeof "/" PROGCACHE__SETTINGS_REL;
        if (!(s->path = progcache__malloc(n)))
            return progcache__error(PROGCACHE_ENOMEM, "out of memory reading the settings");
        snprintf(s->path, n, "%s/%s", dir, PROGCACHE__SETTINGS_REL);
    }
    return PROGCACHE_OK;
}

void progcache__settings_release(progcache_settings *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < sizeof s->owned / sizeof s->owned[0]; i++)
        progcache__free(s->owned[i]);
    progcache__free(s->path);
    memset(s, 0, sizeof *s);
}

void progcache_settings_free(progcache_settings *settings)
{
    if (!settings)
        return;
    progcache__settings_release(settings);
    progcache__free(settings);
}

size_t progcache_settings_count(const progcache_settings *settings)
{
    return settings ? PROGCACHE__SET_COUNT : 0;
}

const progcache_setting *progcache_settings_at(const progcache_settings *settings, size_t i)
{
    return settings && i < PROGCACHE__SET_COUNT ? &settings->item[i] : NULL;
}

const progcache_setting *progcache_settings_find(const progcache_settings *settings,
                                                 const char *name)
{
    int i = progcache__settings_index(name);
    return settings && i >= 0 ? &settings->item[i] : NULL;
}

const char *progcache_settings_path(const progcache_settings *settings)
{
    return settings ? settings->path : NULL;
}

/* ---- the file's text ------------------------------------------------------ */

/* One line, split: blank (or a comment), or "name = value" with both
 * trimmed. 0, or -1 for a line that is neither. */
typedef struct line {
    const char *name, *value;
    size_t name_len, value_len;
    int blank;
} line;

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static int split(line *l, const char *p, size_t n)
{
    memset(l, 0, sizeof *l);
    while (n && is_blank(*p))
        p++, n--;
    while (n && is_blank(p[n - 1]))
        n--;
    if (n == 0 || *p == '#') {
        l->blank = 1;
        return 0;
    }
    const char *eq = memchr(p, '=', n);
    if (!eq)
        return -1;
    size_t name_len = (size_t)(eq - p);
    while (name_len && is_blank(p[name_len - 1]))
        name_len--;
    const char *v = eq + 1;
    size_t value_len = n - (size_t)(v - p);
    while (value_len && is_blank(*v))
        v++, value_len--;
    if (!name_len)
        return -1;
    l->name = p;
    l->name_len = name_len;
    l->value = v;
    l->value_len = value_len;
    return 0;
}

static int name_is(const line *l, const char *name)
{
    return !l->blank && l->name_len == strlen(name) && !memcmp(l->name, name, l->name_len);
}

static const char *known_names(void)
{
    return "max_size, low_water_percent, memory_size, max_artifact_size, no_fsync";
}

int progcache__settings_apply_file(progcache_settings *s, const char *text, size_t len)
{
    const char *path = s->path ? s->path : "the settings file";
    if (memchr(text, '\0', len))
        return progcache__error(PROGCACHE_EINVAL,
                                "%s is not a text file (it holds a NUL byte); it should hold "
                                "\"name = value\" lines (docs/CONFIG.md)",
                                path);
    int seen[PROGCACHE__SET_COUNT] = {0};
    int lineno = 0;
    for (size_t at = 0; at < len;) {
        const char *p = text + at;
        const char *nl = memchr(p, '\n', len - at);
        size_t n = nl ? (size_t)(nl - p) : len - at;
        at += n + 1;
        lineno++;
        line l;
        if (split(&l, p, n))
            return progcache__error(PROGCACHE_EINVAL,
                                    "%s:%d: \"%.*s\" is not a setting: write \"name = value\" "
                                    "(or start a comment with #)",
                                    path, lineno, (int)(n > 80 ? 80 : n), p);
        if (l.blank)
            continue;
        char name[64], value[1024];
        if (l.name_len >= sizeof name || l.value_len >= sizeof value)
            return progcache__error(PROGCACHE_EINVAL, "%s:%d: the line is too long", path,
                                    lineno);
        memcpy(name, l.name, l.name_len);
        name[l.name_len] = '\0';
        memcpy(value, l.value, l.value_len);
        value[l.value_len] = '\0';
        int idx = progcache__settings_index(name);
        if (idx < 0)
            return progcache__error(PROGCACHE_EINVAL,
                                    "%s:%d: unknown setting \"%s\"; the settings file takes %s",
                                    path, lineno, name, known_names());
        if (!specs[idx].in_file)
            return progcache__error(PROGCACHE_EINVAL,
                                    "%s:%d: %s is read from the environment only (%s), not from "
                                    "a file in the cache directory; remove the line",
                                    path, lineno, name, specs[idx].variable);
        if (seen[idx])
            return progcache__error(PROGCACHE_EINVAL, "%s:%d: %s is set twice (lines %d and %d); "
                                                      "keep one",
                                    path, lineno, name, seen[idx], lineno);
        seen[idx] = lineno;
        if (!*value)
            return progcache__error(PROGCACHE_EINVAL, "%s:%d: %s has no value", path, lineno,
                                    name);
        char origin[4200];
        snprintf(origin, sizeof origin, "%s:%d", path, lineno);
        int rc = progcache__settings_assign(s, idx, value, PROGCACHE_SETTING_FILE, origin);
        if (rc)
            return rc;
    }
    return PROGCACHE_OK;
}

static const char header[] =
    "# progcache settings of this cache directory: \"name = value\" lines.\n"
    "# 'progcache config' shows and sets them; see docs/CONFIG.md. The environment\n"
    "# (PROGCACHE_MAX_SIZE, ...) and a program's own options override them.\n";

int progcache__settings_edit(progcache_buf *out, const char *old, size_t old_len,
                             const char *name, const char *value)
{
    out->size = 0;
    int rc = PROGCACHE_OK, done = 0;
    if (!old || !old_len)
        rc = progcache__buf_append(out, header, sizeof header - 1);
    for (size_t at = 0; !rc && old && at < old_len;) {
        const char *p = old + at;
        const char *nl = memchr(p, '\n', old_len - at);
        size_t n = nl ? (size_t)(nl - p) : old_len - at;
        at += n + 1;
        line l;
        if (split(&l, p, n) == 0 && name_is(&l, name)) {
            if (done || !value)
                continue;
            done = 1;
            if (!(rc = progcache__buf_append(out, name, strlen(name))) &&
                !(rc = progcache__buf_append(out, " = ", 3)))
                rc = progcache__buf_append(out, value, strlen(value));
        } else {
            rc = progcache__buf_append(out, p, n);
        }
        if (!rc)
            rc = progcache__buf_append(out, "\n", 1);
    }
    if (!rc && value && !done) {
        if (!(rc = progcache__buf_append(out, name, strlen(name))) &&
            !(rc = progcache__buf_append(out, " = ", 3)) &&
            !(rc = progcache__buf_append(out, value, strlen(value))))
            rc = progcache__buf_append(out, "\n", 1);
    }
    return rc;
}
