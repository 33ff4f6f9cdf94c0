/* The auditor's stubs: what a program's nvrtc* references are bound to.
 * The core is not loaded when the loader binds (a linked program's
 * references are bound before main), so each stub resolves itself on its
 * first call: it loads the core into the program's link namespace
 * (dlmopen LM_ID_BASE: the program's libc and libcrypto, see
 * intercept_slot.c), asks it for the function of its symbol, keeps the
 * answer and jumps there with the caller's arguments untouched. When the
 * core cannot be loaded, every stub jumps to NVRTC's own function: the
 * program runs as without progcache (and the log says why). x86-64 only
 * (la_version binds nothing elsewhere). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "intercept/intercept.h"

#define NUM_STUBS 256
#define STUB_SIZE 64
#define CORE "libprogcache-intercept-core.so"

static struct {
    int slot;
    char name[96];
    void *real;
    _Atomic(void *) target;
} stubs[NUM_STUBS];
static size_t num_stubs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static progcache__nvrtc_slot *the_slots;

static pthread_once_t core_once = PTHREAD_ONCE_INIT;
static void *(*core_bind)(int, const char *, void *);

/* The core sits beside this module. */
static void load_core(void)
{
    Dl_info self;
    char path[PATH_MAX];
    if (!dladdr((void *)load_core, &self) || !self.dli_fname ||
        strlen(self.dli_fname) >= sizeof path) {
        progcache__audit_say("cannot tell where the interceptor is; NVRTC runs untouched");
        return;
    }
    snprintf(path, sizeof path, "%s", self.dli_fname);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0),
             "%s", CORE);
    void *h = dlmopen(LM_ID_BASE, path, RTLD_NOW | RTLD_LOCAL);
    void (*init)(progcache__nvrtc_slot *) = NULL;
    if (h) {
        *(void **)&init = dlsym(h, "progcache__intercept_core_init");
        *(void **)&core_bind = dlsym(h, "progcache__intercept_bind");
    }
    if (!h || !init || !core_bind) {
        core_bind = NULL;
        progcache__audit_say("cannot load %s (%s); NVRTC runs untouched", path,
                             h ? "a function is missing" : dlerror());
        return;
    }
    init(the_slots);
}

void *progcache__audit_resolve(unsigned long idx);

/* Called by stub idx: the function to jump to. */
__attribute__((used)) void *progcache__audit_resolve(unsigned long idx)
{
    void *t = atomic_load_explicit(&stubs[idx].target, memory_order_acquire);
    if (t)
        return t;
    pthread_once(&core_once, load_core);
    t = core_bind ? core_bind(stubs[idx].slot, stubs[idx].name, stubs[idx].real)
                  : stubs[idx].real;
    atomic_store_explicit(&stubs[idx].target, t, memory_order_release);
    return t;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".balign 64\n"
        ".globl progcache__audit_stubs\n"
        ".hidden progcache__audit_stubs\n"
        "progcache__audit_stubs:\n"
        ".set stub_i, 0\n"
        ".rept 256\n"
        ".balign 64\n"
        "endbr64\n" /* a valid target of an indirect branch where CET's IBT is on */
        "push %rdi\n push %rsi\n push %rdx\n push %rcx\n push %r8\n push %r9\n"
        "sub $8, %rsp\n"
        "mov $stub_i, %edi\n"
        "call progcache__audit_resolve\n"
        "add $8, %rsp\n"
        "mov %rax, %r11\n"
        "pop %r9\n pop %r8\n pop %rcx\n pop %rdx\n pop %rsi\n pop %rdi\n"
        "jmp *%r11\n"
        ".set stub_i, stub_i + 1\n"
        ".endr\n");
extern const char progcache__audit_stubs[];
_Static_assert(NUM_STUBS == 256, "as many entries as stubs (.rept 256)");
#else
static const char progcache__audit_stubs[1]; /* never bound: la_version binds nothing */
#endif

void *progcache__audit_stub(progcache__nvrtc_slot *slots, int slot, const char *name, void *real)
{
    void *stub = NULL;
    pthread_mutex_lock(&lock);
    the_slots = slots;
    for (size_t i = 0; i < num_stubs && !stub; i++)
        if (stubs[i].slot == slot && !strcmp(stubs[i].name, name))
            stub = (void *)(progcache__audit_stubs + i * STUB_SIZE);
    if (!stub && num_stubs < NUM_STUBS && strlen(name) < sizeof stubs[0].name) {
        stubs[num_stubs].slot = slot;
        snprintf(stubs[num_stubs].name, sizeof stubs[0].name, "%s", name);
        stubs[num_stubs].real = real;
        stub = (void *)(progcache__audit_stubs + num_stubs * STUB_SIZE);
        num_stubs++;
    }
    pthread_mutex_unlock(&lock);
    return stub;
}
