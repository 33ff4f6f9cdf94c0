/*
 * progcache/key.h - cache keys for programs compiled by NVRTC.
 *
 * A key is 32 bytes (SHA-256). It is byte-compatible with NVIDIA cuda.core's
 * make_program_cache_key() (key schema 2) for C++ source compiled by NVRTC:
 * the same inputs give the same key, so C and Python programs share one
 * cache. docs/KEY.md writes the recipe out field by field.
 *
 * Every input that can change the compiled binary is in the key: the source,
 * the target, each NVRTC option string in the caller's order, the program
 * name, the name expressions, the NVRTC version and an optional caller
 * digest. Inputs the key cannot see (header files on disk, precompiled
 * headers) must be covered by the caller digest, or the key is refused.
 */
#ifndef PROGCACHE_KEY_H
#define PROGCACHE_KEY_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PROGCACHE_KEY_SIZE 32

/* What NVRTC is asked to produce. */
typedef enum progcache_target {
    PROGCACHE_TARGET_CUBIN = 0,
    PROGCACHE_TARGET_PTX = 1,
    PROGCACHE_TARGET_LTOIR = 2
} progcache_target;

/*
 * progcache_target_name() : "cubin", "ptx" or "ltoir"; NULL for a value that
 * is not a progcache_target.
 */
PROGCACHE_API const char *progcache_target_name(progcache_target target);

/*
 * progcache_target_parse() : the inverse of progcache_target_name().
 * @return PROGCACHE_OK or PROGCACHE_EINVAL (message names the text).
 */
PROGCACHE_API int progcache_target_parse(progcache_target *out, const char *name);

/*
 * progcache_header : a header passed to NVRTC in memory (nvrtcCreateProgram's
 * headers / includeNames): an #include of exactly name reads content
 * instead of a file, wherever the directive is (quoted or angle brackets).
 */
typedef struct progcache_header {
    const char *name;    /* as the #include directive spells it ("tile.h") */
    const char *content; /* the header's text */
    size_t length;       /* bytes of content; 0: strlen(content) */
} progcache_header;

/*
 * progcache_key_nvrtc_options : the inputs of a key. Start from
 * PROGCACHE_KEY_NVRTC_OPTIONS_INIT (or progcache_key_nvrtc_options_init());
 * zero means "default" for every field.
 */
typedef struct progcache_key_nvrtc_options {
    unsigned int version; /* PROGCACHE_KEY_NVRTC_OPTIONS_VERSION */

    /* C++ source text, hashed as bytes (UTF-8 for non-ASCII text). */
    const char *source;
    size_t source_len; /* 0: strlen(source) */

    progcache_target target;

    /* NVRTC option strings, exactly as passed to nvrtcCompileProgram. */
    const char *const *options;
    size_t num_options;

    /* NVRTC program name; NULL means "default_program" (cuda.core's default). */
    const char *name;

    /* Name expressions (nvrtcAddNameExpression); order does not matter. */
    const char *const *name_expressions;
    size_t num_name_expressions;
    /* cuda.core tags each expression by its Python type: "s:" for str (the
     * default here) and "b:" for bytes. Set to 1 to match a Python caller
     * that passed bytes. */
    int name_expressions_are_bytes;

    /* Caller digest over everything else the compile reads (headers on
     * include paths, PCH files, ...). NULL: none. Any length. */
    const unsigned char *extra_digest;
    size_t extra_digest_len;

    /* NVRTC version in the key. 0/0: read from the loaded NVRTC
     * (nvrtcVersion). Set both to derive keys for another NVRTC, offline. */
    int nvrtc_major;
    int nvrtc_minor;

    /* Version 2: headers in memory, passed to NVRTC (names must differ, as
     * NVRTC requires). Their names and contents are in the key: it is
     * cuda.core's key with an extra digest over them (docs/KEY.md, "Headers
     * in memory"), combined with extra_digest when that is given too. The
     * order does not matter. */
    const progcache_header *headers;
    size_t num_headers;
} progcache_key_nvrtc_options;

#define PROGCACHE_KEY_NVRTC_OPTIONS_VERSION 2
#define PROGCACHE_KEY_NVRTC_OPTIONS_INIT \
    PROGCACHE__INIT(progcache_key_nvrtc_options, PROGCACHE_KEY_NVRTC_OPTIONS_VERSION)

/* progcache_key_nvrtc_options_init() : set opts to its defaults. NULL-safe. */
PROGCACHE_API void progcache_key_nvrtc_options_init(progcache_key_nvrtc_options *opts);

/*
 * progcache_key_nvrtc() : derive the 32-byte key of an NVRTC compile, from
 * its inputs alone (no file is read): cuda.core's make_program_cache_key.
 *
 * A source that includes files (an #include the in-memory headers do not
 * answer) is refused unless extra_digest covers them: this function cannot
 * see their bytes. progcache_key_nvrtc_files() reads and covers them.
 *
 * @param out   [out] PROGCACHE_KEY_SIZE bytes.
 * @param opts  the inputs (see progcache_key_nvrtc_options).
 * @return PROGCACHE_OK;
 *         PROGCACHE_EUNSAFEKEY when the inputs name outside files
 *           (-I/--include-path, -include/--pre-include, --pch, --use-pch,
 *           --pch-dir), a program name with a directory part, or the source
 *           (or a header in memory) includes a file, and no extra_digest
 *           covers them; or when an option writes files as a side
 *           effect (--create-pch, --time, --fdevice-time-trace), which a cache
 *           hit would skip. The message names the option and says what to do;
 *         PROGCACHE_EINVAL for a bad argument (NULL source, unknown target,
 *           NULL option string, wrong options version);
 *         PROGCACHE_ENOMEM; PROGCACHE_ECOMPILE when NVRTC's version cannot
 *           be read.
 * Thread-safe.
 */
PROGCACHE_API int progcache_key_nvrtc(unsigned char out[PROGCACHE_KEY_SIZE],
                                      const progcache_key_nvrtc_options *opts);

/*
 * progcache_key_nvrtc_files() : the key of an NVRTC compile that reads
 * header files: progcache_key_nvrtc() with the headers on disk covered.
 *
 * Every #include of the source, of the headers in memory and, recursively,
 * of every header file they reach is found (each directive, whatever #if
 * surrounds it) and resolved as NVRTC 13 resolves it: headers in memory
 * first, then for "quoted" names the including file's directory (for the
 * source, the program name's directory; none with --no-source-include),
 * then each -I/--include-path in order; <angled> names the include paths
 * only; absolute names themselves; --pre-include/-include files the
 * working directory, then the include paths. The key is cuda.core's key
 * with an extra digest over the headers in memory, the path and SHA-256 of
 * every header file found, and the identity of the CUDA toolkit when its
 * headers are included (they are covered by its identity rather than
 * read): docs/KEY.md, "Headers on disk". A program that reads no file and
 * has no header in memory gets progcache_key_nvrtc()'s key, byte for byte.
 *
 * With extra_digest given, nothing is read: the caller's digest is the
 * explicit override, as in cuda.core, and the key is progcache_key_nvrtc's.
 *
 * progcache_compile_or_load(), `progcache key` and `progcache warm` derive
 * keys this way (compile-or-load checks a manifest of the headers kept in
 * the cache instead of reading them again: a stat per header).
 *
 * @return as progcache_key_nvrtc(), and PROGCACHE_EUNSAFEKEY when an
 *         include cannot be resolved or seen (a computed `#include MACRO`,
 *         a file that is missing everywhere NVRTC looks, a FIFO or device
 *         where a header should be): the message names the include and the
 *         file it appears in; PROGCACHE_EIO when a header cannot be read.
 * Thread-safe.
 */
PROGCACHE_API int progcache_key_nvrtc_files(unsigned char out[PROGCACHE_KEY_SIZE],
                                            const progcache_key_nvrtc_options *opts);

/*
 * progcache_key_hex() : write key as 2*len lowercase hex digits and a NUL
 * into out (which must hold 2*len+1 bytes).
 */
PROGCACHE_API void progcache_key_hex(char *out, const unsigned char *key, size_t len);

/*
 * progcache_key_from_hex() : parse exactly PROGCACHE_KEY_SIZE*2 hex digits.
 * @return PROGCACHE_OK or PROGCACHE_EINVAL (message says what is wrong).
 */
PROGCACHE_API int progcache_key_from_hex(unsigned char out[PROGCACHE_KEY_SIZE], const char *hex);

/*
 * progcache_nvrtc_version() : the version of the NVRTC that would compile
 * in this process: the loaded NVRTC's (nvrtcVersion), else
 * $PROGCACHE_NVRTC_VERSION, else what a cache's record said of the NVRTC
 * file a load would open (while that file is unchanged), else NVRTC is
 * loaded and asked (docs/KEY.md, "NVRTC version").
 * @return PROGCACHE_OK, PROGCACHE_EINVAL (PROGCACHE_NVRTC_VERSION is not
 *         <major>.<minor>) or PROGCACHE_ENOCUDA (no NVRTC: the message says
 *         where it was looked for and what to do).
 */
PROGCACHE_API int progcache_nvrtc_version(int *major, int *minor);

/*
 * progcache_nvrtc_library() : the NVRTC library file compiles use in this
 * process: the loaded one, else the file a load would open
 * ($PROGCACHE_NVRTC_LIBRARY, else the toolkit's found at build time),
 * found without loading it. What `progcache stats` shows, and what a
 * Python program using cuda.core compares with the NVRTC it loaded.
 * @param out [out] the file's path as found (the loaded one's as the
 *            loader names it), NUL-terminated (out's memory is reused).
 * @return PROGCACHE_OK; PROGCACHE_ENOTFOUND (no message) when NVRTC is not
 *         loaded and neither names a file (a load would search the
 *         loader's path); PROGCACHE_EINVAL (NULL out); PROGCACHE_ENOMEM.
 * Thread-safe.
 */
PROGCACHE_API int progcache_nvrtc_library(progcache_buf *out);

/*
 * progcache_digest_files() : SHA-256 over a list of files, for
 * progcache_key_nvrtc_options.extra_digest when the compile reads headers
 * from include paths.
 *
 * The digest covers, per file in the given order: its path as given, its
 * length and its bytes, so renaming, reordering or editing any file changes
 * it. List every header the compile can read.
 *
 * @param out    [out] PROGCACHE_KEY_SIZE bytes.
 * @param paths  num_paths file paths.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL, PROGCACHE_EIO (message names the
 *         file that could not be read) or PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_digest_files(unsigned char out[PROGCACHE_KEY_SIZE],
                                         const char *const *paths, size_t num_paths);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_KEY_H */
