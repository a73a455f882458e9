// The C++ facade (include/karu.hpp): move-only RAII objects, spans, planner overrides,
// expected results and a range-for over completions, over local and HTTP objects. Compiled
// as C++17 (the facade's own span and expected), C++20 (std::span) and C++23
// (std::expected) by tests/c_programs.rs. Credential callbacks as std::function over S3: one
// that answers signs the reads (asked once: cached under the prefix it names); one that
// throws fails its read with Status::Credentials (the exception never reaches Karu). A token
// callback over GCS: its bearer token authenticates the reads (asked once for the bucket).
//
// argv: LOCAL_FILE (1 MiB of pattern) OBJECT_URL (1 MiB of pattern) MISSING_URL (404)
//       S3_ENDPOINT BUCKET (object "a" of 64 KiB of pattern; the mock accepts the key pair
//       "AKIDFACADE" / "facade-secret") GCS_ENDPOINT (objects "gs://bkt/a" and "gs://bkt/b"
//       of 64 KiB of pattern; the mock accepts the token "ya29.facade")
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <sys/stat.h>

#include "karu.hpp"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            std::exit(1);                                                            \
        }                                                                            \
    } while (0)

static std::uint8_t pattern_byte(std::uint64_t offset) {
    return static_cast<std::uint8_t>(((offset ^ (offset >> 7) ^ (offset >> 15)) * 131u) & 0xffu);
}

static bool is_pattern(karu::span<const std::uint8_t> data, std::uint64_t offset) {
    for (std::size_t i = 0; i < data.size(); i++) {
        if (data[i] != pattern_byte(offset + i)) return false;
    }
    return true;
}

// Ownership is unique: nothing here can be copied, everything can be moved.
static_assert(!std::is_copy_constructible_v<karu::Client> && std::is_move_constructible_v<karu::Client>);
static_assert(!std::is_copy_constructible_v<karu::Batch> && std::is_move_constructible_v<karu::Batch>);
static_assert(!std::is_copy_constructible_v<karu::Locator> && std::is_move_assignable_v<karu::Locator>);
static_assert(!std::is_copy_constructible_v<karu::Completion> && std::is_move_constructible_v<karu::Completion>);
static_assert(!std::is_copy_constructible_v<karu::Buffer>);

static karu::ClientOptions isolated(std::string toml = {}) {
    karu::ClientOptions options;
    options.user_config_file = false;
    options.project_config_file = false;
    options.toml = std::move(toml);
    return options;
}

int main(int argc, char **argv) {
    CHECK(argc == 7);
    const std::uint64_t size = 1 << 20;

    // A configuration mistake is an expected error naming the text and the line.
    auto broken = karu::Client::create(isolated("io_threads = 2\n[planner]\nmax_gapp = 1\n"));
    CHECK(!broken && broken.error().status == karu::Status::Invalid);
    CHECK(broken.error().message.find("karu_client_builder_config_toml:3") != std::string::npos);

    karu::ClientOptions options = isolated("file_workers = 2\n");
    options.settings.emplace_back("planner.max_gap", "64KiB");
    karu::Client client = karu::Client::create(options).value();
    karu::Locator local = client.locate(argv[1]).value();
    karu::Locator remote = client.locate(argv[2]).value();
    karu::Locator missing = client.locate(argv[3]).value();
    auto nowhere = client.locate("gopher://example/x");
    CHECK(!nowhere && nowhere.error().status == karu::Status::Unsupported);
    CHECK(nowhere.error().message.find("gopher") != std::string::npos);
    karu::Locator window = local.with_window(1000, 5000).value();
    CHECK(window.name().find("[1000, +5000)") != std::string::npos);
    auto outside = window.with_window(4000, 2000);
    CHECK(!outside && outside.error().status == karu::Status::InvalidRange);
    CHECK(outside.error().message.find("window") != std::string::npos);

    // stat, read_ends.
    karu::ObjectInfo info = client.stat(remote).value();
    CHECK(info.size == size && info.etag.size() > 2);
    CHECK(info.last_modified.has_value());  // the mock's Last-Modified, whole seconds
    CHECK(info.last_modified->time_since_epoch() % std::chrono::seconds(1) == std::chrono::seconds(0));
    // A local file's modification time, to the nanosecond, as stat(2) states it.
    karu::ObjectInfo local_info = client.stat(local).value();
    struct stat file;
    CHECK(stat(argv[1], &file) == 0);
    CHECK(local_info.size == size && local_info.etag.empty() && local_info.last_modified.has_value());
    CHECK(local_info.last_modified->time_since_epoch() ==
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::seconds(file.st_mtim.tv_sec) + std::chrono::nanoseconds(file.st_mtim.tv_nsec)));
    CHECK(client.stat(window).value().size == 5000);
    CHECK(client.stat(missing).error().status == karu::Status::NotFound);
    karu::Ends ends = client.read_ends(remote, 16, 32).value();
    CHECK(ends.size() == size && ends.etag() == info.etag);
    CHECK(ends.head().size() == 16 && is_pattern(ends.head(), 0));
    CHECK(ends.tail().size() == 32 && is_pattern(ends.tail(), size - 32));
    karu::TransportStats transport = client.transport_stats().value();
    CHECK(transport.requests >= 4 && transport.hedges == 0 && transport.hedges_won == 0);

    // A batch over spans: caller buffers (a vector, an array) and Karu-allocated ones, a
    // window, invalid reads, a missing object; a range-for over completions as they arrive.
    std::vector<std::uint8_t> header(4096);
    std::array<std::uint8_t, 50> middle{};
    std::vector<karu::Read> reads;
    reads.push_back(karu::Read(local, 0, 0).into(header).tag(1));
    reads.push_back(karu::Read(remote, 100, 0).into(middle).tag(2));
    reads.push_back(karu::Read(remote, 200, 50).tag(3));
    reads.push_back(karu::Read(window, 10, 100).tag(4));
    reads.push_back(karu::Read(local, 5, 0).tag(5));                    // zero length
    reads.push_back(karu::Read(local, size - 10, 100).tag(6));          // the file ends
    reads.push_back(karu::Read(missing, 0, 10).tag(7));                 // 404
    reads.push_back(karu::Read(remote, 400000, 8).tag(8).if_match(info.etag));
    karu::Batch batch = client.submit(reads).value();
    CHECK(batch.stats().value().reads == 8);
    std::map<std::uint64_t, karu::Completion> done;
    for (karu::Completion &completion : batch) {
        std::uint64_t tag = completion.tag();
        CHECK(done.count(tag) == 0);
        done.emplace(tag, std::move(completion));
    }
    CHECK(!batch.error() && done.size() == 8);
    CHECK(done.at(1).ok() && done.at(1).data().data() == header.data() && is_pattern(header, 0));
    CHECK(done.at(2).ok() && is_pattern(middle, 100));
    CHECK(done.at(3).ok() && is_pattern(done.at(3).data(), 200) && done.at(3).data().size() == 50);
    CHECK(done.at(4).ok() && is_pattern(done.at(4).data(), 1010));
    CHECK(done.at(5).status() == karu::Status::InvalidRange && !done.at(5).message().empty());
    CHECK(done.at(6).status() == karu::Status::RangeNotSatisfiable && done.at(6).bytes_received() == 10);
    CHECK(is_pattern(done.at(6).data(), size - 10) && done.at(6).data().size() == 10);
    CHECK(done.at(7).status() == karu::Status::NotFound && done.at(7).http_status() == 404);
    CHECK(done.at(7).error()->status == karu::Status::NotFound);
    CHECK(done.at(8).ok() && is_pattern(done.at(8).data(), 400000));
    // Taking a Karu-allocated buffer: the caller owns it, it frees itself.
    karu::Buffer taken = done.at(3).take();
    CHECK(taken.size() == 50 && is_pattern(taken.bytes(), 200) && done.at(3).data().size() == 0);
    CHECK(done.at(1).take().size() == 0);  // a caller's buffer is not Karu's to give

    // Moving a batch moves its ownership; planner overrides and wait().
    karu::BatchOptions no_merging;
    no_merging.max_gap = 0;
    std::vector<karu::Read> adjacent;
    adjacent.push_back(karu::Read(remote, 300000, 10).tag(30));
    adjacent.push_back(karu::Read(remote, 300010, 10).tag(31));
    karu::Batch first = client.submit(adjacent, no_merging).value();
    karu::Batch moved = std::move(first);
    CHECK(first.get() == nullptr && moved.get() != nullptr);
    CHECK(moved.stats().value().transfers == 2);
    std::vector<karu::Completion> all = moved.wait().value();
    CHECK(all.size() == 2 && all[0].tag() == 30 && all[1].tag() == 31);
    CHECK(is_pattern(all[0].data(), 300000) && is_pattern(all[1].data(), 300010));
    karu::Next next = moved.next(std::chrono::milliseconds(0)).value();
    CHECK(next.kind == karu::Next::Kind::Drained && !next.completion);

    // A reader: positional reads, short at the end.
    karu::Reader reader = client.open_reader(remote).value();
    CHECK(reader.size() == size);
    std::vector<std::uint8_t> bytes(64);
    CHECK(reader.read_at(700000, bytes).value() == 64 && is_pattern(bytes, 700000));
    CHECK(reader.read_at(size - 8, bytes).value() == 8 && is_pattern(karu::span<const std::uint8_t>(bytes.data(), 8), size - 8));

    // A credential callback as a std::function; it is not called for HTTP objects.
    karu::ClientOptions with_callback = isolated();
    int calls = 0;
    with_callback.aws_credentials = [&calls](std::string_view) -> karu::Expected<karu::AwsCredential> {
        calls++;
        return karu::unexpected(karu::Error{karu::Status::Credentials, "none"});
    };
    karu::Client second = karu::Client::create(with_callback).value();
    karu::Locator again = second.locate(argv[2]).value();
    std::vector<karu::Read> one;
    one.push_back(karu::Read(again, 0, 4));
    karu::Batch third = second.submit(one).value();
    CHECK(third.wait().value().at(0).ok() && calls == 0);

    // Over S3, the callback's credential signs the reads (one call: cached under the bucket
    // prefix it names), and a callback that throws fails its read, naming the family.
    const std::string s3_toml = std::string("[s3]\nendpoint = \"") + argv[4] + "\"\nregion = \"us-east-1\"\n";
    const std::string object_a = std::string("s3://") + argv[5] + "/a";
    karu::ClientOptions signing = isolated(s3_toml);
    int answered = 0;
    signing.aws_credentials = [&answered, bucket = std::string(argv[5])](std::string_view path) -> karu::Expected<karu::AwsCredential> {
        answered++;
        CHECK(path == "s3://" + bucket + "/a");
        karu::AwsCredential credential;
        credential.access_key_id = "AKIDFACADE";
        credential.secret_access_key = "facade-secret";
        credential.expires_unix = 4102444800u;  // 2100-01-01
        credential.prefix = "s3://" + bucket;
        return credential;
    };
    karu::Client s3 = karu::Client::create(signing).value();
    karu::Locator a = s3.locate(object_a).value();
    for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{60000}}) {  // two batches
        std::vector<karu::Read> signed_read;
        signed_read.push_back(karu::Read(a, offset, 100));
        std::vector<karu::Completion> got = s3.submit(signed_read).value().wait().value();
        CHECK(got.size() == 1 && got[0].ok() && is_pattern(got[0].data(), offset));
    }
    CHECK(answered == 1);

    karu::ClientOptions throwing = isolated(s3_toml);
    throwing.aws_credentials = [](std::string_view) -> karu::Expected<karu::AwsCredential> {
        throw std::runtime_error("the application's credential store is down");
    };
    karu::Client refused = karu::Client::create(throwing).value();
    karu::Locator a_again = refused.locate(object_a).value();
    std::vector<karu::Read> unsigned_read;
    unsigned_read.push_back(karu::Read(a_again, 0, 100));
    std::vector<karu::Completion> failed = refused.submit(unsigned_read).value().wait().value();
    CHECK(failed.size() == 1 && failed[0].status() == karu::Status::Credentials);
    CHECK(failed[0].message().find("aws") != std::string::npos);

    // Over GCS, a token callback's bearer token authenticates both objects' reads: one call,
    // cached under the bucket.
    const std::string gcs_toml = std::string("[gcs]\nendpoint = \"") + argv[6] + "\"\n";
    karu::ClientOptions bearer = isolated(gcs_toml);
    int tokens = 0;
    bearer.gcp_credentials = [&tokens](std::string_view path) -> karu::Expected<karu::BearerToken> {
        tokens++;
        CHECK(path.substr(0, 9) == "gs://bkt/");
        karu::BearerToken credential;
        credential.token = "ya29.facade";
        credential.expires_unix = 4102444800u;  // 2100-01-01
        credential.prefix = "gs://bkt";
        return credential;
    };
    karu::Client gcs = karu::Client::create(bearer).value();
    karu::Locator gcs_a = gcs.locate("gs://bkt/a").value();
    karu::Locator gcs_b = gcs.locate("gs://bkt/b").value();
    std::vector<karu::Read> token_reads;
    token_reads.push_back(karu::Read(gcs_a, 0, 100).tag(0));
    token_reads.push_back(karu::Read(gcs_b, 60000, 100).tag(60000));
    karu::Batch token_batch = gcs.submit(token_reads).value();
    for (karu::Completion &done : token_batch) {
        CHECK(done.ok() && is_pattern(done.data(), done.tag()));
    }
    CHECK(tokens == 1);

    std::printf("facade (C++%ld): ok\n", static_cast<long>(__cplusplus / 100 % 100));
    return 0;
}
