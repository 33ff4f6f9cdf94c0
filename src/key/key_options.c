/* Which NVRTC options a cache key cannot describe, mirroring cuda.core's
 * _EXTERNAL_CONTENT_OPTIONS and _SIDE_EFFECT_OPTIONS for the NVRTC path.
 *
 * A C caller passes raw option strings rather than ProgramOptions fields, so
 * every spelling NVRTC accepts for those fields must be caught: the long and
 * the short name, with the value after '=' or in the next string. Names are
 * matched exactly up to '=' (or the end), never as prefixes, so options that
 * merely start alike ("--pch-verbose=true", "--instantiate-templates-in-pch",
 * "-time-passes") stay cacheable. -I is the one true prefix option: NVRTC
 * reads "-I<dir>" as an include path, so anything starting with "-I" is one. */
#include "key/key_options.h"

#include <string.h>

#include "error.h"

static const struct {
    const char *name;
    progcache__option_kind kind;
    const char *what;
    int headers; /* reads headers the include scanner finds (key/include_resolve.c) */
} known[] = {
    /* Read files whose bytes are not in the key: need an extra digest, or
     * (headers) the include scanner. */
    {"--include-path", PROGCACHE__OPTION_READS_FILES, "headers from an include path", 1},
    {"--pre-include", PROGCACHE__OPTION_READS_FILES, "a pre-included header", 1},
    {"-include", PROGCACHE__OPTION_READS_FILES, "a pre-included header", 1},
    {"--pch", PROGCACHE__OPTION_READS_FILES, "automatic precompiled headers", 0},
    {"-pch", PROGCACHE__OPTION_READS_FILES, "automatic precompiled headers", 0},
    {"--use-pch", PROGCACHE__OPTION_READS_FILES, "a precompiled header file", 0},
    {"-use-pch", PROGCACHE__OPTION_READS_FILES, "a precompiled header file", 0},
    {"--pch-dir", PROGCACHE__OPTION_READS_FILES, "precompiled headers from a directory", 0},
    {"-pch-dir", PROGCACHE__OPTION_READS_FILES, "precompiled headers from a directory", 0},
    /* Write files: a cache hit skips the compile, so the file would never
     * appear. No digest can fix that. */
    {"--create-pch", PROGCACHE__OPTION_SIDE_EFFECT, "writes a precompiled header", 0},
    {"-create-pch", PROGCACHE__OPTION_SIDE_EFFECT, "writes a precompiled header", 0},
    {"--time", PROGCACHE__OPTION_SIDE_EFFECT, "writes a compile-time report", 0},
    {"-time", PROGCACHE__OPTION_SIDE_EFFECT, "writes a compile-time report", 0},
    {"--fdevice-time-trace", PROGCACHE__OPTION_SIDE_EFFECT, "writes a device time trace", 0},
    {"-fdevice-time-trace", PROGCACHE__OPTION_SIDE_EFFECT, "writes a device time trace", 0},
};

/* classify, also saying whether the option reads headers the include
 * scanner covers. */
static progcache__option_kind classify(const char *option, const char **what, int *headers)
{
    *headers = 0;
    if (option[0] == '-' && option[1] == 'I') {
        if (what)
            *what = "headers from an include path";
        *headers = 1;
        return PROGCACHE__OPTION_READS_FILES;
    }
    const char *eq = strchr(option, '=');
    size_t len = eq ? (size_t)(eq - option) : strlen(option);
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strlen(known[i].name) == len && memcmp(known[i].name, option, len) == 0) {
            if (what)
                *what = known[i].what;
            *headers = known[i].headers;
            return known[i].kind;
        }
    }
    return PROGCACHE__OPTION_PLAIN;
}

progcache__option_kind progcache__option_classify(const char *option, const char **what)
{
    int headers;
    return classify(option, what, &headers);
}

int progcache__option_reads_headers(const char *option)
{
    int headers;
    return classify(option, NULL, &headers) == PROGCACHE__OPTION_READS_FILES && headers;
}

int progcache__key_check_options_scanned(const char *const *options, size_t num_options)
{
    const char *what = NULL;
    int rc = progcache__key_check_options(options, num_options, NULL, 1);
    if (rc)
        return rc;
    /* --use-bundled-headers=<dir> is none of these: NVRTC's own headers,
     * which the include scanner takes from that directory as NVRTC does
     * (headers/include_resolve.c), keyed as cuda.core keys them. */
    for (size_t i = 0; i < num_options; i++) {
        int headers;
        if (classify(options[i], &what, &headers) == PROGCACHE__OPTION_READS_FILES && !headers)
            return progcache__error(PROGCACHE_EUNSAFEKEY,
                                    "NVRTC option \"%s\" makes NVRTC read %s, which the cache "
                                    "key cannot cover by scanning includes: pass an extra digest "
                                    "over the files it reads (progcache_digest_files / "
                                    "--extra-digest or --digest-file), or remove the option",
                                    options[i], what);
    }
    return PROGCACHE_OK;
}

int progcache__key_check_options(const char *const *options, size_t num_options,
                                 const char *name, int have_digest)
{
    const char *what = NULL;
    /* Side effects first, like cuda.core: a digest does not help them, so
     * that is the more useful message when both kinds are present. Each
     * string is checked on its own, including a value given as a separate
     * string: a value that looks like a refused option is refused too,
     * which errs on the safe side. */
    for (size_t i = 0; i < num_options; i++) {
        if (progcache__option_classify(options[i], &what) == PROGCACHE__OPTION_SIDE_EFFECT)
            return progcache__error(PROGCACHE_EUNSAFEKEY,
                                    "NVRTC option \"%s\" %s as a side effect of compiling, "
                                    "which a cache hit would skip: remove the option, or "
                                    "compile without the cache",
                                    options[i], what);
    }
    if (have_digest)
        return PROGCACHE_OK;
    for (size_t i = 0; i < num_options; i++) {
        if (progcache__option_classify(options[i], &what) == PROGCACHE__OPTION_READS_FILES)
            return progcache__error(PROGCACHE_EUNSAFEKEY,
                                    "NVRTC option \"%s\" makes NVRTC read %s, whose bytes the "
                                    "cache key cannot see: pass an extra digest over the "
                                    "files it reads (progcache_digest_files / --extra-digest "
                                    "or --digest-file), or derive the key with "
                                    "progcache_key_nvrtc_files, which reads the headers, or "
                                    "remove the option",
                                    options[i], what);
    }
    /* NVRTC resolves quoted #include directives relative to the directory
     * part of the program name. */
    if (name && (strchr(name, '/') || strchr(name, '\\')))
        return progcache__error(PROGCACHE_EUNSAFEKEY,
                                "program name \"%s\" has a directory part, and NVRTC resolves "
                                "quoted #include directives relative to it, so the cache key "
                                "cannot see those headers: pass an extra digest over them "
                                "(progcache_digest_files / --extra-digest or --digest-file), "
                                "derive the key with progcache_key_nvrtc_files, or use a name "
                                "without '/' or '\\'",
                                name);
    return PROGCACHE_OK;
}
