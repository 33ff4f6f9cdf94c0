/* progcache-nvrtc-helper's definitions of libc's entry points that NVRTC
 * calls (interpose.h says what each is for; nvrtc_helper.c why): mmap,
 * to place NVRTC's PCH heap, and fopen, fopen64, open, __xstat, __lxstat,
 * access and realpath, to record what NVRTC reads and probes while a PCH
 * is made. Defined in the executable, they come before libc's for
 * libnvrtc.so's calls through its PLT. */
#include "interpose.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pch/pch_wire.h"

/* ---- the PCH heap ----------------------------------------------------------- */

uintptr_t heap_addr;
size_t heap_size;
int heap_state = PROGCACHE__WIRE_HEAP_UNSEEN;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    long r;
    if (heap_addr && !addr && len == heap_size && fd == -1 && prot == (PROT_READ | PROT_WRITE) &&
        flags == (MAP_PRIVATE | MAP_ANONYMOUS) && heap_state == PROGCACHE__WIRE_HEAP_UNSEEN) {
        r = syscall(SYS_mmap, (void *)heap_addr, len, prot, flags | MAP_FIXED_NOREPLACE, fd, off);
        if (r == (long)heap_addr) {
            heap_state = PROGCACHE__WIRE_HEAP_PINNED;
            return (void *)r;
        }
        /* A kernel before 4.17 takes the flag as a hint it may ignore. */
        if (r != -1)
            syscall(SYS_munmap, (void *)r, len);
        heap_state = PROGCACHE__WIRE_HEAP_ELSEWHERE;
    }
    r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    return r == -1 ? MAP_FAILED : (void *)r; /* syscall() has set errno */
}

/* ---- what NVRTC reads --------------------------------------------------------- */

int recording;
const char *main_name;
dep *deps;
size_t num_deps;
int deps_overflow;

static pthread_mutex_t dep_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t cap_deps;
static uint32_t *slots; /* open addressing: index + 1 into deps, 0 empty */
static size_t num_slots;

static uint64_t hash_path(char kind, const char *path)
{
    uint64_t h = 1469598103934665603ull ^ (unsigned char)kind;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

static int grow_slots(void)
{
    size_t n = num_slots ? 2 * num_slots : 1024;
    uint32_t *s = calloc(n, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < num_deps; i++) {
        size_t j = hash_path(deps[i].kind, deps[i].path) & (n - 1);
        while (s[j])
            j = (j + 1) & (n - 1);
        s[j] = (uint32_t)(i + 1);
    }
    free(slots);
    slots = s;
    num_slots = n;
    return 0;
}

/* Paths that are not headers: the process's own view of itself, devices,
 * and NVRTC's temp files and PCH, which are reached through fds 3 and 4. */
static int ignored(const char *path)
{
    return !strncmp(path, "/proc/", 6) || !strncmp(path, "/sys/", 5) ||
           !strncmp(path, "/dev/", 5);
}

static void note(char kind, const char *path, const struct stat *st)
{
    if (!__atomic_load_n(&recording, __ATOMIC_RELAXED) || !path || ignored(path) ||
        (main_name && !strcmp(path, main_name)))
        return;
    int saved = errno;
    pthread_mutex_lock(&dep_lock);
    if (deps_overflow)
        goto done;
    if (2 * (num_deps + 1) > num_slots && grow_slots() != 0) {
        deps_overflow = 1;
        goto done;
    }
    size_t j = hash_path(kind, path) & (num_slots - 1);
    for (; slots[j]; j = (j + 1) & (num_slots - 1)) {
        const dep *d = &deps[slots[j] - 1];
        if (d->kind == kind && !strcmp(d->path, path))
            goto done; /* the first sight counts */
    }
    if (num_deps == PROGCACHE__WIRE_MAX_DEPS) {
        deps_overflow = 1;
        goto done;
    }
    if (num_deps == cap_deps) {
        size_t cap = cap_deps ? 2 * cap_deps : 256;
        dep *d = realloc(deps, cap * sizeof *d);
        if (!d) {
            deps_overflow = 1;
            goto done;
        }
        deps = d;
        cap_deps = cap;
    }
    dep *d = &deps[num_deps];
    d->path = strdup(path);
    if (!d->path) {
        deps_overflow = 1;
        goto done;
    }
    d->kind = kind;
    memset(&d->st, 0, sizeof d->st);
    if (st)
        d->st = *st;
    slots[j] = (uint32_t)++num_deps;
done:
    pthread_mutex_unlock(&dep_lock);
    errno = saved;
}

/* A path that exists: as read, with the state it had then. */
static void note_found(const char *path, int fd)
{
    struct stat st;
    if (fd >= 0 ? fstat(fd, &st) == 0 : stat(path, &st) == 0) {
        if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
            note(S_ISDIR(st.st_mode) ? 'd' : '+', path, &st);
    }
}

static void note_result(const char *path, int ok, int fd)
{
    if (!__atomic_load_n(&recording, __ATOMIC_RELAXED))
        return;
    if (ok)
        note_found(path, fd);
    else if (errno == ENOENT || errno == ENOTDIR)
        note('-', path, NULL);
}

static void *real(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

FILE *fopen(const char *path, const char *mode)
{
    FILE *(*f)(const char *, const char *) = (FILE * (*)(const char *, const char *)) real("fopen");
    FILE *r = f ? f(path, mode) : NULL;
    if (mode && mode[0] == 'r')
        note_result(path, r != NULL, r ? fileno(r) : -1);
    return r;
}

FILE *fopen64(const char *path, const char *mode)
{
    FILE *(*f)(const char *, const char *) =
        (FILE * (*)(const char *, const char *)) real("fopen64");
    FILE *r = f ? f(path, mode) : NULL;
    if (mode && mode[0] == 'r')
        note_result(path, r != NULL, r ? fileno(r) : -1);
    return r;
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | __O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
    if ((flags & O_ACCMODE) == O_RDONLY && !(flags & O_CREAT))
        note_result(path, fd >= 0, fd);
    return fd;
}

int __xstat(int ver, const char *path, struct stat *st);
int __xstat(int ver, const char *path, struct stat *st)
{
    (void)ver;
    int r = stat(path, st);
    note_result(path, r == 0, -1);
    return r;
}

int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat(int ver, const char *path, struct stat *st)
{
    (void)ver;
    int r = lstat(path, st);
    note_result(path, r == 0, -1);
    return r;
}

int access(const char *path, int how)
{
    int r = (int)syscall(SYS_faccessat, AT_FDCWD, path, how);
    note_result(path, r == 0, -1);
    return r;
}

char *realpath(const char *path, char *resolved)
{
    char *(*f)(const char *, char *) = (char *(*)(const char *, char *))real("realpath");
    char *r = f ? f(path, resolved) : NULL;
    if (!r)
        note_result(path, 0, -1);
    return r;
}
