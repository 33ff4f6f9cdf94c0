/* The part of a program a PCH covers, and the PCH's key.
 *
 * NVRTC's PCH holds the state of the front end at the first token of the
 * main file: the directives before it. A PCH made from a source that is
 * only directives D1..Dk serves every program whose directives start with
 * D1..Dk (NVRTC checks the sequence, warning #630 otherwise). So the tier
 * makes its PCHs from the program's leading directives up to its last
 * #include: variants of a kernel that differ after their includes (a
 * #define, a constant, a block size) share one PCH. */
#include <dlfcn.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pch/pch_tier.h"
#include "pch/pch_wire.h"
#include "key/nvrtc_lib.h"
#include "sha256.h"

/* ---- the prefix --------------------------------------------------------------- */

typedef struct scan {
    const char *s;
    size_t len;
} scan;

/* p, moved past line splices (a backslash and a newline: translation phase
 * 2 joins the lines before comments and directives are seen). */
static size_t unsplice(const scan *sc, size_t p)
{
    for (;;) {
        if (p + 1 < sc->len && sc->s[p] == '\\' && sc->s[p + 1] == '\n')
            p += 2;
        else if (p + 2 < sc->len && sc->s[p] == '\\' && sc->s[p + 1] == '\r' &&
                 sc->s[p + 2] == '\n')
            p += 3;
        else
            return p;
    }
}

static int at(const scan *sc, size_t p) { return p < sc->len ? (unsigned char)sc->s[p] : -1; }

/* The character at p and the position after it. */
static int next(const scan *sc, size_t *p)
{
    *p = unsplice(sc, *p);
    int c = at(sc, *p);
    if (c >= 0)
        *p = unsplice(sc, *p + 1);
    return c;
}

/* Past blanks and comments; with lines, past newlines too. Returns the
 * position of the next character, or SIZE_MAX for a comment that never
 * ends (nothing after it can be part of a prefix). */
static size_t skip_blank(const scan *sc, size_t p, int lines)
{
    for (;;) {
        p = unsplice(sc, p);
        int c = at(sc, p);
        size_t q = p;
        if (c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r' || (lines && c == '\n')) {
            p++;
            continue;
        }
        if (c != '/')
            return p;
        next(sc, &q);
        int d = next(sc, &q);
        if (d == '/') { /* to the end of the line */
            while ((c = at(sc, q = unsplice(sc, q))) >= 0 && c != '\n')
                q++;
            p = q;
        } else if (d == '*') {
            int prev = 0;
            while ((c = next(sc, &q)) >= 0 && !(prev == '*' && c == '/'))
                prev = c;
            if (c < 0)
                return SIZE_MAX;
            p = q;
        } else {
            return p;
        }
    }
}

/* The end of the directive line at p: past its newline, skipping comments
 * and string or character literals (a "//" inside quotes is no comment). */
static size_t directive_end(const scan *sc, size_t p)
{
    for (;;) {
        p = skip_blank(sc, p, 0);
        if (p == SIZE_MAX)
            return SIZE_MAX;
        int c = next(sc, &p);
        if (c < 0)
            return sc->len;
        if (c == '\n')
            return p;
        if (c == '"' || c == '\'') {
            int d;
            while ((d = next(sc, &p)) >= 0 && d != c && d != '\n')
                if (d == '\\')
                    next(sc, &p);
            if (d == '\n')
                return p;
        }
    }
}

static size_t word(const scan *sc, size_t *p, char *out, size_t cap)
{
    size_t n = 0;
    for (;;) {
        size_t q = *p;
        int c = next(sc, &q);
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            break;
        if (n + 1 < cap)
            out[n++] = (char)c;
        *p = q;
    }
    out[n] = '\0';
    return n;
}

size_t progcache__pch_prefix_len(const char *source, size_t len)
{
    scan sc = {source, len};
    size_t p = 0, last = 0;
    for (;;) {
        p = skip_blank(&sc, p, 1);
        if (p == SIZE_MAX || next(&sc, &p) != '#')
            break;
        p = skip_blank(&sc, p, 0);
        if (p == SIZE_MAX)
            break;
        char name[16];
        word(&sc, &p, name, sizeof name);
        int include = !strcmp(name, "include");
        if (!strcmp(name, "pragma")) {
            /* "#pragma hdrstop" ends what a PCH may cover. */
            size_t q = skip_blank(&sc, p, 0);
            char what[16];
            if (q == SIZE_MAX || (word(&sc, &q, what, sizeof what), !strcmp(what, "hdrstop")))
                break;
        } else if (!include && strcmp(name, "define") && strcmp(name, "undef")) {
            /* Conditionals, #line, #error, #include_next, ...: a PCH
             * cannot stop inside a conditional, and the rest is rare
             * enough in a prefix not to be worth getting right. */
            break;
        }
        p = directive_end(&sc, p);
        if (p == SIZE_MAX)
            break;
        if (include)
            last = p;
    }
    return last;
}

/* ---- NVRTC's identity ---------------------------------------------------------- */

static void hex_of(char out[PCH_ID_HEX], const unsigned char *id, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0; i < len && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", id[i]);
}

static size_t file_build_id(const char *path, unsigned char *out, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return 0;
    size_t found = progcache__elf_build_id_fd(fd, out, cap);
    close(fd);
    return found;
}

/* The builtins' ID, read from libnvrtc-builtins.so.<major>.<minor> next to
 * the NVRTC library at lib. */
static void builtins_id(progcache__pch_tier *tier, const char *lib)
{
    unsigned char id[64];
    const char *slash = strrchr(lib, '/');
    char path[4096];
    if (!slash || snprintf(path, sizeof path, "%.*s/libnvrtc-builtins.so.%d.%d",
                           (int)(slash - lib), lib, tier->nvrtc_major,
                           tier->nvrtc_minor) >= (int)sizeof path)
        return;
    hex_of(tier->builtins_id, id, file_build_id(path, id, sizeof id));
}

/* The IDs without loading NVRTC (a PCH compile runs in the helper, which
 * loads it; this process needs it only to compile itself): read from the
 * file a load would open, when the version the keys carry comes from the
 * cache's record of that very file (key/nvrtc_lib.c: its path, size,
 * change time and build ID, the ID read through a descriptor checked to be
 * that file). The helper compares
 * the ID with its own NVRTC's, so a helper that loads another NVRTC is
 * told apart as before. 0, or -1: load NVRTC and ask it. */
static int ids_from_file(progcache__pch_tier *tier)
{
    int major, minor;
    const char *how;
    progcache__nvrtc_file cand;
    if (progcache__nvrtc_version_known(&major, &minor, &how) != PROGCACHE_OK ||
        strcmp(how, "record") != 0 || progcache__nvrtc_candidate(&cand) != PROGCACHE_OK)
        return -1;
    if (!cand.build_id_len)
        return -1;
    hex_of(tier->nvrtc_id, cand.build_id, cand.build_id_len);
    tier->nvrtc_major = major;
    tier->nvrtc_minor = minor;
    builtins_id(tier, cand.path);
    tier->ids_from_file = 1;
    return 0;
}

void progcache__pch_ids(progcache__pch_tier *tier)
{
    unsigned char id[64];
    /* NVRTC is loaded RTLD_LOCAL (key/nvrtc_lib.c): its symbols are found
     * through the table, not by name. */
    const progcache__nvrtc_api *nv = progcache__nvrtc_loaded();
    tier->nvrtc_id[0] = tier->builtins_id[0] = '\0';
    tier->nvrtc_major = tier->nvrtc_minor = 0;
    tier->ids_from_file = 0;
    if (!nv && ids_from_file(tier) == 0)
        return;
    if (!nv && progcache__nvrtc_load(&nv) != PROGCACHE_OK) {
        progcache_error_clear();
        return;
    }
    void *sym = (void *)nv->nvrtcVersion;
    hex_of(tier->nvrtc_id, id, progcache__wire_build_id_at(sym, id, sizeof id));
    tier->nvrtc_major = nv->major;
    tier->nvrtc_minor = nv->minor;
    Dl_info info;
    if (dladdr(sym, &info) && info.dli_fname)
        builtins_id(tier, info.dli_fname);
}

/* ---- the key --------------------------------------------------------------------- */

static int field(progcache__sha256 *h, const void *data, size_t len)
{
    unsigned char n[8];
    for (int i = 0; i < 8; i++)
        n[i] = (unsigned char)((uint64_t)len >> (8 * i));
    int rc = progcache__sha256_update(h, n, sizeof n);
    return rc ? rc : progcache__sha256_update(h, data, len);
}

static int text(progcache__sha256 *h, const char *s)
{
    return field(h, s ? s : "", s ? strlen(s) : 0);
}

/* Everything NVRTC compares before it uses a PCH (the front end's options,
 * the directives, its version and the heap's address) and more: every
 * option, since telling NVRTC's front-end options from its back end's is
 * a guess a later NVRTC could prove wrong, and a PCH too many costs less
 * than a wrong one. Not in the key: the program's body and the file
 * names of the program (a PCH serves every name), and the headers' bytes,
 * which the manifest checks at every use instead. */
int progcache__pch_key(pch_job *job)
{
    const progcache__pch_tier *tier = job->tier;
    progcache__sha256 *h = progcache__sha256_new();
    if (!h)
        return PROGCACHE_ENOMEM;
    char line[96];
    snprintf(line, sizeof line, "%d.%d %llx", tier->nvrtc_major, tier->nvrtc_minor,
             (unsigned long long)PROGCACHE__PCH_HEAP_ADDR);
    /* Quoted #include directives are looked up next to the program's name. */
    const char *slash = strrchr(job->name, '/');
    int rc = text(h, "progcache.pch.1");
    if (!rc)
        rc = text(h, line);
    if (!rc)
        rc = text(h, tier->nvrtc_id);
    if (!rc)
        rc = text(h, tier->builtins_id);
    if (!rc)
        rc = text(h, progcache_target_name(job->program->nvrtc.target));
    if (!rc)
        rc = text(h, tier->settings.nvrtc_append_flags);
    if (!rc)
        rc = field(h, job->name, slash ? (size_t)(slash - job->name) : 0);
    snprintf(line, sizeof line, "%zu", job->argc);
    if (!rc)
        rc = text(h, line);
    for (size_t i = 0; !rc && i < job->argc; i++)
        rc = text(h, job->argv[i]);
    if (!rc)
        rc = field(h, job->source, job->prefix_len);
    if (rc) {
        progcache__sha256_free(h);
        return rc;
    }
    rc = progcache__sha256_final(h, job->key);
    if (!rc)
        progcache__hex(job->hex, job->key, sizeof job->key);
    return rc;
}
