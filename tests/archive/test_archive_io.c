/* Where an archive goes to and comes from (src/archive/archive.c,
 * archive_import.c): export never replaces what is not a regular file
 * (character devices and FIFOs are written in place, directories, block
 * devices, sockets and dangling links refused); archives stream through
 * file descriptors both ways (pipes, FIFOs, devices); no SIGPIPE; and
 * import reads nothing without a bound (max_artifact_size, pax caps),
 * leaving nothing behind for a stream's copy. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "archive/archive.h"
#include "tar_fixture.h"

static progcache_store *open_store(const char *dir, uint64_t max_artifact_size)
{
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    o.max_artifact_size = max_artifact_size;
    progcache_store *fs = NULL;
    CHECK_OK(progcache_store_file_new(&fs, dir, &o));
    return fs;
}

/* n PTX entries of about size bytes each. */
static void fill(const char *dir, int n, size_t size)
{
    progcache_store *fs = open_store(dir, 0);
    char *text = malloc(size + 64);
    CHECK(text != NULL);
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "key-%d", i);
        int len = snprintf(text, size + 64, "//%d\n.version 8.0\n.target sm_90\n", i);
        while ((size_t)len < size)
            text[len++] = '/';
        CHECK_OK(progcache_store_put(fs, key, strlen(key), text, (size_t)len));
    }
    free(text);
    progcache_store_free(fs);
}

static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    CHECK(p != NULL);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static mode_t type_of(const char *path)
{
    struct stat st;
    CHECK(lstat(path, &st) == 0);
    return st.st_mode & S_IFMT;
}

static void expect_message(const char *fragment)
{
    if (!strstr(progcache_error_last(), fragment)) {
        fprintf(stderr, "message: %s\n(expected to mention \"%s\")\n", progcache_error_last(),
                fragment);
        CHECK(!"the message names the cause");
    }
}

/* The reference bytes: the archive export writes to a regular file. */
static char *reference_archive(progcache_store *fs, const char *work, size_t *len)
{
    char *path = path_in(work, "reference.tar");
    CHECK_OK(progcache_file_export(NULL, progcache_store_as_file(fs), path, NULL));
    char *bytes = test_read_file(path, len);
    CHECK(bytes != NULL && *len % 10240 == 0);
    unlink(path);
    free(path);
    return bytes;
}

/* A work folder holding a file-store cache of three small entries, and
 * that cache's archive as export writes it to a regular file: the bytes
 * every other kind of target must get. */
typedef struct arc_work {
    char *work, *cache;
    progcache_store *fs;
    char *ref;
    size_t ref_len;
} arc_work;

static arc_work arc_start(const char *tag)
{
    arc_work w;
    w.work = test_mkdtemp(tag);
    w.cache = path_in(w.work, "cache");
    fill(w.cache, 3, 100);
    w.fs = open_store(w.cache, 0);
    w.ref = reference_archive(w.fs, w.work, &w.ref_len);
    return w;
}

static void arc_end(arc_work *w)
{
    progcache_store_free(w->fs);
    free(w->ref);
    free(w->cache);
    test_rmdtemp(w->work);
}

static void test_devices(void)
{
    char *work = test_mkdtemp("arcdev"), *cache = path_in(work, "cache");
    fill(cache, 3, 100);
    progcache_store *fs = open_store(cache, 0);
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;

    /* Device nodes of our own, so that a regression cannot damage the
     * machine's /dev/full and /dev/null (mknod needs root: skipped without). */
    char *full = path_in(work, "full"), *null = path_in(work, "null");
    if (mknod(full, S_IFCHR | 0666, makedev(1, 7)) == 0 &&
        mknod(null, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        CHECK_RC(PROGCACHE_EIO, progcache_file_export(&res, progcache_store_as_file(fs), full, NULL));
        expect_message(strerror(ENOSPC));
        expect_message(full);
        CHECK(type_of(full) == S_IFCHR);
        CHECK_OK(progcache_file_export(&res, progcache_store_as_file(fs), null, NULL));
        CHECK(res.entries == 3);
        CHECK(type_of(null) == S_IFCHR);
        char *blk = path_in(work, "blk");
        if (mknod(blk, S_IFBLK | 0600, makedev(7, 250)) == 0) {
            CHECK_RC(PROGCACHE_EINVAL, progcache_file_export(&res, progcache_store_as_file(fs), blk, NULL));
            expect_message("block device");
            CHECK(type_of(blk) == S_IFBLK);
        }
        free(blk);
    } else {
        printf("test_archive_io: no mknod here (%s); device nodes checked through links only\n",
               strerror(errno));
    }
    /* A symbolic link is followed: the device gets the bytes, the link
     * stays a link. */
    char *to_full = path_in(work, "to-full"), *to_null = path_in(work, "to-null");
    CHECK(symlink("/dev/full", to_full) == 0 && symlink("/dev/null", to_null) == 0);
    CHECK_RC(PROGCACHE_EIO, progcache_file_export(&res, progcache_store_as_file(fs), to_full, NULL));
    expect_message(strerror(ENOSPC));
    CHECK(type_of(to_full) == S_IFLNK && type_of("/dev/full") == S_IFCHR);
    CHECK_OK(progcache_file_export(&res, progcache_store_as_file(fs), to_null, NULL));
    CHECK(type_of(to_null) == S_IFLNK && type_of("/dev/null") == S_IFCHR);

    progcache_store_free(fs);
    unlink(to_full); /* links to the machine's devices go first, by name */
    unlink(to_null);
    free(full);
    free(null);
    free(to_full);
    free(to_null);
    free(cache);
    test_rmdtemp(work);
}

static void test_refused_and_links(void)
{
    arc_work w = arc_start("arcrefuse");

    char *dir = path_in(w.work, "dir");
    CHECK(mkdir(dir, 0755) == 0);
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_export(NULL, progcache_store_as_file(w.fs), dir, NULL));
    expect_message("a directory");
    CHECK(type_of(dir) == S_IFDIR);

    char *sock_path = path_in(w.work, "sock");
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    CHECK(sock >= 0 && strlen(sock_path) < sizeof addr.sun_path);
    strcpy(addr.sun_path, sock_path);
    CHECK(bind(sock, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_export(NULL, progcache_store_as_file(w.fs), sock_path, NULL));
    expect_message("a socket");
    CHECK(type_of(sock_path) == S_IFSOCK);
    close(sock);

    /* A link to nothing is refused: nothing is created where it points. */
    char *nowhere = path_in(w.work, "nowhere"), *dangling = path_in(w.work, "dangling");
    CHECK(symlink(nowhere, dangling) == 0);
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_export(NULL, progcache_store_as_file(w.fs), dangling, NULL));
    expect_message("symbolic link");
    CHECK(type_of(dangling) == S_IFLNK && access(nowhere, F_OK) != 0);

    /* A link to a regular file: the file is replaced, the link stays. */
    char *real = path_in(w.work, "real.tar"), *link = path_in(w.work, "link.tar");
    FILE *f = fopen(real, "w");
    CHECK(f && fputs("old contents", f) >= 0 && fclose(f) == 0);
    CHECK(symlink(real, link) == 0);
    CHECK_OK(progcache_file_export(NULL, progcache_store_as_file(w.fs), link, NULL));
    CHECK(type_of(link) == S_IFLNK && type_of(real) == S_IFREG);
    size_t len;
    char *got = test_read_file(real, &len);
    CHECK(got && len == w.ref_len && !memcmp(got, w.ref, len));
    free(got);

    free(dir);
    free(sock_path);
    free(nowhere);
    free(dangling);
    free(real);
    free(link);
    arc_end(&w);
}

static void test_fifos(void)
{
    arc_work w = arc_start("arcfifo");
    CHECK(w.ref_len < 65536); /* fits in a pipe's buffer: no second process needed */
    char *fifo = path_in(w.work, "fifo");
    CHECK(mkfifo(fifo, 0600) == 0);

    /* Nobody reading: refused at once, never waited on. */
    CHECK_RC(PROGCACHE_EIO, progcache_file_export(NULL, progcache_store_as_file(w.fs), fifo, NULL));
    expect_message("nothing is reading");
    CHECK(type_of(fifo) == S_IFIFO);

    /* A reader: the archive goes through, the FIFO stays a FIFO. */
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    CHECK(rd >= 0);
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_file_export(&res, progcache_store_as_file(w.fs), fifo, NULL));
    CHECK(res.entries == 3);
    char *got = malloc(w.ref_len + 1);
    CHECK(got && read(rd, got, w.ref_len + 1) == (ssize_t)w.ref_len && !memcmp(got, w.ref, w.ref_len));
    close(rd);
    CHECK(type_of(fifo) == S_IFIFO);

    /* Import from a FIFO (with its writer): read as a stream. */
    rd = open(fifo, O_RDONLY | O_NONBLOCK);
    int wr = open(fifo, O_WRONLY);
    CHECK(rd >= 0 && wr >= 0 && write(wr, w.ref, w.ref_len) == (ssize_t)w.ref_len);
    close(wr);
    char *into = path_in(w.work, "into");
    progcache_store *dst = open_store(into, 0);
    CHECK_OK(progcache_file_import_fd(&res, progcache_store_as_file(dst), rd, "the FIFO", NULL));
    CHECK(res.entries == 3);
    close(rd);
    progcache_store_free(dst);

    free(got);
    free(fifo);
    free(into);
    arc_end(&w);
}

/* Snapshot of a cache: names and bytes, to compare two caches. */
static int count_fn(void *ctx, const progcache_entry *e)
{
    uint64_t *sum = ctx;
    sum[0]++;
    for (uint64_t i = 0; i < e->size; i++)
        sum[1] = sum[1] * 31 + e->data[i] + (unsigned char)e->name[i % 64];
    return 0;
}

static void digest_of(uint64_t out[2], progcache_store *fs)
{
    out[0] = out[1] = 0;
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), PROGCACHE_ENTRIES_READ, count_fn, out));
}

static size_t count_names(const char *dir)
{
    size_t n = 0;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    CHECK(p && fscanf(p, "%zu", &n) == 1);
    pclose(p);
    return n;
}

static void test_pipes(void)
{
    char *work = test_mkdtemp("arcpipe"), *cache = path_in(work, "cache");
    /* About 1.5 MiB: far more than a pipe holds, so writer and reader
     * must run at once, and the import spools many chunks. */
    fill(cache, 24, 65536);
    progcache_store *fs = open_store(cache, 0);
    char *into = path_in(work, "into");
    progcache_store *dst = open_store(into, 0);
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    size_t names_after_first = 0;
    for (int round = 0; round < 2; round++) {
        int p[2];
        CHECK(pipe(p) == 0);
        pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {
            close(p[0]);
            _exit(progcache_file_export_fd(NULL, progcache_store_as_file(fs), p[1], "the pipe", NULL) ? 1 : 0);
        }
        close(p[1]);
        CHECK_OK(progcache_file_import_fd(&res, progcache_store_as_file(dst), p[0], "the pipe", NULL));
        close(p[0]);
        int status;
        CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && !WEXITSTATUS(status));
        CHECK(res.entries == 24);
        uint64_t a[2], b[2];
        digest_of(a, fs);
        digest_of(b, dst);
        CHECK(a[0] == 24 && a[0] == b[0] && a[1] == b[1]);
        /* The stream's copy was an unlinked file: a second import leaves
         * the directory's names as the first did. */
        if (round == 0)
            names_after_first = count_names(into);
        else
            CHECK(count_names(into) == names_after_first);
    }
    int p[2];

    /* A reader that has gone: EPIPE, an error, and no SIGPIPE. */
    CHECK(pipe(p) == 0);
    close(p[0]);
    CHECK_RC(PROGCACHE_EIO, progcache_file_export_fd(NULL, progcache_store_as_file(fs), p[1], "the pipe", NULL));
    expect_message(strerror(EPIPE));
    expect_message("the pipe");
    close(p[1]);
    sigset_t pending;
    CHECK(sigpending(&pending) == 0 && !sigismember(&pending, SIGPIPE));

    /* Devices as archives: /dev/zero is an empty archive (zero blocks end
     * it; the padding read is bounded), random bytes are refused. */
    CHECK_OK(progcache_file_import(&res, progcache_store_as_file(dst), "/dev/zero", NULL));
    CHECK(res.entries == 0);
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_file_import(&res, progcache_store_as_file(dst), "/dev/urandom", NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_import(&res, progcache_store_as_file(dst), work, NULL));
    expect_message("directory");

    progcache_store_free(fs);
    progcache_store_free(dst);
    free(into);
    free(cache);
    test_rmdtemp(work);
}

/* ---- bounds -------------------------------------------------------------------- */

static const char entry_name[] =
    "entries/ab/00112233445566778899aabbccddeeff00112233445566778899aabbccddee";

/* A header for name claiming size bytes of type type. */
static void header(unsigned char block[TAR_BLOCK], const char *name, char type, uint64_t size)
{
    CHECK(progcache__tar_make(block, name, 0, 0) == 0);
    char num[16];
    snprintf(num, sizeof num, "%011llo", (unsigned long long)size);
    memcpy(block + 124, num, 12);
    block[156] = (unsigned char)type;
    tar_fix_checksum(block);
}

/* Feed bytes to import_fd through a pipe, from a child that writes them
 * and then keeps the pipe open, so an import that read past what it was
 * given would wait for ever rather than pass. */
static int import_stream(progcache_store *dst, const void *bytes, size_t len)
{
    int p[2], done[2];
    CHECK(pipe(p) == 0 && pipe(done) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(p[0]);
        close(done[1]);
        ssize_t n = write(p[1], bytes, len);
        char c;
        ssize_t waited = read(done[0], &c, 1); /* until the parent is finished */
        _exit(n == (ssize_t)len && waited >= 0 ? 0 : 1);
    }
    close(p[1]);
    close(done[0]);
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    int rc = progcache_file_import_fd(&res, progcache_store_as_file(dst), p[0], "the stream", NULL);
    close(done[1]);
    close(p[0]);
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    return rc;
}

static void test_bounds(void)
{
    char *work = test_mkdtemp("arcbound"), *into = path_in(work, "into");
    progcache_store *dst = open_store(into, 1000); /* entries of at most 1000 bytes */
    unsigned char *archive = calloc(1, 4 * TAR_BLOCK + 2048);
    CHECK(archive != NULL);

    /* An entry over the bound: refused from its header, file or stream. */
    header(archive, entry_name, '0', 2000);
    memset(archive + TAR_BLOCK, '/', 2000);
    size_t len = TAR_BLOCK + 2048 + 2 * TAR_BLOCK;
    char *file = path_in(work, "big.tar");
    FILE *f = fopen(file, "wb");
    CHECK(f && fwrite(archive, 1, len, f) == len && fclose(f) == 0);
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_file_import(&res, progcache_store_as_file(dst), file, NULL));
    expect_message("maximum artifact size");
    expect_message("2000 bytes");
    CHECK_RC(PROGCACHE_ECORRUPT, import_stream(dst, archive, len));
    expect_message("maximum artifact size");

    /* A stream whose header claims 8 GiB, followed by nothing: refused
     * without waiting for (or allocating) the bytes. */
    header(archive, entry_name, '0', ((uint64_t)1 << 33) - 1);
    CHECK_RC(PROGCACHE_ECORRUPT, import_stream(dst, archive, TAR_BLOCK));
    expect_message("8589934591 bytes");
    /* So do pax headers, global or not, and directories claiming data. */
    header(archive, "PaxHeaders/g", 'g', (uint64_t)1 << 30);
    CHECK_RC(PROGCACHE_ECORRUPT, import_stream(dst, archive, TAR_BLOCK));
    header(archive, "PaxHeaders/x", 'x', (uint64_t)1 << 21);
    CHECK_RC(PROGCACHE_ECORRUPT, import_stream(dst, archive, TAR_BLOCK));
    header(archive, "entries/", '5', (uint64_t)1 << 40);
    CHECK_RC(PROGCACHE_ECORRUPT, import_stream(dst, archive, TAR_BLOCK));
    uint64_t count;
    CHECK_OK(progcache_store_count(&count, dst));
    CHECK(count == 0);

    /* At the bound: imported, through a stream too. */
    memset(archive, 0, 4 * TAR_BLOCK + 2048);
    header(archive, entry_name, '0', 1000);
    memset(archive + TAR_BLOCK, '/', 1000);
    CHECK_OK(import_stream(dst, archive, TAR_BLOCK + 1024 + 2 * TAR_BLOCK));
    CHECK_OK(progcache_store_count(&count, dst));
    CHECK(count == 1);

    progcache_store_free(dst);
    free(archive);
    free(file);
    free(into);
    test_rmdtemp(work);
}

int main(void)
{
    test_devices();
    test_refused_and_links();
    test_fifos();
    test_pipes();
    test_bounds();
    puts("test_archive_io: ok");
    return 0;
}
