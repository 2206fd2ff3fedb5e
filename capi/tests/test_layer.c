/*
 * test_layer.c: one attention layer through rope_apply_layer (issue 17), built and run by
 * capi/tests/c_program.rs against the static and the shared test library, plain and under
 * AddressSanitizer + UBSan.
 *
 *   test_layer EXPECTED_LAYER.bin
 *
 * EXPECTED_LAYER.bin is written by c_program.rs with the Rust API (RopeRef::apply_layer)
 * on the same inputs. The layer: a fused f32 QKV buffer [6 tokens][4 q | 2 k | 2 v heads][64]
 * of a ragged batch of 3 sequences (3, 1 and 2 new tokens at cached lengths 5, 17, 0).
 *  1. `append_layer` (the README's C example): q rotated into an f32 tensor, k rotated and
 *     v copied into paged bf16 caches (vLLM NHD [8 blocks][4 slots][2 heads][64], a block
 *     table per sequence); bit for bit the Rust results; v equals bf16(v) (an independent
 *     check); every byte of the caches outside the new rows and the guards around every
 *     buffer unchanged.
 *  2. The same tokens as one sequence with per-token position ids and a cos/sin table: q in
 *     place in QKV, k and v into q8_0 caches (HND [2 blocks][2 heads][8 slots][2 blocks of 32])
 *     through a slot_mapping with a -1 (token skipped); bit for bit the Rust results; each
 *     dequantized v value within half a step of v.
 *  3. Every status of the call (the nine new ones, 72..80, and the boundary's), each
 *     leaving every buffer, guard bytes included, unchanged.
 */
#include "rope_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* README example begin: README.md "Using it in a runtime" shows this block verbatim
 * (c_program.rs checks). */
#define HQ 4                      /* q heads */
#define HKV 2                     /* k and v heads */
#define HD 64                     /* head_dim */
#define ROW ((HQ + 2 * HKV) * HD) /* one token of the fused QKV output */
#define TOKENS 6
#define SEQS 3
#define NQKV (TOKENS * ROW)
#define NQ (TOKENS * HQ * HD)
#define NB 8  /* cache blocks */
#define BS 4  /* slots per block (vLLM block_size) */
#define BPS 6 /* block_table entries per sequence */
#define NCACHE (NB * BS * HKV * HD)

/* A ragged batch: sequence i owns tokens indptr[i]..indptr[i+1] (3, 1 and 2 new tokens) at
 * positions seq_start[i] + j (its cached length before this step). */
static const uint32_t indptr[SEQS + 1] = {0, 3, 4, 6};
static const uint32_t seq_start[SEQS] = {5, 17, 0};
/* Sequence i's blocks: positions 5..7 -> block 6, 17 -> block 3, 0..1 -> block 5. */
static const uint32_t block_table[SEQS * BPS] = {1, 6, 2, 2, 2, 2, 4, 4, 4, 4, 3, 4, 5, 7, 7, 7, 7, 7};

/* One attention layer of a ragged batch: the fused QKV projection output (f32) in, q
 * rotated into `q_buf`, k rotated and v copied into paged bf16 KV caches (vLLM NHD). */
static rope_status append_layer(const rope_t *rope, float *qkv_buf, float *q_buf, uint16_t *k_buf,
                                uint16_t *v_buf) {
    rope_layer_args a;
    memset(&a, 0, sizeof a); /* unused fields 0: ROPE_DEST_SKIP, forward, on the fly */
    a.struct_size = sizeof a;
    a.qkv_dtype = ROPE_DTYPE_F32;
    a.qkv = qkv_buf;
    a.qkv_len = NQKV;
    a.tokens = TOKENS;
    rope_head_set sets[3]; /* [q heads | k heads | v heads] rows */
    rope_status s = rope_head_sets_qkv_rows(HQ, HKV, HD, sets);
    if (s != ROPE_OK) return s;
    a.q_set = sets[0];
    a.k_set = sets[1];
    a.v_set = sets[2];

    a.q.kind = ROPE_DEST_TENSOR; /* q: [tokens][HQ][HD] f32 */
    a.q.dtype = ROPE_DTYPE_F32;
    a.q.data = q_buf;
    a.q.len = NQ;
    a.q.view.tokens = TOKENS;
    a.q.view.heads = HQ;
    a.q.view.token_stride = HQ * HD;
    a.q.view.head_stride = HD;

    rope_cache_layout nhd; /* [NB blocks][BS slots][HKV heads][HD] */
    s = rope_cache_layout_init(NB, BS, HKV, HD, 0, &nhd);
    if (s != ROPE_OK) return s;
    a.k.kind = ROPE_DEST_CACHE;
    a.k.dtype = ROPE_DTYPE_BF16;
    a.k.data = k_buf;
    a.k.len = NCACHE;
    a.k.cache = nhd;
    a.k.slots = ROPE_SLOTS_BLOCK_TABLE;
    a.k.block_table = block_table;
    a.k.block_table_len = SEQS * BPS;
    a.k.blocks_per_seq = BPS;
    a.v = a.k; /* v: the same rows of its own cache, not rotated */
    a.v.data = v_buf;

    a.batch = ROPE_BATCH_RAGGED; /* sequence i: tokens indptr[i]..indptr[i+1] */
    a.position_mode = ROPE_POSITIONS_START; /* at positions seq_start[i] + j */
    a.indptr = indptr;
    a.indptr_len = SEQS + 1;
    a.seq_start = seq_start;
    a.seq_start_len = SEQS;
    return rope_apply_layer(rope, &a);
}
/* README example end */

/* q8_0 cache, HND: 2 blocks of 8 slots, heads of HD / 32 blocks. */
#define NB8 2
#define BS8 8
#define NQ8 (NB8 * BS8 * HKV * (HD / 32))
/* Guard elements on both sides of every buffer. */
#define G 16

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
        CHECK(got_ == (want), "%s: got %s, want %s", #call, rope_status_name(got_),           \
              rope_status_name(want));                                                       \
    } while (0)

/* ---- the second call ---- */

/* The tokens' positions, and their q8_0 cache slots (-1: token 2 is not cached). */
static const uint32_t position_ids[TOKENS] = {5, 6, 7, 17, 0, 1};
static const int64_t slot_mapping[TOKENS] = {9, 3, -1, 15, 0, 8};

/* ---- buffers, each with G guard elements on both sides ---- */

static float qkv_mem[G + NQKV + G], q_out_mem[G + NQ + G];
static uint16_t k_cache_mem[G + NCACHE + G], v_cache_mem[G + NCACHE + G];
static rope_block_q8_0 k_q8_mem[G + NQ8 + G], v_q8_mem[G + NQ8 + G];
#define QKV (qkv_mem + G)
#define Q_OUT (q_out_mem + G)
#define K_CACHE (k_cache_mem + G)
#define V_CACHE (v_cache_mem + G)
#define K_Q8 (k_q8_mem + G)
#define V_Q8 (v_q8_mem + G)

/* The Rust results. */
static float qkv_in[NQKV], q_out_rust[NQ], qkv_after_rust[NQKV];
static uint16_t k_cache_rust[NCACHE], v_cache_rust[NCACHE];
static rope_block_q8_0 k_q8_rust[NQ8], v_q8_rust[NQ8];

static void read_exact(FILE *f, void *p, size_t size, size_t n, const char *what) {
    if (fread(p, size, n, f) != n) {
        fprintf(stderr, "EXPECTED file too short at %s\n", what);
        exit(2);
    }
}

static void load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    uint32_t hdr[5];
    read_exact(f, hdr, 4, 5, "header");
    if (hdr[0] != 0x4C415952u || hdr[1] != TOKENS || hdr[2] != HQ || hdr[3] != HKV || hdr[4] != HD) {
        fprintf(stderr, "EXPECTED file header does not match this program\n");
        exit(2);
    }
    read_exact(f, qkv_in, 4, NQKV, "QKV");
    read_exact(f, q_out_rust, 4, NQ, "Q_OUT");
    read_exact(f, k_cache_rust, 2, NCACHE, "K_CACHE");
    read_exact(f, v_cache_rust, 2, NCACHE, "V_CACHE");
    read_exact(f, qkv_after_rust, 4, NQKV, "QKV in place");
    read_exact(f, k_q8_rust, sizeof(rope_block_q8_0), NQ8, "K_Q8");
    read_exact(f, v_q8_rust, sizeof(rope_block_q8_0), NQ8, "V_Q8");
    uint8_t extra;
    if (fread(&extra, 1, 1, f) != 0) {
        fprintf(stderr, "EXPECTED file longer than this program reads\n");
        exit(2);
    }
    fclose(f);
}

/* Every buffer back to its state before a call: QKV the input, outputs and guards 0xA5. */
static void reset(void) {
    memset(qkv_mem, 0xA5, sizeof qkv_mem);
    memcpy(QKV, qkv_in, sizeof qkv_in);
    memset(q_out_mem, 0xA5, sizeof q_out_mem);
    memset(k_cache_mem, 0xA5, sizeof k_cache_mem);
    memset(v_cache_mem, 0xA5, sizeof v_cache_mem);
    memset(k_q8_mem, 0xA5, sizeof k_q8_mem);
    memset(v_q8_mem, 0xA5, sizeof v_q8_mem);
}

/* A copy of every buffer, guards included. */
static unsigned char snap[sizeof qkv_mem + sizeof q_out_mem + 2 * sizeof k_cache_mem + 2 * sizeof k_q8_mem];
static void snapshot(unsigned char *out) {
    unsigned char *p = out;
#define PUT(b) (memcpy(p, b, sizeof b), p += sizeof b)
    PUT(qkv_mem);
    PUT(q_out_mem);
    PUT(k_cache_mem);
    PUT(v_cache_mem);
    PUT(k_q8_mem);
    PUT(v_q8_mem);
#undef PUT
}
static int unchanged(void) {
    static unsigned char now[sizeof snap];
    snapshot(now);
    return memcmp(now, snap, sizeof snap) == 0;
}

static int guards_intact(const void *mem, size_t elem, size_t n) {
    const unsigned char *b = mem;
    for (size_t i = 0; i < G * elem; i++)
        if (b[i] != 0xA5 || b[(G + n) * elem + i] != 0xA5) return 0;
    return 1;
}

static float from_bf16(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static uint16_t to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7FFF + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}
static float from_f16(uint16_t h) {
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* ---- 1. the README example (above): q out, k and v appended to a paged bf16 cache ---- */

static void check_paged(const rope_t *rope) {
    reset();
    EXPECT(ROPE_OK, append_layer(rope, QKV, Q_OUT, K_CACHE, V_CACHE));
    CHECK(memcmp(Q_OUT, q_out_rust, sizeof q_out_rust) == 0, "paged: q differs from Rust");
    CHECK(memcmp(K_CACHE, k_cache_rust, sizeof k_cache_rust) == 0, "paged: k cache differs from Rust");
    CHECK(memcmp(V_CACHE, v_cache_rust, sizeof v_cache_rust) == 0, "paged: v cache differs from Rust");
    CHECK(memcmp(QKV, qkv_in, sizeof qkv_in) == 0, "paged: QKV was written");
    CHECK(guards_intact(qkv_mem, 4, NQKV) && guards_intact(q_out_mem, 4, NQ), "paged: guard written");
    CHECK(guards_intact(k_cache_mem, 2, NCACHE) && guards_intact(v_cache_mem, 2, NCACHE),
          "paged: cache guard written");
    /* Independent: v row of token t is bf16(v) at its slot; rows of no token stay 0xA5A5. */
    static int row_used[NB * BS];
    memset(row_used, 0, sizeof row_used);
    for (int i = 0; i < SEQS; i++)
        for (uint32_t t = indptr[i]; t < indptr[i + 1]; t++) {
            uint32_t p = seq_start[i] + (t - indptr[i]);
            uint32_t slot = block_table[i * BPS + p / BS] * BS + p % BS;
            row_used[slot] = 1;
            for (int h = 0; h < HKV; h++)
                for (int d = 0; d < HD; d++) {
                    float v = qkv_in[t * ROW + (HQ + HKV + h) * HD + d];
                    uint16_t got = V_CACHE[slot * HKV * HD + h * HD + d];
                    CHECK(got == to_bf16(v), "paged: v token %u head %d dim %d: %04x, want bf16(%g)", t, h, d,
                          got, v);
                    float k = from_bf16(K_CACHE[slot * HKV * HD + h * HD + d]);
                    CHECK(fabsf(k) < 2.0f, "paged: k token %u: %g is no rotation of [-1, 1) values", t, k);
                }
        }
    for (int slot = 0; slot < NB * BS; slot++)
        if (!row_used[slot])
            for (int i = 0; i < HKV * HD; i++) {
                CHECK(K_CACHE[slot * HKV * HD + i] == 0xA5A5, "paged: k slot %d written", slot);
                CHECK(V_CACHE[slot * HKV * HD + i] == 0xA5A5, "paged: v slot %d written", slot);
            }
}

/* ---- 2. one sequence, position ids, table; q in place, q8_0 caches by slot_mapping ---- */

#define ROWS 18
#define PAIRS (HD / 2)
static float cos_t[ROWS * PAIRS], sin_t[ROWS * PAIRS];

static rope_layer_args q8_args(void) {
    rope_layer_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.qkv_dtype = ROPE_DTYPE_F32;
    a.qkv = QKV;
    a.qkv_len = NQKV;
    a.tokens = TOKENS;
    rope_head_set sets[3];
    EXPECT(ROPE_OK, rope_head_sets_qkv_rows(HQ, HKV, HD, sets));
    a.q_set = sets[0];
    a.k_set = sets[1];
    a.v_set = sets[2];
    a.q.kind = ROPE_DEST_IN_PLACE;
    a.q.dtype = ROPE_DTYPE_F32;
    rope_cache_layout hnd;
    EXPECT(ROPE_OK, rope_cache_layout_init(NB8, BS8, HKV, HD / 32, 1, &hnd));
    a.k.kind = ROPE_DEST_CACHE;
    a.k.dtype = ROPE_DTYPE_Q8_0;
    a.k.data = K_Q8;
    a.k.len = NQ8;
    a.k.cache = hnd;
    a.k.slots = ROPE_SLOTS_MAPPING;
    a.k.slot_mapping = slot_mapping;
    a.k.slot_mapping_len = TOKENS;
    a.v = a.k;
    a.v.data = V_Q8;
    a.batch = ROPE_BATCH_SINGLE;
    a.position_mode = ROPE_POSITIONS_IDS;
    a.position_ids = position_ids;
    a.position_ids_len = TOKENS;
    a.cos_sin = ROPE_COS_SIN_TABLE;
    a.cos = cos_t;
    a.sin = sin_t;
    a.table_len = ROWS * PAIRS;
    return a;
}

static void check_q8(const rope_t *rope) {
    EXPECT(ROPE_OK, rope_fill_table(rope, 0, cos_t, sin_t, ROWS * PAIRS));
    reset();
    rope_layer_args a = q8_args();
    EXPECT(ROPE_OK, rope_apply_layer(rope, &a));
    CHECK(memcmp(QKV, qkv_after_rust, sizeof qkv_after_rust) == 0, "q8_0: QKV (q in place) differs from Rust");
    CHECK(memcmp(K_Q8, k_q8_rust, sizeof k_q8_rust) == 0, "q8_0: k cache differs from Rust");
    CHECK(memcmp(V_Q8, v_q8_rust, sizeof v_q8_rust) == 0, "q8_0: v cache differs from Rust");
    CHECK(guards_intact(k_q8_mem, sizeof(rope_block_q8_0), NQ8) &&
              guards_intact(v_q8_mem, sizeof(rope_block_q8_0), NQ8),
          "q8_0: cache guard written");
    /* k and v of the fused buffer are untouched by the in-place q. */
    for (int t = 0; t < TOKENS; t++)
        CHECK(memcmp(QKV + t * ROW + HQ * HD, qkv_in + t * ROW + HQ * HD, 2 * HKV * HD * 4) == 0,
              "q8_0: k/v of token %d written in place", t);
    /* Independent: each v value within half a quantization step (plus the f16 rounding of d). */
    for (int t = 0; t < TOKENS; t++) {
        if (slot_mapping[t] < 0) continue;
        size_t s = (size_t)slot_mapping[t];
        for (int h = 0; h < HKV; h++)
            for (int b = 0; b < HD / 32; b++) {
                const rope_block_q8_0 *blk = &V_Q8[(s / BS8) * (HKV * BS8 * 2) + h * (BS8 * 2) + (s % BS8) * 2 + b];
                float d = from_f16(blk->d);
                for (int j = 0; j < 32; j++) {
                    float v = qkv_in[t * ROW + (HQ + HKV + h) * HD + b * 32 + j];
                    CHECK(fabsf(blk->qs[j] * d - v) <= 0.5f * d + 1e-3f, "q8_0: v token %d head %d: %g vs %g",
                          t, h, blk->qs[j] * d, v);
                }
            }
    }
    /* Token 2 (slot -1) and the slots no token maps to stay untouched. */
    int used[NB8 * BS8] = {0};
    for (int t = 0; t < TOKENS; t++)
        if (slot_mapping[t] >= 0) used[slot_mapping[t]] = 1;
    for (int s = 0; s < NB8 * BS8; s++)
        for (int h = 0; h < HKV; h++)
            for (int b = 0; b < 2; b++) {
                const unsigned char *blk =
                    (const unsigned char *)&K_Q8[(s / BS8) * (HKV * BS8 * 2) + h * (BS8 * 2) + (s % BS8) * 2 + b];
                int canary = 1;
                for (size_t i = 0; i < sizeof(rope_block_q8_0); i++) canary &= blk[i] == 0xA5;
                CHECK(canary == !used[s], "q8_0: slot %d head %d block %d %s", s, h, b,
                      used[s] ? "not written" : "written");
            }
}

/* ---- 3. statuses: each error writes nothing ---- */

/* Runs `a` expecting `want` and no byte of any buffer changed. */
static void refuse(const rope_t *rope, const rope_layer_args *a, rope_status want, const char *what) {
    reset();
    snapshot(snap);
    rope_status got = rope_apply_layer(rope, a);
    CHECK(got == want, "%s: got %s, want %s", what, rope_status_name(got), rope_status_name(want));
    CHECK(unchanged(), "%s: a refused call wrote", what);
}

/* The paged call of `append_layer` as a struct to modify. */
static rope_layer_args paged_args(void) {
    rope_layer_args a = q8_args();
    a.q.kind = ROPE_DEST_TENSOR;
    a.q.data = Q_OUT;
    a.q.len = NQ;
    a.q.view.tokens = TOKENS;
    a.q.view.heads = HQ;
    a.q.view.token_stride = HQ * HD;
    a.q.view.head_stride = HD;
    rope_cache_layout nhd;
    EXPECT(ROPE_OK, rope_cache_layout_init(NB, BS, HKV, HD, 0, &nhd));
    a.k.dtype = ROPE_DTYPE_BF16;
    a.k.data = K_CACHE;
    a.k.len = NCACHE;
    a.k.cache = nhd;
    a.k.slots = ROPE_SLOTS_BLOCK_TABLE;
    a.k.block_table = block_table;
    a.k.block_table_len = SEQS * BPS;
    a.k.blocks_per_seq = BPS;
    a.v = a.k;
    a.v.data = V_CACHE;
    a.batch = ROPE_BATCH_RAGGED;
    a.position_mode = ROPE_POSITIONS_START;
    a.indptr = indptr;
    a.indptr_len = SEQS + 1;
    a.seq_start = seq_start;
    a.seq_start_len = SEQS;
    a.cos_sin = ROPE_COS_SIN_ON_THE_FLY;
    return a;
}

static void check_statuses(const rope_t *rope, const rope_t *rope48) {
    rope_layer_args a;
    /* The paged arguments as a struct equal append_layer's call. */
    reset();
    a = paged_args();
    EXPECT(ROPE_OK, rope_apply_layer(rope, &a));
    CHECK(memcmp(K_CACHE, k_cache_rust, sizeof k_cache_rust) == 0, "paged_args differs from append_layer");

    /* The boundary. */
    reset();
    snapshot(snap);
    EXPECT(ROPE_NULL_POINTER, rope_apply_layer(rope, NULL));
    EXPECT(ROPE_NULL_POINTER, rope_apply_layer(NULL, &a));
    static _Alignas(ROPE_STORAGE_ALIGN) unsigned char not_a_handle[ROPE_STORAGE_SIZE];
    EXPECT(ROPE_INVALID_HANDLE, rope_apply_layer((const rope_t *)(const void *)not_a_handle, &a));
    CHECK(unchanged(), "a refused call wrote");
    a = paged_args(), a.struct_size = sizeof a - 8;
    refuse(rope, &a, ROPE_UNSUPPORTED_STRUCT_SIZE, "struct_size");
    a = paged_args(), a.qkv = NULL;
    refuse(rope, &a, ROPE_NULL_POINTER, "QKV NULL");
    a = paged_args(), a.v.data = NULL;
    refuse(rope, &a, ROPE_NULL_POINTER, "v cache NULL");
    a = paged_args(), a.k.block_table = NULL;
    refuse(rope, &a, ROPE_NULL_POINTER, "block_table NULL");
    a = paged_args(), a.k.data = (unsigned char *)k_cache_mem + 1;
    refuse(rope, &a, ROPE_MISALIGNED_POINTER, "k cache misaligned");
    a = paged_args(), a.qkv = (unsigned char *)qkv_mem + 2;
    refuse(rope, &a, ROPE_MISALIGNED_POINTER, "QKV misaligned");
    a = paged_args(), a.k.len = SIZE_MAX / 2;
    refuse(rope, &a, ROPE_INVALID_ARGUMENT, "k cache larger than PTRDIFF_MAX");
    a = paged_args(), a.qkv_dtype = 4;
    refuse(rope, &a, ROPE_UNKNOWN_ENUM, "qkv_dtype 4");
    a = paged_args(), a.k.dtype = 99;
    refuse(rope, &a, ROPE_UNKNOWN_ENUM, "k dtype 99");
    a = paged_args(), a.v.kind = 4;
    refuse(rope, &a, ROPE_UNKNOWN_ENUM, "v kind 4");
    a = paged_args(), a.k.slots = 3;
    refuse(rope, &a, ROPE_UNKNOWN_ENUM, "slots 3");
    a = paged_args(), a.batch = 2;
    refuse(rope, &a, ROPE_UNKNOWN_ENUM, "batch 2");
    a = paged_args(), a.position_mode = 2;
    refuse(rope, &a, ROPE_UNKNOWN_ENUM, "position_mode 2");
    a = paged_args(), a.cos_sin = 2;
    refuse(rope, &a, ROPE_UNKNOWN_ENUM, "cos_sin 2");
    a = paged_args(), a.direction = 2;
    refuse(rope, &a, ROPE_UNKNOWN_ENUM, "direction 2");
    a = paged_args(), a.v.data = K_CACHE;
    refuse(rope, &a, ROPE_OVERLAPPING_BUFFERS, "k and v caches one buffer");
    a = paged_args(), a.q.data = QKV + NQKV - NQ, a.q.len = NQ;
    refuse(rope, &a, ROPE_OVERLAPPING_BUFFERS, "q out inside QKV");
    a = paged_args(), a.k.block_table = (const uint32_t *)(const void *)V_CACHE;
    refuse(rope, &a, ROPE_OVERLAPPING_BUFFERS, "block table inside the v cache");

    /* The Rust crate's errors, one status each (72..80). */
    a = paged_args(), a.k_set = a.q_set;
    refuse(rope, &a, ROPE_OVERLAPPING_HEAD_SETS, "k set = q set");
    a = paged_args(), a.v_set.offset = a.k_set.offset + HD; /* v heads 0 = k head 1 */
    refuse(rope, &a, ROPE_OVERLAPPING_HEAD_SETS, "v set over a k head");
    a = paged_args(), a.q.kind = ROPE_DEST_IN_PLACE, a.q.dtype = ROPE_DTYPE_BF16;
    refuse(rope, &a, ROPE_UNSUPPORTED_TYPE_PAIR, "q in place as bf16 in f32");
    a = paged_args(), a.qkv_dtype = ROPE_DTYPE_Q8_0;
    refuse(rope, &a, ROPE_UNSUPPORTED_TYPE_PAIR, "q8_0 input");
    a = paged_args(), a.indptr = (const uint32_t[]){0, 3, 4, 5};
    refuse(rope, &a, ROPE_INVALID_INDPTR, "indptr ends at 5 of 6 tokens");
    a = paged_args(), a.indptr = (const uint32_t[]){0, 4, 3, 6};
    refuse(rope, &a, ROPE_INVALID_INDPTR, "indptr decreases");
    a = paged_args(), a.seq_start_len = 2;
    refuse(rope, &a, ROPE_INVALID_INDPTR, "2 starts for 3 sequences");
    a = paged_args(), a.k.block_table = (const uint32_t[]){1, 6, 2, 2, 2, 2, 4, 4, 4, 4, 8, 4, 5, 7, 7, 7, 7, 7};
    refuse(rope, &a, ROPE_BLOCK_OUT_OF_RANGE, "block 8 of 8");
    a = paged_args(), a.k.blocks_per_seq = 4, a.v.blocks_per_seq = 4;
    refuse(rope, &a, ROPE_BLOCK_TABLE_TOO_SHORT, "position 17 past 4 blocks of 4");
    a = paged_args(), a.k.block_table_len = 2 * BPS;
    refuse(rope, &a, ROPE_BLOCK_TABLE_TOO_SHORT, "no row for sequence 2");
    a = paged_args(), a.v.block_table = (const uint32_t[]){1, 6, 2, 2, 2, 2, 4, 4, 4, 4, 6, 4, 5, 7, 7, 7, 7, 7};
    refuse(rope, &a, ROPE_DUPLICATE_SLOT, "sequences 0 and 1 in block 6, slot 25");
    a = q8_args(), a.k.slot_mapping_len = TOKENS - 1;
    refuse(rope, &a, ROPE_SLOT_MAPPING_LENGTH, "slot_mapping of 5 for 6 tokens");
    a = q8_args(), a.v.slot_mapping = (const int64_t[]){9, 3, -1, 16, 0, 8};
    refuse(rope, &a, ROPE_SLOT_OUT_OF_RANGE, "slot 16 of 16");
    a = q8_args(), a.v.slot_mapping = (const int64_t[]){9, 3, -2, 15, 0, 8};
    refuse(rope, &a, ROPE_SLOT_OUT_OF_RANGE, "slot -2");
    a = q8_args(), a.k.slot_mapping = (const int64_t[]){9, 3, -1, 15, 9, 8};
    refuse(rope, &a, ROPE_DUPLICATE_SLOT, "tokens 0 and 4 in slot 9");
    /* head_dim 48: a head is 1.5 q8_0 blocks. */
    a = q8_args();
    a.q_set.heads = 1, a.k_set.heads = 1, a.v.kind = ROPE_DEST_SKIP;
    a.k_set.offset = ROW / 2, a.table_len = 0, a.cos_sin = ROPE_COS_SIN_ON_THE_FLY;
    refuse(rope48, &a, ROPE_PARTIAL_QUANT_BLOCK, "q8_0 k of head_dim 48");
    a = paged_args(), a.q.view.heads = HQ - 1;
    refuse(rope, &a, ROPE_SHAPE_MISMATCH, "q out of 3 heads for 4");
    a = paged_args(), a.qkv_len = NQKV - 1;
    refuse(rope, &a, ROPE_BUFFER_TOO_SMALL, "QKV one short");
    a = paged_args(), a.k.len = NCACHE - 1;
    refuse(rope, &a, ROPE_BUFFER_TOO_SMALL, "k cache one short");
    a = q8_args(), a.position_ids_len = TOKENS - 1;
    refuse(rope, &a, ROPE_POSITION_COUNT_MISMATCH, "5 position ids for 6 tokens");
    a = q8_args(), a.table_len = 7 * PAIRS;
    refuse(rope, &a, ROPE_POSITION_OUT_OF_RANGE, "position 17 past a table of 7 rows");
    a = q8_args(), a.table_len = PAIRS + 1;
    refuse(rope, &a, ROPE_TABLE_SHAPE, "ragged table");
    a = paged_args(), a.v.kind = ROPE_DEST_IN_PLACE;
    refuse(rope, &a, ROPE_UNSUPPORTED_TYPE_PAIR, "v in place as bf16 of an f32 qkv");
    a = paged_args(), a.v.cache.block_size = 0;
    refuse(rope, &a, ROPE_INVALID_BLOCK_SIZE, "block table with block_size 0");
    /* A k set of 0 heads with absurd offset and strides touches nothing and is not run
     * (it overflowed to ROPE_PANIC after q was rotated): q and v as in the paged call. */
    reset();
    a = paged_args();
    a.k_set = (rope_head_set){SIZE_MAX / 8, 0, SIZE_MAX, 0};
    a.k.kind = ROPE_DEST_IN_PLACE, a.k.dtype = ROPE_DTYPE_F32;
    EXPECT(ROPE_OK, rope_apply_layer(rope, &a));
    CHECK(memcmp(Q_OUT, q_out_rust, sizeof q_out_rust) == 0, "0-head k: q differs from Rust");
    CHECK(memcmp(V_CACHE, v_cache_rust, sizeof v_cache_rust) == 0, "0-head k: v cache differs from Rust");
    CHECK(memcmp(QKV, qkv_in, sizeof qkv_in) == 0, "0-head k: QKV was written");

    /* Helpers. */
    rope_head_set sets[3];
    EXPECT(ROPE_STRIDE_OVERFLOW, rope_head_sets_qkv_rows(SIZE_MAX / 2, 1, 2, sets));
    EXPECT(ROPE_NULL_POINTER, rope_head_sets_neox(8, 64, NULL));
    EXPECT(ROPE_OK, rope_head_sets_neox(8, 64, sets));
    CHECK(sets[1].offset == 64 && sets[2].head_stride == 192 && sets[0].token_stride == 8 * 192, "neox sets");
    rope_cache_layout l;
    EXPECT(ROPE_INVALID_ARGUMENT, rope_cache_layout_init(8, 16, 8, 128, 2, &l));
    EXPECT(ROPE_STRIDE_OVERFLOW, rope_cache_layout_init(SIZE_MAX / 4, 16, 8, 128, 0, &l));
    EXPECT(ROPE_OK, rope_cache_layout_init(8, 16, 4, 128, 1, &l));
    CHECK(l.block_stride == 4 * 16 * 128 && l.head_stride == 16 * 128 && l.slot_stride == 128, "hnd layout");

    static const rope_status added[] = {ROPE_OVERLAPPING_HEAD_SETS, ROPE_UNSUPPORTED_TYPE_PAIR,
                                        ROPE_PARTIAL_QUANT_BLOCK,   ROPE_INVALID_INDPTR,
                                        ROPE_SLOT_MAPPING_LENGTH,   ROPE_SLOT_OUT_OF_RANGE,
                                        ROPE_BLOCK_OUT_OF_RANGE,    ROPE_BLOCK_TABLE_TOO_SHORT,
                                        ROPE_DUPLICATE_SLOT,        ROPE_INVALID_BLOCK_SIZE};
    for (size_t i = 0; i < sizeof added / sizeof added[0]; i++) {
        CHECK(added[i] == 72 + (rope_status)i, "status %s is not %d", rope_status_name(added[i]), 72 + (int)i);
        CHECK(strcmp(rope_status_str(added[i]), "unknown rope_status") != 0, "status %d has no message",
              (int)added[i]);
    }
    CHECK(strcmp(rope_status_name(ROPE_DUPLICATE_SLOT), "ROPE_DUPLICATE_SLOT") == 0, "status name");
}

typedef char block_q8_0_is_34_bytes[sizeof(rope_block_q8_0) == 34 ? 1 : -1];

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s EXPECTED_LAYER.bin\n", argv[0]);
        return 2;
    }
    load(argv[1]);
    rope_config cfg;
    EXPECT(ROPE_OK, rope_config_init(&cfg, sizeof cfg, HD, 10000.0));
    rope_t *rope = NULL, *rope48 = NULL;
    EXPECT(ROPE_OK, rope_new(&cfg, &rope));
    EXPECT(ROPE_OK, rope_config_init(&cfg, sizeof cfg, 48, 10000.0));
    EXPECT(ROPE_OK, rope_new(&cfg, &rope48));
    if (!rope || !rope48) return 1;

    check_paged(rope);
    check_q8(rope);
    check_statuses(rope, rope48);

    EXPECT(ROPE_OK, rope_free(rope));
    EXPECT(ROPE_OK, rope_free(rope48));
    if (failures) {
        printf("test_layer: %d failed\n", failures);
        return 1;
    }
    printf("test_layer: all checks passed\n");
    return 0;
}
