/* A program that calls NVRTC itself, as the programs `progcache exec`
 * serves do (tests/intercept/test_intercept.py). Built three ways: linked
 * with -lnvrtc (NVRTC_LINKED; RUNPATH and DT_RPATH builds), or not linked,
 * taking NVRTC with dlopen by the name or path given on the command line.
 *
 *   nvrtc_client OUTDIR [--lib NAME_OR_PATH|default:NAME] [--threads N] [--source FILE]
 *                [--name NAME] [--mem-header NAME FILE] [--extra FN]
 *                [--flow 1] [--maps 1] [--archs 1] [OPTION...]
 *
 * Compiles the source (a template kernel with a warning, by default) with
 * a name expression and the options (default -arch=sm_90), then writes
 * every answer to OUTDIR: rc.txt (each call's return code and size), log,
 * ptx, cubin, ltoir, optixir, lowered. With --threads, N threads compile at
 * once and each writes OUTDIR/t<i>/. With --maps 1, OUTDIR/maps is the
 * process's /proc/self/maps at the end (which libraries it mapped). Exit 0
 * when every call was made. */
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef nvrtcResult (*size_fn)(nvrtcProgram, size_t *);
typedef nvrtcResult (*bytes_fn)(nvrtcProgram, char *);

static struct {
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                          const char *const *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*add)(nvrtcProgram, const char *);
    nvrtcResult (*lowered)(nvrtcProgram, const char *, const char **);
    size_fn size[5];
    bytes_fn bytes[5];
} api;

static const char *const out_names[5] = {"log", "ptx", "cubin", "ltoir", "optixir"};
static const char *source =
    "template <typename T> __global__ void scale(T *x, T a) {\n"
    "    int unused_here;\n"
    "    x[threadIdx.x] *= a;\n"
    "}\n";
static const char *name = "client.cu";
/* --extra NAME: after the compile, call NVRTC's function NAME(prog,
 * size_t *) (one the interceptor does not implement, nvrtcGetTileIRSize of
 * 13.5): its answer goes to rc.txt. dlopen builds only. */
static const char *extra_fn;
static void *lib_handle;
/* --flow 1: a flow callback (nvrtcSetFlowCallback) that lets the compile
 * go on; counted in rc.txt. */
static int flow;
static int flow_calls;
static int maps;
/* --archs 1: after the compile, nvrtcGetNumSupportedArchs and
 * nvrtcGetSupportedArchs (functions the interceptor leaves to NVRTC), in
 * rc.txt. */
static int archs;
static int on_flow(void *param, void *payload)
{
    (void)param;
    (void)payload;
    __atomic_add_fetch(&flow_calls, 1, __ATOMIC_RELAXED);
    return 0;
}
/* --mem-header NAME FILE: one header passed in memory. */
static const char *mem_name, *mem_text;
static const char **options;
static int num_options;
static const char *outdir;

#ifdef NVRTC_LINKED
/* Called directly, through the PLT, as a linked program calls NVRTC. */
static nvrtcResult l_size(nvrtcProgram p, int k, size_t *n)
{
    switch (k) {
    case 0: return nvrtcGetProgramLogSize(p, n);
    case 1: return nvrtcGetPTXSize(p, n);
    case 2: return nvrtcGetCUBINSize(p, n);
    case 3: return nvrtcGetLTOIRSize(p, n);
    default: return nvrtcGetOptiXIRSize(p, n);
    }
}
static nvrtcResult l_bytes(nvrtcProgram p, int k, char *b)
{
    switch (k) {
    case 0: return nvrtcGetProgramLog(p, b);
    case 1: return nvrtcGetPTX(p, b);
    case 2: return nvrtcGetCUBIN(p, b);
    case 3: return nvrtcGetLTOIR(p, b);
    default: return nvrtcGetOptiXIR(p, b);
    }
}
#define CREATE nvrtcCreateProgram
#define DESTROY nvrtcDestroyProgram
#define COMPILE nvrtcCompileProgram
#define ADD nvrtcAddNameExpression
#define LOWERED nvrtcGetLoweredName
#define SIZE(p, k, n) l_size(p, k, n)
#define BYTES(p, k, b) l_bytes(p, k, b)
#else
#define CREATE api.create
#define DESTROY api.destroy
#define COMPILE api.compile
#define ADD api.add
#define LOWERED api.lowered
#define SIZE(p, k, n) api.size[k](p, n)
#define BYTES(p, k, b) api.bytes[k](p, b)
#endif

static void load(const char *lib)
{
#ifdef NVRTC_LINKED
    (void)lib;
#else
    /* "default:NAME": loaded global, then looked up with RTLD_DEFAULT, as
     * cuda-bindings does first. */
    int global = !strncmp(lib, "default:", 8);
    void *h = dlopen(global ? lib + 8 : lib, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
        fprintf(stderr, "nvrtc_client: %s\n", dlerror());
        exit(2);
    }
    if (global)
        h = RTLD_DEFAULT;
    lib_handle = h;
    *(void **)&api.create = dlsym(h, "nvrtcCreateProgram");
    *(void **)&api.destroy = dlsym(h, "nvrtcDestroyProgram");
    *(void **)&api.compile = dlsym(h, "nvrtcCompileProgram");
    *(void **)&api.add = dlsym(h, "nvrtcAddNameExpression");
    *(void **)&api.lowered = dlsym(h, "nvrtcGetLoweredName");
    const char *s[5] = {"nvrtcGetProgramLogSize", "nvrtcGetPTXSize", "nvrtcGetCUBINSize",
                        "nvrtcGetLTOIRSize", "nvrtcGetOptiXIRSize"};
    const char *b[5] = {"nvrtcGetProgramLog", "nvrtcGetPTX", "nvrtcGetCUBIN", "nvrtcGetLTOIR",
                        "nvrtcGetOptiXIR"};
    for (int k = 0; k < 5; k++) {
        *(void **)&api.size[k] = dlsym(h, s[k]);
        *(void **)&api.bytes[k] = dlsym(h, b[k]);
    }
    if (!api.create || !api.lowered || !api.bytes[4]) {
        fprintf(stderr, "nvrtc_client: a function is missing\n");
        exit(2);
    }
#endif
}

static void write_file(const char *dir, const char *file, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
        fprintf(stderr, "nvrtc_client: cannot write %s\n", path);
        exit(2);
    }
}

static void *one(void *arg)
{
    const char *dir = arg;
    mkdir(dir, 0755);
    char rcs[4096];
    size_t at = 0;
    nvrtcProgram prog;
    nvrtcResult rc = CREATE(&prog, source, name, mem_name ? 1 : 0, mem_name ? &mem_text : NULL,
                            mem_name ? &mem_name : NULL);
    at += (size_t)snprintf(rcs + at, sizeof rcs - at, "create %d\n", rc);
    rc = ADD(prog, "scale<float>");
    at += (size_t)snprintf(rcs + at, sizeof rcs - at, "add %d\n", rc);
    if (flow) {
#ifdef NVRTC_LINKED
        rc = nvrtcSetFlowCallback(prog, on_flow, NULL);
#else
        nvrtcResult (*set)(nvrtcProgram, int (*)(void *, void *), void *);
        *(void **)&set = dlsym(lib_handle, "nvrtcSetFlowCallback");
        rc = set ? set(prog, on_flow, NULL) : NVRTC_ERROR_INTERNAL_ERROR;
#endif
        at += (size_t)snprintf(rcs + at, sizeof rcs - at, "flow %d\n", rc);
    }
    rc = COMPILE(prog, num_options, options);
    if (flow)
        at += (size_t)snprintf(rcs + at, sizeof rcs - at, "flow called %s\n",
                               flow_calls ? "yes" : "no");
    at += (size_t)snprintf(rcs + at, sizeof rcs - at, "compile %d\n", rc);
#ifndef NVRTC_LINKED
    if (extra_fn) {
        nvrtcResult (*fn)(nvrtcProgram, size_t *);
        *(void **)&fn = dlsym(lib_handle, extra_fn);
        size_t size = 0;
        rc = fn ? fn(prog, &size) : NVRTC_ERROR_INTERNAL_ERROR;
        at += (size_t)snprintf(rcs + at, sizeof rcs - at, "%s %d %zu\n", extra_fn, rc, size);
    }
#endif
    if (archs) {
        int n = 0, list[128];
#ifdef NVRTC_LINKED
        nvrtcResult r1 = nvrtcGetNumSupportedArchs(&n);
        nvrtcResult r2 =
            n > 0 && n <= 128 ? nvrtcGetSupportedArchs(list) : NVRTC_ERROR_INVALID_INPUT;
#else
        nvrtcResult (*num)(int *), (*get)(int *);
        *(void **)&num = dlsym(lib_handle, "nvrtcGetNumSupportedArchs");
        *(void **)&get = dlsym(lib_handle, "nvrtcGetSupportedArchs");
        nvrtcResult r1 = num ? num(&n) : NVRTC_ERROR_INTERNAL_ERROR;
        nvrtcResult r2 = get && n > 0 && n <= 128 ? get(list) : NVRTC_ERROR_INVALID_INPUT;
#endif
        at += (size_t)snprintf(rcs + at, sizeof rcs - at, "archs %d %d %d:", r1, r2, n);
        for (int k = 0; r2 == NVRTC_SUCCESS && k < n && at < sizeof rcs - 16; k++)
            at += (size_t)snprintf(rcs + at, sizeof rcs - at, " %d", list[k]);
        at += (size_t)snprintf(rcs + at, sizeof rcs - at, "\n");
    }
    for (int k = 0; k < 5; k++) {
        size_t size = 0;
        nvrtcResult sr = SIZE(prog, k, &size);
        nvrtcResult br = sr;
        char *buf = malloc(size + 1);
        if (sr == NVRTC_SUCCESS)
            br = BYTES(prog, k, buf);
        at += (size_t)snprintf(rcs + at, sizeof rcs - at, "%s size %d %zu bytes %d\n",
                               out_names[k], sr, size, br);
        write_file(dir, out_names[k], buf, sr == NVRTC_SUCCESS ? size : 0);
        free(buf);
    }
    const char *low = NULL;
    rc = LOWERED(prog, "scale<float>", &low);
    at += (size_t)snprintf(rcs + at, sizeof rcs - at, "lowered %d\n", rc);
    write_file(dir, "lowered", low ? low : "", low ? strlen(low) : 0);
    rc = DESTROY(&prog);
    at += (size_t)snprintf(rcs + at, sizeof rcs - at, "destroy %d %s\n", rc,
                           prog ? "set" : "null");
    write_file(dir, "rc.txt", rcs, at);
    return NULL;
}

static char *slurp(const char *path, int slot)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "nvrtc_client: cannot read %s\n", path);
        exit(2);
    }
    static char text[2][1 << 20];
    size_t n = fread(text[slot], 1, sizeof text[slot] - 1, f);
    fclose(f);
    text[slot][n] = '\0';
    return text[slot];
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nvrtc_client OUTDIR [--lib L] [--threads N] [--source F] "
                        "[--name N] [OPTION...]\n");
        return 2;
    }
    outdir = argv[1];
    const char *lib = "libnvrtc.so.13";
    int threads = 0, i = 2;
    for (; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--lib"))
            lib = argv[i + 1];
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--source"))
            source = slurp(argv[i + 1], 0);
        else if (!strcmp(argv[i], "--mem-header") && i + 2 < argc) {
            mem_name = argv[i + 1];
            mem_text = slurp(argv[i + 2], 1);
            i++;
        }
        else if (!strcmp(argv[i], "--flow"))
            flow = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--archs"))
            archs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--maps"))
            maps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--extra"))
            extra_fn = argv[i + 1];
        else if (!strcmp(argv[i], "--name"))
            name = strcmp(argv[i + 1], "-") ? argv[i + 1] : NULL; /* "-": NVRTC's default */
        else
            break;
    }
    static const char *defaults[] = {"-arch=sm_90"};
    options = i < argc ? (const char **)argv + i : defaults;
    num_options = i < argc ? argc - i : 1;
    load(lib);
    mkdir(outdir, 0755);
    if (!threads) {
        one((void *)outdir);
        if (maps) { /* the source's buffer is free again: the compile is over */
            const char *m = slurp("/proc/self/maps", 0);
            write_file(outdir, "maps", m, strlen(m));
        }
        return 0;
    }
    pthread_t t[64];
    char dirs[64][4096];
    for (int k = 0; k < threads && k < 64; k++) {
        snprintf(dirs[k], sizeof dirs[k], "%s/t%d", outdir, k);
        pthread_create(&t[k], NULL, one, dirs[k]);
    }
    for (int k = 0; k < threads && k < 64; k++)
        pthread_join(t[k], NULL);
    return 0;
}
