/* Local and HTTP reads through the C ABI: Karu-allocated and caller buffers, windows, invalid
   reads (each failing alone), the end of an object, a missing object, planner overrides,
   karu_batch_wait, stat, read_ends, if_match, configuration errors, NULL arguments.

   argv: LOCAL_FILE (1 MiB of pattern) OBJECT_URL (1 MiB of pattern) MISSING_URL (404)
   Prints the remote object's last_modified (`remote_last_modified=SECONDS`), which the driver
   checks against when the mock server stored it. */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>

#include "check.h"

#define SIZE 1048576u

/* Take every completion of `batch` with karu_batch_next, indexed by tag - base. */
static void drain(karu_batch *batch, karu_completion **by_tag, uint64_t base, size_t n) {
    for (;;) {
        karu_next next;
        karu_completion *done = NULL;
        CHECK_OK(karu_batch_next(batch, 30000, &next, &done));
        if (next == KARU_NEXT_DRAINED) break;
        CHECK(next == KARU_NEXT_COMPLETION && done != NULL);
        uint64_t tag;
        CHECK_OK(karu_completion_tag(done, &tag));
        CHECK(tag >= base && tag < base + n && by_tag[tag - base] == NULL);
        by_tag[tag - base] = done;
    }
}

static karu_status status_of(const karu_completion *done) {
    karu_status status;
    CHECK_OK(karu_completion_status(done, &status));
    return status;
}

/* The completion delivered exactly the pattern of [offset, offset + len). */
static void check_bytes(const karu_completion *done, uint64_t offset, size_t len) {
    const uint8_t *data = NULL;
    size_t got = 0;
    uint64_t received = 0;
    CHECK_STATUS(status_of(done), KARU_OK);
    CHECK_OK(karu_completion_bytes_received(done, &received));
    CHECK_OK(karu_completion_data(done, &data, &got));
    CHECK(received == len && got == len && data != NULL);
    CHECK(is_pattern(data, offset, len));
    const char *message = "x";
    CHECK_OK(karu_completion_message(done, &message));
    CHECK(message == NULL);
}

static void nulls_are_invalid(karu_client *client, karu_locator *local) {
    karu_locator *locator = NULL;
    karu_batch *batch = NULL;
    karu_completion *done = NULL;
    karu_next next;
    uint64_t u64;
    size_t n;
    CHECK_STATUS(karu_client_builder_new(NULL), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_builder_build(NULL, NULL), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_builder_set(NULL, "a", "b"), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_locate(NULL, "/x", &locator), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_locate(client, NULL, &locator), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_locate(client, "/x", NULL), KARU_ERR_INVALID);
    CHECK_STATUS(karu_locator_with_window(NULL, 0, 1, &locator), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_submit(NULL, NULL, 0, NULL, &batch), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_submit(client, NULL, 0, NULL, NULL), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_submit(client, NULL, 3, NULL, &batch), KARU_ERR_INVALID);
    CHECK_STATUS(karu_batch_next(NULL, 0, &next, &done), KARU_ERR_INVALID);
    CHECK_STATUS(karu_batch_wait(NULL, NULL, 0, &n), KARU_ERR_INVALID);
    CHECK_STATUS(karu_batch_stats(NULL, NULL), KARU_ERR_INVALID);
    CHECK_STATUS(karu_batch_cancel(NULL), KARU_ERR_INVALID);
    CHECK_STATUS(karu_completion_tag(NULL, &u64), KARU_ERR_INVALID);
    CHECK_STATUS(karu_completion_take_buffer(NULL, NULL, NULL), KARU_ERR_INVALID);
    karu_object_info info = {.size = 1};
    CHECK_STATUS(karu_client_stat(client, NULL, &info), KARU_ERR_INVALID);
    CHECK(info.size == 0 && info.etag == NULL && !info.last_modified.known); /* set empty */
    CHECK_STATUS(karu_client_stat(client, local, NULL), KARU_ERR_INVALID);
    CHECK_OK(karu_object_info_clear(NULL));
    CHECK_STATUS(karu_client_read_ends(NULL, local, 1, 1, NULL), KARU_ERR_INVALID);
    CHECK_STATUS(karu_reader_read_at(NULL, 0, NULL, 0, &n), KARU_ERR_INVALID);
    CHECK_STATUS(karu_reader_size(NULL, &u64), KARU_ERR_INVALID);
    CHECK_STATUS(karu_client_last_error(client, NULL, 8, NULL), KARU_ERR_INVALID);
    CHECK_STATUS(karu_free(NULL, 4), KARU_ERR_INVALID);
    /* Releasing NULL is allowed, as free(NULL) is. */
    CHECK_OK(karu_free(NULL, 0));
    CHECK_OK(karu_batch_free(NULL));
    CHECK_OK(karu_completion_free(NULL));
    CHECK_OK(karu_locator_free(NULL));
    CHECK_OK(karu_client_free(NULL));
    CHECK_OK(karu_client_builder_free(NULL));
    CHECK_OK(karu_reader_free(NULL));
    CHECK_OK(karu_ends_free(NULL));
}

static void configuration_errors_are_explained(void) {
    karu_client_builder *builder = NULL;
    karu_client *client = NULL;
    char message[512];
    size_t len = 0;
    CHECK_OK(karu_client_builder_new(&builder));
    CHECK_OK(karu_client_builder_user_config_file(builder, NULL));
    CHECK_OK(karu_client_builder_project_config_file(builder, NULL));
    CHECK_OK(karu_client_builder_config_toml(builder, "file_workers = 2\n[planner]\nmax_gapp = 1\n"));
    CHECK_STATUS(karu_client_builder_build(builder, &client), KARU_ERR_INVALID);
    CHECK(client == NULL);
    CHECK_OK(karu_client_builder_last_error(builder, message, sizeof message, &len));
    CHECK(len == strlen(message) && len > 0);
    /* It names the text and the line of the mistake. */
    CHECK(strstr(message, "karu_client_builder_config_toml:3") != NULL);
    CHECK(strstr(message, "max_gapp") != NULL);
    /* A buffer too small gets a truncated, terminated copy and the whole length. */
    char small[8];
    size_t whole = 0;
    CHECK_OK(karu_client_builder_last_error(builder, small, sizeof small, &whole));
    CHECK(whole == len && strlen(small) == 7 && strncmp(small, message, 7) == 0);
    /* A bad value set by key is reported at build too. */
    CHECK_OK(karu_client_builder_free(builder));
    CHECK_OK(karu_client_builder_new(&builder));
    CHECK_OK(karu_client_builder_user_config_file(builder, NULL));
    CHECK_OK(karu_client_builder_project_config_file(builder, NULL));
    CHECK_OK(karu_client_builder_set(builder, "io_threads", "many"));
    CHECK_STATUS(karu_client_builder_build(builder, &client), KARU_ERR_INVALID);
    CHECK_OK(karu_client_builder_last_error(builder, message, sizeof message, NULL));
    CHECK(strstr(message, "io_threads") != NULL);
    CHECK_OK(karu_client_builder_free(builder));
}

int main(int argc, char **argv) {
    CHECK(argc == 4);
    const char *local_path = argv[1], *object_url = argv[2], *missing_url = argv[3];
    CHECK(strcmp(karu_status_name(KARU_ERR_RANGE_NOT_SATISFIABLE), "range_not_satisfiable") == 0);
    CHECK(strcmp(karu_status_name(1000), "unknown") == 0);
    CHECK(strlen(karu_version()) > 0);
    configuration_errors_are_explained();

    karu_client *client = test_client("file_workers = 2\n[planner]\nmax_gap = \"64KiB\"\n");
    karu_locator *local = test_locate(client, local_path);
    karu_locator *remote = test_locate(client, object_url);
    karu_locator *missing = test_locate(client, missing_url);
    nulls_are_invalid(client, local);

    /* An address no backend serves: the client's last error (of this thread) says why. */
    karu_locator *nowhere = NULL;
    CHECK_STATUS(karu_client_locate(client, "gopher://example/x", &nowhere), KARU_ERR_UNSUPPORTED);
    char message[512];
    CHECK_OK(karu_client_last_error(client, message, sizeof message, NULL));
    CHECK(strstr(message, "gopher") != NULL);

    /* Windows: [1000, +5000) of the file, [500000, +1000) of the object. */
    karu_locator *local_window = NULL, *remote_window = NULL, *bad_window = NULL;
    CHECK_OK(karu_locator_with_window(local, 1000, 5000, &local_window));
    CHECK_OK(karu_locator_with_window(remote, 500000, 1000, &remote_window));
    CHECK_STATUS(karu_locator_with_window(local_window, 4000, 2000, &bad_window), KARU_ERR_INVALID_RANGE);
    CHECK(bad_window == NULL);
    char window_error[256];
    CHECK_OK(karu_locator_last_error(local_window, window_error, sizeof window_error, NULL));
    CHECK(strstr(window_error, "window") != NULL);
    CHECK_OK(karu_locator_last_error(local, window_error, sizeof window_error, NULL));
    CHECK(window_error[0] == '\0'); /* each locator its own */
    char name[256];
    size_t name_len = 0;
    CHECK_OK(karu_locator_name(local_window, name, sizeof name, &name_len));
    CHECK(strstr(name, "[1000, +5000)") != NULL && name_len == strlen(name));

    /* Stat: sizes, the object's strong ETag and its modification time. A window's size is
       what it shows of the object (its length, clipped to what exists); its stat probes the
       object like any other. */
    karu_object_info info = {0};
    CHECK_OK(karu_client_stat(client, local, &info));
    CHECK(info.size == SIZE && info.etag == NULL);
    /* The local file's modification time, to the nanosecond, as stat(2) states it. */
    struct stat file;
    CHECK(stat(local_path, &file) == 0);
    CHECK(info.last_modified.known);
    CHECK(info.last_modified.seconds == (int64_t)file.st_mtim.tv_sec);
    CHECK(info.last_modified.nanoseconds == (uint32_t)file.st_mtim.tv_nsec);
    CHECK_OK(karu_object_info_clear(&info));
    CHECK(info.size == 0 && !info.last_modified.known);
    CHECK_OK(karu_client_stat(client, local_window, &info));
    CHECK(info.size == 5000 && info.etag == NULL);
    CHECK_OK(karu_client_stat(client, remote, &info));
    CHECK(info.size == SIZE && info.etag != NULL && info.etag[0] == '"' && strlen(info.etag) > 2);
    /* The mock's Last-Modified (whole seconds): the driver checks its value. */
    CHECK(info.last_modified.known && info.last_modified.nanoseconds == 0);
    printf("remote_last_modified=%" PRId64 "\n", info.last_modified.seconds);
    int64_t remote_modified = info.last_modified.seconds;
    char etag[128];
    CHECK(strlen(info.etag) < sizeof etag);
    strcpy(etag, info.etag);
    CHECK_OK(karu_object_info_clear(&info));
    CHECK(info.etag == NULL);
    CHECK_OK(karu_object_info_clear(&info)); /* clearing an empty info does nothing */
    CHECK_STATUS(karu_client_stat(client, missing, &info), KARU_ERR_NOT_FOUND);
    CHECK(info.size == 0 && info.etag == NULL && !info.last_modified.known);
    karu_locator *past_end = NULL, *remote_past_end = NULL, *missing_window = NULL;
    CHECK_OK(karu_locator_with_window(local, SIZE - 10, 100, &past_end));
    CHECK_OK(karu_locator_with_window(remote, SIZE - 3, 100, &remote_past_end));
    CHECK_OK(karu_locator_with_window(missing, 0, 4, &missing_window));
    CHECK_OK(karu_client_stat(client, past_end, &info));
    CHECK(info.size == 10);
    CHECK_OK(karu_client_stat(client, remote_past_end, &info));
    CHECK(info.size == 3 && info.etag != NULL && strcmp(info.etag, etag) == 0);
    CHECK(info.last_modified.known && info.last_modified.seconds == remote_modified);
    CHECK_OK(karu_object_info_clear(&info));
    CHECK_STATUS(karu_client_stat(client, missing_window, &info), KARU_ERR_NOT_FOUND);
    CHECK_OK(karu_locator_free(past_end));
    CHECK_OK(karu_locator_free(remote_past_end));
    CHECK_OK(karu_locator_free(missing_window));
    uint64_t size = 0;

    /* One batch: every kind of read, each with its own outcome. */
    uint8_t *caller_remote = malloc(50), *caller_local = malloc(4096), *caller_end = malloc(100);
    memset(caller_end, 0xEE, 100);
    karu_read reads[12] = {
        read_of(remote, 100, 50, NULL, 10),                  /* merged with the next one */
        read_of(remote, 200, 50, caller_remote, 11),
        read_of(local, 0, 64, NULL, 12),
        read_of(local, 4096, 4096, caller_local, 13),
        read_of(local_window, 10, 100, NULL, 14),            /* bytes 1010.. of the file */
        read_of(local, 5, 0, NULL, 15),                      /* zero length */
        read_of(local_window, 4990, 20, NULL, 16),           /* leaves its window */
        read_of(local, UINT64_MAX - 5, 10, NULL, 17),        /* offset + length overflows */
        read_of(local, SIZE - 10, 100, caller_end, 18),      /* the file ends after 10 bytes */
        read_of(missing, 0, 10, NULL, 19),                   /* 404 */
        read_of(local, 0, 10, NULL, 20),                     /* if_match on a local file */
        read_of(local, 8, 0, caller_end, 21),                /* zero length into a buffer */
    };
    reads[10].if_match = "\"abc\"";
    karu_batch *batch = NULL;
    CHECK_OK(karu_client_submit(client, reads, 12, NULL, &batch));
    karu_stats stats;
    CHECK_OK(karu_batch_stats(batch, &stats));
    CHECK(stats.reads == 12 && stats.rejected == 5);
    karu_completion *done[12] = {0};
    drain(batch, done, 10, 12);
    for (int i = 0; i < 12; i++) CHECK(done[i] != NULL);
    check_bytes(done[0], 100, 50);
    check_bytes(done[1], 200, 50);
    check_bytes(done[2], 0, 64);
    check_bytes(done[3], 4096, 4096);
    check_bytes(done[4], 1010, 100);
    const uint8_t *data = NULL;
    size_t len = 0;
    /* A caller buffer's data is the buffer itself. */
    CHECK_OK(karu_completion_data(done[1], &data, &len));
    CHECK(data == caller_remote && len == 50 && is_pattern(caller_remote, 200, 50));
    CHECK(is_pattern(caller_local, 4096, 4096));
    CHECK_STATUS(status_of(done[5]), KARU_ERR_INVALID_RANGE);
    CHECK_STATUS(status_of(done[6]), KARU_ERR_INVALID_RANGE);
    CHECK_STATUS(status_of(done[7]), KARU_ERR_INVALID_RANGE);
    CHECK_STATUS(status_of(done[11]), KARU_ERR_INVALID_RANGE);
    /* The end of the object: the 10 bytes that exist are a valid prefix. */
    uint64_t received = 0;
    CHECK_STATUS(status_of(done[8]), KARU_ERR_RANGE_NOT_SATISFIABLE);
    CHECK_OK(karu_completion_bytes_received(done[8], &received));
    CHECK(received == 10 && is_pattern(caller_end, SIZE - 10, 10));
    const char *why = NULL;
    CHECK_OK(karu_completion_message(done[8], &why));
    CHECK(why != NULL && strlen(why) > 0);
    uint16_t http = 0;
    CHECK_STATUS(status_of(done[9]), KARU_ERR_NOT_FOUND);
    CHECK_OK(karu_completion_http_status(done[9], &http));
    CHECK(http == 404);
    CHECK_STATUS(status_of(done[10]), KARU_ERR_INVALID);
    /* Taking a Karu-allocated buffer: the caller's now, released with karu_free. */
    uint8_t *taken = NULL;
    size_t taken_len = 0;
    CHECK_OK(karu_completion_take_buffer(done[2], &taken, &taken_len));
    CHECK(taken_len == 64 && is_pattern(taken, 0, 64));
    CHECK_OK(karu_completion_data(done[2], &data, &len));
    CHECK(data == NULL && len == 0);
    CHECK_STATUS(karu_completion_take_buffer(done[2], &taken, &taken_len), KARU_ERR_INVALID);
    CHECK_STATUS(karu_completion_take_buffer(done[1], &taken, &taken_len), KARU_ERR_INVALID);
    size_t index = 99;
    CHECK_OK(karu_completion_index(done[4], &index));
    CHECK(index == 4);
    for (int i = 0; i < 12; i++) CHECK_OK(karu_completion_free(done[i]));
    CHECK_OK(karu_batch_free(batch));
    CHECK_OK(karu_free(taken, 64));
    /* The batch is released: the caller buffers are the caller's again. */
    free(caller_remote);
    free(caller_local);
    free(caller_end);

    /* Malformed arrays are refused whole, naming the read. */
    uint8_t overlap[16];
    karu_read bad[2] = {read_of(local, 0, 10, overlap, 1), read_of(local, 0, 10, overlap + 5, 2)};
    CHECK_STATUS(karu_client_submit(client, bad, 2, NULL, &batch), KARU_ERR_INVALID);
    CHECK_OK(karu_client_last_error(client, message, sizeof message, NULL));
    CHECK(strstr(message, "reads 0 and 1 have overlapping destinations") != NULL);
    bad[1] = read_of(NULL, 0, 10, NULL, 2);
    CHECK_STATUS(karu_client_submit(client, bad, 2, NULL, &batch), KARU_ERR_INVALID);
    CHECK_OK(karu_client_last_error(client, message, sizeof message, NULL));
    CHECK(strstr(message, "read 1 has no locator") != NULL);

    /* Planner overrides: no merging, so two adjacent ranges are two requests; then
       karu_batch_wait hands over what fits, in submission order, and keeps the rest. */
    karu_read adjacent[2] = {read_of(remote, 300000, 10, NULL, 30), read_of(remote, 300010, 10, NULL, 31)};
    karu_batch_options no_merging = {0};
    no_merging.fields = KARU_OPT_MAX_GAP;
    no_merging.max_gap = 0;
    CHECK_OK(karu_client_submit(client, adjacent, 2, &no_merging, &batch));
    CHECK_OK(karu_batch_stats(batch, &stats));
    CHECK(stats.transfers == 2);
    karu_completion *first[1] = {NULL};
    size_t count = 0;
    CHECK_OK(karu_batch_wait(batch, first, 1, &count));
    CHECK(count == 1);
    uint64_t tag = 0;
    CHECK_OK(karu_completion_tag(first[0], &tag));
    CHECK(tag == 30);
    check_bytes(first[0], 300000, 10);
    karu_next next;
    karu_completion *second = NULL;
    CHECK_OK(karu_batch_next(batch, 0, &next, &second));
    CHECK(next == KARU_NEXT_COMPLETION);
    check_bytes(second, 300010, 10);
    CHECK_OK(karu_completion_free(second));
    CHECK_OK(karu_batch_next(batch, 0, &next, &second));
    CHECK(next == KARU_NEXT_DRAINED);
    CHECK_OK(karu_batch_wait(batch, NULL, 0, &count));
    CHECK(count == 0);
    CHECK_OK(karu_completion_free(first[0]));
    CHECK_OK(karu_batch_free(batch));

    /* Pinned versions: the stat's ETag matches, another one fails that read alone. */
    karu_read pinned[2] = {read_of(remote_window, 0, 16, NULL, 40), read_of(remote, 600000, 8, NULL, 41)};
    pinned[0].if_match = etag;
    pinned[1].if_match = "\"another-version\"";
    CHECK_OK(karu_client_submit(client, pinned, 2, NULL, &batch));
    karu_completion *versions[2] = {0};
    drain(batch, versions, 40, 2);
    check_bytes(versions[0], 500000, 16);
    CHECK_STATUS(status_of(versions[1]), KARU_ERR_PRECONDITION_FAILED);
    CHECK_OK(karu_completion_free(versions[0]));
    CHECK_OK(karu_completion_free(versions[1]));
    CHECK_OK(karu_batch_free(batch));

    /* Both ends, local and remote. */
    karu_locator *sources[2] = {local, remote};
    for (int i = 0; i < 2; i++) {
        karu_ends *ends = NULL;
        const uint8_t *head = NULL, *tail = NULL;
        size_t head_len = 0, tail_len = 0;
        const char *ends_etag = NULL;
        CHECK_OK(karu_client_read_ends(client, sources[i], 16, 32, &ends));
        CHECK_OK(karu_ends_size(ends, &size));
        CHECK_OK(karu_ends_head(ends, &head, &head_len));
        CHECK_OK(karu_ends_tail(ends, &tail, &tail_len));
        CHECK_OK(karu_ends_etag(ends, &ends_etag));
        CHECK(size == SIZE && head_len == 16 && tail_len == 32);
        CHECK(is_pattern(head, 0, 16) && is_pattern(tail, SIZE - 32, 32));
        CHECK(i == 0 ? ends_etag == NULL : strcmp(ends_etag, etag) == 0);
        CHECK_OK(karu_ends_free(ends));
    }

    /* Cancelling a batch: every read still completes, and the batch is released. */
    karu_read late[1] = {read_of(local, 0, 8, NULL, 50)};
    CHECK_OK(karu_client_submit(client, late, 1, NULL, &batch));
    CHECK_OK(karu_batch_cancel(batch));
    CHECK_OK(karu_batch_wait(batch, first, 1, &count));
    CHECK(count == 1);
    karu_status late_status = status_of(first[0]);
    CHECK(late_status == KARU_OK || late_status == KARU_ERR_CANCELLED);
    CHECK_OK(karu_completion_free(first[0]));
    CHECK_OK(karu_batch_free(batch));

    /* The client's transport counters: every request above (see the test's list), none
     * retried or duplicated. */
    karu_transport_stats transport;
    CHECK_STATUS(karu_client_transport_stats(NULL, &transport), KARU_ERR_INVALID);
    CHECK_OK(karu_client_transport_stats(client, &transport));
    CHECK(transport.requests == 12 && transport.retries == 0);
    CHECK(transport.hedges == 0 && transport.hedges_won == 0 && transport.body_bytes > 0);

    CHECK_OK(karu_locator_free(local_window));
    CHECK_OK(karu_locator_free(remote_window));
    CHECK_OK(karu_locator_free(local));
    CHECK_OK(karu_locator_free(remote));
    CHECK_OK(karu_locator_free(missing));
    CHECK_OK(karu_client_free(client));
    puts("reads: ok");
    return 0;
}
