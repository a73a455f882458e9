/* A credential callback in C: S3 reads signed with the key pair it returns, cached under the
   prefix it names (one call for many reads); a callback that refuses fails the reads with
   KARU_ERR_CREDENTIALS, naming it.

   argv: S3_ENDPOINT BUCKET   (objects "a" and "b" of 64 KiB of pattern; the mock accepts the
   key pair "AKIDCALLBACK" / "callback-secret") */
#define _POSIX_C_SOURCE 200809L /* pthread barriers, fork, waitpid */

#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

typedef struct {
    atomic_int calls;
    char last_path[256];
    pthread_mutex_t lock;
    int refuse;
} callback_state;

static uint32_t provide(void *ctx, const char *canonical_path, karu_credential_out *out) {
    callback_state *state = ctx;
    atomic_fetch_add(&state->calls, 1);
    pthread_mutex_lock(&state->lock);
    snprintf(state->last_path, sizeof state->last_path, "%s", canonical_path);
    pthread_mutex_unlock(&state->lock);
    if (state->refuse) return KARU_ERR_PERMISSION_DENIED;
    CHECK_OK(karu_credential_set_aws(out, "AKIDCALLBACK", "callback-secret", NULL));
    CHECK_OK(karu_credential_set_expiry(out, 4102444800u)); /* 2100-01-01 */
    /* Valid for the whole bucket: Karu caches it there. */
    char prefix[128];
    const char *bucket_end = strchr(canonical_path + strlen("s3://"), '/');
    CHECK(bucket_end != NULL);
    snprintf(prefix, sizeof prefix, "%.*s", (int)(bucket_end - canonical_path), canonical_path);
    CHECK_OK(karu_credential_set_prefix(out, prefix));
    /* Setters reject what is not a credential. */
    CHECK_STATUS(karu_credential_set_aws(out, NULL, "x", NULL), KARU_ERR_INVALID);
    return KARU_OK;
}

static karu_client *client_with(const char *endpoint, callback_state *state) {
    char toml[512];
    snprintf(toml, sizeof toml, "[s3]\nendpoint = \"%s\"\nregion = \"us-east-1\"\n", endpoint);
    karu_client_builder *builder = NULL;
    karu_client *client = NULL;
    CHECK_OK(karu_client_builder_new(&builder));
    CHECK_OK(karu_client_builder_user_config_file(builder, NULL));
    CHECK_OK(karu_client_builder_project_config_file(builder, NULL));
    CHECK_OK(karu_client_builder_config_toml(builder, toml));
    CHECK_STATUS(karu_client_builder_credential_callback(builder, "aws", NULL, state), KARU_ERR_INVALID);
    CHECK_OK(karu_client_builder_credential_callback(builder, "aws", provide, state));
    CHECK_OK(karu_client_builder_build(builder, &client));
    CHECK_OK(karu_client_builder_free(builder));
    return client;
}

int main(int argc, char **argv) {
    CHECK(argc == 3);
    const char *endpoint = argv[1], *bucket = argv[2];
    char a_address[256], b_address[256];
    snprintf(a_address, sizeof a_address, "s3://%s/a", bucket);
    snprintf(b_address, sizeof b_address, "s3://%s/b", bucket);

    callback_state state = {.refuse = 0};
    atomic_init(&state.calls, 0);
    pthread_mutex_init(&state.lock, NULL);
    karu_client *client = client_with(endpoint, &state);
    karu_locator *a = test_locate(client, a_address);
    karu_locator *b = test_locate(client, b_address);
    /* Two batches over two objects of one bucket: one callback call in all. */
    for (int round = 0; round < 2; round++) {
        uint8_t head[100];
        karu_read reads[3] = {
            read_of(a, 1000, 100, head, 1),
            read_of(b, 2000, 50, NULL, 2),
            read_of(b, 60000, 16, NULL, 3),
        };
        karu_batch *batch = NULL;
        CHECK_OK(karu_client_submit(client, reads, 3, NULL, &batch));
        karu_completion *done[3];
        size_t n = 0;
        CHECK_OK(karu_batch_wait(batch, done, 3, &n));
        CHECK(n == 3);
        uint64_t offsets[3] = {1000, 2000, 60000};
        for (int i = 0; i < 3; i++) {
            karu_status status;
            const uint8_t *data;
            size_t len;
            CHECK_OK(karu_completion_status(done[i], &status));
            CHECK_STATUS(status, KARU_OK);
            CHECK_OK(karu_completion_data(done[i], &data, &len));
            CHECK(len == reads[i].length && is_pattern(data, offsets[i], len));
            CHECK_OK(karu_completion_free(done[i]));
        }
        CHECK_OK(karu_batch_free(batch));
    }
    CHECK(atomic_load(&state.calls) == 1);
    CHECK(strncmp(state.last_path, "s3://", 5) == 0 && strstr(state.last_path, bucket) != NULL);
    CHECK_OK(karu_locator_free(a));
    CHECK_OK(karu_locator_free(b));
    CHECK_OK(karu_client_free(client));

    /* A callback that refuses: the read fails with KARU_ERR_CREDENTIALS, saying why. */
    callback_state refusing = {.refuse = 1};
    atomic_init(&refusing.calls, 0);
    pthread_mutex_init(&refusing.lock, NULL);
    client = client_with(endpoint, &refusing);
    a = test_locate(client, a_address);
    karu_read read = read_of(a, 0, 10, NULL, 7);
    karu_batch *batch = NULL;
    CHECK_OK(karu_client_submit(client, &read, 1, NULL, &batch));
    karu_completion *done = NULL;
    size_t n = 0;
    CHECK_OK(karu_batch_wait(batch, &done, 1, &n));
    CHECK(n == 1);
    karu_status status;
    const char *message = NULL;
    CHECK_OK(karu_completion_status(done, &status));
    CHECK_STATUS(status, KARU_ERR_CREDENTIALS);
    CHECK_OK(karu_completion_message(done, &message));
    CHECK(message != NULL && strstr(message, "credential callback answered permission_denied") != NULL);
    CHECK(atomic_load(&refusing.calls) >= 1);
    CHECK_OK(karu_completion_free(done));
    CHECK_OK(karu_batch_free(batch));
    CHECK_OK(karu_locator_free(a));
    CHECK_OK(karu_client_free(client));
    pthread_mutex_destroy(&state.lock);
    pthread_mutex_destroy(&refusing.lock);
    puts("credentials: ok");
    return 0;
}
