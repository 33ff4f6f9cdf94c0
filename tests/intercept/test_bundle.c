/* The bundle format (src/intercept/bundle.c; docs/FORMAT.md, "Compile
 * bundles"): what is encoded decodes to the same answers; a bundle cut at
 * any length, or with any byte changed, is refused (PROGCACHE_ECORRUPT),
 * never read past its end; the kind is told from a CUBIN's and a
 * manifest's by progcache_artifact_inspect's entry check. */
#include <string.h>

#include "alloc.h"
#include "artifact/manifest_kind.h"
#include "check.h"
#include "intercept/intercept.h"

static void fill(progcache__bundle *b)
{
    static const char *const texts[OUT_COUNT] = {"a log\n", ".version 9.0\n", "\x7f" "ELF..",
                                                 "", ""};
    memset(b, 0, sizeof *b);
    b->compile_rc = 0;
    b->pch_status_rc = 9;
    b->pch_heap_rc = 0;
    b->pch_heap = 123456;
    for (int k = 0; k < OUT_COUNT; k++) {
        b->size_rc[k] = k == OUT_LTOIR ? 7 : 0;
        b->bytes_rc[k] = b->size_rc[k];
        /* The log and the PTX with NVRTC's NUL, as their sizes count it. */
        size_t n = strlen(texts[k]) + (k <= OUT_PTX);
        CHECK(progcache__buf_append(&b->out[k], texts[k], n) == 0);
    }
    b->num_names = 2;
    b->exprs = progcache__calloc(2, sizeof *b->exprs);
    b->lowered = progcache__calloc(2, sizeof *b->lowered);
    b->lowered_rc = progcache__calloc(2, sizeof *b->lowered_rc);
    CHECK(b->exprs && b->lowered && b->lowered_rc);
    b->exprs[0] = progcache__strdup("scale<float>");
    b->lowered[0] = progcache__strdup("_Z5scaleIfEvPT_");
    b->exprs[1] = progcache__strdup("&f<2>");
    b->lowered_rc[1] = 8; /* a name NVRTC could not lower: no lowered text */
}

static void same(const progcache__bundle *a, const progcache__bundle *b)
{
    CHECK(a->compile_rc == b->compile_rc && a->pch_status_rc == b->pch_status_rc &&
          a->pch_heap_rc == b->pch_heap_rc && a->pch_heap == b->pch_heap);
    for (int k = 0; k < OUT_COUNT; k++) {
        CHECK(a->size_rc[k] == b->size_rc[k] && a->bytes_rc[k] == b->bytes_rc[k]);
        CHECK(a->out[k].size == b->out[k].size);
        CHECK(!a->out[k].size || !memcmp(a->out[k].data, b->out[k].data, a->out[k].size));
    }
    CHECK(a->num_names == b->num_names);
    for (size_t i = 0; i < a->num_names; i++) {
        CHECK(!strcmp(a->exprs[i], b->exprs[i]) && a->lowered_rc[i] == b->lowered_rc[i]);
        CHECK((!a->lowered[i] && !b->lowered[i]) || !strcmp(a->lowered[i], b->lowered[i]));
    }
}

int main(void)
{
    progcache__bundle b, back;
    progcache_buf enc = PROGCACHE_BUF_INIT;
    fill(&b);
    CHECK_OK(progcache__bundle_encode(&enc, &b));
    CHECK_OK(progcache__bundle_decode(&back, enc.data, enc.size));
    same(&b, &back);
    progcache__bundle_free(&back);

    /* Listed as a bundle, valid. */
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    CHECK(progcache__inspect_entry(&info, enc.data, enc.size, 0) == 0);
    CHECK(info.kind == PROGCACHE_KIND_BUNDLE && info.valid);
    CHECK(!strcmp(progcache_kind_name(PROGCACHE_KIND_BUNDLE), "bundle"));
    progcache_artifact_info_release(&info);

    /* Cut at every length: refused, each in a buffer of exactly that size
     * (a read past it would be one past an allocation). */
    for (size_t n = 0; n < enc.size; n++) {
        unsigned char *cut = progcache__malloc(n ? n : 1);
        CHECK(cut);
        memcpy(cut, enc.data, n);
        CHECK_RC(PROGCACHE_ECORRUPT, progcache__bundle_decode(&back, cut, n));
        progcache__free(cut);
    }
    /* Any byte changed: refused (the digest; the header's fields first). */
    for (size_t i = 0; i < enc.size; i++) {
        enc.data[i] ^= 0x41;
        CHECK_RC(PROGCACHE_ECORRUPT, progcache__bundle_decode(&back, enc.data, enc.size));
        enc.data[i] ^= 0x41;
    }
    CHECK_OK(progcache__bundle_decode(&back, enc.data, enc.size));
    progcache__bundle_free(&back);
    progcache__bundle_free(&b);
    progcache__bundle_free(&b); /* freeing twice is harmless */
    progcache_buf_free(&enc);
    puts("test_bundle: ok");
    return 0;
}
