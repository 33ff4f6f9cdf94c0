/* Internal: NVRTC, opened with dlopen on first need and resolved into a
 * function table once per process (nvrtc_lib.c; docs/CUDA.md, "NVRTC is
 * loaded when a compile needs it"). Nothing links libnvrtc: a cache hit,
 * and every tool but a compile, runs on a node without it. */
#ifndef PROGCACHE_KEY_NVRTC_LIB_H
#define PROGCACHE_KEY_NVRTC_LIB_H

#include <limits.h>
#include <nvrtc.h>

#include "elf_note.h"

/* The entry points progcache uses, named as NVRTC names them. */
typedef struct progcache__nvrtc_api {
    nvrtcResult (*nvrtcVersion)(int *major, int *minor);
    const char *(*nvrtcGetErrorString)(nvrtcResult result);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *src, const char *name,
                                      int num_headers, const char *const *headers,
                                      const char *const *include_names);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);
    nvrtcResult (*nvrtcAddNameExpression)(nvrtcProgram prog, const char *name_expression);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int num_options,
                                       const char *const *options);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
    nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char *ptx);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);
    nvrtcResult (*nvrtcGetLTOIRSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetLTOIR)(nvrtcProgram prog, char *ltoir);
    nvrtcResult (*nvrtcGetLoweredName)(nvrtcProgram prog, const char *name_expression,
                                       const char **lowered_name);
    nvrtcResult (*nvrtcGetPCHCreateStatus)(nvrtcProgram prog);
    nvrtcResult (*nvrtcGetPCHHeapSizeRequired)(nvrtcProgram prog, size_t *size);
    int major, minor; /* nvrtcVersion's answer, asked once at load */
} progcache__nvrtc_api;

/* A library file as the records of NVRTC versions name it: its real path,
 * size, change time (a reinstall or an update in place changes the change
 * time even when the packaged modification time is kept) and GNU build ID
 * (another build at the same path with the same size and change time: a
 * node of a fleet sharing the cache directory, a copy that kept its
 * times). */
typedef struct progcache__nvrtc_file {
    char path[PATH_MAX];
    long long size;
    long long ctime_sec;
    long ctime_nsec;
    unsigned char build_id[PROGCACHE__BUILD_ID_MAX];
    size_t build_id_len; /* 0: the file has none (or could not be read) */
} progcache__nvrtc_file;

/* Load NVRTC, once per process: $PROGCACHE_NVRTC_LIBRARY when set (that
 * file only), else <the toolkit's lib dir at build time>/libnvrtc.so.N,
 * else libnvrtc.so.N through the dynamic loader's search path. PROGCACHE_OK
 * with the table, or PROGCACHE_ENOCUDA (the CUDA component this needs is
 * not on this machine) with a message that says "no NVRTC", where it
 * looked and what to do. Later calls give the same answer
 * at once. Thread-safe. */
int progcache__nvrtc_load(const progcache__nvrtc_api **api);

/* The table when NVRTC is loaded already, else NULL; never loads. */
const progcache__nvrtc_api *progcache__nvrtc_loaded(void);

/* The file the load would open, found with a stat and without mapping it:
 * the setting's path, else the build-time path. PROGCACHE_OK, or
 * PROGCACHE_ENOTFOUND (no message) when neither names a file: then only a
 * load can tell what the search path holds. */
int progcache__nvrtc_candidate(progcache__nvrtc_file *out);

/* The loaded library's file (PROGCACHE_OK), or PROGCACHE_ENOTFOUND. */
int progcache__nvrtc_loaded_file(progcache__nvrtc_file *out);

/* Whether two files are the same (path, size, change time, build ID). */
int progcache__nvrtc_same_file(const progcache__nvrtc_file *a, const progcache__nvrtc_file *b);

/* What a record of the cache said of a file (the NVRTC at that file is
 * major.minor): remembered for this process, so that key derivation
 * without a cache at hand (the toolkit's identity) gets the same answer
 * without loading NVRTC while that file is unchanged. */
void progcache__nvrtc_remember(const progcache__nvrtc_file *file, int major, int minor);

/* The version of the NVRTC that would compile, without loading it: the
 * loaded one's, else $PROGCACHE_NVRTC_VERSION, else a remembered record
 * of the candidate file as it is now. PROGCACHE_OK, PROGCACHE_ENOTFOUND
 * (none of these; no message), or PROGCACHE_EINVAL (a setting that is not
 * a version). *how says which ("loaded", "PROGCACHE_NVRTC_VERSION",
 * "record"). */
int progcache__nvrtc_version_known(int *major, int *minor, const char **how);

#endif
