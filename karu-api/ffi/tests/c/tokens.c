/* Bearer-token credential callbacks in C, one per family that takes a token ("gcp", "azure",
   "hf"): each sets the token it is given with karu_credential_set_bearer_token, an expiry and the
   prefix of its bucket, container or repository, so that two batches over two objects there
   call it once. A callback that sets a token for the "aws" family, or a key pair for "gcp",
   fails its reads with KARU_ERR_CREDENTIALS, naming what the family takes.

   argv: GCS_ENDPOINT GCS_TOKEN AZURE_ENDPOINT AZURE_ACCOUNT AZURE_TOKEN HF_ENDPOINT HF_TOKEN
   S3_ENDPOINT
   (objects "gs://bkt/{a,b}", "az://data/{a,b}" and "hf://org/model/{a,b}" of 64 KiB of
   pattern; "s3://bucket/a" likewise) */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>

#include "check.h"

typedef struct {
    const char *token;
    const char *prefix;
    atomic_int calls;
    int keys_instead; /* set an AWS key pair instead of the token */
} token_callback;

static uint32_t provide(void *ctx, const char *canonical_path, karu_credential_out *out) {
    token_callback *state = ctx;
    atomic_fetch_add(&state->calls, 1);
    if (state->keys_instead) {
        CHECK_OK(karu_credential_set_aws(out, "AKID", "secret", NULL));
        return KARU_OK;
    }
    CHECK_STATUS(karu_credential_set_bearer_token(out, NULL), KARU_ERR_INVALID);
    CHECK_OK(karu_credential_set_bearer_token(out, state->token));
    CHECK_OK(karu_credential_set_expiry(out, 4102444800u)); /* 2100-01-01 */
    CHECK(strncmp(canonical_path, state->prefix, strlen(state->prefix)) == 0);
    CHECK_OK(karu_credential_set_prefix(out, state->prefix));
    return KARU_OK;
}

/* Two batches of three reads over objects "a" and "b" under `base`: each read's bytes. */
static void read_twice(karu_client *client, const char *base) {
    char a_address[256], b_address[256];
    snprintf(a_address, sizeof a_address, "%s/a", base);
    snprintf(b_address, sizeof b_address, "%s/b", base);
    karu_locator *a = test_locate(client, a_address);
    karu_locator *b = test_locate(client, b_address);
    for (int round = 0; round < 2; round++) {
        karu_read reads[3] = {
            read_of(a, 1000, 100, NULL, 1),
            read_of(b, 2000, 50, NULL, 2),
            read_of(b, 60000, 16, NULL, 3),
        };
        karu_batch *batch = NULL;
        CHECK_OK(karu_client_submit(client, reads, 3, NULL, &batch));
        karu_completion *done[3];
        size_t n = 0;
        CHECK_OK(karu_batch_wait(batch, done, 3, &n));
        CHECK(n == 3);
        for (size_t i = 0; i < n; i++) {
            karu_status status;
            const uint8_t *data;
            size_t len;
            uint64_t tag;
            CHECK_OK(karu_completion_status(done[i], &status));
            if (status != KARU_OK) {
                const char *message = NULL;
                karu_completion_message(done[i], &message);
                fprintf(stderr, "%s: %s: %s\n", base, karu_status_name(status), message);
            }
            CHECK_STATUS(status, KARU_OK);
            CHECK_OK(karu_completion_tag(done[i], &tag));
            CHECK_OK(karu_completion_data(done[i], &data, &len));
            CHECK(len == reads[tag - 1].length && is_pattern(data, reads[tag - 1].offset, len));
            CHECK_OK(karu_completion_free(done[i]));
        }
        CHECK_OK(karu_batch_free(batch));
    }
    CHECK_OK(karu_locator_free(a));
    CHECK_OK(karu_locator_free(b));
}

/* One read of `address` by a client whose `family` callback is `state`: its status and
   message (copied into `message`). */
static karu_status read_one(const char *toml, const char *family, token_callback *state,
                            const char *address, char *message, size_t cap) {
    karu_client_builder *builder = test_builder();
    CHECK_OK(karu_client_builder_config_toml(builder, toml));
    CHECK_OK(karu_client_builder_credential_callback(builder, family, provide, state));
    karu_client *client = test_build(builder);
    karu_locator *object = test_locate(client, address);
    karu_read read = read_of(object, 0, 10, NULL, 1);
    karu_batch *batch = NULL;
    CHECK_OK(karu_client_submit(client, &read, 1, NULL, &batch));
    karu_completion *done = NULL;
    size_t n = 0;
    CHECK_OK(karu_batch_wait(batch, &done, 1, &n));
    CHECK(n == 1);
    karu_status status;
    const char *text = NULL;
    CHECK_OK(karu_completion_status(done, &status));
    CHECK_OK(karu_completion_message(done, &text));
    snprintf(message, cap, "%s", text ? text : "");
    CHECK_OK(karu_completion_free(done));
    CHECK_OK(karu_batch_free(batch));
    CHECK_OK(karu_locator_free(object));
    CHECK_OK(karu_client_free(client));
    return status;
}

int main(int argc, char **argv) {
    CHECK(argc == 9);
    const char *gcs_endpoint = argv[1], *gcs_token = argv[2];
    const char *azure_endpoint = argv[3], *azure_account = argv[4], *azure_token = argv[5];
    const char *hf_endpoint = argv[6], *hf_token = argv[7], *s3_endpoint = argv[8];

    char toml[1024];
    snprintf(toml, sizeof toml,
             "[gcs]\nendpoint = \"%s\"\n[azure]\nendpoint = \"%s\"\naccount = \"%s\"\n"
             "[hf]\nendpoint = \"%s\"\n[s3]\nendpoint = \"%s\"\nregion = \"us-east-1\"\n",
             gcs_endpoint, azure_endpoint, azure_account, hf_endpoint, s3_endpoint);
    token_callback gcp = {.token = gcs_token, .prefix = "gs://bkt"};
    token_callback azure = {.token = azure_token, .prefix = "az://data"};
    token_callback hf = {.token = hf_token, .prefix = "hf://org/model@main"};
    atomic_init(&gcp.calls, 0);
    atomic_init(&azure.calls, 0);
    atomic_init(&hf.calls, 0);
    karu_client_builder *builder = test_builder();
    CHECK_OK(karu_client_builder_config_toml(builder, toml));
    CHECK_OK(karu_client_builder_credential_callback(builder, "gcp", provide, &gcp));
    CHECK_OK(karu_client_builder_credential_callback(builder, "azure", provide, &azure));
    CHECK_OK(karu_client_builder_credential_callback(builder, "hf", provide, &hf));
    karu_client *client = test_build(builder);
    read_twice(client, "gs://bkt");
    read_twice(client, "az://data");
    read_twice(client, "hf://org/model");
    CHECK(atomic_load(&gcp.calls) == 1);
    CHECK(atomic_load(&azure.calls) == 1);
    CHECK(atomic_load(&hf.calls) == 1);
    CHECK_OK(karu_client_free(client));

    /* A token for the "aws" family, and a key pair for "gcp": refused, naming what it takes;
       no request is sent. */
    char message[512];
    token_callback aws_token = {.token = "not-for-s3", .prefix = "s3://bucket"};
    atomic_init(&aws_token.calls, 0);
    CHECK_STATUS(read_one(toml, "aws", &aws_token, "s3://bucket/a", message, sizeof message),
                 KARU_ERR_CREDENTIALS);
    CHECK(strstr(message, "karu_credential_set_aws") != NULL);
    CHECK(strstr(message, "not-for-s3") == NULL);
    token_callback gcp_keys = {.token = "unused", .prefix = "gs://bkt", .keys_instead = 1};
    atomic_init(&gcp_keys.calls, 0);
    CHECK_STATUS(read_one(toml, "gcp", &gcp_keys, "gs://bkt/a", message, sizeof message),
                 KARU_ERR_CREDENTIALS);
    CHECK(strstr(message, "karu_credential_set_bearer_token") != NULL);
    puts("tokens: ok");
    return 0;
}
