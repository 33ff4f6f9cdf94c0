/* The nvrtc* functions the interceptor binds in place of NVRTC's: one set
 * per NVRTC library (slot), since nvrtcCreateProgram must know which
 * library the caller meant; a program remembers its slot for the rest.
 *
 * A program of ours is answered from what it recorded and, after a HIT,
 * from the bundle; any call this file does not answer gets the real
 * program (made, and compiled like the replayed compile, on demand) and
 * NVRTC's own answer. A handle that is not ours (made before the
 * interceptor saw the library) goes to the real function untouched. */
#include <string.h>

#include "alloc.h"
#include "cache/cache_stats.h"
#include "intercept/intercept.h"

/* ---- the programs of ours that are alive ---------------------------------- */

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static progcache__iprog **live;
static size_t num_live, cap_live;

int progcache__iprog_live(const void *p)
{
    int found = 0;
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; p && i < num_live && !found; i++)
        found = live[i] == p;
    pthread_mutex_unlock(&live_lock);
    return found;
}

int progcache__iprog_register(progcache__iprog *p)
{
    int rc = 0;
    pthread_mutex_lock(&live_lock);
    if (num_live == cap_live) {
        size_t cap = cap_live ? 2 * cap_live : 16;
        progcache__iprog **grown = progcache__realloc(live, cap * sizeof *grown);
        if (grown) {
            live = grown;
            cap_live = cap;
        }
    }
    if (num_live < cap_live)
        live[num_live++] = p;
    else
        rc = -1;
    pthread_mutex_unlock(&live_lock);
    return rc;
}

void progcache__iprog_unregister(progcache__iprog *p)
{
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < num_live; i++)
        if (live[i] == p) {
            live[i] = live[--num_live];
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        progcache__free(v[i]);
    progcache__free(v);
}

static void iprog_free(progcache__iprog *p)
{
    progcache__free(p->source);
    progcache__free(p->name);
    free_strings(p->headers, (size_t)p->num_headers);
    free_strings(p->include_names, (size_t)p->num_headers);
    free_strings(p->exprs, p->num_exprs);
    free_strings(p->options, (size_t)p->num_options);
    progcache__bundle_free(&p->bundle);
    progcache__free(p);
}

static char *dup(const char *s) { return s ? progcache__strdup(s) : NULL; }

/* ---- a real program on demand ---------------------------------------------- */

nvrtcResult progcache__iprog_materialize(progcache__iprog *p)
{
    const progcache__real_nvrtc *r = &p->slot->real;
    if (!p->real) {
        nvrtcResult rc = r->CreateProgram(&p->real, p->source, p->name, p->num_headers,
                                          (const char *const *)p->headers,
                                          (const char *const *)p->include_names);
        if (rc != NVRTC_SUCCESS) {
            p->real = NULL;
            return rc;
        }
        for (size_t i = 0; i < p->num_exprs; i++)
            if ((rc = r->AddNameExpression(p->real, p->exprs[i])) != NVRTC_SUCCESS)
                return rc;
    }
    if (p->state == IPROG_REPLAY && !p->compiled_real) {
        progcache__cache_record(progcache__intercept_cache(),
                                PROGCACHE_STAT_INTERCEPT_REAL_PROGRAMS, 1);
        p->compiled_real = 1;
        (void)r->CompileProgram(p->real, p->num_options, (const char *const *)p->options);
    }
    p->state = IPROG_REAL;
    progcache__standin_note_load(p->slot);
    return NVRTC_SUCCESS;
}

/* ---- the functions ---------------------------------------------------------- */

/* The real function name of slot n, for a handle that is not ours, or
 * before the slot's table is complete. */
static void *real_of(int n, const char *name)
{
    return progcache__slot_symbol(&progcache__slots[n], name);
}

#define NOT_OURS(n, prog, type, name, ...)                                                        \
    do {                                                                                          \
        if (!progcache__iprog_live(prog)) {                                                       \
            type fn_ = (type)real_of(n, name);                                                    \
            return fn_ ? fn_(__VA_ARGS__) : NVRTC_ERROR_INVALID_PROGRAM;                          \
        }                                                                                         \
    } while (0)

typedef nvrtcResult (*create_fn)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);

static nvrtcResult i_create(int n, nvrtcProgram *prog, const char *src, const char *name,
                            int num_headers, const char *const *headers,
                            const char *const *include_names)
{
    progcache__nvrtc_slot *s = &progcache__slots[n];
    int odd = !prog || !src || num_headers < 0 || (num_headers && (!headers || !include_names));
    for (int i = 0; !odd && i < num_headers; i++)
        odd = !headers[i] || !include_names[i];
    if (odd || progcache__slot_ready(s)) {
        /* NVRTC's own answer to bad arguments, and a library we cannot
         * drive: a real program, which every later call passes on. */
        create_fn fn = (create_fn)real_of(n, "nvrtcCreateProgram");
        return fn ? fn(prog, src, name, num_headers, headers, include_names)
                  : NVRTC_ERROR_INVALID_INPUT;
    }
    progcache__iprog *p = progcache__calloc(1, sizeof *p);
    if (!p)
        return NVRTC_ERROR_OUT_OF_MEMORY;
    p->slot = s;
    p->source = dup(src);
    p->name = dup(name);
    p->num_headers = num_headers;
    int bad = !p->source || (name && !p->name);
    if (num_headers) {
        p->headers = progcache__calloc((size_t)num_headers, sizeof *p->headers);
        p->include_names = progcache__calloc((size_t)num_headers, sizeof *p->include_names);
        bad = bad || !p->headers || !p->include_names;
        for (int i = 0; !bad && i < num_headers; i++) {
            p->headers[i] = dup(headers[i]);
            p->include_names[i] = dup(include_names[i]);
            bad = !p->headers[i] || !p->include_names[i];
        }
    }
    if (bad) {
        if (!p->headers || !p->include_names)
            p->num_headers = 0;
        iprog_free(p);
        return NVRTC_ERROR_OUT_OF_MEMORY;
    }
    if (progcache__iprog_register(p)) {
        iprog_free(p);
        return NVRTC_ERROR_OUT_OF_MEMORY;
    }
    *prog = (nvrtcProgram)(void *)p;
    return NVRTC_SUCCESS;
}

typedef nvrtcResult (*destroy_fn)(nvrtcProgram *);

static nvrtcResult i_destroy(int n, nvrtcProgram *prog)
{
    if (!prog || !progcache__iprog_live(*prog)) {
        destroy_fn fn = (destroy_fn)real_of(n, "nvrtcDestroyProgram");
        return fn ? fn(prog) : NVRTC_ERROR_INVALID_PROGRAM;
    }
    progcache__iprog *p = (progcache__iprog *)(void *)*prog;
    progcache__iprog_unregister(p);
    nvrtcResult rc = NVRTC_SUCCESS;
    if (p->real)
        rc = p->slot->real.DestroyProgram(&p->real);
    iprog_free(p);
    *prog = NULL;
    return rc;
}

typedef nvrtcResult (*compile_fn)(nvrtcProgram, int, const char *const *);

static nvrtcResult i_compile(int n, nvrtcProgram prog, int num, const char *const *options)
{
    NOT_OURS(n, prog, compile_fn, "nvrtcCompileProgram", prog, num, options);
    return progcache__intercept_compile((progcache__iprog *)(void *)prog, num, options);
}

typedef nvrtcResult (*add_fn)(nvrtcProgram, const char *);

static nvrtcResult i_add_name(int n, nvrtcProgram prog, const char *expr)
{
    NOT_OURS(n, prog, add_fn, "nvrtcAddNameExpression", prog, expr);
    progcache__iprog *p = (progcache__iprog *)(void *)prog;
    if (p->state == IPROG_RECORDED && expr) {
        char **grown = progcache__realloc(p->exprs, (p->num_exprs + 1) * sizeof *grown);
        if (!grown)
            return NVRTC_ERROR_OUT_OF_MEMORY;
        p->exprs = grown;
        if (!(p->exprs[p->num_exprs] = dup(expr)))
            return NVRTC_ERROR_OUT_OF_MEMORY;
        p->num_exprs++;
        return NVRTC_SUCCESS;
    }
    nvrtcResult rc = progcache__iprog_materialize(p);
    return rc ? rc : p->slot->real.AddNameExpression(p->real, expr);
}

typedef nvrtcResult (*lowered_fn)(nvrtcProgram, const char *, const char **);

static nvrtcResult i_lowered(int n, nvrtcProgram prog, const char *expr, const char **out)
{
    NOT_OURS(n, prog, lowered_fn, "nvrtcGetLoweredName", prog, expr, out);
    progcache__iprog *p = (progcache__iprog *)(void *)prog;
    const progcache__bundle *b = &p->bundle;
    for (size_t i = 0; p->state == IPROG_REPLAY && expr && out && i < b->num_names; i++) {
        if (strcmp(b->exprs[i], expr))
            continue;
        if (b->lowered_rc[i] == NVRTC_SUCCESS)
            *out = b->lowered[i];
        return (nvrtcResult)b->lowered_rc[i];
    }
    nvrtcResult rc = progcache__iprog_materialize(p);
    return rc ? rc : p->slot->real.GetLoweredName(p->real, expr, out);
}

typedef nvrtcResult (*size_fn)(nvrtcProgram, size_t *);
typedef nvrtcResult (*bytes_fn)(nvrtcProgram, char *);
static const char *const size_names[OUT_COUNT] = {"nvrtcGetProgramLogSize", "nvrtcGetPTXSize",
                                                  "nvrtcGetCUBINSize", "nvrtcGetLTOIRSize",
                                                  "nvrtcGetOptiXIRSize"};
static const char *const bytes_names[OUT_COUNT] = {"nvrtcGetProgramLog", "nvrtcGetPTX",
                                                   "nvrtcGetCUBIN", "nvrtcGetLTOIR",
                                                   "nvrtcGetOptiXIR"};

static nvrtcResult i_size(int n, int k, nvrtcProgram prog, size_t *size)
{
    NOT_OURS(n, prog, size_fn, size_names[k], prog, size);
    progcache__iprog *p = (progcache__iprog *)(void *)prog;
    if (p->state == IPROG_REPLAY && size) {
        if (p->bundle.size_rc[k] == NVRTC_SUCCESS)
            *size = p->bundle.out[k].size;
        return (nvrtcResult)p->bundle.size_rc[k];
    }
    nvrtcResult rc = progcache__iprog_materialize(p);
    return rc ? rc : p->slot->real.GetSize[k](p->real, size);
}

static nvrtcResult i_bytes(int n, int k, nvrtcProgram prog, char *into)
{
    NOT_OURS(n, prog, bytes_fn, bytes_names[k], prog, into);
    progcache__iprog *p = (progcache__iprog *)(void *)prog;
    if (p->state == IPROG_REPLAY && into) {
        if (p->bundle.bytes_rc[k] == NVRTC_SUCCESS && p->bundle.out[k].size)
            memcpy(into, p->bundle.out[k].data, p->bundle.out[k].size);
        return (nvrtcResult)p->bundle.bytes_rc[k];
    }
    nvrtcResult rc = progcache__iprog_materialize(p);
    return rc ? rc : p->slot->real.GetBytes[k](p->real, into);
}

typedef nvrtcResult (*status_fn)(nvrtcProgram);

static nvrtcResult i_pch_status(int n, nvrtcProgram prog)
{
    NOT_OURS(n, prog, status_fn, "nvrtcGetPCHCreateStatus", prog);
    progcache__iprog *p = (progcache__iprog *)(void *)prog;
    if (p->state == IPROG_REPLAY)
        return (nvrtcResult)p->bundle.pch_status_rc;
    nvrtcResult rc = progcache__iprog_materialize(p);
    return rc ? rc : p->slot->real.GetPCHCreateStatus(p->real);
}

static nvrtcResult i_pch_heap(int n, nvrtcProgram prog, size_t *size)
{
    NOT_OURS(n, prog, size_fn, "nvrtcGetPCHHeapSizeRequired", prog, size);
    progcache__iprog *p = (progcache__iprog *)(void *)prog;
    if (p->state == IPROG_REPLAY && size) {
        if (p->bundle.pch_heap_rc == NVRTC_SUCCESS)
            *size = (size_t)p->bundle.pch_heap;
        return (nvrtcResult)p->bundle.pch_heap_rc;
    }
    nvrtcResult rc = progcache__iprog_materialize(p);
    return rc ? rc : p->slot->real.GetPCHHeapSizeRequired(p->real, size);
}

typedef nvrtcResult (*version_fn)(int *, int *);

/* nvrtcVersion behind a stand-in: the version the slot's key carries (from
 * the cache's record of that file, or NVRTC asked once), as NVRTC answers. */
static nvrtcResult i_version(int n, int *major, int *minor)
{
    progcache__nvrtc_slot *s = &progcache__slots[n];
    if (!major || !minor || progcache__slot_ready(s)) {
        version_fn fn = (version_fn)real_of(n, "nvrtcVersion");
        return fn ? fn(major, minor) : NVRTC_ERROR_INVALID_INPUT;
    }
    *major = s->major;
    *minor = s->minor;
    return NVRTC_SUCCESS;
}

typedef int (*flow_cb)(void *, void *);
typedef nvrtcResult (*flow_fn)(nvrtcProgram, flow_cb, void *);

/* A flow callback watches (and may cancel) a real compile: the program
 * gets a real one, and its compiles pass through (counted). */
static nvrtcResult i_flow(int n, nvrtcProgram prog, flow_cb cb, void *payload)
{
    NOT_OURS(n, prog, flow_fn, "nvrtcSetFlowCallback", prog, cb, payload);
    progcache__iprog *p = (progcache__iprog *)(void *)prog;
    p->has_callback = 1;
    nvrtcResult rc = progcache__iprog_materialize(p);
    return rc ? rc : p->slot->real.SetFlowCallback(p->real, cb, payload);
}

/* ---- one set per slot ------------------------------------------------------- */

#define OUTS(n, k, X)                                                                             \
    static nvrtcResult s##n##_size_##X(nvrtcProgram p, size_t *s) { return i_size(n, k, p, s); } \
    static nvrtcResult s##n##_bytes_##X(nvrtcProgram p, char *b) { return i_bytes(n, k, p, b); }

#define SLOT(n)                                                                                   \
    static nvrtcResult s##n##_create(nvrtcProgram *p, const char *src, const char *name, int nh, \
                                     const char *const *h, const char *const *in)                \
    {                                                                                             \
        return i_create(n, p, src, name, nh, h, in);                                              \
    }                                                                                             \
    static nvrtcResult s##n##_destroy(nvrtcProgram *p) { return i_destroy(n, p); }                \
    static nvrtcResult s##n##_compile(nvrtcProgram p, int c, const char *const *o)                \
    {                                                                                             \
        return i_compile(n, p, c, o);                                                             \
    }                                                                                             \
    static nvrtcResult s##n##_add(nvrtcProgram p, const char *e) { return i_add_name(n, p, e); } \
    static nvrtcResult s##n##_lowered(nvrtcProgram p, const char *e, const char **o)             \
    {                                                                                             \
        return i_lowered(n, p, e, o);                                                             \
    }                                                                                             \
    static nvrtcResult s##n##_pch_status(nvrtcProgram p) { return i_pch_status(n, p); }          \
    static nvrtcResult s##n##_pch_heap(nvrtcProgram p, size_t *s) { return i_pch_heap(n, p, s); }\
    static nvrtcResult s##n##_flow(nvrtcProgram p, flow_cb cb, void *pl)                          \
    {                                                                                             \
        return i_flow(n, p, cb, pl);                                                              \
    }                                                                                             \
    static nvrtcResult s##n##_version(int *a, int *b) { return i_version(n, a, b); }              \
    OUTS(n, OUT_LOG, log) OUTS(n, OUT_PTX, ptx) OUTS(n, OUT_CUBIN, cubin)                         \
    OUTS(n, OUT_LTOIR, ltoir) OUTS(n, OUT_OPTIXIR, optixir)                                       \
    static const struct named s##n##_table[] = {                                                  \
        {"nvrtcCreateProgram", (void *)s##n##_create},                                            \
        {"nvrtcDestroyProgram", (void *)s##n##_destroy},                                          \
        {"nvrtcCompileProgram", (void *)s##n##_compile},                                          \
        {"nvrtcAddNameExpression", (void *)s##n##_add},                                           \
        {"nvrtcGetLoweredName", (void *)s##n##_lowered},                                          \
        {"nvrtcGetPCHCreateStatus", (void *)s##n##_pch_status},                                   \
        {"nvrtcGetPCHHeapSizeRequired", (void *)s##n##_pch_heap},                                 \
        {"nvrtcSetFlowCallback", (void *)s##n##_flow},                                            \
        {"nvrtcVersion", (void *)s##n##_version},                                                 \
        {"nvrtcGetProgramLogSize", (void *)s##n##_size_log},                                      \
        {"nvrtcGetProgramLog", (void *)s##n##_bytes_log},                                         \
        {"nvrtcGetPTXSize", (void *)s##n##_size_ptx},                                             \
        {"nvrtcGetPTX", (void *)s##n##_bytes_ptx},                                                \
        {"nvrtcGetCUBINSize", (void *)s##n##_size_cubin},                                         \
        {"nvrtcGetCUBIN", (void *)s##n##_bytes_cubin},                                            \
        {"nvrtcGetLTOIRSize", (void *)s##n##_size_ltoir},                                         \
        {"nvrtcGetLTOIR", (void *)s##n##_bytes_ltoir},                                            \
        {"nvrtcGetOptiXIRSize", (void *)s##n##_size_optixir},                                     \
        {"nvrtcGetOptiXIR", (void *)s##n##_bytes_optixir},                                        \
    };

struct named {
    const char *name;
    void *fn;
};

SLOT(0)
SLOT(1)
SLOT(2)
SLOT(3)

_Static_assert(PROGCACHE__INTERCEPT_SLOTS == 4, "one SLOT() per slot");

void *progcache__slot_function(int slot, const char *name)
{
    static const struct named *const tables[] = {s0_table, s1_table, s2_table, s3_table};
    if (slot < 0 || slot >= PROGCACHE__INTERCEPT_SLOTS)
        return NULL;
    for (size_t i = 0; i < sizeof s0_table / sizeof s0_table[0]; i++)
        if (!strcmp(tables[slot][i].name, name))
            return tables[slot][i].fn;
    return NULL;
}
