/* Values that name themselves, for the tests in which many processes
 * write and read one key space at once: four uint32 (magic, key id,
 * version, length), then bytes derived from key and version, so a reader
 * can tell a right value from a torn, mixed or foreign one. */
#ifndef PROGCACHE_TESTS_VALUES_H
#define PROGCACHE_TESTS_VALUES_H

#include <stddef.h>
#include <stdint.h>

/* A test's family of values: its magic, and the length of the value of
 * (key, version): min_len + (key * key_mul + version * version_mul) %
 * len_span. The bytes come from a generator seeded with
 * key * 2654435761 ^ version * seed_mul. */
typedef struct test_values {
    uint32_t magic;
    uint32_t min_len, len_span, key_mul, version_mul, seed_mul;
} test_values;

/* Writes the value of (key, version) to out (room for the longest one);
 * returns its length. */
size_t test_value_make(unsigned char *out, const test_values *v, uint32_t key, uint32_t version);

/* Whether bytes are exactly a value of this family for key (any version);
 * scratch has room for the longest value. */
int test_value_ok(const unsigned char *bytes, size_t size, const test_values *v, uint32_t key,
                  unsigned char *scratch);

#endif
