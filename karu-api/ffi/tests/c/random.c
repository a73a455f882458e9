/* Random batches through the C ABI: each case submits reads of random objects, windows,
   offsets, lengths, destinations, tags and conditions, with random planner overrides, drains
   them in a random way (one thread with random timeouts, several threads at once,
   `karu_batch_wait`, a cancel part-way, or the batch freed part-way with its caller buffers
   freed right after), and checks every completion against what the object holds: its index
   and tag, its status, how many bytes arrived, the bytes themselves, its message, and the
   buffer Karu allocated (taken and released with `karu_free`, or left to the completion).
   Between batches it probes objects with `karu_client_stat`, `karu_client_read_ends` and a
   `karu_reader`. Run under AddressSanitizer, a write into a destination after
   `karu_batch_free` returned, a double free or a leak fails the program too.

   The mock server may have faults planted that a client rides out (statuses to retry,
   bodies cut or reset, 200 with a Content-Range, close-delimited bodies, latency): every
   read must still end exactly as without them.

   With an S3 endpoint, objects may also be S3 objects, signed with the key pair a credential
   callback in C returns (called from Karu's credential workers, several at once), expiring in
   2100 or never (an expiry of UINT64_MAX, past what the clock holds): valid for the whole
   bucket and cached there by half of the clients (then one call serves a client), for each
   request by the others. The callback refuses the bucket `refused`: its reads fail
   with KARU_ERR_CREDENTIALS.

   argv: SEED CASES S3_ENDPOINT (`-` for none), then for each object its address and its
   size: a number, `-` for a missing object, `!` for one whose credentials are refused
   (objects are remote when the address is a URL). The S3 key pair is AKIDRANDOM /
   random-secret.
   stdout: one line per case, "case N: R reads, M drained"; the seed of a failure is on
   stderr. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */

#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

/* --- A seeded generator (splitmix64): the same seed makes the same cases. --- */

static uint64_t rng_state;

static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (inclusive). */
static uint64_t between(uint64_t lo, uint64_t hi) {
    return hi <= lo ? lo : lo + next_u64() % (hi - lo + 1);
}

static int chance(unsigned percent) { return next_u64() % 100 < percent; }

/* --- The objects: remote and local, of a few sizes, one missing of each. --- */

#define MOST_OBJECTS 16
#define MISSING UINT64_MAX

struct object {
    const char *address;
    uint64_t size;      /* MISSING when it cannot be read */
    karu_status absent; /* then, how its reads fail */
    int remote;
    char etag[256]; /* the strong ETag a stat finds ("" for local files and missing objects) */
    karu_locator *locator;
};

static struct object objects[MOST_OBJECTS];
static int object_count;
static const char *s3_endpoint;

/* --- One read: what was asked and what it must give. --- */

enum expect { EXPECT_OK, EXPECT_END, EXPECT_STATUS };

struct ask {
    int object;
    uint64_t window_start;  /* absolute start of the read's window (0 without one) */
    int windowed;           /* read through a `karu_locator_with_window` */
    uint64_t window_length; /* KARU_TO_END or the bounded window's length */
    uint64_t offset;        /* relative to the window */
    uint64_t length;
    uint8_t *dst;           /* the caller's destination, or NULL */
    uint64_t tag;
    const char *if_match;
    enum expect expect;
    karu_status status; /* for EXPECT_STATUS */
    uint64_t received;  /* bytes that must arrive: the length, the prefix before the end, 0 */
    atomic_int taken;
};

static const char *case_name = "";
static uint64_t case_seed;

#define FAIL(...)                                                                     \
    do {                                                                              \
        fprintf(stderr, "seed %" PRIu64 " (%s): ", case_seed, case_name);             \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                          \
        exit(1);                                                                      \
    } while (0)

static const char WRONG_TAG[] = "\"karu-no-such-version\"";

/* Choose a read of a random object and what it must give. */
static void choose(struct ask *a) {
    a->object = (int)between(0, (uint64_t)object_count - 1);
    const struct object *o = &objects[a->object];
    int exists = o->size != MISSING;
    uint64_t size = exists ? o->size : 4096; /* a missing object is read as if it had 4 KiB */
    a->windowed = 0;
    a->window_start = 0;
    a->window_length = KARU_TO_END;
    if (exists && size > 0 && chance(35)) {
        a->windowed = 1;
        a->window_start = between(0, size - 1);
        if (chance(50)) a->window_length = between(1, size - a->window_start);
    }
    int bounded = a->window_length != KARU_TO_END;
    uint64_t visible = bounded ? a->window_length : size - a->window_start;
    uint64_t longest;
    switch (between(0, 3)) {
        case 0: longest = 16; break;
        case 1: longest = 8192; break;
        case 2: longest = 300000; break;
        default: longest = 2048; break;
    }
    a->if_match = NULL;
    int invalid_range = 0;
    switch (between(0, 19)) {
        case 0: /* zero length */
            a->offset = between(0, visible);
            a->length = 0;
            invalid_range = 1;
            break;
        case 1: /* past the end of the addressable range */
            a->offset = UINT64_MAX - between(0, 99);
            a->length = between(101, 300);
            invalid_range = 1;
            break;
        case 2: /* leaving a bounded window, or past the end of the object */
        case 3:
            a->offset = between(0, visible);
            a->length = between(visible - a->offset + 1, visible - a->offset + longest);
            invalid_range = bounded;
            break;
        case 4: /* at or after the end */
            if (bounded) { /* within the window's last byte */
                a->offset = visible - 1;
                a->length = 1;
            } else {
                a->offset = between(visible, visible + 5000);
                a->length = between(1, longest);
            }
            break;
        default: /* inside */
            if (visible == 0) {
                a->offset = 0;
                a->length = between(1, longest);
            } else {
                a->offset = between(0, visible - 1);
                a->length = between(1, visible - a->offset < longest ? visible - a->offset : longest);
            }
            break;
    }
    uint64_t first = a->window_start + a->offset;
    uint64_t end = first + a->length;
    if (invalid_range) {
        a->expect = EXPECT_STATUS;
        a->status = KARU_ERR_INVALID_RANGE;
        a->received = 0;
        return;
    }
    if (!exists) {
        a->expect = EXPECT_STATUS;
        a->status = o->absent;
        a->received = 0;
        return;
    }
    /* A condition: the object's own tag, or one it never had (inside reads only), or a
       condition on a local file, which has no versions. */
    if (end <= size && size > 0 && chance(20)) {
        if (!o->remote) {
            a->if_match = WRONG_TAG;
            a->expect = EXPECT_STATUS;
            a->status = KARU_ERR_INVALID;
            a->received = 0;
            return;
        }
        if (chance(50)) {
            a->if_match = WRONG_TAG;
            a->expect = EXPECT_STATUS;
            a->status = KARU_ERR_PRECONDITION_FAILED;
            a->received = 0;
            return;
        }
        a->if_match = o->etag;
    }
    if (end <= size) {
        a->expect = EXPECT_OK;
        a->received = a->length;
    } else {
        a->expect = EXPECT_END;
        a->received = first < size ? size - first : 0;
    }
}

static const char *expect_name(const struct ask *a) {
    switch (a->expect) {
        case EXPECT_OK: return "KARU_OK";
        case EXPECT_END: return "KARU_ERR_RANGE_NOT_SATISFIABLE";
        default: return karu_status_name(a->status);
    }
}

/* --- Checking one completion. --- */

static struct ask *asks;
static size_t ask_count;

/* Check `done` against its read; with `cancelled_ok`, a read that had not finished when the
   batch was cancelled may say KARU_ERR_CANCELLED instead. Frees it unless `keep` is set
   (then the caller frees it later, after the batch). Returns the read's index. */
static size_t check_completion(karu_completion *done, int cancelled_ok, int keep) {
    size_t index;
    uint64_t tag, received;
    karu_status status;
    const char *message;
    const uint8_t *data;
    size_t len;
    CHECK_OK(karu_completion_index(done, &index));
    if (index >= ask_count) FAIL("a completion of index %zu in a batch of %zu", index, ask_count);
    struct ask *a = &asks[index];
    if (atomic_fetch_add(&a->taken, 1) != 0) FAIL("read %zu completed twice", index);
    CHECK_OK(karu_completion_tag(done, &tag));
    if (tag != a->tag) FAIL("read %zu: tag %" PRIu64 ", not %" PRIu64, index, tag, a->tag);
    CHECK_OK(karu_completion_status(done, &status));
    CHECK_OK(karu_completion_bytes_received(done, &received));
    CHECK_OK(karu_completion_message(done, &message));
    CHECK_OK(karu_completion_data(done, &data, &len));
    const struct object *o = &objects[a->object];
    uint64_t first = a->window_start + a->offset;
    if (cancelled_ok && status == KARU_ERR_CANCELLED) {
        if (received != 0) FAIL("read %zu: cancelled with %" PRIu64 " bytes", index, received);
    } else {
        karu_status want = a->expect == EXPECT_OK    ? KARU_OK
                           : a->expect == EXPECT_END ? KARU_ERR_RANGE_NOT_SATISFIABLE
                                                     : a->status;
        if (status != want || received != a->received) {
            FAIL("read %zu of %s at %" PRIu64 " (window %" PRIu64 "+%" PRIu64 ", offset %" PRIu64
                 ", length %" PRIu64 ", if_match %s): %s with %" PRIu64
                 " bytes, expected %s with %" PRIu64 " (%s)",
                 index, o->address, first, a->window_start, a->window_length, a->offset,
                 a->length, a->if_match ? a->if_match : "none", karu_status_name(status),
                 received, expect_name(a), a->received, message ? message : "no message");
        }
    }
    uint16_t http_status;
    CHECK_OK(karu_completion_http_status(done, &http_status));
    uint16_t want_http = !o->remote                             ? 0
                         : status == KARU_ERR_NOT_FOUND           ? 404
                         : status == KARU_ERR_PRECONDITION_FAILED ? 412
                         : status == KARU_OK                      ? 0
                                                                  : http_status;
    if (http_status != want_http)
        FAIL("read %zu: %s with HTTP status %u", index, karu_status_name(status), http_status);
    if ((status == KARU_OK) != (message == NULL))
        FAIL("read %zu: %s with message %s", index, karu_status_name(status),
             message ? message : "NULL");
    if (len != received) FAIL("read %zu: %zu bytes of data, %" PRIu64 " received", index, len, received);
    if (a->dst != NULL) {
        if (data != a->dst) FAIL("read %zu: data is not the caller's destination", index);
    } else if ((data == NULL) != (received == 0)) {
        FAIL("read %zu: data %p with %" PRIu64 " bytes", index, (const void *)data, received);
    }
    if (received > 0 && !is_pattern(data, first, len)) FAIL("read %zu: wrong bytes", index);
    if (a->dst == NULL && chance(50)) {
        uint8_t *owned;
        size_t owned_len;
        CHECK_OK(karu_completion_take_buffer(done, &owned, &owned_len));
        if (owned != data || owned_len != len) FAIL("read %zu: took another buffer", index);
        CHECK_OK(karu_completion_data(done, &data, &len));
        CHECK(data == NULL && len == 0);
        CHECK_STATUS(karu_completion_take_buffer(done, &owned, &owned_len), KARU_ERR_INVALID);
        CHECK_OK(karu_free(owned, owned_len));
    } else if (a->dst != NULL) {
        uint8_t *owned;
        size_t owned_len;
        CHECK_STATUS(karu_completion_take_buffer(done, &owned, &owned_len), KARU_ERR_INVALID);
    }
    if (!keep) CHECK_OK(karu_completion_free(done));
    return index;
}

/* --- Draining. --- */

static karu_batch *batch;
static pthread_barrier_t start;
static atomic_size_t drained_count;

static uint64_t random_timeout(void) {
    switch (between(0, 3)) {
        case 0: return 0;
        case 1: return 1;
        case 2: return 20;
        default: return UINT64_MAX;
    }
}

/* Take completions until the batch is drained (every timeout a random one of this thread's,
   fixed before the threads start). */
struct taker {
    uint64_t timeouts[4];
    int cancelled_ok;
};

static void *take_all(void *arg) {
    struct taker *t = arg;
    pthread_barrier_wait(&start);
    for (unsigned turn = 0;; turn++) {
        karu_next next;
        karu_completion *done = NULL;
        CHECK_OK(karu_batch_next(batch, t->timeouts[turn % 4], &next, &done));
        if (next == KARU_NEXT_DRAINED) {
            CHECK(done == NULL);
            break;
        }
        if (next == KARU_NEXT_TIMED_OUT) {
            CHECK(done == NULL);
            continue;
        }
        check_completion(done, t->cancelled_ok, 0);
        atomic_fetch_add(&drained_count, 1);
    }
    return NULL;
}

static void drain_on_threads(int threads, int cancelled_ok) {
    pthread_t ids[4];
    struct taker takers[4];
    for (int i = 0; i < threads; i++) {
        for (int k = 0; k < 4; k++) takers[i].timeouts[k] = random_timeout();
        /* A thread that only polls must not spin forever on an empty batch: let it wait. */
        takers[i].timeouts[3] = 50;
        takers[i].cancelled_ok = cancelled_ok;
    }
    CHECK(pthread_barrier_init(&start, NULL, (unsigned)threads) == 0);
    for (int i = 0; i < threads; i++) CHECK(pthread_create(&ids[i], NULL, take_all, &takers[i]) == 0);
    for (int i = 0; i < threads; i++) CHECK(pthread_join(ids[i], NULL) == 0);
    pthread_barrier_destroy(&start);
}

/* --- Probes between batches. --- */

static void probe(karu_client *client) {
    int k = (int)between(0, (uint64_t)object_count - 1);
    const struct object *o = &objects[k];
    switch (between(0, 2)) {
        case 0: { /* stat */
            karu_object_info info = {0};
            karu_status got = karu_client_stat(client, o->locator, &info);
            if (o->size == MISSING) {
                if (got != o->absent) FAIL("stat of %s: %s", o->address, karu_status_name(got));
                CHECK(info.etag == NULL);
                return;
            }
            const char *etag = info.etag ? info.etag : "";
            if (got != KARU_OK || info.size != o->size || strcmp(etag, o->etag) != 0 ||
                !info.last_modified.known)
                FAIL("stat of %s: %s, size %" PRIu64 ", etag %s", o->address, karu_status_name(got),
                     info.size, etag);
            CHECK_OK(karu_object_info_clear(&info));
            break;
        }
        case 1: { /* both ends */
            uint64_t head_len = between(0, 70000), tail_len = between(0, 70000);
            karu_ends *ends = NULL;
            karu_status got = karu_client_read_ends(client, o->locator, head_len, tail_len, &ends);
            if (o->size == MISSING) {
                if (got != o->absent) FAIL("read_ends of %s: %s", o->address, karu_status_name(got));
                CHECK(ends == NULL);
                return;
            }
            if (got != KARU_OK) FAIL("read_ends of %s: %s", o->address, karu_status_name(got));
            uint64_t size;
            const uint8_t *head, *tail;
            size_t got_head, got_tail;
            const char *etag;
            CHECK_OK(karu_ends_size(ends, &size));
            CHECK_OK(karu_ends_head(ends, &head, &got_head));
            CHECK_OK(karu_ends_tail(ends, &tail, &got_tail));
            CHECK_OK(karu_ends_etag(ends, &etag));
            uint64_t want_head = head_len < o->size ? head_len : o->size;
            uint64_t want_tail = tail_len < o->size ? tail_len : o->size;
            if (size != o->size || got_head != want_head || got_tail != want_tail)
                FAIL("read_ends(%" PRIu64 ", %" PRIu64 ") of %s: size %" PRIu64 ", head %zu, tail %zu",
                     head_len, tail_len, o->address, size, got_head, got_tail);
            if (!is_pattern(head, 0, got_head) || !is_pattern(tail, o->size - got_tail, got_tail))
                FAIL("read_ends of %s: wrong bytes", o->address);
            if (strcmp(etag ? etag : "", o->etag) != 0) FAIL("read_ends of %s: etag %s", o->address, etag);
            CHECK_OK(karu_ends_free(ends));
            break;
        }
        default: { /* a reader */
            karu_reader *reader = NULL;
            karu_status got = karu_reader_open(client, o->locator, &reader);
            if (o->size == MISSING) {
                if (got != o->absent) FAIL("reader of %s: %s", o->address, karu_status_name(got));
                return;
            }
            if (got != KARU_OK) FAIL("reader of %s: %s", o->address, karu_status_name(got));
            uint64_t size;
            CHECK_OK(karu_reader_size(reader, &size));
            CHECK(size == o->size);
            for (int i = (int)between(1, 4); i > 0; i--) {
                uint64_t offset = between(0, o->size + 100);
                size_t len = (size_t)between(0, 9000);
                uint8_t *buf = malloc(len ? len : 1);
                size_t filled = 12345;
                CHECK_OK(karu_reader_read_at(reader, offset, len ? buf : NULL, len, &filled));
                uint64_t left = offset < o->size ? o->size - offset : 0;
                size_t want = left < len ? (size_t)left : len;
                if (filled != want || !is_pattern(buf, offset, filled))
                    FAIL("reader of %s at %" PRIu64 " for %zu: %zu bytes", o->address, offset, len, filled);
                free(buf);
            }
            CHECK_OK(karu_reader_free(reader));
            break;
        }
    }
}

/* --- The credential callback of S3 reads. --- */

struct credentials {
    int cached;             /* valid for the whole bucket (Karu caches it there), or per request */
    uint64_t expiry;        /* 2100-01-01, or UINT64_MAX: past what the clock holds, "never" */
    atomic_int calls;       /* calls for the bucket whose credentials are given */
    atomic_int refusals;    /* calls for the bucket `refused` */
};

static uint32_t provide(void *ctx, const char *canonical_path, karu_credential_out *out) {
    struct credentials *c = ctx;
    if (strncmp(canonical_path, "s3://refused/", 13) == 0) {
        atomic_fetch_add(&c->refusals, 1);
        return KARU_ERR_PERMISSION_DENIED;
    }
    atomic_fetch_add(&c->calls, 1);
    CHECK_OK(karu_credential_set_aws(out, "AKIDRANDOM", "random-secret", NULL));
    CHECK_OK(karu_credential_set_expiry(out, c->expiry));
    if (c->cached) {
        const char *bucket_end = strchr(canonical_path + 5, '/');
        CHECK(bucket_end != NULL);
        char prefix[256];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(bucket_end - canonical_path), canonical_path);
        CHECK_OK(karu_credential_set_prefix(out, prefix));
    }
    return KARU_OK;
}

/* The callback of the client in use (freed with it). */
static struct credentials *credentials;

/* --- A client with random settings. --- */

static karu_client *random_client(void) {
    static const char *gaps[] = {"0", "1KiB", "64KiB", "1MiB"};
    static const char *trades[] = {"guards", "priced"};
    static const char *parts[] = {"0", "64KiB", "8MiB"};
    static const char *concurrency[] = {"1", "3", "16", "64"};
    static const char *threads[] = {"1", "2", "4"};
    karu_client_builder *builder = test_builder();
    CHECK_OK(karu_client_builder_set(builder, "retry.initial_backoff", "10ms"));
    CHECK_OK(karu_client_builder_set(builder, "retry.max_backoff", "50ms"));
    CHECK_OK(karu_client_builder_set(builder, "planner.max_gap", gaps[between(0, 3)]));
    CHECK_OK(karu_client_builder_set(builder, "planner.trade", trades[between(0, 1)]));
    CHECK_OK(karu_client_builder_set(builder, "http.part_size", parts[between(0, 2)]));
    CHECK_OK(karu_client_builder_set(builder, "concurrency", concurrency[between(0, 3)]));
    CHECK_OK(karu_client_builder_set(builder, "io_threads", threads[between(0, 2)]));
    if (s3_endpoint != NULL) {
        char toml[512];
        snprintf(toml, sizeof toml, "[s3]\nendpoint = \"%s\"\nregion = \"us-east-1\"\n", s3_endpoint);
        CHECK_OK(karu_client_builder_config_toml(builder, toml));
        credentials = calloc(1, sizeof *credentials);
        credentials->cached = chance(50);
        credentials->expiry = chance(50) ? 4102444800u : UINT64_MAX;
        CHECK_OK(karu_client_builder_credential_callback(builder, "aws", provide, credentials));
    }
    return test_build(builder);
}

/* Free the client (and its callback's state): a callback whose answer Karu caches for the
   bucket is called once at most, however many reads ran at once. */
static void free_client(karu_client *client) {
    CHECK_OK(karu_client_free(client));
    if (credentials == NULL) return;
    if (credentials->cached && atomic_load(&credentials->calls) > 1)
        FAIL("the cached credential was asked for %d times", atomic_load(&credentials->calls));
    free(credentials);
    credentials = NULL;
}

static void locate_all(karu_client *client) {
    for (int k = 0; k < object_count; k++) objects[k].locator = test_locate(client, objects[k].address);
}

static void free_locators(void) {
    for (int k = 0; k < object_count; k++) {
        CHECK_OK(karu_locator_free(objects[k].locator));
        objects[k].locator = NULL;
    }
}

/* --- One case. --- */

enum way { ONE_THREAD, THREADS, WAIT, CANCEL, FREED, WAYS };
static const char *way_names[] = {"one thread", "threads", "wait", "cancel", "freed part-way"};

static void run_case(karu_client *client) {
    size_t n = (size_t)between(1, 40);
    asks = calloc(n, sizeof *asks);
    ask_count = n;
    karu_read *reads = calloc(n, sizeof *reads);
    karu_locator **windows = calloc(n, sizeof *windows);
    size_t rejected = 0;  /* reads refused before any I/O */
    uint64_t requested = 0; /* the bytes the others ask for */
    for (size_t i = 0; i < n; i++) {
        struct ask *a = &asks[i];
        if (i > 0 && chance(10)) { /* the same read twice */
            struct ask *again = &asks[between(0, i - 1)];
            memcpy(a, again, sizeof *a);
            atomic_init(&a->taken, 0);
        } else {
            choose(a);
        }
        a->tag = next_u64();
        /* A caller destination of its own (so that AddressSanitizer sees any write past it),
           or none. */
        a->dst = NULL;
        if (a->length > 0 && a->length <= (1u << 20) && chance(50)) a->dst = malloc((size_t)a->length);
        const karu_locator *locator = objects[a->object].locator;
        if (a->windowed) {
            CHECK_OK(karu_locator_with_window(locator, a->window_start, a->window_length, &windows[i]));
            locator = windows[i];
        }
        reads[i] = read_of(locator, a->offset, a->length, a->dst, a->tag);
        reads[i].if_match = a->if_match;
        if (a->expect == EXPECT_STATUS &&
            (a->status == KARU_ERR_INVALID_RANGE || a->status == KARU_ERR_INVALID))
            rejected++;
        else
            requested += a->length;
    }
    /* A malformed array is refused whole, before anything runs: two destinations that
       overlap, or a read without a locator. */
    if (chance(5)) {
        size_t a = (size_t)between(0, n - 1), b = (size_t)between(0, n - 1);
        karu_read saved = reads[b];
        const char *why;
        if (a != b && reads[a].dst != NULL && reads[b].length > 0 && reads[b].length <= reads[a].length) {
            reads[b].dst = reads[a].dst;
            why = "overlapping destinations";
        } else {
            reads[b].locator = NULL;
            why = "has no locator";
        }
        karu_batch *refused = NULL;
        CHECK_STATUS(karu_client_submit(client, reads, n, NULL, &refused), KARU_ERR_INVALID);
        char message[512];
        CHECK_OK(karu_client_last_error(client, message, sizeof message, NULL));
        if (refused != NULL || strstr(message, why) == NULL)
            FAIL("a malformed submission (%s): %s", why, message);
        reads[b] = saved;
    }
    karu_batch_options options = {0};
    int with_options = chance(30);
    if (with_options) {
        static const uint64_t gaps[] = {0, 1, 4096, 1u << 20};
        static const uint64_t spans[] = {1, 4096, 1u << 20, 64u << 20};
        static const uint32_t most_parts[] = {1, 2, 1024};
        static const uint32_t amplifications[] = {1, 2, 16};
        if (chance(50)) options.fields |= KARU_OPT_MAX_GAP, options.max_gap = gaps[between(0, 3)];
        if (chance(50)) options.fields |= KARU_OPT_MAX_SPAN, options.max_span = spans[between(0, 3)];
        if (chance(50)) options.fields |= KARU_OPT_MAX_PARTS, options.max_parts = most_parts[between(0, 2)];
        if (chance(50))
            options.fields |= KARU_OPT_MAX_AMPLIFICATION,
                options.max_amplification = amplifications[between(0, 2)];
        if (chance(20)) options.fields |= KARU_OPT_ONE_VERSION;
    }
    CHECK_OK(karu_client_submit(client, reads, n, with_options ? &options : NULL, &batch));
    free(reads); /* copied at submit */
    karu_stats stats;
    CHECK_OK(karu_batch_stats(batch, &stats));
    if (stats.reads != n || stats.rejected != rejected || stats.requested_bytes != requested)
        FAIL("stats: %" PRIu64 " reads, %" PRIu64 " rejected, %" PRIu64
             " bytes requested; expected %zu, %zu and %" PRIu64,
             stats.reads, stats.rejected, stats.requested_bytes, n, rejected, requested);
    /* The window locators may go at once: Karu keeps what it needs. */
    int windows_now = chance(50);
    if (windows_now)
        for (size_t i = 0; i < n; i++) CHECK_OK(karu_locator_free(windows[i]));

    enum way way = (enum way)between(0, WAYS - 1);
    case_name = way_names[way];
    atomic_store(&drained_count, 0);
    karu_completion **kept = calloc(n, sizeof *kept);
    size_t kept_count = 0;
    switch (way) {
        case ONE_THREAD:
            drain_on_threads(1, 0);
            break;
        case THREADS:
            drain_on_threads((int)between(2, 4), 0);
            break;
        case WAIT: {
            size_t capacity = (size_t)between(0, n);
            karu_completion **out = calloc(capacity ? capacity : 1, sizeof *out);
            size_t got = 99999;
            CHECK_OK(karu_batch_wait(batch, capacity ? out : NULL, capacity, &got));
            if (got != capacity) FAIL("wait handed over %zu of %zu", got, capacity);
            size_t last = 0;
            for (size_t i = 0; i < got; i++) {
                size_t index = check_completion(out[i], 0, 0);
                if (i > 0 && index <= last) FAIL("wait: read %zu after read %zu", index, last);
                last = index;
            }
            free(out);
            atomic_store(&drained_count, got);
            drain_on_threads(1, 0);
            break;
        }
        case CANCEL:
        case FREED: {
            /* Take some completions (kept past the batch, or freed at once), then cancel or
               free the batch. */
            size_t most = (size_t)between(0, n - 1);
            for (size_t taken = 0; taken < most;) {
                karu_next next;
                karu_completion *done = NULL;
                CHECK_OK(karu_batch_next(batch, UINT64_MAX, &next, &done));
                if (next == KARU_NEXT_DRAINED) FAIL("drained after %zu of %zu", taken, n);
                if (next != KARU_NEXT_COMPLETION) continue;
                int keep = chance(50);
                check_completion(done, 0, keep);
                if (keep) kept[kept_count++] = done;
                taken++;
            }
            atomic_store(&drained_count, most);
            if (way == CANCEL) {
                CHECK_OK(karu_batch_cancel(batch));
                drain_on_threads((int)between(1, 2), 1);
            }
            break;
        }
        default:
            break;
    }
    if (way != FREED) {
        if (atomic_load(&drained_count) != n)
            FAIL("%zu completions for %zu reads", atomic_load(&drained_count), n);
        karu_next next;
        karu_completion *done = (karu_completion *)1;
        CHECK_OK(karu_batch_next(batch, 0, &next, &done));
        if (next != KARU_NEXT_DRAINED || done != NULL) FAIL("not drained after every completion");
    }
    CHECK_OK(karu_batch_free(batch));
    batch = NULL;
    /* The destinations are the caller's again: freed now, AddressSanitizer reports any write
       Karu would still make into them. */
    for (size_t i = 0; i < kept_count; i++) CHECK_OK(karu_completion_free(kept[i]));
    for (size_t i = 0; i < n; i++) free(asks[i].dst);
    if (!windows_now)
        for (size_t i = 0; i < n; i++) CHECK_OK(karu_locator_free(windows[i]));
    printf("case %" PRIu64 ": %zu reads, %s, %zu taken\n", case_seed, n, case_name,
           atomic_load(&drained_count));
    free(kept);
    free(windows);
    free(asks);
    asks = NULL;
}

int main(int argc, char **argv) {
    CHECK(argc >= 4 && argc % 2 == 0 && (argc - 4) / 2 <= MOST_OBJECTS);
    setvbuf(stdout, NULL, _IOLBF, 0); /* a program killed for a hang still shows its cases */
    uint64_t seed = strtoull(argv[1], NULL, 10);
    uint64_t cases = strtoull(argv[2], NULL, 10);
    s3_endpoint = strcmp(argv[3], "-") == 0 ? NULL : argv[3];
    object_count = (argc - 4) / 2;
    for (int k = 0; k < object_count; k++) {
        struct object *o = &objects[k];
        o->address = argv[4 + 2 * k];
        const char *size = argv[5 + 2 * k];
        o->size = strcmp(size, "-") == 0 || strcmp(size, "!") == 0 ? MISSING : strtoull(size, NULL, 10);
        o->absent = strcmp(size, "!") == 0 ? KARU_ERR_CREDENTIALS : KARU_ERR_NOT_FOUND;
        o->remote = strstr(o->address, "://") != NULL;
    }
    /* Each object's strong ETag, as a stat finds it. */
    case_seed = seed;
    case_name = "setup";
    rng_state = seed;
    karu_client *client = random_client();
    locate_all(client);
    for (int k = 0; k < object_count; k++) {
        if (objects[k].size == MISSING) continue;
        karu_object_info info = {0};
        CHECK_OK(karu_client_stat(client, objects[k].locator, &info));
        if (info.size != objects[k].size) FAIL("%s has %" PRIu64 " bytes", objects[k].address, info.size);
        CHECK((info.etag != NULL) == objects[k].remote);
        CHECK(info.etag == NULL || strlen(info.etag) < sizeof objects[k].etag);
        strcpy(objects[k].etag, info.etag ? info.etag : "");
        CHECK_OK(karu_object_info_clear(&info));
    }
    for (uint64_t c = 0; c < cases; c++) {
        case_seed = seed + c;
        rng_state = case_seed;
        case_name = "probes";
        if (chance(30)) { /* a new client for this case, with its own settings */
            free_locators();
            free_client(client);
            client = random_client();
            locate_all(client);
        }
        run_case(client);
        case_name = "probes";
        for (int i = (int)between(0, 2); i > 0; i--) probe(client);
    }
    free_locators();
    free_client(client);
    return 0;
}
