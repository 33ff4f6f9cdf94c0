/* The core's side of the NVRTC libraries the auditor found: each slot's
 * real functions and version, resolved on first use; the log; the
 * function the auditor binds for each symbol (docs/INTERCEPT.md).
 *
 * The core (libprogcache-intercept-core.so) runs in the program's own link
 * namespace, loaded on the first NVRTC call by the auditor: there it
 * shares libc and libcrypto with the program, as a linked libprogcache
 * would. (Run in the auditor's namespace instead, a second libcrypto
 * reads the program's thread-specific data as its own: OpenSSL 3 crashed
 * in a Python process that had loaded the first one.) */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache_stats.h"
#include "config.h"
#include "cuda/nvrtc_record.h"
#include "error.h"
#include "intercept/intercept.h"

#define EXPORT __attribute__((visibility("default")))

progcache__nvrtc_slot *progcache__slots;

EXPORT void progcache__intercept_core_init(progcache__nvrtc_slot *slots)
{
    progcache__slots = slots;
}

void progcache__intercept_log(int level, const char *fmt, ...)
{
    if (!progcache__log_wanted(NULL, level))
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* The library's own writer (PROGCACHE_LOG): one grammar, one file, and
     * a warning said once per process and cause (its format). */
    progcache__log_default(level, fmt, line);
}


/* What the auditor binds for a program's reference to name in slot's
 * library (real: NVRTC's own function): our function, a forwarder, or
 * NVRTC's own when the forwarders are used up (said in the log). */
EXPORT void *progcache__intercept_bind(int slot, const char *name, void *real)
{
    void *ours = progcache__slot_function(slot, name);
    if (ours)
        return ours;
    void *fwd = progcache__forwarder(real);
    if (!fwd)
        progcache__intercept_log(PROGCACHE_LOG_WARN,
                                 "%s of %s: no forwarder left; bound to NVRTC itself", name,
                                 progcache__slots[slot].path);
    return fwd ? fwd : real;
}

/* The file behind a stand-in, as the cache's records name files. */
static void standin_file(progcache__nvrtc_file *f, const progcache__nvrtc_slot *s)
{
    snprintf(f->path, sizeof f->path, "%s", s->path);
    f->size = s->file_size;
    f->ctime_sec = s->ctime_sec;
    f->ctime_nsec = s->ctime_nsec;
    f->build_id_len = s->build_id_len <= sizeof f->build_id ? s->build_id_len : 0;
    memcpy(f->build_id, s->build_id, f->build_id_len);
}

void progcache__standin_mend(const progcache__nvrtc_slot *s, int major, int minor)
{
    progcache *cache = progcache__intercept_cache();
    progcache__nvrtc_file f;
    standin_file(&f, s);
    if (cache)
        progcache__nvrtc_record_note(cache, &f, major, minor);
}

/* The version behind a stand-in, which only running NVRTC tells: the
 * cache's record of that file as it is now (path, size, change time: a
 * reinstall or an update in place is another identity), else NVRTC loaded
 * through the stand-in and asked once, and the record written, so that
 * the next process's HIT does not load it. Either way the bundle key adds
 * the build ID read from the file; and a MISS checks the version against
 * the NVRTC that compiled before it stores (intercept_compile.c). */
static void standin_version(progcache__nvrtc_slot *s)
{
    progcache *cache = progcache__intercept_cache();
    progcache__nvrtc_file f;
    standin_file(&f, s);
    if (cache && progcache__nvrtc_record_lookup(cache, &f, &s->major, &s->minor)) {
        s->version_from = "the cache's record";
        s->ready = 1;
        return;
    }
    progcache__cache_record(cache, PROGCACHE_STAT_INTERCEPT_STANDIN_VERSION_LOADS, 1);
    s->load_counted = 1; /* loaded for the version: counted there */
    if (s->real.Version(&s->major, &s->minor) != NVRTC_SUCCESS) {
        progcache__intercept_log(PROGCACHE_LOG_WARN,
                                 "%s: nvrtcVersion failed; its compiles pass through", s->path);
        return;
    }
    s->version_from = "NVRTC (no record of the file yet)";
    if (cache)
        progcache__nvrtc_record_note(cache, &f, s->major, s->minor);
    s->ready = 1;
}

/* The real functions, by name in the library's own symbol table. */
static void resolve(progcache__nvrtc_slot *s)
{
    static const char *const size_fn[OUT_COUNT] = {"nvrtcGetProgramLogSize", "nvrtcGetPTXSize",
                                                   "nvrtcGetCUBINSize", "nvrtcGetLTOIRSize",
                                                   "nvrtcGetOptiXIRSize"};
    static const char *const bytes_fn[OUT_COUNT] = {"nvrtcGetProgramLog", "nvrtcGetPTX",
                                                    "nvrtcGetCUBIN", "nvrtcGetLTOIR",
                                                    "nvrtcGetOptiXIR"};
    progcache__real_nvrtc *r = &s->real;
#define SYM(field, name) (*(void **)&r->field = progcache__slot_symbol(s, name))
    int ok = SYM(Version, "nvrtcVersion") && SYM(CreateProgram, "nvrtcCreateProgram") &&
             SYM(DestroyProgram, "nvrtcDestroyProgram") &&
             SYM(CompileProgram, "nvrtcCompileProgram") &&
             SYM(AddNameExpression, "nvrtcAddNameExpression") &&
             SYM(GetLoweredName, "nvrtcGetLoweredName") &&
             SYM(GetPCHCreateStatus, "nvrtcGetPCHCreateStatus") &&
             SYM(GetPCHHeapSizeRequired, "nvrtcGetPCHHeapSizeRequired") &&
             SYM(SetFlowCallback, "nvrtcSetFlowCallback");
    for (int k = 0; ok && k < OUT_COUNT; k++)
        ok = SYM(GetSize[k], size_fn[k]) && SYM(GetBytes[k], bytes_fn[k]);
#undef SYM
    if (!ok) {
        progcache__intercept_log(PROGCACHE_LOG_WARN,
                                 "%s lacks a function of NVRTC 13; its compiles pass through",
                                 s->path);
        return;
    }
    if (s->standin) {
        standin_version(s);
        return;
    }
    if (r->Version(&s->major, &s->minor) != NVRTC_SUCCESS) {
        progcache__intercept_log(PROGCACHE_LOG_WARN,
                                 "%s: nvrtcVersion failed; its compiles pass through", s->path);
        return;
    }
    s->ready = 1;
}

int progcache__slot_ready(progcache__nvrtc_slot *s)
{
    /* A slot's functions are only reached after la_objopen filled it. */
    static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&once_lock);
    if (!s->logged) {
        resolve(s);
        s->logged = 1;
        if (s->refused) {
            progcache__cache_record(progcache__intercept_cache(),
                                    PROGCACHE_STAT_INTERCEPT_STANDIN_REFUSED, 1);
        }
        if (s->ready)
            progcache__slot_announce(s);
    }
    pthread_mutex_unlock(&once_lock);
    return s->ready ? 0 : -1;
}

void progcache__slot_announce(progcache__nvrtc_slot *s)
{
    char id[2 * sizeof s->build_id + 1] = "none";
    for (size_t i = 0; i < s->build_id_len; i++)
        snprintf(id + 2 * i, 3, "%02x", s->build_id[i]);
    if (s->standin)
        progcache__intercept_log(PROGCACHE_LOG_INFO,
                                 "NVRTC %d.%d at %s (build ID %s) intercepted; reached by %s, "
                                 "through the stand-in (NVRTC mapped only when a call needs it; "
                                 "version from %s)",
                                 s->major, s->minor, s->path, id, s->route, s->version_from);
    else
        progcache__intercept_log(PROGCACHE_LOG_INFO,
                                 "NVRTC %d.%d at %s (build ID %s) intercepted; reached by %s; "
                                 "mapped by the program%s%s",
                                 s->major, s->minor, s->path, id, s->route,
                                 s->refused ? ": no stand-in, " : "",
                                 s->refused ? s->refused : "");
}

void progcache__standin_note_load(progcache__nvrtc_slot *s)
{
    const char *by = s->standin ? atomic_load(s->loaded_by) : NULL;
    if (!by || s->load_counted)
        return;
    s->load_counted = 1;
    progcache__cache_record(progcache__intercept_cache(), PROGCACHE_STAT_INTERCEPT_STANDIN_LOADS,
                            1);
    progcache__intercept_log(PROGCACHE_LOG_INFO, "NVRTC at %s loaded behind the stand-in by a "
                             "call to %s", s->path, by);
}
