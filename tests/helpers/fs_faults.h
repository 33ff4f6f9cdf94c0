/* The file-system fault table, written once: the failures the tests
 * inject into the Nth system call of a kind (src/util/fs.c), each with
 * the words the resulting message must carry. */
#ifndef PROGCACHE_TESTS_FS_FAULTS_H
#define PROGCACHE_TESTS_FS_FAULTS_H

#include <stddef.h>

#include "fs.h"

typedef struct test_fs_fault {
    progcache__fs_op op;
    int err;
    const char *words; /* in the message (either case of a first letter) */
} test_fs_fault;

/* A full disk, an I/O error, read-only media, no permission. */
extern const test_fs_fault test_fs_faults[];
extern const size_t test_fs_num_faults;

#endif
