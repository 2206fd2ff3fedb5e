/*
 * test_stale.c: stale handles against the RELEASE library (issue 16), built and run by
 * capi/tests/c_program.rs with `cargo build --release -p rope-kernels-capi`, static and
 * shared.
 *
 * Checks that a handle pointer that is no longer live is refused, not used:
 *  - rope_new handle: after rope_free, rope_free again and every handle call return
 *    ROPE_INVALID_HANDLE (no double free, no read of a freed rope), and write nothing;
 *  - rope_init handle (caller storage): rope_free refuses it and leaves it working; once
 *    the caller reuses the storage (here: zeroes it), calls return ROPE_INVALID_HANDLE.
 *
 * This program uses freed memory ON PURPOSE (that is what it tests): never build it with
 * AddressSanitizer, which would rightly stop at the first stale call. It relies on the
 * freed block not being reused before the stale calls, so nothing allocates in between
 * (stdout is set unbuffered before the first rope_new, so printf never allocates).
 */
#include "rope_kernels.h"

#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#define HD 64
#define HEADS 2
#define N (HEADS * HD)

static int failures = 0;

#define EXPECT(want, call)                                                                   \
    do {                                                                                     \
        rope_status got_ = (call);                                                           \
        if (got_ != (want)) {                                                                \
            failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: got %s, want %s\n", __FILE__, __LINE__, #call,   \
                    rope_status_name(got_), rope_status_name(want));                         \
        }                                                                                    \
    } while (0)

#define CHECK(cond, what)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, what);                    \
        }                                                                                    \
    } while (0)

static alignas(ROPE_STORAGE_ALIGN) unsigned char storage[ROPE_STORAGE_SIZE];
static float q[N], q_before[N], out[N], cos_t[HD / 2], sin_t[HD / 2];
static double freqs[HD / 2];

/* Every call that takes a handle, on `h`, which is not live: each must return
 * ROPE_INVALID_HANDLE and write nothing. */
static void expect_refused(const rope_t *h) {
    rope_tensor tq = {q, N, {1, HEADS, N, HD}};
    rope_tensor to = {out, N, {1, HEADS, N, HD}};
    size_t pairs = 12345;
    memcpy(q_before, q, sizeof q);
    memset(out, 0x5A, sizeof out);
    EXPECT(ROPE_INVALID_HANDLE, rope_pairs(h, &pairs));
    CHECK(pairs == 12345, "rope_pairs on a stale handle wrote *pairs");
    EXPECT(ROPE_INVALID_HANDLE, rope_apply_f32(h, &tq, NULL, NULL));
    CHECK(memcmp(q, q_before, sizeof q) == 0, "rope_apply_f32 on a stale handle wrote q");
    EXPECT(ROPE_INVALID_HANDLE, rope_apply_into_f32(h, &tq, &to, NULL, NULL, NULL));
    EXPECT(ROPE_INVALID_HANDLE, rope_frequencies(h, 0, freqs, HD / 2, NULL));
    EXPECT(ROPE_INVALID_HANDLE, rope_fill_table(h, 0, cos_t, sin_t, HD / 2));
    int untouched = 1;
    for (size_t i = 0; i < sizeof out; i++) untouched &= ((unsigned char *)out)[i] == 0x5A;
    CHECK(untouched, "rope_apply_into_f32 on a stale handle wrote q_out");
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    setvbuf(stderr, NULL, _IONBF, 0);
    for (int i = 0; i < N; i++) q[i] = (float)(i % 7) - 3.0f;
    rope_config cfg;
    EXPECT(ROPE_OK, rope_config_init(&cfg, sizeof cfg, HD, 10000.0));
    rope_tensor tq = {q, N, {1, HEADS, N, HD}};
    rope_apply_opts opts = {.struct_size = sizeof opts, .start = 3};

    /* A heap handle, freed. */
    rope_t *h = NULL;
    EXPECT(ROPE_OK, rope_new(&cfg, &h));
    if (!h) return 1;
    EXPECT(ROPE_OK, rope_apply_f32(h, &tq, NULL, &opts));
    EXPECT(ROPE_OK, rope_free(h));
    /* Nothing has allocated since: the block is free, not reused. */
    EXPECT(ROPE_INVALID_HANDLE, rope_free(h)); /* a double free is refused */
    expect_refused(h);
    EXPECT(ROPE_INVALID_HANDLE, rope_free(h));

    /* A handle in caller storage: rope_free is not its release, and leaves it live. */
    rope_t *s = NULL;
    EXPECT(ROPE_OK, rope_init(storage, sizeof storage, &cfg, &s));
    EXPECT(ROPE_INVALID_HANDLE, rope_free(s));
    EXPECT(ROPE_OK, rope_apply_f32(s, &tq, NULL, &opts));
    /* The caller reuses its storage: the old handle is refused. */
    memset(storage, 0, sizeof storage);
    expect_refused(s);
    EXPECT(ROPE_INVALID_HANDLE, rope_free(s));

    if (failures) {
        printf("test_stale: %d failed\n", failures);
        return 1;
    }
    printf("test_stale: all checks passed\n");
    return 0;
}
