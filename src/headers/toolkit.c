/* The CUDA toolkit whose headers a program includes (<cuda_fp16.h>,
 * CCCL's <cub/...>): they are covered by the toolkit's identity, not read.
 * Reading them would cost more than the compile's other inputs together
 * (CCCL alone is thousands of files), and their #if-guarded includes of
 * host headers cannot be resolved the way the scanner resolves a user's.
 *
 * Which toolkit: the one the NVRTC that compiles belongs to (loaded, or
 * the file a load would open: nvrtc_lib.c). NVRTC 13 has no
 * built-in headers of its own beyond the compiler's internal ones (an
 * <cuda_fp16.h> without -I fails: "no directories in search list"), so a
 * program reaches toolkit headers only through an include path into this
 * directory, and a different NVRTC is already a different key. */
#include "headers/toolkit.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "error.h"
#include "key/nvrtc_lib.h"
#include "progcache/key.h"
#include "sha256.h"

/* Files that a toolkit update in place rewrites: the driver API header,
 * the runtime's, the half and bfloat16 implementations, the compiler's
 * host definitions and CCCL's version. Package managers keep the
 * packaged modification times, so two machines with the same packages
 * get the same identity. */
static const char *const sentinels[] = {
    "cuda.h",        "cuda_runtime_api.h", "cuda_fp16.hpp", "cuda_bf16.hpp",
    "crt/host_defines.h", "cccl/cuda/std/__cccl/version.h",
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char include_dir[PATH_MAX];
static size_t include_len;
static char library[PATH_MAX];
static char **top_names;
static size_t num_top_names;

static int has_file(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    return snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
           stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Add the names in dir (skipping dot files) to top_names. Best effort: a
 * failure leaves fewer names, which only weakens a check that a shadowing
 * directory is refused, never makes a key wrong by itself. */
static void add_names(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char **grown = progcache__realloc(top_names, (num_top_names + 1) * sizeof *grown);
        if (!grown)
            break;
        top_names = grown;
        if (!(top_names[num_top_names] = progcache__strdup(e->d_name)))
            break;
        num_top_names++;
    }
    closedir(d);
}

static void find_toolkit(void)
{
    /* The NVRTC that compiles: the loaded one, else the file a load would
     * open (found without mapping it), else what a load finds. */
    progcache__nvrtc_file file;
    const progcache__nvrtc_api *api;
    if (progcache__nvrtc_loaded_file(&file) != PROGCACHE_OK &&
        progcache__nvrtc_candidate(&file) != PROGCACHE_OK &&
        (progcache__nvrtc_load(&api) != PROGCACHE_OK ||
         progcache__nvrtc_loaded_file(&file) != PROGCACHE_OK)) {
        progcache_error_clear();
        return;
    }
    char real[PATH_MAX];
    snprintf(real, sizeof real, "%s", file.path);
    snprintf(library, sizeof library, "%s", real);
    /* <root>/lib/libnvrtc.so.13 -> <root>/include (also for
     * <root>/targets/x86_64-linux/lib). */
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(real, '/');
        if (!slash || slash == real)
            return;
        *slash = '\0';
    }
    char candidate[PATH_MAX + 16];
    snprintf(candidate, sizeof candidate, "%s/include", real);
    char resolved[PATH_MAX];
    if (!realpath(candidate, resolved))
        return;
    if (!has_file(resolved, "cuda.h") && !has_file(resolved, "nvrtc.h"))
        return;
    snprintf(include_dir, sizeof include_dir, "%s", resolved);
    include_len = strlen(include_dir);
    add_names(include_dir);
    char cccl[PATH_MAX + 8];
    snprintf(cccl, sizeof cccl, "%s/cccl", include_dir);
    add_names(cccl);
}

const char *progcache__toolkit_include(void)
{
    pthread_once(&once, find_toolkit);
    return include_len ? include_dir : NULL;
}

int progcache__toolkit_contains(const char *real_path)
{
    const char *dir = progcache__toolkit_include();
    return dir && real_path && !strncmp(real_path, dir, include_len) &&
           real_path[include_len] == '/';
}

const char *const *progcache__toolkit_top_names(size_t *n)
{
    *n = 0;
    if (!progcache__toolkit_include())
        return NULL;
    *n = num_top_names;
    return (const char *const *)top_names;
}

/* One line of the identity: "<what> <size> <mtime_ns>\n", or "<what> -\n"
 * when the file is not there. */
static int add_stat(progcache__sha256 *h, const char *label, const char *path)
{
    struct stat st;
    char line[PATH_MAX + 96];
    int n;
    if (stat(path, &st) == 0)
        n = snprintf(line, sizeof line, "%s %lld %lld.%09ld\n", label, (long long)st.st_size,
                     (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
    else
        n = snprintf(line, sizeof line, "%s -\n", label);
    if (n < 0 || (size_t)n >= sizeof line)
        n = (int)strlen(line);
    return progcache__sha256_update(h, line, (size_t)n);
}

int progcache__toolkit_identity(unsigned char out[32])
{
    const char *dir = progcache__toolkit_include();
    if (!dir)
        return PROGCACHE_ENOTFOUND;
    int major, minor;
    int rc = progcache_nvrtc_version(&major, &minor);
    if (rc)
        return rc;
    progcache__sha256 *h = progcache__sha256_new();
    if (!h)
        return progcache_error_code() ? progcache_error_code() : PROGCACHE_ENOMEM;
    char line[2 * PATH_MAX + 64];
    int n = snprintf(line, sizeof line, "progcache toolkit 1\nnvrtc %d.%d\ninclude %s\n", major,
                     minor, dir);
    rc = progcache__sha256_update(h, line, strlen(line));
    (void)n;
    if (!rc)
        rc = add_stat(h, library, library);
    for (size_t i = 0; !rc && i < sizeof sentinels / sizeof sentinels[0]; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dir, sentinels[i]);
        rc = add_stat(h, sentinels[i], path);
    }
    if (rc) {
        progcache__sha256_free(h);
        return rc;
    }
    return progcache__sha256_final(h, out);
}
