/* Shard records (file_shard_record.c) as the measurements that use them
 * see them: the whole-shard measurement there, and the catch-up spread
 * over puts (file_catch_up.c). docs/FORMAT.md, "Shard records". */
#ifndef PROGCACHE_FILE_RECORD_H
#define PROGCACHE_FILE_RECORD_H

#include <stdint.h>

#include "store/file/file_store.h"

/* The most rows a record holds (24 bytes each: 6 MiB), so that reading one
 * is bounded; a shard with more entries is measured without one. */
#define RECORD_MAX_ROWS (1u << 18)
/* A row's size is below this, so that the sum of RECORD_MAX_ROWS rows
 * cannot overflow (a record a team member forged is damaged, not UB). */
#define ROW_SIZE_MAX ((uint64_t)1 << 44)

typedef struct record_row {
    uint64_t ino;  /* d_ino of the name when it was measured */
    uint64_t name; /* hash of the name: an inode number reused by another name */
    uint64_t size; /* st_size then */
} record_row;

uint64_t progcache__file_record_mix(uint64_t x);
/* Rows sorted by (inode, name hash). */
int progcache__file_record_cmp(const void *a, const void *b);
/* Whether every row's size is below ROW_SIZE_MAX. */
int progcache__file_record_bounded(const record_row *rows, uint32_t n);
/* Whether this open may write records (and the catch-up's progress). */
int progcache__file_record_may_write(const file_store *fs);
/* The record of shard for the shard directory dir_ino, when there is one
 * this process can trust: its rows (caller frees) and *n; else NULL. A
 * record this user may not trust is counted in files_refused and *refused
 * set: it is neither used nor replaced. */
record_row *progcache__file_record_read(file_store *fs, int shard, uint64_t dir_ino, uint32_t *n,
                                        int *refused);
/* Something at rel of progcache/shards/ that cannot be used (a link, a
 * FIFO, a folder): counted in files_refused (links in links_refused), and
 * said once per handle. */
void progcache__file_record_refused(file_store *fs, const char *rel, int err);
/* A measurement of a shard through its record, name by name: the whole
 * one (file_shard_record.c) and the slices of file_shard_slice.c. */
typedef struct record_measure {
    const record_row *old; /* the record's rows, sorted, or NULL */
    uint32_t old_n;
    uint64_t salt;     /* which sixteenth of known names is re-checked */
    uint64_t unknown;  /* names stat'ed for not being in the record */
    uint64_t statted;  /* names stat'ed in all */
    int stale;         /* a re-checked name's size had changed */
} record_measure;
/* A listed name as the measurement takes it: its row (the size the record
 * knows), the record's row (NULL: none), and whether its size is to be
 * stat'ed (not in the record, or re-checked). */
typedef struct record_name {
    record_row row;
    const record_row *was;
    int need;
} record_name;
/* 0 when the name (listed with inode number ino and type type) is not an
 * entry to measure; else 1 and *out. */
int progcache__file_record_look(const record_measure *m, uint64_t ino, unsigned char type,
                                const char *name, record_name *out);
/* Stat the name of *n in dirfd: 1 with n->row.size set (and m's counts),
 * 0 when it is gone or no longer a regular file. */
int progcache__file_record_stat(record_measure *m, int dirfd, const char *name, record_name *n);
/* Whether a measurement that saw n names, stat'ed statted of them for
 * not being in the record of old_n rows, and found a stale size (stale)
 * writes the record again: only past a bound (a write costs more than a
 * few dozen stats). */
int progcache__file_record_due(int stale, uint64_t statted, uint64_t old_n, uint64_t n);
/* Publish rows (sorted here) as shard's record. Best effort. */
void progcache__file_record_write(file_store *fs, int shard, uint64_t dir_ino, record_row *rows,
                                  uint32_t n);
/* Names stat'ed by a measurement, for the test hook and entries_scanned. */
void progcache__file_record_statted(uint64_t names);

#endif
