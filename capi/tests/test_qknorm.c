/*
 * test_qknorm.c: fused QK-norm + RoPE through the C ABI (issue 15), built and run by
 * capi/tests/c_program.rs against the static and the shared test library, plain and under
 * AddressSanitizer + UBSan.
 *
 * Checks, for f32 and bf16, Qwen3 (ROPE_QK_NORM_RMS), Gemma (ROPE_QK_NORM_RMS_ONE_PLUS)
 * and Llama 4 (ROPE_QK_NORM_L2_AFTER) forms, GQA q/k, in place and out of place:
 *  - the result is within 1e-5 (f32) / 1e-2 (bf16) of a C reference (norm in double, then
 *    the rotation with the library's own cos/sin table, or the rotation then the norm);
 *  - in place equals out of place bit for bit;
 *  - every error returns its status and writes nothing.
 */
#include "rope_kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define HD 80
#define RD 64
#define PAIRS (RD / 2)
#define TOK 3
#define QH 4
#define KH 2
#define NQ (TOK * QH * HD)
#define NK (TOK * KH * HD)

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

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                              \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, "\n");                                                           \
        }                                                                                    \
    } while (0)

static float q0[NQ], k0[NK], q[NQ], k[NK], qo[NQ], ko[NK], qw[HD], kw[HD];
static double qref[NQ], kref[NK];
static float cos_t[TOK * PAIRS], sin_t[TOK * PAIRS];
static uint16_t qb0[NQ], kb0[NK], qb[NQ], kb[NK], qbo[NQ], kbo[NK];
static const uint32_t ids[TOK] = {5, 0, 77};

static uint16_t to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7FFF + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}
static float from_bf16(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static void norm_ref(double *x, const float *w, int kind, float eps) {
    double ss = 0;
    for (int i = 0; i < HD; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / HD + eps);
    for (int i = 0; i < HD; i++) {
        double m = kind == ROPE_QK_NORM_RMS ? w[i] : kind == ROPE_QK_NORM_RMS_ONE_PLUS ? 1.0 + w[i] : 1.0;
        x[i] = x[i] * inv * m;
    }
}

/* Row r of the table holds position ids[r] (filled one row per token). */
static void rotate_ref(double *x, int row) {
    for (int i = 0; i < PAIRS; i++) {
        double c = cos_t[row * PAIRS + i], s = sin_t[row * PAIRS + i];
        double a = x[i], b = x[i + PAIRS];
        x[i] = a * c - b * s;
        x[i + PAIRS] = b * c + a * s;
    }
}

static void reference(const float *in, double *out, size_t heads, const float *w, int kind, float eps) {
    for (size_t t = 0; t < TOK; t++)
        for (size_t h = 0; h < heads; h++) {
            double *x = out + (t * heads + h) * HD;
            for (int i = 0; i < HD; i++) x[i] = in[(t * heads + h) * HD + i];
            if (kind == ROPE_QK_NORM_L2_AFTER) {
                rotate_ref(x, (int)t);
                norm_ref(x, w, kind, eps);
            } else {
                norm_ref(x, w, kind, eps);
                rotate_ref(x, (int)t);
            }
        }
}

static rope_tensor tensor(void *data, size_t len, size_t heads) {
    rope_tensor t = {data, len, {TOK, heads, heads * HD, HD}};
    return t;
}

int main(void) {
    for (int i = 0; i < NQ; i++) q0[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < NK; i++) k0[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
    for (int i = 0; i < HD; i++) {
        qw[i] = 0.5f + (float)(i % 9) / 8.0f;
        kw[i] = 1.5f - (float)(i % 5) / 4.0f;
    }
    for (int i = 0; i < NQ; i++) qb0[i] = to_bf16(q0[i]);
    for (int i = 0; i < NK; i++) kb0[i] = to_bf16(k0[i]);

    rope_config cfg;
    EXPECT(ROPE_OK, rope_config_init(&cfg, sizeof cfg, HD, 10000.0));
    cfg.rotary_dim = RD;
    rope_t *rope = NULL;
    EXPECT(ROPE_OK, rope_new(&cfg, &rope));
    if (!rope) return 1;
    for (int t = 0; t < TOK; t++)
        EXPECT(ROPE_OK, rope_fill_table(rope, ids[t], cos_t + t * PAIRS, sin_t + t * PAIRS, PAIRS));
    rope_apply_opts opts = {.struct_size = sizeof opts,
                            .position_mode = ROPE_POSITIONS_IDS,
                            .position_ids = ids,
                            .position_ids_len = TOK};

    const int kinds[3] = {ROPE_QK_NORM_RMS, ROPE_QK_NORM_RMS_ONE_PLUS, ROPE_QK_NORM_L2_AFTER};
    for (int f = 0; f < 3; f++) {
        rope_qk_norm norm = {sizeof norm, (rope_qk_norm_kind)kinds[f], 1e-6f, qw, HD, kw, HD};
        reference(q0, qref, QH, qw, kinds[f], 1e-6f);
        reference(k0, kref, KH, kw, kinds[f], 1e-6f);

        /* f32 in place and out of place. */
        memcpy(q, q0, sizeof q);
        memcpy(k, k0, sizeof k);
        rope_tensor tq = tensor(q, NQ, QH), tk = tensor(k, NK, KH);
        EXPECT(ROPE_OK, rope_apply_qk_norm_f32(rope, &tq, &tk, &norm, &opts));
        double err = 0;
        for (int i = 0; i < NQ; i++) err = fmax(err, fabs(q[i] - qref[i]));
        for (int i = 0; i < NK; i++) err = fmax(err, fabs(k[i] - kref[i]));
        CHECK(err < 1e-5, "form %d f32: max error %g", f, err);
        rope_tensor iq = tensor(q0, NQ, QH), ik = tensor(k0, NK, KH);
        rope_tensor oq = tensor(qo, NQ, QH), ok = tensor(ko, NK, KH);
        EXPECT(ROPE_OK, rope_apply_qk_norm_into_f32(rope, &iq, &oq, &ik, &ok, &norm, &opts));
        CHECK(memcmp(q, qo, sizeof q) == 0 && memcmp(k, ko, sizeof k) == 0, "form %d: into differs", f);

        /* bf16 in place and out of place. */
        memcpy(qb, qb0, sizeof qb);
        memcpy(kb, kb0, sizeof kb);
        rope_tensor bq = tensor(qb, NQ, QH), bk = tensor(kb, NK, KH);
        EXPECT(ROPE_OK, rope_apply_qk_norm_bf16(rope, &bq, &bk, &norm, &opts));
        err = 0;
        for (int i = 0; i < NQ; i++) err = fmax(err, fabs(from_bf16(qb[i]) - qref[i]));
        CHECK(err < 3e-2, "form %d bf16: max error %g", f, err);
        rope_tensor ibq = tensor(qb0, NQ, QH), obq = tensor(qbo, NQ, QH);
        rope_tensor ibk = tensor(kb0, NK, KH), obk = tensor(kbo, NK, KH);
        EXPECT(ROPE_OK, rope_apply_qk_norm_into_bf16(rope, &ibq, &obq, &ibk, &obk, &norm, &opts));
        CHECK(memcmp(qb, qbo, sizeof qb) == 0 && memcmp(kb, kbo, sizeof kb) == 0, "form %d: bf16 into", f);
    }

    /* Errors write nothing. */
    memcpy(q, q0, sizeof q);
    memcpy(k, k0, sizeof k);
    rope_tensor tq = tensor(q, NQ, QH), tk = tensor(k, NK, KH);
    rope_qk_norm bad = {sizeof bad, ROPE_QK_NORM_RMS, 1e-6f, qw, HD - 1, kw, HD};
    EXPECT(ROPE_NORM_WEIGHT_LENGTH, rope_apply_qk_norm_f32(rope, &tq, &tk, &bad, &opts));
    bad.q_weight_len = HD;
    bad.k_weight_len = 3;
    EXPECT(ROPE_NORM_WEIGHT_LENGTH, rope_apply_qk_norm_f32(rope, &tq, &tk, &bad, &opts));
    EXPECT(ROPE_OK, rope_apply_qk_norm_f32(rope, &tq, NULL, &bad, &opts)); /* k weight unused */
    memcpy(q, q0, sizeof q);
    bad.k_weight_len = HD;
    bad.eps = -1.0f;
    EXPECT(ROPE_INVALID_NORM_EPS, rope_apply_qk_norm_f32(rope, &tq, &tk, &bad, &opts));
    bad.eps = NAN;
    EXPECT(ROPE_INVALID_NORM_EPS, rope_apply_qk_norm_f32(rope, &tq, &tk, &bad, &opts));
    bad.eps = 1e-6f;
    bad.kind = 7;
    EXPECT(ROPE_UNKNOWN_ENUM, rope_apply_qk_norm_f32(rope, &tq, &tk, &bad, &opts));
    bad.kind = ROPE_QK_NORM_RMS;
    bad.struct_size = 3;
    EXPECT(ROPE_UNSUPPORTED_STRUCT_SIZE, rope_apply_qk_norm_f32(rope, &tq, &tk, &bad, &opts));
    bad.struct_size = sizeof bad;
    bad.q_weight = NULL;
    EXPECT(ROPE_NULL_POINTER, rope_apply_qk_norm_f32(rope, &tq, &tk, &bad, &opts));
    EXPECT(ROPE_NULL_POINTER, rope_apply_qk_norm_f32(rope, &tq, &tk, NULL, &opts));
    /* A weight inside q is refused. */
    rope_qk_norm alias = {sizeof alias, ROPE_QK_NORM_RMS, 1e-6f, q, HD, kw, HD};
    EXPECT(ROPE_OVERLAPPING_BUFFERS, rope_apply_qk_norm_f32(rope, &tq, &tk, &alias, &opts));
    rope_tensor short_q = tensor(q, NQ - 1, QH);
    rope_qk_norm ok_norm = {sizeof ok_norm, ROPE_QK_NORM_RMS, 1e-6f, qw, HD, kw, HD};
    EXPECT(ROPE_BUFFER_TOO_SMALL, rope_apply_qk_norm_f32(rope, &short_q, &tk, &ok_norm, &opts));
    CHECK(memcmp(q, q0, sizeof q) == 0 && memcmp(k, k0, sizeof k) == 0, "a failed call wrote q or k");
    rope_tensor oq = tensor(qo, NQ, QH);
    memset(qo, 0, sizeof qo);
    rope_tensor iq = tensor(q0, NQ, QH);
    bad.q_weight = qw;
    bad.q_weight_len = 1;
    EXPECT(ROPE_NORM_WEIGHT_LENGTH, rope_apply_qk_norm_into_f32(rope, &iq, &oq, NULL, NULL, &bad, &opts));
    int zero = 1;
    for (int i = 0; i < NQ; i++) zero &= qo[i] == 0.0f;
    CHECK(zero, "a failed out-of-place call wrote q_out");
    CHECK(strcmp(rope_status_name(ROPE_INVALID_NORM_EPS), "ROPE_INVALID_NORM_EPS") == 0, "status name");

    EXPECT(ROPE_OK, rope_free(rope));
    if (failures) {
        printf("test_qknorm: %d failed\n", failures);
        return 1;
    }
    printf("test_qknorm: all checks passed\n");
    return 0;
}
