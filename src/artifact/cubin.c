/* The CUBIN check: a CUDA ELF file whose every table and section lies
 * inside the file, its kernels (entry functions) and its architecture.
 *
 * This code is fed arbitrary files and is fuzzed: every offset and size
 * read from the file goes through progcache__fits() before it is used.
 *
 * Architecture numbers, as NVRTC 13.0 writes them (checked on CUBINs
 * compiled for sm_75 ... sm_120 on the build machine): EI_ABIVERSION 8 and
 * later put the SM number in bits 8-15 of e_flags (sm_90: 0x06005a04,
 * sm_100: 0x06006402); the older ABI 7 put it in bits 0-7 (sm_90:
 * 0x005a055a). The "a"/"f" variants share the number: only the ptxas
 * command line in .note.nv.tkinfo ("-arch sm_90a") tells them apart. */
#include "artifact/cubin.h"

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bytes.h"
#include "artifact/format.h"

/* st_other bit NVIDIA's toolchain sets on kernel (entry) symbols. */
#define STO_CUDA_ENTRY 0x10

typedef struct elf_view {
    Elf64_Ehdr eh;
    const unsigned char *strtab_base; /* section names */
    uint64_t strtab_size;
} elf_view;

static void read_shdr(const progcache__verdict *v, const elf_view *ev, unsigned i,
                      Elf64_Shdr *sh)
{
    memcpy(sh, v->data + ev->eh.e_shoff + (uint64_t)i * sizeof *sh, sizeof *sh);
}

/* A string table must lie in the file and end with a NUL, so every name in
 * it ends inside it. */
static int string_table_ok(const progcache__verdict *v, const Elf64_Shdr *sh)
{
    return sh->sh_type == SHT_STRTAB && sh->sh_size > 0 &&
           progcache__fits(sh->sh_offset, sh->sh_size, 1, v->size) &&
           v->data[sh->sh_offset + sh->sh_size - 1] == '\0';
}

static const char *section_name(const elf_view *ev, const Elf64_Shdr *sh)
{
    return sh->sh_name < ev->strtab_size ? (const char *)ev->strtab_base + sh->sh_name : "";
}

static int check_tables(progcache__verdict *v, elf_view *ev)
{
    const Elf64_Ehdr *eh = &ev->eh;
    if (eh->e_ehsize != sizeof(Elf64_Ehdr))
        return progcache__verdict_invalid(v, "the ELF header size is %u, not 64",
                                          (unsigned)eh->e_ehsize);
    if (eh->e_shnum == 0 || eh->e_shentsize != sizeof(Elf64_Shdr))
        return progcache__verdict_invalid(
            v, "no usable section header table (%u entries of %u bytes)",
            (unsigned)eh->e_shnum, (unsigned)eh->e_shentsize);
    if (!progcache__fits(eh->e_shoff, eh->e_shnum, sizeof(Elf64_Shdr), v->size))
        return progcache__verdict_invalid(
            v, "the section header table ends past the end of the %zu-byte file", v->size);
    if (eh->e_phnum &&
        (eh->e_phentsize != sizeof(Elf64_Phdr) ||
         !progcache__fits(eh->e_phoff, eh->e_phnum, sizeof(Elf64_Phdr), v->size)))
        return progcache__verdict_invalid(
            v, "the program header table ends past the end of the %zu-byte file", v->size);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, v->data + eh->e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (ph.p_filesz && !progcache__fits(ph.p_offset, ph.p_filesz, 1, v->size))
            return progcache__verdict_invalid(
                v, "segment %u ends past the end of the %zu-byte file", i, v->size);
    }
    if (eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= eh->e_shnum)
        return progcache__verdict_invalid(v, "the section name table index %u is out of range",
                                          (unsigned)eh->e_shstrndx);
    Elf64_Shdr names;
    read_shdr(v, ev, eh->e_shstrndx, &names);
    if (!string_table_ok(v, &names))
        return progcache__verdict_invalid(v, "the section name table is damaged or cut short");
    ev->strtab_base = v->data + names.sh_offset;
    ev->strtab_size = names.sh_size;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr sh;
        read_shdr(v, ev, i, &sh);
        if (sh.sh_type != SHT_NOBITS && !progcache__fits(sh.sh_offset, sh.sh_size, 1, v->size))
            return progcache__verdict_invalid(
                v, "section %u (%s) ends past the end of the %zu-byte file", i,
                section_name(ev, &sh), v->size);
        if (sh.sh_name >= ev->strtab_size)
            return progcache__verdict_invalid(
                v, "section %u has a name outside the section name table", i);
    }
    return 1;
}

/* Kernels: function symbols defined in a section and marked as entry
 * points (device functions are plain STT_FUNC). */
static int read_symbols(progcache__verdict *v, const elf_view *ev, const Elf64_Shdr *symtab,
                        unsigned index)
{
    if (symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_size % sizeof(Elf64_Sym))
        return progcache__verdict_invalid(v, "symbol table %u has a bad entry size", index);
    if (symtab->sh_link == SHN_UNDEF || symtab->sh_link >= ev->eh.e_shnum)
        return progcache__verdict_invalid(v, "symbol table %u links to no string table", index);
    Elf64_Shdr strtab;
    read_shdr(v, ev, symtab->sh_link, &strtab);
    if (!string_table_ok(v, &strtab))
        return progcache__verdict_invalid(
            v, "the string table of symbol table %u is damaged or cut short", index);
    const char *names = (const char *)v->data + strtab.sh_offset;
    uint64_t count = symtab->sh_size / sizeof(Elf64_Sym);
    for (uint64_t i = 0; i < count; i++) {
        Elf64_Sym sym;
        memcpy(&sym, v->data + symtab->sh_offset + i * sizeof sym, sizeof sym);
        if (sym.st_name >= strtab.sh_size)
            return progcache__verdict_invalid(
                v, "symbol %llu of table %u has a name outside its string table",
                (unsigned long long)i, index);
        if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & STO_CUDA_ENTRY) ||
            sym.st_shndx == SHN_UNDEF || sym.st_shndx >= ev->eh.e_shnum)
            continue;
        const char *name = names + sym.st_name;
        progcache__verdict_name(v, name, strlen(name));
    }
    return 1;
}

/* "sm_90" from e_flags, plus the suffix ptxas was given ("-arch sm_90a"). */
static void read_arch(progcache__verdict *v, const elf_view *ev)
{
    unsigned abi = ev->eh.e_ident[EI_ABIVERSION];
    unsigned sm = abi >= 8 ? (ev->eh.e_flags >> 8) & 0xff : ev->eh.e_flags & 0xff;
    if (sm == 0)
        return;
    char suffix[2] = "";
    for (unsigned i = 0; i < ev->eh.e_shnum; i++) {
        Elf64_Shdr sh;
        read_shdr(v, ev, i, &sh);
        if (sh.sh_type == SHT_NOBITS || strcmp(section_name(ev, &sh), ".note.nv.tkinfo"))
            continue;
        const unsigned char *p = v->data + sh.sh_offset, *end = p + sh.sh_size;
        static const char flag[] = "-arch sm_";
        const size_t n = sizeof flag - 1;
        for (; (size_t)(end - p) > n; p++) {
            if (memcmp(p, flag, n))
                continue;
            const unsigned char *q = p + n;
            unsigned value = 0;
            while (q < end && *q >= '0' && *q <= '9' && value < 10000)
                value = value * 10 + (unsigned)(*q++ - '0');
            if (value == sm && q < end && (*q == 'a' || *q == 'f'))
                suffix[0] = (char)*q;
            break;
        }
    }
    snprintf(v->out->arch, sizeof v->out->arch, "sm_%u%s", sm, suffix);
}

int progcache__cubin_check(progcache__verdict *v)
{
    if (v->size < sizeof(Elf64_Ehdr))
        return progcache__verdict_invalid(v, "the ELF header is cut short (%zu of 64 bytes)",
                                          v->size);
    elf_view ev;
    memset(&ev, 0, sizeof ev);
    memcpy(&ev.eh, v->data, sizeof ev.eh);
    if (!progcache__cuda_elf(v->data, v->size)) {
        v->out->kind = PROGCACHE_KIND_UNKNOWN;
        return progcache__verdict_invalid(
            v,
            "an ELF file, but not a CUDA one (class %u, machine %u; CUBINs are 64-bit, "
            "machine 190)",
            (unsigned)ev.eh.e_ident[EI_CLASS], (unsigned)ev.eh.e_machine);
    }
    if (!check_tables(v, &ev))
        return 0;
    read_arch(v, &ev);
    for (unsigned i = 0; i < ev.eh.e_shnum; i++) {
        Elf64_Shdr sh;
        read_shdr(v, &ev, i, &sh);
        if (sh.sh_type == SHT_SYMTAB && !read_symbols(v, &ev, &sh, i))
            return 0;
    }
    return 1;
}
