/*
 * Karu's C++ facade: header-only, C++17 (std::span under C++20), over the C ABI of karu.h and
 * nothing else. It adds move-only ownership (every object releases itself), spans, planner
 * overrides as an options struct, expected results instead of status codes, and a range-for
 * over a batch's completions. Its one exception is `karu::Error`, thrown by `value()` of a
 * failed `karu::Expected` (as `std::expected::value()` throws `std::bad_expected_access`);
 * built without exceptions (`-fno-exceptions`), that `value()` prints the error to stderr and
 * aborts. An exception thrown by a credential callback is caught at the C boundary.
 *
 *     auto client = karu::Client::create().value();
 *     auto object = client.locate("s3://bucket/tensors.bin").value();
 *     std::vector<std::uint8_t> header(4096);
 *     karu::Read reads[] = {karu::Read(object, 0, header.size()).into(header),
 *                           karu::Read(object, 1 << 20, 65536).tag(2)};
 *     auto batch = client.submit(reads).value();
 *     for (karu::Completion& done : batch) {       // as reads complete
 *         if (!done.ok()) { std::cerr << done.message() << '\n'; continue; }
 *         use(done.tag(), done.data());
 *     }
 *
 * Link with -lkaru (and -lpthread -ldl -lm for the static library).
 */
#ifndef KARU_HPP
#define KARU_HPP

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#define KARU_HPP_STD_SPAN 1
#endif
#if __cplusplus >= 202302L && __has_include(<expected>)
#include <expected>
#if defined(__cpp_lib_expected)
#define KARU_HPP_STD_EXPECTED 1
#endif
#endif
#if defined(__cpp_exceptions) || defined(_CPPUNWIND)
#define KARU_HPP_EXCEPTIONS 1
#endif

#include "karu.h"

namespace karu {

// ---- spans -------------------------------------------------------------------------------

#if defined(KARU_HPP_STD_SPAN)
/// A contiguous view: `std::span` (C++20).
template <class T>
using span = std::span<T>;
#else
/// A contiguous view (the subset of C++20's `std::span` the facade uses).
template <class T>
class span {
  public:
    constexpr span() noexcept = default;
    constexpr span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
    template <std::size_t N>
    constexpr span(T (&array)[N]) noexcept : data_(array), size_(N) {}
    template <class U, std::size_t N, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
    constexpr span(std::array<U, N> &array) noexcept : data_(array.data()), size_(N) {}
    template <class U, std::size_t N, class = std::enable_if_t<std::is_convertible_v<const U (*)[], T (*)[]>>>
    constexpr span(const std::array<U, N> &array) noexcept : data_(array.data()), size_(N) {}
    template <class U, class A, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
    span(std::vector<U, A> &vector) noexcept : data_(vector.data()), size_(vector.size()) {}
    template <class U, class A, class = std::enable_if_t<std::is_convertible_v<const U (*)[], T (*)[]>>>
    span(const std::vector<U, A> &vector) noexcept : data_(vector.data()), size_(vector.size()) {}
    template <class U, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
    constexpr span(const span<U> &other) noexcept : data_(other.data()), size_(other.size()) {}

    constexpr T *data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr T *begin() const noexcept { return data_; }
    constexpr T *end() const noexcept { return data_ + size_; }
    constexpr T &operator[](std::size_t i) const noexcept { return data_[i]; }

  private:
    T *data_ = nullptr;
    std::size_t size_ = 0;
};
#endif

// ---- statuses and expected results ---------------------------------------------------------

/// A status: the stable numbers of the C ABI's `karu_status`.
enum class Status : std::uint32_t {
    Ok = KARU_OK,
    Invalid = KARU_ERR_INVALID,
    InvalidRange = KARU_ERR_INVALID_RANGE,
    RangeNotSatisfiable = KARU_ERR_RANGE_NOT_SATISFIABLE,
    NotFound = KARU_ERR_NOT_FOUND,
    PermissionDenied = KARU_ERR_PERMISSION_DENIED,
    IsDirectory = KARU_ERR_IS_DIRECTORY,
    PreconditionFailed = KARU_ERR_PRECONDITION_FAILED,
    Credentials = KARU_ERR_CREDENTIALS,
    Http = KARU_ERR_HTTP,
    Network = KARU_ERR_NETWORK,
    TimedOut = KARU_ERR_TIMED_OUT,
    Protocol = KARU_ERR_PROTOCOL,
    Cancelled = KARU_ERR_CANCELLED,
    Unsupported = KARU_ERR_UNSUPPORTED,
    Io = KARU_ERR_IO,
    Internal = KARU_ERR_INTERNAL,
};

/// The stable name of a status (`"ok"`, `"not_found"`, ...).
inline const char *name(Status status) noexcept {
    return karu_status_name(static_cast<std::uint32_t>(status));
}

/// A failed operation: its status and a message for people (redacted: no secret in it). It is
/// what `Expected::value()` throws on an error, a `std::exception` whose `what()` is the message.
class Error : public std::exception {
  public:
    Error() = default;
    Error(Status status, std::string message) : status(status), message(std::move(message)) {}

    /// The message (the status's name when there is none).
    const char *what() const noexcept override { return message.empty() ? name(status) : message.c_str(); }

    Status status = Status::Internal;
    std::string message;
};

/// The error side of an `Expected`, as `std::unexpected` is for `std::expected`.
struct Unexpected {
    Error error;
};
/// Wrap an error for an `Expected`.
inline Unexpected unexpected(Error error) { return Unexpected{std::move(error)}; }

namespace detail {
/// `value()` of a failed `Expected`: throws the error; built without exceptions, prints it to
/// stderr and aborts.
[[noreturn]] inline void failed_value(const Error &error) {
#if defined(KARU_HPP_EXCEPTIONS)
    throw error;
#else
    std::fprintf(stderr, "karu: value() of a failed result: %s: %s\n", name(error.status), error.message.c_str());
    std::fflush(stderr);
    std::abort();
#endif
}
}  // namespace detail

/// A value or an [`Error`]: the subset of C++23's `std::expected` the facade uses, in every
/// standard. `value()` on an error throws the `karu::Error` (where `std::expected` would throw
/// `std::bad_expected_access`), or prints it and aborts when built without exceptions. Under
/// C++23 it converts to `std::expected<T, karu::Error>`.
template <class T>
class Expected {
  public:
    Expected(T value) : value_(std::move(value)) {}
    Expected(Unexpected error) : error_(std::move(error.error)) {}

    bool has_value() const noexcept { return value_.has_value(); }
    explicit operator bool() const noexcept { return has_value(); }
    T &value() & { check(); return *value_; }
    const T &value() const & { check(); return *value_; }
    T &&value() && { check(); return std::move(*value_); }
    /// The value, or `fallback` on an error.
    template <class U>
    T value_or(U &&fallback) && {
        return value_ ? std::move(*value_) : static_cast<T>(std::forward<U>(fallback));
    }
    T &operator*() & { return value(); }
    T &&operator*() && { return std::move(*this).value(); }
    T *operator->() { return &value(); }
    const T *operator->() const { return &value(); }
    /// The error (meaningful only when `!has_value()`).
    const Error &error() const noexcept { return error_; }

#if defined(KARU_HPP_STD_EXPECTED)
    operator std::expected<T, Error>() && {
        if (value_) return std::move(*value_);
        return std::unexpected<Error>(std::move(error_));
    }
#endif

  private:
    void check() const {
        if (!value_) detail::failed_value(error_);
    }
    std::optional<T> value_;
    Error error_;
};

/// Success or an [`Error`].
template <>
class Expected<void> {
  public:
    Expected() = default;
    Expected(Unexpected error) : failed_(true), error_(std::move(error.error)) {}
    bool has_value() const noexcept { return !failed_; }
    explicit operator bool() const noexcept { return has_value(); }
    void value() const {
        if (failed_) detail::failed_value(error_);
    }
    const Error &error() const noexcept { return error_; }

#if defined(KARU_HPP_STD_EXPECTED)
    operator std::expected<void, Error>() && {
        if (!failed_) return {};
        return std::unexpected<Error>(std::move(error_));
    }
#endif

  private:
    bool failed_ = false;
    Error error_;
};

namespace detail {

/// A message copied out by one of the C ABI's `*_last_error` functions.
template <class Object>
std::string last_error(karu_status (*get)(const Object *, char *, std::size_t, std::size_t *),
                       const Object *object) {
    std::size_t len = 0;
    if (get(object, nullptr, 0, &len) != KARU_OK) return {};
    std::string message(len, '\0');
    if (len > 0) get(object, message.data(), len + 1, &len);
    return message;
}

inline Error error(karu_status status, std::string message = {}) {
    if (message.empty()) message = karu_status_name(status);
    return Error{static_cast<Status>(status), std::move(message)};
}

/// A unique owner of a C object, released by its `*_free` function.
template <class T, karu_status (*Free)(T *)>
class Handle {
  public:
    Handle() noexcept = default;
    explicit Handle(T *raw) noexcept : raw_(raw) {}
    Handle(Handle &&other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
    Handle &operator=(Handle &&other) noexcept {
        if (this != &other) {
            reset();
            raw_ = std::exchange(other.raw_, nullptr);
        }
        return *this;
    }
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;
    ~Handle() { reset(); }

    T *get() const noexcept { return raw_; }
    explicit operator bool() const noexcept { return raw_ != nullptr; }
    void reset() noexcept {
        if (raw_) Free(std::exchange(raw_, nullptr));
    }

  private:
    T *raw_ = nullptr;
};

/// What a client's credential callback and everything built from the client share.
struct Callbacks;

}  // namespace detail

// ---- locators ---------------------------------------------------------------------------

/// A resolved address, with an optional window. Move-only.
class Locator {
  public:
    /// The address as people may see it (canonical, query redacted, window shown).
    std::string name() const {
        return detail::last_error<karu_locator>(karu_locator_name, handle_.get());
    }

    /// A locator exposing `[start, start + length)` of this one (no length: to the end).
    Expected<Locator> with_window(std::uint64_t start, std::optional<std::uint64_t> length = std::nullopt) const {
        karu_locator *raw = nullptr;
        karu_status s = karu_locator_with_window(handle_.get(), start, length.value_or(KARU_TO_END), &raw);
        if (s != KARU_OK) {
            return unexpected(detail::error(s, detail::last_error<karu_locator>(karu_locator_last_error, handle_.get())));
        }
        return Locator(raw);
    }

    /// The C object, still owned by this locator.
    const karu_locator *get() const noexcept { return handle_.get(); }

  private:
    friend class Client;
    explicit Locator(karu_locator *raw) : handle_(raw) {}
    detail::Handle<karu_locator, karu_locator_free> handle_;
};

// ---- reads, options, completions ---------------------------------------------------------

/// One read, built fluently: `Read(object, offset, length).into(buffer).tag(7)`. Without
/// `into`, Karu allocates the buffer (see `Completion::take`).
class Read {
  public:
    Read(const Locator &locator, std::uint64_t offset, std::uint64_t length) noexcept
        : locator_(&locator), offset_(offset), length_(length) {}

    /// Read into the caller's bytes (the read's length becomes their size). They must stay
    /// valid, untouched, until the batch is destroyed, except that they may be read once this
    /// read's completion has been taken.
    Read &into(span<std::uint8_t> destination) noexcept {
        dst_ = destination.data();
        length_ = destination.size();
        return *this;
    }
    /// The tag the completion carries (default 0).
    Read &tag(std::uint64_t tag) noexcept {
        tag_ = tag;
        return *this;
    }
    /// The ETag the object must have (remote objects only).
    Read &if_match(std::string etag) {
        if_match_ = std::move(etag);
        return *this;
    }

  private:
    friend class Client;
    karu_read raw() const noexcept {
        return karu_read{locator_->get(), offset_, length_, dst_, tag_,
                         if_match_ ? if_match_->c_str() : nullptr};
    }
    const Locator *locator_;
    std::uint64_t offset_;
    std::uint64_t length_;
    std::uint8_t *dst_ = nullptr;
    std::uint64_t tag_ = 0;
    std::optional<std::string> if_match_;
};

/// Per-batch planner overrides; what is unset keeps the client's configuration.
struct BatchOptions {
    std::optional<std::uint64_t> max_gap;            ///< 0 disables merging
    std::optional<std::uint64_t> max_span;
    std::optional<std::uint32_t> max_parts;
    std::optional<std::uint32_t> max_amplification;
    bool one_version = false;                        ///< one version of each remote object

    karu_batch_options raw() const noexcept {
        karu_batch_options o{};
        if (max_gap) {
            o.fields |= KARU_OPT_MAX_GAP;
            o.max_gap = *max_gap;
        }
        if (max_span) {
            o.fields |= KARU_OPT_MAX_SPAN;
            o.max_span = *max_span;
        }
        if (max_parts) {
            o.fields |= KARU_OPT_MAX_PARTS;
            o.max_parts = *max_parts;
        }
        if (max_amplification) {
            o.fields |= KARU_OPT_MAX_AMPLIFICATION;
            o.max_amplification = *max_amplification;
        }
        if (one_version) o.fields |= KARU_OPT_ONE_VERSION;
        return o;
    }
};

/// Bytes Karu allocated, owned by the caller now (released with `karu_free`). Move-only.
class Buffer {
  public:
    Buffer() noexcept = default;
    Buffer(Buffer &&other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    Buffer &operator=(Buffer &&other) noexcept {
        if (this != &other) {
            karu_free(data_, size_);
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    ~Buffer() { karu_free(data_, size_); }

    span<const std::uint8_t> bytes() const noexcept { return {data_, size_}; }
    const std::uint8_t *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }

  private:
    friend class Completion;
    Buffer(std::uint8_t *data, std::size_t size) noexcept : data_(data), size_(size) {}
    std::uint8_t *data_ = nullptr;
    std::size_t size_ = 0;
};

/// The result of one read. Move-only.
class Completion {
  public:
    std::uint64_t tag() const noexcept {
        std::uint64_t v = 0;
        karu_completion_tag(handle_.get(), &v);
        return v;
    }
    std::size_t index() const noexcept {
        std::size_t v = 0;
        karu_completion_index(handle_.get(), &v);
        return v;
    }
    /// The read's own status.
    Status status() const noexcept {
        karu_status v = KARU_ERR_INTERNAL;
        karu_completion_status(handle_.get(), &v);
        return static_cast<Status>(v);
    }
    bool ok() const noexcept { return status() == Status::Ok; }
    /// The whole length on success; the valid prefix on `RangeNotSatisfiable`; 0 otherwise.
    std::uint64_t bytes_received() const noexcept {
        std::uint64_t v = 0;
        karu_completion_bytes_received(handle_.get(), &v);
        return v;
    }
    /// The HTTP status of a failed remote read, 0 if none.
    std::uint16_t http_status() const noexcept {
        std::uint16_t v = 0;
        karu_completion_http_status(handle_.get(), &v);
        return v;
    }
    /// Why the read failed (empty on success).
    std::string_view message() const noexcept {
        const char *m = nullptr;
        karu_completion_message(handle_.get(), &m);
        return m ? std::string_view(m) : std::string_view();
    }
    /// The delivered bytes (the caller's buffer, or Karu's until `take`).
    span<const std::uint8_t> data() const noexcept {
        const std::uint8_t *d = nullptr;
        std::size_t n = 0;
        karu_completion_data(handle_.get(), &d, &n);
        return {d, n};
    }
    /// Take the buffer Karu allocated (empty for a caller's buffer, or when taken already).
    Buffer take() {
        std::uint8_t *d = nullptr;
        std::size_t n = 0;
        if (karu_completion_take_buffer(handle_.get(), &d, &n) != KARU_OK) return Buffer();
        return Buffer(d, n);
    }
    /// The read's error, if it failed.
    std::optional<Error> error() const {
        if (ok()) return std::nullopt;
        return Error{status(), std::string(message())};
    }

  private:
    friend class Batch;
    explicit Completion(karu_completion *raw) : handle_(raw) {}
    detail::Handle<karu_completion, karu_completion_free> handle_;
};

/// What `Batch::next` found.
struct Next {
    enum class Kind { Completion, TimedOut, Drained } kind;
    std::optional<karu::Completion> completion;  ///< set for `Kind::Completion`
};

/// Figures of a plan.
using BatchStats = karu_stats;

/// A client's transport counters: requests, body bytes, retries, duplicates sent and won.
using TransportStats = karu_transport_stats;

// ---- batches ------------------------------------------------------------------------------

/// A submission's completions, arriving as work finishes. Move-only; destroying it cancels what
/// has not started and waits until no transfer references a caller buffer. Several threads
/// may take completions from one batch at once (`next`, `wait`).
class Batch {
  public:
    /// The next completion, waiting at most `timeout` for one.
    Expected<Next> next(std::chrono::milliseconds timeout) const {
        karu_next what = KARU_NEXT_DRAINED;
        karu_completion *raw = nullptr;
        karu_status s = karu_batch_next(handle_.get(), static_cast<std::uint64_t>(timeout.count()), &what, &raw);
        if (s != KARU_OK) return unexpected(error(s));
        switch (what) {
            case KARU_NEXT_COMPLETION:
                return Next{Next::Kind::Completion, Completion(raw)};
            case KARU_NEXT_TIMED_OUT:
                return Next{Next::Kind::TimedOut, std::nullopt};
            default:
                return Next{Next::Kind::Drained, std::nullopt};
        }
    }

    /// Wait until every read has completed; the completions not taken yet, in submission order.
    Expected<std::vector<Completion>> wait() const {
        std::vector<Completion> all;
        for (;;) {
            std::array<karu_completion *, 64> raw{};
            std::size_t n = 0;
            karu_status s = karu_batch_wait(handle_.get(), raw.data(), raw.size(), &n);
            if (s != KARU_OK) return unexpected(error(s));
            for (std::size_t i = 0; i < n; i++) all.push_back(Completion(raw[i]));
            if (n < raw.size()) return all;
        }
    }

    /// Figures of the plan.
    Expected<BatchStats> stats() const {
        BatchStats stats{};
        karu_status s = karu_batch_stats(handle_.get(), &stats);
        if (s != KARU_OK) return unexpected(error(s));
        return stats;
    }

    /// Cancel the reads that have not started (they complete as `Cancelled`).
    Expected<void> cancel() const {
        karu_status s = karu_batch_cancel(handle_.get());
        if (s != KARU_OK) return unexpected(error(s));
        return {};
    }

    /// The error that ended a range-for early (a batch of another process), if any.
    const std::optional<Error> &error() const noexcept { return error_; }

    /// An input iterator over completions as they arrive, until the batch is drained.
    class iterator {
      public:
        using iterator_category = std::input_iterator_tag;
        using value_type = Completion;
        using difference_type = std::ptrdiff_t;
        using pointer = Completion *;
        using reference = Completion &;

        iterator() = default;
        reference operator*() { return *current_; }
        pointer operator->() { return &*current_; }
        iterator &operator++() {
            advance();
            return *this;
        }
        bool operator==(const iterator &other) const noexcept {
            return !current_ && !other.current_ && (batch_ == nullptr) == (other.batch_ == nullptr);
        }
        bool operator!=(const iterator &other) const noexcept { return !(*this == other); }

      private:
        friend class Batch;
        explicit iterator(Batch *batch) : batch_(batch) { advance(); }
        void advance() {
            current_.reset();
            for (;;) {
                auto next = batch_->next(std::chrono::milliseconds(1000));
                if (!next) {
                    batch_->error_ = next.error();
                    batch_ = nullptr;
                    return;
                }
                if (next->kind == Next::Kind::Completion) {
                    current_ = std::move(next->completion);
                    return;
                }
                if (next->kind == Next::Kind::Drained) {
                    batch_ = nullptr;
                    return;
                }
            }
        }
        Batch *batch_ = nullptr;
        std::optional<Completion> current_;
    };

    /// Completions as they arrive (blocking between them), until every read has completed.
    iterator begin() { return iterator(this); }
    iterator end() { return iterator(); }

    /// The C object, still owned by this batch.
    karu_batch *get() const noexcept { return handle_.get(); }

  private:
    friend class Client;
    Error error(karu_status status) const {
        return detail::error(status, detail::last_error<karu_batch>(karu_batch_last_error, handle_.get()));
    }
    Batch(karu_batch *raw, std::shared_ptr<detail::Callbacks> callbacks)
        : callbacks_(std::move(callbacks)), handle_(raw) {}
    std::shared_ptr<detail::Callbacks> callbacks_;  // outlives the C batch (declared first)
    detail::Handle<karu_batch, karu_batch_free> handle_;
    std::optional<Error> error_;
};

// ---- object information, both ends, readers -------------------------------------------------

namespace detail {
/// A `karu_time` that is known, as a `system_clock` time point (clamped to its range).
inline std::chrono::system_clock::time_point time_point(const karu_time &time) {
    using clock = std::chrono::system_clock;
    using std::chrono::duration_cast;
    using std::chrono::nanoseconds;
    using std::chrono::seconds;
    constexpr auto latest = duration_cast<seconds>(clock::duration::max()).count() - 1;
    constexpr auto earliest = duration_cast<seconds>(clock::duration::min()).count() + 1;
    if (time.seconds > latest) return clock::time_point::max();
    if (time.seconds < earliest) return clock::time_point::min();
    return clock::time_point(duration_cast<clock::duration>(seconds(time.seconds) + nanoseconds(time.nanoseconds)));
}
}  // namespace detail

/// What `Client::stat` found of an object: its visible size (`KARU_SIZE_UNKNOWN` for a device
/// or FIFO), its strong ETag (empty when it has none) and when it was last modified (none when
/// the answer stated no time; a time beyond `system_clock`'s range is clamped to it).
struct ObjectInfo {
    std::uint64_t size = 0;
    std::string etag;
    std::optional<std::chrono::system_clock::time_point> last_modified;
};

/// Both ends of an object. Move-only.
class Ends {
  public:
    std::uint64_t size() const noexcept {
        std::uint64_t v = 0;
        karu_ends_size(handle_.get(), &v);
        return v;
    }
    span<const std::uint8_t> head() const noexcept { return bytes(karu_ends_head); }
    span<const std::uint8_t> tail() const noexcept { return bytes(karu_ends_tail); }
    /// The strong ETag both answers agreed on; empty when none.
    std::string_view etag() const noexcept {
        const char *e = nullptr;
        karu_ends_etag(handle_.get(), &e);
        return e ? std::string_view(e) : std::string_view();
    }

  private:
    friend class Client;
    explicit Ends(karu_ends *raw) : handle_(raw) {}
    span<const std::uint8_t> bytes(karu_status (*get)(const karu_ends *, const std::uint8_t **, std::size_t *)) const noexcept {
        const std::uint8_t *d = nullptr;
        std::size_t n = 0;
        get(handle_.get(), &d, &n);
        return {d, n};
    }
    detail::Handle<karu_ends, karu_ends_free> handle_;
};

/// One object read by position. Move-only; any threads may read at once.
class Reader {
  public:
    /// The size probed when the reader was opened.
    std::uint64_t size() const noexcept {
        std::uint64_t v = 0;
        karu_reader_size(handle_.get(), &v);
        return v;
    }
    /// Read up to `destination.size()` bytes at `offset`: how many arrived (fewer only at the
    /// end of the object).
    Expected<std::size_t> read_at(std::uint64_t offset, span<std::uint8_t> destination) const {
        std::size_t filled = 0;
        karu_status s = karu_reader_read_at(handle_.get(), offset, destination.data(), destination.size(), &filled);
        if (s != KARU_OK) {
            return unexpected(detail::error(s, detail::last_error<karu_reader>(karu_reader_last_error, handle_.get())));
        }
        return filled;
    }
    /// The C object, for a transport vtable: `{reader.get(), karu_reader_read_at, karu_reader_size}`.
    karu_reader *get() const noexcept { return handle_.get(); }

  private:
    friend class Client;
    Reader(karu_reader *raw, std::shared_ptr<detail::Callbacks> callbacks)
        : callbacks_(std::move(callbacks)), handle_(raw) {}
    std::shared_ptr<detail::Callbacks> callbacks_;
    detail::Handle<karu_reader, karu_reader_free> handle_;
};

// ---- clients ----------------------------------------------------------------------------

/// An AWS credential from an application callback (families `"aws"` and `"source"`).
struct AwsCredential {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;                   ///< empty: none
    std::optional<std::uint64_t> expires_unix;   ///< seconds since the epoch; none: never
    std::string prefix;                          ///< canonical prefix it is valid under; empty: this request only
};

/// A bearer token from an application callback (families `"gcp"`: Google Cloud Storage,
/// `"azure"`: Azure Blob and Data Lake Storage, `"hf"`: Hugging Face), sent as
/// `Authorization: Bearer <token>`.
struct BearerToken {
    std::string token;                           ///< without `Bearer `
    std::optional<std::uint64_t> expires_unix;   ///< seconds since the epoch; none: never
    std::string prefix;                          ///< canonical prefix it is valid under; empty: this request only
};

/// Credential callbacks: called from Karu's threads, possibly several at once.
using AwsCredentialCallback = std::function<Expected<AwsCredential>(std::string_view canonical_path)>;
using BearerTokenCallback = std::function<Expected<BearerToken>(std::string_view canonical_path)>;

namespace detail {
/// One family's callback, as the C ABI calls it (`ctx` is the slot).
template <typename Credential>
struct CallbackSlot {
    std::function<Expected<Credential>(std::string_view)> callback;

    static std::uint32_t call(void *ctx, const char *path, karu_credential_out *out) noexcept {
#if defined(KARU_HPP_EXCEPTIONS)
        try {
            return answer(ctx, path, out);
        } catch (...) {
            return KARU_ERR_CREDENTIALS;  // nothing unwinds into Karu
        }
#else
        return answer(ctx, path, out);
#endif
    }

  private:
    static std::uint32_t answer(void *ctx, const char *path, karu_credential_out *out) {
        auto credential = static_cast<CallbackSlot *>(ctx)->callback(path);
        if (!credential) return static_cast<std::uint32_t>(credential.error().status);
        karu_status s = set(out, *credential);
        if (s == KARU_OK && credential->expires_unix) s = karu_credential_set_expiry(out, *credential->expires_unix);
        if (s == KARU_OK && !credential->prefix.empty()) s = karu_credential_set_prefix(out, credential->prefix.c_str());
        return s;
    }
    static karu_status set(karu_credential_out *out, const AwsCredential &c) {
        return karu_credential_set_aws(out, c.access_key_id.c_str(), c.secret_access_key.c_str(),
                                       c.session_token.empty() ? nullptr : c.session_token.c_str());
    }
    static karu_status set(karu_credential_out *out, const BearerToken &c) {
        return karu_credential_set_bearer_token(out, c.token.c_str());
    }
};

/// The callbacks of one client, kept alive (and at one address) until its last object is freed.
struct Callbacks {
    CallbackSlot<AwsCredential> aws;
    CallbackSlot<BearerToken> gcp, azure, hf;
};
}  // namespace detail

/// How to build a client. By default the configuration layers of the Rust builder apply: the
/// user config file, `./karu.toml`, `KARU_CONFIG`, the `KARU_*` environment.
struct ClientOptions {
    std::string toml;                                            ///< TOML text, layered as a config file
    std::vector<std::string> config_files;                       ///< more config files (must exist)
    std::vector<std::pair<std::string, std::string>> settings;   ///< key = value, above all layers
    bool user_config_file = true;                                ///< read the user's config file
    bool project_config_file = true;                             ///< read ./karu.toml
    AwsCredentialCallback aws_credentials;                       ///< S3; none: Karu's own discovery
    BearerTokenCallback gcp_credentials;                     ///< Google Cloud Storage; none: Karu's own
    BearerTokenCallback azure_credentials;                   ///< Azure; none: Karu's own
    BearerTokenCallback hf_credentials;                      ///< Hugging Face; none: Karu's own
};

/// Karu's engine, providers and configuration. Move-only; share one client across threads
/// (all its member functions are thread safe).
class Client {
  public:
    /// A client with the default configuration layers.
    static Expected<Client> create() { return create(ClientOptions{}); }

    /// A client configured by `options`; a configuration mistake is an error naming the
    /// file or text, line and key.
    static Expected<Client> create(const ClientOptions &options) {
        karu_client_builder *raw_builder = nullptr;
        karu_status s = karu_client_builder_new(&raw_builder);
        if (s != KARU_OK) return unexpected(detail::error(s));
        detail::Handle<karu_client_builder, karu_client_builder_free> builder(raw_builder);
        auto fail = [&](karu_status status) {
            return unexpected(detail::error(status, detail::last_error<karu_client_builder>(
                                                        karu_client_builder_last_error, builder.get())));
        };
        if (!options.user_config_file && (s = karu_client_builder_user_config_file(builder.get(), nullptr)) != KARU_OK) return fail(s);
        if (!options.project_config_file && (s = karu_client_builder_project_config_file(builder.get(), nullptr)) != KARU_OK) return fail(s);
        for (const auto &file : options.config_files) {
            if ((s = karu_client_builder_config_file(builder.get(), file.c_str())) != KARU_OK) return fail(s);
        }
        if (!options.toml.empty() && (s = karu_client_builder_config_toml(builder.get(), options.toml.c_str())) != KARU_OK) return fail(s);
        for (const auto &[key, value] : options.settings) {
            if ((s = karu_client_builder_set(builder.get(), key.c_str(), value.c_str())) != KARU_OK) return fail(s);
        }
        auto callbacks = std::make_shared<detail::Callbacks>();
        callbacks->aws.callback = options.aws_credentials;
        callbacks->gcp.callback = options.gcp_credentials;
        callbacks->azure.callback = options.azure_credentials;
        callbacks->hf.callback = options.hf_credentials;
        auto plug = [&](const char *family, auto &slot) {
            if (!slot.callback) return KARU_OK;
            using Slot = std::remove_reference_t<decltype(slot)>;
            return karu_client_builder_credential_callback(builder.get(), family, &Slot::call, &slot);
        };
        if ((s = plug("aws", callbacks->aws)) != KARU_OK) return fail(s);
        if ((s = plug("gcp", callbacks->gcp)) != KARU_OK) return fail(s);
        if ((s = plug("azure", callbacks->azure)) != KARU_OK) return fail(s);
        if ((s = plug("hf", callbacks->hf)) != KARU_OK) return fail(s);
        karu_client *raw = nullptr;
        if ((s = karu_client_builder_build(builder.get(), &raw)) != KARU_OK) return fail(s);
        return Client(raw, std::move(callbacks));
    }

    /// Resolve an address (no network, no credentials).
    Expected<Locator> locate(std::string_view address) const {
        std::string text(address);
        karu_locator *raw = nullptr;
        karu_status s = karu_client_locate(handle_.get(), text.c_str(), &raw);
        if (s != KARU_OK) return unexpected(error(s));
        return Locator(raw);
    }

    /// Submit reads (copied now; caller buffers stay borrowed until the batch is destroyed).
    Expected<Batch> submit(span<const Read> reads, const BatchOptions &options = {}) const {
        std::vector<karu_read> raw;
        raw.reserve(reads.size());
        for (const Read &read : reads) raw.push_back(read.raw());
        karu_batch_options o = options.raw();
        karu_batch *batch = nullptr;
        karu_status s = karu_client_submit(handle_.get(), raw.data(), raw.size(), &o, &batch);
        if (s != KARU_OK) return unexpected(error(s));
        return Batch(batch, callbacks_);
    }

    /// Size, strong ETag and modification time in one probe (never cached).
    Expected<ObjectInfo> stat(const Locator &locator) const {
        karu_object_info raw{};
        karu_status s = karu_client_stat(handle_.get(), locator.get(), &raw);
        if (s != KARU_OK) return unexpected(error(s));
        ObjectInfo info;
        info.size = raw.size;
        if (raw.etag != nullptr) info.etag = raw.etag;
        if (raw.last_modified.known) info.last_modified = detail::time_point(raw.last_modified);
        karu_object_info_clear(&raw);
        return info;
    }

    /// The transport counters since the client was built.
    Expected<TransportStats> transport_stats() const {
        TransportStats stats{};
        karu_status s = karu_client_transport_stats(handle_.get(), &stats);
        if (s != KARU_OK) return unexpected(error(s));
        return stats;
    }

    /// The first `head` and last `tail` bytes (clamped), size and ETag, in one round trip.
    Expected<Ends> read_ends(const Locator &locator, std::uint64_t head, std::uint64_t tail) const {
        karu_ends *raw = nullptr;
        karu_status s = karu_client_read_ends(handle_.get(), locator.get(), head, tail, &raw);
        if (s != KARU_OK) return unexpected(error(s));
        return Ends(raw);
    }

    /// A positional reader of one object, pinned to the version probed now.
    Expected<Reader> open_reader(const Locator &locator) const {
        karu_reader *raw = nullptr;
        karu_status s = karu_reader_open(handle_.get(), locator.get(), &raw);
        if (s != KARU_OK) return unexpected(error(s));
        return Reader(raw, callbacks_);
    }

    /// The C object, still owned by this client.
    const karu_client *get() const noexcept { return handle_.get(); }

  private:
    Client(karu_client *raw, std::shared_ptr<detail::Callbacks> callbacks)
        : callbacks_(std::move(callbacks)), handle_(raw) {}
    Error error(karu_status status) const {
        return detail::error(status, detail::last_error<karu_client>(karu_client_last_error, handle_.get()));
    }
    std::shared_ptr<detail::Callbacks> callbacks_;  // outlives the C client (declared first)
    detail::Handle<karu_client, karu_client_free> handle_;
};

}  // namespace karu

#endif  // KARU_HPP
