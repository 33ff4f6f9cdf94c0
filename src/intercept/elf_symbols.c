/* Reading a loaded ELF object's dynamic section in place, for both halves
 * of the interceptor: the auditor scans callers' relocations, the core
 * finds an NVRTC library's functions (dlsym cannot take the link map of
 * an object loaded at start-up from another link namespace: it crashes in
 * glibc 2.36). */
#include <elf.h>
#include <link.h>
#include <string.h>

#include "intercept/intercept.h"

/* An address the dynamic section gives, relocated: the loader adjusts the
 * entries in place where the section is writable, not where it is not. */
uintptr_t progcache__dyn_ptr(const struct link_map *m, ElfW(Addr) p)
{
    return p < m->l_addr ? m->l_addr + p : p;
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
    return progcache__map_symbol(s->map, name, STT_FUNC);
}

void *progcache__map_symbol(const struct link_map *m, const char *name, int type)
{
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gh = NULL;
    for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)progcache__dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            strtab = (const char *)progcache__dyn_ptr(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_GNU_HASH)
            gh = (const uint32_t *)progcache__dyn_ptr(m, d->d_un.d_ptr);
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
            ELF64_ST_TYPE(sym->st_info) == type && !strcmp(strtab + sym->st_name, name))
            return (void *)(m->l_addr + sym->st_value);
        if (h2 & 1)
            break;
    }
    return NULL;
}

