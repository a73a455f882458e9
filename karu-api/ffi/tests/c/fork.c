/* Fork safety through the C ABI (the data-loader pattern): a client built and used in the
   parent works in a forked child, which reads through its own engine and connections; a batch
   submitted in the parent answers KARU_ERR_INVALID in the child, and freeing it there leaves it
   allocated; in the parent, that batch and the client go on as if nothing happened.

   argv: LOCAL_FILE (1 MiB of pattern) OBJECT_URL (1 MiB of pattern) HELD_URL (4 KiB of
   pattern; the server holds a request for it until a second one arrives)
   stdin: a line once the server holds the parent's request (the fork happens then).
   exit status: 0, or the number of the failed step (the child's steps are 20 and up). */
#define _POSIX_C_SOURCE 200809L /* pthread barriers, fork, waitpid */

#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define STEP(n, cond)                \
    do {                             \
        if (!(cond)) _exit(n);       \
    } while (0)

/* Reads of local and remote ranges starting at `at` in the child; the step codes say which
   failed. Only Karu calls and _exit: the child runs nothing else of the parent's. */
static void child(karu_client *client, karu_batch *inherited, const char *local_path,
                  const char *object_url, uint64_t at) {
    karu_next next;
    karu_completion *done = NULL;
    size_t n = 0;
    karu_stats stats;
    /* The parent's batch belongs to the parent. */
    STEP(20, karu_batch_next(inherited, 0, &next, &done) == KARU_ERR_INVALID);
    STEP(21, karu_batch_wait(inherited, NULL, 0, &n) == KARU_ERR_INVALID);
    STEP(22, karu_batch_stats(inherited, &stats) == KARU_ERR_INVALID);
    STEP(23, karu_batch_cancel(inherited) == KARU_ERR_INVALID);
    STEP(24, karu_batch_free(inherited) == KARU_ERR_INVALID); /* left allocated until exit */
    char why[256];
    STEP(50, karu_batch_last_error(inherited, why, sizeof why, NULL) == KARU_OK);
    STEP(51, strstr(why, "before a fork") != NULL);

    /* The client works: new locators, a batch with both kinds of buffers, stat, a reader. */
    karu_locator *local = NULL, *remote = NULL;
    STEP(25, karu_client_locate(client, local_path, &local) == KARU_OK);
    STEP(26, karu_client_locate(client, object_url, &remote) == KARU_OK);
    uint8_t buffer[100];
    karu_read reads[3] = {
        read_of(remote, at, 100, buffer, 1),
        read_of(local, at, 50, NULL, 2),
        read_of(remote, at + 100000, 10, NULL, 3),
    };
    karu_batch *batch = NULL;
    karu_completion *completions[3];
    STEP(27, karu_client_submit(client, reads, 3, NULL, &batch) == KARU_OK);
    STEP(28, karu_batch_wait(batch, completions, 3, &n) == KARU_OK && n == 3);
    uint64_t offsets[3] = {at, at, at + 100000};
    for (int i = 0; i < 3; i++) {
        karu_status status = KARU_ERR_INTERNAL;
        const uint8_t *data = NULL;
        size_t len = 0;
        STEP(29, karu_completion_status(completions[i], &status) == KARU_OK && status == KARU_OK);
        STEP(30, karu_completion_data(completions[i], &data, &len) == KARU_OK);
        STEP(31, len == reads[i].length && is_pattern(data, offsets[i], len));
        karu_completion_free(completions[i]);
    }
    STEP(32, karu_batch_free(batch) == KARU_OK);
    karu_object_info info = {0};
    STEP(33, karu_client_stat(client, remote, &info) == KARU_OK && info.size == 1048576u);
    karu_object_info_clear(&info);
    karu_reader *reader = NULL;
    uint8_t bytes[16];
    size_t filled = 0;
    STEP(34, karu_reader_open(client, local, &reader) == KARU_OK);
    STEP(35, karu_reader_read_at(reader, at, bytes, 16, &filled) == KARU_OK && filled == 16);
    STEP(36, is_pattern(bytes, at, 16));
    karu_reader_free(reader);
    karu_locator_free(local);
    karu_locator_free(remote);
}

int main(int argc, char **argv) {
    CHECK(argc == 4);
    const char *local_path = argv[1], *object_url = argv[2], *held_url = argv[3];
    karu_client *client = test_client("io_threads = 1");
    karu_locator *local = test_locate(client, local_path);
    karu_locator *remote = test_locate(client, object_url);
    karu_locator *held = test_locate(client, held_url);

    /* The parent uses the client: file workers, an event loop, a pooled connection. */
    karu_read warm[2] = {read_of(remote, 10, 100, NULL, 1), read_of(local, 0, 16, NULL, 2)};
    karu_batch *batch = NULL;
    karu_completion *done[2];
    size_t n = 0;
    CHECK_OK(karu_client_submit(client, warm, 2, NULL, &batch));
    CHECK_OK(karu_batch_wait(batch, done, 2, &n));
    CHECK(n == 2);
    for (int i = 0; i < 2; i++) CHECK_OK(karu_completion_free(done[i]));
    CHECK_OK(karu_batch_free(batch));

    /* A batch in flight at the fork: its remote read is held by the server, its local one
       reads into a caller buffer. */
    uint8_t *caller = malloc(8);
    karu_read inflight[2] = {read_of(held, 0, 64, NULL, 70), read_of(local, 100, 8, caller, 71)};
    CHECK_OK(karu_client_submit(client, inflight, 2, NULL, &batch));
    char line[16];
    CHECK(fgets(line, sizeof line, stdin) != NULL); /* the server holds the request now */

    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        child(client, batch, local_path, object_url, 1000);
        /* A grandchild: the child's engine is another process's there in turn. */
        pid_t grandchild = fork();
        STEP(40, grandchild >= 0);
        if (grandchild == 0) {
            child(client, batch, local_path, object_url, 2000);
            _exit(0);
        }
        int status = 0;
        STEP(41, waitpid(grandchild, &status, 0) == grandchild);
        STEP(WIFEXITED(status) ? WEXITSTATUS(status) : 42, WIFEXITED(status) && WEXITSTATUS(status) == 0);
        STEP(43, karu_client_free(client) == KARU_OK); /* the parent's engine stays, leaked */
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "the child failed: %s %d\n", WIFEXITED(status) ? "step" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 1;
    }

    /* The parent's batch goes on: a second request for the held object releases both. */
    karu_read release = read_of(held, 1000, 10, NULL, 80);
    karu_batch *second = NULL;
    CHECK_OK(karu_client_submit(client, &release, 1, NULL, &second));
    CHECK_OK(karu_batch_wait(second, done, 1, &n));
    CHECK(n == 1);
    CHECK_OK(karu_completion_free(done[0]));
    CHECK_OK(karu_batch_free(second));
    CHECK_OK(karu_batch_wait(batch, done, 2, &n));
    CHECK(n == 2);
    for (int i = 0; i < 2; i++) {
        karu_status read_status;
        const uint8_t *data;
        size_t len;
        uint64_t tag;
        CHECK_OK(karu_completion_status(done[i], &read_status));
        CHECK_OK(karu_completion_tag(done[i], &tag));
        CHECK_OK(karu_completion_data(done[i], &data, &len));
        CHECK_STATUS(read_status, KARU_OK);
        CHECK(tag == (uint64_t)(70 + i));
        CHECK(tag == 70 ? len == 64 && is_pattern(data, 0, 64) : len == 8 && data == caller && is_pattern(caller, 100, 8));
        CHECK_OK(karu_completion_free(done[i]));
    }
    CHECK_OK(karu_batch_free(batch));
    free(caller);
    CHECK_OK(karu_locator_free(local));
    CHECK_OK(karu_locator_free(remote));
    CHECK_OK(karu_locator_free(held));
    CHECK_OK(karu_client_free(client));
    puts("fork: ok");
    return 0;
}
