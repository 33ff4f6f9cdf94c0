/* Cache keys for NVRTC compiles, byte-compatible with cuda.core 1.2's
 * make_program_cache_key() (key schema 2, code_type "c++"). docs/KEY.md
 * writes the recipe out; the order and labels of the fields below are that
 * recipe and must not change, or keys stop matching cuda.core's. */
#include "progcache/key.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"
#include "options.h"
#include "key/key_options.h"
#include "sha256.h"
#include "key/frame.h"
#include "key/nvrtc_lib.h"

/* cuda.core's _KEY_SCHEMA_VERSION. */
#define KEY_SCHEMA "2"

static const char *const target_names[] = {"cubin", "ptx", "ltoir"};

const char *progcache_target_name(progcache_target target)
{
    if ((unsigned)target >= sizeof target_names / sizeof target_names[0])
        return NULL;
    return target_names[target];
}

int progcache_target_parse(progcache_target *out, const char *name)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_target_parse: out is NULL");
    if (!name)
        return progcache__error(PROGCACHE_EINVAL, "progcache_target_parse: name is NULL");
    for (size_t i = 0; i < sizeof target_names / sizeof target_names[0]; i++) {
        if (!strcmp(name, target_names[i])) {
            *out = (progcache_target)i;
            return PROGCACHE_OK;
        }
    }
    return progcache__error(PROGCACHE_EINVAL,
                            "unknown target \"%s\": use \"cubin\", \"ptx\" or \"ltoir\"", name);
}

void progcache_key_nvrtc_options_init(progcache_key_nvrtc_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->version = PROGCACHE_KEY_NVRTC_OPTIONS_VERSION;
}

/* ---- NVRTC version: the NVRTC that would compile. Loaded, it answers;
 * otherwise the setting or a record of its file (nvrtc_lib.c) spares the
 * load, and only then is it loaded to ask. --------------------------- */

int progcache_nvrtc_version(int *major, int *minor)
{
    if (!major || !minor)
        return progcache__error(PROGCACHE_EINVAL, "progcache_nvrtc_version: major or minor is NULL");
    const char *how;
    int rc = progcache__nvrtc_version_known(major, minor, &how);
    if (rc != PROGCACHE_ENOTFOUND)
        return rc;
    const progcache__nvrtc_api *api;
    if ((rc = progcache__nvrtc_load(&api))) {
        progcache__error_append("; keys carry the NVRTC version: without NVRTC, set "
                                "PROGCACHE_NVRTC_VERSION (or nvrtc_major/nvrtc_minor) to the "
                                "version the cached kernels were compiled with");
        return rc;
    }
    *major = api->major;
    *minor = api->minor;
    return PROGCACHE_OK;
}

int progcache_nvrtc_library(progcache_buf *out)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_nvrtc_library: out is NULL");
    progcache__nvrtc_file file;
    int rc = progcache__nvrtc_loaded_file(&file);
    if (rc == PROGCACHE_ENOTFOUND)
        rc = progcache__nvrtc_candidate(&file);
    if (rc)
        return rc;
    return progcache_buf_set(out, file.path, strlen(file.path));
}

/* ---- the key ------------------------------------------------------------- */

/* The struct's size in each version, for progcache__options_load. */
static const size_t key_options_size[] = {0, offsetof(progcache_key_nvrtc_options, headers),
                                          sizeof(progcache_key_nvrtc_options)};

int progcache__key_options_load(progcache_key_nvrtc_options *dst,
                                const progcache_key_nvrtc_options *src, const char *fn)
{
    progcache_key_nvrtc_options_init(dst);
    return progcache__options_load(dst, src, key_options_size,
                                   PROGCACHE_KEY_NVRTC_OPTIONS_VERSION, fn,
                                   "progcache_key_nvrtc_options");
}

static int check_args(const progcache_key_nvrtc_options *o)
{
    if (!o->source)
        return progcache__error(PROGCACHE_EINVAL, "progcache_key_nvrtc: source is NULL");
    if (!progcache_target_name(o->target))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_key_nvrtc: target %d is not a progcache_target "
                                "(use PROGCACHE_TARGET_CUBIN, _PTX or _LTOIR)",
                                (int)o->target);
    if (o->num_options && !o->options)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_key_nvrtc: options is NULL but num_options is %zu",
                                o->num_options);
    for (size_t i = 0; i < o->num_options; i++)
        if (!o->options[i])
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_key_nvrtc: option string %zu of %zu is NULL", i,
                                    o->num_options);
    if (o->num_name_expressions && !o->name_expressions)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_key_nvrtc: name_expressions is NULL but "
                                "num_name_expressions is %zu",
                                o->num_name_expressions);
    for (size_t i = 0; i < o->num_name_expressions; i++)
        if (!o->name_expressions[i])
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_key_nvrtc: name expression %zu of %zu is NULL", i,
                                    o->num_name_expressions);
    if (!o->extra_digest && o->extra_digest_len)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_key_nvrtc: extra_digest is NULL but "
                                "extra_digest_len is %zu",
                                o->extra_digest_len);
    if (o->num_headers && !o->headers)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_key_nvrtc: headers is NULL but num_headers is %zu",
                                o->num_headers);
    for (size_t i = 0; i < o->num_headers; i++) {
        const progcache_header *h = &o->headers[i];
        if (!h->name || !h->name[0] || !h->content)
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_key_nvrtc: header %zu of %zu has %s", i,
                                    o->num_headers,
                                    !h->name ? "no name" : !h->name[0] ? "an empty name"
                                                                       : "no content (NULL)");
        for (size_t k = 0; k < i; k++)
            if (!strcmp(o->headers[k].name, h->name))
                return progcache__error(PROGCACHE_EINVAL,
                                        "progcache_key_nvrtc: headers %zu and %zu are both named "
                                        "\"%s\" (NVRTC refuses two headers of one name)",
                                        k, i, h->name);
    }
    /* 0/0 means "ask NVRTC"; 13/0 is a real version, 0/5 is a mistake. */
    if (o->nvrtc_major < 0 || o->nvrtc_minor < 0 || (o->nvrtc_major == 0 && o->nvrtc_minor != 0))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_key_nvrtc: NVRTC version %d.%d is not valid: set "
                                "nvrtc_major (> 0) and nvrtc_minor (>= 0) together, or both "
                                "to 0 to use the loaded NVRTC",
                                o->nvrtc_major, o->nvrtc_minor);
    return PROGCACHE_OK;
}

static int compare_names(const void *a, const void *b)
{
    /* strcmp compares as unsigned char and orders a prefix first: the same
     * order as Python's sorted() over the tagged bytes, since every name
     * carries the same tag. */
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The name expressions, tagged and sorted: cuda.core sorts them so that the
 * caller's order does not matter (NVRTC's output does not depend on it). */
static int hash_names(progcache__sha256 *h, const progcache_key_nvrtc_options *o)
{
    const char *tag = o->name_expressions_are_bytes ? "b:" : "s:";
    size_t n = o->num_name_expressions;
    const char **sorted = NULL;
    int rc = progcache__frame_count(h, "names_count", n);
    if (rc || n == 0)
        return rc;
    sorted = progcache__calloc(n, sizeof *sorted);
    if (!sorted)
        return progcache__error(PROGCACHE_ENOMEM,
                                "out of memory sorting %zu name expressions", n);
    memcpy(sorted, o->name_expressions, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, compare_names);
    for (size_t i = 0; i < n && !rc; i++) {
        size_t len = strlen(sorted[i]);
        rc = progcache__frame_begin(h, "name", 2 + (uint64_t)len);
        if (!rc)
            rc = progcache__sha256_update(h, tag, 2);
        if (!rc)
            rc = progcache__sha256_update(h, sorted[i], len);
    }
    progcache__free(sorted);
    return rc;
}

static int hash_key(progcache__sha256 *h, const progcache_key_nvrtc_options *o, int major,
                    int minor, const unsigned char *extra, size_t extra_len)
{
    char version[32];
    size_t source_len = o->source_len ? o->source_len : strlen(o->source);
    int rc;

    snprintf(version, sizeof version, "%d.%d", major, minor);
    if ((rc = progcache__frame_str(h, "schema", KEY_SCHEMA)) ||
        (rc = progcache__frame_str(h, "nvrtc", version)) ||
        (rc = progcache__frame_str(h, "code_type", "c++")) ||
        (rc = progcache__frame_str(h, "target_type", progcache_target_name(o->target))) ||
        (rc = progcache__frame(h, "code", o->source, source_len)) ||
        (rc = progcache__frame_count(h, "option_count", o->num_options)))
        return rc;
    /* Options in the caller's order: NVRTC gives later options precedence,
     * so reordering can change the binary. */
    for (size_t i = 0; i < o->num_options; i++)
        if ((rc = progcache__frame_str(h, "option", o->options[i])))
            return rc;
    if ((rc = hash_names(h, o)))
        return rc;
    /* cuda.core always has a name (ProgramOptions defaults it), and the
     * name reaches the compiled program. */
    if ((rc = progcache__frame_str(h, "options_name", o->name ? o->name : "default_program")))
        return rc;
    if (extra)
        rc = progcache__frame(h, "extra_digest", extra, extra_len);
    return rc;
}

int progcache__key_load(progcache_key_nvrtc_options *dst, const progcache_key_nvrtc_options *src,
                        const char *fn)
{
    if (!src)
        return progcache__error(PROGCACHE_EINVAL, "%s: opts is NULL", fn);
    int rc = progcache__key_options_load(dst, src, fn);
    return rc ? rc : check_args(dst);
}

int progcache__key_derive(unsigned char out[PROGCACHE_KEY_SIZE],
                          const progcache_key_nvrtc_options *o, const unsigned char *extra,
                          size_t extra_len)
{
    int major = 0, minor = 0, rc;
    if (o->nvrtc_major || o->nvrtc_minor) {
        major = o->nvrtc_major;
        minor = o->nvrtc_minor;
    } else if ((rc = progcache_nvrtc_version(&major, &minor))) {
        return rc;
    }
    progcache__sha256 *h = progcache__sha256_new();
    if (!h)
        return progcache_error_code() ? progcache_error_code() : PROGCACHE_ENOMEM;
    rc = hash_key(h, o, major, minor, extra, extra_len);
    if (rc) {
        progcache__sha256_free(h);
        return rc;
    }
    return progcache__sha256_final(h, out); /* releases h */
}

/* ---- hex ------------------------------------------------------------------ */

void progcache_key_hex(char *out, const unsigned char *key, size_t len)
{
    if (!out)
        return;
    if (!key) {
        out[0] = '\0';
        return;
    }
    progcache__hex(out, key, len);
}

int progcache_key_from_hex(unsigned char out[PROGCACHE_KEY_SIZE], const char *hex)
{
    if (!out || !hex)
        return progcache__error(PROGCACHE_EINVAL, "progcache_key_from_hex: out or hex is NULL");
    size_t len = strlen(hex);
    if (len != 2 * PROGCACHE_KEY_SIZE)
        return progcache__error(PROGCACHE_EINVAL,
                                "key \"%.80s\" has %zu characters; a key is exactly %d hex "
                                "digits",
                                hex, len, 2 * PROGCACHE_KEY_SIZE);
    for (size_t i = 0; i < len; i++)
        if (progcache__hex_digit(hex[i]) < 0)
            return progcache__error(PROGCACHE_EINVAL,
                                    "key \"%s\" has a non-hex character at position %zu", hex,
                                    i + 1);
    for (size_t i = 0; i < PROGCACHE_KEY_SIZE; i++)
        out[i] = (unsigned char)(progcache__hex_digit(hex[2 * i]) << 4 | progcache__hex_digit(hex[2 * i + 1]));
    return PROGCACHE_OK;
}

