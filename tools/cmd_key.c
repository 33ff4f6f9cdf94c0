/* progcache key: print the cache key of an NVRTC compile, the same key
 * cuda.core's make_program_cache_key() derives. progcache explain: the
 * same inputs, and why their compile would miss (progcache_explain). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "progcache/cuda.h" /* progcache_explain */
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
    "  -t, --target cubin|ptx|ltoir  what NVRTC produces (default: cubin)\n"
    "  -n, --name NAME            NVRTC program name (default: default_program)\n"
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
    "  --max-artifact-size SIZE   the largest SOURCE_FILE read (default: the setting\n"
    "                             max_artifact_size of DIR, else of the environment,\n"
    "                             1G)\n"
    "  -d, --dir DIR              a cache directory whose settings apply, and whose\n"
    "                             record of its NVRTC gives the version without\n"
    "                             --nvrtc-version (default: the default directory's,\n"
    "                             when it exists; no entry is read)\n"
    "  -h, --help                 this text\n"
    "\n"
    "Header files the source includes (from the working directory, -I paths,\n"
    "--pre-include, absolute paths) are found, read and covered by the key, as\n"
    "progcache_compile_or_load covers them; an include that cannot be resolved (a\n"
    "computed #include MACRO, a missing file) is refused unless --extra-digest or\n"
    "--digest-file is given.\n"
    "\n"
    "Exit status: 0 key printed; 2 bad usage, or inputs the key cannot describe\n"
    "safely (options that read or write outside files, an include that cannot be\n"
    "resolved); 3 a file could not be read (or is larger than the bound) or NVRTC\n"
    "could not be asked its version.\n";

static const char explain_usage_text[] =
    "usage: progcache explain [options] SOURCE_FILE [-- NVRTC_OPTION...]\n"
    "\n"
    "Say whether compiling SOURCE_FILE with these options hits the cache, and when\n"
    "it misses, which inputs differ from the nearest entries of the same program\n"
    "stored by progcache (\"option -DTILE=32 was -DTILE=16; NVRTC 13.0 was 12.9\"),\n"
    "or that nothing similar is recorded. The options are `progcache key`'s (run\n"
    "'progcache key --help'); the cache directory is -d DIR, else the default one.\n"
    "Values are shown escaped: %20 a space, %25 a '%', %XX any byte outside\n"
    "printable ASCII.\n"
    "\n"
    "Exit status: 0 a HIT; 1 a MISS (explained); 2 bad usage; 3 a file could not\n"
    "be read, no cache directory, or NVRTC could not be asked its version.\n";


typedef struct key_args {
    const char *cmd; /* "key" or "explain" */
    progcache_key_nvrtc_options opts;
    uint64_t max_size;
    const char *source_path;
    const char *extra_digest_hex;
    const char **names;
    size_t num_names;
    const char **digest_files;
    size_t num_digest_files;
    const char **header_specs; /* --header NAME=FILE, read once the bound is known */
    size_t num_header_specs;
    tool_headers memory;
    const char *dir; /* for the setting max_artifact_size */
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
enum {
    OPT_EXPR = 256,
    OPT_EXPR_BYTES,
    OPT_DIGEST,
    OPT_HEADER,
    OPT_DIGEST_FILE,
    OPT_NVRTC_VERSION
};
static int parse_args(key_args *a, int argc, char **argv)
{
    static const tool_option options[] = {
        {"target", 't', 1},          {"name", 'n', 1},
        {"name-expression", OPT_EXPR, 1}, {"name-expressions-bytes", OPT_EXPR_BYTES, 0},
        {"extra-digest", OPT_DIGEST, 1}, {"header", OPT_HEADER, 1},
        {"digest-file", OPT_DIGEST_FILE, 1},
        {"nvrtc-version", OPT_NVRTC_VERSION, 1}, TOOL_MAX_ARTIFACT_SIZE_OPTION,
        {NULL, 0, 0}};
    tool_parser p;
    const char *CMD = a->cmd;
    tool_parser_init(&p, CMD, strcmp(CMD, "key") ? explain_usage_text : usage_text, argc, argv,
                     options, TOOL_REST);
    p.hint = "NVRTC options go after '--'";
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        const char *v = p.arg;
        switch (c) {
        case TOOL_EXIT: return p.code;
        case OPT_EXPR_BYTES: a->opts.name_expressions_are_bytes = 1; break;
        case 't':
            if (progcache_target_parse(&a->opts.target, v))
                return tool_usage_error(CMD, "--target: %s", progcache_error_last());
            break;
        case OPT_EXPR:
            if (push(&a->names, &a->num_names, v))
                return tool_usage_error(CMD, "out of memory");
            break;
        case 'n': a->opts.name = v; break;
        case OPT_DIGEST: a->extra_digest_hex = v; break;
        case OPT_HEADER:
            if (push(&a->header_specs, &a->num_header_specs, v))
                return tool_usage_error(CMD, "out of memory");
            break;
        case OPT_DIGEST_FILE:
            if (push(&a->digest_files, &a->num_digest_files, v))
                return tool_usage_error(CMD, "out of memory");
            break;
        case TOOL_OPT_MAX_ARTIFACT_SIZE:
            if (tool_max_size_value(CMD, v, &a->max_size))
                return EXIT_USAGE;
            break;
        case OPT_NVRTC_VERSION:
            if (parse_version(v, &a->opts.nvrtc_major, &a->opts.nvrtc_minor))
                return tool_usage_error(CMD,
                                        "--nvrtc-version \"%s\": give MAJOR.MINOR, such as 13.0",
                                        v);
            break;
        default:
            if (a->source_path)
                return tool_usage_error(CMD,
                                        "more than one source file (\"%s\" and \"%s\"); NVRTC "
                                        "options go after '--'",
                                        a->source_path, v);
            a->source_path = v;
        }
    }
    a->opts.options = (const char *const *)p.rest;
    a->opts.num_options = (size_t)p.nrest;
    a->dir = p.dir;
    if (!a->source_path)
        return tool_usage_error(CMD, "no SOURCE_FILE given (run 'progcache %s --help')", CMD);
    if (a->extra_digest_hex && a->num_digest_files)
        return tool_usage_error(CMD, "--extra-digest and --digest-file cannot be combined: "
                                     "give the digest, or the files to digest, not both");
    return -1;
}

/* Without --nvrtc-version: the version the cache directory's compiles
 * would key with (progcache_nvrtc_version_cache), so that on a node
 * without NVRTC an imported bundle's record answers, as it does for
 * compile-or-load, instead of --nvrtc-version being asked for. The
 * directory: -d DIR, else the default one; one that does not exist or is
 * not a cache leaves the version to progcache_key_nvrtc_files (which says
 * what is missing). Nothing is created: the cache is opened read-only. */
static int version_from_record(key_args *a)
{
    progcache_buf dir = PROGCACHE_BUF_INIT;
    progcache *cache = NULL;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_READONLY | PROGCACHE_NO_REMOTE; /* only the record is read */
    struct stat st;
    const char *path = a->dir;
    if (!path && progcache_default_dir(&dir) == PROGCACHE_OK)
        path = (const char *)dir.data; /* NUL-terminated, as the call documents */
    if (!path || stat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
        progcache_open(&cache, path, &o) != PROGCACHE_OK) {
        progcache_buf_free(&dir);
        progcache_error_clear();
        return EXIT_OK;
    }
    int rc = progcache_nvrtc_version_cache(&a->opts.nvrtc_major, &a->opts.nvrtc_minor, cache);
    progcache_close(cache);
    progcache_buf_free(&dir);
    if (rc == PROGCACHE_EINVAL)
        return tool_lib_error(a->cmd, EXIT_USAGE, "the NVRTC version");
    if (rc) /* said, in the same words, by the derivation */
        a->opts.nvrtc_major = a->opts.nvrtc_minor = 0;
    return EXIT_OK;
}

static int explain(key_args *a);

static int run(const char *CMD, int argc, char **argv)
{
    key_args a;
    unsigned char key[PROGCACHE_KEY_SIZE], header_digest[PROGCACHE_KEY_SIZE];
    char hex[2 * PROGCACHE_KEY_SIZE + 1];
    unsigned char *source = NULL, *digest = NULL;
    size_t source_len = 0, digest_len = 0;
    int rc, code;

    memset(&a, 0, sizeof a);
    a.cmd = CMD;
    progcache_key_nvrtc_options_init(&a.opts);
    code = parse_args(&a, argc, argv);
    if (code >= 0)
        goto done;
    /* key needs no cache: without -d, the environment and the default
     * bound, never the default directory (which may be anything). */
    if ((code = tool_input_bound(CMD, a.dir ? a.dir : "", a.max_size, &a.max_size)))
        goto done;
    for (size_t i = 0; i < a.num_header_specs; i++)
        if ((code = tool_headers_add(&a.memory, CMD, "--header", a.header_specs[i], NULL,
                                     a.max_size)))
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
            code = tool_lib_error(CMD, rc == PROGCACHE_EINVAL ? EXIT_USAGE : EXIT_FAILED,
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
    if (strcmp(CMD, "key")) {
        code = explain(&a);
        goto done;
    }
    if (!a.opts.nvrtc_major && (code = version_from_record(&a)))
        goto done;

    /* The library's one derivation, headers on disk included: the key
     * progcache_compile_or_load and `progcache warm` use. */
    rc = progcache_key_nvrtc_files(key, &a.opts);
    if (rc) {
        fprintf(stderr, "progcache key: %s\n", progcache_error_last());
        code = rc == PROGCACHE_EUNSAFEKEY || rc == PROGCACHE_EINVAL ? EXIT_USAGE : EXIT_FAILED;
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
    free(a.header_specs);
    tool_headers_free(&a.memory);
    return code;
}

/* progcache explain: the cache is opened as a program's would be (its NVRTC
 * record gives the version, its remote tier is asked for a HIT), but never
 * made: a directory that does not exist has nothing to explain with. */
static int explain(key_args *a)
{
    char *dir = NULL;
    progcache *cache = NULL;
    progcache_buf text = PROGCACHE_BUF_INIT;
    struct stat st;
    int code = tool_resolve_dir(a->cmd, a->dir, &dir);
    if (code)
        return code;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "progcache explain: %s: no cache directory there (nothing was ever "
                        "stored, so every compile misses)\n", dir);
        free(dir);
        return EXIT_FAILED;
    }
    if ((code = tool_open_cache(a->cmd, dir, TOOL_READ, a->max_size, &cache)))
        goto done;
    int rc = progcache_explain(&text, cache, &a->opts);
    if (rc) {
        fprintf(stderr, "progcache explain: %s\n", progcache_error_last());
        code = rc == PROGCACHE_EUNSAFEKEY || rc == PROGCACHE_EINVAL ? EXIT_USAGE : EXIT_FAILED;
        goto done;
    }
    fwrite(text.data, 1, text.size, stdout);
    code = text.size >= 4 && !memcmp(text.data, "HIT ", 4) ? EXIT_OK : EXIT_NO;
done:
    progcache_buf_free(&text);
    progcache_close(cache);
    free(dir);
    return code;
}

int cmd_key(int argc, char **argv)
{
    return run("key", argc, argv);
}

int cmd_explain(int argc, char **argv)
{
    return run("explain", argc, argv);
}
