/*
 * stack.c: the painted-stack high-water mark of every C entry point of
 * include/rope_kernels.h on the emulated Cortex-M4F (linked into board.c's program; run by
 * `.ci/stages/35-cortex-m.sh`, which fails when a function the header declares has no row,
 * the test hook rope_test_fault aside). Each function is called once with valid arguments on
 * a small realistic shape: one token, 4 q and 2 k heads (a fused layer: 4 q, 2 k and 2 v
 * heads), head_dim 128 with Llama 3 scaling (2-D vision: unscaled, it takes no scaling) and
 * again head_dim 64 unscaled where a handle or a dimension (the encodings' `dim`) is
 * involved. The arguments are prepared in static memory before the measurement, so a job's
 * own frame is a few bytes. The paint area (STACK_PAINT_BYTES, 192 KB below the stack
 * pointer at the top of the 4 MB RAM of mps2-an386.ld) is checked to lie above the heap;
 * the largest call measured about 37 KB. One row per call:
 *
 *   STACK <function> <bytes> B  limit <bytes> B  <verdict>  <arguments>
 *
 * The limits are a target: every call within 2048 B, rope_apply_layer within 4096 B. They
 * are printed, not enforced ("OVER (target, not enforced yet)"), unless this file is built
 * with -DROPE_STACK_ENFORCE_ALL=1 (the stage does that for ROPE_STACK_ENFORCE_ALL=1): then
 * each call over its limit fails the board run ("OVER LIMIT"). A call that does not return
 * its expected status fails the run always (its mark would measure an error path).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "board.h"
#include "rope_kernels.h"

#ifndef ROPE_STACK_ENFORCE_ALL
#define ROPE_STACK_ENFORCE_ALL 0
#endif
#define CALL_LIMIT 2048u
#define LAYER_LIMIT 4096u

#define MAX_HD 128
#define HQ 4
#define HK 2
#define SLOTS 4 /* KV-cache slots of the layer call */
#define POS 77  /* the token's position */

/* ---- arguments, static ---- */

static rope_status st;         /* a job's status */
static volatile uintptr_t sink; /* a job's other result */

static _Alignas(ROPE_STORAGE_ALIGN) unsigned char mem_h128[ROPE_STORAGE_SIZE], mem_vis128[ROPE_STORAGE_SIZE],
    mem_h64[ROPE_STORAGE_SIZE], mem_init[ROPE_STORAGE_SIZE];
static rope_t *init_out, *new_out;

static float q[HQ * MAX_HD], k[HK * MAX_HD], qo[HQ * MAX_HD], ko[HK * MAX_HD];
static uint16_t q16[HQ * MAX_HD], k16[HK * MAX_HD], q16o[HQ * MAX_HD], k16o[HK * MAX_HD];
static float qkv[(HQ + 2 * HK) * MAX_HD];
static uint16_t k_cache16[SLOTS * HK * MAX_HD], v_cache16[SLOTS * HK * MAX_HD];
static rope_block_q8_0 k_cache8[SLOTS * HK * MAX_HD / 32], v_cache8[SLOTS * HK * MAX_HD / 32];
static const int64_t slot_mapping[1] = {2};
static float cos_t[MAX_HD / 2], sin_t[MAX_HD / 2], norm_w[MAX_HD];
static double freqs[MAX_HD / 2], attention_factor;
static const uint32_t pos_t[1] = {POS}, pos_h[1] = {3}, pos_w[1] = {5};

static const rope_apply_opts opts = {.struct_size = sizeof(rope_apply_opts), .start = POS};
static rope_qk_norm norm = {.struct_size = sizeof(rope_qk_norm), .kind = ROPE_QK_NORM_RMS, .eps = 1e-6f};

/* Encodings: rows of `dim` (the variant's head_dim), a learned table of 4 positions, ALiBi on
 * [8 heads][1 query][8 keys] scores, T5 buckets. */
#define ALIBI_HEADS 8
#define KEYS 8
static float emb[MAX_HD], learned[4 * MAX_HD], slopes[ALIBI_HEADS], scores[ALIBI_HEADS * KEYS];
static uint16_t emb16[MAX_HD], learned16[4 * MAX_HD];
static int32_t index_out, rel_out[KEYS], bucket;
static int64_t deberta_bucket;
static const rope_positions positions = {.mode = ROPE_POSITIONS_START, .start = 2};
static const rope_relative t5 = {.struct_size = sizeof(rope_relative), .kind = ROPE_RELATIVE_T5_BIDIRECTIONAL,
                                 .num_buckets = 32, .max_distance = 128};
static const rope_relative_grid grid = {.query_len = 1, .key_len = KEYS, .q_offset = KEYS - 1};

static rope_config cfg_out;
static size_t size_out;
static uint32_t mask_out;
static rope_tier tier_out, active;
static rope_head_set sets_out[3];
static rope_cache_layout layout_out;

/* One head_dim: its configuration, handles and the views of the buffers above. */
typedef struct {
    const char *label, *vis_label;
    size_t hd, pairs, need;
    rope_config cfg;
    const rope_t *h, *vis; /* vis: no scaling (2-D vision RoPE takes none) */
    rope_tensor q, k, qo, ko, q16, k16, q16o, k16o;
    rope_mrope_opts mo, vo;
    rope_layer_args layer;
    const char *layer_args;
} variant;
static variant vars[2], V;

/* ---- jobs: one call each ---- */

#define JOB(id, call)                \
    static void id(void) { st = (call); } \
    static const char id##_call[] = #call;
#define VALUE_JOB(id, call) JOB(id, (sink = (uintptr_t)(call), ROPE_OK))

VALUE_JOB(j_version, rope_version())
VALUE_JOB(j_abi_version, rope_abi_version())
VALUE_JOB(j_status_str, rope_status_str(ROPE_OVERLAPPING_BUFFERS))
VALUE_JOB(j_status_name, rope_status_name(ROPE_OVERLAPPING_BUFFERS))
JOB(j_config_init, rope_config_init(&cfg_out, sizeof cfg_out, 128, 500000.0))
JOB(j_config_validate, rope_config_validate(&V.cfg))
JOB(j_storage_size, rope_storage_size(&V.cfg, &size_out))
JOB(j_init, rope_init(mem_init, V.need, &V.cfg, &init_out))
JOB(j_new, rope_new(&V.cfg, &new_out))
JOB(j_free, rope_free(NULL))
VALUE_JOB(j_size, rope_size())
VALUE_JOB(j_align, rope_align())
JOB(j_pairs, rope_pairs(V.h, &size_out))
JOB(j_frequencies, rope_frequencies(V.h, POS + 1, freqs, V.pairs, &attention_factor))
JOB(j_fill_table, rope_fill_table(V.h, POS, cos_t, sin_t, V.pairs))
JOB(j_tiers_available, rope_tiers_available(&mask_out))
JOB(j_tier_active, rope_tier_active(&tier_out))
JOB(j_tier_force, rope_tier_force(active))
JOB(j_tier_cap, rope_tier_cap(ROPE_TIER_AVX512, &tier_out))
JOB(j_tier_reset, rope_tier_reset(&tier_out))
VALUE_JOB(j_tier_name, rope_tier_name(ROPE_TIER_PORTABLE))
JOB(j_apply_f32, rope_apply_f32(V.h, &V.q, &V.k, &opts))
JOB(j_apply_f16, rope_apply_f16(V.h, &V.q16, &V.k16, &opts))
JOB(j_apply_bf16, rope_apply_bf16(V.h, &V.q16, &V.k16, &opts))
JOB(j_apply_into_f32, rope_apply_into_f32(V.h, &V.q, &V.qo, &V.k, &V.ko, &opts))
JOB(j_apply_into_f16, rope_apply_into_f16(V.h, &V.q16, &V.q16o, &V.k16, &V.k16o, &opts))
JOB(j_apply_into_bf16, rope_apply_into_bf16(V.h, &V.q16, &V.q16o, &V.k16, &V.k16o, &opts))
JOB(j_qk_norm_f32, rope_apply_qk_norm_f32(V.h, &V.q, &V.k, &norm, &opts))
JOB(j_qk_norm_f16, rope_apply_qk_norm_f16(V.h, &V.q16, &V.k16, &norm, &opts))
JOB(j_qk_norm_bf16, rope_apply_qk_norm_bf16(V.h, &V.q16, &V.k16, &norm, &opts))
JOB(j_qk_norm_into_f32, rope_apply_qk_norm_into_f32(V.h, &V.q, &V.qo, &V.k, &V.ko, &norm, &opts))
JOB(j_qk_norm_into_f16, rope_apply_qk_norm_into_f16(V.h, &V.q16, &V.q16o, &V.k16, &V.k16o, &norm, &opts))
JOB(j_qk_norm_into_bf16, rope_apply_qk_norm_into_bf16(V.h, &V.q16, &V.q16o, &V.k16, &V.k16o, &norm, &opts))
JOB(j_head_sets_qkv_rows, rope_head_sets_qkv_rows(HQ, HK, V.hd, sets_out))
JOB(j_head_sets_neox, rope_head_sets_neox(HQ, V.hd, sets_out))
JOB(j_cache_layout_init, rope_cache_layout_init(1, SLOTS, HK, V.hd, 0, &layout_out))
JOB(j_apply_layer, rope_apply_layer(V.h, &V.layer))
JOB(j_mrope_f32, rope_mrope_apply_f32(V.h, &V.q, &V.k, &V.mo))
JOB(j_mrope_f16, rope_mrope_apply_f16(V.h, &V.q16, &V.k16, &V.mo))
JOB(j_mrope_bf16, rope_mrope_apply_bf16(V.h, &V.q16, &V.k16, &V.mo))
JOB(j_mrope_fill_table, rope_mrope_fill_table(V.h, &V.mo, cos_t, sin_t, V.pairs))
JOB(j_vision_f32, rope_vision_apply_f32(V.vis, &V.q, &V.k, &V.vo))
JOB(j_vision_f16, rope_vision_apply_f16(V.vis, &V.q16, &V.k16, &V.vo))
JOB(j_vision_bf16, rope_vision_apply_bf16(V.vis, &V.q16, &V.k16, &V.vo))
JOB(j_vision_fill_table, rope_vision_fill_table(V.vis, &V.vo, cos_t, sin_t, V.pairs))
JOB(j_sin_fill, rope_sinusoidal_fill_table_f32(V.hd, ROPE_SINUSOIDAL_INTERLEAVED, ROPE_SINUSOIDAL_BASE, POS, emb,
                                               V.hd))
JOB(j_sin_add_f32, rope_sinusoidal_add_f32(V.hd, ROPE_SINUSOIDAL_INTERLEAVED, ROPE_SINUSOIDAL_BASE, emb, V.hd, 1,
                                           V.hd, &positions))
JOB(j_sin_add_f16, rope_sinusoidal_add_f16(V.hd, ROPE_SINUSOIDAL_INTERLEAVED, ROPE_SINUSOIDAL_BASE, emb16, V.hd, 1,
                                           V.hd, &positions))
JOB(j_sin_add_bf16, rope_sinusoidal_add_bf16(V.hd, ROPE_SINUSOIDAL_CONCATENATED, ROPE_SINUSOIDAL_BASE, emb16, V.hd,
                                             1, V.hd, &positions))
JOB(j_learned_f32, rope_learned_add_f32(learned, 4 * V.hd, V.hd, emb, V.hd, 1, V.hd, &positions))
JOB(j_learned_f16, rope_learned_add_f16(learned16, 4 * V.hd, V.hd, emb16, V.hd, 1, V.hd, &positions))
JOB(j_learned_bf16, rope_learned_add_bf16(learned16, 4 * V.hd, V.hd, emb16, V.hd, 1, V.hd, &positions))
JOB(j_learned_f16_t32, rope_learned_add_f16_table_f32(learned, 4 * V.hd, V.hd, emb16, V.hd, 1, V.hd, &positions))
JOB(j_learned_bf16_t32, rope_learned_add_bf16_table_f32(learned, 4 * V.hd, V.hd, emb16, V.hd, 1, V.hd, &positions))
JOB(j_relative_validate, rope_relative_validate(&t5))
JOB(j_relative_index, rope_relative_index(&t5, KEYS - 1, 2, &index_out))
JOB(j_relative_fill, rope_relative_fill(&t5, &grid, rel_out, KEYS))
JOB(j_t5_bucket, rope_t5_relative_position_bucket(-5, 1, 32, 128, &bucket))
JOB(j_deberta_bucket, rope_deberta_log_bucket_position(200, 256, 512, &deberta_bucket))
JOB(j_alibi_slopes, rope_alibi_slopes(slopes, ALIBI_HEADS))
JOB(j_alibi_slopes_max, rope_alibi_slopes_with_bias_max(slopes, ALIBI_HEADS, 16.0))
JOB(j_alibi_add, rope_alibi_add_f32(scores, ALIBI_HEADS * KEYS, KEYS, &grid, slopes, ALIBI_HEADS, ROPE_ALIBI_CAUSAL))

/* ---- the table ---- */

typedef struct {
    job_fn job;
    const char *call;  /* its text: the function is the first `rope_` name in it */
    rope_status want;  /* the status of valid arguments */
    int per_variant;   /* 0: once; for head_dim 128, 64: 1 handle, 2 dim, 3 vision handle */
    const char *args;  /* NULL: the variant's layer_args */
} entry;
#define E(id, want, per_variant, args) {id, id##_call, want, per_variant, args}
#define QK "1 token, 4 q + 2 k heads, position 77"

static const entry entries[] = {
    E(j_version, ROPE_OK, 0, ""),
    E(j_abi_version, ROPE_OK, 0, ""),
    E(j_status_str, ROPE_OK, 0, "ROPE_OVERLAPPING_BUFFERS"),
    E(j_status_name, ROPE_OK, 0, "ROPE_OVERLAPPING_BUFFERS"),
    E(j_config_init, ROPE_OK, 0, "head_dim 128"),
    E(j_config_validate, ROPE_OK, 1, ""),
    E(j_storage_size, ROPE_OK, 1, ""),
    E(j_init, ROPE_OK, 1, "into static storage"),
    E(j_new, ROPE_OUT_OF_MEMORY, 0, "head_dim 128 llama3; no heap in a no_std build: ROPE_OUT_OF_MEMORY"),
    E(j_free, ROPE_OK, 0, "NULL (no rope_new handle in a no_std build)"),
    E(j_size, ROPE_OK, 0, ""),
    E(j_align, ROPE_OK, 0, ""),
    E(j_pairs, ROPE_OK, 1, ""),
    E(j_frequencies, ROPE_OK, 1, "seq_len 78"),
    E(j_fill_table, ROPE_OK, 1, "1 row, position 77"),
    E(j_tiers_available, ROPE_OK, 0, ""),
    E(j_tier_active, ROPE_OK, 0, ""),
    E(j_tier_force, ROPE_OK, 0, "the active tier"),
    E(j_tier_cap, ROPE_OK, 0, "ROPE_TIER_AVX512"),
    E(j_tier_reset, ROPE_OK, 0, ""),
    E(j_tier_name, ROPE_OK, 0, "ROPE_TIER_PORTABLE"),
    E(j_apply_f32, ROPE_OK, 1, QK),
    E(j_apply_f16, ROPE_OK, 1, QK),
    E(j_apply_bf16, ROPE_OK, 1, QK),
    E(j_apply_into_f32, ROPE_OK, 1, QK),
    E(j_apply_into_f16, ROPE_OK, 1, QK),
    E(j_apply_into_bf16, ROPE_OK, 1, QK),
    E(j_qk_norm_f32, ROPE_OK, 1, QK ", RMS"),
    E(j_qk_norm_f16, ROPE_OK, 1, QK ", RMS"),
    E(j_qk_norm_bf16, ROPE_OK, 1, QK ", RMS"),
    E(j_qk_norm_into_f32, ROPE_OK, 1, QK ", RMS"),
    E(j_qk_norm_into_f16, ROPE_OK, 1, QK ", RMS"),
    E(j_qk_norm_into_bf16, ROPE_OK, 1, QK ", RMS"),
    E(j_head_sets_qkv_rows, ROPE_OK, 0, "4 q + 2 kv heads, head_dim 128"),
    E(j_head_sets_neox, ROPE_OK, 0, "4 heads, head_dim 128"),
    E(j_cache_layout_init, ROPE_OK, 0, "1 block of 4 slots, 2 kv heads, head_dim 128, NHD"),
    E(j_apply_layer, ROPE_OK, 1, NULL),
    E(j_mrope_f32, ROPE_OK, 1, QK ", sectioned"),
    E(j_mrope_f16, ROPE_OK, 1, QK ", sectioned"),
    E(j_mrope_bf16, ROPE_OK, 1, QK ", sectioned"),
    E(j_mrope_fill_table, ROPE_OK, 1, "1 token, sectioned"),
    E(j_vision_f32, ROPE_OK, 3, "1 patch, 4 q + 2 k heads"),
    E(j_vision_f16, ROPE_OK, 3, "1 patch, 4 q + 2 k heads"),
    E(j_vision_bf16, ROPE_OK, 3, "1 patch, 4 q + 2 k heads"),
    E(j_vision_fill_table, ROPE_OK, 3, "1 patch"),
    E(j_sin_fill, ROPE_OK, 2, "1 row, interleaved"),
    E(j_sin_add_f32, ROPE_OK, 2, "1 token, interleaved"),
    E(j_sin_add_f16, ROPE_OK, 2, "1 token, interleaved"),
    E(j_sin_add_bf16, ROPE_OK, 2, "1 token, concatenated"),
    E(j_learned_f32, ROPE_OK, 2, "1 token, table of 4"),
    E(j_learned_f16, ROPE_OK, 2, "1 token, table of 4"),
    E(j_learned_bf16, ROPE_OK, 2, "1 token, table of 4"),
    E(j_learned_f16_t32, ROPE_OK, 2, "1 token, table of 4"),
    E(j_learned_bf16_t32, ROPE_OK, 2, "1 token, table of 4"),
    E(j_relative_validate, ROPE_OK, 0, "T5 bidirectional, 32 buckets, max distance 128"),
    E(j_relative_index, ROPE_OK, 0, "T5 bidirectional"),
    E(j_relative_fill, ROPE_OK, 0, "T5 bidirectional, 1 query x 8 keys"),
    E(j_t5_bucket, ROPE_OK, 0, "-5, bidirectional, 32 buckets, 128"),
    E(j_deberta_bucket, ROPE_OK, 0, "200, bucket_size 256, max_position 512"),
    E(j_alibi_slopes, ROPE_OK, 0, "8 heads"),
    E(j_alibi_slopes_max, ROPE_OK, 0, "8 heads, bias max 16"),
    E(j_alibi_add, ROPE_OK, 0, "8 heads x 1 query x 8 keys, causal"),
};

/* The first `rope_` name in a call's text. */
static void function_of(const char *call, char *name, size_t n) {
    const char *p = strstr(call, "rope_");
    size_t i = 0;
    while (p && i + 1 < n && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '_')) {
        name[i] = p[i];
        i++;
    }
    name[i] = 0;
}

static rope_tensor view(void *data, size_t heads, size_t hd) {
    rope_tensor t = {data, heads * hd, {1, heads, heads * hd, hd}};
    return t;
}

/* MRoPE: streams t, h, w in Qwen2-VL's sections [16, 24, 24] of 64 pairs, scaled to the
 * pairs; 2-D vision: streams h, w. */
static rope_mrope_opts mrope_opts(size_t pairs, int vision) {
    rope_mrope_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    if (vision) {
        o.position_ids[0] = pos_h;
        o.position_ids[1] = pos_w;
    } else {
        o.mrope_section[0] = (uint32_t)(pairs / 4);
        o.mrope_section[1] = (uint32_t)(pairs * 3 / 8);
        o.mrope_section[2] = (uint32_t)(pairs * 3 / 8);
        o.position_ids[0] = pos_t;
        o.position_ids[1] = pos_h;
        o.position_ids[2] = pos_w;
    }
    o.positions_len = 1;
    return o;
}

/* A fused f32 layer [1 token][4 q | 2 k | 2 v heads][hd]: q in place, k rotated and v copied
 * into a KV cache of 4 slots (NHD) at slot_mapping {2}: f16 (q8 = 0) or q8_0 (q8 = 1). */
static int layer_args(variant *v, int q8) {
    rope_layer_args *a = &v->layer;
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
    a->qkv_dtype = ROPE_DTYPE_F32;
    a->qkv = qkv;
    a->qkv_len = (HQ + 2 * HK) * v->hd;
    a->tokens = 1;
    rope_head_set sets[3];
    rope_cache_layout nhd;
    if (rope_head_sets_qkv_rows(HQ, HK, v->hd, sets) != ROPE_OK ||
        rope_cache_layout_init(1, SLOTS, HK, q8 ? v->hd / 32 : v->hd, 0, &nhd) != ROPE_OK)
        return 1;
    a->q_set = sets[0];
    a->k_set = sets[1];
    a->v_set = sets[2];
    a->q.kind = ROPE_DEST_IN_PLACE;
    a->q.dtype = ROPE_DTYPE_F32;
    a->k.kind = ROPE_DEST_CACHE;
    a->k.dtype = q8 ? ROPE_DTYPE_Q8_0 : ROPE_DTYPE_F16;
    a->k.data = q8 ? (void *)k_cache8 : (void *)k_cache16;
    a->k.len = SLOTS * HK * (q8 ? v->hd / 32 : v->hd);
    a->k.cache = nhd;
    a->k.slots = ROPE_SLOTS_MAPPING;
    a->k.slot_mapping = slot_mapping;
    a->k.slot_mapping_len = 1;
    a->v = a->k;
    a->v.data = q8 ? (void *)v_cache8 : (void *)v_cache16;
    a->batch = ROPE_BATCH_SINGLE;
    a->position_mode = ROPE_POSITIONS_START;
    a->start = POS;
    v->layer_args = q8 ? "1 token, f32 qkv 4 q + 2 kv heads, q in place, k/v to a q8_0 cache by slot_mapping"
                       : "1 token, f32 qkv 4 q + 2 kv heads, q in place, k/v to an f16 cache by slot_mapping";
    return 0;
}

/* head_dim 128 with Llama 3 scaling (vision: the same without), head_dim 64 without. */
static int setup(void) {
    for (size_t i = 0; i < HQ * MAX_HD; i++) {
        q[i] = (float)((int)(i * 37 % 201) - 100) / 64.0f;
        q16[i] = (uint16_t)(0x3800u + i % 251u); /* about 0.5 in f16, finite in bf16 */
    }
    for (size_t i = 0; i < HK * MAX_HD; i++) {
        k[i] = (float)((int)(i * 53 % 199) - 99) / 32.0f;
        k16[i] = (uint16_t)(0xB800u + i % 241u);
    }
    for (size_t i = 0; i < sizeof qkv / sizeof qkv[0]; i++) qkv[i] = (float)((int)(i * 29 % 211) - 105) / 50.0f;
    for (size_t i = 0; i < MAX_HD; i++) norm_w[i] = 1.0f + (float)(i % 7) / 16.0f;
    for (size_t i = 0; i < 4 * MAX_HD; i++) {
        learned[i] = (float)((int)(i % 19) - 9) / 16.0f;
        learned16[i] = (uint16_t)(0x3400u + i % 97u);
    }
    for (size_t i = 0; i < MAX_HD; i++) emb16[i] = (uint16_t)(0x3C00u + i % 61u);
    norm.q_weight = norm.k_weight = norm_w;
    if (rope_tier_active(&active) != ROPE_OK) return 1;

    static const struct {
        const char *label, *vis_label;
        size_t hd;
        int llama3;
        unsigned char *mem;
    } defs[2] = {{"head_dim 128 llama3", "head_dim 128 unscaled", 128, 1, mem_h128},
                 {"head_dim 64", "head_dim 64", 64, 0, mem_h64}};
    for (int i = 0; i < 2; i++) {
        variant *v = &vars[i];
        memset(v, 0, sizeof *v);
        v->label = defs[i].label;
        v->vis_label = defs[i].vis_label;
        v->hd = defs[i].hd;
        v->pairs = v->hd / 2;
        rope_config_init(&v->cfg, sizeof v->cfg, v->hd, defs[i].llama3 ? 500000.0 : 10000.0);
        rope_t *h = NULL, *vis = NULL;
        if (defs[i].llama3) {
            /* A handle without scaling for vision, the Llama 3 one for the rest. */
            if (rope_init(mem_vis128, ROPE_STORAGE_SIZE, &v->cfg, &vis) != ROPE_OK) return 1;
            v->cfg.scaling.rope_type = ROPE_SCALING_LLAMA3;
            v->cfg.scaling.factor = 8.0;
            v->cfg.scaling.low_freq_factor = 1.0;
            v->cfg.scaling.high_freq_factor = 4.0;
            v->cfg.scaling.original_max_position_embeddings = 8192;
        }
        if (rope_init(defs[i].mem, ROPE_STORAGE_SIZE, &v->cfg, &h) != ROPE_OK) return 1;
        if (!defs[i].llama3) vis = h;
        if (rope_storage_size(&v->cfg, &v->need) != ROPE_OK) return 1;
        v->h = h;
        v->vis = vis;
        v->q = view(q, HQ, v->hd);
        v->k = view(k, HK, v->hd);
        v->qo = view(qo, HQ, v->hd);
        v->ko = view(ko, HK, v->hd);
        v->q16 = view(q16, HQ, v->hd);
        v->k16 = view(k16, HK, v->hd);
        v->q16o = view(q16o, HQ, v->hd);
        v->k16o = view(k16o, HK, v->hd);
        v->mo = mrope_opts(v->pairs, 0);
        v->vo = mrope_opts(v->pairs, 1);
        if (layer_args(v, i == 1)) return 1;
    }
    return 0;
}

static unsigned rows, over;

static int measure(const entry *e, const variant *v) {
    char name[48];
    function_of(e->call, name, sizeof name);
    unsigned limit = strcmp(name, "rope_apply_layer") == 0 ? LAYER_LIMIT : CALL_LIMIT;
    if (v) {
        V = *v;
        norm.q_weight_len = norm.k_weight_len = v->hd;
    }
    st = INT32_MIN;
    size_t used = stack_used(e->job);
    int failed = 0;
    if (st != e->want) {
        printf("  FAIL %s (%s): %s, want %s\n", name, !v ? "" : e->per_variant == 3 ? v->vis_label : v->label,
               rope_status_name(st), rope_status_name(e->want));
        failed = 1;
    }
    int is_over = used > limit;
    rows++;
    over += (unsigned)is_over;
    const char *verdict = !is_over ? "within" : ROPE_STACK_ENFORCE_ALL ? "OVER LIMIT" : "OVER (target, not enforced yet)";
    if (used >= STACK_PAINT_BYTES) {
        printf("  FAIL %s: the call overflowed the painted %u bytes\n", name, (unsigned)STACK_PAINT_BYTES);
        failed = 1;
    }
    const char *args = e->args ? e->args : v->layer_args;
    char tail[160];
    if (!v)
        snprintf(tail, sizeof tail, "%s", args);
    else if (e->per_variant == 2)
        snprintf(tail, sizeof tail, "dim %u: %s", (unsigned)v->hd, args);
    else
        snprintf(tail, sizeof tail, "%s%s%s", e->per_variant == 3 ? v->vis_label : v->label, args[0] ? ": " : "",
                 args);
    if (tail[0])
        printf("STACK %-32s %6u B  limit %4u B  %-31s  %s\n", name, (unsigned)used, limit, verdict, tail);
    else
        printf("STACK %-32s %6u B  limit %4u B  %s\n", name, (unsigned)used, limit, verdict);
    return failed + (ROPE_STACK_ENFORCE_ALL && is_over);
}

/* The paint area (STACK_PAINT_BYTES below the stack pointer) must lie in RAM above the heap
 * (mps2-an386.ld: RAM 0x20000000..0x20400000, the heap from its start, the stack from its
 * end), or a large call's mark would be wrong. */
static int paint_area_fits(void) {
    extern uint32_t __stack_top;
    uintptr_t sp, heap_end = (uintptr_t)sbrk(0);
    __asm volatile("mov %0, sp" : "=r"(sp));
    uintptr_t lo = sp - STACK_PAINT_BYTES - 1024; /* this frame and stack_used's */
    printf("paint area: %u KB below sp 0x%08x (RAM 0x20000000..0x%08x, heap up to 0x%08x)\n",
           (unsigned)(STACK_PAINT_BYTES / 1024), (unsigned)sp, (unsigned)(uintptr_t)&__stack_top,
           (unsigned)heap_end);
    return heap_end < 0x20000000u || heap_end >= lo ? 1 : 0;
}

int stack_entry_points(void) {
    rope_tier_active(&active);
    printf("\nstack high-water marks of every C entry point (tier %s; limit: the target, %u B per call, "
           "%u B for rope_apply_layer; %s)\n",
           rope_tier_name(active), CALL_LIMIT, LAYER_LIMIT,
           ROPE_STACK_ENFORCE_ALL ? "ENFORCED (ROPE_STACK_ENFORCE_ALL=1)"
                                  : "not enforced yet: ROPE_STACK_ENFORCE_ALL=1 enforces it");
    if (paint_area_fits() != 0) {
        printf("  FAIL stack table: the paint area overlaps the heap\n");
        return 1;
    }
    if (setup()) {
        printf("  FAIL stack table: the handles or arguments could not be built\n");
        return 1;
    }
    int failures = 0;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        const entry *e = &entries[i];
        if (e->per_variant) {
            for (int j = 0; j < 2; j++) failures += measure(e, &vars[j]);
        } else {
            V = vars[0];
            failures += measure(e, NULL);
        }
    }
    printf("stack table: %u calls measured, %u over their limit (%s), %d failed\n", rows, over,
           ROPE_STACK_ENFORCE_ALL ? "enforced" : "not enforced", failures);
    return failures;
}
