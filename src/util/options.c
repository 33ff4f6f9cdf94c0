/* Versioned structs: one check and one copy for all of them. */
#include "options.h"

#include <ctype.h>
#include <string.h>

#include "error.h"

int progcache__version_check(const void *s, unsigned int current, const char *fn,
                            const char *what, const char *name)
{
    return progcache__version_check_how(s, current, fn, what, name, NULL);
}

int progcache__version_check_how(const void *s, unsigned int current, const char *fn,
                                 const char *what, const char *name, const char *how)
{
    unsigned int version = PROGCACHE__VERSION_OF(s);
    if (version == 0) {
        char macro[64];
        size_t i = 0;
        for (; name[i] && i + 1 < sizeof macro; i++)
            macro[i] = (char)toupper((unsigned char)name[i]);
        macro[i] = '\0';
        if (how)
            return progcache__error(PROGCACHE_EINVAL,
                                    "%s: %s->version is 0 (version 0: the %s struct was never "
                                    "initialised); %s",
                                    fn, what, name, how);
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: %s->version is 0 (version 0: the %s struct was never "
                                "initialised); start from %s_INIT or %s_init()",
                                fn, what, name, macro, name);
    }
    if (version > current)
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: %s->version is %u, newer than this library knows (%u, "
                                "progcache %s): the program was built against newer progcache "
                                "headers; rebuild it against the installed ones",
                                fn, what, version, current, PROGCACHE_VERSION_STRING);
    return PROGCACHE_OK;
}

int progcache__options_load(void *dst, const void *src, const size_t *sizes,
                            unsigned int current, const char *fn, const char *name)
{
    if (!src)
        return PROGCACHE_OK;
    int rc = progcache__version_check(src, current, fn, "opts", name);
    if (rc)
        return rc;
    memcpy(dst, src, sizes[PROGCACHE__VERSION_OF(src)]);
    return PROGCACHE_OK;
}

void progcache__struct_init(void *p, size_t size, unsigned int version)
{
    if (!p)
        return;
    memset(p, 0, size);
    *(unsigned int *)p = version;
}
