/* The LD_AUDIT side of the interceptor: which objects are NVRTC, and the
 * binding of their nvrtc* symbols to ours (docs/INTERCEPT.md).
 *
 * Why LD_AUDIT and not LD_PRELOAD: the dynamic loader asks an auditor
 * about every binding, whatever route produced it: a DT_NEEDED link (with
 * RUNPATH, or a DT_RPATH that LD_LIBRARY_PATH cannot override), dlopen by
 * soname or by absolute path and then dlsym on the handle, dlsym with
 * RTLD_DEFAULT. A preloaded library sees only some of those, and one that
 * interposes dlsym breaks other preloads' RTLD_NEXT. And the auditor is
 * told which object defines each symbol, so two NVRTC libraries in one
 * process (the toolkit's and a wheel's) each get their own functions
 * (slots), and each compile's key names the library that would have run
 * it.
 *
 * This file runs in the auditor's own link namespace, with its own copy of
 * libc, and links no library code: what it binds are stubs (audit_stubs.c)
 * that load the core, libprogcache-intercept-core.so, into the program's
 * namespace on the first call and jump to its functions. So a process that
 * never calls NVRTC pays for this small module alone. */
#include <elf.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elf_note.h"
#include "intercept/intercept.h"

#define EXPORT __attribute__((visibility("default")))

static progcache__nvrtc_slot slots[PROGCACHE__INTERCEPT_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* Set once the program's own objects are loaded (la_preinit): a library
 * opened later came by dlopen. */
static int started;
/* The name the last dlopen on this thread asked for (la_objsearch). */
static __thread char asked[256];

/* A warning from the auditor, written as the library's own log writer
 * writes one (PROGCACHE_LOG, docs/OPERATIONS.md: "LEVEL[:FILE]"; nothing
 * with off or error). This module links no library code (it runs in the
 * loader's namespace), so it reads the variable itself; its few warnings
 * come once per process each. */
void progcache__audit_say(const char *fmt, ...)
{
    const char *v = getenv("PROGCACHE_LOG");
    const char *colon = v ? strchr(v, ':') : NULL;
    size_t n = v ? (colon ? (size_t)(colon - v) : strlen(v)) : 0;
    if ((n == 3 && !strncasecmp(v, "off", 3)) || (n == 5 && !strncasecmp(v, "error", 5)))
        return;
    FILE *f = colon && colon[1] ? fopen(colon + 1, "ae") : stderr;
    if (!f)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (f == stderr)
        fprintf(f, "progcache: warning: %s\n", line);
    else
        fprintf(f, "progcache[%ld]: warning: %s\n", (long)getpid(), line);
    if (f != stderr)
        fclose(f);
}

/* Whether a loaded object is an NVRTC library by its file name:
 * libnvrtc.so.N, libnvrtc.alt.so.N, a renamed copy (PyTorch's
 * libnvrtc-<hash>.so); not NVRTC's builtins library. */
static int is_nvrtc(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "libnvrtc", 8) || (base[8] != '.' && base[8] != '-'))
        return 0;
    return strncmp(base, "libnvrtc-builtins", 17) != 0;
}

/* The GNU build ID from the mapped ELF file: the identity of the NVRTC
 * build, the same on every machine that has that build. */
void progcache__read_build_id(progcache__nvrtc_slot *s, const struct link_map *map)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)map->l_addr;
    if (!map->l_addr || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
        eh->e_phentsize != sizeof(ElfW(Phdr)))
        return;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(map->l_addr + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_NOTE &&
            (s->build_id_len = progcache__elf_build_id_note(
                 (const unsigned char *)(map->l_addr + ph[i].p_vaddr), ph[i].p_memsz,
                 s->build_id, sizeof s->build_id)))
            return;
}

/* The cookie of an object that takes the address of an NVRTC function as
 * data (a function pointer initialised from a linked NVRTC: a GLOB_DAT or
 * 64-bit relocation). The loader reports only calls through the PLT and
 * dlsym to an auditor, so such an object would call the real function
 * with a program of ours (code built with -fno-plt does so for every
 * call). So, from the first such object on, every binding keeps NVRTC's
 * own functions, for the whole process: a program made through one of
 * our functions must never reach NVRTC through a pointer it cannot see.
 * Objects loaded at start-up are all seen before any binding, so such a
 * program runs entirely on NVRTC; one loaded later by dlopen finds the
 * bindings made before it in place (docs/INTERCEPT.md says so). */
#define RAW_OBJECT ((uintptr_t)-1)
static int raw_process;

static int takes_nvrtc_addresses(const struct link_map *m)
{
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *rela = NULL;
    size_t relasz = 0;
    for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)progcache__dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            strtab = (const char *)progcache__dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_RELA)
            rela = (const ElfW(Rela) *)progcache__dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_RELASZ)
            relasz = d->d_un.d_val;
    }
    if (!symtab || !strtab || !rela)
        return 0;
    for (size_t i = 0; i < relasz / sizeof *rela; i++) {
        unsigned long type = ELF64_R_TYPE(rela[i].r_info), sym = ELF64_R_SYM(rela[i].r_info);
        if (!sym || (type != R_X86_64_GLOB_DAT && type != R_X86_64_64))
            continue;
        const char *name = strtab + symtab[sym].st_name;
        if (!strncmp(name, "nvrtc", 5) || !strncmp(name, "__nvrtc", 7))
            return 1;
    }
    return 0;
}

/* Off: every object is left unaudited. (An auditor that declines in
 * la_version is unloaded, which glibc 2.36 cannot do for one with
 * dependencies of its own: it asserts. So it accepts, and binds nothing.) */
static int off;

EXPORT unsigned int la_version(unsigned int version)
{
    const char *v = getenv("PROGCACHE_INTERCEPT");
    off = v && (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "false"));
#if !defined(__x86_64__)
    /* The forwarders are x86-64 code: elsewhere a function the interceptor
     * does not implement could be handed one of our programs. */
    off = 1;
#endif
    return version < LAV_CURRENT ? version : LAV_CURRENT;
}

EXPORT char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag)
{
    (void)cookie;
    if (flag == LA_SER_ORIG)
        snprintf(asked, sizeof asked, "%s", name);
    /* NVRTC 13 about to be opened: the stand-in instead, when it can be. */
    char *standin = off || raw_process ? NULL : progcache__standin_offer(asked, name, flag);
    return standin ? standin : (char *)name;
}

EXPORT void la_preinit(uintptr_t *cookie)
{
    (void)cookie;
    started = 1;
}

EXPORT unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
    (void)lmid;
    *cookie = 0;
    if (off)
        return 0;
    if (!map->l_name || !is_nvrtc(map->l_name)) {
        /* A caller: its references are reported. */
        if (takes_nvrtc_addresses(map)) {
            *cookie = RAW_OBJECT;
            raw_process = 1;
            progcache__audit_say("%s takes NVRTC functions' addresses as data: this "
                                 "process's compiles are left to NVRTC from now on",
                                 map->l_name[0] ? map->l_name : "the program");
        }
        return LA_FLG_BINDFROM;
    }
    /* The real library a stand-in loaded: the program never binds to it. */
    if (progcache__standin_real_opened(slots, map))
        return 0;
    pthread_mutex_lock(&slots_lock);
    int i = 0;
    while (i < PROGCACHE__INTERCEPT_SLOTS && slots[i].used)
        i++;
    if (i == PROGCACHE__INTERCEPT_SLOTS) {
        pthread_mutex_unlock(&slots_lock);
        progcache__audit_say("%s: more than %d NVRTC libraries in one process; this one is "
                                 "not intercepted", map->l_name, PROGCACHE__INTERCEPT_SLOTS);
        return 0;
    }
    progcache__nvrtc_slot *s = &slots[i];
    memset(s, 0, sizeof *s);
    s->used = 1;
    s->map = map;
    if (!progcache__standin_opened(s, map)) {
        snprintf(s->path, sizeof s->path, "%s", map->l_name);
        struct stat st;
        if (stat(map->l_name, &st) == 0)
            s->file_size = (long long)st.st_size;
        progcache__read_build_id(s, map);
        s->refused = progcache__standin_refusal(map->l_name);
    }
    /* The loader searches only for a name without a slash (la_objsearch);
     * a path is opened as it is. */
    const char *base = strrchr(map->l_name, '/');
    int by_name = asked[0] && !strchr(asked, '/') && base && !strcmp(asked, base + 1);
    s->route = !started ? "linked (DT_NEEDED)" : by_name ? "dlopen by name" : "dlopen by path";
    asked[0] = '\0';
    pthread_mutex_unlock(&slots_lock);
    *cookie = (uintptr_t)(i + 1);
    /* Not BINDFROM: NVRTC's calls to its own exports keep their real
     * targets (they pass real programs). */
    return LA_FLG_BINDTO;
}

/* Functions that take no program and answer the same for every caller:
 * bound to the real library (they answer as the loaded NVRTC would). */
static int is_plain(const char *name)
{
    static const char *const plain[] = {"nvrtcVersion", "nvrtcGetErrorString",
                                        "nvrtcGetNumSupportedArchs", "nvrtcGetSupportedArchs",
                                        "nvrtcGetPCHHeapSize", "nvrtcSetPCHHeapSize"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(name, plain[i]))
            return 1;
    return 0;
}

EXPORT uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook,
                              uintptr_t *defcook, unsigned int *flags, const char *symname)
{
    (void)ndx;
    uintptr_t real = (uintptr_t)sym->st_value;
    unsigned i = (unsigned)*defcook;
    if (raw_process || *refcook == RAW_OBJECT || !i || i > PROGCACHE__INTERCEPT_SLOTS ||
        ELF64_ST_TYPE(sym->st_info) != STT_FUNC)
        return real;
    if (strncmp(symname, "nvrtc", 5) && strncmp(symname, "__nvrtc", 7))
        return real;
    progcache__nvrtc_slot *s = &slots[i - 1];
    /* Behind a stand-in, nvrtcVersion is answered from what the key
     * knows (NVRTC is not loaded to say it). */
    if (is_plain(symname) && !(s->standin && !strcmp(symname, "nvrtcVersion")))
        return real;
    if (!strcmp(symname, "nvrtcCreateProgram") && (*flags & LA_SYMB_DLSYM) &&
        strcmp(s->route, "linked (DT_NEEDED)"))
        s->route = !strcmp(s->route, "dlopen by name") ? "dlopen by name, dlsym"
                                                        : "dlopen by path, dlsym";
    void *stub = progcache__audit_stub(slots, (int)i - 1, symname, (void *)real);
    if (!stub)
        progcache__audit_say("%s of %s: no stub left; bound to NVRTC itself", symname, s->path);
    return stub ? (uintptr_t)stub : real;
}
