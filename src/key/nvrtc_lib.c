/* NVRTC, opened with dlopen on first need and resolved into a function
 * table once per process, as the driver is (src/cuda/driver.c).
 *
 * Why not link libnvrtc: a program linked against it does not start where
 * NVRTC is missing (the dynamic loader fails before main), and most nodes
 * of a fleet carry the driver and no toolkit. Linked, a cache hit also
 * maps all of NVRTC (a 109 MB file: about 33 MB of a process's memory and
 * 10 ms of its start) for nothing. Loaded on demand, only a compile, or a
 * key whose NVRTC version nothing else can tell, pays for it.
 *
 * Where it is looked for, in order: $PROGCACHE_NVRTC_LIBRARY (that file
 * only: an explicit choice that fails is an error, not a reason to take
 * another NVRTC), the toolkit's lib dir this library was built against,
 * then the dynamic loader's search path (LD_LIBRARY_PATH, ld.so.cache). */
#include "key/nvrtc_lib.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "fs.h"

#ifndef PROGCACHE_NVRTC_DIR
#define PROGCACHE_NVRTC_DIR ""
#endif
#ifndef PROGCACHE_NVRTC_SONAME
#define PROGCACHE_NVRTC_SONAME "libnvrtc.so"
#endif

static struct {
    pthread_once_t once;
    int rc;
    char message[4096];
    progcache__nvrtc_api api;
} nvrtc = {PTHREAD_ONCE_INIT, 0, "", {0}};

/* Set (release) once the table is complete. */
static atomic_int nvrtc_ready;

static const struct {
    const char *name;
    size_t offset;
} entries[] = {
#define ENTRY(sym) {#sym, offsetof(progcache__nvrtc_api, sym)}
    ENTRY(nvrtcVersion),          ENTRY(nvrtcGetErrorString),
    ENTRY(nvrtcCreateProgram),    ENTRY(nvrtcDestroyProgram),
    ENTRY(nvrtcAddNameExpression), ENTRY(nvrtcCompileProgram),
    ENTRY(nvrtcGetProgramLogSize), ENTRY(nvrtcGetProgramLog),
    ENTRY(nvrtcGetPTXSize),       ENTRY(nvrtcGetPTX),
    ENTRY(nvrtcGetCUBINSize),     ENTRY(nvrtcGetCUBIN),
    ENTRY(nvrtcGetLTOIRSize),     ENTRY(nvrtcGetLTOIR),
    ENTRY(nvrtcGetLoweredName),   ENTRY(nvrtcGetPCHCreateStatus),
    ENTRY(nvrtcGetPCHHeapSizeRequired),
#undef ENTRY
};

/* The build-time path, when the toolkit's lib dir was known. */
static const char *built_path(char *buf, size_t len)
{
    if (!PROGCACHE_NVRTC_DIR[0])
        return NULL;
    snprintf(buf, len, "%s/%s", PROGCACHE_NVRTC_DIR, PROGCACHE_NVRTC_SONAME);
    return buf;
}

/* The build ID last read, by the file's device, inode, size and change
 * time: while those stay, the file's bytes did (a write changes the change
 * time, a replacement the inode), so a key derivation on the hot path pays
 * a stat, not an open and reads. */
static pthread_mutex_t id_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec ctime;
    unsigned char id[PROGCACHE__BUILD_ID_MAX];
    size_t len;
    int set;
} id_memo;

static int same_stat(const struct stat *a, dev_t dev, ino_t ino, off_t size,
                     const struct timespec *ctime)
{
    return a->st_dev == dev && a->st_ino == ino && a->st_size == size &&
           a->st_ctim.tv_sec == ctime->tv_sec && a->st_ctim.tv_nsec == ctime->tv_nsec;
}

/* out's build ID, for the file st describes: remembered, else read through
 * a descriptor that is checked to be that file (none when it cannot be
 * read: the identity is then path, size and change time, as before). */
static void build_id_of(progcache__nvrtc_file *out, const struct stat *st)
{
    out->build_id_len = 0;
    pthread_mutex_lock(&id_lock);
    int known = id_memo.set && same_stat(st, id_memo.dev, id_memo.ino, id_memo.size,
                                         &id_memo.ctime);
    if (known) {
        memcpy(out->build_id, id_memo.id, id_memo.len);
        out->build_id_len = id_memo.len;
    }
    pthread_mutex_unlock(&id_lock);
    if (known)
        return;
    int fd = open(out->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return;
    struct stat fst;
    if (fstat(fd, &fst) == 0 && same_stat(&fst, st->st_dev, st->st_ino, st->st_size,
                                          &st->st_ctim)) {
        out->build_id_len = progcache__elf_build_id_fd(fd, out->build_id, sizeof out->build_id);
        pthread_mutex_lock(&id_lock);
        id_memo.dev = st->st_dev;
        id_memo.ino = st->st_ino;
        id_memo.size = st->st_size;
        id_memo.ctime = st->st_ctim;
        memcpy(id_memo.id, out->build_id, out->build_id_len);
        id_memo.len = out->build_id_len;
        id_memo.set = 1;
        pthread_mutex_unlock(&id_lock);
    }
    close(fd);
}

static int file_of(progcache__nvrtc_file *out, const char *path)
{
    struct stat st;
    if (!realpath(path, out->path) || stat(out->path, &st) != 0 || !S_ISREG(st.st_mode))
        return PROGCACHE_ENOTFOUND;
    out->size = (long long)st.st_size;
    out->ctime_sec = (long long)st.st_ctim.tv_sec;
    out->ctime_nsec = st.st_ctim.tv_nsec;
    build_id_of(out, &st);
    return PROGCACHE_OK;
}

static void load_once(void)
{
    char built[PATH_MAX];
    const char *setting = progcache__config_nvrtc_library();
    const char *tried[2] = {setting, NULL};
    if (!setting) {
        tried[0] = built_path(built, sizeof built);
        tried[1] = PROGCACHE_NVRTC_SONAME;
    }
    void *lib = NULL;
    char why[2][1024] = {"", ""};
    for (int i = 0; i < 2 && !lib; i++) {
        struct stat st;
        if (!tried[i])
            continue;
        /* An absolute path that is not there is said so, without dlopen;
         * one that is not a regular file too: dlopen would open a FIFO
         * without O_NONBLOCK and wait for a writer for ever. */
        if (tried[i][0] == '/' && stat(tried[i], &st) != 0) {
            snprintf(why[i], sizeof why[i], "%s: no such file", tried[i]);
            continue;
        }
        if (tried[i][0] == '/' && !S_ISREG(st.st_mode)) {
            snprintf(why[i], sizeof why[i], "%s: not a regular file (%s)", tried[i],
                     progcache__fs_type_name(st.st_mode));
            continue;
        }
        lib = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            snprintf(why[i], sizeof why[i], "%s", e ? e : tried[i]);
        }
    }
    if (!lib) {
        nvrtc.rc = PROGCACHE_ENOCUDA;
        snprintf(nvrtc.message, sizeof nvrtc.message,
                 "no NVRTC: %s could not be loaded (%s%s%s); install the CUDA toolkit's "
                 "NVRTC, or set PROGCACHE_NVRTC_LIBRARY to its path",
                 setting ? setting : PROGCACHE_NVRTC_SONAME, why[0], why[0][0] && why[1][0] ? "; " : "",
                 why[1]);
        return;
    }
    /* Never closed: NVRTC stays for the life of the process, as linked. */
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        void *fn = dlsym(lib, entries[i].name);
        if (!fn) {
            nvrtc.rc = PROGCACHE_ENOCUDA;
            snprintf(nvrtc.message, sizeof nvrtc.message,
                     "no usable NVRTC: the library loaded as %s has no %s (an NVRTC older "
                     "than CUDA 12.8?); install the CUDA 13 toolkit's NVRTC or set "
                     "PROGCACHE_NVRTC_LIBRARY to it",
                     setting ? setting : PROGCACHE_NVRTC_SONAME, entries[i].name);
            return;
        }
        memcpy((char *)&nvrtc.api + entries[i].offset, &fn, sizeof fn);
    }
    nvrtcResult r = nvrtc.api.nvrtcVersion(&nvrtc.api.major, &nvrtc.api.minor);
    if (r != NVRTC_SUCCESS) {
        nvrtc.rc = PROGCACHE_ENOCUDA;
        snprintf(nvrtc.message, sizeof nvrtc.message,
                 "nvrtcVersion() failed: %s; check that a working NVRTC library is installed",
                 nvrtc.api.nvrtcGetErrorString(r));
        return;
    }
    atomic_store_explicit(&nvrtc_ready, 1, memory_order_release);
}

int progcache__nvrtc_load(const progcache__nvrtc_api **api)
{
    pthread_once(&nvrtc.once, load_once);
    if (nvrtc.rc) {
        *api = NULL;
        return progcache__error(nvrtc.rc, "%s", nvrtc.message);
    }
    *api = &nvrtc.api;
    return PROGCACHE_OK;
}

const progcache__nvrtc_api *progcache__nvrtc_loaded(void)
{
    return atomic_load_explicit(&nvrtc_ready, memory_order_acquire) ? &nvrtc.api : NULL;
}

int progcache__nvrtc_candidate(progcache__nvrtc_file *out)
{
    char built[PATH_MAX];
    const char *path = progcache__config_nvrtc_library();
    if (!path)
        path = built_path(built, sizeof built);
    /* The setting may name a bare soname (the search path's file): only a
     * load can tell which file that is. */
    if (!path || path[0] != '/')
        return PROGCACHE_ENOTFOUND;
    return file_of(out, path);
}

int progcache__nvrtc_loaded_file(progcache__nvrtc_file *out)
{
    const progcache__nvrtc_api *api = progcache__nvrtc_loaded();
    Dl_info info;
    if (!api || !dladdr((void *)api->nvrtcVersion, &info) || !info.dli_fname)
        return PROGCACHE_ENOTFOUND;
    return file_of(out, info.dli_fname);
}

int progcache__nvrtc_same_file(const progcache__nvrtc_file *a, const progcache__nvrtc_file *b)
{
    return a->size == b->size && a->ctime_sec == b->ctime_sec && a->ctime_nsec == b->ctime_nsec &&
           a->build_id_len == b->build_id_len &&
           !memcmp(a->build_id, b->build_id, a->build_id_len) && !strcmp(a->path, b->path);
}

/* One remembered record: the last one a cache gave (a process normally
 * has one NVRTC candidate, and one record of it). */
static pthread_mutex_t remembered_lock = PTHREAD_MUTEX_INITIALIZER;
static progcache__nvrtc_file remembered;
static int remembered_major, remembered_minor;

void progcache__nvrtc_remember(const progcache__nvrtc_file *file, int major, int minor)
{
    pthread_mutex_lock(&remembered_lock);
    remembered = *file;
    remembered_major = major;
    remembered_minor = minor;
    pthread_mutex_unlock(&remembered_lock);
}

int progcache__nvrtc_version_known(int *major, int *minor, const char **how)
{
    const progcache__nvrtc_api *api = progcache__nvrtc_loaded();
    if (api) {
        *major = api->major;
        *minor = api->minor;
        *how = "loaded";
        return PROGCACHE_OK;
    }
    int rc = progcache__config_nvrtc_version(major, minor);
    if (rc != PROGCACHE_ENOTFOUND) {
        *how = "PROGCACHE_NVRTC_VERSION";
        return rc;
    }
    progcache__nvrtc_file now;
    if (progcache__nvrtc_candidate(&now) != PROGCACHE_OK)
        return PROGCACHE_ENOTFOUND;
    pthread_mutex_lock(&remembered_lock);
    int same = remembered_major > 0 && progcache__nvrtc_same_file(&remembered, &now);
    if (same) {
        *major = remembered_major;
        *minor = remembered_minor;
        *how = "record";
    }
    pthread_mutex_unlock(&remembered_lock);
    return same ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
}
