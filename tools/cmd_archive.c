/* progcache export and progcache import: a cache directory to and from a
 * tar archive. One file: the two are mirror images of each other. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

static const char export_usage[] =
    "usage: progcache export [-d DIR | --remote URL] [--max-artifact-size SIZE]\n"
    "                        [--sign KEY.pem] ARCHIVE\n"
    "\n"
    "Write every entry of a cache directory to ARCHIVE, a POSIX tar (ustar) file\n"
    "holding entries/<2 hex>/<62 hex>, the cache directory's own layout: import it\n"
    "on another machine with 'progcache import', or unpack it with tar into an\n"
    "empty cache directory (for example: warm a cache on a build server without a\n"
    "GPU, then ship it to the cluster). The archive also holds the NVRTC versions\n"
    "the entries were compiled with (progcache/nvrtc), so that nodes without NVRTC\n"
    "derive the same keys.\n"
    "\n"
    "ARCHIVE '-' is standard output. A regular ARCHIVE (or a new one) is written\n"
    "under a temporary name and renamed into place when complete, replacing an\n"
    "existing file; a character device or a FIFO is written in place (a FIFO must\n"
    "already have a reader); a directory, block device or socket is refused; a\n"
    "symbolic link is followed (one that leads nowhere is refused).\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --remote URL   export the entries of the store URL names instead (redis://...,\n"
    "                 unix:..., a registered tier), each read and checked as a\n"
    "                 lookup reads it (a value that cannot be read is left out, with\n"
    "                 a warning); the archive holds no NVRTC versions\n"
    "  --max-artifact-size SIZE  the largest entry read (default: the setting\n"
    "                 max_artifact_size, 1G)\n"
    "  --sign KEY.pem sign the archive with this Ed25519 private key (made by\n"
    "                 'openssl genpkey -algorithm ed25519 -out KEY.pem'): it ends with\n"
    "                 a manifest of every entry and a signature over it, which\n"
    "                 'progcache import --verify PUB.pem' checks\n"
    "  -q, --quiet    no progress bar (drawn on a terminal)\n"
    "  -h, --help     this text\n"
    "\n"
    "Prints: exported N entries (SIZE) from DIR to ARCHIVE (on standard error\n"
    "when ARCHIVE is '-')\n"
    "Exit status: 0 written; 1 written, without the entries the store (--remote)\n"
    "could not read; 2 bad usage; 3 the cache, the store or the archive could not\n"
    "be read or written (or the store cannot be listed).\n";

static const char import_usage[] =
    "usage: progcache import [-d DIR] [--max-artifact-size SIZE] [--verify PUB.pem] ARCHIVE\n"
    "\n"
    "Add the entries of ARCHIVE (written by 'progcache export', or by\n"
    "'tar -cf ARCHIVE entries' in a cache directory) to a cache directory, which is\n"
    "created if missing. Entries of the same name are replaced; others are kept.\n"
    "The whole archive is checked first: a member that is not a regular file named\n"
    "entries/<2 hex>/<62 hex> (or one of its directories, or progcache/nvrtc, the\n"
    "NVRTC versions, added to this cache's records) - a link, a device, a path\n"
    "with '..', an absolute path, any other file - refuses the archive, and nothing\n"
    "is imported. Entries are written through the cache's atomic put. A member\n"
    "larger than the maximum artifact size is refused from its header.\n"
    "ARCHIVE '-' is standard input; a pipe, FIFO or device is read as a stream\n"
    "(copied to an unlinked temporary file while it is checked).\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --max-artifact-size SIZE  the largest entry accepted (default: the setting\n"
    "                 max_artifact_size, 1G)\n"
    "  --verify PUB.pem  import only an archive that 'progcache export' signed\n"
    "                 with the Ed25519 key whose public half this is ('openssl pkey\n"
    "                 -in KEY.pem -pubout -out PUB.pem'), unchanged since: an\n"
    "                 unsigned archive, another key's, or one changed in any way is\n"
    "                 refused before anything is written\n"
    "  -q, --quiet    no progress bar (drawn on a terminal)\n"
    "  -h, --help     this text\n"
    "\n"
    "The directory's size cap (the setting max_size) applies to what is imported.\n"
    "Prints: imported N entries (SIZE) from ARCHIVE into DIR (with --verify: and\n"
    "'verified: signed by SIGNER, NVRTC VERSION')\n"
    "Exit status: 0 imported; 2 bad usage; 3 the archive was refused or could not\n"
    "be read, or the cache refused a put.\n";

typedef struct {
    const char *cmd;   /* "export" or "import" */
    const char *usage;
    int exporting;
} archive_command;

/* Entries that are not valid artifacts, by kind of reason (the reason up to
 * its details in parentheses: "not a CUBIN, PTX, LTO-IR or fatbin (100
 * bytes, starting ...)"): said once per kind at the end, with a count and
 * the first entry, not once per entry (an archive of 300 foreign files gave
 * 300 warnings). */
#define WARN_KINDS 16
typedef struct warn_kind {
    char reason[sizeof ((progcache_artifact_info *)0)->reason]; /* the first's, whole */
    size_t kind_len;                                           /* its kind: reason[0..len) */
    char first[65];
    uint64_t count;
    int unknown; /* of no known kind: verify keeps them unless --fix-unknown */
} warn_kind;

typedef struct archive_ctx {
    const archive_command *c;
    tool_progress bar;
    warn_kind kinds[WARN_KINDS];
    size_t num_kinds;
    uint64_t other;  /* past WARN_KINDS reasons */
    uint64_t unread; /* --remote: entries the store could not read */
} archive_ctx;

static int tool_progress_cb_of_archive(void *ctx, const char *what, uint64_t done,
                                       uint64_t total)
{
    return tool_progress_cb(&((archive_ctx *)ctx)->bar, what, done, total);
}

static size_t kind_len(const char *reason)
{
    const char *details = strstr(reason, " (");
    return details ? (size_t)(details - reason) : strlen(reason);
}

static int note_invalid(void *ctx, const progcache_entry *e)
{
    archive_ctx *x = ctx;
    if (e->error && !e->data) { /* a store's entry that could not be read: left out */
        fprintf(stderr, "progcache %s: warning: entry %s not exported: %s\n", x->c->cmd, e->name,
                e->error);
        x->unread++;
        return 0;
    }
    if (!e->artifact || e->artifact->valid)
        return 0;
    const char *reason = e->artifact->reason;
    size_t len = kind_len(reason);
    for (size_t i = 0; i < x->num_kinds; i++)
        if (x->kinds[i].kind_len == len && !strncmp(x->kinds[i].reason, reason, len)) {
            x->kinds[i].count++;
            return 0;
        }
    if (x->num_kinds == WARN_KINDS) {
        x->other++;
        return 0;
    }
    warn_kind *k = &x->kinds[x->num_kinds++];
    snprintf(k->reason, sizeof k->reason, "%s", reason);
    k->kind_len = kind_len(k->reason);
    snprintf(k->first, sizeof k->first, "%s", e->name);
    k->count = 1;
    k->unknown = e->artifact->kind == PROGCACHE_KIND_UNKNOWN;
    return 0;
}

/* One line per kind: "entry NAME is not a valid artifact (REASON)", or "N
 * entries are not valid artifacts (KIND; the first: NAME, DETAILS)". */
static void warn_invalid(const archive_ctx *x)
{
    const archive_command *c = x->c;
    for (size_t i = 0; i < x->num_kinds; i++) {
        const warn_kind *k = &x->kinds[i];
        int one = k->count == 1;
        fprintf(stderr, "progcache %s: warning: ", c->cmd);
        if (one) {
            fprintf(stderr, "entry %s is not a valid artifact (%s); ", k->first, k->reason);
        } else {
            /* The details of the first without their parentheses. */
            const char *details = k->reason + k->kind_len;
            size_t dlen = strlen(details);
            if (dlen >= 3 && details[dlen - 1] == ')')
                details += 2, dlen -= 3;
            fprintf(stderr, "%llu entries are not valid artifacts (%.*s; the first: %s%s%.*s); ",
                    (unsigned long long)k->count, (int)k->kind_len, k->reason, k->first,
                    dlen ? ", " : "", (int)dlen, details);
        }
        if (c->exporting)
            fprintf(stderr, "exported as %s\n", one ? "it is" : "they are");
        else
            fprintf(stderr, "imported as %s ('progcache verify %s' removes %s)\n",
                    one ? "it is" : "they are", k->unknown ? "--fix-unknown" : "--fix",
                    one ? "it" : "them");
    }
    if (x->other)
        fprintf(stderr, "progcache %s: warning: %llu more entries are not valid artifacts, for "
                        "other reasons ('progcache verify' lists them)\n",
                c->cmd, (unsigned long long)x->other);
}

#define OPT_SIGN 0x1201
#define OPT_VERIFY 0x1202
/* A key file is a few hundred bytes; anything much larger is not one. */
#define KEY_FILE_MAX 65536

/* The NVRTC version a signed manifest records, when this process knows it. */
static const char *nvrtc_version(char *buf, size_t len)
{
    int major, minor;
    if (progcache_nvrtc_version(&major, &minor) != PROGCACHE_OK)
        return NULL;
    snprintf(buf, len, "%d.%d", major, minor);
    return buf;
}

static int run(const archive_command *c, int argc, char **argv)
{
    static const tool_option export_options[] = {TOOL_MAX_ARTIFACT_SIZE_OPTION,
                                                 {"sign", OPT_SIGN, 1},
                                                 TOOL_REMOTE_OPTION,
                                                 {NULL, 0, 0}};
    static const tool_option import_options[] = {
        TOOL_MAX_ARTIFACT_SIZE_OPTION, {"verify", OPT_VERIFY, 1}, {NULL, 0, 0}};
    const tool_option *options = c->exporting ? export_options : import_options;
    const char *archive = NULL, *key_path = NULL, *remote = NULL;
    uint64_t max = 0;
    tool_parser p;
    tool_parser_init(&p, c->cmd, c->usage, argc, argv, options, 0);
    for (int k; (k = tool_next(&p)) != TOOL_END;) {
        if (k == TOOL_EXIT)
            return p.code;
        if (k == TOOL_OPT_MAX_ARTIFACT_SIZE) {
            if (tool_max_size_value(c->cmd, p.arg, &max))
                return EXIT_USAGE;
        } else if (k == OPT_SIGN || k == OPT_VERIFY) {
            key_path = p.arg;
        } else if (k == TOOL_OPT_REMOTE) {
            remote = p.arg;
        } else if (archive) {
            return tool_usage_error(c->cmd, "more than one ARCHIVE (\"%s\" and \"%s\")", archive,
                                    p.arg);
        } else {
            archive = p.arg;
        }
    }
    if (!archive)
        return tool_usage_error(c->cmd, "give the ARCHIVE to %s (run 'progcache %s --help')",
                                c->exporting ? "write" : "read", c->cmd);
    if (remote && p.dir)
        return tool_usage_error(c->cmd, "give --dir or --remote, not both");
    char *dir = NULL, nvrtc[32], where[1024] = "";
    progcache_file *file = NULL;
    progcache_store *store = NULL;
    unsigned char *key = NULL;
    size_t key_len = 0;
    /* The key first: a bad one is found before a cache is created. */
    int code = key_path ? tool_read_input(c->cmd, c->exporting ? "signing key" : "verifying key",
                                          key_path, TOOL_INPUT_REGULAR, KEY_FILE_MAX, &key,
                                          &key_len)
                        : EXIT_OK;
    if (code)
        goto done;
    /* A signed archive in a file is verified before the cache is even
     * created, so a refused one leaves no trace; the import verifies the
     * bytes it imports again (a stream only then). */
    if (key && !c->exporting && strcmp(archive, "-")) {
        progcache_archive_options vo = PROGCACHE_ARCHIVE_OPTIONS_INIT;
        uint64_t bound = 0;
        vo.verify_key = key;
        vo.verify_key_len = key_len;
        if ((code = tool_resolve_dir(c->cmd, p.dir, &dir)) ||
            (code = tool_input_bound(c->cmd, dir, max, &bound)))
            goto done;
        free(dir);
        dir = NULL;
        if (progcache_archive_verify(NULL, archive, bound, &vo) != PROGCACHE_OK) {
            code = tool_lib_error(c->cmd, EXIT_FAILED, "import failed");
            goto done;
        }
    }
    /* Export reads an existing cache (or a store); import creates one if
     * missing. */
    if (remote)
        tool_mask_url(where, sizeof where, remote);
    code = remote ? tool_open_remote(c->cmd, remote, max, &store)
                  : tool_open_dir_file(c->cmd, p.dir, c->exporting ? TOOL_READ : TOOL_CREATE,
                                       max, &dir, &file);
    if (code)
        goto done;
    progcache_archive_options opts = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    archive_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.c = c;
    tool_progress_start(&ctx.bar);
    opts.on_entry = note_invalid;
    opts.on_progress = tool_progress_cb_of_archive;
    opts.ctx = &ctx;
    if (key && c->exporting) {
        opts.sign_key = key;
        opts.sign_key_len = key_len;
        opts.nvrtc_version = nvrtc_version(nvrtc, sizeof nvrtc);
    } else if (key) {
        opts.verify_key = key;
        opts.verify_key_len = key_len;
    }
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    int dash = !strcmp(archive, "-"), rc;
    if (c->exporting && store)
        rc = dash ? progcache_store_export_fd(&res, store, STDOUT_FILENO, "(standard output)",
                                              &opts)
                  : progcache_store_export(&res, store, archive, &opts);
    else if (c->exporting)
        rc = dash ? progcache_file_export_fd(&res, file, STDOUT_FILENO, "(standard output)",
                                             &opts)
                  : progcache_file_export(&res, file, archive, &opts);
    else
        rc = dash ? progcache_file_import_fd(&res, file, STDIN_FILENO, "(standard input)", &opts)
                  : progcache_file_import(&res, file, archive, &opts);
    tool_progress_end(&ctx.bar);
    warn_invalid(&ctx);
    if (rc != PROGCACHE_OK) {
        code = tool_lib_error(c->cmd, EXIT_FAILED,
                              c->exporting ? "export failed" : "import failed");
        goto done;
    }
    char size[64];
    tool_format_size_long(size, sizeof size, res.bytes);
    /* With the archive on standard output, the report goes to stderr. */
    if (c->exporting)
        fprintf(dash ? stderr : stdout, "exported %llu %s (%s) from %s to %s\n",
                (unsigned long long)res.entries, tool_entries(res.entries), size, dir ? dir : where,
                dash ? "standard output" : archive);
    else
        printf("imported %llu %s (%s) from %s into %s\n", (unsigned long long)res.entries,
               tool_entries(res.entries), size, dash ? "standard input" : archive, dir);
    if (res.verified)
        printf("verified: signed by %s, NVRTC %s\n", res.signer, res.nvrtc_version);
    if (ctx.unread) {
        fprintf(stderr, "progcache %s: %llu %s of %s could not be read and are not in the "
                        "archive (the warnings above say why)\n",
                c->cmd, (unsigned long long)ctx.unread, tool_entries(ctx.unread), where);
        code = EXIT_NO;
    }
done:
    progcache_file_close(file);
    progcache_store_free(store);
    free(key);
    free(dir);
    return code;
}

int cmd_export(int argc, char **argv)
{
    static const archive_command c = {"export", export_usage, 1};
    return run(&c, argc, argv);
}

int cmd_import(int argc, char **argv)
{
    static const archive_command c = {"import", import_usage, 0};
    return run(&c, argc, argv);
}
