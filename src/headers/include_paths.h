/* Internal: what an NVRTC option list says about where headers are
 * (include_paths.c; docs/KEY.md, "Where NVRTC looks"). */
#ifndef PROGCACHE_KEY_INCLUDE_PATHS_H
#define PROGCACHE_KEY_INCLUDE_PATHS_H

#include <stddef.h>

#include "progcache/key.h"

typedef struct progcache__include_paths {
    const char **dirs; /* -I / --include-path, in order (borrowed strings) */
    size_t num_dirs;
    const char **pre; /* --pre-include / -include files, in order */
    size_t num_pre;
    int no_source_include; /* --no-source-include */
    /* --use-bundled-headers=<dir> (NVRTC 13.3+): NVRTC installs its own
     * CUDA and CCCL headers there and searches it after the include
     * paths. NULL when not given. */
    const char *bundled;
} progcache__include_paths;

/* Read o's options as NVRTC does: "-Idir", "-I=dir", "-I" "dir",
 * "--include-path=dir", "--include-path" "dir", the same two forms of
 * --pre-include, -include and --use-bundled-headers, and
 * --no-source-include. PROGCACHE_OK,
 * PROGCACHE_EUNSAFEKEY (an empty include path or pre-include) or
 * PROGCACHE_ENOMEM. */
int progcache__include_paths_parse(progcache__include_paths *out,
                                   const progcache_key_nvrtc_options *o);
void progcache__include_paths_free(progcache__include_paths *p);

/* dir + "/" + name, as NVRTC forms a candidate ("." adds nothing); NULL
 * (message set) when longer than PATH_MAX or out of memory. malloc'd. */
char *progcache__path_join(const char *dir, const char *name);

/* The directory part of path: "." for none, "/" for the root. malloc'd;
 * NULL when out of memory. */
char *progcache__path_dir(const char *path);

#endif
