/* libnvrtc.so.13, the stand-in (docs/INTERCEPT.md, "The stand-in"): what
 * the auditor hands a program that asks the loader for NVRTC 13, so that a
 * HIT is answered without mapping NVRTC (the 140 MB library costs more
 * than the rest of a HIT to map).
 *
 * It exports exactly the functions of one known NVRTC build's export list
 * (standin_names.h; built once per list, PROGCACHE__STANDIN_SET), each a
 * trampoline: the first call of any of them loads the real library (the
 * file the program would have loaded, whose path the auditor wrote into
 * progcache__standin_real before this object was relocated) and every call
 * then jumps to the real function of the same name with the caller's
 * registers and stack untouched. So a program bound to the stand-in runs
 * exactly as on NVRTC, only later; the auditor binds the calls that take a
 * program to the interceptor's functions as on any NVRTC, and those reach
 * NVRTC, through these trampolines, only when a call is not replayed.
 *
 * It links libc alone and is loaded by the program's own loader: no code of
 * progcache's library runs here. x86-64 only (the auditor hands it out
 * nowhere else). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "intercept/standin_names.h"
#include "intercept/trampoline.h"

#define EXPORT __attribute__((visibility("default")))

#if PROGCACHE__STANDIN_SET == 130
#define NAMES PROGCACHE__STANDIN_NAMES_130
#elif PROGCACHE__STANDIN_SET == 135
#define NAMES PROGCACHE__STANDIN_NAMES_135
#else
#error "PROGCACHE__STANDIN_SET: 130 or 135"
#endif

#define AS_STRING(n) #n,
static const char *const names[] = {NAMES(AS_STRING)};
#define COUNT (sizeof names / sizeof names[0])

/* The real library's path, written by the auditor (la_objopen). */
EXPORT char progcache__standin_real[4096];
/* The function whose call loaded the real library, or NULL while it is
 * not loaded (the core reads it: a HIT with it NULL never mapped NVRTC). */
EXPORT _Atomic(const char *) progcache__standin_loaded_by;

__attribute__((visibility("hidden"))) _Atomic(void *) progcache__standin_targets[COUNT];

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *real;
static char why[512];

static void load(void)
{
    /* Only an absolute path: without the auditor (the folder put on a
     * search path by hand) there is no real library to find. */
    if (progcache__standin_real[0] != '/') {
        snprintf(why, sizeof why, "no real NVRTC was named (the stand-in works only under "
                                  "progcache exec)");
        return;
    }
    real = dlopen(progcache__standin_real, RTLD_NOW | RTLD_LOCAL);
    if (!real)
        snprintf(why, sizeof why, "%s", dlerror());
}

void *progcache__standin_resolve(unsigned long i);

/* What a function answers when the real NVRTC cannot be loaded (its file
 * removed or replaced since the program opened it: a toolkit upgraded
 * under a running program): NVRTC_ERROR_INTERNAL_ERROR (11 in nvrtc.h),
 * and for nvrtcGetErrorString that error's name. The program gets an
 * error to handle, never an end it did not ask for. */
static long no_nvrtc(void) { return 11; }
static const char *no_nvrtc_string(void) { return "NVRTC_ERROR_INTERNAL_ERROR"; }
static atomic_int told;

/* Called by trampoline i on its first call: the real function, or where
 * NVRTC cannot be reached, the answer above (said once on stderr). */
__attribute__((visibility("hidden"), used)) void *progcache__standin_resolve(unsigned long i)
{
    void *fn = atomic_load_explicit(&progcache__standin_targets[i], memory_order_acquire);
    if (fn)
        return fn;
    const char *none = NULL;
    atomic_compare_exchange_strong(&progcache__standin_loaded_by, &none, names[i]);
    pthread_once(&once, load);
    fn = real ? dlsym(real, names[i]) : NULL;
    if (!fn) {
        if (!atomic_exchange(&told, 1))
            fprintf(stderr, "progcache: the NVRTC stand-in cannot reach %s in %s: %s; NVRTC's "
                            "calls fail with NVRTC_ERROR_INTERNAL_ERROR\n", names[i],
                    progcache__standin_real, real ? "the function is missing" : why);
        fn = strcmp(names[i], "nvrtcGetErrorString") ? (void *)no_nvrtc : (void *)no_nvrtc_string;
    }
    atomic_store_explicit(&progcache__standin_targets[i], fn, memory_order_release);
    return fn;
}

/* The exported functions, each a trampoline (intercept/trampoline.h). */
#define TRAMPOLINE(n) PROGCACHE__TRAMPOLINE_ENTRY(n, "standin_i", "standin_common", "")

__asm__(".text\n"
        ".set standin_i, 0\n" NAMES(TRAMPOLINE) PROGCACHE__TRAMPOLINE_COMMON(
            "standin_common", "progcache__standin_targets", "progcache__standin_resolve"));
