/* Forwarders: what a function the interceptor does not implement is bound
 * to (nvrtcGetTileIR* and the bundled-headers calls of NVRTC 13.5, the
 * private entry points of cuBLASLt and cuDNN, whatever a later NVRTC
 * adds). NVRTC must never be handed a program it did not make: a
 * forwarder looks at the first argument, where every NVRTC function that
 * takes a program has it, and when it is a program of ours puts the real
 * program there (made, and compiled as the replayed compile was, on
 * demand), then jumps to the real function with every other argument as
 * the caller passed it. An argument that is not a live program of ours is
 * left alone, so a function that takes no program works unchanged.
 *
 * The stubs are x86-64 code (la_version turns the interceptor off
 * elsewhere). They save the six integer argument registers around the C
 * part; NVRTC's functions take no floating-point or variadic arguments. */
#include <pthread.h>
#include <stddef.h>

#include "intercept/intercept.h"

#define NUM_FORWARDERS 64
#define STUB_SIZE 64

static void *targets[NUM_FORWARDERS];
static size_t num_targets;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct fwd_pair {
    void *target;
    void *first;
} fwd_pair;

/* What the caller asked with a program that has no real one and cannot
 * get one: NVRTC's answer to a program it does not know. */
static nvrtcResult refuse(void) { return NVRTC_ERROR_INVALID_PROGRAM; }

fwd_pair progcache__fwd_prepare(void *first, unsigned long idx);

/* Called by stub idx with the caller's first argument (two pointers come
 * back in rax:rdx). */
__attribute__((used)) fwd_pair progcache__fwd_prepare(void *first, unsigned long idx)
{
    fwd_pair out = {targets[idx], first};
    if (!progcache__iprog_live(first))
        return out;
    progcache__iprog *p = first;
    if (progcache__iprog_materialize(p) != NVRTC_SUCCESS || !p->real) {
        out.target = (void *)refuse;
        return out;
    }
    out.first = p->real;
    return out;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".balign 64\n"
        ".globl progcache__fwd_stubs\n"
        ".hidden progcache__fwd_stubs\n"
        "progcache__fwd_stubs:\n"
        ".set fwd_i, 0\n"
        ".rept 64\n"
        ".balign 64\n"
        "endbr64\n" /* a valid target of an indirect branch where CET's IBT is on */
        "push %rdi\n push %rsi\n push %rdx\n push %rcx\n push %r8\n push %r9\n"
        "sub $8, %rsp\n"
        "mov $fwd_i, %esi\n"
        "call progcache__fwd_prepare\n"
        "add $8, %rsp\n"
        "mov %rax, %r11\n mov %rdx, %r10\n"
        "pop %r9\n pop %r8\n pop %rcx\n pop %rdx\n pop %rsi\n pop %rdi\n"
        "mov %r10, %rdi\n"
        "jmp *%r11\n"
        ".set fwd_i, fwd_i + 1\n"
        ".endr\n");
extern const char progcache__fwd_stubs[];
_Static_assert(NUM_FORWARDERS == 64, "as many targets as stubs (.rept 64)");
#endif

void *progcache__forwarder(void *real)
{
#if defined(__x86_64__)
    void *stub = NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < num_targets && !stub; i++)
        if (targets[i] == real)
            stub = (void *)(progcache__fwd_stubs + i * STUB_SIZE);
    if (!stub && num_targets < NUM_FORWARDERS) {
        targets[num_targets] = real;
        stub = (void *)(progcache__fwd_stubs + num_targets * STUB_SIZE);
        num_targets++;
    }
    pthread_mutex_unlock(&lock);
    return stub;
#else
    (void)real;
    return NULL;
#endif
}
