/*
 * C test of the multimodal RoPE entry points (issue 15): rope_mrope_apply_*,
 * rope_vision_apply_*, rope_mrope_fill_table, rope_vision_fill_table. Built and run by capi/tests/c_program.rs
 * (also under AddressSanitizer + UBSan).
 *
 *   test_mrope EXPECTED.bin
 *
 * EXPECTED.bin holds inputs and the Rust API's results (MRope, VisionRope). This program
 * checks that the C ABI gives those results bit for bit (sectioned and interleaved MRoPE,
 * f32 and bf16, on the fly and with a table from rope_mrope_fill_table; vision f32, on the
 * fly and with its own table from rope_vision_fill_table), that
 * they agree with a double-precision evaluation of the formula written here, and that
 * every error is reported with its status and writes nothing.
 */
#include "rope_kernels.h"

#include <math.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T 6
#define HQ 4
#define HK 2
#define HD 128
#define PAIRS (HD / 2)
#define NQ (T * HQ * HD)
#define NK (T * HK * HD)
#define VT 24
#define VH 2
#define VD 80
#define NV (VT * VH * VD)

static int failures = 0;
#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
        }                                                                                    \
    } while (0)
#define EXPECT(want, call)                                                                   \
    do {                                                                                     \
        rope_status got_ = (call);                                                           \
        CHECK(got_ == (want), "%s: got %s, want %s", #call, rope_status_name(got_),          \
              rope_status_name(want));                                                       \
    } while (0)

static uint32_t ids[3][T], vids[2][VT];
static float q_in[NQ], k_in[NK], q_sec[NQ], k_sec[NK], q_int[NQ], k_int[NK], v_in[NV], v_out[NV];
static uint16_t q_sec_bf16[NQ];
static float qa[NQ], ka[NK], va[NV];
static uint16_t qh[NQ];
static float cos_t[T * PAIRS], sin_t[T * PAIRS];
static alignas(ROPE_STORAGE_ALIGN) unsigned char storage[ROPE_STORAGE_SIZE];
static alignas(ROPE_STORAGE_ALIGN) unsigned char storage2[ROPE_STORAGE_SIZE];
static alignas(ROPE_STORAGE_ALIGN) unsigned char storage3[ROPE_STORAGE_SIZE];

static void read_exact(FILE *f, void *p, size_t size, size_t n, const char *what) {
    if (fread(p, size, n, f) != n) {
        fprintf(stderr, "short read: %s\n", what);
        exit(2);
    }
}

static void load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    read_exact(f, ids, 4, 3 * T, "ids");
    read_exact(f, q_in, 4, NQ, "q_in");
    read_exact(f, k_in, 4, NK, "k_in");
    read_exact(f, q_sec, 4, NQ, "q_sec");
    read_exact(f, k_sec, 4, NK, "k_sec");
    read_exact(f, q_int, 4, NQ, "q_int");
    read_exact(f, k_int, 4, NK, "k_int");
    read_exact(f, q_sec_bf16, 2, NQ, "q_sec_bf16");
    read_exact(f, vids, 4, 2 * VT, "vids");
    read_exact(f, v_in, 4, NV, "v_in");
    read_exact(f, v_out, 4, NV, "v_out");
    fclose(f);
}

static rope_tensor tensor(void *data, size_t len, size_t tokens, size_t heads, size_t hd) {
    rope_tensor t = {data, len, {tokens, heads, heads * hd, hd}};
    return t;
}

static rope_mrope_opts mrope_opts(int interleaved, uint32_t st, uint32_t sh, uint32_t sw) {
    rope_mrope_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.direction = ROPE_FORWARD;
    o.interleaved = (uint8_t)interleaved;
    o.mrope_section[0] = st;
    o.mrope_section[1] = sh;
    o.mrope_section[2] = sw;
    o.position_ids[0] = ids[0];
    o.position_ids[1] = ids[1];
    o.position_ids[2] = ids[2];
    o.positions_len = T;
    o.cos_sin = ROPE_COS_SIN_ON_THE_FLY;
    return o;
}

/* The double-precision formula: half-split pairs (j, j + half), stream of pair j. */
static double max_err(const float *x, const float *y, size_t tokens, size_t heads, size_t hd, double theta,
                      const uint32_t *const *pos, int (*stream)(int, int), int axis_pairs) {
    double worst = 0.0;
    int pairs = (int)hd / 2;
    for (size_t t = 0; t < tokens; t++)
        for (size_t h = 0; h < heads; h++)
            for (int j = 0; j < pairs; j++) {
                int s = stream(j, pairs);
                int k = axis_pairs ? j % axis_pairs : j;
                double inv = pow(theta, -2.0 * k / (axis_pairs ? 2.0 * axis_pairs : (double)hd));
                double a = (double)pos[s][t] * inv;
                const float *r = x + (t * heads + h) * hd;
                double x0 = r[j], x1 = r[j + pairs];
                double y0 = x0 * cos(a) - x1 * sin(a), y1 = x1 * cos(a) + x0 * sin(a);
                const float *o = y + (t * heads + h) * hd;
                double e0 = fabs(o[j] - y0), e1 = fabs(o[j + pairs] - y1);
                if (e0 > worst) worst = e0;
                if (e1 > worst) worst = e1;
            }
    return worst;
}

static int sectioned_16_24_24(int j, int pairs) {
    (void)pairs;
    return j < 16 ? 0 : j < 40 ? 1 : 2;
}
static int interleaved_24_20_20(int j, int pairs) {
    (void)pairs;
    if (j % 3 == 1 && j < 60) return 1;
    if (j % 3 == 2 && j < 60) return 2;
    return 0;
}
static int vision_stream(int j, int pairs) { return j >= pairs / 2; }

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s EXPECTED.bin\n", argv[0]);
        return 2;
    }
    load(argv[1]);
    rope_config cfg;
    rope_t *rope = NULL, *vit = NULL, *dyn = NULL;
    EXPECT(ROPE_OK, rope_config_init(&cfg, sizeof cfg, HD, 1e6));
    EXPECT(ROPE_OK, rope_init(storage, sizeof storage, &cfg, &rope));
    EXPECT(ROPE_OK, rope_config_init(&cfg, sizeof cfg, VD, 1e4));
    EXPECT(ROPE_OK, rope_init(storage2, sizeof storage2, &cfg, &vit));
    EXPECT(ROPE_OK, rope_config_init(&cfg, sizeof cfg, HD, 1e6));
    cfg.scaling.rope_type = ROPE_SCALING_DYNAMIC;
    cfg.scaling.factor = 2.0;
    cfg.scaling.max_position_embeddings = 4096;
    EXPECT(ROPE_OK, rope_init(storage3, sizeof storage3, &cfg, &dyn));
    if (!rope || !vit || !dyn) return 1;
    const uint32_t *pos[3] = {ids[0], ids[1], ids[2]};

    /* Sectioned and interleaved, f32, on the fly: Rust's bits; the formula within 1e-5. */
    rope_tensor q = tensor(qa, NQ, T, HQ, HD), k = tensor(ka, NK, T, HK, HD);
    rope_mrope_opts o = mrope_opts(0, 16, 24, 24);
    memcpy(qa, q_in, sizeof qa);
    memcpy(ka, k_in, sizeof ka);
    EXPECT(ROPE_OK, rope_mrope_apply_f32(rope, &q, &k, &o));
    CHECK(memcmp(qa, q_sec, sizeof qa) == 0 && memcmp(ka, k_sec, sizeof ka) == 0, "sectioned != Rust");
    double e = max_err(q_in, qa, T, HQ, HD, 1e6, pos, sectioned_16_24_24, 0);
    CHECK(e < 1e-5, "sectioned vs formula: %g", e);

    /* The same through a per-token table. */
    EXPECT(ROPE_OK, rope_mrope_fill_table(rope, &o, cos_t, sin_t, T * PAIRS));
    rope_mrope_opts ot = o;
    ot.cos_sin = ROPE_COS_SIN_TABLE;
    ot.cos = cos_t;
    ot.sin = sin_t;
    ot.table_len = T * PAIRS;
    memcpy(qa, q_in, sizeof qa);
    memcpy(ka, k_in, sizeof ka);
    EXPECT(ROPE_OK, rope_mrope_apply_f32(rope, &q, &k, &ot));
    CHECK(memcmp(qa, q_sec, sizeof qa) == 0 && memcmp(ka, k_sec, sizeof ka) == 0, "table != Rust");

    o = mrope_opts(1, 24, 20, 20);
    memcpy(qa, q_in, sizeof qa);
    memcpy(ka, k_in, sizeof ka);
    EXPECT(ROPE_OK, rope_mrope_apply_f32(rope, &q, &k, &o));
    CHECK(memcmp(qa, q_int, sizeof qa) == 0 && memcmp(ka, k_int, sizeof ka) == 0, "interleaved != Rust");
    e = max_err(q_in, qa, T, HQ, HD, 1e6, pos, interleaved_24_20_20, 0);
    CHECK(e < 1e-5, "interleaved vs formula: %g", e);

    /* bf16, q only. */
    for (size_t i = 0; i < NQ; i++) {
        uint32_t b;
        memcpy(&b, &q_in[i], 4);
        qh[i] = (uint16_t)(b >> 16); /* the inputs are written as bf16-exact values */
    }
    rope_tensor qt16 = tensor(qh, NQ, T, HQ, HD);
    o = mrope_opts(0, 16, 24, 24);
    EXPECT(ROPE_OK, rope_mrope_apply_bf16(rope, &qt16, NULL, &o));
    CHECK(memcmp(qh, q_sec_bf16, sizeof qh) == 0, "bf16 != Rust");

    /* Vision on a handle of the ViT's configuration. */
    rope_tensor v = tensor(va, NV, VT, VH, VD);
    rope_mrope_opts ov = mrope_opts(0, 0, 0, 0);
    ov.position_ids[0] = vids[0];
    ov.position_ids[1] = vids[1];
    ov.position_ids[2] = NULL;
    ov.positions_len = VT;
    memcpy(va, v_in, sizeof va);
    EXPECT(ROPE_OK, rope_vision_apply_f32(vit, &v, NULL, &ov));
    CHECK(memcmp(va, v_out, sizeof va) == 0, "vision != Rust");
    const uint32_t *vpos[2] = {vids[0], vids[1]};
    e = max_err(v_in, va, VT, VH, VD, 1e4, vpos, vision_stream, VD / 4);
    CHECK(e < 1e-5, "vision vs formula: %g", e);

    /* Vision with its own table (rope_vision_fill_table): the on-the-fly bits, for f32 and
       f16; an MRoPE table (global frequency index) is not the vision table. */
    enum { VPAIRS = VD / 2, VLEN = VT * (VD / 2) };
    static float vcos[VLEN], vsin[VLEN], mcos[VLEN], msin[VLEN];
    EXPECT(ROPE_OK, rope_vision_fill_table(vit, &ov, vcos, vsin, VLEN));
    rope_mrope_opts ovt = ov;
    ovt.cos_sin = ROPE_COS_SIN_TABLE;
    ovt.cos = vcos;
    ovt.sin = vsin;
    ovt.table_len = VLEN;
    memcpy(va, v_in, sizeof va);
    EXPECT(ROPE_OK, rope_vision_apply_f32(vit, &v, NULL, &ovt));
    CHECK(memcmp(va, v_out, sizeof va) == 0, "vision with its table != on the fly");
    static uint16_t vh_fly[NV], vh_tab[NV];
    for (size_t i = 0; i < NV; i++) {
        uint32_t b;
        memcpy(&b, &v_in[i], 4);
        vh_fly[i] = vh_tab[i] = (uint16_t)(b >> 16);
    }
    rope_tensor v16f = tensor(vh_fly, NV, VT, VH, VD), v16t = tensor(vh_tab, NV, VT, VH, VD);
    EXPECT(ROPE_OK, rope_vision_apply_bf16(vit, &v16f, NULL, &ov));
    EXPECT(ROPE_OK, rope_vision_apply_bf16(vit, &v16t, NULL, &ovt));
    CHECK(memcmp(vh_fly, vh_tab, sizeof vh_fly) == 0, "bf16 vision with its table != on the fly");
    rope_mrope_opts om = ov;
    om.mrope_section[0] = VPAIRS / 2;
    om.mrope_section[1] = VPAIRS / 2;
    om.position_ids[2] = vids[1];
    EXPECT(ROPE_OK, rope_mrope_fill_table(vit, &om, mcos, msin, VLEN));
    CHECK(memcmp(mcos, vcos, sizeof vcos) != 0, "the MRoPE table equals the vision table");
    /* Its errors: the status, and nothing written. */
    for (size_t i = 0; i < VLEN; i++) mcos[i] = msin[i] = 9.0f;
    EXPECT(ROPE_TABLE_SHAPE, rope_vision_fill_table(vit, &ov, mcos, msin, VLEN - 1));
    EXPECT(ROPE_TABLE_SHAPE, rope_vision_fill_table(vit, &ovt, mcos, msin, VLEN));
    EXPECT(ROPE_UNSUPPORTED_SCALING, rope_vision_fill_table(dyn, &ov, mcos, msin, VLEN));
    EXPECT(ROPE_NULL_POINTER, rope_vision_fill_table(vit, NULL, mcos, msin, VLEN));
    EXPECT(ROPE_NULL_POINTER, rope_vision_fill_table(vit, &ov, NULL, msin, VLEN));
    EXPECT(ROPE_OVERLAPPING_BUFFERS, rope_vision_fill_table(vit, &ov, mcos, mcos, VLEN));
    rope_mrope_opts obad = ov;
    obad.positions_len = VT - 1;
    EXPECT(ROPE_TABLE_SHAPE, rope_vision_fill_table(vit, &obad, mcos, msin, VLEN));
    obad.position_ids[1] = NULL;
    EXPECT(ROPE_NULL_POINTER, rope_vision_fill_table(vit, &obad, mcos, msin, VLEN));
    for (size_t i = 0; i < VLEN; i++) CHECK(mcos[i] == 9.0f && msin[i] == 9.0f, "vision fill_table wrote on error");

    /* Errors: the status, and nothing written. */
    memcpy(qa, q_in, sizeof qa);
    memcpy(ka, k_in, sizeof ka);
    o = mrope_opts(0, 16, 24, 23);
    EXPECT(ROPE_INVALID_MROPE_SECTION, rope_mrope_apply_f32(rope, &q, &k, &o));
    o = mrope_opts(1, 10, 22, 32);
    EXPECT(ROPE_INVALID_MROPE_SECTION, rope_mrope_apply_f32(rope, &q, &k, &o));
    o = mrope_opts(0, 16, 24, 24);
    EXPECT(ROPE_UNSUPPORTED_SCALING, rope_vision_apply_f32(dyn, &q, &k, &ov));
    o.positions_len = T - 1;
    EXPECT(ROPE_POSITION_COUNT_MISMATCH, rope_mrope_apply_f32(rope, &q, &k, &o));
    o = mrope_opts(2, 16, 24, 24);
    EXPECT(ROPE_INVALID_ARGUMENT, rope_mrope_apply_f32(rope, &q, &k, &o));
    o = mrope_opts(0, 16, 24, 24);
    o.direction = 7;
    EXPECT(ROPE_UNKNOWN_ENUM, rope_mrope_apply_f32(rope, &q, &k, &o));
    o = mrope_opts(0, 16, 24, 24);
    o.position_ids[1] = NULL;
    EXPECT(ROPE_NULL_POINTER, rope_mrope_apply_f32(rope, &q, &k, &o));
    EXPECT(ROPE_NULL_POINTER, rope_mrope_apply_f32(rope, &q, &k, NULL));
    o = mrope_opts(0, 16, 24, 24);
    o.struct_size = 8;
    EXPECT(ROPE_UNSUPPORTED_STRUCT_SIZE, rope_mrope_apply_f32(rope, &q, &k, &o));
    ot.table_len = (T - 1) * PAIRS;
    EXPECT(ROPE_POSITION_OUT_OF_RANGE, rope_mrope_apply_f32(rope, &q, &k, &ot));
    ot.table_len = T * PAIRS - 1;
    EXPECT(ROPE_TABLE_SHAPE, rope_mrope_apply_f32(rope, &q, &k, &ot));
    o = mrope_opts(0, 16, 24, 24);
    o.position_ids[0] = (const uint32_t *)(const void *)qa;
    EXPECT(ROPE_OVERLAPPING_BUFFERS, rope_mrope_apply_f32(rope, &q, &k, &o));
    rope_tensor short_q = tensor(qa, NQ - 1, T, HQ, HD);
    o = mrope_opts(0, 16, 24, 24);
    EXPECT(ROPE_BUFFER_TOO_SMALL, rope_mrope_apply_f32(rope, &short_q, &k, &o));
    CHECK(memcmp(qa, q_in, sizeof qa) == 0 && memcmp(ka, k_in, sizeof ka) == 0, "a failed call wrote");
    float c1[T * PAIRS], s1[T * PAIRS];
    for (size_t i = 0; i < T * PAIRS; i++) c1[i] = s1[i] = 9.0f;
    EXPECT(ROPE_TABLE_SHAPE, rope_mrope_fill_table(rope, &o, c1, s1, T * PAIRS - 1));
    o = mrope_opts(0, 16, 24, 20);
    EXPECT(ROPE_INVALID_MROPE_SECTION, rope_mrope_fill_table(rope, &o, c1, s1, T * PAIRS));
    for (size_t i = 0; i < T * PAIRS; i++) CHECK(c1[i] == 9.0f && s1[i] == 9.0f, "fill_table wrote on error");
    /* A vision call on a rotary_dim that is not a multiple of 4. */
    rope_t *odd = NULL;
    EXPECT(ROPE_OK, rope_config_init(&cfg, sizeof cfg, 6, 1e4));
    static alignas(ROPE_STORAGE_ALIGN) unsigned char storage4[ROPE_STORAGE_SIZE];
    EXPECT(ROPE_OK, rope_init(storage4, sizeof storage4, &cfg, &odd));
    float six[6] = {1, 2, 3, 4, 5, 6};
    uint32_t one = 1;
    rope_tensor st = tensor(six, 6, 1, 1, 6);
    ov.position_ids[0] = &one;
    ov.position_ids[1] = &one;
    ov.positions_len = 1;
    EXPECT(ROPE_INVALID_ROTARY_DIM, rope_vision_apply_f32(odd, &st, NULL, &ov));
    CHECK(six[0] == 1 && six[5] == 6, "vision wrote on error");
    float c3[3] = {9, 9, 9}, s3[3] = {9, 9, 9};
    EXPECT(ROPE_INVALID_ROTARY_DIM, rope_vision_fill_table(odd, &ov, c3, s3, 3));
    CHECK(c3[0] == 9 && s3[2] == 9, "vision fill_table wrote on error");
    CHECK(strcmp(rope_status_name(ROPE_INVALID_MROPE_SECTION), "ROPE_INVALID_MROPE_SECTION") == 0, "name");
    CHECK(strlen(rope_status_str(ROPE_UNSUPPORTED_SCALING)) > 0, "message");

    if (failures) {
        printf("0 passed, %d failed\n", failures);
        return 1;
    }
    printf("test_mrope: all checks passed\n");
    return 0;
}
