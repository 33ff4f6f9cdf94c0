/* progcache warm: what the command's two files share (cmd_warm.c runs the
 * compiles, warm_manifest.c reads the manifest). */
#ifndef PROGCACHE_TOOL_WARM_H
#define PROGCACHE_TOOL_WARM_H

#include "progcache/cuda.h"
#include "tool.h"

typedef enum outcome { PENDING, COMPILED, CACHED, FAILED } outcome;

typedef struct program {
    int line;
    char *source_arg;  /* as written */
    char *source_path; /* resolved against the manifest's directory */
    char *source;
    size_t source_len;
    progcache_target target;
    char *name;
    char **exprs;
    size_t num_exprs;
    int exprs_bytes;
    unsigned char *digest;
    size_t digest_len;
    tool_headers headers; /* --header NAME=FILE: in memory */
    char **options; /* as the line gives them (progcache_warm adds -arch) */
    size_t num_options;
} program;

typedef struct manifest {
    const char *path;
    uint64_t max_size; /* bound on the manifest and each source */
    program *items;
    size_t len;
    size_t skipped; /* lines whose source file could not be read (issue 35) */
} manifest;

/* Read m->path (bounded by m->max_size), parse each line into m->items,
 * then read every source: a typo in the manifest surfaces before anything
 * is compiled. EXIT_OK, or an exit code after a message naming
 * MANIFEST:LINE. A line whose source file cannot be read is said, left out
 * and counted in m->skipped (the others are still compiled); when none is
 * left, EXIT_FAILED. The caller frees m->items with warm_free_program. */
int warm_read_manifest(manifest *m);
void warm_free_program(program *p);

#endif
