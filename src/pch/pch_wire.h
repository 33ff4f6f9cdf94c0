/* Internal: the wire between the PCH tier (src/pch/pch_helper.c) and the
 * compile helper (helper/nvrtc_helper.c), both built from this tree, and
 * the one routine both sides need: the build ID of the loaded libnvrtc.
 *
 * One compile per helper process: the library writes one request into
 * the helper's stdin and shuts its side down; the helper reads it to the
 * end, compiles, writes one response to its stdout and exits. A helper
 * asked to stay warm (a request's warm name) leaves a template behind
 * that serves later USE requests over an abstract Unix socket of that
 * name (helper/helper_warm.c, src/pch/pch_warm.c): the library connects, sends
 * one byte PROGCACHE__WIRE_WARM_FDS carrying the PCH directory, the PCH
 * and its working directory (SCM_RIGHTS), waits for the byte
 * PROGCACHE__WIRE_WARM_ACK, then sends the request as above and reads
 * the response. Both are a
 * socketpair, so a write to a helper that died fails with EPIPE instead of
 * raising SIGPIPE in the caller (MSG_NOSIGNAL). Integers are in the host's
 * byte order (both ends are on one host, built together); a string is a
 * u32 length, the bytes and a NUL that the length does not count, so a
 * reader can hand it to NVRTC in place. Every read is bounded by the
 * limits below and by the buffer; a malformed message is refused whole.
 *
 * Request:  "PCHQ" u32 version, u32 mode, u32 target, u64 heap_addr,
 *           u64 heap_size, str nvrtc_id (hex), str name, str source,
 *           str prefix, str pch_name, u32 n, n x str option,
 *           u32 m, m x str name_expression, str warm, u32 warm_ms.
 * Response: "PCHR" u32 version, u32 status, i32 nvrtc_result, u32 pch,
 *           u32 heap, u64 heap_required, u64 create_us, u64 compile_us,
 *           str nvrtc_id, str log, str note, str artifact, str lowered
 *           (NUL-separated), u32 d, d x dep.
 * Dep:      u32 kind ('+' a file read or found, 'd' a directory found,
 *           '-' a path probed and absent), u64 size,
 *           i64 mtime_ns, i64 ctime_ns, u64 dev, u64 ino, str path.
 *
 * Descriptors the helper starts with: 0 and 1 the socket, 2 /dev/null,
 * 3 the PCH directory (TMPDIR points there too: NVRTC's own temp files go
 * into it), 4 the PCH to use (mode USE only). Nothing else is open. */
#ifndef PROGCACHE_CUDA_PCH_WIRE_H
#define PROGCACHE_CUDA_PCH_WIRE_H

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "util/elf_note.h"

#define PROGCACHE__WIRE_REQUEST "PCHQ"
#define PROGCACHE__WIRE_RESPONSE "PCHR"
#define PROGCACHE__WIRE_VERSION 2u
/* The byte that carries a warm helper's descriptors, and the byte its
 * child answers at once when it has taken them; how long the library waits
 * for that answer before it starts a helper of its own. */
#define PROGCACHE__WIRE_WARM_FDS 'F'
#define PROGCACHE__WIRE_WARM_ACK 'A'
#define PROGCACHE__WIRE_WARM_ACK_MS 2000

/* The longest request and response either side accepts, and the most
 * dependencies: far beyond any real program (a CCCL prefix opens about 600
 * files), small enough that a runaway peer cannot exhaust memory. */
#define PROGCACHE__WIRE_MAX_REQUEST ((size_t)512 << 20)
#define PROGCACHE__WIRE_MAX_RESPONSE ((size_t)1536 << 20)
#define PROGCACHE__WIRE_MAX_DEPS 200000u
#define PROGCACHE__WIRE_MAX_NOTE 4096u

/* Where the helper places NVRTC's PCH heap. A PCH is a memory image that
 * NVRTC maps back at the address it was made at, so every helper must put
 * the heap at the same address; this one is far from where the kernel puts
 * anything for a process of this size (the x86-64 top-down layout starts
 * near 0x7f..), page- and 2 MiB-aligned, and part of the PCH key. */
#define PROGCACHE__PCH_HEAP_ADDR 0x300000000000ull
/* NVRTC's default heap (256 MiB); a prefix that needs more asks for it. */
#define PROGCACHE__PCH_HEAP_DEFAULT ((uint64_t)256 << 20)

/* What the helper is asked to do. */
enum {
    PROGCACHE__WIRE_USE = 1,    /* compile the program with the PCH on fd 4 */
    PROGCACHE__WIRE_CREATE = 2, /* create a PCH from the prefix (recording what NVRTC
                                 * reads), then compile the program with it */
    PROGCACHE__WIRE_DEPS = 3,   /* compile the prefix without a PCH, recording what
                                 * NVRTC reads (for the in-process tier) */
    /* CREATE off the caller's critical path: the helper reads the request,
     * exits at once (its caller reaps it), and a child of its own, in a
     * session of its own, bounded by PROGCACHE__WIRE_DETACHED_SECONDS,
     * does the CREATE and writes the response (without the artifact,
     * which the caller compiled itself) to <key>.made in the PCH
     * directory, for the next compile of the prefix to publish. */
    PROGCACHE__WIRE_CREATE_DETACHED = 4
};
#define PROGCACHE__WIRE_DETACHED_SECONDS 600
/* The first line of a <key>.made file, before the PCH's name and the
 * response. */
#define PROGCACHE__WIRE_MADE "progcache-pch-made 1"

/* The response's status: whether the helper did its job. A compile error
 * is OK with nvrtc_result set: NVRTC's verdict, not the helper's. */
enum {
    PROGCACHE__WIRE_OK = 0,
    PROGCACHE__WIRE_MISMATCH = 1, /* the helper's libnvrtc is not the caller's */
    PROGCACHE__WIRE_BAD_REQUEST = 2,
    PROGCACHE__WIRE_FAILED = 3 /* out of memory, or NVRTC failed outside a compile */
};

/* What became of the PCH. */
enum {
    PROGCACHE__WIRE_PCH_NONE = 0,
    PROGCACHE__WIRE_PCH_USED = 1,      /* NVRTC said it used the PCH */
    PROGCACHE__WIRE_PCH_REFUSED = 2,   /* NVRTC compiled without it (the log says why) */
    PROGCACHE__WIRE_PCH_HEAP_SHORT = 3, /* creation needs heap_required bytes of heap */
    PROGCACHE__WIRE_PCH_NOT_MADE = 4   /* creation failed otherwise (note says why) */
};

/* Where NVRTC's heap went. */
enum {
    PROGCACHE__WIRE_HEAP_UNSEEN = 0, /* NVRTC never asked for it: the interposition
                                      * does not work with this NVRTC */
    PROGCACHE__WIRE_HEAP_PINNED = 1,
    PROGCACHE__WIRE_HEAP_ELSEWHERE = 2 /* the address was taken: placed by the kernel */
};

/* ---- reading ----------------------------------------------------------- */

typedef struct progcache__wire_in {
    const unsigned char *p;
    size_t left;
    int bad; /* set by the first read past the end or malformed field */
} progcache__wire_in;

static inline void progcache__wire_take(progcache__wire_in *in, void *out, size_t n)
{
    if (in->bad || in->left < n) {
        in->bad = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, in->p, n);
    in->p += n;
    in->left -= n;
}

static inline uint32_t progcache__wire_u32(progcache__wire_in *in)
{
    uint32_t v;
    progcache__wire_take(in, &v, sizeof v);
    return v;
}

static inline uint64_t progcache__wire_u64(progcache__wire_in *in)
{
    uint64_t v;
    progcache__wire_take(in, &v, sizeof v);
    return v;
}

/* A string in place (NUL-terminated in the buffer); "" once bad. */
static inline const char *progcache__wire_str(progcache__wire_in *in, size_t *len)
{
    uint32_t n = progcache__wire_u32(in);
    if (in->bad || in->left < (size_t)n + 1 || in->p[n] != '\0') {
        in->bad = 1;
        if (len)
            *len = 0;
        return "";
    }
    const char *s = (const char *)in->p;
    in->p += (size_t)n + 1;
    in->left -= (size_t)n + 1;
    if (len)
        *len = n;
    return s;
}

/* Whether the next four bytes are magic and the version matches. */
static inline int progcache__wire_header(progcache__wire_in *in, const char magic[4])
{
    char m[4];
    progcache__wire_take(in, m, 4);
    uint32_t version = progcache__wire_u32(in);
    if (in->bad || memcmp(m, magic, 4) != 0 || version != PROGCACHE__WIRE_VERSION)
        in->bad = 1;
    return !in->bad;
}

/* ---- writing: each side brings its own buffer through append ----------- */

typedef struct progcache__wire_out {
    int (*append)(void *ctx, const void *data, size_t len); /* 0 or -1 */
    void *ctx;
    int bad;
} progcache__wire_out;

static inline void progcache__wire_put(progcache__wire_out *out, const void *data, size_t len)
{
    if (!out->bad && out->append(out->ctx, data, len) != 0)
        out->bad = 1;
}

static inline void progcache__wire_put_u32(progcache__wire_out *out, uint32_t v)
{
    progcache__wire_put(out, &v, sizeof v);
}

static inline void progcache__wire_put_u64(progcache__wire_out *out, uint64_t v)
{
    progcache__wire_put(out, &v, sizeof v);
}

static inline void progcache__wire_put_str(progcache__wire_out *out, const void *s, size_t len)
{
    if (len > UINT32_MAX - 1) {
        out->bad = 1;
        return;
    }
    progcache__wire_put_u32(out, (uint32_t)len);
    if (len)
        progcache__wire_put(out, s, len);
    progcache__wire_put(out, "", 1);
}

static inline void progcache__wire_put_header(progcache__wire_out *out, const char magic[4])
{
    progcache__wire_put(out, magic, 4);
    progcache__wire_put_u32(out, PROGCACHE__WIRE_VERSION);
}

/* ---- the build ID of the loaded libnvrtc ------------------------------- */

/* nvrtcVersion() answers only major.minor, which covers several builds;
 * a PCH is valid for one build of NVRTC's front end. The GNU build ID
 * note of the object that defines nvrtcVersion names that build. */
typedef struct progcache__wire_bid {
    uintptr_t sym;
    unsigned char *out;
    size_t cap, len;
} progcache__wire_bid;

static inline int progcache__wire_bid_each(struct dl_phdr_info *info, size_t size, void *data)
{
    progcache__wire_bid *b = data;
    (void)size;
    int holds = 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && b->sym >= start && b->sym - start < ph->p_memsz)
            holds = 1;
    }
    if (!holds)
        return 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE &&
            (b->len = progcache__elf_build_id_note(
                 (const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, b->out,
                 b->cap)))
            break;
    }
    return 1;
}

/* ---- a warm helper's descriptors ------------------------------------------------ */

/* The three descriptors a request to a warm helper brings (the PCH
 * directory, the PCH, the caller's working directory) and their byte. */
#define PROGCACHE__WIRE_WARM_NFDS 3
typedef struct progcache__wire_fds {
    char byte;
    struct iovec iov;
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(PROGCACHE__WIRE_WARM_NFDS * sizeof(int))];
    } ctl;
    struct msghdr msg;
} progcache__wire_fds;

/* m ready for sendmsg or recvmsg of the byte and the descriptors. */
static inline struct msghdr *progcache__wire_fds_msg(progcache__wire_fds *m)
{
    memset(m, 0, sizeof *m);
    m->byte = PROGCACHE__WIRE_WARM_FDS;
    m->iov.iov_base = &m->byte;
    m->iov.iov_len = 1;
    m->msg.msg_iov = &m->iov;
    m->msg.msg_iovlen = 1;
    m->msg.msg_control = m->ctl.space;
    m->msg.msg_controllen = sizeof m->ctl.space;
    return &m->msg;
}

/* The build ID of the object that holds address sym in this process,
 * into out (cap bytes); its length, or 0 when there is none. */
static inline size_t progcache__wire_build_id_at(void *sym, unsigned char *out, size_t cap)
{
    progcache__wire_bid b = {(uintptr_t)sym, out, cap, 0};
    dl_iterate_phdr(progcache__wire_bid_each, &b);
    return b.len;
}

/* The same for a symbol found by name (the helper links NVRTC). */
static inline size_t progcache__wire_build_id(const char *name, unsigned char *out, size_t cap)
{
    void *sym = dlsym(RTLD_DEFAULT, name);
    return sym ? progcache__wire_build_id_at(sym, out, cap) : 0;
}

#endif
