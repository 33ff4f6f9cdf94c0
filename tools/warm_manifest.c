/* progcache warm: the manifest, one program per line, in the words of
 * `progcache key` (see the command's --help and docs/CLI.md). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tool_warm.h"

#define CMD "warm"

typedef struct words {
    char **items;
    size_t len;
} words;

static int push_word(words *w, char *word)
{
    char **items = realloc(w->items, (w->len + 1) * sizeof *items);
    if (!items)
        return -1;
    items[w->len++] = word;
    w->items = items;
    return 0;
}

static void free_words(words *w)
{
    for (size_t i = 0; i < w->len; i++)
        free(w->items[i]);
    free(w->items);
    w->items = NULL;
    w->len = 0;
}

/* Split one line into words: blanks separate, '#' at the start of a word
 * ends the line, '...' is literal, "..." and bare words take \-escapes.
 * 0, or -1 with *why set. */
static int split_line(words *out, const char *p, const char **why)
{
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (!*p || *p == '#')
            break;
        size_t cap = strlen(p) + 1, len = 0;
        char *word = malloc(cap);
        if (!word) {
            *why = "out of memory";
            return -1;
        }
        char quote = 0;
        for (; *p && (quote || (*p != ' ' && *p != '\t' && *p != '\r')); p++) {
            if (quote == '\'') {
                if (*p == '\'')
                    quote = 0;
                else
                    word[len++] = *p;
            } else if (*p == '\\' && p[1]) {
                word[len++] = *++p;
            } else if (quote == '"' && *p == '"') {
                quote = 0;
            } else if (!quote && (*p == '\'' || *p == '"')) {
                quote = *p;
            } else {
                word[len++] = *p;
            }
        }
        word[len] = '\0';
        if (quote) {
            free(word);
            *why = "a quote is not closed";
            return -1;
        }
        if (push_word(out, word)) {
            free(word);
            *why = "out of memory";
            return -1;
        }
    }
    return 0;
}

static char *join_path(const char *manifest_path, const char *file)
{
    const char *slash = strrchr(manifest_path, '/');
    if (file[0] == '/' || !slash) {
        return strdup(file);
    }
    size_t dir_len = (size_t)(slash - manifest_path) + 1;
    char *out = malloc(dir_len + strlen(file) + 1);
    if (out) {
        memcpy(out, manifest_path, dir_len);
        strcpy(out + dir_len, file);
    }
    return out;
}

static int line_error(const manifest *m, int line, const char *fmt, const char *detail)
{
    fprintf(stderr, "progcache warm: %s:%d: ", m->path, line);
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

/* One line's words into p. Returns EXIT_OK or an exit code (printed). */
static int parse_program(program *p, const manifest *m, words *w)
{
    p->source_arg = w->items[0];
    w->items[0] = NULL;
    p->target = PROGCACHE_TARGET_CUBIN;
    size_t i = 1;
    for (; i < w->len; i++) {
        const char *a = w->items[i];
        const char *value = i + 1 < w->len ? w->items[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "--name-expressions-bytes")) {
            p->exprs_bytes = 1;
            continue;
        }
        if (strcmp(a, "--target") && strcmp(a, "--name") && strcmp(a, "--name-expression") &&
            strcmp(a, "--extra-digest") && strcmp(a, "--header"))
            return line_error(m, p->line, "unknown option \"%s\" (NVRTC options go after '--')", a);
        if (!value)
            return line_error(m, p->line, "%s needs a value", a);
        i++;
        if (!strcmp(a, "--target")) {
            if (progcache_target_parse(&p->target, value) != PROGCACHE_OK)
                return line_error(m, p->line, "--target \"%s\": use cubin, ptx or ltoir", value);
        } else if (!strcmp(a, "--name")) {
            free(p->name);
            if (!(p->name = strdup(value)))
                return line_error(m, p->line, "%s", "out of memory");
        } else if (!strcmp(a, "--header")) {
            char what[PATH_MAX + 64];
            snprintf(what, sizeof what, "%s:%d: --header", m->path, p->line);
            int code = tool_headers_add(&p->headers, CMD, what, value,
                                        strcmp(m->path, "-") ? m->path : NULL, m->max_size);
            if (code)
                return code;
        } else if (!strcmp(a, "--name-expression")) {
            char **e = realloc(p->exprs, (p->num_exprs + 1) * sizeof *e);
            if (!e || !(e[p->num_exprs] = strdup(value))) {
                p->exprs = e ? e : p->exprs;
                return line_error(m, p->line, "%s", "out of memory");
            }
            p->exprs = e;
            p->num_exprs++;
        } else {
            free(p->digest);
            if (!(p->digest = tool_decode_hex(value, &p->digest_len)))
                return line_error(m, p->line,
                                  "--extra-digest \"%s\" is not hex (an even number of digits)",
                                  value);
        }
    }
    size_t given = w->len - (i < w->len ? i : w->len);
    p->options = calloc(given + 1, sizeof *p->options);
    if (!p->options)
        return line_error(m, p->line, "%s", "out of memory");
    for (size_t k = w->len - given; k < w->len; k++) {
        p->options[p->num_options++] = w->items[k];
        w->items[k] = NULL;
    }
    if (!(p->source_path = join_path(m->path, p->source_arg)))
        return line_error(m, p->line, "%s", "out of memory");
    return EXIT_OK;
}

void warm_free_program(program *p)
{
    free(p->source_arg);
    free(p->source_path);
    free(p->source);
    free(p->name);
    for (size_t i = 0; i < p->num_exprs; i++)
        free(p->exprs[i]);
    free(p->exprs);
    free(p->digest);
    tool_headers_free(&p->headers);
    for (size_t i = 0; i < p->num_options; i++)
        free(p->options[i]);
    free(p->options);
}

int warm_read_manifest(manifest *m)
{
    size_t size;
    unsigned char *bytes = NULL;
    int code = tool_read_input(CMD, "manifest", m->path, TOOL_INPUT_STDIN, m->max_size, &bytes,
                               &size);
    if (code)
        return code;
    char *text = (char *)bytes;
    if (memchr(text, '\0', size)) {
        free(text);
        return tool_usage_error(CMD, "manifest \"%s\" is not a text file", m->path);
    }
    int line = 0;
    words w = {NULL, 0};
    for (char *p = text, *next; p && *p && !code; p = next) {
        line++;
        next = strchr(p, '\n');
        if (next)
            *next++ = '\0';
        const char *why = NULL;
        if (split_line(&w, p, &why) != 0) {
            code = line_error(m, line, "%s", why);
            break;
        }
        if (w.len == 0)
            continue;
        program *items = realloc(m->items, (m->len + 1) * sizeof *items);
        if (!items) {
            code = tool_error(CMD, "out of memory");
            break;
        }
        m->items = items;
        program *prog = &m->items[m->len++];
        memset(prog, 0, sizeof *prog);
        prog->line = line;
        code = parse_program(prog, m, &w);
        free_words(&w);
    }
    free_words(&w);
    free(text);
    if (!code && m->len == 0)
        code = tool_usage_error(CMD, "manifest \"%s\" lists no program", m->path);
    /* Every source is read before anything is compiled: a typo in the
     * manifest should not surface after an hour of compiling. One file
     * that cannot be read costs its line only: the others are compiled,
     * and the exit status says something was left out. */
    for (size_t i = 0; !code && i < m->len; i++) {
        program *p = &m->items[i];
        char what[PATH_MAX + 64];
        snprintf(what, sizeof what, "%s:%d: source file", m->path, p->line);
        unsigned char *src = NULL;
        if (tool_read_input(CMD, what, p->source_path, 0, m->max_size, &src, &p->source_len)) {
            fprintf(stderr, "progcache %s: %s:%d: skipped; the other lines are compiled\n", CMD,
                    m->path, p->line);
            warm_free_program(p);
            memmove(p, p + 1, (m->len - i - 1) * sizeof *p);
            m->len--;
            m->skipped++;
            i--;
            continue;
        }
        p->source = (char *)src;
    }
    if (!code && m->len == 0)
        code = tool_error(CMD, "no line of manifest \"%s\" has a source file that can be read",
                          m->path);
    return code;
}
