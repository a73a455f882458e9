/* Helpers shared by the C test programs: checks that exit with a message naming the line, the
   pattern every test object holds, and an isolated client. The Rust driver
   (tests/c_programs.rs) compiles each program under AddressSanitizer, runs it against files and
   mock servers it made, and checks the servers' request logs afterwards. */
#ifndef KARU_TEST_CHECK_H
#define KARU_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "karu.h"

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* A call that must return `expected`; otherwise print both names and exit. */
#define CHECK_STATUS(call, expected)                                                   \
    do {                                                                               \
        karu_status got_ = (call);                                                     \
        if (got_ != (expected)) {                                                      \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, \
                    #call, karu_status_name(got_), karu_status_name(expected));        \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, KARU_OK)

/* The byte at `offset` of every test object (the Rust driver writes the same). */
static inline uint8_t pattern_byte(uint64_t offset) {
    return (uint8_t)(((offset ^ (offset >> 7) ^ (offset >> 15)) * 131u) & 0xffu);
}

/* Whether `data` holds the pattern of [offset, offset + len). */
static inline int is_pattern(const uint8_t *data, uint64_t offset, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (data[i] != pattern_byte(offset + i)) return 0;
    }
    return 1;
}

/* A builder that reads no config file (the driver also clears the environment). */
static inline karu_client_builder *test_builder(void) {
    karu_client_builder *builder = NULL;
    CHECK_OK(karu_client_builder_new(&builder));
    CHECK_OK(karu_client_builder_user_config_file(builder, NULL));
    CHECK_OK(karu_client_builder_project_config_file(builder, NULL));
    return builder;
}

/* The client of `builder` (freed), or exit with the builder's message. */
static inline karu_client *test_build(karu_client_builder *builder) {
    karu_client *client = NULL;
    karu_status built = karu_client_builder_build(builder, &client);
    if (built != KARU_OK) {
        char message[512];
        karu_client_builder_last_error(builder, message, sizeof message, NULL);
        fprintf(stderr, "cannot build the test client: %s: %s\n", karu_status_name(built), message);
        exit(1);
    }
    CHECK_OK(karu_client_builder_free(builder));
    return client;
}

/* A client that reads no config file, with the options of `toml` (NULL for none). */
static inline karu_client *test_client(const char *toml) {
    karu_client_builder *builder = test_builder();
    if (toml) CHECK_OK(karu_client_builder_config_toml(builder, toml));
    return test_build(builder);
}

static inline karu_locator *test_locate(const karu_client *client, const char *address) {
    karu_locator *locator = NULL;
    karu_status located = karu_client_locate(client, address, &locator);
    if (located != KARU_OK) {
        char message[512];
        karu_client_last_error(client, message, sizeof message, NULL);
        fprintf(stderr, "cannot locate %s: %s: %s\n", address, karu_status_name(located), message);
        exit(1);
    }
    return locator;
}

/* A read descriptor. */
static inline karu_read read_of(const karu_locator *locator, uint64_t offset, uint64_t length,
                                uint8_t *dst, uint64_t tag) {
    karu_read read = {locator, offset, length, dst, tag, NULL};
    return read;
}

#endif
