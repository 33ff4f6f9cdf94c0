/* progcache clear: remove every entry of a cache directory. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "clear"

static const char usage_text[] =
    "usage: progcache clear [--dir DIR]\n"
    "\n"
    "Remove every entry of a cache directory. The statistics are kept (zero them\n"
    "with 'progcache stats --zero'). Other processes may go on using the cache.\n"
    "\n"
    "options:\n"
    "  --dir DIR   the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --help      this text\n"
    "\n"
    "Prints: removed N entries (SIZE) from DIR\n"
    "Exit status: 0 cleared; 1 the directory cannot be used or an entry could not\n"
    "be removed; 2 bad usage.\n";

int cmd_clear(int argc, char **argv)
{
    const char *dir_arg = NULL;
    for (int i = 1; i < argc; i++) {
        int c = tool_common_arg(CMD, usage_text, argc, argv, &i, &dir_arg, NULL);
        if (c == TOOL_ARG_TAKEN)
            continue;
        if (c != TOOL_ARG_OTHER)
            return c;
        return tool_unexpected_arg(CMD, argv[i]);
    }
    char *dir = NULL;
    progcache_file *file = NULL;
    int code = tool_open_dir_file(CMD, dir_arg, TOOL_WRITE, 0, &dir, &file);
    if (code)
        goto done;
    uint64_t entries = 0, bytes = 0;
    if (progcache_store_count(&entries, progcache_file_store(file)) != PROGCACHE_OK ||
        progcache_store_total_size(&bytes, progcache_file_store(file)) != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_PROBLEMS, "cannot read the cache's size");
        goto done;
    }
    if (progcache_store_clear(progcache_file_store(file)) != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_PROBLEMS, "cannot clear the cache");
        goto done;
    }
    char size[64];
    tool_format_size_long(size, sizeof size, bytes);
    printf("removed %llu entries (%s) from %s\n", (unsigned long long)entries, size, dir);
done:
    progcache_file_close(file);
    free(dir);
    return code;
}
