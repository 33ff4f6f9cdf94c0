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
/* A name's hash for its row, never 0. */
uint64_t progcache__file_record_name_hash(const char *name);
/* Rows sorted by (inode, name hash); the row of that pair, or NULL. */
int progcache__file_record_cmp(const void *a, const void *b);
const record_row *progcache__file_record_find(const record_row *rows, uint32_t n, uint64_t ino,
                                              uint64_t name);
/* Whether every row's size is below ROW_SIZE_MAX. */
int progcache__file_record_bounded(const record_row *rows, uint32_t n);
/* Whether a known name is stat'ed again by a measurement whose salt is
 * salt (one in 16, another sixteenth at each change of the shard). */
int progcache__file_record_recheck(uint64_t name, uint64_t salt);
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
