/* The command line of every subcommand, parsed the way getopt_long parses
 * (docs/CLI.md, "Options"): one table of options per subcommand, the
 * common ones added here. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <progcache/settings.h>

#include "tool.h"

tool_globals tool_global;

#define MAX_OPTIONS 40

/* The options every subcommand takes. */
enum { OPT_JSON = 0x1000 - 1 };
static const tool_option common[] = {
    {"dir", 'd', 1},
    {"quiet", 'q', 0},
    {"help", 'h', 0},
    {"shared-group", TOOL_OPT_SHARED_GROUP, 1},
};

int tool_shared_group(const char *cmd, const char *group)
{
    /* The library reads the team's group from the environment only (the
     * user's own, never a file in the shared directory): the option sets
     * it for this process, before any thread exists. */
    if (!*group)
        return tool_usage_error(cmd, "--shared-group is empty: give the team's group");
    if (setenv("PROGCACHE_SHARED_GROUP", group, 1) != 0)
        return tool_error(cmd, "out of memory");
    return EXIT_OK;
}

void tool_parser_init(tool_parser *p, const char *cmd, const char *usage, int argc, char **argv,
                      const tool_option *opts, unsigned int flags)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->usage = usage;
    p->argc = argc;
    p->argv = argv;
    p->opts = opts;
    p->flags = flags;
    p->dir = tool_global.dir;
    /* getopt's state is global: optind 0 makes glibc start afresh. */
    optind = 0;
    opterr = 0;
}

/* The long options and the short-option string getopt wants. */
static void tables(const tool_parser *p, struct option *longs, char *shorts, size_t shorts_len)
{
    size_t n = 0, k = 0;
    /* "-": every positional argument comes back in order as option 1
     * (so options may follow it); ":": a missing value is told apart. */
    shorts[k++] = '-';
    shorts[k++] = ':';
    const tool_option *lists[2] = {common, p->opts};
    size_t counts[2] = {sizeof common / sizeof common[0], (size_t)-1};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; lists[l] && i < counts[l] && lists[l][i].name; i++) {
            const tool_option *o = &lists[l][i];
            if (n + 2 < MAX_OPTIONS)
                longs[n++] = (struct option){o->name, o->has_arg ? required_argument : no_argument,
                                             NULL, o->id};
            if (o->id > 0 && o->id < 128 && k + 3 < shorts_len) {
                shorts[k++] = (char)o->id;
                if (o->has_arg)
                    shorts[k++] = ':';
            }
        }
    }
    if (p->flags & TOOL_JSON)
        longs[n++] = (struct option){"json", no_argument, NULL, OPT_JSON};
    longs[n] = (struct option){NULL, 0, NULL, 0};
    shorts[k] = '\0';
}

/* The long names, for suggestions. */
static size_t long_names(const tool_parser *p, const char **names, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof common / sizeof common[0] && n < max; i++)
        names[n++] = common[i].name;
    for (size_t i = 0; p->opts && p->opts[i].name && n < max; i++)
        names[n++] = p->opts[i].name;
    if ((p->flags & TOOL_JSON) && n < max)
        names[n++] = "json";
    return n;
}

static int usage_exit(tool_parser *p)
{
    p->code = EXIT_USAGE;
    return TOOL_EXIT;
}

static int unknown_option(tool_parser *p, const char *arg, int short_opt)
{
    char more[160];
    snprintf(more, sizeof more, "%s%srun 'progcache %s --help'", p->hint ? p->hint : "",
             p->hint ? "; " : "", p->cmd);
    if (short_opt) {
        if (strlen(arg) > 2)
            tool_usage_error(p->cmd, "unknown option \"-%c\" in \"%s\" (%s)", short_opt, arg,
                             more);
        else
            tool_usage_error(p->cmd, "unknown option \"%s\" (%s)", arg, more);
        return usage_exit(p);
    }
    /* "--jsno" or "--jsno=x": suggest from the option's name alone. */
    char name[64];
    const char *start = arg + (arg[0] == '-' && arg[1] == '-' ? 2 : 1);
    size_t len = strcspn(start, "=");
    snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), start);
    const char *names[MAX_OPTIONS];
    size_t n = long_names(p, names, MAX_OPTIONS);
    const char *near = tool_suggest(name, names, n);
    int ambiguous = 0;
    for (size_t i = 0; i < n; i++)
        ambiguous += len && !strncmp(names[i], name, len);
    if (ambiguous > 1)
        tool_usage_error(p->cmd, "option \"%s\" is ambiguous: give more of its name (%s)", arg,
                         more);
    else if (near)
        tool_usage_error(p->cmd, "unknown option \"%s\"; did you mean \"--%s\"? (%s)", arg, near,
                         more);
    else
        tool_usage_error(p->cmd, "unknown option \"%s\" (%s)", arg, more);
    return usage_exit(p);
}

/* "progcache CMD --list-options", alone and spelt in full: the command's
 * own option table, one option a line, "-x --name 1" ("-" for no short
 * form; 1 when it takes a value), the common ones included. Read by the
 * tests that hold every short option to one meaning and the man page's
 * synopsis to the tables (tests/admin/test_tool_habits.py), so an option
 * added to a table is checked without a list of its own. */
static int list_options(tool_parser *p)
{
    const tool_option *lists[2] = {common, p->opts};
    size_t counts[2] = {sizeof common / sizeof common[0], (size_t)-1};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; lists[l] && i < counts[l] && lists[l][i].name; i++) {
            const tool_option *o = &lists[l][i];
            if (o->id > 0 && o->id < 128)
                printf("-%c --%s %d\n", o->id, o->name, o->has_arg ? 1 : 0);
            else
                printf("- --%s %d\n", o->name, o->has_arg ? 1 : 0);
        }
    if (p->flags & TOOL_JSON)
        printf("- --json 0\n");
    p->code = EXIT_OK;
    return TOOL_EXIT;
}

int tool_next(tool_parser *p)
{
    if (optind == 0 && p->argc == 2 && !strcmp(p->argv[1], "--list-options"))
        return list_options(p);
    struct option longs[MAX_OPTIONS];
    char shorts[2 * MAX_OPTIONS + 4];
    tables(p, longs, shorts, sizeof shorts);
    if (p->positional_only) {
        if (optind < p->argc) {
            p->arg = p->argv[optind++];
            return TOOL_ARG;
        }
        return TOOL_END;
    }
    for (;;) {
        int before = optind ? optind : 1;
        int c = getopt_long(p->argc, p->argv, shorts, longs, NULL);
        p->arg = optarg;
        switch (c) {
        case -1:
            /* "--" ended the options: what follows is positional, or,
             * for TOOL_REST, the command's own (key's NVRTC options). */
            if (before < p->argc && !strcmp(p->argv[before], "--")) {
                if (p->flags & TOOL_REST) {
                    p->rest = p->argv + optind;
                    p->nrest = p->argc - optind;
                    return TOOL_END;
                }
                p->positional_only = 1;
                return tool_next(p);
            }
            return TOOL_END;
        case 1:
            return TOOL_ARG;
        case 'h':
            fputs(p->usage, stdout);
            p->code = EXIT_OK;
            return TOOL_EXIT;
        case 'd':
            p->dir = optarg;
            continue;
        case 'q':
            tool_global.quiet = 1;
            continue;
        case TOOL_OPT_SHARED_GROUP:
            if ((p->code = tool_shared_group(p->cmd, optarg)) != EXIT_OK)
                return TOOL_EXIT;
            continue;
        case OPT_JSON:
            p->json = 1;
            continue;
        case ':': {
            const char *arg = p->argv[optind - 1];
            if (optopt && optopt < 128 && arg[0] == '-' && arg[1] != '-')
                tool_usage_error(p->cmd, "-%c needs a value (run 'progcache %s --help')", optopt,
                                 p->cmd);
            else
                tool_usage_error(p->cmd, "%s needs a value (run 'progcache %s --help')", arg,
                                 p->cmd);
            return usage_exit(p);
        }
        case '?': {
            /* A short option inside a cluster ("-arch"): getopt has not
             * moved past its argument yet. */
            const char *arg = p->argv[optind - 1];
            if (optopt && optind < p->argc && p->argv[optind][0] == '-' &&
                p->argv[optind][1] != '-' && strchr(p->argv[optind], optopt))
                arg = p->argv[optind];
            int is_short = optopt && arg[0] == '-' && arg[1] != '-';
            return unknown_option(p, arg, is_short ? optopt : 0);
        }
        default:
            return c;
        }
    }
}

int tool_unexpected_arg(const char *cmd, const char *arg)
{
    return tool_usage_error(cmd, "unexpected argument \"%s\" (run 'progcache %s --help')", arg,
                            cmd);
}

/* Optimal string alignment distance, capped: enough for "did you mean". */
static size_t distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 99;
    size_t d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *tool_suggest(const char *word, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t best_d = strlen(word) <= 4 ? 2 : 3;
    for (size_t i = 0; i < n; i++) {
        size_t d = distance(word, names[i]);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    return best;
}

int tool_parse_size(const char *text, uint64_t *out)
{
    return progcache_parse_size(out, text) == PROGCACHE_OK ? 0 : -1;
}

int tool_parse_age(const char *text, uint64_t *out)
{
    uint64_t v = 0, unit;
    const char *p = text;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (p == text || !p[0] || p[1])
        return -1;
    switch (*p) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    case 'w': unit = 7 * 86400; break;
    default: return -1;
    }
    if (v > UINT64_MAX / unit)
        return -1;
    *out = v * unit;
    return 0;
}

int tool_max_size_value(const char *cmd, const char *text, uint64_t *max)
{
    if (tool_parse_size(text, max) != 0 || *max == 0)
        return tool_usage_error(cmd,
                                "--max-artifact-size \"%s\": give a size in bytes, or with a "
                                "suffix K, M, G (powers of 1024), such as 2G",
                                text);
    return EXIT_OK;
}

const char *tool_setting_ignored(const progcache_setting *s)
{
    const char *v = s->variable ? getenv(s->variable) : NULL;
    return v && *v && s->source != PROGCACHE_SETTING_ENV ? v : NULL;
}
