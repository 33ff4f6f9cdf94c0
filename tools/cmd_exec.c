/* progcache exec: run a command with every NVRTC compile of it and of its
 * children through the cache (docs/INTERCEPT.md). The work is done by
 * libprogcache-intercept.so, an LD_AUDIT module: this command only puts it
 * in the environment and replaces itself with the command. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

#define CMD "exec"
#define MODULE "libprogcache-intercept.so"

static const char usage_text[] =
    "usage: progcache exec [-d DIR] [--] COMMAND [ARGS...]\n"
    "\n"
    "Run COMMAND with every NVRTC compile of it and of its children going\n"
    "through the cache, unchanged: programs linked with -lnvrtc, programs that\n"
    "dlopen NVRTC (PyTorch, CuPy, cuda.core). A compile seen before is answered\n"
    "from the cache without running NVRTC, and where the program loads\n"
    "libnvrtc.so.13 without mapping it (a stand-in loads it when a call needs\n"
    "it); one the cache cannot cover runs on NVRTC untouched. Without\n"
    "wrapping: LD_AUDIT=<path of " MODULE ">\n"
    "(printed by 'progcache exec --where'). PROGCACHE_INTERCEPT=off turns it\n"
    "off, PROGCACHE_INTERCEPT_STANDIN=off the stand-in; PROGCACHE_LOG=info\n"
    "(or info:FILE) says which NVRTC was reached, by which route.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR  the cache directory (sets PROGCACHE_DIR for COMMAND)\n"
    "  --where        print the path of the interceptor and exit\n"
    "  -h, --help     this text\n"
    "\n"
    "Exit status: COMMAND's; 2 bad usage; 3 the interceptor is not found; 127\n"
    "COMMAND cannot be run.\n";

/* The interceptor: $PROGCACHE_INTERCEPT_LIBRARY, else installed beside
 * this program (libexec/progcache/), else the one of the build tree this
 * program was built in. */
static int find_module(char *out, size_t len)
{
    const char *set = getenv("PROGCACHE_INTERCEPT_LIBRARY");
    if (set && set[0]) {
        snprintf(out, len, "%s", set);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char path[PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/%s/" MODULE, self, PROGCACHE_BIN_TO_INTERCEPT);
            if (realpath(path, out) && access(out, R_OK) == 0)
                return 0;
            snprintf(path, sizeof path, "%s/../lib/" MODULE, self);
            if (!strncmp(self, PROGCACHE_TOOL_BUILD_DIR, strlen(PROGCACHE_TOOL_BUILD_DIR)) &&
                realpath(path, out) && access(out, R_OK) == 0)
                return 0;
        }
    }
    return -1;
}

/* LD_AUDIT with the module appended (an auditor already there stays first). */
static int set_audit(const char *module)
{
    const char *old = getenv("LD_AUDIT");
    if (!old || !old[0])
        return setenv("LD_AUDIT", module, 1);
    for (const char *at = strstr(old, module); at; at = strstr(at + 1, module)) {
        size_t l = strlen(module);
        if ((at == old || at[-1] == ':') && (at[l] == '\0' || at[l] == ':'))
            return 0; /* there already */
    }
    size_t len = strlen(old) + strlen(module) + 2;
    char *both = malloc(len);
    if (!both)
        return -1;
    snprintf(both, len, "%s:%s", old, module);
    int rc = setenv("LD_AUDIT", both, 1);
    free(both);
    return rc;
}

int cmd_exec(int argc, char **argv)
{
    static const tool_option opts[] = {{"where", 'W' + 256, 0}, {NULL, 0, 0}};
    /* Our options end at the first word that is not one: COMMAND's own
     * options are its (progcache exec python3 -c ...). */
    int end = 1;
    while (end < argc && argv[end][0] == '-' && strcmp(argv[end], "--")) {
        const char *a = argv[end++];
        if ((!strcmp(a, "-d") || !strcmp(a, "--dir")) && end < argc)
            end++;
    }
    int cmd_at = end < argc && !strcmp(argv[end], "--") ? end + 1 : end;
    int where = 0;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, end, argv, opts, 0);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        if (c == TOOL_EXIT)
            return p.code;
        if (c == 'W' + 256)
            where = 1;
        else
            return tool_unexpected_arg(CMD, p.arg);
    }
    char module[PATH_MAX];
    if (find_module(module, sizeof module))
        return tool_error(CMD, "cannot find the interceptor %s (set "
                          "PROGCACHE_INTERCEPT_LIBRARY to its path)", MODULE);
    if (where) {
        printf("%s\n", module);
        return EXIT_OK;
    }
    if (cmd_at >= argc)
        return tool_usage_error(CMD, "no command to run (run 'progcache exec --help')");
    if (p.dir && setenv("PROGCACHE_DIR", p.dir, 1))
        return tool_error(CMD, "cannot set PROGCACHE_DIR: %s", strerror(errno));
    const char *off = getenv("PROGCACHE_INTERCEPT");
    int disabled = off && (!strcmp(off, "off") || !strcmp(off, "0") || !strcmp(off, "false"));
    if (!disabled && set_audit(module))
        return tool_error(CMD, "cannot set LD_AUDIT: %s", strerror(errno));
    fflush(stdout);
    execvp(argv[cmd_at], argv + cmd_at);
    fprintf(stderr, "progcache exec: cannot run %s: %s\n", argv[cmd_at], strerror(errno));
    return 127;
}
