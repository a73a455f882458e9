/* A small sans-io format reader driven over Karu: the core names the bytes it wants and is
   told how many arrived; a driver answers it through a transport vtable of the Hurray shape,
   `read_at(ctx, offset, dst, len, &filled)` and `size(ctx, &size)`, whose entries are Karu's
   own karu_reader_read_at and karu_reader_size, with the karu_reader as ctx: no glue.

   The format ("KREC"): records, then an index of (u64 offset, u64 length) entries, then a
   16-byte trailer: u64 index offset, u32 entry count, "KREC" (all little-endian).

   argv: LOCAL_CONTAINER CONTAINER_URL
   The records 0..2 hold the pattern at their offsets; record 3 runs past the end of the file. */
#include "check.h"

/* ---- the transport, declared as a sans-io library declares it ---- */

typedef uint32_t transport_status; /* 0 is success, as HurrayStatus and karu_status agree */

typedef struct {
    void *ctx;
    transport_status (*read_at)(void *ctx, uint64_t offset, uint8_t *dst, size_t len,
                                size_t *out_filled);
    transport_status (*size)(void *ctx, uint64_t *out_size);
} transport;

/* ---- the sans-io core: no I/O, no blocking ---- */

typedef enum { STEP_RANGE, STEP_READY, STEP_RECORD, STEP_FAILED } step;

typedef struct {
    uint64_t size;
    enum { NEED_TRAILER, NEED_INDEX, READY, NEED_RECORD, HAVE_RECORD, FAILED } state;
    uint64_t at;   /* the range being filled */
    size_t want;
    size_t filled;
    uint8_t *buf;
    uint32_t count;
    uint64_t *entries; /* offset, length pairs */
    const char *failure;
} core;

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void want(core *c, uint64_t at, size_t len) {
    free(c->buf);
    c->buf = malloc(len ? len : 1);
    c->at = at;
    c->want = len;
    c->filled = 0;
}

static void fail(core *c, const char *why) {
    c->state = FAILED;
    c->failure = why;
}

static void core_init(core *c, uint64_t size) {
    memset(c, 0, sizeof *c);
    c->size = size;
    if (size < 16) {
        fail(c, "too small");
        return;
    }
    c->state = NEED_TRAILER;
    want(c, size - 16, 16);
}

/* What the core needs next; for STEP_RANGE, the absolute range still missing. */
static step core_step(core *c, uint64_t *offset, size_t *len) {
    if (c->state == FAILED) return STEP_FAILED;
    if (c->state == READY) return STEP_READY;
    if (c->state == HAVE_RECORD) return STEP_RECORD;
    if (c->filled < c->want) {
        *offset = c->at + c->filled;
        *len = c->want - c->filled;
        return STEP_RANGE;
    }
    if (c->state == NEED_TRAILER) {
        if (memcmp(c->buf + 12, "KREC", 4) != 0) {
            fail(c, "bad magic");
            return STEP_FAILED;
        }
        uint64_t index = le64(c->buf);
        c->count = (uint32_t)(le64(c->buf + 8) & 0xffffffffu);
        if (index > c->size - 16 || (c->size - 16 - index) / 16 < c->count) {
            fail(c, "index out of the file");
            return STEP_FAILED;
        }
        c->state = NEED_INDEX;
        want(c, index, (size_t)c->count * 16);
        return core_step(c, offset, len);
    }
    if (c->state == NEED_INDEX) {
        c->entries = malloc((size_t)c->count * 2 * sizeof *c->entries + 1);
        for (uint32_t i = 0; i < 2 * c->count; i++) c->entries[i] = le64(c->buf + 8 * i);
        c->state = READY;
        return STEP_READY;
    }
    c->state = HAVE_RECORD; /* NEED_RECORD, filled */
    return STEP_RECORD;
}

static uint8_t *core_input_dst(core *c) { return c->buf + c->filled; }

/* A short count is normal; 0 means the file ends before the range does. */
static void core_report_filled(core *c, size_t n) {
    if (n == 0) {
        fail(c, "truncated");
        return;
    }
    c->filled += n;
}

static int core_begin_record(core *c, uint32_t i) {
    if ((c->state != READY && c->state != HAVE_RECORD) || i >= c->count) return 0;
    c->state = NEED_RECORD;
    want(c, c->entries[2 * i], (size_t)c->entries[2 * i + 1]);
    return 1;
}

static void core_free(core *c) {
    free(c->buf);
    free(c->entries);
}

/* ---- the driver: the whole bridge between the core and a transport ---- */

static step drive(core *c, const transport *t) {
    for (;;) {
        uint64_t offset = 0;
        size_t len = 0;
        step s = core_step(c, &offset, &len);
        if (s != STEP_RANGE) return s;
        size_t filled = 0;
        if (t->read_at(t->ctx, offset, core_input_dst(c), len, &filled) != 0) {
            fail(c, "transport failed");
            return STEP_FAILED;
        }
        core_report_filled(c, filled);
    }
}

/* A transport that answers at most 7 bytes per call, over another one: short reads. */
static const transport *inner;
static transport_status stingy_read_at(void *ctx, uint64_t offset, uint8_t *dst, size_t len,
                                       size_t *out_filled) {
    return inner->read_at(ctx, offset, dst, len < 7 ? len : 7, out_filled);
}

static void read_container(const transport *t) {
    uint64_t size = 0;
    CHECK(t->size(t->ctx, &size) == 0);
    core c;
    core_init(&c, size);
    CHECK(drive(&c, t) == STEP_READY);
    CHECK(c.count == 4);
    for (uint32_t i = 0; i < 3; i++) {
        CHECK(core_begin_record(&c, i));
        CHECK(drive(&c, t) == STEP_RECORD);
        CHECK(c.filled == c.entries[2 * i + 1]);
        CHECK(is_pattern(c.buf, c.entries[2 * i], c.filled));
    }
    /* Record 3 runs past the end: Karu reports the bytes that exist, then 0. */
    CHECK(core_begin_record(&c, 3));
    CHECK(drive(&c, t) == STEP_FAILED);
    CHECK(strcmp(c.failure, "truncated") == 0 && c.filled == 4);
    core_free(&c);
}

int main(int argc, char **argv) {
    CHECK(argc == 3);
    karu_client *client = test_client(NULL);
    for (int source = 1; source <= 2; source++) {
        karu_locator *locator = test_locate(client, argv[source]);
        karu_reader *reader = NULL;
        CHECK_OK(karu_reader_open(client, locator, &reader));
        CHECK_OK(karu_locator_free(locator)); /* the reader keeps what it needs */
        /* Karu's functions are the vtable, as they are. */
        transport karu = {reader, karu_reader_read_at, karu_reader_size};
        if (source == 1) {
            /* Locally, through a transport that reads 7 bytes at a time. */
            transport stingy = {reader, stingy_read_at, karu_reader_size};
            inner = &karu;
            read_container(&stingy);
        } else {
            read_container(&karu);
        }
        /* Reading at or past the end is not an error: nothing is filled. */
        uint64_t size = 0;
        size_t filled = 99;
        uint8_t byte;
        CHECK_OK(karu_reader_size(reader, &size));
        CHECK_OK(karu_reader_read_at(reader, size, &byte, 1, &filled));
        CHECK(filled == 0);
        CHECK_OK(karu_reader_read_at(reader, UINT64_MAX, &byte, 1, &filled));
        CHECK(filled == 0);
        CHECK_STATUS(karu_reader_read_at(reader, 0, NULL, 1, &filled), KARU_ERR_INVALID);
        char message[256];
        CHECK_OK(karu_reader_last_error(reader, message, sizeof message, NULL));
        CHECK(strstr(message, "dst is NULL") != NULL);
        CHECK_OK(karu_reader_free(reader));
    }
    CHECK_OK(karu_client_free(client));
    puts("reader: ok");
    return 0;
}
