/* Internal: the NVRTC interceptor, libprogcache-intercept.so (an LD_AUDIT
 * module; docs/INTERCEPT.md). audit.c binds the nvrtc* symbols of every
 * NVRTC library the audited program loads to the functions of
 * intercept_api.c, one set per library (a slot); intercept_compile.c runs
 * a compile through the cache; bundle.c is the format of what is stored;
 * intercept_forward.c gives the functions the interceptor does not know a
 * real program in place of ours. The auditor (audit.c, audit_stubs.c,
 * libprogcache-intercept.so) links no library code; the rest is the core,
 * libprogcache-intercept-core.so, which it loads into the program's own
 * namespace on the first NVRTC call (intercept_slot.c says why). */
#ifndef PROGCACHE_INTERCEPT_INTERCEPT_H
#define PROGCACHE_INTERCEPT_INTERCEPT_H

#include <link.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stddef.h>

#include "buf.h"
#include "progcache/cache.h"

/* NVRTC libraries told apart in one process (the toolkit's and a wheel's,
 * say): a library past this many is left alone (not intercepted), and the
 * log says so. */
#define PROGCACHE__INTERCEPT_SLOTS 4

/* The real functions of one NVRTC library that the interceptor calls. */
typedef struct progcache__real_nvrtc {
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*AddNameExpression)(nvrtcProgram, const char *);
    nvrtcResult (*GetLoweredName)(nvrtcProgram, const char *, const char **);
    nvrtcResult (*GetSize[5])(nvrtcProgram, size_t *); /* in output order */
    nvrtcResult (*GetBytes[5])(nvrtcProgram, char *);
    nvrtcResult (*GetPCHCreateStatus)(nvrtcProgram);
    nvrtcResult (*GetPCHHeapSizeRequired)(nvrtcProgram, size_t *);
    nvrtcResult (*SetFlowCallback)(nvrtcProgram, int (*)(void *, void *), void *);
} progcache__real_nvrtc;

/* The outputs of a compile, in the order of the bundle's sections. */
enum { OUT_LOG = 0, OUT_PTX, OUT_CUBIN, OUT_LTOIR, OUT_OPTIXIR, OUT_COUNT };

/* One NVRTC library of the process. */
typedef struct progcache__nvrtc_slot {
    int used;
    void *map;              /* its struct link_map (a handle dlsym takes) */
    char path[4096];        /* as the loader named it */
    unsigned char build_id[64];
    size_t build_id_len;    /* 0: none; the file's size and path stand in */
    long long file_size;
    int ready;              /* 1: real is complete and major/minor are set */
    progcache__real_nvrtc real;
    int major, minor;
    const char *route;      /* how the program reached it first */
    int logged;             /* the real functions were resolved (once) */
    /* The stand-in route (audit_standin.c): standin is 1 when the program
     * holds the stand-in for the library at path (map is the stand-in's;
     * build_id, file_size and the rest describe the real file, read
     * without mapping it); loaded_by is the stand-in's
     * progcache__standin_loaded_by (NULL while NVRTC is not loaded). */
    int standin;
    const char *_Atomic *loaded_by;
    long long ctime_sec;
    long ctime_nsec;
    int real_changed;       /* the library the stand-in loaded is not the file probed */
    const char *refused;    /* why a libnvrtc.so.13 did not get the stand-in, or NULL */
    const char *version_from; /* "NVRTC" or "the cache's record" (standin) */
    int load_counted;       /* the stand-in's load of NVRTC was counted */
} progcache__nvrtc_slot;

/* The auditor's slots, which the core is handed when it is loaded
 * (progcache__intercept_core_init). */
extern progcache__nvrtc_slot *progcache__slots;

/* ---- the auditor (audit.c, audit_stubs.c) ------------------------------- */

/* A line to $PROGCACHE_LOG from the auditor. */
void progcache__audit_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The stand-in route (audit_standin.c). la_objsearch's answer for a
 * search of the loader: the path of a stand-in for the NVRTC 13 library
 * the loader is about to open (name, found by a search for asked), or
 * NULL to leave the loader alone. */
char *progcache__standin_offer(const char *asked, const char *name, unsigned int flag);
/* In la_objopen: 1 when map is a stand-in handed out (s is filled and the
 * stand-in told its real file), 0 when not. */
int progcache__standin_opened(progcache__nvrtc_slot *s, struct link_map *map);
/* In la_objopen: 1 when map is the real library a stand-in loaded (left
 * unaudited: the program never binds to it), 0 when not. s is the slots. */
int progcache__standin_real_opened(progcache__nvrtc_slot *slots, struct link_map *map);
/* The GNU build ID of the loaded object map into s (none: len 0). */
void progcache__read_build_id(progcache__nvrtc_slot *s, const struct link_map *map);
/* Why the search that found path did not hand out a stand-in, or NULL. */
const char *progcache__standin_refusal(const char *path);

/* What the auditor binds a program's reference to name in slots[slot]'s
 * library to (real: NVRTC's function): a stub that, on its first call,
 * loads the core into the program's namespace and asks it
 * (progcache__intercept_bind) for the function to jump to. NULL when the
 * stubs are used up. */
void *progcache__audit_stub(progcache__nvrtc_slot *slots, int slot, const char *name, void *real);

/* ---- both ------------------------------------------------------------------ */

/* A dynamic-section address of m, relocated (the loader adjusts entries
 * in place where the section is writable, not where it is not). */
uintptr_t progcache__dyn_ptr(const struct link_map *m, ElfW(Addr) p);

/* ---- the core --------------------------------------------------------------- */

/* The core's two exports (intercept_slot.c): take the auditor's slots;
 * the function to bind for name in slots[slot]'s library. */
void progcache__intercept_core_init(progcache__nvrtc_slot *slots);
void *progcache__intercept_bind(int slot, const char *name, void *real);

/* The address of the function name that slot's library defines, or NULL. */
void *progcache__slot_symbol(const progcache__nvrtc_slot *slot, const char *name);
/* The address of the symbol name (of type STT_FUNC or STT_OBJECT) that the
 * loaded object m defines, or NULL. */
void *progcache__map_symbol(const struct link_map *m, const char *name, int type);

/* Resolve slot's real functions and version, once. 0, or -1 when the
 * library lacks one (then nothing of it is intercepted from now on). */
int progcache__slot_ready(progcache__nvrtc_slot *slot);

/* Where a program is. */
typedef enum iprog_state {
    IPROG_RECORDED = 0, /* created, not compiled: no real program yet */
    IPROG_REPLAY,       /* a HIT: answered from the bundle */
    IPROG_REAL          /* a real program does everything */
} iprog_state;

/* What one compile answered, kept in a bundle (bundle.c). */
typedef struct progcache__bundle {
    int compile_rc;
    int size_rc[OUT_COUNT];   /* nvrtcGet<X>Size's answer */
    int bytes_rc[OUT_COUNT];  /* nvrtcGet<X>'s answer */
    progcache_buf out[OUT_COUNT];
    int pch_status_rc;
    int pch_heap_rc;
    unsigned long long pch_heap;
    size_t num_names;
    char **exprs;   /* name expressions as added */
    char **lowered; /* their lowered names; NULL where GetLoweredName failed */
    int *lowered_rc;
} progcache__bundle;

/* A program of ours: the handle the caller holds points to one. */
typedef struct progcache__iprog {
    progcache__nvrtc_slot *slot;
    iprog_state state;
    nvrtcProgram real;  /* the real program, or NULL */
    int compiled_real;  /* real has been compiled */
    char *source;
    char *name;         /* NULL: NVRTC's default */
    int num_headers;
    char **headers, **include_names;
    size_t num_exprs;
    char **exprs;
    char **options;     /* the last compile's */
    int num_options;
    int has_callback;   /* a flow callback was set: compiles pass through */
    progcache__bundle bundle; /* IPROG_REPLAY */
} progcache__iprog;

/* Whether p is a live program of ours (any thread may ask). */
int progcache__iprog_live(const void *p);
/* 0, or -1 out of memory. */
int progcache__iprog_register(progcache__iprog *p);
void progcache__iprog_unregister(progcache__iprog *p);

/* Make the real program (and, after a replayed compile, compile it with
 * the same options) so that a call the interceptor does not answer gets a
 * program NVRTC made. NVRTC_SUCCESS or NVRTC's own error. */
nvrtcResult progcache__iprog_materialize(progcache__iprog *p);

/* nvrtcCompileProgram through the cache (intercept_compile.c). */
nvrtcResult progcache__intercept_compile(progcache__iprog *p, int num_options,
                                         const char *const *options);

/* The options the interceptor knows NVRTC 13 to take (intercept_options.c):
 * 1 when every one is known, else 0 with *bad the first that is not. */
int progcache__intercept_options_known(const char *const *options, int n, const char **bad);

/* The bundle format (bundle.c; docs/FORMAT.md, "Compile bundles"). */
int progcache__bundle_encode(progcache_buf *out, const progcache__bundle *b);
int progcache__bundle_decode(progcache__bundle *out, const unsigned char *data, size_t size);
void progcache__bundle_free(progcache__bundle *b);

/* The process's cache, opened on the first compile (NULL when it cannot
 * be: compiles then pass through, counted nowhere but said in the log). */
progcache *progcache__intercept_cache(void);

/* A line to the library's own log (PROGCACHE_LOG, docs/OPERATIONS.md): at
 * PROGCACHE_LOG_INFO what was reached and each compile's outcome (written
 * with PROGCACHE_LOG=info or debug), at PROGCACHE_LOG_WARN what passes
 * NVRTC through or is not stored (said once per process and cause by
 * default). */
void progcache__intercept_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Behind a stand-in: the cache's record of the slot's file set to what
 * its NVRTC answered (a record found wrong). */
void progcache__standin_mend(const progcache__nvrtc_slot *slot, int major, int minor);

/* Behind a stand-in: count and say, once, that a call loaded NVRTC. */
void progcache__standin_note_load(progcache__nvrtc_slot *slot);

/* Say once per library which NVRTC was reached and by which route. */
void progcache__slot_announce(progcache__nvrtc_slot *slot);

/* The slot's functions, to bind in place of the real ones
 * (intercept_api.c): the replacement for name, or NULL when the
 * interceptor does not implement it. */
void *progcache__slot_function(int slot, const char *name);

/* A forwarder for a function the interceptor does not implement
 * (intercept_forward.c): calls real with a real program in place of ours
 * in the first argument. NULL when the forwarders are used up. */
void *progcache__forwarder(void *real);

#endif
