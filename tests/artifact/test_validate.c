/* The artifact validators (src/artifact/): real NVRTC output of every
 * kind is recognised with its architecture and kernel names; every
 * truncation of a CUBIN is rejected; bit flips, garbage and crafted
 * headers never crash and never read outside the buffer (run it under
 * AddressSanitizer to see that). */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "check.h"
#include "progcache/cuda.h"
#include "artifact/format.h"
#include "artifact/inspect.h"

static const char *kernels_src =
    "extern \"C\" __global__ void scale(float *a, float s, int n)"
    "{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] *= s; }\n"
    "extern \"C\" __device__ __noinline__ float twice(float x) { return 2.0f * x; }\n"
    "extern \"C\" __global__ void fill(float *a, float v, int n)"
    "{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] = twice(v); }\n";

/* rdc: relocatable device code (no program headers, device functions
 * kept as symbols); without it the CUBIN is a loadable executable. */
static void compile_rdc(progcache_buf *out, progcache_target target, const char *arch, int rdc)
{
    char opt[32];
    snprintf(opt, sizeof opt, "-arch=%s", arch);
    const char *options[] = {opt, "-rdc=true"};
    progcache_key_nvrtc_options p = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    p.source = kernels_src;
    p.target = target;
    p.options = options;
    p.num_options = rdc ? 2 : 1;
    CHECK_OK(progcache_nvrtc_compile(out, NULL, NULL, &p));
}

static void compile(progcache_buf *out, progcache_target target, const char *arch)
{
    compile_rdc(out, target, arch, 0);
}

/* The end of a test of bin's bytes: both released. */
static void release(progcache_artifact_info *info, progcache_buf *bin)
{
    progcache_artifact_info_release(info);
    progcache_buf_free(bin);
}

static int has_kernel(const progcache_artifact_info *info, const char *name)
{
    for (size_t i = 0; i < info->num_kernels; i++)
        if (!strcmp(progcache_artifact_kernel(info, i), name))
            return 1;
    return 0;
}

static void inspect(progcache_artifact_info *info, const void *data, size_t size)
{
    CHECK_OK(progcache_artifact_inspect(info, data, size));
}

static void test_cubin(void)
{
    static const struct {
        const char *arch, *expect;
    } cases[] = {{"sm_90", "sm_90"},   {"sm_80", "sm_80"},   {"sm_90a", "sm_90a"},
                 {"sm_100", "sm_100"}, {"sm_120", "sm_120"}, {"sm_75", "sm_75"}};
    progcache_buf bin = PROGCACHE_BUF_INIT;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    for (size_t c = 0; c < 2 * sizeof cases / sizeof cases[0]; c++) {
        compile_rdc(&bin, PROGCACHE_TARGET_CUBIN, cases[c / 2].arch, (int)(c % 2));
        inspect(&info, bin.data, bin.size);
        CHECK(info.kind == PROGCACHE_KIND_CUBIN);
        CHECK(info.valid && info.reason[0] == '\0');
        if (strcmp(info.arch, cases[c / 2].expect)) {
            fprintf(stderr, "arch %s: got \"%s\"\n", cases[c / 2].arch, info.arch);
            CHECK(!"architecture from e_flags");
        }
        /* Kernels only: the device function twice is not one. */
        CHECK(info.num_kernels == 2);
        CHECK(has_kernel(&info, "scale") && has_kernel(&info, "fill"));
        CHECK(!has_kernel(&info, "twice"));
        CHECK(progcache_artifact_kernel(&info, 2) == NULL);
    }
    release(&info, &bin);
}

static void test_ptx_and_ltoir(void)
{
    progcache_buf bin = PROGCACHE_BUF_INIT;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    compile(&bin, PROGCACHE_TARGET_PTX, "sm_90");
    inspect(&info, bin.data, bin.size);
    CHECK(info.kind == PROGCACHE_KIND_PTX && info.valid);
    CHECK(!strcmp(info.arch, "sm_90"));
    CHECK(info.num_kernels == 2 && has_kernel(&info, "scale") && has_kernel(&info, "fill"));
    /* NVRTC's PTX ends with its NUL; without it the text is just as good. */
    CHECK(bin.data[bin.size - 1] == '\0');
    inspect(&info, bin.data, bin.size - 1);
    CHECK(info.kind == PROGCACHE_KIND_PTX && info.valid);
    /* Cut inside a function: braces do not balance. */
    const char *body = strstr((const char *)bin.data, ".entry fill");
    CHECK(body != NULL);
    const char *brace = strchr(body, '{');
    CHECK(brace != NULL);
    inspect(&info, bin.data, (size_t)(brace - (const char *)bin.data) + 20);
    CHECK(info.kind == PROGCACHE_KIND_PTX && !info.valid && strstr(info.reason, "cut short"));
    /* A NUL inside the text. */
    progcache_buf copy = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_buf_set(&copy, bin.data, bin.size));
    copy.data[copy.size / 2] = '\0';
    inspect(&info, copy.data, copy.size);
    CHECK(info.kind == PROGCACHE_KIND_PTX && !info.valid && strstr(info.reason, "NUL"));

    compile(&bin, PROGCACHE_TARGET_LTOIR, "sm_90");
    inspect(&info, bin.data, bin.size);
    CHECK(info.kind == PROGCACHE_KIND_LTOIR && info.valid);
    CHECK(!strcmp(info.arch, "sm_90"));
    inspect(&info, bin.data, 20);
    CHECK(info.kind == PROGCACHE_KIND_LTOIR && !info.valid);
    progcache_buf_free(&copy);
    release(&info, &bin);
}

/* Every prefix of a CUBIN is rejected: the tables sit at the end of the
 * file, so any cut leaves one of them hanging past it. */
static void test_cubin_truncations(void)
{
    progcache_buf bin = PROGCACHE_BUF_INIT;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    compile(&bin, PROGCACHE_TARGET_CUBIN, "sm_90");
    for (size_t len = 0; len < bin.size; len++) {
        /* A fresh copy of exactly len bytes, so a sanitizer sees any read
         * past the end. */
        unsigned char *part = malloc(len ? len : 1);
        CHECK(part != NULL);
        memcpy(part, bin.data, len);
        inspect(&info, part, len);
        CHECK(!info.valid);
        CHECK(info.kind == PROGCACHE_KIND_CUBIN || info.kind == PROGCACHE_KIND_UNKNOWN);
        CHECK(info.reason[0] != '\0');
        free(part);
    }
    release(&info, &bin);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random bit flips in every kind of artifact, random garbage, random
 * lengths: any answer is fine, a crash or an out-of-bounds read is not. */
static void test_bit_flips(void)
{
    static const progcache_target targets[] = {PROGCACHE_TARGET_CUBIN, PROGCACHE_TARGET_PTX,
                                               PROGCACHE_TARGET_LTOIR};
    progcache_buf bin = PROGCACHE_BUF_INIT;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    size_t flagged = 0, runs = 0;
    for (size_t t = 0; t < 3; t++) {
        compile(&bin, targets[t], "sm_90");
        unsigned char *copy = malloc(bin.size);
        CHECK(copy != NULL);
        for (int round = 0; round < 4000; round++) {
            memcpy(copy, bin.data, bin.size);
            int flips = 1 + (int)(rng() % 8);
            for (int f = 0; f < flips; f++) {
                /* Headers and tables are where the parsing happens: aim
                 * half of the flips at the first 64 bytes and the last
                 * kilobyte. */
                size_t at = rng() % bin.size;
                if (round % 2 && bin.size > 1100)
                    at = (rng() % 2) ? rng() % 64 : bin.size - 1 - rng() % 1024;
                copy[at] ^= (unsigned char)(1u << (rng() % 8));
            }
            size_t len = round % 5 ? bin.size : rng() % (bin.size + 1);
            inspect(&info, copy, len);
            runs++;
            flagged += !info.valid;
            CHECK(info.valid || info.reason[0]);
            for (size_t k = 0; k < info.num_kernels; k++)
                CHECK(progcache_artifact_kernel(&info, k) != NULL);
        }
        free(copy);
    }
    /* Not a requirement on any one flip, but flips in headers must be
     * noticed often, or the checks check nothing. */
    CHECK(flagged > runs / 10);
    for (int round = 0; round < 2000; round++) {
        size_t len = rng() % 600;
        unsigned char *junk = malloc(len ? len : 1);
        CHECK(junk != NULL);
        for (size_t i = 0; i < len; i++)
            junk[i] = (unsigned char)rng();
        /* Give the parsers something to chew on: real magics up front. */
        if (len >= 4 && round % 4 == 0)
            memcpy(junk,
                   "\x7f"
                   "ELF",
                   4);
        if (len >= 4 && round % 4 == 1)
            memcpy(junk, "\x50\xed\x55\xba", 4);
        if (len >= 20 && round % 4 == 2)
            memcpy(junk, "//\n.version 8.0\n", 16);
        inspect(&info, junk, len);
        CHECK(info.valid || info.reason[0]);
        free(junk);
    }
    release(&info, &bin);
}

/* Hostile headers: offsets and counts chosen to overflow naive checks. */
static void test_crafted_elf(void)
{
    progcache_buf bin = PROGCACHE_BUF_INIT;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    compile(&bin, PROGCACHE_TARGET_CUBIN, "sm_90");
    unsigned char *copy = malloc(bin.size);
    CHECK(copy != NULL);
    Elf64_Ehdr eh;
    memcpy(&eh, bin.data, sizeof eh);
    CHECK(eh.e_phnum > 0); /* an executable CUBIN has program headers */

    static const uint64_t bad_offsets[] = {UINT64_MAX, UINT64_MAX - 63, 1ull << 63, 0xfffffff0};
    for (size_t i = 0; i < sizeof bad_offsets / sizeof bad_offsets[0]; i++) {
        memcpy(copy, bin.data, bin.size);
        Elf64_Ehdr h = eh;
        h.e_shoff = bad_offsets[i];
        memcpy(copy, &h, sizeof h);
        inspect(&info, copy, bin.size);
        CHECK(!info.valid && info.kind == PROGCACHE_KIND_CUBIN);

        memcpy(copy, bin.data, bin.size);
        h = eh;
        h.e_phoff = bad_offsets[i];
        memcpy(copy, &h, sizeof h);
        inspect(&info, copy, bin.size);
        CHECK(!info.valid);
    }
    /* Too many sections, a name table index out of range. */
    memcpy(copy, bin.data, bin.size);
    Elf64_Ehdr h = eh;
    h.e_shnum = 0xffff;
    memcpy(copy, &h, sizeof h);
    inspect(&info, copy, bin.size);
    CHECK(!info.valid);
    h = eh;
    h.e_shstrndx = h.e_shnum;
    memcpy(copy, &h, sizeof h);
    inspect(&info, copy, bin.size);
    CHECK(!info.valid && strstr(info.reason, "name table"));

    /* Every section's offset, size and link, and every symbol's name,
     * pointed out of range in turn. */
    for (unsigned s = 0; s < eh.e_shnum; s++) {
        for (int field = 0; field < 4; field++) {
            memcpy(copy, bin.data, bin.size);
            Elf64_Shdr sh;
            unsigned char *at = copy + eh.e_shoff + (size_t)s * sizeof sh;
            memcpy(&sh, at, sizeof sh);
            if (field == 0)
                sh.sh_offset = UINT64_MAX - 2;
            else if (field == 1)
                sh.sh_size = UINT64_MAX / 2;
            else if (field == 2)
                sh.sh_link = 0xfffffff;
            else
                sh.sh_name = 0xfffffff;
            memcpy(at, &sh, sizeof sh);
            inspect(&info, copy, bin.size);
            /* NOBITS sections have no bytes in the file, and only symbol
             * tables link to another section; everything else must fail. */
            int may_pass =
                (field < 2 && sh.sh_type == SHT_NOBITS) || (field == 2 && sh.sh_type != SHT_SYMTAB);
            if (!may_pass)
                CHECK(!info.valid);
        }
    }
    /* Not a CUDA ELF: an x86-64 machine number. */
    memcpy(copy, bin.data, bin.size);
    h = eh;
    h.e_machine = EM_X86_64;
    memcpy(copy, &h, sizeof h);
    inspect(&info, copy, bin.size);
    CHECK(info.kind == PROGCACHE_KIND_UNKNOWN && !info.valid && strstr(info.reason, "not a CUDA"));
    free(copy);
    release(&info, &bin);
}

static void put_u16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* A fatbin as nvcc -fatbin lays it out: 16-byte header, then entries with
 * a 64-byte header (kind, header size, payload size, SM at offset 28). */
static void test_fatbin(void)
{
    unsigned char fb[16 + 2 * (64 + 32)];
    memset(fb, 0, sizeof fb);
    put_u32(fb, 0xBA55ED50u);
    put_u16(fb + 4, 1);
    put_u16(fb + 6, 16);
    put_u64(fb + 8, 2 * (64 + 32));
    unsigned char *e = fb + 16;
    put_u16(e, 2);
    put_u32(e + 4, 64);
    put_u64(e + 8, 32);
    put_u32(e + 28, 90);
    e += 64 + 32;
    put_u16(e, 1);
    put_u32(e + 4, 64);
    put_u64(e + 8, 32);
    put_u32(e + 28, 80);
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    inspect(&info, fb, sizeof fb);
    CHECK(info.kind == PROGCACHE_KIND_FATBIN && info.valid);
    CHECK(!strcmp(info.arch, "sm_90,compute_80"));
    for (size_t len = 4; len < sizeof fb; len++) {
        inspect(&info, fb, len);
        CHECK(info.kind == PROGCACHE_KIND_FATBIN && !info.valid);
    }
    put_u64(fb + 16 + 8, UINT64_MAX); /* entry payload size overflows */
    inspect(&info, fb, sizeof fb);
    CHECK(!info.valid);
    progcache_artifact_info_release(&info);
}

/* One info struct reused from artifact to artifact (as the admin walks
 * do): nothing of an earlier artifact's architecture stays behind a
 * shorter one (a PTX .target after a CUBIN for sm_100 read "sm_900"). */
static void test_info_reused(void)
{
    static const char ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n";
    progcache_buf bin = PROGCACHE_BUF_INIT;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    compile(&bin, PROGCACHE_TARGET_CUBIN, "sm_100");
    inspect(&info, bin.data, bin.size);
    CHECK(info.kind == PROGCACHE_KIND_CUBIN && info.valid && !strcmp(info.arch, "sm_100"));
    inspect(&info, ptx, sizeof ptx - 1);
    CHECK(info.kind == PROGCACHE_KIND_PTX && info.valid);
    if (strcmp(info.arch, "sm_90")) {
        fprintf(stderr, "PTX after a CUBIN: arch \"%s\"\n", info.arch);
        CHECK(!"the PTX .target alone");
    }
    release(&info, &bin);
}

static void test_reference_cache(void)
{
    const char *ref = test_reference_dir();
    if (!ref) {
        printf("reference cache: skipped (no PROGCACHE_REFERENCE_DIR)\n");
        return;
    }
    static const char *files[] = {
        "3b/5b902414abe7fbd3708b6dbadd13766c94bba27937c70a456d3b0ce0089432",
        "61/a9308ed32f01d415a8bb483a09cc167975f6616c67c494575b743bd175e7e2",
        "68/e25345677955cfa0534235da42bffb235a904d3dae78e9ddd9ada87aaeee1f",
        "6c/c26e7cce14c947f3f2905dbba8e752da6492e3c6903b3f5e2dc9f499e408bf",
        "84/89ae73ab93f27b7632b83f43ec7283e9a097d0c94cc5ef1bf3166fd33e5eb3",
        "fa/fab70d3cfc624000d0d7e1ae17d057f2c2d10495905c61899565289327d627"};
    int cubins = 0, ptx = 0;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    for (size_t i = 0; i < 6; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/cuda-core-cache/entries/%s", ref, files[i]);
        size_t size;
        char *data = test_read_file(path, &size);
        CHECK(data != NULL);
        inspect(&info, data, size);
        CHECK(info.valid && !strcmp(info.arch, "sm_90") && info.num_kernels == 1);
        const char *k = progcache_artifact_kernel(&info, 0);
        CHECK(!strcmp(k, "scale") || !strcmp(k, "axpy") || !strcmp(k, "fill"));
        cubins += info.kind == PROGCACHE_KIND_CUBIN;
        ptx += info.kind == PROGCACHE_KIND_PTX;
        free(data);
    }
    CHECK(cubins == 3 && ptx == 3);
    progcache_artifact_info_release(&info);
}

static void test_api(void)
{
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    inspect(&info, "", 0);
    CHECK(info.kind == PROGCACHE_KIND_UNKNOWN && !info.valid && strstr(info.reason, "empty"));
    inspect(&info, "hello, world", 12);
    CHECK(info.kind == PROGCACHE_KIND_UNKNOWN && !info.valid && strstr(info.reason, "not a CUBIN"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_artifact_inspect(NULL, "x", 1));
    CHECK_RC(PROGCACHE_EINVAL, progcache_artifact_inspect(&info, NULL, 1));
    progcache_artifact_info unversioned;
    memset(&unversioned, 0, sizeof unversioned);
    CHECK_RC(PROGCACHE_EINVAL, progcache_artifact_inspect(&unversioned, "x", 1));
    CHECK(!strcmp(progcache_kind_name(PROGCACHE_KIND_LTOIR), "LTO-IR"));
    CHECK(!strcmp(progcache_kind_name((progcache_kind)99), "unknown"));
    CHECK(progcache_artifact_kernel(NULL, 0) == NULL);
    CHECK(progcache__kind_of_target(PROGCACHE_TARGET_PTX) == PROGCACHE_KIND_PTX);
    progcache_artifact_info_release(NULL);

    /* Out of memory while collecting names: reported, nothing leaked. */
    progcache_buf bin = PROGCACHE_BUF_INIT;
    compile(&bin, PROGCACHE_TARGET_CUBIN, "sm_90");
    progcache_artifact_info fresh = PROGCACHE_ARTIFACT_INFO_INIT;
    progcache__alloc_fail_after(1);
    CHECK_RC(PROGCACHE_ENOMEM, progcache_artifact_inspect(&fresh, bin.data, bin.size));
    progcache__alloc_fail_after(0);
    /* Without names nothing is allocated at all. */
    progcache__alloc_fail_after(1);
    CHECK_OK(progcache__validate(&fresh, bin.data, bin.size, 0));
    progcache__alloc_fail_after(0);
    CHECK(fresh.valid && fresh.num_kernels == 0);
    progcache_artifact_info_release(&fresh);
    release(&info, &bin);
}

int main(void)
{
    test_api();
    test_cubin();
    test_ptx_and_ltoir();
    test_cubin_truncations();
    test_crafted_elf();
    test_fatbin();
    test_info_reused();
    test_bit_flips();
    test_reference_cache();
    puts("test_validate: ok");
    return 0;
}
