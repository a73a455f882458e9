# The C ABI's baseline (`cargo xtask abi --bless` writes it; `cargo xtask test` checks it).
#define KARU_OPT_MAX_AMPLIFICATION (1 << 3)
#define KARU_OPT_MAX_GAP 1
#define KARU_OPT_MAX_PARTS (1 << 2)
#define KARU_OPT_MAX_SPAN (1 << 1)
#define KARU_OPT_ONE_VERSION (1 << 4)
#define KARU_SIZE_UNKNOWN UINT64_MAX
#define KARU_TO_END UINT64_MAX
const char *karu_status_name(uint32_t status);
const char *karu_version(void);
enum karu_next : uint32_t { KARU_NEXT_COMPLETION = 0, KARU_NEXT_TIMED_OUT = 1, KARU_NEXT_DRAINED = 2, };
enum karu_status : uint32_t { KARU_OK = 0, KARU_ERR_INVALID = 1, KARU_ERR_INVALID_RANGE = 2, KARU_ERR_RANGE_NOT_SATISFIABLE = 3, KARU_ERR_NOT_FOUND = 4, KARU_ERR_PERMISSION_DENIED = 5, KARU_ERR_IS_DIRECTORY = 6, KARU_ERR_PRECONDITION_FAILED = 7, KARU_ERR_CREDENTIALS = 8, KARU_ERR_HTTP = 9, KARU_ERR_NETWORK = 10, KARU_ERR_TIMED_OUT = 11, KARU_ERR_PROTOCOL = 12, KARU_ERR_CANCELLED = 13, KARU_ERR_UNSUPPORTED = 14, KARU_ERR_IO = 15, KARU_ERR_INTERNAL = 16, };
karu_status karu_batch_cancel(const struct karu_batch *batch);
karu_status karu_batch_free(struct karu_batch *batch);
karu_status karu_batch_last_error(const struct karu_batch *batch, char *buffer, size_t capacity, size_t *out_len);
karu_status karu_batch_next(const struct karu_batch *batch, uint64_t timeout_ms, karu_next *out_next, struct karu_completion **out_completion);
karu_status karu_batch_stats(const struct karu_batch *batch, struct karu_stats *out_stats);
karu_status karu_batch_wait(const struct karu_batch *batch, struct karu_completion **out, size_t capacity, size_t *out_count);
karu_status karu_client_builder_build(struct karu_client_builder *builder, struct karu_client **out_client);
karu_status karu_client_builder_config_file(struct karu_client_builder *builder, const char *path);
karu_status karu_client_builder_config_toml(struct karu_client_builder *builder, const char *toml);
karu_status karu_client_builder_credential_callback(struct karu_client_builder *builder, const char *family, karu_credential_callback callback, void *ctx);
karu_status karu_client_builder_free(struct karu_client_builder *builder);
karu_status karu_client_builder_last_error(const struct karu_client_builder *builder, char *buffer, size_t capacity, size_t *out_len);
karu_status karu_client_builder_new(struct karu_client_builder **out_builder);
karu_status karu_client_builder_project_config_file(struct karu_client_builder *builder, const char *path);
karu_status karu_client_builder_set(struct karu_client_builder *builder, const char *key, const char *value);
karu_status karu_client_builder_user_config_file(struct karu_client_builder *builder, const char *path);
karu_status karu_client_free(struct karu_client *client);
karu_status karu_client_last_error(const struct karu_client *client, char *buffer, size_t capacity, size_t *out_len);
karu_status karu_client_locate(const struct karu_client *client, const char *address, struct karu_locator **out_locator);
karu_status karu_client_read_ends(const struct karu_client *client, const struct karu_locator *locator, uint64_t head_len, uint64_t tail_len, struct karu_ends **out_ends);
karu_status karu_client_stat(const struct karu_client *client, const struct karu_locator *locator, struct karu_object_info *out_info);
karu_status karu_client_submit(const struct karu_client *client, const struct karu_read *reads, size_t count, const struct karu_batch_options *options, struct karu_batch **out_batch);
karu_status karu_client_transport_stats(const struct karu_client *client, struct karu_transport_stats *out_stats);
karu_status karu_completion_bytes_received(const struct karu_completion *completion, uint64_t *out_bytes);
karu_status karu_completion_data(const struct karu_completion *completion, const uint8_t **out_data, size_t *out_len);
karu_status karu_completion_free(struct karu_completion *completion);
karu_status karu_completion_http_status(const struct karu_completion *completion, uint16_t *out_http_status);
karu_status karu_completion_index(const struct karu_completion *completion, size_t *out_index);
karu_status karu_completion_message(const struct karu_completion *completion, const char **out_message);
karu_status karu_completion_status(const struct karu_completion *completion, karu_status *out_status);
karu_status karu_completion_tag(const struct karu_completion *completion, uint64_t *out_tag);
karu_status karu_completion_take_buffer(struct karu_completion *completion, uint8_t **out_data, size_t *out_len);
karu_status karu_credential_set_aws(struct karu_credential_out *out, const char *access_key_id, const char *secret_access_key, const char *session_token);
karu_status karu_credential_set_bearer_token(struct karu_credential_out *out, const char *token);
karu_status karu_credential_set_expiry(struct karu_credential_out *out, uint64_t unix_seconds);
karu_status karu_credential_set_prefix(struct karu_credential_out *out, const char *prefix);
karu_status karu_ends_etag(const struct karu_ends *ends, const char **out_etag);
karu_status karu_ends_free(struct karu_ends *ends);
karu_status karu_ends_head(const struct karu_ends *ends, const uint8_t **out_data, size_t *out_len);
karu_status karu_ends_size(const struct karu_ends *ends, uint64_t *out_size);
karu_status karu_ends_tail(const struct karu_ends *ends, const uint8_t **out_data, size_t *out_len);
karu_status karu_free(uint8_t *data, size_t len);
karu_status karu_locator_free(struct karu_locator *locator);
karu_status karu_locator_last_error(const struct karu_locator *locator, char *buffer, size_t capacity, size_t *out_len);
karu_status karu_locator_name(const struct karu_locator *locator, char *buffer, size_t capacity, size_t *out_len);
karu_status karu_locator_with_window(const struct karu_locator *locator, uint64_t start, uint64_t length, struct karu_locator **out_locator);
karu_status karu_object_info_clear(struct karu_object_info *info);
karu_status karu_reader_free(struct karu_reader *reader);
karu_status karu_reader_last_error(const struct karu_reader *reader, char *buffer, size_t capacity, size_t *out_len);
karu_status karu_reader_open(const struct karu_client *client, const struct karu_locator *locator, struct karu_reader **out_reader);
karu_status karu_reader_read_at(void *ctx, uint64_t offset, uint8_t *dst, size_t len, size_t *out_filled);
karu_status karu_reader_size(void *ctx, uint64_t *out_size);
typedef enum karu_next karu_next;
typedef enum karu_status karu_status;
typedef struct karu_batch karu_batch;
typedef struct karu_batch_options { uint32_t fields; uint64_t max_gap; uint64_t max_span; uint32_t max_parts; uint32_t max_amplification; } karu_batch_options;
typedef struct karu_client karu_client;
typedef struct karu_client_builder karu_client_builder;
typedef struct karu_completion karu_completion;
typedef struct karu_credential_out karu_credential_out;
typedef struct karu_ends karu_ends;
typedef struct karu_locator karu_locator;
typedef struct karu_object_info { uint64_t size; const char *etag; struct karu_time last_modified; } karu_object_info;
typedef struct karu_read { const struct karu_locator *locator; uint64_t offset; uint64_t length; uint8_t *dst; uint64_t tag; const char *if_match; } karu_read;
typedef struct karu_reader karu_reader;
typedef struct karu_stats { uint64_t reads; uint64_t rejected; uint64_t transfers; uint64_t requested_bytes; uint64_t fetched_bytes; } karu_stats;
typedef struct karu_time { bool known; int64_t seconds; uint32_t nanoseconds; } karu_time;
typedef struct karu_transport_stats { uint64_t requests; uint64_t body_bytes; uint64_t retries; uint64_t hedges; uint64_t hedges_won; } karu_transport_stats;
typedef uint32_t (*karu_credential_callback)(void *ctx, const char *canonical_path, struct karu_credential_out *out);
typedef uint32_t karu_next;
typedef uint32_t karu_status;
