/* progcache config: show the settings of a cache directory with where each
 * value comes from, or change one in its settings file (progcache/settings.h,
 * docs/CONFIG.md). */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "config"

/* The usage; the settings are listed after usage_head from the library's
 * table (help_text), so no name is typed here. */
static const char usage_head[] =
    "usage: progcache config [-d DIR] [--json]           show every setting\n"
    "       progcache config [-d DIR] [--json] NAME      show one (its value alone)\n"
    "       progcache config [-d DIR] NAME VALUE         set one in DIR's settings file\n"
    "       progcache config [-d DIR] --unset NAME       remove it from the file\n"
    "\n"
    "The settings every program using a cache directory follows: its size cap and\n"
    "the like. Each comes from, lowest first: the built-in default; the settings\n"
    "file DIR/progcache/config (\"name = value\" lines); the environment variable\n"
    "(PROGCACHE_MAX_SIZE=10G, ...); a program's own options. The listing shows\n"
    "each value and where it came from.\n";
static const char usage_tail[] =
    "Sizes: bytes, or a number and K, M, G, T (powers of 1024; Ki, Mi, ... and a\n"
    "trailing B are accepted): 10G, 512Mi, 1.5G.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR   the cache directory (default: $PROGCACHE_DIR, else\n"
    "                  cuda.core's); created when a setting is written\n"
    "  -u, --unset NAME  remove NAME from the settings file\n"
    "  --json          print one JSON object\n"
    "  -h, --help      this text\n"
    "\n"
    "Exit status: 0 shown or written; 2 bad usage (an unknown setting, a value it\n"
    "does not take); 3 the settings cannot be read or written.\n";

/* usage_head, every setting (name, default, what it does, wrapped), then
 * usage_tail; in buf, or usage_head and usage_tail alone when the table
 * cannot be read. */
static const char *help_text(char *buf, size_t size)
{
    progcache_settings *set = NULL;
    size_t used = (size_t)snprintf(buf, size, "%s\nsettings (the environment variable, the default):\n", usage_head);
    if (progcache_settings_load(&set, "") == PROGCACHE_OK) {
        for (size_t i = 0; i < progcache_settings_count(set) && used < size; i++) {
            const progcache_setting *s = progcache_settings_at(set, i);
            used += (size_t)snprintf(buf + used, size - used, "  %-19s %s, %s\n", s->name,
                                     s->variable, *s->default_value ? s->default_value : "unset");
            /* The summary, wrapped at 76 columns under the name. */
            const char *t = s->summary;
            while (*t && used < size) {
                size_t n = strlen(t);
                if (n > 54) {
                    n = 54;
                    while (n > 0 && t[n] != ' ')
                        n--;
                    if (n == 0)
                        n = 54;
                }
                used += (size_t)snprintf(buf + used, size - used, "%22s%.*s\n", "", (int)n, t);
                t += n;
                while (*t == ' ')
                    t++;
            }
        }
    }
    progcache_settings_free(set);
    if (used < size)
        snprintf(buf + used, size - used, "%s", usage_tail);
    return buf;
}

static const char *source_name(progcache_setting_source s)
{
    switch (s) {
    case PROGCACHE_SETTING_FILE: return "file";
    case PROGCACHE_SETTING_ENV: return "environment";
    case PROGCACHE_SETTING_API: return "options";
    default: return "default";
    }
}

static void print_json_setting(const progcache_setting *s)
{
    printf("{\"name\": ");
    tool_json_string(stdout, s->name);
    printf(", \"value\": ");
    tool_json_string(stdout, s->value);
    if (s->in_file) /* the numeric settings: bytes, percent, 0 or 1 */
        printf(", \"number\": %llu", (unsigned long long)s->number);
    printf(", \"source\": \"%s\", \"origin\": ", source_name(s->source));
    tool_json_string(stdout, s->origin);
    printf(", \"variable\": ");
    tool_json_string(stdout, s->variable);
    printf(", \"in_file\": %s}", s->in_file ? "true" : "false");
}

static void print_all(const char *dir, const progcache_settings *set, int json)
{
    size_t n = progcache_settings_count(set);
    if (json) {
        tool_json_begin(stdout);
        printf(", \"dir\": ");
        tool_json_string(stdout, dir);
        printf(", \"file\": ");
        tool_json_string(stdout, progcache_settings_path(set));
        printf(", \"settings\": [");
        for (size_t i = 0; i < n; i++) {
            printf("%s\n  ", i ? "," : "");
            print_json_setting(progcache_settings_at(set, i));
        }
        printf("\n]}\n");
        return;
    }
    printf("# settings of %s (file: %s)\n", dir, progcache_settings_path(set));
    for (size_t i = 0; i < n; i++) {
        const progcache_setting *s = progcache_settings_at(set, i);
        const char *value = s->value[0] ? s->value : "-";
        if (s->source == PROGCACHE_SETTING_DEFAULT)
            printf("%-19s %-12s default%s\n", s->name, value,
                   s->in_file ? "" : " (environment only)");
        else
            printf("%-19s %-12s %s %s\n", s->name, value, source_name(s->source), s->origin);
    }
}

static int unknown_setting(const char *name)
{
    progcache_settings *set = NULL;
    size_t n = 0;
    if (progcache_settings_load(&set, "") != PROGCACHE_OK)
        set = NULL;
    const char **names = calloc(progcache_settings_count(set) + 1, sizeof *names);
    for (; names && n < progcache_settings_count(set); n++)
        names[n] = progcache_settings_at(set, n)->name;
    const char *near = names ? tool_suggest(name, names, n) : NULL;
    if (near)
        tool_usage_error(CMD, "unknown setting \"%s\"; did you mean \"%s\"?", name, near);
    else
        tool_usage_error(CMD, "unknown setting \"%s\" (run 'progcache config --help')", name);
    free(names);
    progcache_settings_free(set);
    return EXIT_USAGE;
}

/* A variable set here that the settings did not take (a value that cannot
 * be used is ignored, not an error: docs/CONFIG.md): said, since the
 * listing would otherwise show the value in force as if nothing were set. */
static void warn_ignored(const progcache_settings *set)
{
    for (size_t i = 0; i < progcache_settings_count(set); i++) {
        const progcache_setting *s = progcache_settings_at(set, i);
        const char *v = tool_setting_ignored(s);
        if (v)
            fprintf(stderr, "progcache config: warning: %s=\"%.64s\" cannot be used (see "
                            "'progcache config --help'); ignored (%s stays %s, from %s)\n",
                    s->variable, v, s->name, s->value, s->origin);
    }
}

/* After a write: say where it went, and what overrides it here. */
static int written(const char *dir, const char *name, const char *value)
{
    progcache_settings *set = NULL;
    if (progcache_settings_load(&set, dir) != PROGCACHE_OK)
        return tool_lib_error(CMD, EXIT_FAILED, "written, but the settings cannot be read back");
    const progcache_setting *s = progcache_settings_find(set, name);
    if (value)
        printf("%s = %s in %s\n", name, value, progcache_settings_path(set));
    else
        printf("%s removed from %s\n", name, progcache_settings_path(set));
    if (s->source == PROGCACHE_SETTING_ENV)
        fprintf(stderr, "progcache config: note: %s=%s overrides it in this environment\n",
                s->variable, s->value);
    progcache_settings_free(set);
    return EXIT_OK;
}

/* "progcache config --list-settings", alone: the names the settings file
 * may hold, one a line, for the shell completions (tools/progcache.bash,
 * _progcache, progcache.fish), which so never list them by hand. With
 * --all: every setting, the environment-only ones too (the switches
 * PROGCACHE_DISABLE, _READONLY, _RECACHE, _EXPLAIN among them), each with
 * its variable and where a value may come from. */
static int list_settings(int all)
{
    progcache_settings *set = NULL;
    if (progcache_settings_load(&set, "") != PROGCACHE_OK)
        return tool_lib_error(CMD, EXIT_FAILED, "cannot read the settings table");
    for (size_t i = 0; i < progcache_settings_count(set); i++) {
        const progcache_setting *s = progcache_settings_at(set, i);
        if (all)
            printf("%-20s %-30s %s\n", s->name, s->variable,
                   s->in_file ? "settings file, environment" : "environment only");
        else if (s->in_file)
            printf("%s\n", s->name);
    }
    progcache_settings_free(set);
    return EXIT_OK; /* progcache.c checks that standard output took it */
}

int cmd_config(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--list-settings"))
        return list_settings(0);
    if (argc == 3 && !strcmp(argv[1], "--list-settings") && !strcmp(argv[2], "--all"))
        return list_settings(1);
    static const tool_option options[] = {{"unset", 'u', 1}, {NULL, 0, 0}};
    const char *args[3] = {NULL, NULL, NULL}, *unset = NULL;
    int nargs = 0;
    tool_parser p;
    static char help[16384];
    tool_parser_init(&p, CMD, help_text(help, sizeof help), argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        if (c == TOOL_EXIT)
            return p.code;
        if (c == 'u')
            unset = p.arg;
        else if (nargs < 2)
            args[nargs++] = p.arg;
        else
            return tool_unexpected_arg(CMD, p.arg);
    }
    if (unset && nargs)
        return tool_usage_error(CMD, "--unset takes the setting's name alone");
    char *dir = NULL;
    int code = tool_resolve_dir(CMD, p.dir, &dir);
    if (code)
        return code;
    const char *name = unset ? unset : args[0];
    progcache_settings *set = NULL;
    if (name && progcache_settings_load(&set, "") == PROGCACHE_OK &&
        !progcache_settings_find(set, name)) {
        code = unknown_setting(name);
        goto done;
    }
    progcache_settings_free(set);
    set = NULL;
    if (unset || nargs == 2) {
        const char *value = unset ? NULL : args[1];
        int rc = progcache_settings_set(dir, name, value);
        if (rc)
            code = tool_lib_error(CMD, rc == PROGCACHE_EINVAL ? EXIT_USAGE : EXIT_FAILED,
                                  "cannot change the settings");
        else
            code = written(dir, name, value);
        goto done;
    }
    if (progcache_settings_load(&set, dir) != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_FAILED, "cannot read the settings");
        goto done;
    }
    warn_ignored(set);
    if (!name) {
        print_all(dir, set, p.json);
    } else if (p.json) {
        tool_json_begin(stdout);
        printf(", \"dir\": ");
        tool_json_string(stdout, dir);
        printf(", \"setting\": ");
        print_json_setting(progcache_settings_find(set, name));
        printf("}\n");
    } else {
        printf("%s\n", progcache_settings_find(set, name)->value);
    }
done:
    progcache_settings_free(set);
    free(dir);
    return code;
}
