/* progcache key: print the cache key of an NVRTC compile, the same key
 * cuda.core's make_program_cache_key() derives. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const char usage_text[] =
    "usage: progcache key [options] SOURCE_FILE [-- NVRTC_OPTION...]\n"
    "\n"
    "Print the cache key (64 hex digits) of compiling SOURCE_FILE with NVRTC, as\n"
    "cuda.core's make_program_cache_key() derives it. SOURCE_FILE '-' reads stdin.\n"
    "Everything after '--' is passed on as NVRTC option strings, in order, exactly\n"
    "as the program gives them to nvrtcCompileProgram (for cuda.core programs:\n"
    "the strings ProgramOptions.as_bytes(\"nvrtc\", target) returns).\n"
    "\n"
    "options:\n"
    "  --target cubin|ptx|ltoir   what NVRTC produces (default: cubin)\n"
    "  --name NAME                NVRTC program name (default: default_program)\n"
    "  --name-expression EXPR     a name expression; repeat for several\n"
    "  --name-expressions-bytes   tag name expressions as Python bytes (b:), not str\n"
    "  --header NAME=FILE         pass FILE to NVRTC in memory as the header NAME (an\n"
    "                             #include of exactly NAME reads it); repeat for several\n"
    "  --extra-digest HEX         caller digest over the headers the compile reads:\n"
    "                             then no header file is read (the override)\n"
    "  --digest-file FILE         digest FILE into --extra-digest's place (repeat for\n"
    "                             each, in a fixed order); not with --extra-digest\n"
    "  --nvrtc-version MAJOR.MINOR  derive the key for that NVRTC instead of the\n"
    "                             loaded one (offline use)\n"
    "  --max-artifact-size SIZE   the largest SOURCE_FILE read (default 1G; K, M, G)\n"
    "  --help                     this text\n"
    "\n"
    "Header files the source includes (from the working directory, -I paths,\n"
    "--pre-include, absolute paths) are found, read and covered by the key, as\n"
    "progcache_compile_or_load covers them; an include that cannot be resolved (a\n"
    "computed #include MACRO, a missing file) is refused unless --extra-digest or\n"
    "--digest-file is given.\n"
    "\n"
    "Exit status: 0 key printed; 1 a file could not be read (or is larger than the\n"
    "bound) or NVRTC could not be asked its version; 2 bad usage, or inputs the\n"
    "key cannot describe safely (options that read or write outside files).\n";

#define CMD "key"

typedef struct key_args {
    progcache_key_nvrtc_options opts;
    uint64_t max_size;
    const char *source_path;
    const char *extra_digest_hex;
    const char **names;
    size_t num_names;
    const char **digest_files;
    size_t num_digest_files;
    tool_headers memory;
} key_args;

static int parse_version(const char *text, int *major, int *minor)
{
    char *end;
    errno = 0;
    long ma = strtol(text, &end, 10);
    if (end == text || *end != '.' || errno || ma <= 0 || ma > 1000)
        return -1;
    const char *rest = end + 1;
    long mi = strtol(rest, &end, 10);
    if (end == rest || *end || errno || mi < 0 || mi > 1000 || *rest == '-' || *rest == '+')
        return -1;
    *major = (int)ma;
    *minor = (int)mi;
    return 0;
}

/* "--flag VALUE" or "--flag=VALUE". Returns 1 and sets *value when argv[*i]
 * is flag; 0 when it is not; -1 (usage error printed) when VALUE is missing. */
static int flag_value(int argc, char **argv, int *i, const char *flag, const char **value)
{
    size_t n = strlen(flag);
    const char *arg = argv[*i];
    if (strncmp(arg, flag, n))
        return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return 1;
    }
    if (arg[n])
        return 0;
    if (*i + 1 >= argc) {
        tool_usage_error(CMD, "%s needs a value (run 'progcache key --help')", flag);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

static int push(const char ***list, size_t *n, const char *item)
{
    const char **p = realloc(*list, (*n + 1) * sizeof *p);
    if (!p)
        return -1;
    p[(*n)++] = item;
    *list = p;
    return 0;
}

/* Fill args from argv. Returns -1 to continue, or an exit code. */
static int parse_args(key_args *a, int argc, char **argv)
{
    const char *v;
    int r;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--")) {
            a->opts.options = (const char *const *)(argv + i + 1);
            a->opts.num_options = (size_t)(argc - i - 1);
            break;
        }
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(usage_text, stdout);
            return EXIT_OK;
        }
        if (!strcmp(arg, "--name-expressions-bytes")) {
            a->opts.name_expressions_are_bytes = 1;
        } else if ((r = flag_value(argc, argv, &i, "--target", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            if (progcache_target_parse(&a->opts.target, v))
                return tool_usage_error(CMD, "--target: %s", progcache_error_last());
        } else if ((r = flag_value(argc, argv, &i, "--name-expression", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            if (push(&a->names, &a->num_names, v))
                return tool_usage_error(CMD, "out of memory");
        } else if ((r = flag_value(argc, argv, &i, "--name", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            a->opts.name = v;
        } else if ((r = flag_value(argc, argv, &i, "--extra-digest", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            a->extra_digest_hex = v;
        } else if ((r = flag_value(argc, argv, &i, "--header", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            int code = tool_headers_add(&a->memory, CMD, "--header", v, NULL, a->max_size);
            if (code)
                return code;
        } else if ((r = flag_value(argc, argv, &i, "--digest-file", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            if (push(&a->digest_files, &a->num_digest_files, v))
                return tool_usage_error(CMD, "out of memory");
        } else if ((r = tool_max_size_arg(CMD, argc, argv, &i, &a->max_size))) {
            if (r < 0)
                return EXIT_USAGE;
        } else if ((r = flag_value(argc, argv, &i, "--nvrtc-version", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            if (parse_version(v, &a->opts.nvrtc_major, &a->opts.nvrtc_minor))
                return tool_usage_error(CMD,
                                        "--nvrtc-version \"%s\": give MAJOR.MINOR, such as 13.0",
                                        v);
        } else if (arg[0] == '-' && arg[1]) {
            return tool_usage_error(CMD,
                                    "unknown option \"%s\" (NVRTC options go after '--'; run "
                                    "'progcache key --help')",
                                    arg);
        } else if (a->source_path) {
            return tool_usage_error(CMD,
                                    "more than one source file (\"%s\" and \"%s\"); NVRTC "
                                    "options go after '--'",
                                    a->source_path, arg);
        } else {
            a->source_path = arg;
        }
    }
    if (!a->source_path)
        return tool_usage_error(CMD, "no SOURCE_FILE given (run 'progcache key --help')");
    if (a->extra_digest_hex && a->num_digest_files)
        return tool_usage_error(CMD, "--extra-digest and --digest-file cannot be combined: "
                                     "give the digest, or the files to digest, not both");
    return -1;
}

int cmd_key(int argc, char **argv)
{
    key_args a;
    unsigned char key[PROGCACHE_KEY_SIZE], header_digest[PROGCACHE_KEY_SIZE];
    char hex[2 * PROGCACHE_KEY_SIZE + 1];
    unsigned char *source = NULL, *digest = NULL;
    size_t source_len = 0, digest_len = 0;
    int rc, code;

    memset(&a, 0, sizeof a);
    progcache_key_nvrtc_options_init(&a.opts);
    a.max_size = PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    code = parse_args(&a, argc, argv);
    if (code >= 0)
        goto done;

    if (a.extra_digest_hex) {
        /* An empty digest is a digest (as cuda.core's b""). */
        digest = *a.extra_digest_hex ? tool_decode_hex(a.extra_digest_hex, &digest_len)
                                      : calloc(1, 1);
        if (!digest) {
            code = tool_usage_error(CMD,
                                    "--extra-digest \"%s\" is not hex: give an even number "
                                    "of hex digits",
                                    a.extra_digest_hex);
            goto done;
        }
        a.opts.extra_digest = digest;
        a.opts.extra_digest_len = digest_len;
    } else if (a.num_digest_files) {
        if ((rc = progcache_digest_files(header_digest, a.digest_files, a.num_digest_files))) {
            code = tool_lib_error(CMD, rc == PROGCACHE_EINVAL ? EXIT_USAGE : EXIT_PROBLEMS,
                                  "--digest-file");
            goto done;
        }
        a.opts.extra_digest = header_digest;
        a.opts.extra_digest_len = sizeof header_digest;
    }

    if ((code = tool_read_input(CMD, "source file", a.source_path, TOOL_INPUT_STDIN, a.max_size,
                                &source, &source_len)))
        goto done;
    a.opts.source = (const char *)source;
    a.opts.source_len = source_len; /* 0 only for an empty file, where strlen agrees */
    a.opts.name_expressions = a.names;
    a.opts.num_name_expressions = a.num_names;
    a.opts.headers = a.memory.items;
    a.opts.num_headers = a.memory.len;

    /* The library's one derivation, headers on disk included: the key
     * progcache_compile_or_load and `progcache warm` use. */
    rc = progcache_key_nvrtc_files(key, &a.opts);
    if (rc) {
        fprintf(stderr, "progcache key: %s\n", progcache_error_last());
        code = rc == PROGCACHE_EUNSAFEKEY || rc == PROGCACHE_EINVAL ? EXIT_USAGE : EXIT_PROBLEMS;
        goto done;
    }
    progcache_key_hex(hex, key, sizeof key);
    printf("%s\n", hex); /* a failed write is reported by main() */
    code = EXIT_OK;
done:
    free(source);
    free(digest);
    free(a.names);
    free(a.digest_files);
    tool_headers_free(&a.memory);
    return code;
}
