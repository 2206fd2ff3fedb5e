/*
 * quickstart.c: rotate the q and k of 4 tokens of Llama 3.1 8B (32 q heads, 8 kv heads,
 * head_dim 128, theta 500000, llama3 scaling) with the C ABI of rope-kernels.
 * Build lines: README.md, "C quick start". Runs on a desktop and on a microcontroller
 * (no allocation: the handle lives in static storage).
 */
#include <stdio.h>

#include "rope_kernels.h"

#define TOKENS 4
#define Q_HEADS 32
#define KV_HEADS 8
#define HEAD_DIM 128

static float q[TOKENS * Q_HEADS * HEAD_DIM];
static float k[TOKENS * KV_HEADS * HEAD_DIM];
static _Alignas(ROPE_STORAGE_ALIGN) unsigned char storage[ROPE_STORAGE_SIZE];

static int fail(const char *what, rope_status s) {
    fprintf(stderr, "%s: %s (%s)\n", what, rope_status_str(s), rope_status_name(s));
    return 1;
}

int main(void) {
    rope_config cfg;
    rope_status s = rope_config_init(&cfg, sizeof cfg, HEAD_DIM, 500000.0);
    if (s != ROPE_OK) return fail("rope_config_init", s);
    cfg.scaling.rope_type = ROPE_SCALING_LLAMA3;
    cfg.scaling.factor = 8.0;
    cfg.scaling.low_freq_factor = 1.0;
    cfg.scaling.high_freq_factor = 4.0;
    cfg.scaling.original_max_position_embeddings = 8192;

    rope_t *rope = NULL;
    s = rope_init(storage, sizeof storage, &cfg, &rope);
    if (s != ROPE_OK) return fail("rope_init", s);

    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) q[i] = 1.0f;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) k[i] = 1.0f;
    /* [tokens][heads][head_dim], strides in elements. */
    rope_tensor tq = {q, sizeof q / sizeof q[0], {TOKENS, Q_HEADS, Q_HEADS * HEAD_DIM, HEAD_DIM}};
    rope_tensor tk = {k, sizeof k / sizeof k[0], {TOKENS, KV_HEADS, KV_HEADS * HEAD_DIM, HEAD_DIM}};
    /* Tokens at positions 10, 11, 12, 13 (a KV-cache offset); forward; cos/sin on the fly. */
    rope_apply_opts opts = {.struct_size = sizeof opts, .start = 10};

    s = rope_apply_f32(rope, &tq, &tk, &opts);
    if (s != ROPE_OK) return fail("rope_apply_f32", s);
    printf("rope_kernels %s: q[token 0][head 0][0] = %.6f, [64] = %.6f\n", rope_version(), (double)q[0],
           (double)q[64]);
    return 0;
}
