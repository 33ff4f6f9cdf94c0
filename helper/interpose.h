/* progcache-nvrtc-helper: the state its libc definitions (interpose.c)
 * share with the compile (nvrtc_helper.c). One compile per process, so
 * plain globals. */
#ifndef PROGCACHE_HELPER_INTERPOSE_H
#define PROGCACHE_HELPER_INTERPOSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* The PCH heap: mmap answers NVRTC's heap request (no address, heap_size
 * bytes, read-write, private, anonymous) at heap_addr, once. heap_addr 0:
 * leave placement to the kernel. heap_state: PROGCACHE__WIRE_HEAP_*. */
extern uintptr_t heap_addr;
extern size_t heap_size;
extern int heap_state;

/* What NVRTC read or probed while recording was set (only while a prefix
 * compiles), each path once, in the order first seen. */
typedef struct dep {
    char kind; /* '+' a file read or found, 'd' a directory found, '-' absent */
    struct stat st;
    char *path;
} dep;

extern int recording;
/* The program's name: NVRTC looks for a file of that name, but compiles
 * the source it was given, so that file is no dependency (and is often the
 * very file the program's source was read from, edited all the time). */
extern const char *main_name;
extern dep *deps;
extern size_t num_deps;
extern int deps_overflow; /* out of memory or too many: the record is unusable */

#endif
