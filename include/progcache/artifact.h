/*
 * progcache/artifact.h - what an artifact is: CUBIN, PTX, LTO-IR or fatbin,
 * judged from its bytes, whether it is whole, for which architecture, and
 * which kernels it holds. Used by the admin functions (progcache/admin.h)
 * and by the stores' integrity checks; usable on any bytes.
 */
#ifndef PROGCACHE_ARTIFACT_H
#define PROGCACHE_ARTIFACT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What kind of artifact a cache entry holds, judged from its bytes. */
typedef enum progcache_kind {
    PROGCACHE_KIND_UNKNOWN = 0, /* none of the below (or empty) */
    PROGCACHE_KIND_CUBIN = 1,   /* a CUDA ELF file (NVRTC's CUBIN) */
    PROGCACHE_KIND_PTX = 2,     /* PTX assembly text */
    PROGCACHE_KIND_LTOIR = 3,   /* NVVM IR for link-time optimisation */
    PROGCACHE_KIND_FATBIN = 4,  /* a fat binary (several CUBIN/PTX inside) */
    /* Not an artifact: progcache's record of the headers a compile read
     * (docs/FORMAT.md, "Header manifests"), kept in the cache as an entry
     * of its own. Cache listings (progcache_file_foreach, verify) report
     * it; progcache_artifact_inspect(), which judges artifacts, does not. */
    PROGCACHE_KIND_MANIFEST = 5,
    /* Not an artifact either: every answer of one NVRTC compile that
     * `progcache exec` served (docs/FORMAT.md, "Compile bundles"), listed and
     * verified like a manifest. */
    PROGCACHE_KIND_BUNDLE = 6
} progcache_kind;

/* progcache_kind_name() : "CUBIN", "PTX", "LTO-IR", "fatbin" or "unknown".
 * Never NULL. */
PROGCACHE_API const char *progcache_kind_name(progcache_kind kind);

/*
 * progcache_artifact_info : what progcache_artifact_inspect() found. The
 * struct is the caller's (start from PROGCACHE_ARTIFACT_INFO_INIT); kernel
 * names live in memory released by progcache_artifact_info_release().
 */
typedef struct progcache_artifact_info {
    unsigned int version; /* PROGCACHE_ARTIFACT_INFO_VERSION */

    progcache_kind kind;
    /* 1 when the bytes are a whole, consistent artifact of that kind: for a
     * CUBIN every header, table and section lies inside the file; for PTX
     * the text has a .version directive, no NUL byte (but a final one) and
     * balanced braces; for fatbin and LTO-IR the headers and sizes agree.
     * An UNKNOWN artifact is never valid. */
    int valid;
    /* Why not valid, in words ("section 7 ends past the end of the
     * 3832-byte file"); "" when valid. */
    char reason[192];
    /* Target architecture: "sm_90" (CUBIN, from the ELF header, with an
     * "a"/"f" suffix when the CUBIN was built for one), the PTX .target,
     * the architectures of a fatbin ("sm_90,compute_80"), or "" when
     * unknown. */
    char arch[48];
    /* Kernels (entry functions): for a CUBIN the ELF symbols marked as
     * entry points, for PTX the .entry directives; names as in the binary
     * (mangled for C++ kernels that are not extern "C"). num_kernels names,
     * each NUL-terminated, one after another in kernels.data; read them
     * with progcache_artifact_kernel(). */
    size_t num_kernels;
    progcache_buf kernels;
} progcache_artifact_info;

#define PROGCACHE_ARTIFACT_INFO_VERSION 1
#define PROGCACHE_ARTIFACT_INFO_INIT \
    PROGCACHE__INIT(progcache_artifact_info, PROGCACHE_ARTIFACT_INFO_VERSION)

/*
 * progcache_artifact_inspect() : classify and check artifact bytes, and
 * read the architecture and kernel names.
 * Every read is bounds-checked against size: any bytes at all (truncated,
 * bit-flipped, hostile) give an answer, never a crash.
 * @param out  [out] a struct set to PROGCACHE_ARTIFACT_INFO_INIT or used
 *             before (its kernels memory is reused).
 * @return PROGCACHE_OK (whatever the verdict: see out->valid);
 *         PROGCACHE_EINVAL (out NULL, data NULL with size > 0, unknown
 *         out->version); PROGCACHE_ENOMEM.
 * Thread-safe.
 */
PROGCACHE_API int progcache_artifact_inspect(progcache_artifact_info *out, const void *data,
                                             size_t size);

/* progcache_artifact_kernel() : the index-th kernel name, or NULL past the
 * last. Borrowed from info. */
PROGCACHE_API const char *progcache_artifact_kernel(const progcache_artifact_info *info,
                                                    size_t index);

/* progcache_artifact_info_release() : free info's kernel names and reset it
 * to PROGCACHE_ARTIFACT_INFO_INIT. NULL-safe. */
PROGCACHE_API void progcache_artifact_info_release(progcache_artifact_info *info);

/*
 * progcache_lowered_names_next() : walk a PROGCACHE_RECORD_LOWERED_NAMES
 * record (progcache/store.h; docs/FORMAT.md, "Lowered names"): the pair at
 * *pos (start at 0), *expression the name expression with its tag ("s:matmul<16, Relu>";
 * "b:" for one a Python caller gave as bytes), *lowered its lowered name,
 * both borrowed from record; *pos moves past the pair.
 * @return 1 for a pair; 0 at the end; PROGCACHE_ECORRUPT when the record
 *         is not well formed there (no message).
 */
PROGCACHE_API int progcache_lowered_names_next(const unsigned char *record, size_t len,
                                               size_t *pos, const char **expression,
                                               const char **lowered);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_ARTIFACT_H */
