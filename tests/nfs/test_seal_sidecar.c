/* The seal without extended attributes (docs/FORMAT.md, "The seal without
 * extended attributes"): on a directory whose file system has no user
 * xattrs, every entry is still sealed, in progcache/seals/, and a read
 * checks it. Run twice: "local" (a local directory under the noxattr
 * LD_PRELOAD shim) and "nfs" (the two sshfs mounts of tests/nfs/, where
 * one node writes and the other reads).
 *
 * Shown: the mechanism is "sidecar" and said once per process; the entry
 * file is byte for byte what was put and nothing else appears in entries/
 * or tmp/ (what cuda.core reads and counts); a flipped bit in a real CUBIN
 * is a miss that removes the entry, and a put heals it; verify reports it;
 * records are covered too; a seal copied from another entry does not
 * vouch; a put failing (or killed) between seal and entry never leaves a
 * seal that passes other bytes; an entry renamed or hard-linked to another
 * key's path is a miss there, while cuda.core's unsealed entries hit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_fixtures.h"
#include "fs.h"
#include "nfs_fixture.h"
#include "progcache/admin.h"
#include "progcache/file.h"
#include "progcache/stats.h"

static int warnings;

static void count_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level == PROGCACHE_LOG_WARN && strstr(msg, "no user extended attributes"))
        warnings++;
}

static progcache_file *open_dir(const char *dir)
{
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    o.log = count_log;
    progcache_file *f;
    CHECK_OK(progcache_file_open(&f, dir, &o));
    CHECK(!strcmp(progcache_file_seal_mechanism(f), "sidecar"));
    return f;
}

/* Path of the entry (under root) of key, and of its sidecar seal. */
static void paths_of(char *entry, char *seal, size_t len, const char *root, const char *key)
{
    fixture_entry_path(entry, len, root, (const unsigned char *)key);
    const char *rel = strstr(entry, "/entries/") + 9; /* "ab/cdef..." */
    snprintf(seal, len, "%s/progcache/seals/%s", root, rel);
}

static int get(progcache_file *f, const char *key, progcache_buf *out)
{
    return progcache_store_get(out, progcache_file_store(f), key, strlen(key));
}

/* Flip a bit of a file in place. Its mtime moves on by 2 s: the mounts
 * drop cached pages when mtime changed at open (auto_cache, as NFS does
 * with its change attribute), and sftp's mtime has 1 s steps. */
static void flip_byte(const char *path, size_t at)
{
    struct stat before;
    CHECK(stat(path, &before) == 0);
    size_t size;
    char *data = test_read_file(path, &size);
    CHECK(data && at < size);
    data[at] ^= 0x10;
    fixture_write_file(path, data, size);
    free(data);
    struct timespec t[2] = {before.st_atim, {before.st_mtim.tv_sec + 2, 0}};
    CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
}

/* The entry path of key, its shard made (as cuda.core's makedirs). */
static void entry_of(char *out, size_t len, const char *root, const char *key)
{
    fixture_entry_path(out, len, root, (const unsigned char *)key);
    char shard[1024];
    snprintf(shard, sizeof shard, "%.*s", (int)(strrchr(out, '/') - out), out);
    CHECK(mkdir(shard, 0700) == 0 || errno == EEXIST);
}

/* Issue 29, case 5: an entry renamed or hard-linked to another key's path
 * carries no seal of its own there. The xattr seal travels with the file
 * and names its key, so that is a miss (test_store_file_adversarial_seal);
 * a sidecar stays behind, so a sealed entry is marked instead: its write
 * bits cleared, which only its owner can undo and which moves with it. A
 * marked entry without a seal of its own is a miss; cuda.core's entries
 * (0600, never sealed) still hit. */
static void moved_entries(progcache_file *w, progcache_file *rd, const char *server,
                          const unsigned char *cubin, size_t cubin_size)
{
    const char *ka = "sidecar-moved-a-0123456789012345", *kb = "sidecar-moved-b-0123456789012345";
    const char *kc = "sidecar-linked-c-012345678901234", *kd = "sidecar-linked-d-012345678901234";
    const char *ke = "sidecar-cudacore-e-0123456789012";
    char a[1024], b[1024], c[1024], d[1024], e[1024];
    entry_of(a, sizeof a, server, ka);
    entry_of(b, sizeof b, server, kb);
    entry_of(c, sizeof c, server, kc);
    entry_of(d, sizeof d, server, kd);
    entry_of(e, sizeof e, server, ke);
    progcache_store *ws = progcache_file_store(w);
    progcache_buf got = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_put(ws, ka, strlen(ka), cubin, cubin_size));
    CHECK_OK(progcache_store_put(ws, kc, strlen(kc), cubin, cubin_size));
    struct stat st;
    CHECK(stat(c, &st) == 0);
    const mode_t mark = st.st_mode & 0222; /* checked last: the misses first */

    /* Renamed: b's path, where no seal is. */
    CHECK(rename(a, b) == 0);
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, kb, &got));
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, ka, &got));
    /* Renamed with another file of the owner's (an NVRTC record, 0600)
     * renamed onto its new seal's path: not a seal, so still a miss. */
    CHECK_OK(progcache_store_put(ws, ka, strlen(ka), cubin, cubin_size));
    char seal_b[1024], shard[1024];
    paths_of(b, seal_b, sizeof seal_b, server, kb);
    snprintf(shard, sizeof shard, "%.*s", (int)(strrchr(seal_b, '/') - seal_b), seal_b);
    CHECK(mkdir(shard, 0700) == 0 || errno == EEXIST);
    const char *text = "13.0 109338064 1792100186.000000000 /usr/local/cuda/lib64/libnvrtc.so\n";
    fixture_replace_file(seal_b, text, strlen(text));
    CHECK(chmod(seal_b, 0600) == 0);
    CHECK(rename(a, b) == 0);
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, kb, &got));
    /* Hard-linked: d's path; c itself, with its own seal, still hits. */
    CHECK(link(c, d) == 0);
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, kd, &got));
    CHECK_OK(get(rd, kc, &got));
    CHECK(got.size == cubin_size && !memcmp(got.data, cubin, cubin_size));

    /* cuda.core's entry: written beside, renamed in, 0600, no seal. */
    fixture_replace_file(e, cubin, cubin_size);
    CHECK(chmod(e, 0600) == 0);
    CHECK_OK(get(rd, ke, &got));
    CHECK(got.size == cubin_size && !memcmp(got.data, cubin, cubin_size));
    progcache_buf_free(&got);
    CHECK(mark == 0); /* a sealed entry has no write bit */
}

int main(int argc, char **argv)
{
    const int nfs = argc > 1 && !strcmp(argv[1], "nfs");
    test_nfs fx = {0};
    char *local = NULL;
    const char *writer, *reader, *server;
    if (nfs) {
        test_nfs_start(&fx);
        writer = fx.node[0];
        reader = fx.node[1];
        server = fx.export_;
    } else {
        local = test_mkdtemp("sidecar");
        writer = reader = server = local;
    }

    progcache_file *w = open_dir(writer), *rd = open_dir(reader);
    CHECK(warnings == 1); /* once per process, not per directory */
    /* A real CUBIN, compiled once into a scratch cache. */
    size_t cubin_size;
    unsigned char *cubin = fixture_scale_cubin(&cubin_size);

    const char *key = "sidecar-key-01234567890123456789"; /* 32 bytes, as a key */
    CHECK_OK(progcache_store_put(progcache_file_store(w), key, strlen(key), cubin, cubin_size));
    char entry[1024], seal[1024];
    paths_of(entry, seal, sizeof entry, server, key);

    /* The entry file: exactly the bytes; the seal beside, not in entries/
     * or tmp/ (the only folders cuda.core reads and counts). */
    size_t size;
    char *disk = test_read_file(entry, &size);
    CHECK(disk && size == cubin_size && !memcmp(disk, cubin, size));
    free(disk);
    struct stat st;
    CHECK(stat(seal, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 42);
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/entries", server);
    CHECK(test_count_names(sub, 1) == 1);
    snprintf(sub, sizeof sub, "%s/tmp", server);
    CHECK(test_count_names(sub, 1) == 0);

    progcache_buf b = PROGCACHE_BUF_INIT;
    CHECK_OK(get(rd, key, &b));
    CHECK(b.size == cubin_size && !memcmp(b.data, cubin, cubin_size));

    /* A flipped bit in the code: the CUBIN's structure still passes, the
     * seal does not. Verify says so; the read is a miss and removes it. */
    flip_byte(entry, cubin_size - 64);
    progcache_verify_result vr = PROGCACHE_VERIFY_RESULT_INIT;
    CHECK_OK(progcache_file_verify(&vr, rd, NULL));
    CHECK(vr.checked == 1 && vr.bad == 1);
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, key, &b));
    CHECK(stat(entry, &st) != 0);
    CHECK_OK(progcache_store_put(progcache_file_store(w), key, strlen(key), cubin, cubin_size));
    CHECK_OK(get(rd, key, &b)); /* healed */
    CHECK(b.size == cubin_size && !memcmp(b.data, cubin, cubin_size));
    vr = (progcache_verify_result)PROGCACHE_VERIFY_RESULT_INIT;
    CHECK_OK(progcache_file_verify(&vr, rd, NULL));
    CHECK(vr.checked == 1 && vr.bad == 0);

    /* Any bytes, not only artifacts: unsealed, these would pass. */
    const char *k2 = "sidecar-bytes-012345678901234567";
    CHECK_OK(progcache_store_put(progcache_file_store(w), k2, strlen(k2), "0123456789", 10));
    char e2[1024], s2[1024];
    paths_of(e2, s2, sizeof e2, server, k2);
    flip_byte(e2, 3);
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, k2, &b));

    /* Records are in the seal file and covered by it. */
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    CHECK_OK(progcache_entry_meta_add(&meta, 0x7e57, "names", 5));
    CHECK_OK(progcache_store_put_meta(progcache_file_store(w), k2, strlen(k2), "abc", 3, &meta));
    progcache_entry_meta got = PROGCACHE_ENTRY_META_INIT;
    CHECK_OK(progcache_store_get_meta(&b, &got, progcache_file_store(rd), k2, strlen(k2)));
    const unsigned char *rec;
    size_t rec_len;
    CHECK_OK(progcache_entry_meta_find(&rec, &rec_len, &got, 0x7e57));
    CHECK(rec_len == 5 && !memcmp(rec, "names", 5) && got.seal != PROGCACHE_SEAL_NONE);
    flip_byte(s2, 50); /* a bit of the records */
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, k2, &b));

    /* Another entry's seal copied over this one's vouches for nothing. */
    CHECK_OK(progcache_store_put(progcache_file_store(w), k2, strlen(k2), "abc", 3));
    size_t seal_size;
    char *other = test_read_file(seal, &seal_size);
    CHECK(other);
    fixture_replace_file(s2, other, seal_size);
    free(other);
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, k2, &b));

    /* A put that fails between its seal and its entry (the rename of the
     * entry fails): the old bytes are there with a seal for the new ones,
     * a miss, never a hit of either under the wrong seal. */
    CHECK_OK(progcache_store_put(progcache_file_store(w), k2, strlen(k2), "old", 3));
    progcache__fs_fail(PROGCACHE_FS_RENAME, 2, EIO);
    CHECK(progcache_store_put(progcache_file_store(w), k2, strlen(k2), "new!", 4) != PROGCACHE_OK);
    progcache__fs_fail_reset();
    CHECK_RC(PROGCACHE_ENOTFOUND, get(rd, k2, &b));

    /* Killed at any point: a writer alternating two values is SIGKILLed
     * at once, 10 times; what a read finds is one of them, whole, or a
     * miss. */
    for (int round = 0; round < 10; round++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            for (unsigned long i = 0;; i++)
                (void)progcache_store_put(progcache_file_store(w), k2, strlen(k2),
                                          i % 2 ? "second value" : "first", i % 2 ? 12 : 5);
        }
        usleep(20000 + 7000 * (unsigned)round);
        kill(pid, SIGKILL);
        CHECK(waitpid(pid, NULL, 0) == pid);
        int rc = get(rd, k2, &b);
        CHECK(rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND);
        if (rc == PROGCACHE_OK)
            CHECK((b.size == 5 && !memcmp(b.data, "first", 5)) ||
                  (b.size == 12 && !memcmp(b.data, "second value", 12)));
    }

    moved_entries(w, rd, server, cubin, cubin_size);

    /* Counted, and shown by stats. Each node's own counts: the counters
     * are a shared mapping, and a mapping is shared by the processes of
     * one client only (docs/SHARED.md). */
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&s, progcache_file_store(w)));
    CHECK(s.sidecar_seals >= 6);
    s = (progcache_stats)PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&s, progcache_file_store(rd)));
    CHECK(s.corrupt_removed >= 4);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "\"$PROGCACHE_BIN\" stats --json -d '%s' | grep -q '\"seal\": \"sidecar\"'", reader);
    CHECK(system(cmd) == 0);

    progcache_entry_meta_release(&meta);
    progcache_entry_meta_release(&got);
    progcache_buf_free(&b);
    progcache_file_close(w);
    progcache_file_close(rd);
    free(cubin);
    return test_nfs_end(&fx, nfs, local, "test_seal_sidecar");
}
