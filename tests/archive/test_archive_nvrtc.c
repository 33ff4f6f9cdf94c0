/* The NVRTC records in archives (docs/FORMAT.md, "NVRTC records" and
 * "Archives"): export writes this user's records as the member
 * progcache/nvrtc, import merges them into the importer's, a member that
 * is not whole text lines, or a second one, refuses the archive before
 * anything is written; the records file itself is trusted only when it is
 * this user's and not writable by all. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "progcache/admin.h"
#include "archive/archive.h"
#include "dir/dir.h"

static const char line1[] = "13.0 109338064 1792100186.000000000 /farm/cuda/lib/libnvrtc.so.13\n";
static const char line2[] = "12.9 99000000 1700000000.000000001 /farm/cuda-12/lib/libnvrtc.so.12\n";

static progcache_file *open_dir(const char *dir)
{
    progcache_file *f = NULL;
    CHECK_OK(progcache_file_open(&f, dir, NULL));
    return f;
}

static char *records_of(progcache_file *f)
{
    progcache_buf b = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache__file_nvrtc_read(f, &b));
    char *s = strndup(b.data ? (const char *)b.data : "", b.size);
    progcache_buf_free(&b);
    return s;
}

/* A ustar archive of the members (name, bytes), in order, to path. */
static void write_tar(const char *path, const char *const *names, const char *const *bodies,
                      size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    unsigned char block[TAR_BLOCK];
    static const unsigned char zeros[20 * TAR_BLOCK];
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(bodies[i]);
        CHECK(progcache__tar_make(block, names[i], len, 1) == 0);
        CHECK(write(fd, block, sizeof block) == (ssize_t)sizeof block);
        CHECK(write(fd, bodies[i], len) == (ssize_t)len);
        size_t pad = (TAR_BLOCK - len % TAR_BLOCK) % TAR_BLOCK;
        CHECK(write(fd, zeros, pad) == (ssize_t)pad);
    }
    CHECK(write(fd, zeros, sizeof zeros) == (ssize_t)sizeof zeros);
    CHECK(close(fd) == 0);
}

int main(void)
{
    char *farm = test_mkdtemp("nvrtcfarm"), *node = test_mkdtemp("nvrtcnode");
    char *tmp = test_mkdtemp("nvrtctar");
    char tar[4200], path[4200];
    snprintf(tar, sizeof tar, "%s/bundle.tar", tmp);

    /* Records merge newest first, each identity once. */
    progcache_file *f = open_dir(farm);
    CHECK_OK(progcache__file_nvrtc_add(f, line2, strlen(line2), 16));
    CHECK_OK(progcache__file_nvrtc_add(f, line1, strlen(line1), 16));
    CHECK_OK(progcache__file_nvrtc_add(f, line1, strlen(line1), 16));
    char *r = records_of(f);
    char want[512];
    snprintf(want, sizeof want, "%s%s", line1, line2);
    CHECK(!strcmp(r, want));
    free(r);
    CHECK_RC(PROGCACHE_EINVAL, progcache__file_nvrtc_add(f, "13.0 no newline", 15, 16));
    CHECK_OK(progcache_store_put(progcache_file_store(f), "k", 1, ".version 8.0\n", 13));

    /* Export carries them; import merges them into the node's. */
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_file_export(&res, f, tar, NULL));
    CHECK(res.entries == 1);
    progcache_file *g = open_dir(node);
    CHECK_OK(progcache_file_import(&res, g, tar, NULL));
    CHECK(res.entries == 1);
    r = records_of(g);
    CHECK(!strcmp(r, want));
    free(r);

    /* The records file of this user only, not writable by all. */
    snprintf(path, sizeof path, "%s/progcache/nvrtc-%u", node, (unsigned)geteuid());
    CHECK(chmod(path, 0666) == 0);
    r = records_of(g);
    CHECK(!strcmp(r, ""));
    free(r);
    CHECK(chmod(path, 0644) == 0);
    progcache_file_close(g);

    /* A member that is not text lines, or two of them: refused, nothing
     * written (the entry after it is not imported either). */
    char *fresh = test_mkdtemp("nvrtcfresh");
    const char *entry = "entries/ab/" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd";
    const char *names[] = {"progcache/nvrtc", entry};
    const char *bad[] = {"13.0 cut short", ".version 8.0\n"};
    write_tar(tar, names, bad, 2);
    g = open_dir(fresh);
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_file_import(&res, g, tar, NULL));
    CHECK(strstr(progcache_error_last(), "progcache/nvrtc"));
    const char *names2[] = {"progcache/nvrtc", "./progcache/nvrtc", entry};
    const char *twice[] = {line1, line2, ".version 8.0\n"};
    write_tar(tar, names2, twice, 3);
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_file_import(&res, g, tar, NULL));
    r = records_of(g);
    CHECK(!strcmp(r, ""));
    free(r);
    /* A good one by hand, as tar would make it. */
    const char *good[] = {line2, ".version 8.0\n"};
    write_tar(tar, names, good, 2);
    CHECK_OK(progcache_file_import(&res, g, tar, NULL));
    r = records_of(g);
    CHECK(!strcmp(r, line2));
    free(r);
    progcache_file_close(g);
    progcache_file_close(f);

    test_rmtree(farm);
    test_rmtree(node);
    test_rmtree(fresh);
    test_rmtree(tmp);
    free(farm);
    free(node);
    free(fresh);
    free(tmp);
    return 0;
}
