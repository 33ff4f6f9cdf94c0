/* The stand-in route, the auditor's side (docs/INTERCEPT.md, "The
 * stand-in"): when the loader is about to open NVRTC 13 for the program
 * (a DT_NEEDED of a linked program, RUNPATH or DT_RPATH alike, or a
 * dlopen by soname or by path), la_objsearch hands it a stand-in instead
 * (standin/standin.c), which loads that very file only when a call needs
 * it. A HIT then never maps NVRTC.
 *
 * The file the loader would open is read, not mapped (a few pages): it
 * must be a regular x86-64 ELF library with the soname libnvrtc.so.13,
 * only the version libnvrtc.so.13, a GNU build ID, and exactly the
 * exported functions of a stand-in (standin_names.h). So every symbol the
 * program can bind resolves as on NVRTC, and none that NVRTC lacks. Any
 * other file is left to the loader, and the interceptor takes it by the
 * existing route (the refusal is said and counted). Each stand-in can
 * stand in for one library per process (the loader keeps one object per
 * file): a second is left to the loader the same way. The version, which
 * only running NVRTC tells, comes later, in the core, from the cache's
 * record of this file's identity (path, size, change time) or from NVRTC
 * loaded once. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_note.h"
#include "intercept/intercept.h"
#include "intercept/standin_names.h"

#define AS_STRING(n) #n,
static const char *const names_130[] = {PROGCACHE__STANDIN_NAMES_130(AS_STRING)};
static const char *const names_135[] = {PROGCACHE__STANDIN_NAMES_135(AS_STRING)};
static const struct {
    const char *dir;
    const char *const *names;
    size_t count;
} sets[PROGCACHE__STANDIN_SETS] = {
    {PROGCACHE__STANDIN_DIR_130, names_130, sizeof names_130 / sizeof names_130[0]},
    {PROGCACHE__STANDIN_DIR_135, names_135, sizeof names_135 / sizeof names_135[0]},
};

/* What was read of the real file. */
typedef struct probe {
    char path[PATH_MAX];    /* as the loader would open it */
    char real[PATH_MAX];    /* its real path (the record's identity) */
    unsigned char build_id[64];
    size_t build_id_len;
    long long size, ctime_sec;
    long ctime_nsec;
} probe;

/* Per stand-in: handed out (once per process), its real file, and where
 * it is. */
static struct {
    int given;
    probe real;
    char standin[PATH_MAX];
    char load_name[PATH_MAX + 2]; /* the name the stand-in loads it by */
    progcache__nvrtc_slot *slot;
} state[PROGCACHE__STANDIN_SETS];
static char answer[PATH_MAX];

/* The last refusal: the file and why (one search at a time: the loader
 * holds its lock through la_objsearch and la_objopen). */
static char refused_path[PATH_MAX];
static const char *refused_why;

static void refuse(const char *path, const char *why)
{
    snprintf(refused_path, sizeof refused_path, "%s", path);
    refused_why = why;
}

const char *progcache__standin_refusal(const char *path)
{
    return refused_why && !strcmp(path, refused_path) ? refused_why : NULL;
}

/* Read size bytes at off, bounded; a buffer the caller frees, or NULL. */
static void *read_at(int fd, unsigned long long off, unsigned long long size, long long file)
{
    if (!size || size > (4u << 20) || off > (unsigned long long)file ||
        size > (unsigned long long)file - off)
        return NULL;
    void *buf = malloc(size + 1);
    if (buf && pread(fd, buf, size, (off_t)off) != (ssize_t)size) {
        free(buf);
        return NULL;
    }
    if (buf)
        ((char *)buf)[size] = '\0';
    return buf;
}

static const char *str_at(const char *strtab, size_t strsz, size_t off)
{
    return off < strsz && memchr(strtab + off, '\0', strsz - off) ? strtab + off : NULL;
}

/* Which stand-in's list the exported functions of the file are exactly
 * (its index), or -1 with *why. */
static int exports_match(const ElfW(Sym) *syms, size_t n, const char *strtab, size_t strsz,
                         const char **why)
{
    int matched[PROGCACHE__STANDIN_SETS];
    size_t found[PROGCACHE__STANDIN_SETS] = {0};
    for (int k = 0; k < PROGCACHE__STANDIN_SETS; k++)
        matched[k] = 1;
    for (size_t i = 0; i < n; i++) {
        const ElfW(Sym) *s = &syms[i];
        int bind = ELF64_ST_BIND(s->st_info);
        if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
            (bind != STB_GLOBAL && bind != STB_WEAK) ||
            ELF64_ST_VISIBILITY(s->st_other) != STV_DEFAULT)
            continue;
        const char *name = str_at(strtab, strsz, s->st_name);
        if (!name)
            return *why = "its symbol table is damaged", -1;
        for (int k = 0; k < PROGCACHE__STANDIN_SETS; k++) {
            int in = 0;
            for (size_t j = 0; j < sets[k].count && !in; j++)
                in = !strcmp(name, sets[k].names[j]);
            found[k] += (size_t)in;
            matched[k] = matched[k] && in;
        }
    }
    for (int k = 0; k < PROGCACHE__STANDIN_SETS; k++)
        if (matched[k] && found[k] == sets[k].count)
            return k;
    return *why = "its exported functions are not a list a stand-in knows", -1;
}

/* The file at path: the stand-in that can stand in for it (its index),
 * -1 with *why when none can, -2 when the loader would not take it either
 * (missing, another ELF class: the loader searches on). */
static int probe_file(const char *path, probe *p, const char **why)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -2;
    struct stat st;
    ElfW(Ehdr) eh;
    int set = -1;
    ElfW(Shdr) *sh = NULL;
    void *syms = NULL, *strtab = NULL, *dyn = NULL, *verdef = NULL;
    *why = "it is not a library the stand-in reads (section headers, build ID)";
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
        pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG)) {
        set = -2;
        goto out;
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_machine != EM_X86_64) {
        set = -2;
        goto out;
    }
    if (eh.e_type != ET_DYN || eh.e_shentsize != sizeof(ElfW(Shdr)) || !eh.e_shnum ||
        !(sh = read_at(fd, eh.e_shoff, (unsigned long long)eh.e_shnum * sizeof *sh,
                       (long long)st.st_size)))
        goto out;
    const ElfW(Shdr) *dynsym = NULL, *dynamic = NULL, *vd = NULL;
    p->build_id_len = 0;
    for (int i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_type == SHT_DYNSYM)
            dynsym = &sh[i];
        else if (sh[i].sh_type == SHT_DYNAMIC)
            dynamic = &sh[i];
        else if (sh[i].sh_type == SHT_GNU_verdef)
            vd = &sh[i];
        else if (sh[i].sh_type == SHT_NOTE && !p->build_id_len && sh[i].sh_size <= 4096) {
            unsigned char *note = read_at(fd, sh[i].sh_offset, sh[i].sh_size, st.st_size);
            if (note)
                p->build_id_len = progcache__elf_build_id_note(note, sh[i].sh_size,
                                                               p->build_id, sizeof p->build_id);
            free(note);
        }
    }
    if (!dynsym || !dynamic || !vd || !p->build_id_len || dynsym->sh_link >= eh.e_shnum ||
        dynsym->sh_entsize != sizeof(ElfW(Sym)))
        goto out;
    const ElfW(Shdr) *str = &sh[dynsym->sh_link];
    size_t nsyms = dynsym->sh_size / sizeof(ElfW(Sym));
    if (!(syms = read_at(fd, dynsym->sh_offset, dynsym->sh_size, st.st_size)) ||
        !(strtab = read_at(fd, str->sh_offset, str->sh_size, st.st_size)) ||
        !(dyn = read_at(fd, dynamic->sh_offset, dynamic->sh_size, st.st_size)) ||
        !(verdef = read_at(fd, vd->sh_offset, vd->sh_size, st.st_size)))
        goto out;
    /* The soname, and every version it defines, libnvrtc.so.13: what the
     * stand-in is. */
    const char *soname = NULL;
    for (const ElfW(Dyn) *d = dyn; (const char *)(d + 1) <= (const char *)dyn + dynamic->sh_size &&
                                   d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_SONAME)
            soname = str_at(strtab, str->sh_size, d->d_un.d_val);
    if (!soname || strcmp(soname, PROGCACHE__STANDIN_SONAME)) {
        *why = "its soname is not " PROGCACHE__STANDIN_SONAME;
        goto out;
    }
    for (size_t off = 0, n = 0; n < vd->sh_info; n++) {
        const ElfW(Verdef) *v = (const ElfW(Verdef) *)(const void *)((char *)verdef + off);
        if (off + sizeof *v > vd->sh_size || off + v->vd_aux + sizeof(ElfW(Verdaux)) >
                                                 vd->sh_size) {
            *why = "its version definitions are damaged";
            goto out;
        }
        const ElfW(Verdaux) *a =
            (const ElfW(Verdaux) *)(const void *)((char *)verdef + off + v->vd_aux);
        const char *vname = str_at(strtab, str->sh_size, a->vda_name);
        if (!vname || strcmp(vname, PROGCACHE__STANDIN_SONAME)) {
            *why = "it defines a symbol version the stand-in does not";
            goto out;
        }
        if (!v->vd_next)
            break;
        off += v->vd_next;
    }
    set = exports_match(syms, nsyms, strtab, str->sh_size, why);
    if (set >= 0 && !realpath(path, p->real)) {
        *why = "its real path cannot be told";
        set = -1;
    }
    snprintf(p->path, sizeof p->path, "%s", path);
    p->size = (long long)st.st_size;
    p->ctime_sec = (long long)st.st_ctim.tv_sec;
    p->ctime_nsec = st.st_ctim.tv_nsec;
out:
    free(sh);
    free(syms);
    free(strtab);
    free(dyn);
    free(verdef);
    close(fd);
    return set;
}

/* Where stand-in k is: a folder beside this module. */
static int standin_path(int k, char *out, size_t len)
{
    Dl_info self;
    if (!dladdr((void *)standin_path, &self) || !self.dli_fname)
        return -1;
    const char *slash = strrchr(self.dli_fname, '/');
    int n = snprintf(out, len, "%.*s/%s/" PROGCACHE__STANDIN_SONAME,
                     slash ? (int)(slash - self.dli_fname) : 1, slash ? self.dli_fname : ".",
                     sets[k].dir);
    return n > 0 && (size_t)n < len && access(out, R_OK) == 0 ? 0 : -1;
}

static int standin_off(void)
{
    const char *v = getenv("PROGCACHE_INTERCEPT_STANDIN");
    return v && (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "false"));
}

char *progcache__standin_offer(const char *asked, const char *name, unsigned int flag)
{
    /* A search (a name without a slash) is answered at each place the
     * loader looks; a path, before the loader opens it. */
    if ((flag == LA_SER_ORIG) != (strchr(asked, '/') != NULL) || strchr(name, '/') == NULL)
        return NULL;
    /* Only names NVRTC's file goes by are read: the soname, the file
     * it links to (libnvrtc.so.13.0.88 where the toolkit installs one, and
     * what a program that resolved the link dlopens), the development
     * link. probe_file checks the soname inside; reading every library a
     * program opens by path (Python's extensions) would cost each of them. */
    const char *base = strrchr(name, '/') + 1;
    size_t n = strlen(PROGCACHE__STANDIN_SONAME);
    if (strcmp(base, "libnvrtc.so") &&
        (strncmp(base, PROGCACHE__STANDIN_SONAME, n) || (base[n] && base[n] != '.')))
        return NULL;
    for (int k = 0; k < PROGCACHE__STANDIN_SETS; k++)
        if (state[k].given && (!strcmp(name, state[k].standin) ||
                               !strcmp(name, state[k].load_name)))
            return NULL;
    probe p;
    const char *why = NULL;
    int k = probe_file(name, &p, &why);
    if (k == -2)
        return NULL;
    if (k >= 0 && standin_off())
        why = "PROGCACHE_INTERCEPT_STANDIN=off", k = -1;
    /* Handed out but never opened (a dlopen with RTLD_NOLOAD searches,
     * and opens nothing: cuda-pathfinder asks so first): free again. */
    if (k >= 0 && state[k].slot)
        why = "its stand-in stands in for another NVRTC in this process", k = -1;
    if (k >= 0 && standin_path(k, state[k].standin, sizeof state[k].standin))
        why = "the stand-in is not installed beside the interceptor", k = -1;
    if (k < 0) {
        refuse(name, why);
        return NULL;
    }
    state[k].given = 1;
    state[k].real = p;
    snprintf(answer, sizeof answer, "%s", state[k].standin);
    return answer;
}

int progcache__standin_opened(progcache__nvrtc_slot *s, struct link_map *map)
{
    /* The loader names the object as the search found it (the real
     * file's path) when the stand-in replaced a candidate, and by the
     * stand-in's path when it replaced a path: both are looked at, and the
     * stand-in's own variable tells it from NVRTC. */
    for (int k = 0; k < PROGCACHE__STANDIN_SETS; k++) {
        if (!state[k].given || state[k].slot ||
            (strcmp(map->l_name, state[k].standin) && strcmp(map->l_name, state[k].real.path)))
            continue;
        const probe *p = &state[k].real;
        char *real = progcache__map_symbol(map, "progcache__standin_real", STT_OBJECT);
        void *by = progcache__map_symbol(map, "progcache__standin_loaded_by", STT_OBJECT);
        if (!real || !by)
            return 0;
        /* The stand-in loads the real file by a name no object has: the
         * loader took the path the search found as the stand-in's own
         * name, and would answer a dlopen of it with the stand-in. */
        size_t len = strlen(p->real) + 2;
        if (len >= 4096) /* the size of progcache__standin_real */
            return 0;
        memcpy(state[k].load_name, "/.", 2);
        memcpy(state[k].load_name + 2, p->real, len - 1);
        memcpy(real, state[k].load_name, len + 1);
        s->standin = 1;
        s->loaded_by = by;
        snprintf(s->path, sizeof s->path, "%s", p->real);
        memcpy(s->build_id, p->build_id, p->build_id_len);
        s->build_id_len = p->build_id_len;
        s->file_size = p->size;
        s->ctime_sec = p->ctime_sec;
        s->ctime_nsec = p->ctime_nsec;
        state[k].slot = s;
        return 1;
    }
    return 0;
}

int progcache__standin_real_opened(progcache__nvrtc_slot *slots, struct link_map *map)
{
    (void)slots;
    for (int k = 0; k < PROGCACHE__STANDIN_SETS; k++) {
        progcache__nvrtc_slot *s = state[k].slot;
        if (!s || strcmp(map->l_name, state[k].load_name) || !*s->loaded_by)
            continue;
        /* Loaded by the stand-in: the file the key was derived for? */
        progcache__nvrtc_slot now;
        memset(&now, 0, sizeof now);
        progcache__read_build_id(&now, map);
        if (now.build_id_len != s->build_id_len ||
            memcmp(now.build_id, s->build_id, s->build_id_len))
            s->real_changed = 1;
        return 1;
    }
    return 0;
}
