/* src/util/elf_note.h: the one reader of GNU build IDs. From a file it
 * gives exactly the ID the linker wrote (two objects of the same size that
 * differ only in their ID are told apart), the same ID as the loaded
 * object's notes in memory, and nothing (never a read past its bound) for
 * a file that is not ELF, a truncated one, or notes whose sizes lie. */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "elf_note.h"

static const unsigned char id_a[] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x10, 0x32,
                                      0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0x00, 0x11, 0x22, 0x33};

static size_t id_of_file(const char *path, unsigned char *out, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    size_t n = progcache__elf_build_id_fd(fd, out, cap);
    close(fd);
    return n;
}

/* The loaded object that defines sym: its notes, read in memory. */
typedef struct found {
    void *sym;
    unsigned char id[PROGCACHE__BUILD_ID_MAX];
    size_t len;
} found;

static int each(struct dl_phdr_info *info, size_t size, void *data)
{
    found *f = data;
    (void)size;
    int holds = 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, at = (uintptr_t)f->sym;
        holds |= ph->p_type == PT_LOAD && at >= start && at - start < ph->p_memsz;
    }
    for (ElfW(Half) i = 0; holds && i < info->dlpi_phnum && !f->len; i++)
        if (info->dlpi_phdr[i].p_type == PT_NOTE)
            f->len = progcache__elf_build_id_note(
                (const unsigned char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr),
                info->dlpi_phdr[i].p_memsz, f->id, sizeof f->id);
    return holds;
}

static void copy_prefix(const char *from, const char *to, off_t len)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(in >= 0 && out >= 0);
    static char buf[1 << 16];
    ssize_t n = read(in, buf, (size_t)len < sizeof buf ? (size_t)len : sizeof buf);
    CHECK(n > 0 && write(out, buf, (size_t)n) == n);
    close(in);
    close(out);
}

int main(int argc, char **argv)
{
    CHECK(argc == 3);
    const char *a = argv[1], *b = argv[2];
    unsigned char ia[PROGCACHE__BUILD_ID_MAX], ib[PROGCACHE__BUILD_ID_MAX];

    /* Exactly the linker's ID; the two objects are the same size. */
    CHECK(id_of_file(a, ia, sizeof ia) == sizeof id_a);
    CHECK(memcmp(ia, id_a, sizeof id_a) == 0);
    CHECK(id_of_file(b, ib, sizeof ib) == sizeof id_a);
    CHECK(memcmp(ia, ib, sizeof id_a) != 0);
    struct stat sa, sb;
    CHECK(stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_size == sb.st_size);

    /* Too small a buffer: no ID rather than a cut one. */
    CHECK(id_of_file(a, ia, 8) == 0);

    /* In memory, the loaded object's notes give the same ID. */
    void *h = dlopen(a, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    found f = {dlsym(h, "progcache_test_elf_note_tiny"), {0}, 0};
    CHECK(f.sym != NULL);
    dl_iterate_phdr(each, &f);
    CHECK(f.len == sizeof id_a && memcmp(f.id, id_a, sizeof id_a) == 0);
    dlclose(h);

    /* Not ELF, and ELF cut short: none. */
    char *dir = test_mkdtemp("elfnote");
    char path[4200];
    snprintf(path, sizeof path, "%s/text", dir);
    FILE *t = fopen(path, "w");
    CHECK(t != NULL && fputs("not an ELF file\n", t) >= 0 && fclose(t) == 0);
    CHECK(id_of_file(path, ia, sizeof ia) == 0);
    snprintf(path, sizeof path, "%s/cut", dir);
    copy_prefix(a, path, 100);
    CHECK(id_of_file(path, ia, sizeof ia) == 0);

    /* Notes whose sizes run past their bytes: none, nothing read past. */
    unsigned char notes[32] = {0};
    ElfW(Nhdr) nh = {4, 200, NT_GNU_BUILD_ID};
    memcpy(notes, &nh, sizeof nh);
    memcpy(notes + sizeof nh, "GNU", 4);
    CHECK(progcache__elf_build_id_note(notes, sizeof notes, ia, sizeof ia) == 0);
    nh.n_namesz = 0xfffffff0u;
    memcpy(notes, &nh, sizeof nh);
    CHECK(progcache__elf_build_id_note(notes, sizeof notes, ia, sizeof ia) == 0);
    /* A well-formed note after another kind of note is found. */
    unsigned char two[64] = {0};
    ElfW(Nhdr) other = {4, 4, 1}, bid = {4, 4, NT_GNU_BUILD_ID};
    memcpy(two, &other, sizeof other);
    memcpy(two + 12, "GNU", 4);
    memcpy(two + 20, &bid, sizeof bid);
    memcpy(two + 32, "GNU", 4);
    memcpy(two + 36, "\xde\xad\xbe\xef", 4);
    CHECK(progcache__elf_build_id_note(two, 40, ia, sizeof ia) == 4);
    CHECK(memcmp(ia, "\xde\xad\xbe\xef", 4) == 0);
    CHECK(progcache__elf_build_id_note(two, 39, ia, sizeof ia) == 0); /* cut by one byte */

    test_rmdtemp(dir);
    printf("test_elf_note: ok\n");
    return 0;
}
