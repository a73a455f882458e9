/* read_ranges: read byte ranges of one object through Karu's C ABI.
 *
 *     read_ranges ADDRESS OFFSET:LENGTH [OFFSET:LENGTH ...]
 *
 * ADDRESS is a local path or a URL (http://, https://, s3://). The ranges are read as one
 * batch: even-numbered ones into a buffer of the caller's, odd-numbered ones into buffers Karu
 * allocates. Each read completes on its own, with its own status; one line is printed per read
 * as it completes:
 *
 *     read 2 1048576:4096 ok 4096 bytes fnv1a=5c9a1b3e1f0c2d44 first=8f3a..
 *
 * Build, after `cargo xtask install` (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix of
 * your own):
 *
 *     cc read_ranges.c $(pkg-config --cflags --libs karu) -o read_ranges
 *
 * or from the repository root, after `cargo build -p karu-ffi`:
 *
 *     cc -I karu-api/ffi/include karu-api/ffi/examples/read_ranges.c \
 *        -L target/debug -lkaru -Wl,-rpath,target/debug -o read_ranges
 *
 * `cargo xtask demo` builds and runs it against a local file and a mock HTTP server;
 * `cargo xtask test` also builds it against an installed copy, with pkg-config and CMake.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "karu.h"

/* FNV-1a of the delivered bytes, so a reader of the output can check them. */
static uint64_t fnv1a(const uint8_t *data, size_t len) {
    uint64_t hash = 0xcbf29ce484222325u;
    for (size_t i = 0; i < len; i++) hash = (hash ^ data[i]) * 0x100000001b3u;
    return hash;
}

/* Print the client's last error after a failed call, and exit. */
static void die(const karu_client *client, const char *what, karu_status status) {
    char message[512] = "";
    if (client) karu_client_last_error(client, message, sizeof message, NULL);
    fprintf(stderr, "read_ranges: %s: %s%s%s\n", what, karu_status_name(status),
            message[0] ? ": " : "", message);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDRESS OFFSET:LENGTH [OFFSET:LENGTH ...]\n", argv[0]);
        return 2;
    }
    size_t count = (size_t)argc - 2;

    /* A client with the default configuration layers (config files, KARU_* variables). */
    karu_client_builder *builder = NULL;
    karu_client *client = NULL;
    karu_status status = karu_client_builder_new(&builder);
    if (status == KARU_OK) status = karu_client_builder_build(builder, &client);
    if (status != KARU_OK) {
        char message[512] = "";
        karu_client_builder_last_error(builder, message, sizeof message, NULL);
        fprintf(stderr, "read_ranges: configuration: %s\n", message);
        return 2;
    }
    karu_client_builder_free(builder);

    karu_locator *object = NULL;
    if ((status = karu_client_locate(client, argv[1], &object)) != KARU_OK) die(client, argv[1], status);

    /* One probe: the size, the strong ETag that could pin later reads (if_match), and when the
       object was last modified. */
    karu_object_info info = {0};
    if ((status = karu_client_stat(client, object, &info)) != KARU_OK) die(client, "stat", status);
    printf("object %s: %" PRIu64 " bytes%s%s", argv[1], info.size, info.etag ? ", etag " : "",
           info.etag ? info.etag : "");
    if (info.last_modified.known) {
        printf(", last modified %" PRId64 " s after the Unix epoch", info.last_modified.seconds);
    }
    printf("\n");
    karu_object_info_clear(&info);

    /* The reads: even ones into one buffer of ours, odd ones into buffers Karu allocates. */
    karu_read *reads = calloc(count, sizeof *reads);
    uint64_t ours = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t offset = 0, length = 0;
        if (sscanf(argv[i + 2], "%" SCNu64 ":%" SCNu64, &offset, &length) != 2) {
            fprintf(stderr, "read_ranges: %s: expected OFFSET:LENGTH\n", argv[i + 2]);
            return 2;
        }
        reads[i] = (karu_read){.locator = object, .offset = offset, .length = length, .tag = i};
        if (i % 2 == 0) ours += length;
    }
    uint8_t *buffer = ours > 0 ? malloc(ours) : NULL;
    if (ours > 0 && buffer == NULL) {
        fprintf(stderr, "read_ranges: cannot allocate %" PRIu64 " bytes\n", ours);
        return 2;
    }
    for (size_t i = 0, at = 0; i < count; i += 2) {
        reads[i].dst = buffer + at;
        at += reads[i].length;
    }

    karu_batch *batch = NULL;
    if ((status = karu_client_submit(client, reads, count, NULL, &batch)) != KARU_OK) {
        die(client, "submit", status);
    }
    karu_stats stats;
    karu_batch_stats(batch, &stats);
    printf("batch: %" PRIu64 " reads, %" PRIu64 " rejected, %" PRIu64 " transfers\n", stats.reads,
           stats.rejected, stats.transfers);

    /* Completions as they arrive. */
    int failed = 0;
    for (;;) {
        karu_next next;
        karu_completion *done = NULL;
        if ((status = karu_batch_next(batch, 1000, &next, &done)) != KARU_OK) die(NULL, "next", status);
        if (next == KARU_NEXT_DRAINED) break;
        if (next == KARU_NEXT_TIMED_OUT) continue; /* work goes on */
        uint64_t tag = 0, received = 0;
        karu_status read_status = KARU_OK;
        const uint8_t *data = NULL;
        size_t len = 0;
        karu_completion_tag(done, &tag);
        karu_completion_status(done, &read_status);
        karu_completion_bytes_received(done, &received);
        karu_completion_data(done, &data, &len);
        printf("read %" PRIu64 " %s %s %" PRIu64 " bytes fnv1a=%016" PRIx64, tag, argv[tag + 2],
               karu_status_name(read_status), received, fnv1a(data, len));
        if (len > 0) printf(" first=%02x..", data[0]);
        if (read_status != KARU_OK) {
            const char *message = NULL;
            karu_completion_message(done, &message);
            printf(" (%s)", message ? message : "");
            failed = 1;
        }
        printf("\n");
        karu_completion_free(done);
    }

    /* Releasing the batch hands our buffer back; then it may be freed. */
    karu_batch_free(batch);
    free(buffer);
    free(reads);
    karu_locator_free(object);
    karu_client_free(client);
    return failed;
}
