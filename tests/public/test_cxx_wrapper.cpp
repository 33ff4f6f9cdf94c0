// include/progcache.hpp through a real program, built with -Wall -Wextra
// -pedantic -Werror as C++17: open a cache, put and get bytes (a miss is an
// empty optional, not an exception), compile a kernel and load it (or,
// without a GPU, compile and cache it with PROGCACHE_PROGRAM_NO_LOAD), find
// it again as a HIT under the key cuda.core derives, and see failures come
// back as progcachepp::error with the C code and the library's message.
// The README's C++ snippet is the compile-or-load part.
#include <progcache.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "FAIL: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
            failures++;                                                              \
        }                                                                            \
    } while (0)

static const char source[] =
    "extern \"C\" __global__ void scale(float *a, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }\n";

// No GPU: compile and cache only (a load would fail with PROGCACHE_ENOCUDA).
static unsigned int load_flags()
{
    const progcache_cuda_api *api = nullptr;
    int devices = 0;
    if (progcache_cuda_load(&api) != PROGCACHE_OK || api->cuInit(0) != CUDA_SUCCESS ||
        api->cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices == 0) {
        std::printf("note: no GPU; compile-and-cache with PROGCACHE_PROGRAM_NO_LOAD\n");
        return PROGCACHE_PROGRAM_NO_LOAD;
    }
    return 0;
}

static void bytes_and_misses(const std::string &dir)
{
    progcachepp::cache cache(dir);
    CHECK(cache.path() == dir);
    const std::vector<unsigned char> value = {1, 2, 3, 0, 255};
    cache.put("a key", value);
    std::optional<progcachepp::buffer> got = cache.get("a key");
    CHECK(got && got->to_vector() == value);
    CHECK(!cache.get(std::string("no such key")));
    CHECK(cache.count() == 1);
    CHECK(cache.remove("a key"));
    CHECK(!cache.remove("a key"));
    // Moves leave an empty, destructible handle.
    progcachepp::cache other(std::move(cache));
    CHECK(other.native() && !cache.native());
}

static void compile_and_load(const std::string &dir)
{
    unsigned int flags = load_flags();
    progcachepp::cache cache(dir);
    progcachepp::program prog(source, PROGCACHE_TARGET_CUBIN);
    prog.options({"-arch=sm_90", "--std=c++17"}).kernel("scale").flags(flags);
    progcachepp::program_result first = cache.compile_or_load(prog);
    CHECK(first.status() == PROGCACHE_STATUS_MISS);
    CHECK(first.artifact().size() > 4 &&
          std::memcmp(first.artifact().data(), "\x7f" "ELF", 4) == 0);
    CHECK(first.key() == prog.key());
    CHECK((flags & PROGCACHE_PROGRAM_NO_LOAD) ? first.kernel() == nullptr
                                              : first.kernel() != nullptr);
    progcachepp::program_result again = cache.compile_or_load(prog);
    CHECK(again.hit());
    CHECK(again.artifact().as_string() == first.artifact().as_string());
    // The entry is under the key cuda.core's make_program_cache_key gives.
    std::optional<progcachepp::buffer> stored = cache.get(prog.key());
    CHECK(stored && stored->view().as_string() == first.artifact().as_string());
    CHECK(progcachepp::to_hex(prog.key()).size() == 64);
}

static void errors(const std::string &root)
{
    progcachepp::cache cache(root + "/errors");
    progcachepp::program bad("__global__ void broken( {", PROGCACHE_TARGET_CUBIN);
    bad.options({"-arch=sm_90"}).flags(PROGCACHE_PROGRAM_NO_LOAD);
    try {
        cache.compile_or_load(bad);
        CHECK(!"a compile error throws");
    } catch (const progcachepp::error &e) {
        CHECK(e.code() == PROGCACHE_ECOMPILE);
        CHECK(std::strlen(e.what()) > 0);
    }
    // A kernel named as written in C++ ("axpy<float>") is not the CUBIN's
    // (mangled) name: without a load nothing asked the driver, so the
    // artifact's own kernels are checked, and the call throws naming it
    // (issue 35: it used to cache the CUBIN and succeed).
    progcachepp::program tmpl("template <typename T> __global__ void axpy(T *y, T a)"
                              " { y[threadIdx.x] *= a; }\n"
                              "template __global__ void axpy<float>(float *, float);\n",
                              PROGCACHE_TARGET_CUBIN);
    tmpl.options({"-arch=sm_90"}).kernel("axpy<float>").flags(PROGCACHE_PROGRAM_NO_LOAD);
    try {
        cache.compile_or_load(tmpl);
        CHECK(!"a kernel that is not in the artifact throws");
    } catch (const progcachepp::error &e) {
        CHECK(e.code() == PROGCACHE_EINVAL && std::strstr(e.what(), "'axpy<float>'") &&
              std::strstr(e.what(), "name_expressions"));
    }
    // A cache directory that is a regular file: the open throws, naming it.
    std::string file = root + "/plain-file";
    std::FILE *f = std::fopen(file.c_str(), "w");
    CHECK(f && std::fclose(f) == 0);
    try {
        progcachepp::cache broken(file);
        CHECK(!"opening a file as a cache throws");
    } catch (const progcachepp::error &e) {
        CHECK(e.code() != PROGCACHE_OK && std::strstr(e.what(), "plain-file"));
    }
}

int main()
{
    char tmpl[] = "/tmp/progcache-cxx-XXXXXX";
    if (!mkdtemp(tmpl)) {
        std::perror("mkdtemp");
        return 1;
    }
    std::string root = tmpl;
    try {
        bytes_and_misses(root + "/bytes");
        compile_and_load(root + "/programs");
        errors(root);
    } catch (const progcachepp::error &e) {
        std::fprintf(stderr, "FAIL: unexpected progcachepp::error %d: %s\n", e.code(), e.what());
        failures++;
    }
    std::string rm = "rm -rf '" + root + "'";
    if (std::system(rm.c_str()) != 0)
        std::fprintf(stderr, "note: could not remove %s\n", root.c_str());
    if (failures) {
        std::printf("%d check(s) failed\n", failures);
        return 1;
    }
    std::printf("test_cxx_wrapper: ok\n");
    return 0;
}
