/* Command line of persistentProgramCache: the options and defaults of
 * NVIDIA's Python sample, plus --arch, --print-source and --async-store. */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progcache/progcache.h"
#include "sample.h"

#define PROG "persistentProgramCache"

static const char usage_text[] =
    "usage: " PROG " [--device N] [--m M] [--n N] [--k K] [--tile-size {16,32}]\n"
    "       [--epilogue {identity,relu,gelu,sigmoid,tanh,silu}] [--cache-dir DIR]\n"
    "       [--shared-group G] [--clear-cache] [--warmup W] [--iterations I]\n"
    "       [--arch sm_XY] [--kernel {tiled,fast}] [--config BMxBNxBK:TMxTN] [--autotune]\n"
    "       [--templated] [--print-source] [--async-store] [--help]\n"
    "\n"
    "Compile a matmul with bias and epilogue, C = epilogue(A @ B + bias), with NVRTC\n"
    "through a persistent program cache (cuda.core-compatible: the key and the\n"
    "directory layout are those of cuda.core's FileStreamProgramCache), run it, and\n"
    "check it against a host reference. Run it twice: the second run is a cache HIT.\n"
    "\n"
    "options:\n"
    "  --device N            CUDA device ordinal (default: 0)\n"
    "  --m M, --n N, --k K   matrix sizes, positive integers (default: 512 each)\n"
    "  --tile-size {16,32}   tile edge of the tiled kernel, a compile-time constant\n"
    "                        (default: 16)\n"
    "  --epilogue E          identity, relu, gelu (exact, erf form), sigmoid, tanh or\n"
    "                        silu (default: relu)\n"
    "  --cache-dir DIR       cache directory (default: $PROGCACHE_DIR, else cuda.core's\n"
    "                        default, $XDG_CACHE_HOME/cuda-python/program-cache or\n"
    "                        ~/.cache/cuda-python/program-cache, shared with Python\n"
    "                        programs using cuda.core)\n"
    "  --shared-group G      the cache directory is a team's, shared by group G's\n"
    "                        members (as $PROGCACHE_SHARED_GROUP; docs/SHARED.md)\n"
    "  --clear-cache         empty the cache before compiling\n"
    "  --warmup W            untimed launches before timing (default: 5)\n"
    "  --iterations I        timed launches (default: 20)\n"
    "  --arch sm_XY          compile for this architecture instead of the device's;\n"
    "                        without a GPU, runs the cache flow and skips the launch\n"
    "  --kernel K            tiled: one output per thread (default); fast: a\n"
    "                        register-blocked kernel generated for one tile shape\n"
    "  --config C            the fast kernel's tile shape BMxBNxBK:TMxTN (default:\n"
    "                        128x256x8:8x16); implies --kernel fast\n"
    "  --autotune            time the fast kernel's candidate tile shapes and use the\n"
    "                        fastest, remembered in the cache per device, size and\n"
    "                        epilogue; implies --kernel fast\n"
    "  --templated           the tiled kernel as a template, matmul<TILE, Epilogue>,\n"
    "                        instantiated by a name expression (\"matmul<16, Relu>\");\n"
    "                        the kernel is found by its lowered name, kept with the\n"
    "                        cache entry\n"
    "  --print-source        print the generated CUDA source and exit\n"
    "  --async-store         store a freshly compiled program in the background\n"
    "  --help                show this help and exit\n"
    "\n"
    "Exit status: 0 validation passed (or skipped for want of a GPU with --arch),\n"
    "1 validation or CUDA failed, 2 bad usage.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, PROG ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see --help)\n");
    return EXIT_USAGE;
}

/* A whole-string decimal integer in [min, INT_MAX]. */
static int parse_int(int *out, const char *opt, const char *text, int min)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > INT_MAX)
        return usage_error("%s must be a %s integer, got '%s'", opt,
                           min > 0 ? "positive" : "non-negative", text);
    *out = (int)v;
    return -1;
}

/* "sm_" followed by two or three digits and an optional letter suffix
 * (sm_90, sm_100, sm_90a). */
static int valid_arch(const char *s)
{
    if (strncmp(s, "sm_", 3))
        return 0;
    size_t digits = strspn(s + 3, "0123456789");
    if (digits < 2 || digits > 3)
        return 0;
    const char *rest = s + 3 + digits;
    return !*rest || ((*rest == 'a' || *rest == 'f') && !rest[1]);
}

/* Lexically clean an absolute path: drop "." and empty parts, resolve
 * "..", like Python's os.path.abspath. In place. */
static void normalize(char *path)
{
    char *out = path;
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        const char *part = p;
        while (*p && *p != '/')
            p++;
        size_t len = (size_t)(p - part);
        if (len == 0 || (len == 1 && part[0] == '.'))
            continue;
        if (len == 2 && part[0] == '.' && part[1] == '.') {
            while (out > path && *--out != '/')
                ;
            continue;
        }
        *out++ = '/';
        memmove(out, part, len);
        out += len;
    }
    if (out == path)
        *out++ = '/';
    *out = '\0';
}

/* ~ expanded, made absolute, cleaned. NULL (with a message) on failure. */
static char *absolute_dir(const char *given)
{
    const char *home = NULL;
    const char *rest = given;
    if (given[0] == '~' && (given[1] == '/' || given[1] == '\0')) {
        home = getenv("HOME");
        if (!home || !*home) {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home) {
            fprintf(stderr, PROG ": cannot expand '~' in --cache-dir: HOME is not set\n");
            return NULL;
        }
        rest = given + 1;
    }
    char cwd[PATH_MAX];
    const char *base = home;
    if (!home && given[0] != '/') {
        if (!getcwd(cwd, sizeof cwd)) {
            fprintf(stderr, PROG ": cannot make --cache-dir absolute: %s\n", strerror(errno));
            return NULL;
        }
        base = cwd;
    }
    size_t len = (base ? strlen(base) + 1 : 0) + strlen(rest) + 2;
    char *path = malloc(len);
    if (!path)
        return NULL;
    snprintf(path, len, "%s%s%s", base ? base : "", base ? "/" : "", rest);
    normalize(path);
    return path;
}

/* The value of option argv[*i] ("--m 5" or "--m=5"); NULL when missing. */
static const char *value_of(int argc, char **argv, int *i, const char *opt, int *bad)
{
    const char *arg = argv[*i];
    size_t n = strlen(opt);
    if (arg[n] == '=')
        return arg + n + 1;
    if (*i + 1 >= argc) {
        *bad = usage_error("%s needs a value", opt);
        return NULL;
    }
    return argv[++*i];
}

/* Whether argv[i] is opt or opt=value. */
static int is_opt(const char *arg, const char *opt)
{
    size_t n = strlen(opt);
    return !strncmp(arg, opt, n) && (arg[n] == '\0' || arg[n] == '=');
}

int sample_parse_args(sample_args *out, int argc, char **argv)
{
    memset(out, 0, sizeof *out);
    out->m = out->n = out->k = 512;
    out->tile = 16;
    out->epilogue = EPILOGUE_RELU;
    out->warmup = 5;
    out->iterations = 20;
    out->kernel = KERNEL_TILED;
    out->config = fast_default_config;
    const char *cache_dir = NULL; /* --cache-dir, else progcache_default_dir() */
    int kernel_given = 0, tile_given = 0;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int bad = -1, rc = -1;
        const char *v;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(usage_text, stdout);
            return EXIT_PASSED;
        } else if (!strcmp(arg, "--clear-cache")) {
            out->clear_cache = 1;
        } else if (!strcmp(arg, "--print-source")) {
            out->print_source = 1;
        } else if (!strcmp(arg, "--async-store")) {
            out->async_store = 1;
        } else if (!strcmp(arg, "--templated")) {
            out->templated = 1;
        } else if (!strcmp(arg, "--autotune")) {
            out->autotune = 1;
        } else if (is_opt(arg, "--kernel")) {
            if ((v = value_of(argc, argv, &i, "--kernel", &bad))) {
                kernel_given = 1;
                if (!strcmp(v, "tiled"))
                    out->kernel = KERNEL_TILED;
                else if (!strcmp(v, "fast"))
                    out->kernel = KERNEL_FAST;
                else
                    rc = usage_error("--kernel must be tiled or fast, got '%s'", v);
            }
        } else if (is_opt(arg, "--config")) {
            if ((v = value_of(argc, argv, &i, "--config", &bad))) {
                const char *why;
                out->config_given = 1;
                if (fast_config_parse(&out->config, v))
                    rc = usage_error("--config must look like BMxBNxBK:TMxTN (for example "
                                     "128x128x8:8x8), got '%s'",
                                     v);
                else if ((why = fast_config_check(&out->config)))
                    rc = usage_error("--config %s is not supported: %s", v, why);
            }
        } else if (is_opt(arg, "--device")) {
            if ((v = value_of(argc, argv, &i, "--device", &bad)))
                rc = parse_int(&out->device, "--device", v, 0);
        } else if (is_opt(arg, "--m")) {
            if ((v = value_of(argc, argv, &i, "--m", &bad)))
                rc = parse_int(&out->m, "--m", v, 1);
        } else if (is_opt(arg, "--n")) {
            if ((v = value_of(argc, argv, &i, "--n", &bad)))
                rc = parse_int(&out->n, "--n", v, 1);
        } else if (is_opt(arg, "--k")) {
            if ((v = value_of(argc, argv, &i, "--k", &bad)))
                rc = parse_int(&out->k, "--k", v, 1);
        } else if (is_opt(arg, "--warmup")) {
            if ((v = value_of(argc, argv, &i, "--warmup", &bad)))
                rc = parse_int(&out->warmup, "--warmup", v, 0);
        } else if (is_opt(arg, "--iterations")) {
            if ((v = value_of(argc, argv, &i, "--iterations", &bad)))
                rc = parse_int(&out->iterations, "--iterations", v, 1);
        } else if (is_opt(arg, "--tile-size")) {
            if ((v = value_of(argc, argv, &i, "--tile-size", &bad))) {
                tile_given = 1;
                if (!strcmp(v, "16") || !strcmp(v, "32"))
                    out->tile = atoi(v);
                else
                    rc = usage_error("--tile-size must be 16 or 32, got '%s'", v);
            }
        } else if (is_opt(arg, "--epilogue")) {
            if ((v = value_of(argc, argv, &i, "--epilogue", &bad))) {
                int e = epilogue_parse(v);
                if (e >= 0)
                    out->epilogue = (epilogue_kind)e;
                else
                    rc = usage_error("--epilogue must be one of identity, relu, gelu, sigmoid, "
                                     "tanh, silu, got '%s'",
                                     v);
            }
        } else if (is_opt(arg, "--cache-dir")) {
            if ((v = value_of(argc, argv, &i, "--cache-dir", &bad))) {
                if (*v)
                    cache_dir = v;
                else
                    rc = usage_error("--cache-dir must not be empty");
            }
        } else if (is_opt(arg, "--shared-group")) {
            /* A team's cache: the library takes the group from the
             * user's environment (never from a file in the shared
             * directory); the option sets it for this run. */
            if ((v = value_of(argc, argv, &i, "--shared-group", &bad))) {
                if (!*v)
                    rc = usage_error("--shared-group must not be empty");
                else if (setenv("PROGCACHE_SHARED_GROUP", v, 1) != 0)
                    rc = usage_error("cannot set PROGCACHE_SHARED_GROUP: %s", strerror(errno));
            }
        } else if (is_opt(arg, "--arch")) {
            if ((v = value_of(argc, argv, &i, "--arch", &bad))) {
                if (valid_arch(v))
                    out->arch = v;
                else
                    rc = usage_error("--arch must look like sm_90 (sm_ and the compute "
                                     "capability digits), got '%s'",
                                     v);
            }
        } else {
            rc = usage_error("unrecognized argument '%s'", arg);
        }
        if (bad >= 0)
            return bad;
        if (rc >= 0)
            return rc;
    }
    /* --config and --autotune choose the fast kernel's tile shape. */
    if ((out->config_given || out->autotune) && !kernel_given)
        out->kernel = KERNEL_FAST;
    if (out->kernel == KERNEL_TILED && (out->config_given || out->autotune))
        return usage_error("%s applies to --kernel fast, not tiled",
                           out->autotune ? "--autotune" : "--config");
    if (out->kernel == KERNEL_FAST && tile_given)
        return usage_error("--tile-size applies to --kernel tiled; the fast kernel's tile shape "
                           "is --config or --autotune");
    if (out->templated && out->kernel == KERNEL_FAST)
        return usage_error("--templated applies to the tiled kernel, not --kernel fast");
    if (out->autotune && out->config_given)
        return usage_error("--autotune and --config both choose the tile shape: give one");
    progcache_buf dflt = PROGCACHE_BUF_INIT;
    if (!cache_dir) {
        /* The library's own default: $PROGCACHE_DIR, then cuda.core's. */
        if (progcache_default_dir(&dflt) != PROGCACHE_OK) {
            fprintf(stderr, PROG ": no cache directory: %s; or give --cache-dir DIR\n",
                    progcache_error_last());
            return EXIT_USAGE;
        }
        cache_dir = (const char *)dflt.data;
    }
    out->cache_dir = absolute_dir(cache_dir);
    progcache_buf_free(&dflt);
    if (!out->cache_dir)
        return EXIT_USAGE;
    return -1;
}

void sample_args_free(sample_args *args)
{
    if (args) {
        free(args->cache_dir);
        args->cache_dir = NULL;
    }
}
