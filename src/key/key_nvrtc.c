/* Cache keys for NVRTC compiles, byte-compatible with cuda.core 1.2's
 * make_program_cache_key() (key schema 2, code_type "c++"). docs/KEY.md
 * writes the recipe out; the order and labels of the fields below are that
 * recipe and must not change, or keys stop matching cuda.core's. */
#include "progcache/key.h"

#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <pthread.h>
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

/* cuda.core's _KEY_SCHEMA_VERSION. */
#define KEY_SCHEMA "2"

/* Version of the progcache_digest_files recipe, hashed first so a future
 * change cannot collide with today's digests. */
#define DIGEST_FILES_RECIPE "1"

/* Read size of progcache_digest_files: big enough that syscalls do not
 * dominate, small enough to allocate without thought. */
#define READ_CHUNK (64 * 1024)

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

/* ---- NVRTC version: asked once per process; the library cannot change
 * under a running process. ------------------------------------------------ */

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static nvrtcResult nvrtc_status;
static int nvrtc_major, nvrtc_minor;

static void read_nvrtc_version(void)
{
    nvrtc_status = nvrtcVersion(&nvrtc_major, &nvrtc_minor);
}

int progcache_nvrtc_version(int *major, int *minor)
{
    if (!major || !minor)
        return progcache__error(PROGCACHE_EINVAL, "progcache_nvrtc_version: major or minor is NULL");
    pthread_once(&nvrtc_once, read_nvrtc_version);
    if (nvrtc_status != NVRTC_SUCCESS)
        return progcache__error(PROGCACHE_ECOMPILE,
                                "nvrtcVersion() failed: %s; check that a working NVRTC "
                                "library (libnvrtc.so) is installed, or set the NVRTC "
                                "version explicitly to derive keys without it",
                                nvrtcGetErrorString(nvrtc_status));
    *major = nvrtc_major;
    *minor = nvrtc_minor;
    return PROGCACHE_OK;
}

/* ---- hashing ------------------------------------------------------------ */

/* One field of the recipe: the ASCII label, the payload length as 8 bytes
 * big-endian, then the payload. The length makes the encoding
 * unambiguous: no two different field sequences hash the same bytes. */
static int field_begin(progcache__sha256 *h, const char *label, uint64_t len)
{
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(len >> (56 - 8 * i));
    int rc = progcache__sha256_update(h, label, strlen(label));
    return rc ? rc : progcache__sha256_update(h, be, sizeof be);
}

static int field(progcache__sha256 *h, const char *label, const void *data, size_t len)
{
    int rc = field_begin(h, label, len);
    return rc ? rc : progcache__sha256_update(h, data, len);
}

static int field_str(progcache__sha256 *h, const char *label, const char *text)
{
    return field(h, label, text, strlen(text));
}

static int field_count(progcache__sha256 *h, const char *label, size_t n)
{
    char text[32];
    snprintf(text, sizeof text, "%zu", n);
    return field_str(h, label, text);
}

/* ---- the key ------------------------------------------------------------- */

/* The struct's size in each version, for progcache__options_load. */
static const size_t key_options_size[] = {0, sizeof(progcache_key_nvrtc_options)};

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
    int rc = field_count(h, "names_count", n);
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
        rc = field_begin(h, "name", 2 + (uint64_t)len);
        if (!rc)
            rc = progcache__sha256_update(h, tag, 2);
        if (!rc)
            rc = progcache__sha256_update(h, sorted[i], len);
    }
    progcache__free(sorted);
    return rc;
}

static int hash_key(progcache__sha256 *h, const progcache_key_nvrtc_options *o, int major,
                    int minor)
{
    char version[32];
    size_t source_len = o->source_len ? o->source_len : strlen(o->source);
    int rc;

    snprintf(version, sizeof version, "%d.%d", major, minor);
    if ((rc = field_str(h, "schema", KEY_SCHEMA)) || (rc = field_str(h, "nvrtc", version)) ||
        (rc = field_str(h, "code_type", "c++")) ||
        (rc = field_str(h, "target_type", progcache_target_name(o->target))) ||
        (rc = field(h, "code", o->source, source_len)) ||
        (rc = field_count(h, "option_count", o->num_options)))
        return rc;
    /* Options in the caller's order: NVRTC gives later options precedence,
     * so reordering can change the binary. */
    for (size_t i = 0; i < o->num_options; i++)
        if ((rc = field_str(h, "option", o->options[i])))
            return rc;
    if ((rc = hash_names(h, o)))
        return rc;
    /* cuda.core always has a name (ProgramOptions defaults it), and the
     * name reaches the compiled program. */
    if ((rc = field_str(h, "options_name", o->name ? o->name : "default_program")))
        return rc;
    if (o->extra_digest)
        rc = field(h, "extra_digest", o->extra_digest, o->extra_digest_len);
    return rc;
}

int progcache_key_nvrtc(unsigned char out[PROGCACHE_KEY_SIZE],
                        const progcache_key_nvrtc_options *opts)
{
    int major = 0, minor = 0, rc;
    progcache__sha256 *h = NULL;

    if (!out || !opts)
        return progcache__error(PROGCACHE_EINVAL, "progcache_key_nvrtc: out or opts is NULL");
    progcache_key_nvrtc_options o;
    if ((rc = progcache__key_options_load(&o, opts, "progcache_key_nvrtc")) ||
        (rc = check_args(&o)))
        return rc;
    opts = &o;
    /* An empty digest is still a digest, as in cuda.core (b"" is not None). */
    if ((rc = progcache__key_check_options(opts->options, opts->num_options, opts->name,
                                           opts->extra_digest != NULL)))
        return rc;
    if (opts->nvrtc_major || opts->nvrtc_minor) {
        major = opts->nvrtc_major;
        minor = opts->nvrtc_minor;
    } else if ((rc = progcache_nvrtc_version(&major, &minor))) {
        return rc;
    }
    h = progcache__sha256_new();
    if (!h)
        return progcache_error_code() ? progcache_error_code() : PROGCACHE_ENOMEM;
    rc = hash_key(h, opts, major, minor);
    if (rc)
        goto done;
    rc = progcache__sha256_final(h, out);
    h = NULL; /* final released it */
done:
    progcache__sha256_free(h);
    return rc;
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

/* ---- digest over files ----------------------------------------------------- */

/* Hash one file as field("path", path) then field("bytes", contents). The
 * length goes in before the bytes, so it is taken from fstat and the read
 * must then produce exactly that many bytes: a file that grows or shrinks
 * while being read fails rather than giving a digest of a mix. */
static int hash_file(progcache__sha256 *h, const char *path, unsigned char *chunk)
{
    struct stat st;
    int rc = PROGCACHE_OK;
    /* Non-blocking, so that a FIFO (refused below) cannot hold the open
     * for ever waiting for a writer; a regular file reads as usual. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                      "cannot open \"%s\" for the digest over files", path);
    if (fstat(fd, &st) != 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot stat \"%s\"", path);
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = progcache__error(PROGCACHE_EIO,
                              "\"%s\" is not a regular file; list the header files themselves",
                              path);
        goto done;
    }
    uint64_t left = (uint64_t)st.st_size;
    if ((rc = field_str(h, "path", path)) || (rc = field_begin(h, "bytes", left)))
        goto done;
    for (;;) {
        /* Once left reaches 0, one more read must see end of file. */
        size_t want = left ? (left < READ_CHUNK ? (size_t)left : READ_CHUNK) : 1;
        ssize_t got = read(fd, chunk, want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = progcache__error_errno(progcache__code_from_errno(errno), errno,
                                        "cannot read \"%s\"", path);
            goto done;
        }
        if (got == 0 && left == 0)
            break;
        if (got == 0 || left == 0) {
            rc = progcache__error(PROGCACHE_EIO,
                                  "\"%s\" changed size while it was being read; try again "
                                  "once nothing writes to it",
                                  path);
            goto done;
        }
        if ((rc = progcache__sha256_update(h, chunk, (size_t)got)))
            goto done;
        left -= (uint64_t)got;
    }
done:
    close(fd);
    return rc;
}

int progcache_digest_files(unsigned char out[PROGCACHE_KEY_SIZE], const char *const *paths,
                           size_t num_paths)
{
    progcache__sha256 *h = NULL;
    unsigned char *chunk = NULL;
    int rc;

    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_digest_files: out is NULL");
    if (num_paths && !paths)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_digest_files: paths is NULL but num_paths is %zu",
                                num_paths);
    for (size_t i = 0; i < num_paths; i++)
        if (!paths[i] || !paths[i][0])
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_digest_files: path %zu of %zu is %s", i,
                                    num_paths, paths[i] ? "empty" : "NULL");
    chunk = progcache__malloc(READ_CHUNK);
    if (!chunk)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory for a %d-byte read buffer",
                                READ_CHUNK);
    h = progcache__sha256_new();
    if (!h) {
        rc = progcache_error_code() ? progcache_error_code() : PROGCACHE_ENOMEM;
        goto done;
    }
    if ((rc = field_str(h, "digest_files", DIGEST_FILES_RECIPE)) ||
        (rc = field_count(h, "file_count", num_paths)))
        goto done;
    for (size_t i = 0; i < num_paths; i++)
        if ((rc = hash_file(h, paths[i], chunk)))
            goto done;
    rc = progcache__sha256_final(h, out);
    h = NULL;
done:
    progcache__sha256_free(h);
    progcache__free(chunk);
    return rc;
}
