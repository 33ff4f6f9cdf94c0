/* The names the file store may create, and so the only names it may ever
 * remove (docs/RELIABILITY.md, "What the cache may delete"). A cache can
 * be pointed at any directory, by mistake or by design; whatever else is
 * there is somebody else's and is left alone. */
#include <string.h>

#include "sha256.h"
#include "store/file/file_store.h"

/* prefix followed by exactly 16 lowercase hex digits: what
 * progcache__fs_create_temp and progcache__fs_rename_aside make. */
static int is_ours(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(name, prefix, n) == 0 && strlen(name + n) == 16 &&
           progcache__is_hex(name + n, 16);
}

int progcache__file_is_entry_name(const char *name)
{
    return strlen(name) == 62 && progcache__is_hex(name, 62);
}

int progcache__file_is_shard_name(const char *name)
{
    return strlen(name) == 2 && progcache__is_hex(name, 2);
}

int progcache__file_is_own_tmp_name(const char *name)
{
    return is_ours(name, "entry-") || is_ours(name, "evict-");
}

int progcache__file_is_tmp_name(const char *name)
{
    if (progcache__file_is_own_tmp_name(name))
        return 1;
    /* cuda.core: tempfile.mkstemp(prefix="entry-", dir=tmp/), whose random
     * part is 8 characters of Python's "abcdefghijklmnopqrstuvwxyz0123456789_". */
    if (strncmp(name, "entry-", 6) != 0 || strlen(name + 6) != 8)
        return 0;
    for (const char *p = name + 6; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

int progcache__file_is_state_tmp_name(const char *name)
{
    return is_ours(name, "state-") || is_ours(name, "stats-") || is_ours(name, "config-") ||
           is_ours(name, "nvrtc-tmp-");
}

int progcache__file_is_shard_record_tmp_name(const char *name)
{
    return is_ours(name, "shard-");
}

int progcache__file_is_layout_name(const char *name)
{
    return !strcmp(name, "entries") || !strcmp(name, "tmp") || !strcmp(name, FILE_STATE_DIR);
}
