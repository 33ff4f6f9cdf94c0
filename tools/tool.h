/* The progcache command: shared declarations. Uses only public headers. */
#ifndef PROGCACHE_TOOL_H
#define PROGCACHE_TOOL_H

#include <stdio.h>

#include "progcache/progcache.h"

/* Exit codes of every subcommand. */
enum { EXIT_OK = 0, EXIT_PROBLEMS = 1, EXIT_USAGE = 2 };

/* A subcommand: argv[0] is the subcommand's name. Returns the exit code. */
typedef int (*tool_command_fn)(int argc, char **argv);

int cmd_key(int argc, char **argv);

/* Print "progcache <cmd>: <message>\n" to stderr and return EXIT_USAGE. */
int tool_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Print "progcache <cmd>: <what>: <progcache_error_last()>" and return code. */
int tool_lib_error(const char *cmd, int exit_code, const char *what);

#endif
