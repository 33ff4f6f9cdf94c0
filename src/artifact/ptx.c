/* The PTX check: one pass over the text, reading the .target and .entry
 * directives on the way. A file cut short inside a function is found by
 * its unbalanced braces. */
#include "artifact/ptx.h"

#include <string.h>

#include "artifact/format.h"

static int is_ident(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '%';
}

/* The word after a directive: skip blanks, then identifier characters. */
static size_t word_after(const unsigned char *p, const unsigned char *end,
                         const unsigned char **word)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    *word = p;
    while (p < end && (is_ident(*p) || *p == '.'))
        p++;
    return (size_t)(p - *word);
}

static int directive_at(const unsigned char *p, const unsigned char *end, const char *name)
{
    size_t n = strlen(name);
    return (size_t)(end - p) > n && memcmp(p, name, n) == 0 && (p[n] == ' ' || p[n] == '\t');
}

/* No NUL or control bytes, braces balanced outside comments and strings,
 * and the .target and .entry directives. */
int progcache__ptx_check(progcache__verdict *v)
{
    const unsigned char *p = v->data, *end = v->data + progcache__text_length(v->data, v->size);
    enum { CODE, LINE_COMMENT, BLOCK_COMMENT, STRING } state = CODE;
    long depth = 0, line = 1;
    for (; p < end; p++) {
        unsigned char c = *p;
        if (c == '\n')
            line++;
        if (c == '\0')
            return progcache__verdict_invalid(v, "a NUL byte inside the text (offset %zu)",
                                              (size_t)(p - v->data));
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != '\f' && c != '\v')
            return progcache__verdict_invalid(v, "control byte 0x%02x at line %ld: not PTX text",
                                              c, line);
        switch (state) {
        case LINE_COMMENT:
            if (c == '\n')
                state = CODE;
            continue;
        case BLOCK_COMMENT:
            if (c == '*' && p + 1 < end && p[1] == '/') {
                state = CODE;
                p++;
            }
            continue;
        case STRING:
            if (c == '\\' && p + 1 < end)
                p++;
            else if (c == '"')
                state = CODE;
            continue;
        case CODE: break;
        }
        if (c == '/' && p + 1 < end && (p[1] == '/' || p[1] == '*')) {
            state = p[1] == '/' ? LINE_COMMENT : BLOCK_COMMENT;
            p++;
        } else if (c == '"') {
            state = STRING;
        } else if (c == '{') {
            depth++;
        } else if (c == '}') {
            if (--depth < 0)
                return progcache__verdict_invalid(v, "a '}' without its '{' at line %ld", line);
        } else if (c == '.' && (p == v->data || !is_ident(p[-1]))) {
            const unsigned char *word;
            size_t n;
            if (directive_at(p, end, ".target") && !v->out->arch[0]) {
                n = word_after(p + 7, end, &word);
                /* The struct may hold an earlier artifact's longer arch. */
                if (n && n < sizeof v->out->arch) {
                    memcpy(v->out->arch, word, n);
                    v->out->arch[n] = '\0';
                }
            } else if (directive_at(p, end, ".entry")) {
                n = word_after(p + 6, end, &word);
                if (n)
                    progcache__verdict_name(v, (const char *)word, n);
            }
        }
    }
    if (state == BLOCK_COMMENT || state == STRING)
        return progcache__verdict_invalid(v, "cut short inside a %s",
                                          state == STRING ? "string" : "comment");
    if (depth > 0)
        return progcache__verdict_invalid(v, "cut short: %ld '{' never closed", depth);
    if (!v->out->arch[0])
        return progcache__verdict_invalid(v, "no .target directive");
    return 1;
}
