/* Issue 32: a shard another program wrote into is measured again in
 * O(what changed), through its record in progcache/shards/ (FORMAT.md,
 * "Shard records"). Asserted as names stat'ed (the store's test hook
 * progcache__file_shard_names_statted), never as time, in a shard of
 * 4,000 entries:
 *
 * - the put after one cuda.core-shaped write into it stats a handful of
 *   names, not 4,000, and counts that entry's bytes;
 * - an existing name replaced (os.replace with other bytes) and one
 *   removed leave the counters equal to a walk of the directory;
 * - a damaged record is not used (every name stat'ed, the counters still
 *   right) and is replaced by a good one;
 * - on a network file system no record is used or written;
 * - a record of another user (root only: chown) is refused, counted in
 *   files_refused, neither used nor replaced;
 * - a name back at its old inode number with other bytes (ext4 gives a
 *   freed number out again) is counted right within a few dozen
 *   measurements (the re-checked sixteenth);
 * - a read-only open gives no record a mode; a FIFO at a record's place is
 *   left alone and counted. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "scale_fixture.h"
#include "store_file_fixture.h"
#include "store/file/file_store.h"

#define SHARD 0x5a
#define ENTRIES 4000
/* The foreign write, the put's own shard, a settling shard or two, and the
 * sixteenth of the known names stat'ed again (twice that: it is drawn). */
#define FEW (8 + 2 * ENTRIES / 16)

/* A put of a key that does not go to SHARD (so that the shard changes only
 * by the other program's writes). */
static void put_elsewhere(progcache_store *s, int *i)
{
    char k[32], rel[FILE_REL_PATH_MAX];
    int shard;
    do {
        snprintf(k, sizeof k, "key-%d", ++*i);
        CHECK_OK(progcache__file_rel_path(rel, &shard, k, strlen(k)));
    } while (shard == SHARD);
    CHECK_OK(progcache_store_put(s, k, strlen(k), "value", 5));
}

/* What the next puts stat after the other program's writes: settled
 * first (the catch-up trusts change times 20 ms old), then puts until the
 * catch-up they spread in slices (file_catch_up.c) has ended: ~16 for a
 * shard of 4,000. */
static uint64_t statted_by_put(progcache_store *s, int *key)
{
    usleep(100 * 1000);
    uint64_t before = progcache__file_shard_names_statted();
    file_store *fs = (file_store *)progcache_store_as_file(s);
    int puts = 0;
    do
        put_elsewhere(s, key);
    while (fs->state->round_active && ++puts < 1000);
    CHECK(!fs->state->round_active);
    return progcache__file_shard_names_statted() - before;
}

static void read_file(const char *path, char *buf, size_t len, ssize_t *got)
{
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    *got = read(fd, buf, len);
    close(fd);
}

/* ext4 hands a freed inode number out again at once: a name replaced
 * twice between two measurements is back at its old inode with other
 * bytes, which its record's row does not know. The sixteenth of known
 * names stat'ed again at each measurement finds it: within a few dozen
 * measurements the counters equal the directory again. */
static void replaced_twice(progcache_store *w, const char *dir, int entry, const char *name,
                           int *key)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/entries/%.2s/%.62s", dir, name, name + 2);
    CHECK(stat(path, &st) == 0);
    ino_t first = st.st_ino;
    /* Replaced until the number comes back (the freed numbers of other
     * names may come first), with other bytes each time. */
    int back = 0;
    for (int i = 0; i < 64 && !back; i++) {
        scale_foreign_write(dir, (uint64_t)entry, 30000 + (size_t)i, SHARD, NULL);
        CHECK(stat(path, &st) == 0 && st.st_size == 30000 + i);
        back = st.st_ino == first;
    }
    if (!back) {
        /* Where the number did not come back (this file system's
         * allocator), the same as seen by the record: the entry grown in
         * place, its inode number kept. */
        first = st.st_ino;
        usleep(100 * 1000);
        (void)statted_by_put(w, key); /* the record knows the new inode */
        int fd = open(path, O_WRONLY | O_APPEND);
        CHECK(fd >= 0);
        static const char more[20000];
        CHECK(write(fd, more, sizeof more) == (ssize_t)sizeof more);
        close(fd);
        CHECK(stat(path, &st) == 0 && st.st_ino == first);
    }
    int rounds = 0;
    uint64_t bytes = 0, truth = 1, count;
    for (; rounds < 400 && bytes != truth; rounds++) {
        scale_foreign_write(dir, 100000 + (uint64_t)*key, 10, SHARD, NULL);
        (void)statted_by_put(w, key);
        truth = scale_measure(dir, &count);
        CHECK_OK(progcache_store_total_size(&bytes, w));
    }
    printf("a name replaced at its old inode number (%s): counters right after %d "
           "measurement(s)\n", back ? "it came back" : "grown in place", rounds);
    CHECK(bytes == truth);
    scale_check_counters(w, dir, 0);
}

/* A read-only open (progcache stats) that measures a shard gives its
 * record no mode: a private cache's 0600 record left 0640 stays so. */
static void readonly_keeps_mode(const char *dir, const char *record, int *key,
                                progcache_store *w)
{
    CHECK(chmod(record, 0640) == 0);
    scale_foreign_write(dir, 200000 + (uint64_t)*key, 10, SHARD, NULL);
    usleep(100 * 1000);
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.flags = PROGCACHE_FILE_READONLY;
    progcache_store *r = NULL;
    CHECK_OK(progcache_store_file_new(&r, dir, &opts));
    uint64_t bytes = 0;
    CHECK_OK(progcache_store_total_size(&bytes, r));
    progcache_store_free(r);
    struct stat st;
    CHECK(stat(record, &st) == 0);
    printf("a read-only open measured the shard: the record's mode %o\n",
           (unsigned)(st.st_mode & 0777));
    CHECK((st.st_mode & 0777) == 0640);
    CHECK(chmod(record, 0600) == 0);
    (void)statted_by_put(w, key);
}

int main(void)
{
    char *dir = test_mkdtemp("shard-record");
    static char names[ENTRIES][65];
    for (int i = 0; i < ENTRIES; i++)
        scale_foreign_write(dir, (uint64_t)i, 100 + (size_t)(i % 97), SHARD, names[i]);
    usleep(100 * 1000);
    progcache_store *w = open_store(dir, 1ull << 40);
    int key = 0;
    /* The first count seeds the counters: every name stat'ed once, and
     * the shard's record written. */
    uint64_t before = progcache__file_shard_names_statted();
    scale_check_counters(w, dir, 0);
    printf("seeding: %llu names stat'ed\n",
           (unsigned long long)(progcache__file_shard_names_statted() - before));
    char record[4096];
    snprintf(record, sizeof record, "%s/progcache/shards/%02x", dir, SHARD);
    struct stat st;
    CHECK(stat(record, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077) == 0);
    put_elsewhere(w, &key);
    usleep(100 * 1000);
    put_elsewhere(w, &key); /* the shards of the first put settled */

    /* One foreign write into the shard of 4,000: a few names stat'ed. */
    uint64_t other = scale_stats(w).other_writer_bytes;
    scale_foreign_write(dir, ENTRIES + 1, 777, SHARD, NULL);
    uint64_t statted = statted_by_put(w, &key);
    printf("put after one foreign write into a shard of %d: %llu names stat'ed\n", ENTRIES,
           (unsigned long long)statted);
    CHECK(statted >= 1 && statted <= FEW);
    CHECK(scale_stats(w).other_writer_bytes - other == 777);
    scale_check_counters(w, dir, 0);

    /* Another program replaces an entry (os.replace: a new file, a new
     * inode) with other bytes and removes one: counted exactly, still by
     * a few stats. */
    char again[65];
    scale_foreign_write(dir, 5, 5000, SHARD, again);
    CHECK(strcmp(again, names[5]) == 0); /* the name of entry 5 */
    char path[4096];
    snprintf(path, sizeof path, "%s/entries/%.2s/%.62s", dir, names[7], names[7] + 2);
    CHECK(unlink(path) == 0);
    statted = statted_by_put(w, &key);
    printf("put after a replace and a removal: %llu names stat'ed\n",
           (unsigned long long)statted);
    CHECK(statted >= 1 && statted <= FEW);
    scale_check_counters(w, dir, 0);
    replaced_twice(w, dir, 9, names[9], &key);
    readonly_keeps_mode(dir, record, &key, w);

    /* A damaged record (a byte of a row changed): not used, every name
     * stat'ed, the counters right; the next catch-up is cheap again. */
    int fd = open(record, O_RDWR);
    CHECK(fd >= 0 && pwrite(fd, "\x55", 1, 32 + 24 * 100 + 16) == 1);
    close(fd);
    scale_foreign_write(dir, ENTRIES + 2, 321, SHARD, NULL);
    statted = statted_by_put(w, &key);
    printf("put after a foreign write, the record damaged: %llu names stat'ed\n",
           (unsigned long long)statted);
    CHECK(statted >= ENTRIES);
    scale_check_counters(w, dir, 0);
    scale_foreign_write(dir, ENTRIES + 3, 123, SHARD, NULL);
    statted = statted_by_put(w, &key);
    printf("and after the next foreign write: %llu names stat'ed\n",
           (unsigned long long)statted);
    CHECK(statted >= 1 && statted <= FEW);
    scale_check_counters(w, dir, 0);

    /* On a network or FUSE file system (what open found: statfs) the
     * listing's inode numbers are not trusted: every name stat'ed, the
     * record neither read nor written. */
    struct stat was_st;
    CHECK(stat(record, &was_st) == 0);
    progcache_store_as_file(w)->network_fs = 1;
    scale_foreign_write(dir, ENTRIES + 5, 99, SHARD, NULL);
    statted = statted_by_put(w, &key);
    printf("put after a foreign write on a network file system: %llu names stat'ed\n",
           (unsigned long long)statted);
    CHECK(statted >= ENTRIES);
    scale_check_counters(w, dir, 0);
    CHECK(stat(record, &st) == 0 && st.st_ino == was_st.st_ino &&
          st.st_mtim.tv_nsec == was_st.st_mtim.tv_nsec);
    progcache_store_as_file(w)->network_fs = 0;

    /* Another user's record (root can make one): refused and counted,
     * neither used nor replaced. */
    if (geteuid() == 0) {
        CHECK(chown(record, 65534, 65534) == 0);
        char was[64];
        ssize_t was_len, now_len;
        read_file(record, was, sizeof was, &was_len);
        uint64_t refused = scale_stats(w).files_refused;
        scale_foreign_write(dir, ENTRIES + 4, 222, SHARD, NULL);
        statted = statted_by_put(w, &key);
        printf("put after a foreign write, another user's record: %llu names stat'ed\n",
               (unsigned long long)statted);
        CHECK(statted >= ENTRIES);
        CHECK(scale_stats(w).files_refused > refused);
        scale_check_counters(w, dir, 0);
        char now[64];
        read_file(record, now, sizeof now, &now_len);
        CHECK(stat(record, &st) == 0 && st.st_uid == 65534);
        CHECK(was_len == now_len && !memcmp(was, now, (size_t)was_len));
    } else {
        puts("(not root: the case of another user's record is skipped)");
    }
    /* A FIFO where the record goes: never opened to block, left alone,
     * counted in files_refused; the shard measured name by name. */
    CHECK(unlink(record) == 0 && mkfifo(record, 0600) == 0);
    uint64_t refused_before = scale_stats(w).files_refused;
    scale_foreign_write(dir, ENTRIES + 6, 55, SHARD, NULL);
    statted = statted_by_put(w, &key);
    CHECK(statted >= ENTRIES && scale_stats(w).files_refused > refused_before);
    scale_check_counters(w, dir, 0);
    CHECK(lstat(record, &st) == 0 && S_ISFIFO(st.st_mode));
    printf("a FIFO at the record's place: refused, counted, left alone\n");
    progcache_store_free(w);
    test_rmdtemp(dir);
    puts("test_shard_record: ok");
    return 0;
}
