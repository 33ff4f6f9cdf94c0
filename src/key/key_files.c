/* progcache_key_nvrtc_files: the key of a compile that reads header files
 * (docs/KEY.md, "Headers on disk"). */
#include "progcache/key.h"

#include "error.h"
#include "key/headers_digest.h"
#include "key/include_resolve.h"
#include "key/key_options.h"

int progcache__key_scan(unsigned char out[PROGCACHE_KEY_SIZE], const progcache_key_nvrtc_options *o,
                        progcache__header_scan *scan)
{
    int rc = progcache__key_check_options_scanned(o->options, o->num_options);
    if (rc)
        return rc;
    int reads = progcache__may_include(o);
    for (size_t i = 0; !reads && i < o->num_options; i++)
        reads = progcache__option_reads_headers(o->options[i]);
    progcache__header_scan_free(scan);
    if (reads && (rc = progcache__header_scan_run(scan, o)))
        return rc;
    return progcache__key_from_scan(out, o, scan);
}

int progcache_key_nvrtc_files(unsigned char out[PROGCACHE_KEY_SIZE],
                              const progcache_key_nvrtc_options *opts)
{
    if (!out || !opts)
        return progcache__error(PROGCACHE_EINVAL, "progcache_key_nvrtc_files: out or opts is NULL");
    progcache_key_nvrtc_options o;
    int rc = progcache__key_load(&o, opts, "progcache_key_nvrtc_files");
    if (rc)
        return rc;
    /* The caller's digest is the explicit override: nothing is read. */
    if (o.extra_digest)
        return progcache_key_nvrtc(out, &o);
    progcache__header_scan scan = PROGCACHE__HEADER_SCAN_INIT;
    rc = progcache__key_scan(out, &o, &scan);
    progcache__header_scan_free(&scan);
    return rc;
}
