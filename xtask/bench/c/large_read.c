/* large_read: one object read whole through Karu's C ABI into a buffer of the caller's, for
 * the `large` workload of `karu-bench` (xtask/bench/src/large.rs, which builds and runs it).
 *
 *     large_read URL SIZE fresh|touched
 *
 * `fresh`: the buffer is `malloc`ed memory never written before the read (its pages fault in
 * as the bytes land, as the Rust children's); `touched`: every page is written before the
 * timing starts. The read is one `karu_read` with the buffer as its `dst`, submitted with
 * `karu_client_submit` and drained with `karu_batch_next`; the batch is released
 * (`karu_batch_free`) before the clock stops. It prints the line every child of the workload
 * prints,
 *
 *     large-client: WALL_NS CPU_NS MAXRSS_KIB
 *
 * (the read's wall, the process's CPU time during it, its peak RSS after it) once every byte
 * has been checked against the mock server's pattern (karu_testkit's `fill_pattern`), after
 * the timing; on any failure it prints why on stderr and exits 1.
 *
 * Built by `karu-bench large` with the system's `cc` against the release library beside it:
 *
 *     cc -O2 -I karu-api/ffi/include xtask/bench/c/large_read.c \
 *        -L target/release -lkaru_ffi -Wl,-rpath,target/release -o large_read
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "karu.h"

#define REPORT "large-client:"

/* The splitmix64 finaliser: byte i of a virtual object is byte i % 8 (little-endian) of
   mix(i / 8), as karu-testkit's pattern.rs says. */
static uint64_t mix(uint64_t word) {
    uint64_t z = word + 0x9E3779B97F4A7C15u;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static uint8_t pattern_byte(uint64_t offset) { return (uint8_t)(mix(offset >> 3) >> ((offset & 7) * 8)); }

/* The first wrong byte's offset, or `len` when every byte is the pattern's. */
static uint64_t first_wrong(const uint8_t *data, uint64_t len) {
    uint64_t words = len / 8;
    for (uint64_t w = 0; w < words; w++) {
        uint64_t want = mix(w);
        for (int b = 0; b < 8; b++) {
            if (data[w * 8 + b] != (uint8_t)(want >> (b * 8))) return w * 8 + b;
        }
    }
    for (uint64_t at = words * 8; at < len; at++) {
        if (data[at] != pattern_byte(at)) return at;
    }
    return len;
}

static uint64_t nanos(struct timespec t) { return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec; }

static uint64_t cpu_nanos(const struct rusage *u) {
    return ((uint64_t)u->ru_utime.tv_sec + (uint64_t)u->ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)u->ru_utime.tv_usec + (uint64_t)u->ru_stime.tv_usec) * 1000u;
}

static int fail(const karu_client *client, const char *what, karu_status status) {
    char message[512] = "";
    if (client) karu_client_last_error(client, message, sizeof message, NULL);
    fprintf(stderr, "large_read: %s: %s%s%s\n", what, karu_status_name(status), message[0] ? ": " : "",
            message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[3], "fresh") != 0 && strcmp(argv[3], "touched") != 0)) {
        fprintf(stderr, "usage: %s URL SIZE fresh|touched\n", argv[0]);
        return 2;
    }
    const char *url = argv[1];
    uint64_t size = strtoull(argv[2], NULL, 10);
    if (size == 0 || size > SIZE_MAX) {
        fprintf(stderr, "large_read: bad size %s\n", argv[2]);
        return 2;
    }

    /* A client as the Rust children build theirs: no user or project config file. */
    karu_client_builder *builder = NULL;
    karu_client *client = NULL;
    karu_status status = karu_client_builder_new(&builder);
    if (status == KARU_OK) status = karu_client_builder_user_config_file(builder, NULL);
    if (status == KARU_OK) status = karu_client_builder_project_config_file(builder, NULL);
    if (status == KARU_OK) status = karu_client_builder_build(builder, &client);
    if (status != KARU_OK) {
        char message[512] = "";
        karu_client_builder_last_error(builder, message, sizeof message, NULL);
        fprintf(stderr, "large_read: configuration: %s\n", message);
        return 1;
    }
    karu_client_builder_free(builder);
    karu_locator *object = NULL;
    if ((status = karu_client_locate(client, url, &object)) != KARU_OK) return fail(client, url, status);

    uint8_t *buffer = malloc((size_t)size);
    if (buffer == NULL) {
        fprintf(stderr, "large_read: cannot allocate %" PRIu64 " bytes\n", size);
        return 1;
    }
    if (strcmp(argv[3], "touched") == 0) memset(buffer, 1, (size_t)size);

    struct rusage before, after;
    struct timespec started, ended;
    getrusage(RUSAGE_SELF, &before);
    clock_gettime(CLOCK_MONOTONIC, &started);

    karu_read read = {.locator = object, .offset = 0, .length = size, .dst = buffer, .tag = 0};
    karu_batch *batch = NULL;
    if ((status = karu_client_submit(client, &read, 1, NULL, &batch)) != KARU_OK) {
        return fail(client, "submit", status);
    }
    karu_status read_status = KARU_ERR_INTERNAL;
    uint64_t received = 0;
    char message[512] = "";
    for (;;) {
        karu_next next;
        karu_completion *done = NULL;
        if ((status = karu_batch_next(batch, UINT64_MAX, &next, &done)) != KARU_OK) return fail(NULL, "next", status);
        if (next == KARU_NEXT_DRAINED) break;
        if (next != KARU_NEXT_COMPLETION) continue;
        karu_completion_status(done, &read_status);
        karu_completion_bytes_received(done, &received);
        if (read_status != KARU_OK) {
            const char *text = NULL;
            karu_completion_message(done, &text);
            snprintf(message, sizeof message, "%s", text ? text : "");
        }
        karu_completion_free(done);
    }
    karu_batch_free(batch);

    clock_gettime(CLOCK_MONOTONIC, &ended);
    getrusage(RUSAGE_SELF, &after);

    if (read_status != KARU_OK) {
        fprintf(stderr, "large_read: the read failed: %s: %s\n", karu_status_name(read_status), message);
        return 1;
    }
    if (received != size) {
        fprintf(stderr, "large_read: %" PRIu64 " bytes of %" PRIu64 "\n", received, size);
        return 1;
    }
    uint64_t wrong = first_wrong(buffer, size);
    if (wrong != size) {
        fprintf(stderr, "large_read: wrong byte at offset %" PRIu64 "\n", wrong);
        return 1;
    }
    printf("%s %" PRIu64 " %" PRIu64 " %ld\n", REPORT, nanos(ended) - nanos(started),
           cpu_nanos(&after) - cpu_nanos(&before), after.ru_maxrss);
    free(buffer);
    karu_locator_free(object);
    karu_client_free(client);
    return 0;
}
