/* The helpers the store_file tests share: a
 * store without fsync, paths in the cache, a count of a directory's files. */
#include "store_file_fixture.h"

#include <dirent.h>
#include <sys/stat.h>

progcache_store *open_store(const char *dir, uint64_t max_size)
{
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.max_size = max_size;
    opts.flags = PROGCACHE_FILE_NO_FSYNC;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_file_new(&s, dir, &opts));
    return s;
}

int path_exists(const char *dir, const char *rel)
{
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return lstat(p, &st) == 0;
}

void entry_path(char *out, size_t n, const char *dir, const void *key, size_t len)
{
    char rel[FILE_REL_PATH_MAX];
    CHECK_OK(progcache__file_rel_path(rel, NULL, key, len));
    snprintf(out, n, "%s/%s", dir, rel);
}
