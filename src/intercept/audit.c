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
 * libc and of progcache's code (linked in statically): nothing here shares
 * state with the program's libraries but the memory they hand us. */
#include <elf.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "intercept/intercept.h"

#define EXPORT __attribute__((visibility("default")))

progcache__nvrtc_slot progcache__slots[PROGCACHE__INTERCEPT_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* Set once the program's own objects are loaded (la_preinit): a library
 * opened later came by dlopen. */
static int started;
/* The name the last dlopen on this thread asked for (la_objsearch). */
static __thread char asked[256];

void progcache__intercept_log(const char *fmt, ...)
{
    const char *where = progcache__config_env("PROGCACHE_LOG");
    if (!where)
        return;
    FILE *f = strcmp(where, "stderr") ? fopen(where, "ae") : stderr;
    if (!f)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(f, "progcache-intercept[%ld]: %s\n", (long)getpid(), line);
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
static void read_build_id(progcache__nvrtc_slot *s, const struct link_map *map)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)map->l_addr;
    if (!map->l_addr || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
        eh->e_phentsize != sizeof(ElfW(Phdr)))
        return;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(map->l_addr + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_NOTE)
            continue;
        const unsigned char *at = (const unsigned char *)(map->l_addr + ph[i].p_vaddr);
        const unsigned char *end = at + ph[i].p_memsz;
        while (at + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)at;
            size_t name_sz = (n->n_namesz + 3) & ~(size_t)3;
            size_t desc_sz = (n->n_descsz + 3) & ~(size_t)3;
            const unsigned char *desc = at + sizeof *n + name_sz;
            if (desc + desc_sz > end)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
                !memcmp(at + sizeof *n, "GNU", 4) &&
                n->n_descsz <= sizeof s->build_id) {
                memcpy(s->build_id, desc, n->n_descsz);
                s->build_id_len = n->n_descsz;
                return;
            }
            at = desc + desc_sz;
        }
    }
}

/* An address the dynamic section gives, relocated: the loader adjusts the
 * entries in place where the section is writable, not where it is not. */
static uintptr_t dyn_ptr(const struct link_map *m, ElfW(Addr) p)
{
    return p < m->l_addr ? m->l_addr + p : p;
}

/* The cookie of an object that takes the address of an NVRTC function as
 * data (a function pointer initialised from a linked NVRTC: a GLOB_DAT or
 * 64-bit relocation). The loader reports only calls through the PLT and
 * dlsym to an auditor, so such an object would call the real function
 * with a program of ours: every binding from it keeps NVRTC's own
 * functions instead, and the programs it makes are real ones. */
#define RAW_OBJECT ((uintptr_t)-1)

static int takes_nvrtc_addresses(const struct link_map *m)
{
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *rela = NULL;
    size_t relasz = 0;
    for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            strtab = (const char *)dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_RELA)
            rela = (const ElfW(Rela) *)dyn_ptr(m, d->d_un.d_ptr);
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
    const char *v = progcache__config_env("PROGCACHE_INTERCEPT");
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
    return (char *)name;
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
            progcache__intercept_log("%s takes NVRTC functions' addresses as data: its "
                                     "compiles are left to NVRTC",
                                     map->l_name[0] ? map->l_name : "the program");
        }
        return LA_FLG_BINDFROM;
    }
    pthread_mutex_lock(&slots_lock);
    int i = 0;
    while (i < PROGCACHE__INTERCEPT_SLOTS && progcache__slots[i].used)
        i++;
    if (i == PROGCACHE__INTERCEPT_SLOTS) {
        pthread_mutex_unlock(&slots_lock);
        progcache__intercept_log("%s: more than %d NVRTC libraries in one process; this one is "
                                 "not intercepted", map->l_name, PROGCACHE__INTERCEPT_SLOTS);
        return 0;
    }
    progcache__nvrtc_slot *s = &progcache__slots[i];
    memset(s, 0, sizeof *s);
    s->used = 1;
    s->map = map;
    snprintf(s->path, sizeof s->path, "%s", map->l_name);
    struct stat st;
    if (stat(map->l_name, &st) == 0)
        s->file_size = (long long)st.st_size;
    read_build_id(s, map);
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
    if (*refcook == RAW_OBJECT || !i || i > PROGCACHE__INTERCEPT_SLOTS ||
        ELF64_ST_TYPE(sym->st_info) != STT_FUNC)
        return real;
    if (strncmp(symname, "nvrtc", 5) && strncmp(symname, "__nvrtc", 7))
        return real;
    progcache__nvrtc_slot *s = &progcache__slots[i - 1];
    if (is_plain(symname))
        return real;
    void *ours = progcache__slot_function((int)i - 1, symname);
    if (ours) {
        if (!strcmp(symname, "nvrtcCreateProgram") && (*flags & LA_SYMB_DLSYM) &&
            strcmp(s->route, "linked (DT_NEEDED)"))
            s->route = !strcmp(s->route, "dlopen by name") ? "dlopen by name, dlsym"
                                                            : "dlopen by path, dlsym";
        return (uintptr_t)ours;
    }
    void *fwd = progcache__forwarder((void *)real);
    if (!fwd)
        progcache__intercept_log("%s of %s: no forwarder left; bound to NVRTC itself (a program "
                                 "of ours passed to it would be refused)", symname, s->path);
    return fwd ? (uintptr_t)fwd : real;
}

static uint32_t gnu_hash(const char *name)
{
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = h * 33 + *c;
    return h;
}

/* A function the library defines, from its own GNU hash table (dlsym
 * cannot take the link map of an object the program loaded at start-up
 * from another namespace). NULL when it has no such function. */
void *progcache__slot_symbol(const progcache__nvrtc_slot *s, const char *name)
{
    const struct link_map *m = s->map;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gh = NULL;
    for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            strtab = (const char *)dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_GNU_HASH)
            gh = (const uint32_t *)dyn_ptr(m, d->d_un.d_ptr);
    }
    if (!symtab || !strtab || !gh || !gh[0])
        return NULL;
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
    const uint32_t *buckets = gh + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t h = gnu_hash(name);
    for (uint32_t i = buckets[h % nbuckets]; i >= symoffset; i++) {
        uint32_t h2 = chain[i - symoffset];
        const ElfW(Sym) *sym = &symtab[i];
        if ((h | 1) == (h2 | 1) && sym->st_shndx != SHN_UNDEF && sym->st_value &&
            ELF64_ST_TYPE(sym->st_info) == STT_FUNC && !strcmp(strtab + sym->st_name, name))
            return (void *)(m->l_addr + sym->st_value);
        if (h2 & 1)
            break;
    }
    return NULL;
}

/* The real functions, by name in the library's own symbol table. */
static void resolve(progcache__nvrtc_slot *s)
{
    static const char *const size_fn[OUT_COUNT] = {"nvrtcGetProgramLogSize", "nvrtcGetPTXSize",
                                                   "nvrtcGetCUBINSize", "nvrtcGetLTOIRSize",
                                                   "nvrtcGetOptiXIRSize"};
    static const char *const bytes_fn[OUT_COUNT] = {"nvrtcGetProgramLog", "nvrtcGetPTX",
                                                    "nvrtcGetCUBIN", "nvrtcGetLTOIR",
                                                    "nvrtcGetOptiXIR"};
    progcache__real_nvrtc *r = &s->real;
#define SYM(field, name) (*(void **)&r->field = progcache__slot_symbol(s, name))
    int ok = SYM(Version, "nvrtcVersion") && SYM(CreateProgram, "nvrtcCreateProgram") &&
             SYM(DestroyProgram, "nvrtcDestroyProgram") &&
             SYM(CompileProgram, "nvrtcCompileProgram") &&
             SYM(AddNameExpression, "nvrtcAddNameExpression") &&
             SYM(GetLoweredName, "nvrtcGetLoweredName") &&
             SYM(GetPCHCreateStatus, "nvrtcGetPCHCreateStatus") &&
             SYM(GetPCHHeapSizeRequired, "nvrtcGetPCHHeapSizeRequired") &&
             SYM(SetFlowCallback, "nvrtcSetFlowCallback");
    for (int k = 0; ok && k < OUT_COUNT; k++)
        ok = SYM(GetSize[k], size_fn[k]) && SYM(GetBytes[k], bytes_fn[k]);
#undef SYM
    if (!ok) {
        progcache__intercept_log("%s lacks a function of NVRTC 13; its compiles pass through",
                                 s->path);
        return;
    }
    if (r->Version(&s->major, &s->minor) != NVRTC_SUCCESS) {
        progcache__intercept_log("%s: nvrtcVersion failed; its compiles pass through", s->path);
        return;
    }
    s->ready = 1;
}

int progcache__slot_ready(progcache__nvrtc_slot *s)
{
    /* A slot's functions are only reached after la_objopen filled it. */
    static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&once_lock);
    if (!s->logged) {
        resolve(s);
        s->logged = 1;
        if (s->ready)
            progcache__slot_announce(s);
    }
    pthread_mutex_unlock(&once_lock);
    return s->ready ? 0 : -1;
}

void progcache__slot_announce(progcache__nvrtc_slot *s)
{
    char id[2 * sizeof s->build_id + 1] = "none";
    for (size_t i = 0; i < s->build_id_len; i++)
        snprintf(id + 2 * i, 3, "%02x", s->build_id[i]);
    progcache__intercept_log("NVRTC %d.%d at %s (build ID %s) intercepted; reached by %s",
                             s->major, s->minor, s->path, id, s->route);
}
