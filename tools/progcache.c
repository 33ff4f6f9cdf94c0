/* progcache: the admin tool. Dispatches to one file per subcommand. */
#include <stdarg.h>
#include <string.h>

#include "tool.h"

static const struct {
    const char *name;
    tool_command_fn fn;
    const char *summary;
} commands[] = {
    {"key", cmd_key, "print the cache key of an NVRTC compile"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: progcache <command> [options]\n\n"
                 "Persistent cache of CUDA programs compiled at run time (cuda.core-compatible).\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'progcache <command> --help' for a command's options.\n"
                 "  --help       this text\n  --version    print the version\n");
}

int tool_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "progcache %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

int tool_lib_error(const char *cmd, int exit_code, const char *what)
{
    fprintf(stderr, "progcache %s: %s: %s\n", cmd, what, progcache_error_last());
    return exit_code;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("progcache %s\n", progcache_version_string());
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "progcache: unknown command '%s' (run 'progcache --help')\n", argv[1]);
    return EXIT_USAGE;
}
