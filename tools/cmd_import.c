/* progcache import: add the entries of a tar archive to a cache directory. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "import"

static const char usage_text[] =
    "usage: progcache import [--dir DIR] ARCHIVE\n"
    "\n"
    "Add the entries of ARCHIVE (written by 'progcache export', or by\n"
    "'tar -cf ARCHIVE entries' in a cache directory) to a cache directory, which is\n"
    "created if missing. Entries of the same name are replaced; others are kept.\n"
    "The whole archive is checked first: a member that is not a regular file named\n"
    "entries/<2 hex>/<62 hex> (or one of its directories) - a link, a device, a path\n"
    "with '..', an absolute path, any other file - refuses the archive, and nothing\n"
    "is imported. Entries are written through the cache's atomic put.\n"
    "\n"
    "options:\n"
    "  --dir DIR   the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --help      this text\n"
    "\n"
    "Prints: imported N entries (SIZE) from ARCHIVE into DIR\n"
    "Exit status: 0 imported; 1 the archive was refused or could not be read, or\n"
    "the cache refused a put; 2 bad usage.\n";

static int warn_invalid(void *ctx, const progcache_entry *e)
{
    (void)ctx;
    if (e->artifact && !e->artifact->valid)
        fprintf(stderr,
                "progcache import: warning: entry %s is not a valid artifact (%s); "
                "imported as it is ('progcache verify --fix' removes it)\n",
                e->name, e->artifact->reason);
    return 0;
}

int cmd_import(int argc, char **argv)
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
            return tool_usage_error(CMD, "unknown option \"%s\" (run 'progcache import --help')",
                                    argv[i]);
        } else if (archive) {
            return tool_usage_error(CMD, "more than one ARCHIVE (\"%s\" and \"%s\")", archive,
                                    argv[i]);
        } else {
            archive = argv[i];
        }
    }
    if (!archive)
        return tool_usage_error(CMD, "give the ARCHIVE to read (run 'progcache import --help')");
    char *dir = NULL;
    progcache_store *store = NULL;
    int code = tool_resolve_dir(CMD, dir_arg, &dir);
    if (code)
        return code;
    if ((code = tool_open_store(CMD, dir, TOOL_CREATE, &store)))
        goto done;
    progcache_archive_options opts = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    opts.on_entry = warn_invalid;
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    if (progcache_file_import(&res, store, archive, &opts) != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_PROBLEMS, "import failed");
        goto done;
    }
    char size[64];
    tool_format_size_long(size, sizeof size, res.bytes);
    printf("imported %llu entries (%s) from %s into %s\n", (unsigned long long)res.entries, size,
           archive, dir);
done:
    progcache_store_free(store);
    free(dir);
    return code;
}
