/* libcurl, loaded by the core on its first use (PROGCACHE_HAVE_CURL
 * builds). The core is loaded into every process whose NVRTC calls the
 * interceptor sees, and a HIT from a local cache never uses the HTTP and
 * S3 tier: yet linking libcurl maps it and some 30 libraries it needs
 * (GnuTLS, Kerberos, LDAP, ...), whose start-up took about 20 ms of a
 * 35-70 ms HIT on the 2-core build machine (bench/bench_exec). So the core
 * does not link libcurl: it defines the functions the tier calls as
 * trampolines that load libcurl.so.4 at the first call of any of them and
 * jump to its function with the caller's registers untouched (two take
 * variable arguments).
 *
 * The list is the tier's (nm -u of its objects); the core is linked with
 * -z defs, so a function the tier starts to call and the list lacks fails
 * the build rather than the run. When libcurl cannot be loaded, each
 * function answers as libcurl does when it cannot start (CURLE_FAILED_INIT,
 * NULL), so the tier reports its remote as unusable, as it does for any
 * failure of libcurl. */
#if defined(PROGCACHE_HAVE_CURL) && defined(__x86_64__)
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include "intercept/trampoline.h"

#define CURL_NAMES(X)                                                                             \
    X(curl_easy_cleanup) X(curl_easy_escape) X(curl_easy_getinfo) X(curl_easy_init)              \
    X(curl_easy_perform) X(curl_easy_reset) X(curl_easy_setopt) X(curl_easy_strerror)           \
    X(curl_free) X(curl_getdate) X(curl_global_init) X(curl_slist_append)                       \
    X(curl_slist_free_all)

#define AS_STRING(n) #n,
static const char *const names[] = {CURL_NAMES(AS_STRING)};
#define COUNT (sizeof names / sizeof names[0])

__attribute__((visibility("hidden"))) _Atomic(void *) progcache__curl_targets[COUNT];

/* What each function answers without libcurl. */
static long failed_init(void) { return CURLE_FAILED_INIT; }
static void *null(void) { return NULL; }
static void nothing(void) {}
static const char *no_curl(void) { return "libcurl.so.4 could not be loaded"; }
static long no_date(void) { return -1; } /* curl_getdate: a date it cannot read */

static void *fallback(const char *name)
{
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        {"curl_easy_cleanup", (void *)nothing},     {"curl_easy_escape", (void *)null},
        {"curl_easy_getinfo", (void *)failed_init}, {"curl_easy_init", (void *)null},
        {"curl_easy_perform", (void *)failed_init}, {"curl_easy_reset", (void *)nothing},
        {"curl_easy_setopt", (void *)failed_init},  {"curl_easy_strerror", (void *)no_curl},
        {"curl_free", (void *)nothing},             {"curl_getdate", (void *)no_date},
        {"curl_global_init", (void *)failed_init},
        {"curl_slist_append", (void *)null},        {"curl_slist_free_all", (void *)nothing},
    };
    _Static_assert(sizeof table / sizeof table[0] == COUNT, "a fallback for every function");
    for (size_t i = 0; i < COUNT; i++)
        if (!__builtin_strcmp(table[i].name, name))
            return table[i].fn;
    return (void *)failed_init;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *lib;

static void load(void) { lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL); }

void *progcache__curl_resolve(unsigned long i);

__attribute__((visibility("hidden"), used)) void *progcache__curl_resolve(unsigned long i)
{
    void *fn = atomic_load_explicit(&progcache__curl_targets[i], memory_order_acquire);
    if (fn)
        return fn;
    pthread_once(&once, load);
    fn = lib ? dlsym(lib, names[i]) : NULL;
    if (!fn)
        fn = fallback(names[i]);
    atomic_store_explicit(&progcache__curl_targets[i], fn, memory_order_release);
    return fn;
}

/* The trampolines (intercept/trampoline.h): hidden, so the core's own
 * calls bind to them and nothing outside sees them. */
#define TRAMPOLINE(n) PROGCACHE__TRAMPOLINE_ENTRY(n, "curl_i", "curl_common", ".hidden " #n "\n")

__asm__(".text\n"
        ".set curl_i, 0\n" CURL_NAMES(TRAMPOLINE) PROGCACHE__TRAMPOLINE_COMMON(
            "curl_common", "progcache__curl_targets", "progcache__curl_resolve"));
#else
/* Without libcurl the tier is not built; elsewhere than x86-64 the core
 * links libcurl (src/CMakeLists.txt). */
typedef int progcache__no_lazy_curl;
#endif
