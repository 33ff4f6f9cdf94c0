/* The key options the key tests start from: a source compiled for sm_90
 * (one option) by a stated NVRTC 13.0, so the expected keys do not depend
 * on the NVRTC installed. */
#ifndef PROGCACHE_TESTS_KEY_FIXTURE_H
#define PROGCACHE_TESTS_KEY_FIXTURE_H

#include "progcache/key.h"

static const char *const fixture_key_arch[] = {"-arch=sm_90"};

static inline progcache_key_nvrtc_options fixture_key_options(const char *source)
{
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    o.source = source;
    o.options = fixture_key_arch;
    o.num_options = 1;
    o.nvrtc_major = 13;
    o.nvrtc_minor = 0;
    return o;
}

#endif
