/* progcache export: write a cache directory to a tar archive. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "export"

static const char usage_text[] =
    "usage: progcache export [--dir DIR] ARCHIVE\n"
    "\n"
    "Write every entry of a cache directory to ARCHIVE, a POSIX tar (ustar) file\n"
    "holding entries/<2 hex>/<62 hex>, the cache directory's own layout: import it\n"
    "on another machine with 'progcache import', or unpack it with tar into an\n"
    "empty cache directory (for example: warm a cache on a build server without a\n"
    "GPU, then ship it to the cluster). The archive is written under a temporary\n"
    "name and renamed into place when complete; an existing ARCHIVE is replaced.\n"
    "\n"
    "options:\n"
    "  --dir DIR   the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --help      this text\n"
    "\n"
    "Prints: exported N entries (SIZE) from DIR to ARCHIVE\n"
    "Exit status: 0 written; 1 the cache or the archive could not be read or\n"
    "written; 2 bad usage.\n";

static int warn_invalid(void *ctx, const progcache_entry *e)
{
    (void)ctx;
    if (e->artifact && !e->artifact->valid)
        fprintf(stderr,
                "progcache export: warning: entry %s is not a valid artifact (%s); "
                "exported as it is\n",
                e->name, e->artifact->reason);
    return 0;
}

int cmd_export(int argc, char **argv)
{
    const char *dir_arg = NULL, *archive = NULL, *v;
    int r;
    for (int i = 1; i < argc; i++) {
        if (tool_is_help(argv[i])) {
            fputs(usage_text, stdout);
            return EXIT_OK;
        } else if ((r = tool_flag_value(CMD, argc, argv, &i, "--dir", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            dir_arg = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return tool_usage_error(CMD, "unknown option \"%s\" (run 'progcache export --help')",
                                    argv[i]);
        } else if (archive) {
            return tool_usage_error(CMD, "more than one ARCHIVE (\"%s\" and \"%s\")", archive,
                                    argv[i]);
        } else {
            archive = argv[i];
        }
    }
    if (!archive)
        return tool_usage_error(CMD, "give the ARCHIVE to write (run 'progcache export --help')");
    char *dir = NULL;
    progcache_store *store = NULL;
    int code = tool_resolve_dir(CMD, dir_arg, &dir);
    if (code)
        return code;
    if ((code = tool_open_store(CMD, dir, TOOL_READ, &store)))
        goto done;
    progcache_archive_options opts = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    opts.on_entry = warn_invalid;
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    if (progcache_file_export(&res, store, archive, &opts) != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_PROBLEMS, "export failed");
        goto done;
    }
    char size[64];
    tool_format_size_long(size, sizeof size, res.bytes);
    printf("exported %llu entries (%s) from %s to %s\n", (unsigned long long)res.entries, size, dir,
           archive);
done:
    progcache_store_free(store);
    free(dir);
    return code;
}
