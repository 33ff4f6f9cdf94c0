/* Finding the #include directives of C++ text without preprocessing it.
 *
 * The scanner reads the text as translation phases 1-3 do, as far as
 * includes care: line splices (backslash-newline) join lines, comments
 * are skipped, and so are string and character literals, raw strings
 * included, so that text in them never looks like a directive. A
 * directive is a '#' that is the first token of a line. Every directive
 * is taken, whatever #if surrounds it: the key then covers a superset of
 * what NVRTC reads, never less. __has_include(...) anywhere outside
 * comments and literals is reported as a probe: whether the file exists
 * changes the program even though it is not read.
 *
 * Any bytes are accepted; an unterminated comment or literal ends the
 * scan or its line, never a read past the end. */
#include "headers/include_scan.h"

#include <string.h>

/* The longest header name reported as written; a longer one is reported
 * as COMPUTED (the key cannot see it), which refuses the key. */
#define NAME_MAX_LEN 4096

typedef struct cursor {
    const char *text;
    size_t len;
    size_t pos;
    unsigned line;
    char name[NAME_MAX_LEN + 1];
} cursor;

/* Skip the line splices at pos: a backslash followed by a newline (or
 * CR LF) is not there. */
static void skip_splices(cursor *c)
{
    for (;;) {
        if (c->pos + 1 < c->len && c->text[c->pos] == '\\' && c->text[c->pos + 1] == '\n') {
            c->pos += 2;
            c->line++;
        } else if (c->pos + 2 < c->len && c->text[c->pos] == '\\' &&
                   c->text[c->pos + 1] == '\r' && c->text[c->pos + 2] == '\n') {
            c->pos += 3;
            c->line++;
        } else {
            return;
        }
    }
}

/* The next logical character, or -1 at the end (not consumed). */
static int peek(cursor *c)
{
    skip_splices(c);
    return c->pos < c->len ? (unsigned char)c->text[c->pos] : -1;
}

/* The logical character after the next one, or -1. */
static int peek2(cursor *c)
{
    skip_splices(c);
    if (c->pos >= c->len)
        return -1;
    size_t pos = c->pos;
    unsigned line = c->line;
    c->pos++;
    int ch = peek(c);
    c->pos = pos;
    c->line = line;
    return ch;
}

static int next(cursor *c)
{
    int ch = peek(c);
    if (ch < 0)
        return -1;
    c->pos++;
    if (ch == '\n')
        c->line++;
    return ch;
}

static int is_ident(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '$' || ch >= 0x80;
}

static int is_blank(int ch)
{
    return ch == ' ' || ch == '\t' || ch == '\f' || ch == '\v' || ch == '\r';
}

/* After the opening of a block comment: to its end (or the text's). */
static void skip_block_comment(cursor *c)
{
    int prev = 0, ch;
    while ((ch = next(c)) >= 0) {
        if (prev == '*' && ch == '/')
            return;
        prev = ch;
    }
}

/* After "//": to the end of the line (the newline is left). */
static void skip_line_comment(cursor *c)
{
    int ch;
    while ((ch = peek(c)) >= 0 && ch != '\n')
        next(c);
}

/* Skip blanks and comments within a line. Returns the next character. */
static int skip_space(cursor *c)
{
    for (;;) {
        int ch = peek(c);
        if (is_blank(ch)) {
            next(c);
        } else if (ch == '/' && peek2(c) == '*') {
            next(c);
            next(c);
            skip_block_comment(c);
        } else if (ch == '/' && peek2(c) == '/') {
            skip_line_comment(c);
        } else {
            return ch;
        }
    }
}

/* After the opening quote of a "string" or 'c' literal: to the closing one,
 * or to the end of the line for an unterminated literal. */
static void skip_literal(cursor *c, int quote)
{
    int ch;
    while ((ch = peek(c)) >= 0 && ch != '\n') {
        next(c);
        if (ch == '\\')
            next(c);
        else if (ch == quote)
            return;
    }
}

/* After R": a raw string, R"delim( ... )delim". The delimiter is at most
 * 16 characters; a malformed one makes it an ordinary string. Raw strings
 * are read byte by byte: splices are not undone inside them. */
static void skip_raw_string(cursor *c)
{
    char delim[17];
    size_t n = 0;
    size_t start = c->pos;
    while (c->pos < c->len && n < sizeof delim - 1) {
        char ch = c->text[c->pos];
        if (ch == '(')
            break;
        if (ch == ' ' || ch == ')' || ch == '\\' || ch == '\t' || ch == '\n' || ch == '"')
            break;
        delim[n++] = ch;
        c->pos++;
    }
    if (c->pos >= c->len || c->text[c->pos] != '(') {
        c->pos = start;
        skip_literal(c, '"');
        return;
    }
    c->pos++;
    while (c->pos < c->len) {
        char ch = c->text[c->pos++];
        if (ch == '\n')
            c->line++;
        if (ch == ')' && c->len - c->pos >= n + 1 && memcmp(c->text + c->pos, delim, n) == 0 &&
            c->text[c->pos + n] == '"') {
            c->pos += n + 1;
            return;
        }
    }
}

/* An identifier starting at the cursor into buf (cut at size-1). */
static size_t read_ident(cursor *c, char *buf, size_t size)
{
    size_t n = 0;
    int ch;
    while ((ch = peek(c)) >= 0 && is_ident(ch)) {
        next(c);
        if (n + 1 < size)
            buf[n++] = (char)ch;
    }
    buf[n] = '\0';
    return n;
}

static int is_literal_prefix(const char *id)
{
    static const char *const prefixes[] = {"L", "u", "U", "u8", "R", "LR", "uR", "UR", "u8R"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strcmp(id, prefixes[i]))
            return 1;
    return 0;
}

/* The header name after #include (or __has_include's parenthesis): "x",
 * <x>, or anything else (computed: the rest of the line). Calls fn. */
static int header_name(cursor *c, progcache__include *inc, progcache__include_fn fn, void *ctx,
                       int in_parens)
{
    int ch = skip_space(c);
    size_t n = 0;
    int close = ch == '"' ? '"' : ch == '<' ? '>' : 0;
    if (close) {
        next(c);
        inc->form = close == '"' ? PROGCACHE__INCLUDE_QUOTED : PROGCACHE__INCLUDE_ANGLED;
        while ((ch = peek(c)) >= 0 && ch != '\n' && ch != close) {
            next(c);
            if (n < NAME_MAX_LEN)
                c->name[n] = (char)ch;
            n++;
        }
        if (ch != close || n > NAME_MAX_LEN || n == 0) {
            /* Unterminated, empty or too long: what NVRTC would open
             * cannot be told. */
            inc->form = PROGCACHE__INCLUDE_COMPUTED;
            if (n > NAME_MAX_LEN)
                n = NAME_MAX_LEN;
        } else {
            next(c);
        }
    } else {
        inc->form = PROGCACHE__INCLUDE_COMPUTED;
        while ((ch = peek(c)) >= 0 && ch != '\n' && !(in_parens && ch == ')')) {
            next(c);
            if (n < NAME_MAX_LEN)
                c->name[n++] = (char)ch;
        }
        while (n && is_blank((unsigned char)c->name[n - 1]))
            n--;
    }
    c->name[n] = '\0';
    inc->name = c->name;
    inc->name_len = n;
    return fn(ctx, inc);
}

/* After '#' first on a line. Reports an include directive; the rest of
 * the line is left to the ordinary scan (an #if line may hold
 * __has_include). */
static int directive(cursor *c, progcache__include_fn fn, void *ctx)
{
    char word[16];
    progcache__include inc;
    memset(&inc, 0, sizeof inc);
    inc.line = c->line; /* where the directive starts */
    skip_space(c);
    read_ident(c, word, sizeof word);
    if (!strcmp(word, "include") || !strcmp(word, "embed")) {
        return header_name(c, &inc, fn, ctx, 0);
    } else if (!strcmp(word, "include_next")) {
        inc.next = 1;
        return header_name(c, &inc, fn, ctx, 0);
    }
    return 0;
}

/* After the identifier __has_include or __has_include_next. */
static int has_include(cursor *c, int is_next, progcache__include_fn fn, void *ctx)
{
    progcache__include inc;
    memset(&inc, 0, sizeof inc);
    inc.probe = 1;
    inc.next = is_next;
    inc.line = c->line;
    if (skip_space(c) != '(') {
        /* `defined(__has_include)` and the like: nothing is named. */
        return 0;
    }
    next(c);
    return header_name(c, &inc, fn, ctx, 1);
}

int progcache__include_scan(const char *text, size_t len, progcache__include_fn fn, void *ctx)
{
    cursor cur;
    cursor *c = &cur;
    c->pos = 0;
    c->text = text;
    c->len = text ? len : 0;
    c->line = 1;
    int line_start = 1, rc = 0;
    char id[32];
    while (!rc) {
        int ch = peek(c);
        if (ch < 0)
            break;
        if (ch == '\n') {
            next(c);
            line_start = 1;
        } else if (is_blank(ch) || (ch == '/' && (peek2(c) == '*' || peek2(c) == '/'))) {
            skip_space(c);
        } else if (ch == '#' && line_start) {
            next(c);
            line_start = 0;
            rc = directive(c, fn, ctx);
        } else if (ch == '"' || ch == '\'') {
            next(c);
            line_start = 0;
            skip_literal(c, ch);
        } else if (ch >= '0' && ch <= '9') {
            /* A pp-number: digit separators (1'000) are not literals. */
            line_start = 0;
            while ((ch = peek(c)) >= 0 && (is_ident(ch) || ch == '.' || ch == '\'')) {
                next(c);
                if ((ch == 'e' || ch == 'E' || ch == 'p' || ch == 'P') &&
                    (peek(c) == '+' || peek(c) == '-'))
                    next(c);
            }
        } else if (is_ident(ch)) {
            line_start = 0;
            read_ident(c, id, sizeof id);
            ch = peek(c);
            if (ch == '"' && strchr(id, 'R') && is_literal_prefix(id)) {
                next(c);
                skip_raw_string(c);
            } else if ((ch == '"' || ch == '\'') && is_literal_prefix(id)) {
                next(c);
                skip_literal(c, ch);
            } else if (!strcmp(id, "__has_include")) {
                rc = has_include(c, 0, fn, ctx);
            } else if (!strcmp(id, "__has_include_next")) {
                rc = has_include(c, 1, fn, ctx);
            }
        } else {
            next(c);
            line_start = 0;
        }
    }
    return rc;
}
