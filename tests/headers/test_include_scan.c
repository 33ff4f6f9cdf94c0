/* The include scanner (src/headers/include_scan.c): every directive found,
 * whatever #if surrounds it; nothing found in comments, strings, raw
 * strings or character literals; line splices; __has_include probes;
 * computed includes; any bytes read safely. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "headers/include_scan.h"

typedef struct found {
    char text[64][128];
    size_t n;
} found;

/* Each include as "<line>:<q|a|c>[n][p]:<name>". */
static int record(void *ctx, const progcache__include *inc)
{
    found *f = ctx;
    CHECK(f->n < 64);
    char form = inc->form == PROGCACHE__INCLUDE_QUOTED   ? 'q'
                : inc->form == PROGCACHE__INCLUDE_ANGLED ? 'a'
                                                         : 'c';
    snprintf(f->text[f->n++], sizeof f->text[0], "%u:%c%s%s:%.*s", inc->line, form,
             inc->next ? "n" : "", inc->probe ? "p" : "", (int)inc->name_len, inc->name);
    return 0;
}

static void expect(const char *src, const char *const *want, size_t n)
{
    found f;
    memset(&f, 0, sizeof f);
    CHECK_OK(progcache__include_scan(src, strlen(src), record, &f));
    if (f.n != n) {
        fprintf(stderr, "source:\n%s\nfound %zu, expected %zu:\n", src, f.n, n);
        for (size_t i = 0; i < f.n; i++)
            fprintf(stderr, "  %s\n", f.text[i]);
    }
    CHECK(f.n == n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(f.text[i], want[i]))
            fprintf(stderr, "source:\n%s\nitem %zu: %s, expected %s\n", src, i, f.text[i], want[i]);
        CHECK(!strcmp(f.text[i], want[i]));
    }
}

static void test_directives(void)
{
    const char *src = "#include \"a.h\"\n"
                      "  #  include <b/c.h>\n"
                      "#if 0\n"
                      "#include \"never.h\"\n"
                      "#endif\n"
                      "#include_next <n.h>\n"
                      "/* c */ #include \"after_comment.h\"\n"
                      "#define X \"x.h\"\n"
                      "#include X\n"
                      "#embed \"data.bin\"\n"
                      "#includex \"not.h\"\n"
                      "#pragma once\n";
    const char *want[] = {"1:q:a.h",          "2:a:b/c.h", "4:q:never.h", "6:an:n.h",
                          "7:q:after_comment.h", "9:c:X",   "10:q:data.bin"};
    expect(src, want, sizeof want / sizeof want[0]);
}

static void test_not_directives(void)
{
    const char *src = "// #include \"comment.h\"\n"
                      "/* #include \"block.h\"\n"
                      "   #include \"still.h\" */\n"
                      "const char *s = \"#include \\\"string.h\\\"\";\n"
                      "const char *r = R\"x(\n#include \"raw.h\"\n)x\";\n"
                      "char c = '#'; int n = 1'000'000;\n"
                      "x = 1; #include \"not_first.h\"\n"
                      "const char *u = u8R\"(\n#include \"raw2.h\"\n)\";\n"
                      "#include \"real.h\"\n";
    const char *want[] = {"13:q:real.h"};
    expect(src, want, 1);
}

static void test_splices_and_probes(void)
{
    const char *src = "#inc\\\nlude \"spliced.h\"\n"
                      "#if __has_include(<opt.h>) && __has_include_next(\"q.h\")\n"
                      "#endif\n"
                      "#if defined(__has_include)\n"
                      "#endif\n"
                      "#define H(x) __has_include(x)\n"
                      "#include\n"
                      "#include \"unterminated.h\n"
                      "#include <>\n";
    const char *want[] = {"1:q:spliced.h", "3:ap:opt.h", "3:qnp:q.h", "7:cp:x",
                          "8:c:",          "9:c:unterminated.h", "10:c:"};
    expect(src, want, sizeof want / sizeof want[0]);
}

/* Any bytes: truncated at every length, with NULs and high bytes. */
static void test_any_bytes(void)
{
    const char src[] = "#include \"a.h\"\n/* x */ R\"d(\n)d\" '\\'' \"\\\n\" "
                       "\x01\xff\0\n#include <z>\n"
                       "/* unterminated";
    found f;
    for (size_t len = 0; len <= sizeof src - 1; len++) {
        memset(&f, 0, sizeof f);
        CHECK_OK(progcache__include_scan(src, len, record, &f));
    }
    /* The NUL does not end the scan. */
    CHECK(f.n == 2 && !strcmp(f.text[1], "5:a:z"));
    CHECK_OK(progcache__include_scan(NULL, 0, record, &f));
}

static int stop_at_first(void *ctx, const progcache__include *inc)
{
    (void)inc;
    ++*(int *)ctx;
    return 7;
}

static void test_stop(void)
{
    int calls = 0;
    const char *two = "#include \"a\"\n#include \"b\"\n";
    CHECK(progcache__include_scan(two, strlen(two), stop_at_first, &calls) == 7);
    CHECK(calls == 1);
}

int main(void)
{
    test_directives();
    test_not_directives();
    test_splices_and_probes();
    test_any_bytes();
    test_stop();
    printf("include scanner: ok\n");
    return 0;
}
