/* Internal: signed bundles, an archive that carries a manifest of its
 * entries and an Ed25519 signature over it (archive_sign.c; docs/FORMAT.md,
 * "Signed bundles"). Export feeds a bundle_writer every byte it writes and
 * every entry; import collects the two reserved members as it scans, then
 * checks them before anything is written. */
#ifndef PROGCACHE_STORE_ARCHIVE_SIGN_H
#define PROGCACHE_STORE_ARCHIVE_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/admin.h"
#include "archive/archive.h"

/* The reserved member names (never an entry's name). */
#define BUNDLE_MANIFEST_NAME "progcache-bundle/manifest"
#define BUNDLE_SIGNATURE_NAME "progcache-bundle/signature"
#define BUNDLE_SIGNATURE_SIZE 64 /* an Ed25519 signature */
/* The largest manifest read: about 250 bytes an entry, more with lowered
 * names; 64 MiB is some 200,000 entries. */
#define BUNDLE_MANIFEST_MAX ((uint64_t)64 << 20)

/* The most zero bytes a signed bundle may carry after its first
 * end-of-archive block (its second one and tar's record padding). */
#define BUNDLE_TAIL_MAX ((uint64_t)1 << 20)

/* ---- export ------------------------------------------------------------------ */

typedef struct bundle_writer bundle_writer;

/* A writer signing with the Ed25519 private key in PEM (pem, len bytes);
 * nvrtc is the NVRTC version the manifest records (NULL: "unknown").
 * PROGCACHE_OK, or PROGCACHE_EINVAL (not a PEM private key, not Ed25519),
 * PROGCACHE_ENOMEM, with a message. */
int progcache__bundle_writer_new(bundle_writer **out, const void *pem, size_t len,
                                 const char *nvrtc);
/* Every byte of the archive as it is written (ignored after finish). */
int progcache__bundle_hash(bundle_writer *w, const void *data, size_t len);
/* One entry, as written (e->data, e->artifact and e->meta as export has
 * them). */
int progcache__bundle_add(bundle_writer *w, const progcache_entry *e);
/* The archive's signed end: the two reserved members (header, data,
 * padding), the manifest then the signature, to be written right before
 * the end-of-archive blocks. *members is borrowed from w. */
int progcache__bundle_finish(bundle_writer *w, const progcache_buf **members);
void progcache__bundle_writer_free(bundle_writer *w);

/* ---- import ------------------------------------------------------------------ */

/* Where the reserved members are, as import's scan found them. */
typedef struct bundle_seen {
    uint64_t manifest_pos, manifest_at, manifest_size, manifest_next;
    uint64_t sig_pos, sig_at, sig_size, sig_next;
    uint64_t end_pos; /* the end-of-archive block */
    int has_manifest, has_sig;
    int after_sig; /* members (of any kind) after the signature */
} bundle_seen;

/* Called by the scan for every member header (pax headers included) at
 * pos, its data at data: 1 it is a reserved member (recorded: skip it), 0
 * it is not, or an error code (a reserved member twice, or too large; the
 * message names the archive). */
int progcache__bundle_member(bundle_seen *b, const tar_header *h, uint64_t pos, uint64_t data,
                             const char *archive);

/* Reads len bytes of the archive at offset (import's source). */
typedef int (*bundle_read_fn)(void *ctx, void *buf, size_t len, uint64_t offset);

typedef struct bundle_check bundle_check;

/* Verify a scanned archive against the Ed25519 public key in PEM (pem,
 * len): it has both reserved members, last, the signature is the key's
 * over the manifest, and the manifest's hash of the archive matches every
 * byte before it. Fills out->signer and out->nvrtc_version (a version 2
 * result). On success *out_check holds the manifest's entries for
 * progcache__bundle_expect and _entry_ok. PROGCACHE_OK, or
 * PROGCACHE_ECORRUPT ("refused (nothing imported)": unsigned, another key,
 * changed), PROGCACHE_EINVAL (the key), PROGCACHE_EIO, PROGCACHE_ENOMEM. */
int progcache__bundle_verify(bundle_check **out_check, const bundle_seen *b, bundle_read_fn read,
                             void *ctx, const void *pem, size_t len, const char *archive,
                             progcache_archive_result *out);
/* The i-th entry member of the archive (of count in all, in order) is the
 * manifest's i-th: same name (rel, "entries/ab/<62 hex>") and size.
 * Call with i == count once more to check the manifest has no more. */
int progcache__bundle_expect(const bundle_check *c, size_t i, size_t count, const char *rel,
                             uint64_t size, const char *archive);
/* The bytes and records about to be imported for the i-th entry are the
 * ones the manifest signed (a belt on top of the archive hash: the bytes
 * are read a second time). */
int progcache__bundle_entry_ok(const bundle_check *c, size_t i, const void *data, size_t len,
                               const void *records, size_t records_len, const char *archive);
void progcache__bundle_check_free(bundle_check *c);

#endif
