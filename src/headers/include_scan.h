/* Internal: finding the #include directives of C++ text (include_scan.c),
 * for the key of a program that reads headers (docs/KEY.md, "Headers on
 * disk"). No preprocessing: every directive is reported, whatever #if
 * surrounds it, which over-approximates what NVRTC reads. */
#ifndef PROGCACHE_KEY_INCLUDE_SCAN_H
#define PROGCACHE_KEY_INCLUDE_SCAN_H

#include <stddef.h>

typedef enum progcache__include_form {
    PROGCACHE__INCLUDE_QUOTED = 0,  /* #include "name" */
    PROGCACHE__INCLUDE_ANGLED = 1,  /* #include <name> */
    PROGCACHE__INCLUDE_COMPUTED = 2 /* #include MACRO: name is the directive's text */
} progcache__include_form;

/* One directive, borrowed from the scanned text for the callback's
 * duration. */
typedef struct progcache__include {
    const char *name; /* between the quotes or brackets (not NUL-terminated) */
    size_t name_len;
    progcache__include_form form;
    int next;      /* #include_next: the search goes on after the includer's directory */
    int probe;     /* __has_include(...): asks whether the file exists, reads nothing */
    unsigned line; /* 1-based line of the directive */
} progcache__include;

/* Return 0 to go on; anything else stops the scan and is returned. */
typedef int (*progcache__include_fn)(void *ctx, const progcache__include *inc);

/* Call fn for every #include, #include_next, #embed and __has_include /
 * __has_include_next in text, in order. Comments, string and character
 * literals (raw strings too) and line splices are skipped as the
 * preprocessor does; a directive is a '#' first on its line. The text may
 * hold any bytes (NUL included). Returns 0 or fn's value. */
int progcache__include_scan(const char *text, size_t len, progcache__include_fn fn, void *ctx);

#endif
