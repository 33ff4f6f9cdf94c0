/* Internal: the ustar archives of progcache export/import (the format in
 * archive_ustar.c and archive_pax.c, export in archive.c, import in
 * archive_import.c; docs/FORMAT.md, "Archives"). Exposed for the unit
 * tests. */
#ifndef PROGCACHE_STORE_ARCHIVE_H
#define PROGCACHE_STORE_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/admin.h"
#include "progcache/file.h"

#define TAR_BLOCK 512
/* The largest pax extended header (or other member that is not an entry)
 * import reads. */
#define PAX_MAX (1u << 20)

/* What a member name is to import. */
typedef enum tar_name_kind {
    TAR_NAME_BAD = 0,  /* not part of a cache: the archive is refused */
    TAR_NAME_DIR = 1,  /* entries/ or entries/<2 hex>/ */
    TAR_NAME_ENTRY = 2, /* entries/<2 hex>/<62 hex>: rel and shard are set */
    TAR_NAME_NVRTC = 3  /* progcache/nvrtc: the exporter's NVRTC records (dir/dir.h) */
} tar_name_kind;

/* Classify a member name (an optional leading "./" is dropped). For an
 * entry, rel receives "entries/ab/<62 hex>" (80 bytes) and shard 0xab. */
tar_name_kind progcache__tar_name(const char *name, char rel[80], int *shard);

/* A parsed header block. */
typedef struct tar_header {
    char name[260]; /* prefix "/" name, for POSIX ustar */
    char type;      /* typeflag; '\0' is normalised to '0' */
    uint64_t size;
    int64_t mtime;
    /* From a pax header before it: the entry's records (the extended
     * attribute user.progcache.records, as GNU tar --xattrs writes it),
     * records_len bytes at records_at (within the pax header's data for
     * progcache__tar_pax; in the archive once import placed them). */
    uint64_t records_at;
    size_t records_len;
} tar_header;

/* The pax record that carries an entry's records (docs/FORMAT.md,
 * "Archives"). */
#define PAX_RECORDS_KEY "SCHILY.xattr.user.progcache.records"

/* Parse one 512-byte block: 1 a header, 0 an all-zero block (the end),
 * -1 not a valid ustar header (why says what). */
int progcache__tar_parse(tar_header *out, const unsigned char block[TAR_BLOCK], char *why,
                         size_t why_len);

/* Apply the records of a pax extended header (data, len bytes) to the next
 * member: path and size override its header; PAX_RECORDS_KEY sets
 * records_at and records_len. 0, or -1 (why) when the records are
 * malformed. */
int progcache__tar_pax(tar_header *next, int *has_path, int *has_size, const char *data, size_t len,
                       char *why, size_t why_len);

/* Fill a ustar header block for a regular file. 0, or -1 when size does
 * not fit in the header's 11 octal digits (8 GiB). */
int progcache__tar_make(unsigned char block[TAR_BLOCK], const char *name, uint64_t size,
                        int64_t mtime);

/* The checks every export/import function makes: file is a cache
 * directory (*fs), out carries a known version (it is zeroed), and the
 * caller's options (NULL: defaults) are loaded into opts by the versioned
 * struct rule (fs NULL: no cache directory is checked). fn names the
 * caller in messages. PROGCACHE_OK or
 * PROGCACHE_EINVAL. */
int progcache__archive_args(progcache_file **fs, progcache_archive_result *out,
                            progcache_file *file, const progcache_archive_options *caller,
                            progcache_archive_options *opts, const char *fn);

#endif
