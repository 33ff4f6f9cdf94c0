/*
 * progcache.hpp : a header-only C++17 wrapper over the C library
 * (progcache/progcache.h, progcache/cuda.h). Link with -lprogcache (or
 * CMake's progcache::progcache) as a C program does; nothing here is
 * compiled into the library.
 *
 * Namespace progcachepp: the C library's handle type is called progcache,
 * which a namespace of the same name would clash with.
 *
 * The choices, once for the whole wrapper:
 *  - Ownership is RAII: progcachepp::cache owns a progcache handle,
 *    progcachepp::buffer a progcache_buf, progcachepp::program_result a
 *    progcache_program_result (the CUDA library and kernels it loaded
 *    included). Each is move-only; moved-from objects are empty and may be
 *    destroyed or assigned to.
 *  - Errors are exceptions: every call that fails throws progcachepp::error
 *    (a std::runtime_error) carrying the C return code (code(), a
 *    PROGCACHE_E* value) and the library's message for this thread
 *    (what()). A miss is not an error: cache::get returns an empty
 *    std::optional. Destructors never throw.
 *  - Keys and bytes are passed as views (progcachepp::bytes: pointer and
 *    length, from a std::string_view, a std::vector, a std::array or a
 *    pointer and a size), never copied on the way in; text (sources,
 *    options, names) as std::string_view, copied where the C call needs a
 *    NUL-terminated string.
 *  - Everything the C API offers stays reachable: native() gives the C
 *    handle or struct, program::flags the PROGCACHE_PROGRAM_* bits.
 *
 * Example (docs/README's C++ snippet; tests/cxx/test_cxx_wrapper.cpp runs it):
 *
 *     progcachepp::cache cache;                    // $PROGCACHE_DIR or cuda.core's default
 *     progcachepp::program prog(source, PROGCACHE_TARGET_CUBIN);
 *     prog.options({"-arch=sm_90", "--std=c++17"}).kernel("matmul_epilogue");
 *     auto r = cache.compile_or_load(prog);        // throws progcachepp::error
 *     if (r.hit()) { ... }  r.kernel();            // a CUkernel (none with NO_LOAD)
 */
#ifndef PROGCACHE_HPP
#define PROGCACHE_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "progcache.hpp needs C++17 (-std=c++17); C programs include <progcache/progcache.h>"
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "progcache/cuda.h"
#include "progcache/progcache.h"

namespace progcachepp {

/* A failed call: code() is the C return code (PROGCACHE_E*), what() the
 * library's message ("progcache_open: cannot create /x: Permission
 * denied"). */
class error : public std::runtime_error {
  public:
    error(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
    int code() const noexcept { return code_; }

  private:
    int code_;
};

namespace detail {
/* Throw for a C return code that is not PROGCACHE_OK. */
inline void check(int rc)
{
    if (rc != PROGCACHE_OK) {
        const char *message = progcache_error_last();
        throw error(rc, message && *message ? message : progcache_strerror(rc));
    }
}
} // namespace detail

/* A read-only view of bytes (a key, a value): what std::span<const
 * std::byte> is in C++20, over unsigned char. Borrowed: the bytes must
 * outlive the view. */
class bytes {
  public:
    constexpr bytes() noexcept = default;
    bytes(const void *data, std::size_t size) noexcept
        : data_(static_cast<const unsigned char *>(data)), size_(size)
    {
    }
    bytes(std::string_view text) noexcept
        : data_(reinterpret_cast<const unsigned char *>(text.data())), size_(text.size())
    {
    }
    bytes(const char *text) noexcept : bytes(std::string_view(text)) {}
    bytes(const std::string &text) noexcept : bytes(std::string_view(text)) {}
    template <class T, class A>
    bytes(const std::vector<T, A> &v) noexcept : bytes(v.data(), v.size() * sizeof(T))
    {
    }
    template <class T, std::size_t N>
    bytes(const std::array<T, N> &a) noexcept : bytes(a.data(), N * sizeof(T))
    {
    }
    constexpr const unsigned char *data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr const unsigned char *begin() const noexcept { return data_; }
    constexpr const unsigned char *end() const noexcept { return data_ + size_; }
    constexpr unsigned char operator[](std::size_t i) const noexcept { return data_[i]; }
    std::string_view as_string() const noexcept
    {
        return std::string_view(reinterpret_cast<const char *>(data_), size_);
    }

  private:
    const unsigned char *data_ = nullptr;
    std::size_t size_ = 0;
};

/* A 32-byte cache key (what cuda.core's make_program_cache_key returns). */
using key = std::array<unsigned char, PROGCACHE_KEY_SIZE>;

/* The key as 64 lowercase hex digits, as `progcache key` prints it. */
inline std::string to_hex(bytes k)
{
    std::string out(2 * k.size() + 1, '\0');
    progcache_key_hex(&out[0], k.data(), k.size());
    out.pop_back();
    return out;
}

/* Bytes the library allocated (a value read from the cache), owned. */
class buffer {
  public:
    buffer() noexcept = default;
    buffer(buffer &&other) noexcept : buf_(other.buf_) { other.buf_ = PROGCACHE_BUF_INIT; }
    buffer &operator=(buffer &&other) noexcept
    {
        if (this != &other) {
            progcache_buf_free(&buf_);
            buf_ = other.buf_;
            other.buf_ = PROGCACHE_BUF_INIT;
        }
        return *this;
    }
    buffer(const buffer &) = delete;
    buffer &operator=(const buffer &) = delete;
    ~buffer() { progcache_buf_free(&buf_); }

    const unsigned char *data() const noexcept { return buf_.data; }
    std::size_t size() const noexcept { return buf_.size; }
    bool empty() const noexcept { return buf_.size == 0; }
    const unsigned char *begin() const noexcept { return buf_.data; }
    const unsigned char *end() const noexcept { return buf_.data + buf_.size; }
    bytes view() const noexcept { return bytes(buf_.data, buf_.size); }
    operator bytes() const noexcept { return view(); }
    std::vector<unsigned char> to_vector() const
    {
        return std::vector<unsigned char>(begin(), end());
    }
    progcache_buf *native() noexcept { return &buf_; }

  private:
    progcache_buf buf_ = PROGCACHE_BUF_INIT;
};

/* An NVRTC compile, as progcache_program describes it: owns copies of the
 * strings it is given, so it may be built from temporaries. Setters return
 * *this for chaining. */
class program {
  public:
    explicit program(std::string_view source, progcache_target target = PROGCACHE_TARGET_CUBIN)
        : source_(source), target_(target)
    {
    }
    program &options(std::initializer_list<std::string_view> opts)
    {
        options_.assign(opts.begin(), opts.end());
        return *this;
    }
    program &option(std::string_view opt)
    {
        options_.emplace_back(opt);
        return *this;
    }
    /* The kernel to fetch after loading (its name in the binary); none: load only. */
    program &kernel(std::string_view name)
    {
        kernel_ = std::string(name);
        return *this;
    }
    /* Kernels asked for by name expression ("axpy<float>"): each one's
     * lowered name and kernel come back in the result. */
    program &name_expression(std::string_view expr)
    {
        names_.emplace_back(expr);
        return *this;
    }
    /* The NVRTC program name (default: "default_program", as cuda.core). */
    program &name(std::string_view n)
    {
        name_ = std::string(n);
        return *this;
    }
    /* PROGCACHE_PROGRAM_* bits: PROGCACHE_PROGRAM_NO_LOAD compiles and
     * caches without the CUDA driver (a machine without a GPU). */
    program &flags(unsigned int f)
    {
        flags_ = f;
        return *this;
    }
    unsigned int flags() const noexcept { return flags_; }

    /* The C description, pointing into this object: valid while it lives
     * and is not changed. */
    progcache_program native() const
    {
        progcache_program p = PROGCACHE_PROGRAM_INIT;
        option_ptrs_.clear();
        for (const std::string &o : options_)
            option_ptrs_.push_back(o.c_str());
        name_ptrs_.clear();
        for (const std::string &n : names_)
            name_ptrs_.push_back(n.c_str());
        p.nvrtc.source = source_.c_str();
        p.nvrtc.source_len = source_.size();
        p.nvrtc.target = target_;
        p.nvrtc.options = option_ptrs_.empty() ? nullptr : option_ptrs_.data();
        p.nvrtc.num_options = option_ptrs_.size();
        p.nvrtc.name = name_ ? name_->c_str() : nullptr;
        p.nvrtc.name_expressions = name_ptrs_.empty() ? nullptr : name_ptrs_.data();
        p.nvrtc.num_name_expressions = name_ptrs_.size();
        p.kernel = kernel_ ? kernel_->c_str() : nullptr;
        p.flags = flags_;
        return p;
    }

    /* The key cuda.core derives for this compile (progcache_key_nvrtc). */
    progcachepp::key key() const
    {
        progcachepp::key k{};
        progcache_program p = native();
        detail::check(progcache_key_nvrtc(k.data(), &p.nvrtc));
        return k;
    }

  private:
    std::string source_;
    progcache_target target_;
    std::vector<std::string> options_, names_;
    std::optional<std::string> name_, kernel_;
    unsigned int flags_ = 0;
    mutable std::vector<const char *> option_ptrs_, name_ptrs_;
};

/* What compile_or_load found and did, owned: the artifact, NVRTC's log,
 * the loaded CUDA library and kernels (unloaded by the destructor). */
class program_result {
  public:
    program_result() noexcept = default;
    program_result(program_result &&other) noexcept : r_(other.r_)
    {
        other.r_ = progcache_program_result();
    }
    program_result &operator=(program_result &&other) noexcept
    {
        if (this != &other) {
            release();
            r_ = other.r_;
            other.r_ = progcache_program_result();
        }
        return *this;
    }
    program_result(const program_result &) = delete;
    program_result &operator=(const program_result &) = delete;
    ~program_result() { release(); }

    progcache_status status() const noexcept { return r_.status; }
    bool hit() const noexcept { return r_.status == PROGCACHE_STATUS_HIT; }
    progcachepp::key key() const
    {
        progcachepp::key k{};
        for (std::size_t i = 0; i < k.size(); i++)
            k[i] = r_.key[i];
        return k;
    }
    bytes artifact() const noexcept { return bytes(r_.artifact.data, r_.artifact.size); }
    std::string_view log() const noexcept
    {
        return std::string_view(reinterpret_cast<const char *>(r_.log.data), r_.log.size);
    }
    /* The kernel asked for by program::kernel (nullptr with NO_LOAD). */
    CUkernel kernel() const noexcept { return r_.kernel; }
    CUlibrary library() const noexcept { return r_.library; }
    /* The name expressions' lowered names and kernels, in program order. */
    std::size_t num_names() const noexcept { return r_.num_names; }
    std::string_view lowered_name(std::size_t i) const
    {
        if (i >= r_.num_names)
            throw std::out_of_range("progcachepp::program_result::lowered_name");
        return r_.lowered_names[i];
    }
    CUkernel kernel(std::size_t i) const
    {
        if (i >= r_.num_names)
            throw std::out_of_range("progcachepp::program_result::kernel");
        return r_.kernels ? r_.kernels[i] : nullptr;
    }
    double lookup_ms() const noexcept { return r_.lookup_ms; }
    double compile_ms() const noexcept { return r_.compile_ms; }
    double load_ms() const noexcept { return r_.load_ms; }
    /* The whole C result (timings, healing, cache failures told apart). */
    const progcache_program_result &native() const noexcept { return r_; }
    progcache_program_result *native_out() noexcept
    {
        release();
        r_ = PROGCACHE_PROGRAM_RESULT_INIT;
        return &r_;
    }

  private:
    void release() noexcept
    {
        if (r_.version)
            progcache_program_result_release(&r_);
        r_ = progcache_program_result();
    }
    progcache_program_result r_ = progcache_program_result();
};

/* A cache handle: a directory (cuda.core's layout), its settings, and the
 * tiers above and below it. Thread-safe as the C handle is. */
class cache {
  public:
    /* Open dir; empty: $PROGCACHE_DIR, else cuda.core's default.
     * options: a progcache_options (PROGCACHE_OPTIONS_INIT, then set), or
     * nullptr for the directory's settings. Throws progcachepp::error. */
    explicit cache(std::string_view dir = {}, const progcache_options *options = nullptr)
    {
        std::string path(dir);
        detail::check(progcache_open(&c_, path.empty() ? nullptr : path.c_str(), options));
    }
    cache(cache &&other) noexcept : c_(std::exchange(other.c_, nullptr)) {}
    cache &operator=(cache &&other) noexcept
    {
        if (this != &other) {
            progcache_close(c_);
            c_ = std::exchange(other.c_, nullptr);
        }
        return *this;
    }
    cache(const cache &) = delete;
    cache &operator=(const cache &) = delete;
    ~cache() { progcache_close(c_); }

    /* The bytes stored under k, or nothing (a miss). */
    std::optional<buffer> get(bytes k) const
    {
        buffer out;
        int rc = progcache_get(out.native(), c_, k.data(), k.size());
        if (rc == PROGCACHE_ENOTFOUND)
            return std::nullopt;
        detail::check(rc);
        return std::optional<buffer>(std::move(out));
    }
    void put(bytes k, bytes value)
    {
        detail::check(progcache_put(c_, k.data(), k.size(), value.data(), value.size()));
    }
    /* true when there was an entry to remove. */
    bool remove(bytes k)
    {
        int rc = progcache_remove(c_, k.data(), k.size());
        if (rc == PROGCACHE_ENOTFOUND)
            return false;
        detail::check(rc);
        return true;
    }
    void clear() { detail::check(progcache_clear(c_)); }
    std::uint64_t count() const
    {
        std::uint64_t n = 0;
        detail::check(progcache_count(&n, c_));
        return n;
    }
    std::uint64_t total_size() const
    {
        std::uint64_t n = 0;
        detail::check(progcache_total_size(&n, c_));
        return n;
    }
    /* Wait for background puts (PROGCACHE_PROGRAM_ASYNC_STORE). */
    void flush() { detail::check(progcache_flush(c_)); }
    std::string_view path() const noexcept
    {
        const char *p = progcache_path(c_);
        return p ? std::string_view(p) : std::string_view();
    }

    /* Compile p with NVRTC, or load it from the cache: a hit is the exact
     * bytes stored under its key. Throws progcachepp::error (code()
     * PROGCACHE_ECOMPILE with NVRTC's log in what(), PROGCACHE_ENOCUDA
     * without a driver unless p has PROGCACHE_PROGRAM_NO_LOAD). */
    program_result compile_or_load(const program &p)
    {
        program_result r;
        progcache_program c = p.native();
        detail::check(progcache_compile_or_load(r.native_out(), c_, &c));
        return r;
    }

    progcache *native() const noexcept { return c_; }

  private:
    progcache *c_ = nullptr;
};

} // namespace progcachepp

#endif
