/* The public key functions, which take the headers into the key:
 * progcache_key_nvrtc (headers in memory; a source that includes anything
 * else is refused) and progcache_key_nvrtc_files (header files read from
 * disk; docs/KEY.md, "Headers on disk"). The recipe they end in is
 * src/key/'s, cuda.core's make_program_cache_key. */
#include "progcache/key.h"

#include "error.h"
#include "headers/headers_digest.h"
#include "headers/include_resolve.h"
#include "key/key_options.h"

int progcache_key_nvrtc(unsigned char out[PROGCACHE_KEY_SIZE],
                        const progcache_key_nvrtc_options *opts)
{
    int rc;
    if (!out || !opts)
        return progcache__error(PROGCACHE_EINVAL, "progcache_key_nvrtc: out or opts is NULL");
    progcache_key_nvrtc_options o;
    if ((rc = progcache__key_load(&o, opts, "progcache_key_nvrtc")))
        return rc;
    /* An empty digest is still a digest, as in cuda.core (b"" is not None). */
    int given = o.extra_digest != NULL;
    if ((rc = progcache__key_check_options(o.options, o.num_options, o.name, given)))
        return rc;
    /* Files the source includes: this function reads none, so only the
     * caller's digest can cover them. */
    if (!given && (rc = progcache__key_check_includes(&o)))
        return rc;
    if (!o.num_headers)
        return progcache__key_derive(out, &o, o.extra_digest, o.extra_digest_len);
    unsigned char extra[PROGCACHE_KEY_SIZE];
    if ((rc = progcache__headers_digest(extra, &o, NULL, 0, NULL)))
        return rc;
    return progcache__key_derive(out, &o, extra, sizeof extra);
}

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
