/* Test helper: read cuda-core-key-vectors.jsonl (one JSON object a line)
 * with a small JSON parser, so the C tests need no JSON library. */
#ifndef PROGCACHE_TEST_KEY_VECTORS_H
#define PROGCACHE_TEST_KEY_VECTORS_H

#include <stddef.h>

typedef struct key_vector {
    int line;        /* 1-based line in the file */
    int is_rejected; /* a "rejected" line: cuda.core refused these inputs */

    /* Key vectors. Strings are NUL-terminated; code may hold any bytes. */
    char *code;
    size_t code_len;
    char *target;
    char **argv;
    size_t argc;
    char *options_name;
    char **names; /* as in the file: tagged "s:..." or "b:..." */
    size_t num_names;
    unsigned char *digest; /* NULL when extra_digest_hex is null */
    size_t digest_len;
    char *key_hex;

    /* Rejection lines. */
    char *rejected; /* the Python ProgramOptions arguments, as text */
    char *error;
    char *msg;
} key_vector;

/* Load every line of path. Returns the number of vectors (>= 0) and sets
 * *out (free with key_vectors_free), or -1 (message on stderr) when the
 * file cannot be read or parsed. */
int key_vectors_load(key_vector **out, const char *path);
void key_vectors_free(key_vector *v, int n);

/* Decode hex into a malloc'd buffer; NULL on bad hex. */
unsigned char *key_vectors_unhex(const char *hex, size_t *len);

#endif
