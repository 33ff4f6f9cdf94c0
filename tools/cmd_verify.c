/* progcache verify: check the structure of every entry; --fix removes the
 * bad ones. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "verify"

static const char usage_text[] =
    "usage: progcache verify [--dir DIR] [--fix] [--json]\n"
    "\n"
    "Check every entry of a cache directory: a CUBIN must be a whole CUDA ELF file\n"
    "(headers, tables and sections inside the file), PTX whole text with a .version\n"
    "directive and balanced braces, LTO-IR and fatbin consistent headers; an entry\n"
    "progcache stored must still match the SHA-256 recorded with it. Anything else\n"
    "(a truncated or damaged file, a file of no known kind) is a problem. Each\n"
    "problem is printed as\n"
    "  bad NAME KIND: REASON [removed]\n"
    "followed by a summary line.\n"
    "\n"
    "options:\n"
    "  --dir DIR   the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --fix       remove bad entries (only if still the file that was checked; other\n"
    "              processes may use the cache meanwhile)\n"
    "  --json      print one JSON object instead of text\n"
    "  --help      this text\n"
    "\n"
    "Exit status: 0 every entry is good; 1 problems were found (even if --fix\n"
    "removed them) or the directory cannot be read; 2 bad usage.\n";

typedef struct verify_out {
    int json;
    size_t problems;
} verify_out;

static int report(void *ctx, const progcache_entry *e)
{
    verify_out *o = ctx;
    if (!e->error)
        return 0;
    const char *kind =
        progcache_kind_name(e->artifact ? e->artifact->kind : PROGCACHE_KIND_UNKNOWN);
    if (o->json) {
        printf("%s\n    {\"name\": ", o->problems ? "," : "");
        tool_json_string(stdout, e->name);
        printf(", \"kind\": ");
        tool_json_string(stdout, kind);
        printf(", \"reason\": ");
        tool_json_string(stdout, e->error);
        printf(", \"removed\": %s}", e->removed ? "true" : "false");
    } else {
        printf("bad %s %s: %s%s\n", e->name, kind, e->error, e->removed ? " [removed]" : "");
    }
    o->problems++;
    return 0;
}

int cmd_verify(int argc, char **argv)
{
    const char *dir_arg = NULL;
    int json = 0, fix = 0;
    for (int i = 1; i < argc; i++) {
        int c = tool_common_arg(CMD, usage_text, argc, argv, &i, &dir_arg, &json);
        if (c == TOOL_ARG_TAKEN)
            continue;
        if (c != TOOL_ARG_OTHER)
            return c;
        if (!strcmp(argv[i], "--fix")) {
            fix = 1;
        } else {
            return tool_unexpected_arg(CMD, argv[i]);
        }
    }
    char *dir = NULL;
    progcache_store *store = NULL;
    int code = tool_open_dir_store(CMD, dir_arg, fix ? TOOL_WRITE : TOOL_READ, 0, &dir, &store);
    if (code)
        goto done;
    verify_out o = {json, 0};
    progcache_verify_options opts = PROGCACHE_VERIFY_OPTIONS_INIT;
    opts.flags = fix ? PROGCACHE_VERIFY_FIX : 0;
    opts.on_entry = report;
    opts.ctx = &o;
    progcache_verify_result res = PROGCACHE_VERIFY_RESULT_INIT;
    if (json) {
        tool_json_begin(stdout);
        printf(", \"dir\": ");
        tool_json_string(stdout, dir);
        printf(", \"problems\": [");
    }
    int rc = progcache_file_verify(&res, store, &opts);
    if (json)
        printf("%s], \"checked\": %llu, \"bad\": %llu, \"removed\": %llu}\n",
               o.problems ? "\n  " : "", (unsigned long long)res.checked,
               (unsigned long long)res.bad, (unsigned long long)res.removed);
    if (rc) {
        code = tool_lib_error(CMD, EXIT_PROBLEMS, "cannot check the cache");
        goto done;
    }
    if (!json) {
        printf("checked %llu entries in %s: %llu bad", (unsigned long long)res.checked, dir,
               (unsigned long long)res.bad);
        if (fix)
            printf(", %llu removed", (unsigned long long)res.removed);
        else if (res.bad)
            printf(" (run with --fix to remove them)");
        putchar('\n');
    }
    code = res.bad ? EXIT_PROBLEMS : EXIT_OK;
done:
    progcache_store_free(store);
    free(dir);
    return code;
}
