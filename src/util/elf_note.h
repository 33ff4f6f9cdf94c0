/* Internal: the GNU build ID of an ELF object, read one way everywhere:
 * from notes in memory (a loaded object's PT_NOTE segment) or from a file
 * through bounded reads of its program headers and note segments. Inline
 * and libc-only, because the interceptor's auditor and the NVRTC helper
 * link no library code, and they read build IDs too. */
#ifndef PROGCACHE_UTIL_ELF_NOTE_H
#define PROGCACHE_UTIL_ELF_NOTE_H

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Room for any build ID the linkers write (SHA-1: 20 bytes; at most 64
 * is kept). */
#define PROGCACHE__BUILD_ID_MAX 64
/* The largest note segment read from a file (a library's notes are a few
 * dozen bytes: the build ID, an ABI tag, a property note). */
#define PROGCACHE__ELF_NOTE_MAX 4096

/* The build ID among the notes at p (size bytes) into out (cap bytes): its
 * length, or 0 when there is none that fits. Notes are read by copy, so p
 * need not be aligned. */
static inline size_t progcache__elf_build_id_note(const unsigned char *p, size_t size,
                                                  unsigned char *out, size_t cap)
{
    while (size >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) nh;
        memcpy(&nh, p, sizeof nh);
        size_t name = ((size_t)nh.n_namesz + 3) & ~(size_t)3;
        size_t desc = ((size_t)nh.n_descsz + 3) & ~(size_t)3;
        if (name > size - sizeof nh || desc > size - sizeof nh - name)
            return 0;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            memcmp(p + sizeof nh, "GNU", 4) == 0 && nh.n_descsz && nh.n_descsz <= cap) {
            memcpy(out, p + sizeof nh + name, nh.n_descsz);
            return nh.n_descsz;
        }
        p += sizeof nh + name + desc;
        size -= sizeof nh + name + desc;
    }
    return 0;
}

/* The build ID of the ELF file open at fd (an object of this process's
 * class), from its PT_NOTE segments: at most 64 program headers and
 * PROGCACHE__ELF_NOTE_MAX bytes of each note segment are read. Its length,
 * or 0 (not ELF, another class, no build ID, a read failed). */
static inline size_t progcache__elf_build_id_fd(int fd, unsigned char *out, size_t cap)
{
    ElfW(Ehdr) eh;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum > 64)
        return 0;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        ElfW(Phdr) ph;
        unsigned char note[PROGCACHE__ELF_NOTE_MAX];
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
            return 0;
        if (ph.p_type != PT_NOTE || ph.p_filesz > sizeof note ||
            pread(fd, note, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz)
            continue;
        size_t n = progcache__elf_build_id_note(note, ph.p_filesz, out, cap);
        if (n)
            return n;
    }
    return 0;
}

#endif
