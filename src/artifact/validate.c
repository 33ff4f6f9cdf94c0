/* Recognising and checking artifacts: CUBIN (CUDA ELF), PTX, LTO-IR and
 * fatbin, from their bytes alone.
 *
 * Cache entries are raw artifact bytes with no header of ours (that is
 * cuda.core's format, and what cuobjdump reads), so a truncated or damaged
 * entry is only found by looking at the bytes. Every field read here is
 * checked against the buffer first, through read_u16/u32/u64 and fits():
 * this code is fed arbitrary files and is fuzzed.
 *
 * Architecture numbers, as NVRTC 13.0 writes them (checked on CUBINs
 * compiled for sm_75 ... sm_120 on the build machine):
 *  - CUBIN: EI_ABIVERSION 8 and later put the SM number in bits 8-15 of
 *    e_flags (sm_90: 0x06005a04, sm_100: 0x06006402); the older ABI 7
 *    put it in bits 0-7 (sm_90: 0x005a055a). The "a"/"f" variants share
 *    the number: only the ptxas command line in .note.nv.tkinfo
 *    ("-arch sm_90a") tells them apart.
 *  - LTO-IR: nvrtcGetLTOIR returns an NVVM container (magic 0x7F4E43ED,
 *    not LLVM's 'BC' 0xC0DE nor the 0x0B17C0DE bitcode wrapper, which are
 *    accepted too); its payload is opaque, its header holds the target as
 *    SM*10 (900 for sm_90) in the u16 at offset 26.
 *  - fatbin: each entry header holds its SM number at offset 28. */
#include "artifact/validate.h"

#include <elf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "error.h"

#ifndef EM_CUDA
#define EM_CUDA 190
#endif
/* st_other bit NVIDIA's toolchain sets on kernel (entry) symbols. */
#define STO_CUDA_ENTRY 0x10
#define FATBIN_MAGIC 0xBA55ED50u
#define NVVM_MAGIC 0x7F4E43EDu
#define BITCODE_WRAPPER_MAGIC 0x0B17C0DEu
#define NVVM_HEADER_SIZE 40
#define PTX_KIND_PROBE 4096

const char *progcache_kind_name(progcache_kind kind)
{
    switch (kind) {
    case PROGCACHE_KIND_CUBIN: return "CUBIN";
    case PROGCACHE_KIND_PTX: return "PTX";
    case PROGCACHE_KIND_LTOIR: return "LTO-IR";
    case PROGCACHE_KIND_FATBIN: return "fatbin";
    default: return "unknown";
    }
}

progcache_kind progcache__kind_of_target(progcache_target target)
{
    switch (target) {
    case PROGCACHE_TARGET_CUBIN: return PROGCACHE_KIND_CUBIN;
    case PROGCACHE_TARGET_PTX: return PROGCACHE_KIND_PTX;
    case PROGCACHE_TARGET_LTOIR: return PROGCACHE_KIND_LTOIR;
    default: return PROGCACHE_KIND_UNKNOWN;
    }
}

/* ---- bounds-checked reading ---------------------------------------------- */

typedef struct reader {
    const unsigned char *data;
    size_t size;
    progcache_artifact_info *out;
    int want_names;
    int failed; /* out of memory collecting names */
} reader;

/* Whether count items of entsize bytes starting at offset lie inside size
 * bytes (without overflow for any inputs). */
static int fits(uint64_t offset, uint64_t count, uint64_t entsize, size_t size)
{
    if (offset > size)
        return 0;
    if (count == 0)
        return 1;
    return entsize != 0 && (size - offset) / entsize >= count;
}

static uint16_t read_u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t read_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t read_u64(const unsigned char *p)
{
    return (uint64_t)read_u32(p) | (uint64_t)read_u32(p + 4) << 32;
}

static int invalid(reader *r, const char *fmt, ...) PROGCACHE_PRINTF(2, 3);

static int invalid(reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->out->reason, sizeof r->out->reason, fmt, ap);
    va_end(ap);
    r->out->valid = 0;
    return 0;
}

static void add_name(reader *r, const char *name, size_t len)
{
    if (!r->want_names || r->failed)
        return;
    if (progcache__buf_append(&r->out->kernels, name, len) ||
        progcache__buf_append(&r->out->kernels, "", 1)) {
        r->failed = 1;
        return;
    }
    r->out->num_kernels++;
}

static void add_arch(reader *r, const char *fmt, unsigned value)
{
    char one[24];
    snprintf(one, sizeof one, fmt, value);
    char *arch = r->out->arch;
    size_t used = strlen(arch), len = strlen(one);
    /* "sm_90,sm_90" says nothing more than "sm_90". */
    for (const char *p = arch; (p = strstr(p, one)) != NULL; p += len)
        if ((p == arch || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
            return;
    if (used + (used ? 1 : 0) + len + 1 > sizeof r->out->arch)
        return;
    snprintf(arch + used, sizeof r->out->arch - used, "%s%s", used ? "," : "", one);
}

/* ---- CUBIN ---------------------------------------------------------------- */

typedef struct elf_view {
    Elf64_Ehdr eh;
    const unsigned char *strtab_base; /* section names */
    uint64_t strtab_size;
} elf_view;

static void read_shdr(const reader *r, const elf_view *v, unsigned i, Elf64_Shdr *sh)
{
    memcpy(sh, r->data + v->eh.e_shoff + (uint64_t)i * sizeof *sh, sizeof *sh);
}

/* A string table must lie in the file and end with a NUL, so every name in
 * it ends inside it. */
static int string_table_ok(const reader *r, const Elf64_Shdr *sh)
{
    return sh->sh_type == SHT_STRTAB && sh->sh_size > 0 &&
           fits(sh->sh_offset, sh->sh_size, 1, r->size) &&
           r->data[sh->sh_offset + sh->sh_size - 1] == '\0';
}

static const char *section_name(const elf_view *v, const Elf64_Shdr *sh)
{
    return sh->sh_name < v->strtab_size ? (const char *)v->strtab_base + sh->sh_name : "";
}

static int check_elf_tables(reader *r, elf_view *v)
{
    const Elf64_Ehdr *eh = &v->eh;
    if (eh->e_ehsize != sizeof(Elf64_Ehdr))
        return invalid(r, "the ELF header size is %u, not 64", (unsigned)eh->e_ehsize);
    if (eh->e_shnum == 0 || eh->e_shentsize != sizeof(Elf64_Shdr))
        return invalid(r, "no usable section header table (%u entries of %u bytes)",
                       (unsigned)eh->e_shnum, (unsigned)eh->e_shentsize);
    if (!fits(eh->e_shoff, eh->e_shnum, sizeof(Elf64_Shdr), r->size))
        return invalid(r, "the section header table ends past the end of the %zu-byte file",
                       r->size);
    if (eh->e_phnum && (eh->e_phentsize != sizeof(Elf64_Phdr) ||
                        !fits(eh->e_phoff, eh->e_phnum, sizeof(Elf64_Phdr), r->size)))
        return invalid(r, "the program header table ends past the end of the %zu-byte file",
                       r->size);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, r->data + eh->e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (ph.p_filesz && !fits(ph.p_offset, ph.p_filesz, 1, r->size))
            return invalid(r, "segment %u ends past the end of the %zu-byte file", i, r->size);
    }
    if (eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= eh->e_shnum)
        return invalid(r, "the section name table index %u is out of range",
                       (unsigned)eh->e_shstrndx);
    Elf64_Shdr names;
    read_shdr(r, v, eh->e_shstrndx, &names);
    if (!string_table_ok(r, &names))
        return invalid(r, "the section name table is damaged or cut short");
    v->strtab_base = r->data + names.sh_offset;
    v->strtab_size = names.sh_size;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr sh;
        read_shdr(r, v, i, &sh);
        if (sh.sh_type != SHT_NOBITS && !fits(sh.sh_offset, sh.sh_size, 1, r->size))
            return invalid(r, "section %u (%s) ends past the end of the %zu-byte file", i,
                           section_name(v, &sh), r->size);
        if (sh.sh_name >= v->strtab_size)
            return invalid(r, "section %u has a name outside the section name table", i);
    }
    return 1;
}

/* Kernels: function symbols defined in a section and marked as entry
 * points (device functions are plain STT_FUNC). */
static int read_symbols(reader *r, const elf_view *v, const Elf64_Shdr *symtab, unsigned index)
{
    if (symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_size % sizeof(Elf64_Sym))
        return invalid(r, "symbol table %u has a bad entry size", index);
    if (symtab->sh_link == SHN_UNDEF || symtab->sh_link >= v->eh.e_shnum)
        return invalid(r, "symbol table %u links to no string table", index);
    Elf64_Shdr strtab;
    read_shdr(r, v, symtab->sh_link, &strtab);
    if (!string_table_ok(r, &strtab))
        return invalid(r, "the string table of symbol table %u is damaged or cut short", index);
    const char *names = (const char *)r->data + strtab.sh_offset;
    uint64_t count = symtab->sh_size / sizeof(Elf64_Sym);
    for (uint64_t i = 0; i < count; i++) {
        Elf64_Sym sym;
        memcpy(&sym, r->data + symtab->sh_offset + i * sizeof sym, sizeof sym);
        if (sym.st_name >= strtab.sh_size)
            return invalid(r, "symbol %llu of table %u has a name outside its string table",
                           (unsigned long long)i, index);
        if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & STO_CUDA_ENTRY) ||
            sym.st_shndx == SHN_UNDEF || sym.st_shndx >= v->eh.e_shnum)
            continue;
        const char *name = names + sym.st_name;
        add_name(r, name, strlen(name));
    }
    return 1;
}

/* "sm_90" from e_flags, plus the suffix ptxas was given ("-arch sm_90a"). */
static void cubin_arch(reader *r, const elf_view *v)
{
    unsigned abi = v->eh.e_ident[EI_ABIVERSION];
    unsigned sm = abi >= 8 ? (v->eh.e_flags >> 8) & 0xff : v->eh.e_flags & 0xff;
    if (sm == 0)
        return;
    char suffix[2] = "";
    for (unsigned i = 0; i < v->eh.e_shnum; i++) {
        Elf64_Shdr sh;
        read_shdr(r, v, i, &sh);
        if (sh.sh_type == SHT_NOBITS || strcmp(section_name(v, &sh), ".note.nv.tkinfo"))
            continue;
        const unsigned char *p = r->data + sh.sh_offset, *end = p + sh.sh_size;
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
    snprintf(r->out->arch, sizeof r->out->arch, "sm_%u%s", sm, suffix);
}

/* A CUBIN is a 64-bit little-endian ELF file for machine EM_CUDA. */
static int cuda_elf_header(const Elf64_Ehdr *eh)
{
    return eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_ident[EI_DATA] == ELFDATA2LSB &&
           eh->e_machine == EM_CUDA;
}

static int check_cubin(reader *r)
{
    if (r->size < sizeof(Elf64_Ehdr))
        return invalid(r, "the ELF header is cut short (%zu of 64 bytes)", r->size);
    elf_view v;
    memset(&v, 0, sizeof v);
    memcpy(&v.eh, r->data, sizeof v.eh);
    if (!cuda_elf_header(&v.eh)) {
        r->out->kind = PROGCACHE_KIND_UNKNOWN;
        return invalid(r,
                       "an ELF file, but not a CUDA one (class %u, machine %u; CUBINs are "
                       "64-bit, machine 190)",
                       (unsigned)v.eh.e_ident[EI_CLASS], (unsigned)v.eh.e_machine);
    }
    if (!check_elf_tables(r, &v))
        return 0;
    cubin_arch(r, &v);
    for (unsigned i = 0; i < v.eh.e_shnum; i++) {
        Elf64_Shdr sh;
        read_shdr(r, &v, i, &sh);
        if (sh.sh_type == SHT_SYMTAB && !read_symbols(r, &v, &sh, i))
            return 0;
    }
    return 1;
}

/* ---- PTX ------------------------------------------------------------------ */

static int is_ident(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '%';
}

static int looks_like_ptx(const unsigned char *data, size_t len)
{
    size_t probe = len < PTX_KIND_PROBE ? len : PTX_KIND_PROBE;
    const unsigned char *v = memmem(data, probe, ".version", 8);
    return v && !memchr(data, '\0', (size_t)(v - data));
}

/* The word after a directive: skip blanks, then identifier characters. */
static size_t word_after(const unsigned char *p, const unsigned char *end,
                         const unsigned char **word)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    *word = p;
    while (p < end && (is_ident(*p) || *p == '.'))
        p++;
    return (size_t)(p - *word);
}

static int directive_at(const unsigned char *p, const unsigned char *end, const char *name)
{
    size_t n = strlen(name);
    return (size_t)(end - p) > n && memcmp(p, name, n) == 0 && (p[n] == ' ' || p[n] == '\t');
}

/* One pass over the text: no NUL or control bytes, braces balanced outside
 * comments and strings (a file cut short inside a function is not), and
 * the .target and .entry directives. */
static int check_ptx(reader *r, size_t len)
{
    const unsigned char *p = r->data, *end = r->data + len;
    enum { CODE, LINE_COMMENT, BLOCK_COMMENT, STRING } state = CODE;
    long depth = 0, line = 1;
    for (; p < end; p++) {
        unsigned char c = *p;
        if (c == '\n')
            line++;
        if (c == '\0')
            return invalid(r, "a NUL byte inside the text (offset %zu)", (size_t)(p - r->data));
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != '\f' && c != '\v')
            return invalid(r, "control byte 0x%02x at line %ld: not PTX text", c, line);
        switch (state) {
        case LINE_COMMENT:
            if (c == '\n')
                state = CODE;
            continue;
        case BLOCK_COMMENT:
            if (c == '*' && p + 1 < end && p[1] == '/') {
                state = CODE;
                p++;
            }
            continue;
        case STRING:
            if (c == '\\' && p + 1 < end)
                p++;
            else if (c == '"')
                state = CODE;
            continue;
        case CODE: break;
        }
        if (c == '/' && p + 1 < end && (p[1] == '/' || p[1] == '*')) {
            state = p[1] == '/' ? LINE_COMMENT : BLOCK_COMMENT;
            p++;
        } else if (c == '"') {
            state = STRING;
        } else if (c == '{') {
            depth++;
        } else if (c == '}') {
            if (--depth < 0)
                return invalid(r, "a '}' without its '{' at line %ld", line);
        } else if (c == '.' && (p == r->data || !is_ident(p[-1]))) {
            const unsigned char *word;
            size_t n;
            if (directive_at(p, end, ".target") && !r->out->arch[0]) {
                n = word_after(p + 7, end, &word);
                if (n && n < sizeof r->out->arch)
                    memcpy(r->out->arch, word, n);
            } else if (directive_at(p, end, ".entry")) {
                n = word_after(p + 6, end, &word);
                if (n)
                    add_name(r, (const char *)word, n);
            }
        }
    }
    if (state == BLOCK_COMMENT || state == STRING)
        return invalid(r, "cut short inside a %s", state == STRING ? "string" : "comment");
    if (depth > 0)
        return invalid(r, "cut short: %ld '{' never closed", depth);
    if (!r->out->arch[0])
        return invalid(r, "no .target directive");
    return 1;
}

/* ---- LTO-IR and fatbin ------------------------------------------------------ */

static int check_nvvm(reader *r)
{
    if (r->size < NVVM_HEADER_SIZE)
        return invalid(r, "the NVVM IR header is cut short (%zu of %d bytes)", r->size,
                       NVVM_HEADER_SIZE);
    unsigned arch = read_u16(r->data + 26);
    if (read_u16(r->data + 24) == 1 && arch % 10 == 0 && arch >= 100 && arch < 10000)
        add_arch(r, "sm_%u", arch / 10);
    return 1;
}

static int check_bitcode(reader *r)
{
    if (read_u32(r->data) == BITCODE_WRAPPER_MAGIC) {
        if (r->size < 20)
            return invalid(r, "the bitcode wrapper header is cut short");
        uint32_t offset = read_u32(r->data + 8), len = read_u32(r->data + 12);
        if (!fits(offset, len, 1, r->size) || len < 4 || memcmp(r->data + offset, "BC\xc0\xde", 4))
            return invalid(r, "the bitcode wrapper points outside the %zu-byte file", r->size);
        return 1;
    }
    /* LLVM bitcode is a stream of 32-bit words. */
    if (r->size % 4)
        return invalid(r, "LLVM bitcode of %zu bytes, not a whole number of 32-bit words", r->size);
    return 1;
}

static int check_fatbin(reader *r)
{
    uint64_t pos = 0;
    while (pos < r->size) {
        /* Fat binaries may be concatenated and padded with zeros. */
        size_t rest = r->size - (size_t)pos;
        const unsigned char *p = r->data + pos;
        if (p[0] == 0 && (rest == 1 || memcmp(p, p + 1, rest - 1) == 0))
            break;
        if (rest < 16 || read_u32(p) != FATBIN_MAGIC)
            return invalid(r, "unexpected bytes at offset %llu of the fatbin",
                           (unsigned long long)pos);
        uint64_t header = read_u16(p + 6), body = read_u64(p + 8);
        if (header < 16 || !fits(pos + header, body, 1, r->size))
            return invalid(r, "the fatbin at offset %llu claims %llu bytes; the file ends before",
                           (unsigned long long)pos, (unsigned long long)(header + body));
        uint64_t e = pos + header, end = pos + header + body;
        while (e < end) {
            if (end - e < 16)
                return invalid(r, "a fatbin entry header at offset %llu is cut short",
                               (unsigned long long)e);
            const unsigned char *q = r->data + e;
            uint64_t ehsize = read_u32(q + 4), payload = read_u64(q + 8);
            if (ehsize < 16 || !fits(e, ehsize, 1, end) || !fits(e + ehsize, payload, 1, end))
                return invalid(r, "the fatbin entry at offset %llu ends past its fatbin",
                               (unsigned long long)e);
            if (ehsize >= 32) {
                unsigned kind = read_u16(q), sm = read_u32(q + 28);
                if (kind == 1 && sm)
                    add_arch(r, "compute_%u", sm);
                else if (kind == 2 && sm)
                    add_arch(r, "sm_%u", sm);
            }
            e += ehsize + payload;
        }
        pos = end;
    }
    return 1;
}

/* ---- entry point -------------------------------------------------------------- */

/* The format the bytes announce, from their first bytes (and, for text,
 * what PTX looks like); the one place that reads magic numbers. */
typedef enum {
    FORMAT_NONE,
    FORMAT_ELF,
    FORMAT_FATBIN,
    FORMAT_NVVM,
    FORMAT_BITCODE,
    FORMAT_PTX
} format;

static format format_of(const unsigned char *data, size_t size, size_t text_len)
{
    if (size >= 4 && memcmp(data, ELFMAG, SELFMAG) == 0)
        return FORMAT_ELF;
    if (size >= 4 && read_u32(data) == FATBIN_MAGIC)
        return FORMAT_FATBIN;
    if (size >= 4 && read_u32(data) == NVVM_MAGIC)
        return FORMAT_NVVM;
    if (size >= 4 &&
        (memcmp(data, "BC\xc0\xde", 4) == 0 || read_u32(data) == BITCODE_WRAPPER_MAGIC))
        return FORMAT_BITCODE;
    return looks_like_ptx(data, text_len) ? FORMAT_PTX : FORMAT_NONE;
}

/* PTX from NVRTC ends in a NUL that is not part of the text. */
static size_t text_length(const unsigned char *data, size_t size)
{
    return data[size - 1] == '\0' ? size - 1 : size;
}

PROGCACHE_HOT
progcache_kind progcache__kind_of(const unsigned char *data, size_t size)
{
    if (size == 0 || !data)
        return PROGCACHE_KIND_UNKNOWN;
    switch (format_of(data, size, text_length(data, size))) {
    case FORMAT_ELF: {
        Elf64_Ehdr eh;
        if (size < sizeof eh)
            return PROGCACHE_KIND_UNKNOWN;
        memcpy(&eh, data, sizeof eh);
        return cuda_elf_header(&eh) ? PROGCACHE_KIND_CUBIN : PROGCACHE_KIND_UNKNOWN;
    }
    case FORMAT_FATBIN: return PROGCACHE_KIND_FATBIN;
    case FORMAT_NVVM:
    case FORMAT_BITCODE: return PROGCACHE_KIND_LTOIR;
    case FORMAT_PTX: return PROGCACHE_KIND_PTX;
    default: return PROGCACHE_KIND_UNKNOWN;
    }
}

int progcache__validate(progcache_artifact_info *out, const unsigned char *data, size_t size,
                        int want_names)
{
    reader r = {data, size, out, want_names, 0};
    out->kind = PROGCACHE_KIND_UNKNOWN;
    out->valid = 0;
    out->reason[0] = '\0';
    out->arch[0] = '\0';
    out->num_kernels = 0;
    out->kernels.size = 0;
    if (out->kernels.data)
        out->kernels.data[0] = '\0';
    if (size == 0 || !data) {
        invalid(&r, "empty");
        return PROGCACHE_OK;
    }
    size_t text_len = text_length(data, size);
    int ok;
    switch (format_of(data, size, text_len)) {
    case FORMAT_ELF:
        out->kind = PROGCACHE_KIND_CUBIN;
        ok = check_cubin(&r);
        break;
    case FORMAT_FATBIN:
        out->kind = PROGCACHE_KIND_FATBIN;
        ok = check_fatbin(&r);
        break;
    case FORMAT_NVVM:
        out->kind = PROGCACHE_KIND_LTOIR;
        ok = check_nvvm(&r);
        break;
    case FORMAT_BITCODE:
        out->kind = PROGCACHE_KIND_LTOIR;
        ok = check_bitcode(&r);
        break;
    case FORMAT_PTX:
        out->kind = PROGCACHE_KIND_PTX;
        ok = check_ptx(&r, text_len);
        break;
    default:
        ok = invalid(&r,
                     "not a CUBIN, PTX, LTO-IR or fatbin (%zu bytes, starting %02x %02x %02x "
                     "%02x)",
                     size, data[0], size > 1 ? data[1] : 0, size > 2 ? data[2] : 0,
                     size > 3 ? data[3] : 0);
    }
    if (r.failed)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory listing kernel names");
    out->valid = ok && out->kind != PROGCACHE_KIND_UNKNOWN;
    if (out->valid)
        out->reason[0] = '\0';
    return PROGCACHE_OK;
}

int progcache_artifact_inspect(progcache_artifact_info *out, const void *data, size_t size)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_artifact_inspect: out is NULL");
    if (!data && size)
        return progcache__error(PROGCACHE_EINVAL, "progcache_artifact_inspect: data is NULL");
    if (out->version == 0 || out->version > PROGCACHE_ARTIFACT_INFO_VERSION)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_artifact_info.version is %u; start from "
                                "PROGCACHE_ARTIFACT_INFO_INIT",
                                out->version);
    return progcache__validate(out, data, size, 1);
}

const char *progcache_artifact_kernel(const progcache_artifact_info *info, size_t index)
{
    if (!info || index >= info->num_kernels || !info->kernels.data)
        return NULL;
    const char *p = (const char *)info->kernels.data;
    const char *end = p + info->kernels.size;
    for (size_t i = 0; i < index && p < end; i++)
        p += strlen(p) + 1;
    return p < end ? p : NULL;
}

void progcache_artifact_info_release(progcache_artifact_info *info)
{
    if (!info)
        return;
    progcache_buf_free(&info->kernels);
    memset(info, 0, sizeof *info);
    info->version = PROGCACHE_ARTIFACT_INFO_VERSION;
}
