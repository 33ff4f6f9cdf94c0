/* Header manifests among the entries of a cache: listed as "manifest", and
 * accepted by verify, rather than reported as artifacts of no known kind.
 * The format is key/header_manifest.c's (docs/FORMAT.md, "Header
 * manifests"); only its fixed header is read here: the magic number, the
 * version and the size field, which tells a manifest cut short. The seal
 * covers the rest, as for every entry. */
#include "artifact/manifest_kind.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "artifact/inspect.h"
#include "bytes.h"

#define MAGIC "\x89PCMANI\n"
#define HEADER_SIZE 72
#define VERSION 1

int progcache__is_manifest(const unsigned char *data, size_t size)
{
    return data && size >= 8 && !memcmp(data, MAGIC, 8);
}

/* A bundle of `progcache exec` (src/intercept/bundle.c): its fixed
 * header only, as for a manifest; its digest and sections are the
 * interceptor's to check when it replays one. */
#define BUNDLE_MAGIC "\x89PCBNDL\n"
#define BUNDLE_MIN 168 /* header, five empty outputs, no names, digest */

static int inspect_bundle(progcache_artifact_info *out, const unsigned char *data, size_t size)
{
    out->kind = PROGCACHE_KIND_BUNDLE;
    out->arch[0] = '\0';
    out->num_kernels = 0;
    out->kernels.size = 0;
    out->valid = 0;
    if (size < BUNDLE_MIN)
        snprintf(out->reason, sizeof out->reason, "a bundle cut short (%zu bytes)", size);
    else if (progcache__le32(data + 8) != 1)
        snprintf(out->reason, sizeof out->reason, "a bundle of a version this library does not "
                 "read");
    else if (progcache__le64(data + 16) != size)
        snprintf(out->reason, sizeof out->reason,
                 "a bundle of %zu bytes whose size field says %llu (cut short?)", size,
                 (unsigned long long)progcache__le64(data + 16));
    else {
        out->valid = 1;
        out->reason[0] = '\0';
    }
    return 0;
}

int progcache__inspect_entry(progcache_artifact_info *out, const unsigned char *data, size_t size,
                             int want_names)
{
    if (data && size >= 8 && !memcmp(data, BUNDLE_MAGIC, 8))
        return inspect_bundle(out, data, size);
    if (!progcache__is_manifest(data, size))
        return progcache__validate(out, data, size, want_names);
    out->kind = PROGCACHE_KIND_MANIFEST;
    out->arch[0] = '\0';
    out->num_kernels = 0;
    out->kernels.size = 0;
    out->valid = 0;
    if (size < HEADER_SIZE)
        snprintf(out->reason, sizeof out->reason, "a header manifest cut short (%zu bytes)", size);
    else if ((progcache__le64(data + 8) & 0xffffffffu) != VERSION)
        snprintf(out->reason, sizeof out->reason, "a header manifest of a version this library "
                 "does not read");
    else if (progcache__le64(data + 16) != size)
        snprintf(out->reason, sizeof out->reason,
                 "a header manifest of %zu bytes whose size field says %llu (cut short?)", size,
                 (unsigned long long)progcache__le64(data + 16));
    else {
        out->valid = 1;
        out->reason[0] = '\0';
    }
    return 0;
}
