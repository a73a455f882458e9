/* Many threads draining one batch: every completion is taken exactly once, by one of them,
   with exact bytes, whether the read had a caller buffer or a Karu-allocated one.

   argv: LOCAL_FILE (1 MiB of pattern) OBJECT_URL (1 MiB of pattern)
   stdout: "remote_transfers=N hedges=H", for the driver to compare with the server's request
   count (a transfer's request, and any duplicate hedging sent of it). */
#define _POSIX_C_SOURCE 200809L /* pthread barriers, fork, waitpid */

#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

#define THREADS 8
#define LOCAL_READS 2000
#define REMOTE_READS 1000
#define READS (LOCAL_READS + REMOTE_READS)

static karu_batch *batch;
static uint64_t offsets[READS];
static size_t lengths[READS];
static uint8_t *caller[READS];
static atomic_int taken[READS];
static pthread_barrier_t start;

static void *drain(void *arg) {
    size_t *count = arg;
    pthread_barrier_wait(&start);
    for (;;) {
        karu_next next;
        karu_completion *done = NULL;
        CHECK_OK(karu_batch_next(batch, 50, &next, &done));
        if (next == KARU_NEXT_DRAINED) break;
        if (next == KARU_NEXT_TIMED_OUT) continue;
        uint64_t tag;
        karu_status status;
        const uint8_t *data;
        size_t len;
        CHECK_OK(karu_completion_tag(done, &tag));
        CHECK_OK(karu_completion_status(done, &status));
        CHECK_OK(karu_completion_data(done, &data, &len));
        CHECK(tag < READS && atomic_fetch_add(&taken[tag], 1) == 0);
        CHECK_STATUS(status, KARU_OK);
        CHECK(len == lengths[tag] && is_pattern(data, offsets[tag], len));
        CHECK(caller[tag] == NULL || data == caller[tag]);
        CHECK_OK(karu_completion_free(done));
        (*count)++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 3);
    karu_client *client = test_client(NULL);
    karu_locator *local = test_locate(client, argv[1]);
    karu_locator *remote = test_locate(client, argv[2]);
    karu_read *reads = calloc(READS, sizeof *reads);
    uint8_t *buffers = malloc((size_t)LOCAL_READS / 2 * 64);
    for (uint64_t i = 0; i < READS; i++) {
        int is_local = i < LOCAL_READS;
        offsets[i] = is_local ? i * 300 : (i - LOCAL_READS) * 1000;
        lengths[i] = is_local ? 64 : 32;
        /* Every other local read into one slice of a shared caller buffer. */
        caller[i] = is_local && i % 2 == 0 ? buffers + i / 2 * 64 : NULL;
        reads[i] = read_of(is_local ? local : remote, offsets[i], lengths[i], caller[i], i);
    }
    CHECK_OK(karu_client_submit(client, reads, READS, NULL, &batch));
    free(reads); /* copied at submit */
    karu_stats stats;
    CHECK_OK(karu_batch_stats(batch, &stats));
    CHECK(stats.reads == READS && stats.rejected == 0 && stats.transfers > LOCAL_READS);

    pthread_t threads[THREADS];
    size_t counts[THREADS] = {0};
    CHECK(pthread_barrier_init(&start, NULL, THREADS) == 0);
    for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&threads[t], NULL, drain, &counts[t]) == 0);
    size_t total = 0;
    for (int t = 0; t < THREADS; t++) {
        CHECK(pthread_join(threads[t], NULL) == 0);
        total += counts[t];
    }
    CHECK(total == READS);
    for (int i = 0; i < READS; i++) CHECK(atomic_load(&taken[i]) == 1);
    pthread_barrier_destroy(&start);

    karu_transport_stats transport;
    CHECK_OK(karu_client_transport_stats(client, &transport));
    CHECK_OK(karu_batch_free(batch));
    free(buffers);
    CHECK_OK(karu_locator_free(local));
    CHECK_OK(karu_locator_free(remote));
    CHECK_OK(karu_client_free(client));
    printf("remote_transfers=%" PRIu64 " hedges=%" PRIu64 "\n", stats.transfers - LOCAL_READS,
           transport.hedges);
    return 0;
}
