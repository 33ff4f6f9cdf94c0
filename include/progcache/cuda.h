/*
 * progcache/cuda.h - compile with NVRTC, load with the CUDA driver, cache
 * in between.
 *
 * Three parts, each usable alone:
 *  - progcache_cuda_load(): the CUDA driver, opened at run time with
 *    dlopen("libcuda.so.1") and handed back as a typed function table. Nothing
 *    in progcache links libcuda, so a program built on progcache starts on a
 *    machine without a driver and can say so in words instead of failing in
 *    the dynamic loader.
 *  - progcache_nvrtc_compile(): NVRTC (linked normally) from C++ source to
 *    CUBIN, PTX or LTO-IR, with the whole NVRTC log on failure.
 *  - progcache_compile_or_load(): key -> lookup -> (compile -> store) ->
 *    load -> kernel, timed step by step, self-healing, never losing a
 *    compiled artifact to a failing store. docs/CUDA.md walks through it.
 *
 * This header includes the toolkit's <cuda.h> for the driver's types
 * (CUresult, CUlibrary, ...); the toolkit is a build dependency, the driver
 * is not.
 */
#ifndef PROGCACHE_CUDA_H
#define PROGCACHE_CUDA_H

#include <cuda.h>

#include "common.h"
#include "key.h"
#include "cache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===========================================================================
 * The driver function table
 * ======================================================================== */

/*
 * progcache_cuda_api : the driver entry points progcache resolved, for
 * calling the driver without linking it.
 *
 * Each member has the signature of the driver function of the same name in
 * the toolkit's <cuda.h>, in the version that header selects (cuMemAlloc is
 * cuMemAlloc_v2, cuEventElapsedTime is cuEventElapsedTime_v2, ...). Note
 * that <cuda.h> #defines several of these names to their _v2 spelling; the
 * member names follow the same macros, so `api->cuMemAlloc(&p, n)` compiles
 * to the _v2 member and calls the _v2 entry point, as a direct call would.
 * The table is resolved for the legacy default stream: do not rely on
 * per-thread default stream semantics (__CUDA_API_PER_THREAD_DEFAULT_STREAM)
 * through it.
 *
 * Every member is non-NULL in a table returned by progcache_cuda_load().
 * The table is the library's; it lives until the process ends. Members may
 * only be appended: check version before using one added later.
 */
typedef struct progcache_cuda_api {
    unsigned int version; /* PROGCACHE_CUDA_API_VERSION of the library */
    int driver_version;   /* cuDriverGetVersion(): 13000 for CUDA 13.0 */

    /* initialisation and errors */
    CUresult (CUDAAPI *cuInit)(unsigned int flags);
    CUresult (CUDAAPI *cuDriverGetVersion)(int *version);
    CUresult (CUDAAPI *cuGetErrorName)(CUresult error, const char **name);
    CUresult (CUDAAPI *cuGetErrorString)(CUresult error, const char **text);

    /* devices */
    CUresult (CUDAAPI *cuDeviceGetCount)(int *count);
    CUresult (CUDAAPI *cuDeviceGet)(CUdevice *device, int ordinal);
    CUresult (CUDAAPI *cuDeviceGetName)(char *name, int len, CUdevice device);
    CUresult (CUDAAPI *cuDeviceGetAttribute)(int *value, CUdevice_attribute attrib,
                                             CUdevice device);

    /* contexts */
    CUresult (CUDAAPI *cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
    CUresult (CUDAAPI *cuDevicePrimaryCtxRelease)(CUdevice device);
    CUresult (CUDAAPI *cuCtxSetCurrent)(CUcontext ctx);
    CUresult (CUDAAPI *cuCtxGetCurrent)(CUcontext *ctx);
    CUresult (CUDAAPI *cuCtxSynchronize)(void);

    /* memory */
    CUresult (CUDAAPI *cuMemAlloc)(CUdeviceptr *dptr, size_t bytes);
    CUresult (CUDAAPI *cuMemFree)(CUdeviceptr dptr);
    CUresult (CUDAAPI *cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (CUDAAPI *cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);

    /* libraries (context-independent loading, CUDA 12.0+) */
    CUresult (CUDAAPI *cuLibraryLoadData)(CUlibrary *library, const void *code,
                                          CUjit_option *jit_options, void **jit_values,
                                          unsigned int num_jit_options,
                                          CUlibraryOption *library_options,
                                          void **library_values,
                                          unsigned int num_library_options);
    CUresult (CUDAAPI *cuLibraryUnload)(CUlibrary library);
    CUresult (CUDAAPI *cuLibraryGetKernel)(CUkernel *kernel, CUlibrary library,
                                           const char *name);
    CUresult (CUDAAPI *cuKernelGetFunction)(CUfunction *function, CUkernel kernel);

    /* modules (loaded into the current context) */
    CUresult (CUDAAPI *cuModuleLoadData)(CUmodule *module, const void *image);
    CUresult (CUDAAPI *cuModuleUnload)(CUmodule module);
    CUresult (CUDAAPI *cuModuleGetFunction)(CUfunction *function, CUmodule module,
                                            const char *name);

    /* launch and streams. cuLaunchKernel also takes a CUkernel cast to
     * CUfunction; it then runs in the current context. */
    CUresult (CUDAAPI *cuLaunchKernel)(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                       unsigned int grid_z, unsigned int block_x,
                                       unsigned int block_y, unsigned int block_z,
                                       unsigned int shared_bytes, CUstream stream,
                                       void **params, void **extra);
    CUresult (CUDAAPI *cuStreamSynchronize)(CUstream stream);

    /* events */
    CUresult (CUDAAPI *cuEventCreate)(CUevent *event, unsigned int flags);
    CUresult (CUDAAPI *cuEventRecord)(CUevent event, CUstream stream);
    CUresult (CUDAAPI *cuEventSynchronize)(CUevent event);
    CUresult (CUDAAPI *cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
    CUresult (CUDAAPI *cuEventDestroy)(CUevent event);
} progcache_cuda_api;

#define PROGCACHE_CUDA_API_VERSION 1

/*
 * progcache_cuda_load() : open the CUDA driver (once per process), resolve
 * the table and initialise the driver (cuInit).
 *
 * The first call does the work (dlopen of libcuda.so.1, cuGetProcAddress for
 * every member, cuInit(0), cuDeviceGetCount: about a quarter of a second
 * on a machine with a GPU); later calls return the same table, or the same
 * failure, at once. The driver must be CUDA 12.0 or newer (the library
 * loading API).
 *
 * @param out [out] the table; borrowed, valid until the process ends.
 * @return PROGCACHE_OK;
 *         PROGCACHE_ENOCUDA when there is no driver ("no CUDA driver:
 *           libcuda.so.1 could not be loaded (...)") or no device ("no CUDA
 *           device ..."), or the driver is too old: the message says which;
 *         PROGCACHE_ECUDA when cuInit fails otherwise (the message holds the
 *           CUresult's name and text);
 *         PROGCACHE_EINVAL when out is NULL.
 * Thread-safe.
 */
PROGCACHE_API int progcache_cuda_load(const progcache_cuda_api **out);

/*
 * progcache_cuda_check() : turn a CUresult into a progcache return code.
 * @param result what a driver call returned.
 * @param what   the call, for the message ("cuMemAlloc of 1048576 bytes").
 * @return PROGCACHE_OK for CUDA_SUCCESS; otherwise PROGCACHE_ECUDA with the
 *         message "<what> failed: <CUDA_ERROR_NAME> (<driver's text>)".
 * Thread-safe.
 */
PROGCACHE_API int progcache_cuda_check(CUresult result, const char *what);

/*
 * progcache_cuda_result_name() : the driver's name for a CUresult
 * ("CUDA_ERROR_INVALID_IMAGE"), or "CUresult <n>" style text when the driver
 * is not loaded or does not know it. Static storage; never NULL.
 */
PROGCACHE_API const char *progcache_cuda_result_name(CUresult result);

/* ===========================================================================
 * NVRTC
 * ======================================================================== */

/*
 * progcache_nvrtc_compile() : compile C++ source with NVRTC.
 *
 * The inputs are those of a key (progcache/key.h), so what is compiled is
 * exactly what the key describes: program->source, ->target, ->options (in
 * order, passed to nvrtcCompileProgram unchanged), ->name (NULL:
 * "default_program"), ->name_expressions, ->headers (passed to NVRTC in
 * memory; a header's length need not end at a NUL, but may not hold one:
 * PROGCACHE_EINVAL). extra_digest, the bytes tag and the
 * NVRTC version fields only matter to the key and are ignored here.
 * For PROGCACHE_TARGET_LTOIR, "-dlto" is added to NVRTC's options when no
 * option asks for LTO-IR already (NVRTC emits none without it); the key sees
 * the caller's options only, which is fine because the target is in the key.
 *
 * @param out           [out] the artifact: ELF bytes (CUBIN), PTX text
 *                      including its final NUL byte (as NVRTC and cuda.core
 *                      return it), or LTO-IR bytes. out's memory is reused.
 * @param log           [out, optional] NVRTC's whole log (warnings on
 *                      success, errors on failure); NULL: not wanted.
 * @param lowered_names [out, optional] for each name expression, in the
 *                      order given, its lowered (mangled) name and a NUL
 *                      byte, one after another; read them with
 *                      progcache_names_at(). NULL: not wanted.
 * @param program       what to compile.
 * @return PROGCACHE_OK;
 *         PROGCACHE_ECOMPILE when NVRTC rejects the program: the message is
 *           "NVRTC could not compile '<name>' (<NVRTC error>):" and the log,
 *           cut to fit (the message says so; pass log for all of it);
 *         PROGCACHE_EINVAL (NULL out or program, NULL source, bad target,
 *           NULL option string, wrong program->version);
 *         PROGCACHE_ENOCUDA when NVRTC cannot be loaded (it is loaded at
 *           the first compile of a process: docs/CUDA.md);
 *         PROGCACHE_ENOMEM.
 * Thread-safe (NVRTC programs are per call).
 */
PROGCACHE_API int progcache_nvrtc_compile(progcache_buf *out, progcache_buf *log,
                                          progcache_buf *lowered_names,
                                          const progcache_key_nvrtc_options *program);

/*
 * progcache_names_at() : the index-th NUL-terminated string in names (as
 * filled by progcache_nvrtc_compile's lowered_names), or NULL when there
 * are not that many. Borrowed from names.
 */
PROGCACHE_API const char *progcache_names_at(const progcache_buf *names, size_t index);

/* ===========================================================================
 * Compile or load
 * ======================================================================== */

/* progcache_program.flags */
/* Stop after the artifact is in hand: no driver, no device, no context
 * needed (offline compiles, CI, cache warming). A kernel named in
 * progcache_program.kernel is still checked against the artifact's own
 * kernels (a CUBIN's symbols, PTX .entry; not LTO-IR): one that is not
 * there fails with PROGCACHE_EINVAL naming it. */
#define PROGCACHE_PROGRAM_NO_LOAD 0x1u
/* Store a freshly compiled artifact on a background thread: a miss returns as
 * soon as the artifact is compiled (and loaded). progcache_flush() or
 * progcache_close() waits for the store. */
#define PROGCACHE_PROGRAM_ASYNC_STORE 0x2u
/* Load with cuModuleLoadData into the current context instead of
 * cuLibraryLoadData (docs/CUDA.md says why the library API is the default). */
#define PROGCACHE_PROGRAM_MODULE_API 0x4u
/* With the library API, also fetch the kernel's CUfunction in the current
 * context (cuKernelGetFunction). This loads the code into the context now
 * instead of at the first launch; it is never needed to launch, since
 * cuLaunchKernel takes the CUkernel cast to CUfunction. */
#define PROGCACHE_PROGRAM_GET_FUNCTION 0x8u
/* Compile even when another thread or process is compiling the same key
 * right now. By default a miss waits for that compile instead (one compile
 * per kernel on a host; docs/RELIABILITY.md). */
#define PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT 0x10u
/* Load with CU_LIBRARY_BINARY_IS_PRESERVED: the driver uses the result's
 * artifact bytes in place instead of copying them, which makes the load
 * cheaper. The artifact must then outlive the library: keep the result
 * until progcache_program_result_release() (which unloads first), and do
 * not take the library out of it. Library API only. */
#define PROGCACHE_PROGRAM_PRESERVE_BINARY 0x20u
/* Never use or make a precompiled header for this program (the PCH tier,
 * docs/CUDA.md: on by default for programs whose leading #include block
 * takes long to compile; the environment variable PROGCACHE_PCH=0 turns it
 * off for every program). The artifact is the same either way. */
#define PROGCACHE_PROGRAM_NO_PCH 0x40u

/*
 * progcache_program : what progcache_compile_or_load() compiles and loads.
 * Start from PROGCACHE_PROGRAM_INIT (or progcache_program_init()).
 */
typedef struct progcache_program {
    unsigned int version; /* PROGCACHE_PROGRAM_VERSION */

    /* The compile: source, target, NVRTC options, program name, name
     * expressions and caller digest. Everything here goes into the key
     * (progcache_key_nvrtc), and exactly this is compiled on a miss. */
    progcache_key_nvrtc_options nvrtc;

    /* Kernel to fetch after loading (its name in the binary: a lowered name
     * for C++ kernels that are not extern "C"); NULL: load only. To fetch
     * kernels by name expression ("matmul<16, Relu>"), list them in
     * nvrtc.name_expressions instead: a result of version 3 gets each one's
     * lowered name and kernel. */
    const char *kernel;

    unsigned int flags; /* PROGCACHE_PROGRAM_* */

    /* Optional: told about healed entries, background store failures
     * (from the store's thread), and waits for another compile: who it
     * waits for, every few seconds (INFO: "progcache: waiting for
     * host/pid compiling key 0123456789abcdef... 4 s"), and a wait that
     * ran out of its bound (WARN). NULL: the cache's log callback hears
     * the waits. */
    progcache_log_fn log;
    void *log_ctx;

    /* Single-flight: the longest a miss waits for another thread, process
     * or machine compiling the same key before compiling on its own, in
     * ms; 0: $PROGCACHE_WAIT_TIMEOUT as read when the cache was opened,
     * else 60 s. A compiler that dies frees its waiters at once on its
     * host, and within a few seconds (a lease, renewed while it is alive)
     * on other machines; so the bound only ends waits for a compiler that
     * is alive and stuck, or slower than the bound. A process waiting
     * behind another process of its host that itself waits for another
     * machine gives it twice the bound (docs/REMOTE.md). */
    unsigned int wait_timeout_ms;
} progcache_program;

/* Version 2: nvrtc is a progcache_key_nvrtc_options of version 2 (headers
 * in memory), which moved the fields after it. A version-1 struct (built
 * against an older header) is still read, in its own layout. */
#define PROGCACHE_PROGRAM_VERSION 2
/* Both versions set, the rest zero, with no warning in the caller's code
 * (as every _INIT macro, progcache/common.h): designated initializers in C,
 * a function in C++. */
#if defined(__cplusplus)
static inline progcache_program progcache__program_init_value(void)
{
    progcache_program program = progcache_program();
    program.version = PROGCACHE_PROGRAM_VERSION;
    program.nvrtc.version = PROGCACHE_KEY_NVRTC_OPTIONS_VERSION;
    return program;
}
#define PROGCACHE_PROGRAM_INIT (progcache__program_init_value())
#else
#define PROGCACHE_PROGRAM_INIT                                                 \
    {.version = PROGCACHE_PROGRAM_VERSION,                                     \
     .nvrtc = {.version = PROGCACHE_KEY_NVRTC_OPTIONS_VERSION}}
#endif

/* progcache_program_init() : set program to its defaults. NULL-safe. */
PROGCACHE_API void progcache_program_init(progcache_program *program);

/* Where the artifact came from. */
typedef enum progcache_status {
    PROGCACHE_STATUS_MISS = 0,    /* compiled (and stored, unless the store failed) */
    PROGCACHE_STATUS_HIT = 1,     /* read from the cache */
    PROGCACHE_STATUS_DISABLED = 2 /* no cache given: compiled */
} progcache_status;

/* progcache_status_name() : "MISS", "HIT" or "DISABLED". Never NULL. */
PROGCACHE_API const char *progcache_status_name(progcache_status status);

/*
 * progcache_program_result : what progcache_compile_or_load() found, did and
 * loaded. The struct is the caller's (start from
 * PROGCACHE_PROGRAM_RESULT_INIT); what it holds (artifact memory, the loaded
 * library or module) is released by progcache_program_result_release().
 */
typedef struct progcache_program_result {
    unsigned int version; /* PROGCACHE_PROGRAM_RESULT_VERSION */

    progcache_status status;
    unsigned char key[PROGCACHE_KEY_SIZE];
    progcache_buf artifact; /* the CUBIN/PTX/LTO-IR bytes */
    /* NVRTC's whole log when this call compiled (warnings, or the errors
     * behind PROGCACHE_ECOMPILE, whose message may hold only the start of
     * it); empty on a hit. */
    progcache_buf log;

    /* Wall time of each step, in milliseconds. key is deriving the key;
     * lookup is reading the cache (and checking what it returned), as
     * cuda.core's sample times its cache.get; compile is 0 on a hit; store
     * is the synchronous put (or queueing it, with
     * PROGCACHE_PROGRAM_ASYNC_STORE); load covers loading and fetching the
     * kernel. */
    double key_ms;
    double lookup_ms;
    double compile_ms;
    double store_ms;
    double load_ms;

    /* Loaded code, owned by the result (released by
     * progcache_program_result_release(); to keep one past that, copy it and
     * set the member to NULL). Library API: library and kernel (plus
     * function with PROGCACHE_PROGRAM_GET_FUNCTION). Module API: module and
     * function. All NULL with PROGCACHE_PROGRAM_NO_LOAD. */
    CUlibrary library;
    CUkernel kernel;
    CUmodule module;
    CUfunction function;

    /* 1 when the cached artifact was unusable (failed a structure check or
     * the driver refused it): it was removed (remove_error says when that
     * failed), compiled again, stored over and loaded. heal_reason says
     * what was wrong with it (never a path: it fits). */
    int healed;
    char heal_reason[256];

    /* A cache failure that did not stop the call (0 if none): the first
     * of lookup_error, remove_error and store_error below. The artifact is
     * returned all the same; cache_message says what failed, cut to fit
     * (cache_detail, version 2, holds every failure whole). Only
     * store_error means the artifact is not in the cache. */
    int cache_error;
    char cache_message[1024];

    /* 1 when the store was handed to the background thread
     * (PROGCACHE_PROGRAM_ASYNC_STORE); its outcome is reported by
     * progcache_flush() and the log callback. */
    int store_pending;

    /* Time spent waiting for another thread or process that was compiling
     * the same key (single-flight), in ms; not part of lookup_ms. When the
     * wait ended with that compile's result, status is HIT and waited is 1. */
    double wait_ms;
    int waited;

    /* Version 2 (written only into a result of version 2 or later): each
     * cache step's failure on its own, and the messages without a length
     * limit. A code is 0 when that step did not fail (or did not run). */
    /* A lookup failed: the first one, or the second look under the
     * single-flight lock. The program was compiled instead, unless the
     * second look found it (status HIT). */
    int lookup_error;
    /* A cached entry found unusable (healed) could not be removed; the
     * store replaced it, unless store_error is set too. */
    int remove_error;
    /* The synchronous store failed (full disk, read-only cache, ...). 0
     * when it succeeded, did not run, or was handed to the background
     * (store_pending: progcache_flush reports that one). */
    int store_error;
    /* 1 when this call's synchronous store left the artifact in the cache:
     * it succeeded, or it failed only after the entry was in place (the
     * file store fails a put whose entry it could not make durable: fsync
     * of its directory), or another process stored the key meanwhile. So
     * store_error with stored 0 means: the artifact is not in the cache. */
    int stored;
    /* Every cache failure of the call, whole (cache_message cuts a long
     * path), in the order they happened, each on a line of its own:
     * "cache lookup failed: <why>\n", "cache store failed: <why>\n", ...
     * Empty (size 0) when there was none. Owned by the result (freed by
     * progcache_program_result_release; reused by the next call). */
    progcache_buf cache_detail;

    /* Version 3 (written only into a result of version 3 or later): the
     * program's name expressions (program->nvrtc.name_expressions), in
     * their order, num_names of them. lowered_names[i] is the lowered
     * (mangled) name of expression i, on a miss and on a hit alike; with
     * the library API kernels[i] is its kernel, and functions[i] its
     * function with PROGCACHE_PROGRAM_GET_FUNCTION or the module API. An
     * expression that names a variable rather than a kernel gets NULL
     * there (fetch it with cuLibraryGetGlobal by its lowered name); so do
     * all of them with PROGCACHE_PROGRAM_NO_LOAD. The arrays are the
     * result's (released by progcache_program_result_release). */
    size_t num_names;
    const char *const *lowered_names;
    CUkernel *kernels;
    CUfunction *functions;
    /* 1 when the cached entry had no lowered names (cuda.core and older
     * progcache do not keep them) and this call compiled the program once
     * to learn them; they are stored with the entry, so the next hit needs
     * no compile (docs/CUDA.md, "Name expressions"). */
    int names_learned;
    /* The memory behind lowered_names, kernels and functions: the
     * library's, not to be used directly. */
    progcache_buf names_memory;
} progcache_program_result;

#define PROGCACHE_PROGRAM_RESULT_VERSION 3
#define PROGCACHE_PROGRAM_RESULT_INIT                                          \
    PROGCACHE__INIT(progcache_program_result, PROGCACHE_PROGRAM_RESULT_VERSION)

/*
 * progcache_compile_or_load() : get a program's artifact from the cache or
 * by compiling it, then load it and fetch its kernel.
 *
 * In order: derive the key (progcache_key_nvrtc_files: header files the
 * source includes are covered, checked through a manifest kept in the
 * cache, a stat per header, docs/KEY.md); look it up; on a hit check
 * the artifact (its kind when the bytes match the seal the cache stored
 * with them and that seal says they were a whole artifact, else its whole
 * structure: a CUBIN must be a whole CUDA ELF file); on a miss compile
 * (progcache_nvrtc_compile) and store; then, unless
 * PROGCACHE_PROGRAM_NO_LOAD, load the artifact (cuLibraryLoadData, or
 * cuModuleLoadData with PROGCACHE_PROGRAM_MODULE_API) and fetch
 * program->kernel. A cached artifact that fails the structure check or that
 * the driver refuses to load (CUDA_ERROR_INVALID_IMAGE, ...) is removed,
 * compiled again, stored and loaded: out->healed says so.
 *
 * Name expressions (program->nvrtc.name_expressions): a result of version 3
 * gets each one's lowered name and kernel, on a miss (from NVRTC; stored
 * with the entry as a record) and on a hit (from the record). An entry
 * without the record (written by cuda.core) is read from its own kernels
 * when that is certain, else the program is compiled once to learn the
 * names, which are then stored with it (out->names_learned).
 *
 * Single-flight: a miss first takes the key's compile lock in the cache
 * directory. If another thread or process holds it, the call waits for that
 * compile and returns its result as a HIT (out->waited, out->wait_ms),
 * instead of compiling the same kernel again; see
 * PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT and program->wait_timeout_ms.
 *
 * A failing cache never costs the artifact: if the lookup, the removal of a
 * bad entry or the store fails, the call still compiles, loads and returns
 * PROGCACHE_OK, with the failure in out->cache_error/cache_message, and
 * (version 2) which step failed in out->lookup_error, remove_error or
 * store_error, every message whole in out->cache_detail.
 *
 * Loading needs the driver (progcache_cuda_load() is called for you).
 * The library API needs no current context to load; fetching a CUfunction
 * (PROGCACHE_PROGRAM_GET_FUNCTION), the module API and launching do: make
 * one current first (cuDevicePrimaryCtxRetain + cuCtxSetCurrent).
 *
 * @param out     [out] a result set to PROGCACHE_PROGRAM_RESULT_INIT or
 *                released; on failure it still holds what was done (key,
 *                times, status, and the artifact if one was compiled).
 *                Any version from 1 to PROGCACHE_PROGRAM_RESULT_VERSION:
 *                only the fields of out's version are written.
 * @param cache   the cache; NULL: compile every time (status DISABLED).
 * @param program what to compile and load.
 * @return PROGCACHE_OK;
 *         PROGCACHE_EINVAL / PROGCACHE_EUNSAFEKEY (bad program, unsafe key
 *           inputs: see progcache_key_nvrtc), PROGCACHE_ECOMPILE (NVRTC's
 *           log in the message; or the key's NVRTC version came from
 *           PROGCACHE_NVRTC_VERSION and the NVRTC that would compile is
 *           another), PROGCACHE_ENOCUDA (no driver or device; or no NVRTC
 *           for a miss, or no NVRTC and no record of its version: the
 *           message says "no NVRTC" and what to do),
 *           PROGCACHE_ECUDA (the driver refused a freshly compiled artifact
 *           or the kernel is not in it: CUresult name and text in the
 *           message), PROGCACHE_ENOMEM.
 * Thread-safe for distinct results; one cache may serve many threads.
 */
PROGCACHE_API int progcache_compile_or_load(progcache_program_result *out, progcache *cache,
                                            const progcache_program *program);

/*
 * progcache_program_result_release() : unload what result holds (library or
 * module), free its artifact and reset it to PROGCACHE_PROGRAM_RESULT_INIT.
 * DESTRUCTOR. NULL-safe. Unloading a library or module whose kernels are
 * still running is the caller's mistake, as with the driver.
 */
PROGCACHE_API void progcache_program_result_release(progcache_program_result *result);

/*
 * progcache_explain() : why a compile of these inputs would miss.
 *
 * Each entry progcache_compile_or_load stores records the inputs of its key
 * (NVRTC version, target, program name, the source's digest, name
 * expressions, a digest of the headers, the options in order) in the cache
 * directory's explain index (docs/FORMAT.md, "The explain index"). This
 * derives the key of nvrtc as progcache_compile_or_load would and writes
 * text into out (replacing it): "HIT ..." when an entry of that key is
 * stored; else a "MISS ..." line, then one line per nearest recorded entry
 * of the same program name (at most 3) saying exactly which inputs differ
 * ("option -DTILE=32 was -DTILE=16; NVRTC 13.0 was 12.9; source changed"),
 * or that nothing similar is recorded. Values are shown escaped (%XX for
 * spaces, '%' and bytes outside printable ASCII). PROGCACHE_EXPLAIN=1 makes
 * every MISS of progcache_compile_or_load log the same text.
 *
 * @param out   [out] the text; release with progcache_buf_free().
 * @param cache the cache (NULL: nothing is recorded, every lookup misses).
 * @param nvrtc the key's inputs, as progcache_program's nvrtc member.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL / PROGCACHE_EUNSAFEKEY (as
 *         progcache_key_nvrtc), PROGCACHE_ENOCUDA (no NVRTC and no record of
 *         its version: give nvrtc_major/minor), PROGCACHE_ENOMEM.
 * Thread-safe; reads at most two index files of the cache directory.
 */
PROGCACHE_API int progcache_explain(progcache_buf *out, progcache *cache,
                                    const progcache_key_nvrtc_options *nvrtc);


#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_CUDA_H */
