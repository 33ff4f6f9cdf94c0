/* progcache export and progcache import: a cache directory to and from a
 * tar archive. One file: the two are mirror images of each other. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

static const char export_usage[] =
    "usage: progcache export [--dir DIR] [--max-artifact-size SIZE] ARCHIVE\n"
    "\n"
    "Write every entry of a cache directory to ARCHIVE, a POSIX tar (ustar) file\n"
    "holding entries/<2 hex>/<62 hex>, the cache directory's own layout: import it\n"
    "on another machine with 'progcache import', or unpack it with tar into an\n"
    "empty cache directory (for example: warm a cache on a build server without a\n"
    "GPU, then ship it to the cluster).\n"
    "\n"
    "ARCHIVE '-' is standard output. A regular ARCHIVE (or a new one) is written\n"
    "under a temporary name and renamed into place when complete, replacing an\n"
    "existing file; a character device or a FIFO is written in place (a FIFO must\n"
    "already have a reader); a directory, block device or socket is refused; a\n"
    "symbolic link is followed (one that leads nowhere is refused).\n"
    "\n"
    "options:\n"
    "  --dir DIR   the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --max-artifact-size SIZE  the largest entry read (default 1G; K, M, G)\n"
    "  --help      this text\n"
    "\n"
    "Prints: exported N entries (SIZE) from DIR to ARCHIVE (on standard error\n"
    "when ARCHIVE is '-')\n"
    "Exit status: 0 written; 1 the cache or the archive could not be read or\n"
    "written; 2 bad usage.\n";

static const char import_usage[] =
    "usage: progcache import [--dir DIR] [--max-artifact-size SIZE] ARCHIVE\n"
    "\n"
    "Add the entries of ARCHIVE (written by 'progcache export', or by\n"
    "'tar -cf ARCHIVE entries' in a cache directory) to a cache directory, which is\n"
    "created if missing. Entries of the same name are replaced; others are kept.\n"
    "The whole archive is checked first: a member that is not a regular file named\n"
    "entries/<2 hex>/<62 hex> (or one of its directories) - a link, a device, a path\n"
    "with '..', an absolute path, any other file - refuses the archive, and nothing\n"
    "is imported. Entries are written through the cache's atomic put. A member\n"
    "larger than the maximum artifact size is refused from its header.\n"
    "ARCHIVE '-' is standard input; a pipe, FIFO or device is read as a stream\n"
    "(copied to an unlinked temporary file while it is checked).\n"
    "\n"
    "options:\n"
    "  --dir DIR   the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --max-artifact-size SIZE  the largest entry accepted (default 1G; K, M, G)\n"
    "  --help      this text\n"
    "\n"
    "Prints: imported N entries (SIZE) from ARCHIVE into DIR\n"
    "Exit status: 0 imported; 1 the archive was refused or could not be read, or\n"
    "the cache refused a put; 2 bad usage.\n";

typedef struct {
    const char *cmd;   /* "export" or "import" */
    const char *usage;
    int exporting;
} archive_command;

static int warn_invalid(void *ctx, const progcache_entry *e)
{
    const archive_command *c = ctx;
    if (e->artifact && !e->artifact->valid)
        fprintf(stderr, "progcache %s: warning: entry %s is not a valid artifact (%s); %s\n",
                c->cmd, e->name, e->artifact->reason,
                c->exporting ? "exported as it is"
                             : "imported as it is ('progcache verify --fix' removes it)");
    return 0;
}

static int run(const archive_command *c, int argc, char **argv)
{
    const char *dir_arg = NULL, *archive = NULL;
    uint64_t max = PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    int r;
    for (int i = 1; i < argc; i++) {
        int cc = tool_common_arg(c->cmd, c->usage, argc, argv, &i, &dir_arg, NULL);
        if (cc == TOOL_ARG_TAKEN)
            continue;
        if (cc != TOOL_ARG_OTHER)
            return cc;
        if ((r = tool_max_size_arg(c->cmd, argc, argv, &i, &max))) {
            if (r < 0)
                return EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return tool_usage_error(c->cmd, "unknown option \"%s\" (run 'progcache %s --help')",
                                    argv[i], c->cmd);
        } else if (archive) {
            return tool_usage_error(c->cmd, "more than one ARCHIVE (\"%s\" and \"%s\")", archive,
                                    argv[i]);
        } else {
            archive = argv[i];
        }
    }
    if (!archive)
        return tool_usage_error(c->cmd, "give the ARCHIVE to %s (run 'progcache %s --help')",
                                c->exporting ? "write" : "read", c->cmd);
    char *dir = NULL;
    progcache_file *file = NULL;
    /* Export reads an existing cache; import creates one if missing. */
    int code = tool_open_dir_file(c->cmd, dir_arg, c->exporting ? TOOL_READ : TOOL_CREATE, max,
                                   &dir, &file);
    if (code)
        goto done;
    progcache_archive_options opts = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    opts.on_entry = warn_invalid;
    opts.ctx = (void *)c;
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    int dash = !strcmp(archive, "-"), rc;
    if (c->exporting)
        rc = dash ? progcache_file_export_fd(&res, file, STDOUT_FILENO, "(standard output)",
                                             &opts)
                  : progcache_file_export(&res, file, archive, &opts);
    else
        rc = dash ? progcache_file_import_fd(&res, file, STDIN_FILENO, "(standard input)", &opts)
                  : progcache_file_import(&res, file, archive, &opts);
    if (rc != PROGCACHE_OK) {
        code = tool_lib_error(c->cmd, EXIT_PROBLEMS,
                              c->exporting ? "export failed" : "import failed");
        goto done;
    }
    char size[64];
    tool_format_size_long(size, sizeof size, res.bytes);
    /* With the archive on standard output, the report goes to stderr. */
    if (c->exporting)
        fprintf(dash ? stderr : stdout, "exported %llu entries (%s) from %s to %s\n",
                (unsigned long long)res.entries, size, dir, dash ? "standard output" : archive);
    else
        printf("imported %llu entries (%s) from %s into %s\n", (unsigned long long)res.entries,
               size, dash ? "standard input" : archive, dir);
done:
    progcache_file_close(file);
    free(dir);
    return code;
}

int cmd_export(int argc, char **argv)
{
    static const archive_command c = {"export", export_usage, 1};
    return run(&c, argc, argv);
}

int cmd_import(int argc, char **argv)
{
    static const archive_command c = {"import", import_usage, 0};
    return run(&c, argc, argv);
}
