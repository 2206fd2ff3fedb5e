/*
 * C test of librope_kernels (static or shared; the test build librope_kernels_testing,
 * which adds rope_test_fault), built and run by capi/tests/c_program.rs (cargo test; CI:
 * .ci/stages/30-capi.sh), also under AddressSanitizer + UBSan.
 *
 *   test_capi EXPECTED.bin
 *
 * EXPECTED.bin is written by c_program.rs with the Rust API: Llama 3.1 8B shaped q/k
 * (32 q heads, 8 kv heads, head_dim 128, theta 500000, llama3 scaling) and the Rust
 * results. This program checks that
 *  1. every path of the C ABI (in place, out of place with other strides, position ids,
 *     start offset, caller table, cache in a caller buffer, forward, inverse, f32, f16,
 *     bf16, every available tier) gives the Rust results bit for bit;
 *  2. the results agree with an independent double-precision RoPE written here, within
 *     a tolerance derived from f32 rounding (so the comparison is not Rust with itself);
 *  3. every rope_status is produced by some call, failing calls write nothing, and
 *     hostile input (NULL, misaligned, overflowing, unknown enums, NaN) never crashes;
 *  4. the sibling encodings (sinusoidal, learned, relative indices, ALiBi) give the Rust
 *     results bit for bit, agree with the published formulas evaluated here and with the
 *     reference values of issue 8, and produce their statuses (60..66) without writing;
 *  5. no call writes a buffer that overlaps the handle's own storage (issue 16).
 * Stale handles (after rope_free) are tested against the release library by test_stale.c.
 */
/* Declares the test hook rope_test_fault, which only the test build of the library has:
 * this program links librope_kernels_testing (capi/testing), not librope_kernels. */
#define ROPE_CAPI_TESTING 1
#include "rope_kernels.h"

#include <math.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_TOKENS 5
#define HQ 32
#define HKV 8
#define HD 128
#define PAIRS (HD / 2)
#define NQ (T_TOKENS * HQ * HD)
#define NK (T_TOKENS * HKV * HD)
#define THETA 500000.0
#define START 100u
#define PI 3.14159265358979323846

static int failures = 0;
#define MAX_STATUS 128
static int seen[MAX_STATUS];

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
        }                                                                                    \
    } while (0)

/* Runs `call`, records its status as seen, and checks it is `want`. */
#define EXPECT(want, call)                                                                   \
    do {                                                                                     \
        rope_status got_ = (call);                                                           \
        if (got_ >= 0 && got_ < MAX_STATUS) seen[got_] = 1;                                  \
        CHECK(got_ == (want), "%s: got %s (%d), want %s", #call, rope_status_name(got_),     \
              (int)got_, rope_status_name(want));                                            \
    } while (0)

/* ---- expected data from the Rust API ---- */

static uint32_t positions[T_TOKENS];
static double inv_freq_rust[PAIRS], attention_factor_rust;
static float q_in[NQ], k_in[NK], q_fwd[NQ], k_fwd[NK], q_inv[NQ], k_inv[NK];
static float q_start[NQ], k_start[NK];
static uint16_t q_in_h[NQ], k_in_h[NK], q_fwd_h[NQ], k_fwd_h[NK];
static uint16_t q_in_b[NQ], k_in_b[NK], q_fwd_b[NQ], k_fwd_b[NK];

static void read_exact(FILE *f, void *p, size_t size, size_t n, const char *what) {
    if (fread(p, size, n, f) != n) {
        fprintf(stderr, "EXPECTED file too short at %s\n", what);
        exit(2);
    }
}

static void load_encodings(FILE *f); /* section 4 */

static void load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    uint32_t hdr[6];
    read_exact(f, hdr, 4, 6, "header");
    if (hdr[0] != 0x54434B52u || hdr[1] != 2 || hdr[2] != T_TOKENS || hdr[3] != HQ ||
        hdr[4] != HKV || hdr[5] != HD) {
        fprintf(stderr, "EXPECTED file header does not match this program\n");
        exit(2);
    }
    read_exact(f, positions, 4, T_TOKENS, "positions");
    read_exact(f, inv_freq_rust, 8, PAIRS, "inv_freq");
    read_exact(f, &attention_factor_rust, 8, 1, "attention_factor");
    read_exact(f, q_in, 4, NQ, "q_in");
    read_exact(f, k_in, 4, NK, "k_in");
    read_exact(f, q_fwd, 4, NQ, "q_fwd");
    read_exact(f, k_fwd, 4, NK, "k_fwd");
    read_exact(f, q_inv, 4, NQ, "q_inv");
    read_exact(f, k_inv, 4, NK, "k_inv");
    read_exact(f, q_start, 4, NQ, "q_start");
    read_exact(f, k_start, 4, NK, "k_start");
    read_exact(f, q_in_h, 2, NQ, "q_in_f16");
    read_exact(f, k_in_h, 2, NK, "k_in_f16");
    read_exact(f, q_fwd_h, 2, NQ, "q_fwd_f16");
    read_exact(f, k_fwd_h, 2, NK, "k_fwd_f16");
    read_exact(f, q_in_b, 2, NQ, "q_in_bf16");
    read_exact(f, k_in_b, 2, NK, "k_in_bf16");
    read_exact(f, q_fwd_b, 2, NQ, "q_fwd_bf16");
    read_exact(f, k_fwd_b, 2, NK, "k_fwd_bf16");
    load_encodings(f);
    uint8_t extra;
    if (fread(&extra, 1, 1, f) != 0) {
        fprintf(stderr, "EXPECTED file longer than this program reads\n");
        exit(2);
    }
    fclose(f);
}

/* ---- independent double-precision reference ---- */

/* Llama 3.1 frequencies (Meta llama-models `apply_scaling`, HF `_compute_llama3_parameters`). */
static void llama3_inv_freq(double out[PAIRS]) {
    const double factor = 8.0, low = 1.0, high = 4.0, orig = 8192.0;
    const double low_wavelen = orig / low, high_wavelen = orig / high;
    for (int i = 0; i < PAIRS; i++) {
        double b = 1.0 / pow(THETA, (2.0 * i) / HD);
        double wavelen = 2.0 * PI / b;
        if (wavelen < high_wavelen) {
            out[i] = b;
        } else if (wavelen > low_wavelen) {
            out[i] = b / factor;
        } else {
            double s = (orig / wavelen - low) / (high - low);
            out[i] = (1.0 - s) * b / factor + s * b;
        }
    }
}

/* HalfSplit rotation of one head in double: pairs (i, i + PAIRS). */
static void rotate_ref(const double *x, double *y, uint32_t pos, const double *inv_freq, int inverse) {
    for (int i = 0; i < PAIRS; i++) {
        double a = (double)pos * inv_freq[i];
        double c = cos(a), s = inverse ? -sin(a) : sin(a);
        y[i] = x[i] * c - x[i + PAIRS] * s;
        y[i + PAIRS] = x[i + PAIRS] * c + x[i] * s;
    }
}

static float f16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    float v;
    if (exp == 0) {
        v = ldexpf((float)man, -24);
    } else if (exp == 31) {
        v = man ? NAN : INFINITY;
    } else {
        v = ldexpf((float)(man | 0x400), (int)exp - 25);
    }
    return sign ? -v : v;
}

static float bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/*
 * Compares `got` ([tokens][heads][HD], BSHD) with the double reference of `in` rotated at
 * `pos[t]`. Error bound per element for |x| <= 1: cos/sin rounded to f32 (1 ulp each),
 * two f32 products and a sum rounded once each -> |err| <= 2u(|x0| + |x1|) + u|y| with
 * u = 2^-24; plus, for half types, half an ulp of the stored type: |y| * 2^-p (p the
 * significand bits) or, for f16 subnormals, 2^-25.
 */
static double max_error_vs_ref(const float *in, const float *got, size_t heads, const uint32_t *pos,
                               int inverse, double rel_store, double abs_store) {
    double inv_freq[PAIRS], x[HD], y[HD], worst = 0.0;
    const double u = ldexp(1.0, -24);
    llama3_inv_freq(inv_freq);
    for (size_t t = 0; t < T_TOKENS; t++) {
        for (size_t h = 0; h < heads; h++) {
            const float *xi = in + (t * heads + h) * HD;
            const float *yo = got + (t * heads + h) * HD;
            for (int d = 0; d < HD; d++) x[d] = xi[d];
            rotate_ref(x, y, pos[t], inv_freq, inverse);
            for (int d = 0; d < HD; d++) {
                int p = d < PAIRS ? d : d - PAIRS;
                double bound = 2 * u * (fabs(x[p]) + fabs(x[p + PAIRS])) + u * fabs(y[d]) +
                               rel_store * fabs(y[d]) * (1 + 0x1p-20) + abs_store + 1e-30;
                double e = fabs((double)yo[d] - y[d]) / bound;
                if (!(e <= worst)) worst = e; /* NaN propagates as a failure */
            }
        }
    }
    return worst; /* <= 1 when within the bound */
}

/* ---- helpers ---- */

static rope_view bshd(size_t tokens, size_t heads) {
    rope_view v = {tokens, heads, heads * HD, HD};
    return v;
}

static rope_tensor tensor(void *data, size_t len, rope_view view) {
    rope_tensor t = {data, len, view};
    return t;
}

static rope_apply_opts opts_ids(const uint32_t *ids, size_t n) {
    rope_apply_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.position_mode = ROPE_POSITIONS_IDS;
    o.position_ids = ids;
    o.position_ids_len = n;
    return o;
}

static void llama3_config(rope_config *cfg) {
    EXPECT(ROPE_OK, rope_config_init(cfg, sizeof *cfg, HD, THETA));
    cfg->scaling.rope_type = ROPE_SCALING_LLAMA3;
    cfg->scaling.factor = 8.0;
    cfg->scaling.low_freq_factor = 1.0;
    cfg->scaling.high_freq_factor = 4.0;
    cfg->scaling.original_max_position_embeddings = 8192;
}

static int same(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

static alignas(ROPE_STORAGE_ALIGN) unsigned char storage[ROPE_STORAGE_SIZE];
static alignas(ROPE_STORAGE_ALIGN) unsigned char storage2[ROPE_STORAGE_SIZE];
static float qa[NQ], ka[NK], qb[NQ], kb[NK];
static uint16_t qh[NQ], kh[NK];

/* ---- 1 and 2: results ---- */

static void check_results(const rope_t *rope) {
    rope_apply_opts o = opts_ids(positions, T_TOKENS);
    rope_tensor q, k;

    /* Frequencies: bit-equal to Rust; equal to the C formula up to libm differences. */
    double inv_freq[PAIRS + 3], af = 0.0, ref[PAIRS];
    inv_freq[PAIRS] = 42.0;
    EXPECT(ROPE_OK, rope_frequencies(rope, 0, inv_freq, PAIRS + 3, &af));
    CHECK(same(inv_freq, inv_freq_rust, sizeof inv_freq_rust), "inv_freq differs from Rust");
    CHECK(inv_freq[PAIRS] == 42.0, "rope_frequencies wrote past rotary_dim / 2");
    CHECK(af == attention_factor_rust && af == 1.0, "attention_factor %g", af);
    llama3_inv_freq(ref);
    for (int i = 0; i < PAIRS; i++)
        CHECK(fabs(inv_freq[i] - ref[i]) <= 1e-13 * ref[i], "inv_freq[%d] %.17g vs C %.17g", i,
              inv_freq[i], ref[i]);

    /* In place, position ids, on the fly, q and k (GQA), on every available tier. */
    uint32_t mask = 0, active = 0;
    EXPECT(ROPE_OK, rope_tiers_available(&mask));
    CHECK(mask & (1u << ROPE_TIER_SCALAR), "scalar tier missing from mask %#x", mask);
    for (rope_tier t = ROPE_TIER_SCALAR; t <= ROPE_TIER_AVX512; t++) {
        if (!(mask & (1u << t))) {
            printf("tier %s: not available here, skipped\n", rope_tier_name(t));
            continue;
        }
        EXPECT(ROPE_OK, rope_tier_force(t));
        EXPECT(ROPE_OK, rope_tier_active(&active));
        CHECK(active == t, "active tier %u after forcing %u", active, t);
        memcpy(qa, q_in, sizeof qa);
        memcpy(ka, k_in, sizeof ka);
        q = tensor(qa, NQ, bshd(T_TOKENS, HQ));
        k = tensor(ka, NK, bshd(T_TOKENS, HKV));
        EXPECT(ROPE_OK, rope_apply_f32(rope, &q, &k, &o));
        CHECK(same(qa, q_fwd, sizeof qa) && same(ka, k_fwd, sizeof ka), "tier %s: f32 differs from Rust",
              rope_tier_name(t));
        memcpy(qh, q_in_h, sizeof qh);
        memcpy(kh, k_in_h, sizeof kh);
        q.data = qh;
        k.data = kh;
        EXPECT(ROPE_OK, rope_apply_f16(rope, &q, &k, &o));
        CHECK(same(qh, q_fwd_h, sizeof qh) && same(kh, k_fwd_h, sizeof kh), "tier %s: f16 differs",
              rope_tier_name(t));
        memcpy(qh, q_in_b, sizeof qh);
        memcpy(kh, k_in_b, sizeof kh);
        EXPECT(ROPE_OK, rope_apply_bf16(rope, &q, &k, &o));
        CHECK(same(qh, q_fwd_b, sizeof qh) && same(kh, k_fwd_b, sizeof kh), "tier %s: bf16 differs",
              rope_tier_name(t));
        printf("tier %s: f32, f16, bf16 bit-identical to the Rust API\n", rope_tier_name(t));
    }
    rope_tier best = 0;
    EXPECT(ROPE_OK, rope_tier_reset(&best));
    EXPECT(ROPE_OK, rope_tier_cap(ROPE_TIER_SCALAR, NULL));
    EXPECT(ROPE_OK, rope_tier_active(&active));
    CHECK(active == ROPE_TIER_SCALAR, "cap to scalar gave %u", active);
    EXPECT(ROPE_OK, rope_tier_reset(NULL));
    EXPECT(ROPE_OK, rope_tier_active(&active));
    CHECK(active == best, "reset gave %u, then %u", best, active);

    /* The independent reference. */
    double e = max_error_vs_ref(q_in, q_fwd, HQ, positions, 0, 0.0, 0.0);
    CHECK(e <= 1.0, "q vs double reference: %.3g x the f32 bound", e);
    printf("f32 vs C double reference: worst error %.3f of the f32 rounding bound\n", e);
    CHECK(max_error_vs_ref(k_in, k_fwd, HKV, positions, 0, 0.0, 0.0) <= 1.0, "k vs double reference");
    static float in_dec[NQ], out_dec[NQ];
    for (size_t i = 0; i < NQ; i++) {
        in_dec[i] = f16_to_float(q_in_h[i]);
        out_dec[i] = f16_to_float(q_fwd_h[i]);
    }
    e = max_error_vs_ref(in_dec, out_dec, HQ, positions, 0, ldexp(1.0, -11), ldexp(1.0, -25));
    CHECK(e <= 1.0, "f16 q vs double reference: %.3g x bound", e);
    for (size_t i = 0; i < NQ; i++) {
        in_dec[i] = bf16_to_float(q_in_b[i]);
        out_dec[i] = bf16_to_float(q_fwd_b[i]);
    }
    e = max_error_vs_ref(in_dec, out_dec, HQ, positions, 0, ldexp(1.0, -8), 0.0);
    CHECK(e <= 1.0, "bf16 q vs double reference: %.3g x bound", e);

    /* Inverse: Rust's bits, the reference, and back to the input within rounding. */
    memcpy(qa, q_fwd, sizeof qa);
    memcpy(ka, k_fwd, sizeof ka);
    q = tensor(qa, NQ, bshd(T_TOKENS, HQ));
    k = tensor(ka, NK, bshd(T_TOKENS, HKV));
    rope_apply_opts oi = o;
    oi.direction = ROPE_INVERSE;
    EXPECT(ROPE_OK, rope_apply_f32(rope, &q, &k, &oi));
    CHECK(same(qa, q_inv, sizeof qa) && same(ka, k_inv, sizeof ka), "inverse differs from Rust");
    CHECK(max_error_vs_ref(q_fwd, q_inv, HQ, positions, 1, 0.0, 0.0) <= 1.0, "inverse vs reference");
    double back = 0.0;
    for (size_t i = 0; i < NQ; i++) back = fmax(back, fabs((double)qa[i] - q_in[i]));
    CHECK(back <= 1e-6, "inverse(forward(q)) - q = %g", back);

    /* Out of place into BHSD outputs with padded strides; inputs untouched. */
    static float qo[HQ * T_TOKENS * HD + 7], ko[HKV * (T_TOKENS + 1) * HD];
    rope_view qov = {T_TOKENS, HQ, HD, T_TOKENS * HD};
    rope_view kov = {T_TOKENS, HKV, HD, (T_TOKENS + 1) * HD};
    q = tensor((void *)q_in, NQ, bshd(T_TOKENS, HQ));
    k = tensor((void *)k_in, NK, bshd(T_TOKENS, HKV));
    rope_tensor q_out = tensor(qo, sizeof qo / 4, qov), k_out = tensor(ko, sizeof ko / 4, kov);
    EXPECT(ROPE_OK, rope_apply_into_f32(rope, &q, &q_out, &k, &k_out, &o));
    int ok = 1;
    for (size_t t = 0; t < T_TOKENS; t++)
        for (size_t h = 0; h < HQ; h++)
            ok &= same(qo + t * HD + h * T_TOKENS * HD, q_fwd + (t * HQ + h) * HD, HD * 4);
    for (size_t t = 0; t < T_TOKENS; t++)
        for (size_t h = 0; h < HKV; h++)
            ok &= same(ko + t * HD + h * (T_TOKENS + 1) * HD, k_fwd + (t * HKV + h) * HD, HD * 4);
    CHECK(ok, "out of place (BHSD, padded) differs from Rust");
    memcpy(qh, q_in_b, sizeof qh);
    static uint16_t qho[NQ];
    q = tensor(qh, NQ, bshd(T_TOKENS, HQ));
    q_out = tensor(qho, NQ, bshd(T_TOKENS, HQ));
    EXPECT(ROPE_OK, rope_apply_into_bf16(rope, &q, &q_out, NULL, NULL, &o));
    CHECK(same(qho, q_fwd_b, sizeof qho) && same(qh, q_in_b, sizeof qh), "bf16 out of place");
    memcpy(qh, q_in_h, sizeof qh);
    EXPECT(ROPE_OK, rope_apply_into_f16(rope, &q, &q_out, NULL, NULL, &o));
    CHECK(same(qho, q_fwd_h, sizeof qho), "f16 out of place");

    /* Caller table: one row per token (positions[t] in row t), then ids 0..T-1. */
    static float cos_t[T_TOKENS * PAIRS], sin_t[T_TOKENS * PAIRS];
    for (size_t t = 0; t < T_TOKENS; t++)
        EXPECT(ROPE_OK, rope_fill_table(rope, positions[t], cos_t + t * PAIRS, sin_t + t * PAIRS, PAIRS));
    static const uint32_t rows[T_TOKENS] = {0, 1, 2, 3, 4};
    rope_apply_opts ot = opts_ids(rows, T_TOKENS);
    ot.cos_sin = ROPE_COS_SIN_TABLE;
    ot.cos = cos_t;
    ot.sin = sin_t;
    ot.table_len = T_TOKENS * PAIRS;
    memcpy(qa, q_in, sizeof qa);
    memcpy(ka, k_in, sizeof ka);
    q = tensor(qa, NQ, bshd(T_TOKENS, HQ));
    k = tensor(ka, NK, bshd(T_TOKENS, HKV));
    EXPECT(ROPE_OK, rope_apply_f32(rope, &q, &k, &ot));
    CHECK(same(qa, q_fwd, sizeof qa) && same(ka, k_fwd, sizeof ka), "caller table differs from Rust");

    /* Start offset, on the fly and from a cache of positions 0..START+T-1. */
    rope_apply_opts os;
    memset(&os, 0, sizeof os);
    os.struct_size = sizeof os;
    os.start = START;
    memcpy(qa, q_in, sizeof qa);
    memcpy(ka, k_in, sizeof ka);
    EXPECT(ROPE_OK, rope_apply_f32(rope, &q, &k, &os));
    CHECK(same(qa, q_start, sizeof qa) && same(ka, k_start, sizeof ka), "start offset differs from Rust");
    size_t cache_len = (START + T_TOKENS) * PAIRS;
    float *cache_cos = malloc(cache_len * 4), *cache_sin = malloc(cache_len * 4);
    CHECK(cache_cos && cache_sin, "malloc");
    EXPECT(ROPE_OK, rope_fill_table(rope, 0, cache_cos, cache_sin, cache_len));
    os.cos_sin = ROPE_COS_SIN_TABLE;
    os.cos = cache_cos;
    os.sin = cache_sin;
    os.table_len = cache_len;
    memcpy(qa, q_in, sizeof qa);
    memcpy(ka, k_in, sizeof ka);
    EXPECT(ROPE_OK, rope_apply_f32(rope, &q, &k, &os));
    CHECK(same(qa, q_start, sizeof qa) && same(ka, k_start, sizeof ka), "cache differs from Rust");
    /* A position past the cache. */
    os.start = START + 1;
    EXPECT(ROPE_POSITION_OUT_OF_RANGE, rope_apply_f32(rope, &q, &k, &os));
    free(cache_cos);
    free(cache_sin);

    /* NULL options: forward from position 0; a zero-token call with NULL buffers. */
    memcpy(qa, q_in, sizeof qa);
    q = tensor(qa, NQ, bshd(T_TOKENS, HQ));
    EXPECT(ROPE_OK, rope_apply_f32(rope, &q, NULL, NULL));
    q = tensor(NULL, 0, bshd(0, HQ));
    EXPECT(ROPE_OK, rope_apply_f32(rope, &q, NULL, NULL));
    rope_apply_opts oe = opts_ids(NULL, 0);
    EXPECT(ROPE_OK, rope_apply_bf16(rope, &q, NULL, &oe));
}

/* ---- 3: statuses ---- */

/* Applies with q/k of the Llama shape; sentinel buffers must stay as they were. */
static rope_status apply_checked(const rope_t *rope, rope_tensor *q, rope_tensor *k,
                                 const rope_apply_opts *o) {
    memcpy(qb, qa, sizeof qb);
    memcpy(kb, ka, sizeof kb);
    rope_status s = rope_apply_f32(rope, q, k, o);
    if (s != ROPE_OK)
        CHECK(same(qa, qb, sizeof qa) && same(ka, kb, sizeof ka), "failing apply (%s) wrote",
              rope_status_name(s));
    return s;
}

/* A tier this CPU lacks (0: every tier is available), for ROPE_TIER_UNAVAILABLE. */
static rope_tier missing_tier;

static void check_statuses(const rope_t *rope) {
    rope_config cfg;
    rope_t *h = NULL;

    /* Configuration errors. */
    llama3_config(&cfg);
    EXPECT(ROPE_OK, rope_config_validate(&cfg));
    cfg.head_dim = 0;
    cfg.rotary_dim = 0;
    EXPECT(ROPE_ZERO_HEAD_DIM, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.rotary_dim = 127;
    EXPECT(ROPE_INVALID_ROTARY_DIM, rope_config_validate(&cfg));
    cfg.rotary_dim = 0;
    EXPECT(ROPE_INVALID_ROTARY_DIM, rope_config_validate(&cfg));
    cfg.rotary_dim = 130;
    EXPECT(ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM, rope_config_validate(&cfg));
    cfg.head_dim = cfg.rotary_dim = 1024;
    EXPECT(ROPE_ROTARY_DIM_TOO_LARGE, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.theta = NAN;
    EXPECT(ROPE_INVALID_THETA, rope_config_validate(&cfg));
    cfg.theta = -1.0;
    EXPECT(ROPE_INVALID_THETA, rope_config_validate(&cfg));
    cfg.theta = INFINITY;
    EXPECT(ROPE_INVALID_THETA, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.scaling.factor = NAN;
    EXPECT(ROPE_INVALID_SCALING_PARAMETER, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.scaling.low_freq_factor = 5.0; /* above high_freq_factor */
    EXPECT(ROPE_INVALID_SCALING_PARAMETER, rope_config_validate(&cfg));
    cfg.scaling.low_freq_factor = 4.0; /* equal (Llama 4): no blend band, valid */
    EXPECT(ROPE_OK, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.scaling.rope_type = ROPE_SCALING_YARN;
    cfg.scaling.beta_fast = NAN;
    EXPECT(ROPE_INVALID_SCALING_PARAMETER, rope_config_validate(&cfg));
    cfg.scaling.beta_fast = 32.0;
    EXPECT(ROPE_OK, rope_config_validate(&cfg));
    cfg.scaling.truncate = 2;
    EXPECT(ROPE_INVALID_ARGUMENT, rope_config_validate(&cfg));
    cfg.scaling.truncate = 1;
    cfg.scaling.has_attention_factor = 7;
    EXPECT(ROPE_INVALID_ARGUMENT, rope_config_validate(&cfg));
    cfg.scaling.has_attention_factor = 1;
    cfg.scaling.attention_factor = NAN;
    EXPECT(ROPE_INVALID_SCALING_PARAMETER, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.scaling.rope_type = ROPE_SCALING_LONGROPE;
    cfg.scaling.factor = 16.0;
    double short_f[PAIRS], long_f[PAIRS];
    for (int i = 0; i < PAIRS; i++) short_f[i] = 1.0, long_f[i] = 1.0 + i / 8.0;
    cfg.scaling.short_factor = short_f;
    cfg.scaling.short_factor_len = PAIRS;
    cfg.scaling.long_factor = long_f;
    cfg.scaling.long_factor_len = PAIRS;
    EXPECT(ROPE_OK, rope_config_validate(&cfg));
    cfg.scaling.long_factor_len = PAIRS - 1;
    EXPECT(ROPE_INVALID_SCALING_PARAMETER, rope_config_validate(&cfg));
    cfg.scaling.long_factor_len = (size_t)-1; /* longer than any rotary_dim: no read */
    EXPECT(ROPE_INVALID_SCALING_PARAMETER, rope_config_validate(&cfg));
    cfg.scaling.long_factor_len = PAIRS;
    cfg.scaling.long_factor = NULL;
    EXPECT(ROPE_NULL_POINTER, rope_config_validate(&cfg));
    cfg.scaling.long_factor = (const double *)((const char *)long_f + 4);
    EXPECT(ROPE_MISALIGNED_POINTER, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.scaling.rope_type = ROPE_SCALING_FREQ_FACTORS;
    cfg.scaling.freq_factors = long_f;
    cfg.scaling.freq_factors_len = PAIRS;
    EXPECT(ROPE_OK, rope_config_validate(&cfg));
    long_f[3] = -1.0;
    EXPECT(ROPE_INVALID_SCALING_PARAMETER, rope_config_validate(&cfg));
    long_f[3] = 1.0;
    cfg.scaling.rope_type = 99;
    EXPECT(ROPE_UNKNOWN_ENUM, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.layout = 2;
    EXPECT(ROPE_UNKNOWN_ENUM, rope_config_validate(&cfg));
    cfg.layout = ROPE_LAYOUT_INTERLEAVED;
    cfg.angle_mode = 0xFFFFFFFFu;
    EXPECT(ROPE_UNKNOWN_ENUM, rope_config_validate(&cfg));
    llama3_config(&cfg);
    float table[PAIRS];
    for (int i = 0; i < PAIRS; i++) table[i] = (float)inv_freq_rust[i];
    cfg.inv_freq = table;
    cfg.inv_freq_len = PAIRS;
    EXPECT(ROPE_OK, rope_config_validate(&cfg));
    cfg.inv_freq_len = PAIRS - 1;
    EXPECT(ROPE_INV_FREQ_LENGTH, rope_config_validate(&cfg));
    cfg.inv_freq_len = (size_t)-1 / 2;
    EXPECT(ROPE_INV_FREQ_LENGTH, rope_config_validate(&cfg));
    cfg.inv_freq_len = PAIRS;
    table[0] = NAN;
    EXPECT(ROPE_INVALID_SCALING_PARAMETER, rope_config_validate(&cfg));
    llama3_config(&cfg);
    cfg.struct_size = 0;
    EXPECT(ROPE_UNSUPPORTED_STRUCT_SIZE, rope_config_validate(&cfg));
    cfg.struct_size = sizeof cfg + 8;
    EXPECT(ROPE_UNSUPPORTED_STRUCT_SIZE, rope_config_validate(&cfg));
    EXPECT(ROPE_UNSUPPORTED_STRUCT_SIZE, rope_config_init(&cfg, sizeof cfg - 1, HD, THETA));
    EXPECT(ROPE_NULL_POINTER, rope_config_validate(NULL));
    EXPECT(ROPE_NULL_POINTER, rope_config_init(NULL, sizeof cfg, HD, THETA));
    static alignas(16) unsigned char cfg_bytes[sizeof(rope_config) + 16];
    memcpy(cfg_bytes + 1, &cfg, sizeof cfg);
    EXPECT(ROPE_MISALIGNED_POINTER, rope_config_validate((const rope_config *)(const void *)(cfg_bytes + 1)));

    /* Handles: storage size and alignment, out-parameter, magic, heap. */
    llama3_config(&cfg);
    CHECK(rope_size() <= ROPE_STORAGE_SIZE && rope_align() <= ROPE_STORAGE_ALIGN, "storage bounds");
    memset(storage2, 0xAB, sizeof storage2);
    /* Storage sized to the configuration (issue 13): one byte less is too small. */
    size_t storage_need = 0;
    EXPECT(ROPE_OK, rope_storage_size(&cfg, &storage_need));
    CHECK(storage_need <= rope_size(), "rope_storage_size %zu <= rope_size()", storage_need);
    EXPECT(ROPE_BUFFER_TOO_SMALL, rope_init(storage2, storage_need - 1, &cfg, &h));
    EXPECT(ROPE_BUFFER_TOO_SMALL, rope_init(storage2, 0, &cfg, &h));
    EXPECT(ROPE_MISALIGNED_POINTER, rope_init(storage2 + 1, sizeof storage2 - 1, &cfg, &h));
    EXPECT(ROPE_NULL_POINTER, rope_init(NULL, sizeof storage2, &cfg, &h));
    EXPECT(ROPE_NULL_POINTER, rope_init(storage2, sizeof storage2, NULL, &h));
    EXPECT(ROPE_NULL_POINTER, rope_init(storage2, sizeof storage2, &cfg, NULL));
    EXPECT(ROPE_OVERLAPPING_BUFFERS,
           rope_init(storage2, sizeof storage2, &cfg, (rope_t **)(void *)(storage2 + 64)));
    cfg.theta = 0.0;
    EXPECT(ROPE_INVALID_THETA, rope_init(storage2, sizeof storage2, &cfg, &h));
    CHECK(h == NULL, "a failing rope_init wrote *out");
    for (size_t i = 0; i < sizeof storage2; i++)
        if (storage2[i] != 0xAB) {
            CHECK(0, "a failing rope_init wrote the storage");
            break;
        }
    memset(storage2, 0, sizeof storage2);
    const rope_t *zeroed = (const rope_t *)(const void *)storage2;
    size_t pairs = 0;
    EXPECT(ROPE_INVALID_HANDLE, rope_pairs(zeroed, &pairs));
    EXPECT(ROPE_NULL_POINTER, rope_pairs(NULL, &pairs));
    EXPECT(ROPE_MISALIGNED_POINTER, rope_pairs((const rope_t *)(const void *)(storage + 4), &pairs));
    EXPECT(ROPE_NULL_POINTER, rope_pairs(rope, NULL));
    EXPECT(ROPE_OK, rope_pairs(rope, &pairs));
    CHECK(pairs == PAIRS, "pairs %zu", pairs);
    EXPECT(ROPE_INVALID_HANDLE, rope_free((rope_t *)(void *)storage)); /* caller storage */
    EXPECT(ROPE_OK, rope_free(NULL));
    llama3_config(&cfg);
    EXPECT(ROPE_OK, rope_new(&cfg, &h));
    EXPECT(ROPE_OK, rope_pairs(h, &pairs));
    EXPECT(ROPE_OK, rope_free(h));
    h = NULL;
    EXPECT(ROPE_OK, rope_test_fault(ROPE_TEST_FAULT_ALLOC));
    EXPECT(ROPE_OUT_OF_MEMORY, rope_new(&cfg, &h));
    CHECK(h == NULL, "a failing rope_new wrote *out");
    EXPECT(ROPE_OK, rope_new(&cfg, &h)); /* the fault was one-shot */
    EXPECT(ROPE_OK, rope_free(h));
    EXPECT(ROPE_PANIC, rope_test_fault(ROPE_TEST_FAULT_PANIC));
    EXPECT(ROPE_UNKNOWN_ENUM, rope_test_fault(0));

    /* Frequencies and tables. */
    double f[PAIRS];
    EXPECT(ROPE_BUFFER_TOO_SMALL, rope_frequencies(rope, 0, f, PAIRS - 1, NULL));
    EXPECT(ROPE_BUFFER_TOO_SMALL, rope_frequencies(rope, 0, NULL, 0, NULL));
    EXPECT(ROPE_NULL_POINTER, rope_frequencies(rope, 0, NULL, PAIRS, NULL));
    EXPECT(ROPE_MISALIGNED_POINTER,
           rope_frequencies(rope, 0, (double *)(void *)((char *)f + 1), PAIRS - 1, NULL));
    static float ct[2 * PAIRS + 1], st[2 * PAIRS + 1];
    EXPECT(ROPE_TABLE_SHAPE, rope_fill_table(rope, 0, ct, st, PAIRS + 1));
    EXPECT(ROPE_POSITION_OVERFLOW, rope_fill_table(rope, UINT32_MAX, ct, st, 2 * PAIRS));
    EXPECT(ROPE_OK, rope_fill_table(rope, UINT32_MAX, ct, st, PAIRS));
    EXPECT(ROPE_OVERLAPPING_BUFFERS, rope_fill_table(rope, 0, ct, ct + 1, PAIRS));
    EXPECT(ROPE_OK, rope_fill_table(rope, 0, NULL, NULL, 0));
    EXPECT(ROPE_INVALID_ARGUMENT, rope_fill_table(rope, 0, ct, st, SIZE_MAX / 2));

    /* Tiers. */
    uint32_t mask = 0;
    EXPECT(ROPE_OK, rope_tiers_available(&mask));
    for (rope_tier t = ROPE_TIER_SCALAR; t <= ROPE_TIER_AVX512; t++)
        if (!(mask & (1u << t))) missing_tier = t;
    if (missing_tier)
        EXPECT(ROPE_TIER_UNAVAILABLE, rope_tier_force(missing_tier));
    else
        printf("every tier is available: ROPE_TIER_UNAVAILABLE cannot occur here\n");
    EXPECT(ROPE_UNKNOWN_ENUM, rope_tier_force(0));
    EXPECT(ROPE_UNKNOWN_ENUM, rope_tier_force(6));
    EXPECT(ROPE_UNKNOWN_ENUM, rope_tier_cap(1000, NULL));
    EXPECT(ROPE_NULL_POINTER, rope_tiers_available(NULL));
    EXPECT(ROPE_NULL_POINTER, rope_tier_active(NULL));
    CHECK(strcmp(rope_tier_name(ROPE_TIER_AVX2), "avx2") == 0, "tier name");
    CHECK(strcmp(rope_tier_name(77), "unknown") == 0, "unknown tier name");

    /* Apply: every call error, none writes. */
    rope_tensor q = tensor(qa, NQ, bshd(T_TOKENS, HQ)), k = tensor(ka, NK, bshd(T_TOKENS, HKV));
    rope_apply_opts o = opts_ids(positions, T_TOKENS);
    for (size_t i = 0; i < NQ; i++) qa[i] = (float)i;
    for (size_t i = 0; i < NK; i++) ka[i] = -(float)i;
    rope_tensor bad = q;
    bad.len = NQ - 1;
    EXPECT(ROPE_BUFFER_TOO_SMALL, apply_checked(rope, &bad, &k, &o));
    bad = k;
    bad.view.tokens = T_TOKENS - 1;
    EXPECT(ROPE_SHAPE_MISMATCH, apply_checked(rope, &q, &bad, &o));
    bad = q;
    bad.view.head_stride = HD / 2;
    EXPECT(ROPE_OVERLAPPING_STRIDES, apply_checked(rope, &bad, &k, &o));
    bad.view.head_stride = HD;
    bad.view.token_stride = SIZE_MAX / 2;
    EXPECT(ROPE_STRIDE_OVERFLOW, apply_checked(rope, &bad, &k, &o));
    bad = q;
    bad.data = NULL;
    EXPECT(ROPE_NULL_POINTER, apply_checked(rope, &bad, &k, &o));
    bad.data = (char *)(void *)qa + 2;
    bad.len = NQ - 1;
    EXPECT(ROPE_MISALIGNED_POINTER, apply_checked(rope, &bad, &k, &o));
    bad = q;
    bad.len = SIZE_MAX / 2; /* byte size past PTRDIFF_MAX */
    EXPECT(ROPE_INVALID_ARGUMENT, apply_checked(rope, &bad, &k, &o));
    bad.len = 0; /* a zero-length buffer needs an empty view */
    EXPECT(ROPE_BUFFER_TOO_SMALL, apply_checked(rope, &bad, &k, &o));
    EXPECT(ROPE_NULL_POINTER, apply_checked(rope, NULL, &k, &o));
    EXPECT(ROPE_NULL_POINTER, apply_checked(NULL, &q, &k, &o));
    EXPECT(ROPE_INVALID_HANDLE, apply_checked(zeroed, &q, &k, &o));
    bad = q;
    bad.data = ka;
    bad.len = NK;
    bad.view = bshd(T_TOKENS, HKV);
    EXPECT(ROPE_OVERLAPPING_BUFFERS, apply_checked(rope, &bad, &k, &o));
    rope_apply_opts ob = o;
    ob.position_ids_len = T_TOKENS - 1;
    EXPECT(ROPE_POSITION_COUNT_MISMATCH, apply_checked(rope, &q, &k, &ob));
    ob.position_ids = (const uint32_t *)(const void *)qa; /* inside q, which is written */
    ob.position_ids_len = T_TOKENS;
    EXPECT(ROPE_OVERLAPPING_BUFFERS, apply_checked(rope, &q, &k, &ob));
    ob = o;
    ob.position_ids = NULL;
    EXPECT(ROPE_NULL_POINTER, apply_checked(rope, &q, &k, &ob));
    ob = o;
    ob.position_mode = ROPE_POSITIONS_START;
    ob.start = UINT32_MAX - 1;
    EXPECT(ROPE_POSITION_OVERFLOW, apply_checked(rope, &q, &k, &ob));
    ob.start = 0;
    ob.direction = 2;
    EXPECT(ROPE_UNKNOWN_ENUM, apply_checked(rope, &q, &k, &ob));
    ob.direction = ROPE_FORWARD;
    ob.position_mode = 5;
    EXPECT(ROPE_UNKNOWN_ENUM, apply_checked(rope, &q, &k, &ob));
    ob.position_mode = ROPE_POSITIONS_START;
    ob.cos_sin = 9;
    EXPECT(ROPE_UNKNOWN_ENUM, apply_checked(rope, &q, &k, &ob));
    ob.cos_sin = ROPE_COS_SIN_TABLE;
    ob.cos = ct;
    ob.sin = st;
    ob.table_len = PAIRS + 1;
    EXPECT(ROPE_TABLE_SHAPE, apply_checked(rope, &q, &k, &ob));
    ob.table_len = 2 * PAIRS; /* rows 0 and 1: position 4 is past the end */
    EXPECT(ROPE_POSITION_OUT_OF_RANGE, apply_checked(rope, &q, &k, &ob));
    ob.sin = NULL;
    EXPECT(ROPE_NULL_POINTER, apply_checked(rope, &q, &k, &ob));
    ob = o;
    ob.struct_size = sizeof ob - 1;
    EXPECT(ROPE_UNSUPPORTED_STRUCT_SIZE, apply_checked(rope, &q, &k, &ob));

    /* Out of place: outputs overlapping anything, one of k/k_out NULL, shapes. */
    static float qo[NQ], ko[NK];
    memset(qo, 0x5A, sizeof qo);
    memset(ko, 0x5A, sizeof ko);
    rope_tensor q_out = tensor(qo, NQ, bshd(T_TOKENS, HQ)), k_out = tensor(ko, NK, bshd(T_TOKENS, HKV));
    EXPECT(ROPE_NULL_POINTER, rope_apply_into_f32(rope, &q, &q_out, &k, NULL, &o));
    EXPECT(ROPE_OVERLAPPING_BUFFERS, rope_apply_into_f32(rope, &q, &q, &k, &k_out, &o));
    EXPECT(ROPE_OVERLAPPING_BUFFERS, rope_apply_into_f32(rope, &q, &q_out, &k, &q_out, &o));
    rope_tensor small_out = tensor(ko, NK, bshd(T_TOKENS, HKV));
    EXPECT(ROPE_SHAPE_MISMATCH, rope_apply_into_f32(rope, &q, &small_out, NULL, NULL, &o));
    rope_tensor qhh = tensor(qh, NQ, bshd(T_TOKENS, HQ)), qhh_out = qhh;
    qhh_out.data = (char *)(void *)qh + 1;
    EXPECT(ROPE_MISALIGNED_POINTER, rope_apply_into_f16(rope, &qhh, &qhh_out, NULL, NULL, &o));
    int untouched = 1;
    for (size_t i = 0; i < NQ; i++) untouched &= ((const unsigned char *)qo)[4 * i] == 0x5A;
    for (size_t i = 0; i < NK; i++) untouched &= ((const unsigned char *)ko)[4 * i] == 0x5A;
    CHECK(untouched, "a failing out-of-place call wrote an output");
}

/* ---- 4: the sibling encodings (issue 8) ---- */

/* The same constants as capi/tests/c_program.rs. */
#define SD 77 /* sinusoidal width: odd, two 64-column blocks */
#define S_TOKENS 6
#define S_STRIDE 80
#define S_LEN (S_TOKENS * S_STRIDE)
#define S_START 123456u
#define S_ROWS 3
#define S_TABLE_START 7u
#define S_BASE2 500.0
#define LD 16 /* learned: 10 positions of width 16, rows of 20 */
#define LP 10
#define L_TOKENS 4
#define L_STRIDE 20
#define L_LEN (L_TOKENS * L_STRIDE)
#define L_START 6u
#define N_SCHEMES 6
#define N_GRIDS 3
#define GRID_CELLS (5 * 9 + 3 * 40 + 2 * 3)
#define N_DIST 16
#define A_SLOPES (8 + 12 + 5)
#define A_ADD_HEADS 3
#define A_Q 4
#define A_K 7
#define A_Q_OFFSET 3u
#define A_STRIDE 9
#define A_LEN ((A_ADD_HEADS * A_Q - 1) * A_STRIDE + A_K)

static const uint32_t s_ids[S_TOKENS] = {0, 1, 2, 1000, 65535, 4000000000u};
static const uint32_t l_ids[L_TOKENS] = {3, 0, 9, 3};
static const rope_relative_grid grids[N_GRIDS] = {{5, 9, 4, 0}, {3, 40, 50, 0}, {2, 3, 4000000000u, 0}};
static const int64_t distances[N_DIST] = {-5000, -1000, -600, -129, -128, -12, -8, -1,
                                          0,     1,     8,    12,   128,  129, 600, 1000};
static const size_t a_heads[3] = {8, 12, 5};

/* Inputs and Rust results. */
static float s_x[S_LEN], s_x_inter[S_LEN], s_x_concat[S_LEN], s_table_inter[S_ROWS * SD],
    s_table_concat[S_ROWS * SD];
static uint16_t s_xh[S_LEN], s_xh_inter[S_LEN], s_xb[S_LEN], s_xb_concat[S_LEN];
static float l_table[LP * LD], l_x[L_LEN], l_out_f32[L_LEN];
static uint16_t l_table_h[LP * LD], l_table_b[LP * LD], l_xh[L_LEN], l_xb[L_LEN], l_out_h[L_LEN],
    l_out_b[L_LEN], l_out_h_f32[L_LEN], l_out_b_f32[L_LEN];
static int32_t rel_rust[N_SCHEMES][GRID_CELLS], t5_rust[2][N_DIST];
static int64_t deberta_rust[N_DIST];
static float a_slopes_rust[A_SLOPES], a_bias16_rust[4], a_in[A_LEN], a_causal[A_LEN], a_symmetric[A_LEN];

static void load_encodings(FILE *f) {
    read_exact(f, s_x, 4, S_LEN, "sinusoidal x");
    read_exact(f, s_x_inter, 4, S_LEN, "sinusoidal interleaved add");
    read_exact(f, s_x_concat, 4, S_LEN, "sinusoidal concatenated add");
    read_exact(f, s_xh, 2, S_LEN, "sinusoidal x f16");
    read_exact(f, s_xh_inter, 2, S_LEN, "sinusoidal add f16");
    read_exact(f, s_xb, 2, S_LEN, "sinusoidal x bf16");
    read_exact(f, s_xb_concat, 2, S_LEN, "sinusoidal add bf16");
    read_exact(f, s_table_inter, 4, S_ROWS * SD, "sinusoidal table");
    read_exact(f, s_table_concat, 4, S_ROWS * SD, "sinusoidal table base 500");
    read_exact(f, l_table, 4, LP * LD, "learned table");
    read_exact(f, l_table_h, 2, LP * LD, "learned table f16");
    read_exact(f, l_table_b, 2, LP * LD, "learned table bf16");
    read_exact(f, l_x, 4, L_LEN, "learned x");
    read_exact(f, l_xh, 2, L_LEN, "learned x f16");
    read_exact(f, l_xb, 2, L_LEN, "learned x bf16");
    read_exact(f, l_out_f32, 4, L_LEN, "learned f32");
    read_exact(f, l_out_h, 2, L_LEN, "learned f16");
    read_exact(f, l_out_b, 2, L_LEN, "learned bf16");
    read_exact(f, l_out_h_f32, 2, L_LEN, "learned f16, f32 table");
    read_exact(f, l_out_b_f32, 2, L_LEN, "learned bf16, f32 table");
    for (int s = 0; s < N_SCHEMES; s++) read_exact(f, rel_rust[s], 4, GRID_CELLS, "relative matrices");
    read_exact(f, t5_rust[0], 4, N_DIST, "t5 bidirectional");
    read_exact(f, t5_rust[1], 4, N_DIST, "t5 causal");
    read_exact(f, deberta_rust, 8, N_DIST, "deberta log buckets");
    read_exact(f, a_slopes_rust, 4, A_SLOPES, "alibi slopes");
    read_exact(f, a_bias16_rust, 4, 4, "alibi slopes, bias max 16");
    read_exact(f, a_in, 4, A_LEN, "alibi scores");
    read_exact(f, a_causal, 4, A_LEN, "alibi causal");
    read_exact(f, a_symmetric, 4, A_LEN, "alibi symmetric");
}

/* The schemes of c_program.rs SCHEMES, in order. */
static rope_relative scheme(int i) {
    rope_relative r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    static const rope_relative_kind kinds[N_SCHEMES] = {
        ROPE_RELATIVE_CLIPPED, ROPE_RELATIVE_CLIPPED_INDEX, ROPE_RELATIVE_DEBERTA_INDEX,
        ROPE_RELATIVE_DEBERTA_V2_LOG_BUCKET, ROPE_RELATIVE_T5_BIDIRECTIONAL, ROPE_RELATIVE_T5_CAUSAL};
    r.kind = kinds[i];
    r.max_distance = i < 2 ? 3 : 128;
    r.att_span = 4;
    r.bucket_size = 8;
    r.max_position = 32;
    r.num_buckets = 32;
    return r;
}

static rope_positions start_at(uint32_t start) {
    rope_positions p = {ROPE_POSITIONS_START, start, NULL, 0};
    return p;
}

static rope_positions ids_of(const uint32_t *ids, size_t n) {
    rope_positions p = {ROPE_POSITIONS_IDS, 0, ids, n};
    return p;
}

/* Within one f32 rounding of a value of magnitude <= 1 (plus the reference's own). */
static int near_f32(double got, double want) {
    return fabs(got - want) <= ldexp(1.0, -24) * (1 + fabs(want));
}

/* The sinusoidal encoding, straight from the formulas (issue 8; src/encodings/sinusoidal.rs
 * documents the references): the angle formed in double as the library forms it. */
static double sinusoidal_ref(int concatenated, double base, uint32_t pos, int j) {
    if (!concatenated) {
        double inv_freq = 1.0 / pow(base, (double)(2 * (j / 2)) / SD);
        return j % 2 == 0 ? sin(pos * inv_freq) : cos(pos * inv_freq);
    }
    int half = SD / 2;
    if (j >= 2 * half) return 0.0;
    double inv_timescale = exp(-(double)(j % half) * log(base) / (half - 1));
    return j < half ? sin(pos * inv_timescale) : cos(pos * inv_timescale);
}

static void check_sinusoidal(void) {
    /* Issue 8: d = 5, position 1, interleaved (values to 6 decimals). */
    static const float paper[5] = {0.841471f, 0.540302f, 0.025116f, 0.999685f, 0.000631f};
    float row[5];
    EXPECT(ROPE_OK, rope_sinusoidal_fill_table_f32(5, ROPE_SINUSOIDAL_INTERLEAVED, ROPE_SINUSOIDAL_BASE, 1,
                                                   row, 5));
    for (int j = 0; j < 5; j++) CHECK(fabsf(row[j] - paper[j]) <= 6e-7f, "d=5 pos 1 [%d] = %.7f", j, row[j]);

    /* Tables: Rust's bits and the formulas. */
    static float t[S_ROWS * SD + 1];
    t[S_ROWS * SD] = 42.0f;
    EXPECT(ROPE_OK, rope_sinusoidal_fill_table_f32(SD, ROPE_SINUSOIDAL_INTERLEAVED, ROPE_SINUSOIDAL_BASE,
                                                   S_TABLE_START, t, S_ROWS * SD));
    CHECK(same(t, s_table_inter, sizeof s_table_inter), "sinusoidal table differs from Rust");
    CHECK(t[S_ROWS * SD] == 42.0f, "fill_table wrote past its rows");
    int ok = 1;
    for (int r = 0; r < S_ROWS; r++)
        for (int j = 0; j < SD; j++)
            ok &= near_f32(t[r * SD + j], sinusoidal_ref(0, 10000.0, S_TABLE_START + r, j));
    CHECK(ok, "interleaved table vs the formula");
    EXPECT(ROPE_OK, rope_sinusoidal_fill_table_f32(SD, ROPE_SINUSOIDAL_CONCATENATED, S_BASE2, S_TABLE_START,
                                                   t, S_ROWS * SD));
    CHECK(same(t, s_table_concat, sizeof s_table_concat), "concatenated table (base 500) differs from Rust");
    ok = t[SD - 1] == 0.0f; /* odd width: zero padding */
    for (int r = 0; r < S_ROWS; r++)
        for (int j = 0; j < SD; j++)
            ok &= near_f32(t[r * SD + j], sinusoidal_ref(1, S_BASE2, S_TABLE_START + r, j));
    CHECK(ok, "concatenated table vs the formula");

    /* Fused adds: ids and start, f32, f16, bf16, rows padded to S_STRIDE. */
    static float x[S_LEN];
    static uint16_t xh[S_LEN];
    rope_positions ids = ids_of(s_ids, S_TOKENS), start = start_at(S_START);
    memcpy(x, s_x, sizeof x);
    EXPECT(ROPE_OK, rope_sinusoidal_add_f32(SD, ROPE_SINUSOIDAL_INTERLEAVED, ROPE_SINUSOIDAL_BASE, x, S_LEN,
                                            S_TOKENS, S_STRIDE, &ids));
    CHECK(same(x, s_x_inter, sizeof x), "sinusoidal add (f32, ids) differs from Rust");
    ok = 1;
    for (int tk = 0; tk < S_TOKENS; tk++) {
        for (int j = 0; j < S_STRIDE; j++) {
            float in = s_x[tk * S_STRIDE + j], got = x[tk * S_STRIDE + j];
            if (j >= SD)
                ok &= got == in; /* row padding untouched */
            else if (s_ids[tk] <= 65535) /* the reference's pow may differ by an ulp: small angles */
                ok &= fabs(got - (in + sinusoidal_ref(0, 10000.0, s_ids[tk], j))) <=
                      ldexp(1.0, -23) * (2 + fabs(in));
        }
    }
    CHECK(ok, "sinusoidal add vs x + the formula");
    memcpy(x, s_x, sizeof x);
    EXPECT(ROPE_OK, rope_sinusoidal_add_f32(SD, ROPE_SINUSOIDAL_CONCATENATED, ROPE_SINUSOIDAL_BASE, x, S_LEN,
                                            S_TOKENS, S_STRIDE, &start));
    CHECK(same(x, s_x_concat, sizeof x), "sinusoidal add (f32, concatenated, start) differs from Rust");
    memcpy(xh, s_xh, sizeof xh);
    EXPECT(ROPE_OK, rope_sinusoidal_add_f16(SD, ROPE_SINUSOIDAL_INTERLEAVED, ROPE_SINUSOIDAL_BASE, xh, S_LEN,
                                            S_TOKENS, S_STRIDE, &ids));
    CHECK(same(xh, s_xh_inter, sizeof xh), "sinusoidal add (f16) differs from Rust");
    memcpy(xh, s_xb, sizeof xh);
    EXPECT(ROPE_OK,
           rope_sinusoidal_add_bf16(SD, ROPE_SINUSOIDAL_CONCATENATED, ROPE_SINUSOIDAL_BASE, xh, S_LEN,
                                             S_TOKENS, S_STRIDE, &start));
    CHECK(same(xh, s_xb_concat, sizeof xh), "sinusoidal add (bf16) differs from Rust");
    /* No tokens, no buffers. */
    EXPECT(ROPE_OK, rope_sinusoidal_add_f32(SD, 0, ROPE_SINUSOIDAL_BASE, NULL, 0, 0, 0, &start));
}

static void check_learned(void) {
    static float x[L_LEN];
    static uint16_t xh[L_LEN];
    rope_positions ids = ids_of(l_ids, L_TOKENS), start = start_at(L_START);
    memcpy(x, l_x, sizeof x);
    EXPECT(ROPE_OK, rope_learned_add_f32(l_table, LP * LD, LD, x, L_LEN, L_TOKENS, L_STRIDE, &ids));
    CHECK(same(x, l_out_f32, sizeof x), "learned add (f32) differs from Rust");
    int ok = 1;
    for (int t = 0; t < L_TOKENS; t++) {
        for (int c = 0; c < L_STRIDE; c++) {
            float in = l_x[t * L_STRIDE + c];
            float want = c < LD ? in + l_table[l_ids[t] * LD + c] : in; /* one f32 add */
            ok &= same(&x[t * L_STRIDE + c], &want, 4);
        }
    }
    CHECK(ok, "learned add (f32) vs x + table[id]");
    memcpy(xh, l_xh, sizeof xh);
    EXPECT(ROPE_OK, rope_learned_add_f16(l_table_h, LP * LD, LD, xh, L_LEN, L_TOKENS, L_STRIDE, &ids));
    CHECK(same(xh, l_out_h, sizeof xh), "learned add (f16) differs from Rust");
    memcpy(xh, l_xb, sizeof xh);
    EXPECT(ROPE_OK, rope_learned_add_bf16(l_table_b, LP * LD, LD, xh, L_LEN, L_TOKENS, L_STRIDE, &start));
    CHECK(same(xh, l_out_b, sizeof xh), "learned add (bf16, start) differs from Rust");
    memcpy(xh, l_xh, sizeof xh);
    EXPECT(ROPE_OK,
           rope_learned_add_f16_table_f32(l_table, LP * LD, LD, xh, L_LEN, L_TOKENS, L_STRIDE, &ids));
    CHECK(same(xh, l_out_h_f32, sizeof xh), "learned add (f16, f32 table) differs from Rust");
    memcpy(xh, l_xb, sizeof xh);
    EXPECT(ROPE_OK,
           rope_learned_add_bf16_table_f32(l_table, LP * LD, LD, xh, L_LEN, L_TOKENS, L_STRIDE, &start));
    CHECK(same(xh, l_out_b_f32, sizeof xh), "learned add (bf16, f32 table) differs from Rust");
}

/* The index of (q, k) by the definitions, for the schemes with exact integer formulas
 * (0: clipped, 1: clipped index, 2: DeBERTa delta); -1 for the others. */
static int64_t exact_index(int s, int64_t q, int64_t k) {
    int64_t d = q - k;
    switch (s) {
    case 0: return d < -3 ? -3 : d > 3 ? 3 : d;
    case 1: return (d < -3 ? -3 : d > 3 ? 3 : d) + 3;
    case 2: d += 4; return d < 0 ? 0 : d > 7 ? 7 : d;
    default: return -1;
    }
}

static void check_relative(void) {
    static int32_t m[GRID_CELLS + 1];
    for (int s = 0; s < N_SCHEMES; s++) {
        rope_relative r = scheme(s);
        EXPECT(ROPE_OK, rope_relative_validate(&r));
        size_t at = 0;
        for (int g = 0; g < N_GRIDS; g++) {
            const rope_relative_grid *gr = &grids[g];
            size_t cells = gr->query_len * gr->key_len;
            m[cells] = -12345;
            EXPECT(ROPE_OK, rope_relative_fill(&r, gr, m, cells + 1));
            CHECK(same(m, rel_rust[s] + at, cells * 4), "scheme %d grid %d differs from Rust", s, g);
            CHECK(m[cells] == -12345, "relative fill wrote past query_len * key_len");
            int ok = 1;
            for (size_t i = 0; i < gr->query_len; i++) {
                for (size_t j = 0; j < gr->key_len; j++) {
                    uint32_t qp = gr->q_offset + (uint32_t)i, kp = gr->k_offset + (uint32_t)j;
                    int64_t want = exact_index(s, qp, kp);
                    if (want >= 0) ok &= m[i * gr->key_len + j] == want;
                    int32_t index = -1;
                    EXPECT(ROPE_OK, rope_relative_index(&r, qp, kp, &index));
                    ok &= index == m[i * gr->key_len + j];
                }
            }
            CHECK(ok, "scheme %d grid %d: formula or rope_relative_index disagrees", s, g);
            at += cells;
        }
    }
    /* T5 (32 buckets, max distance 128) and DeBERTa-v3 (256, 512) of single distances. */
    for (int i = 0; i < N_DIST; i++) {
        int32_t b = -1;
        int64_t d = -1;
        EXPECT(ROPE_OK, rope_t5_relative_position_bucket(distances[i], 1, 32, 128, &b));
        CHECK(b == t5_rust[0][i], "t5 bidirectional %lld: %d, Rust %d", (long long)distances[i], b,
              t5_rust[0][i]);
        EXPECT(ROPE_OK, rope_t5_relative_position_bucket(distances[i], 0, 32, 128, &b));
        CHECK(b == t5_rust[1][i], "t5 causal %lld: %d, Rust %d", (long long)distances[i], b, t5_rust[1][i]);
        EXPECT(ROPE_OK, rope_deberta_log_bucket_position(distances[i], 256, 512, &d));
        CHECK(d == deberta_rust[i], "deberta %lld: %lld, Rust %lld", (long long)distances[i], (long long)d,
              (long long)deberta_rust[i]);
    }
    /* Reference values: issue 8 (+1000 -> 31), HF T5 by hand (src: tests/encodings.rs), and
     * DeBERTa-v3 bucket edges from the f64 formula. */
    static const int64_t t5_bi[][2] = {{1000, 31}, {0, 0}, {1, 17}, {-1, 1}, {8, 24}, {-8, 8},
                                       {12, 25},   {-12, 9}, {128, 31}, {-1000, 15}};
    static const int64_t t5_causal[][2] = {{1000, 0}, {1, 0}, {-1, 1}, {-12, 12}, {-128, 31}, {-1000, 31}};
    static const int64_t deb[][2] = {{0, 0},      {128, 128}, {-128, -128}, {129, 129}, {152, 144},
                                     {153, 145},  {-434, -241}, {511, 255}, {600, 270}, {-5000, -465}};
    for (size_t i = 0; i < sizeof t5_bi / sizeof t5_bi[0]; i++) {
        int32_t b = -1;
        EXPECT(ROPE_OK, rope_t5_relative_position_bucket(t5_bi[i][0], 1, 32, 128, &b));
        CHECK(b == t5_bi[i][1], "t5 bidirectional %lld: %d, want %lld", (long long)t5_bi[i][0], b,
              (long long)t5_bi[i][1]);
    }
    for (size_t i = 0; i < sizeof t5_causal / sizeof t5_causal[0]; i++) {
        int32_t b = -1;
        EXPECT(ROPE_OK, rope_t5_relative_position_bucket(t5_causal[i][0], 0, 32, 128, &b));
        CHECK(b == t5_causal[i][1], "t5 causal %lld: %d", (long long)t5_causal[i][0], b);
    }
    for (size_t i = 0; i < sizeof deb / sizeof deb[0]; i++) {
        int64_t d = 0;
        EXPECT(ROPE_OK, rope_deberta_log_bucket_position(deb[i][0], 256, 512, &d));
        CHECK(d == deb[i][1], "deberta %lld: %lld, want %lld", (long long)deb[i][0], (long long)d,
              (long long)deb[i][1]);
    }
    /* The T5 matrix agrees with the scalar bucket of key - query. */
    rope_relative t5 = scheme(4);
    int32_t index = -1, b = -2;
    EXPECT(ROPE_OK, rope_relative_index(&t5, 0, 1000, &index));
    EXPECT(ROPE_OK, rope_t5_relative_position_bucket(1000, 1, 32, 128, &b));
    CHECK(index == 31 && b == 31, "T5 index(0, 1000) = %d", index);
}

static void check_alibi(void) {
    float s[12];
    size_t at = 0;
    for (int n = 0; n < 3; n++) {
        EXPECT(ROPE_OK, rope_alibi_slopes(s, a_heads[n]));
        CHECK(same(s, a_slopes_rust + at, a_heads[n] * 4), "%zu slopes differ from Rust", a_heads[n]);
        at += a_heads[n];
    }
    /* Issue 8: 8 heads get 2^-1 .. 2^-8; 12 heads those, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5. */
    EXPECT(ROPE_OK, rope_alibi_slopes(s, 8));
    for (int h = 0; h < 8; h++) CHECK(s[h] == ldexpf(1.0f, -(h + 1)), "8 heads: slope %d = %g", h, s[h]);
    EXPECT(ROPE_OK, rope_alibi_slopes(s, 12));
    for (int h = 0; h < 12; h++) {
        double want = h < 8 ? ldexp(1.0, -(h + 1)) : pow(2.0, -0.5 - (h - 8));
        CHECK(fabs(s[h] - want) <= ldexp(want, -24), "12 heads: slope %d = %.9g, want %.9g", h, s[h], want);
    }
    EXPECT(ROPE_OK, rope_alibi_slopes_with_bias_max(s, 4, 16.0));
    CHECK(same(s, a_bias16_rust, 16) && s[0] == 0x1p-4f && s[3] == 0x1p-16f, "bias max 16");
    EXPECT(ROPE_OK, rope_alibi_slopes(NULL, 0));

    /* The bias added to [3][4][7] scores in rows of 9, queries at 3.., keys at 0... */
    static float sc[A_LEN];
    float slopes[A_ADD_HEADS];
    EXPECT(ROPE_OK, rope_alibi_slopes(slopes, A_ADD_HEADS));
    rope_relative_grid g = {A_Q, A_K, A_Q_OFFSET, 0};
    for (int form = 0; form < 2; form++) {
        memcpy(sc, a_in, sizeof sc);
        EXPECT(ROPE_OK, rope_alibi_add_f32(sc, A_LEN, A_STRIDE, &g, slopes, A_ADD_HEADS,
                                           form ? ROPE_ALIBI_SYMMETRIC : ROPE_ALIBI_CAUSAL));
        CHECK(same(sc, form ? a_symmetric : a_causal, sizeof sc), "ALiBi form %d differs from Rust", form);
        int ok = 1;
        for (int h = 0; h < A_ADD_HEADS; h++) {
            for (int i = 0; i < A_Q; i++) {
                for (int j = 0; j < A_STRIDE; j++) {
                    size_t at2 = (size_t)(h * A_Q + i) * A_STRIDE + (size_t)j;
                    if (at2 >= A_LEN) break;
                    float want = a_in[at2];
                    if (j < A_K) {
                        /* Separate statements: no contraction into a fused multiply-add. */
                        float d = (float)(j - (int)(A_Q_OFFSET + i));
                        float bias = form ? -(slopes[h] * fabsf(d)) : slopes[h] * d;
                        want = a_in[at2] + bias;
                    }
                    ok &= same(&sc[at2], &want, 4);
                }
            }
        }
        CHECK(ok, "ALiBi form %d vs score + slope * (k - q)", form);
    }
}

static void check_encodings(void) {
    check_sinusoidal();
    check_learned();
    check_relative();
    check_alibi();
    printf("encodings: sinusoidal, learned, relative, ALiBi bit-identical to the Rust API\n");
}

/* Buffers that failing calls must leave alone: every call below gets pointers into them. */
static alignas(16) unsigned char scratch[4096], scratch_pattern[4096];

static void scratch_arm(void) {
    for (size_t i = 0; i < sizeof scratch_pattern; i++) scratch_pattern[i] = (unsigned char)(i * 7 + 3);
    memcpy(scratch, scratch_pattern, sizeof scratch);
}

/* Passes `st` on after checking that a failing call left the scratch buffers as they were;
 * re-arms them. */
static rope_status untouched(rope_status st) {
    if (st != ROPE_OK)
        CHECK(same(scratch, scratch_pattern, sizeof scratch), "failing call (%s) wrote",
              rope_status_name(st));
    memcpy(scratch, scratch_pattern, sizeof scratch);
    return st;
}

#define F32(off) ((float *)(void *)(scratch + (off)))
#define U16(off) ((uint16_t *)(void *)(scratch + (off)))
#define I32(off) ((int32_t *)(void *)(scratch + (off)))
#define I64(off) ((int64_t *)(void *)(scratch + (off)))
#define U32(off) ((const uint32_t *)(const void *)(scratch + (off)))

static void check_encoding_statuses(void) {
    const rope_sinusoidal_layout IL = ROPE_SINUSOIDAL_INTERLEAVED;
    const double B = ROPE_SINUSOIDAL_BASE;
    rope_positions start = start_at(0), ids = ids_of(l_ids, L_TOKENS), pos;
    scratch_arm();

    /* Sinusoidal. x: 64 floats at 0. */
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER,
           untouched(rope_sinusoidal_fill_table_f32(0, IL, B, 0, F32(0), 8)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER,
           untouched(rope_sinusoidal_fill_table_f32(4, IL, NAN, 0, F32(0), 8)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER,
           untouched(rope_sinusoidal_fill_table_f32(4, IL, -1.0, 0, F32(0), 8)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER,
           untouched(rope_sinusoidal_fill_table_f32(4, IL, INFINITY, 0, F32(0), 8)));
    EXPECT(ROPE_RAGGED_TABLE, untouched(rope_sinusoidal_fill_table_f32(4, IL, B, 0, F32(0), 9)));
    EXPECT(ROPE_POSITION_OVERFLOW,
           untouched(rope_sinusoidal_fill_table_f32(4, IL, B, UINT32_MAX, F32(0), 8)));
    EXPECT(ROPE_UNKNOWN_ENUM, untouched(rope_sinusoidal_fill_table_f32(4, 2, B, 0, F32(0), 8)));
    EXPECT(ROPE_NULL_POINTER, untouched(rope_sinusoidal_fill_table_f32(4, IL, B, 0, NULL, 8)));
    EXPECT(ROPE_MISALIGNED_POINTER, untouched(rope_sinusoidal_fill_table_f32(4, IL, B, 0, F32(2), 8)));
    EXPECT(ROPE_INVALID_ARGUMENT,
           untouched(rope_sinusoidal_fill_table_f32(4, IL, B, 0, F32(0), SIZE_MAX / 2)));
    EXPECT(ROPE_OK, untouched(rope_sinusoidal_fill_table_f32(4, IL, B, UINT32_MAX, F32(0), 4)));
    EXPECT(ROPE_ENCODING_BUFFER_TOO_SHORT,
           untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 11, 2, 8, &start)));
    EXPECT(ROPE_ROW_STRIDE_TOO_SMALL, untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 2, 3, &start)));
    EXPECT(ROPE_ENCODING_SIZE_OVERFLOW,
           untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 3, SIZE_MAX / 2, &start)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER,
           untouched(rope_sinusoidal_add_f32(0, IL, B, F32(0), 64, 2, 8, &start)));
    EXPECT(ROPE_NULL_POINTER, untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 2, 8, NULL)));
    EXPECT(ROPE_UNKNOWN_ENUM, untouched(rope_sinusoidal_add_f32(4, IL + 7, B, F32(0), 64, 2, 8, &start)));
    pos = start_at(UINT32_MAX);
    EXPECT(ROPE_POSITION_OVERFLOW, untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 2, 8, &pos)));
    pos.mode = 2;
    EXPECT(ROPE_UNKNOWN_ENUM, untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 2, 8, &pos)));
    pos = ids_of(l_ids, 3);
    EXPECT(ROPE_POSITION_COUNT_MISMATCH,
           untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 2, 8, &pos)));
    pos = ids_of(NULL, 2);
    EXPECT(ROPE_NULL_POINTER, untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 2, 8, &pos)));
    pos = ids_of(U32(32), 2); /* inside x, which is written */
    EXPECT(ROPE_OVERLAPPING_BUFFERS, untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 2, 8, &pos)));
    pos = ids_of(U32(256), 2); /* right after x: fine */
    EXPECT(ROPE_OK, untouched(rope_sinusoidal_add_f32(4, IL, B, F32(0), 64, 2, 8, &pos)));
    EXPECT(ROPE_MISALIGNED_POINTER, untouched(rope_sinusoidal_add_f16(4, IL, B, U16(1), 16, 2, 8, &start)));
    EXPECT(ROPE_INVALID_ARGUMENT,
           untouched(rope_sinusoidal_add_bf16(4, IL, B, U16(0), SIZE_MAX / 2, 2, 8, &start)));

    /* Learned. table: 4 positions of width 4 (16 floats at 512); x: rows at 0. */
    const float *table = F32(512);
    EXPECT(ROPE_BEYOND_TRAINED_LENGTH, untouched(rope_learned_add_f32(table, 16, 4, F32(0), 64, 4, 8, &ids)));
    const char *beyond = rope_status_str(ROPE_BEYOND_TRAINED_LENGTH);
    CHECK(strstr(beyond, "cannot extrapolate beyond its trained length") != NULL, "message: %s", beyond);
    pos = start_at(3);
    EXPECT(ROPE_BEYOND_TRAINED_LENGTH, untouched(rope_learned_add_f32(table, 16, 4, F32(0), 64, 2, 8, &pos)));
    EXPECT(ROPE_OK, untouched(rope_learned_add_f32(table, 16, 4, F32(0), 64, 1, 8, &pos))); /* position 3 */
    EXPECT(ROPE_RAGGED_TABLE, untouched(rope_learned_add_f32(table, 15, 4, F32(0), 64, 1, 8, &start)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER,
           untouched(rope_learned_add_f32(table, 16, 0, F32(0), 64, 1, 8, &start)));
    EXPECT(ROPE_ENCODING_BUFFER_TOO_SHORT,
           untouched(rope_learned_add_f32(table, 16, 4, F32(0), 7, 2, 4, &start)));
    EXPECT(ROPE_ROW_STRIDE_TOO_SMALL,
           untouched(rope_learned_add_f32(table, 16, 4, F32(0), 64, 2, 2, &start)));
    EXPECT(ROPE_ENCODING_SIZE_OVERFLOW,
           untouched(rope_learned_add_f32(table, 16, 4, F32(0), 64, 3, SIZE_MAX / 2, &start)));
    EXPECT(ROPE_OVERLAPPING_BUFFERS,
           untouched(rope_learned_add_f32(F32(16), 16, 4, F32(0), 64, 2, 8, &start)));
    EXPECT(ROPE_NULL_POINTER, untouched(rope_learned_add_f32(NULL, 16, 4, F32(0), 64, 1, 8, &start)));
    EXPECT(ROPE_MISALIGNED_POINTER,
           untouched(rope_learned_add_f16(U16(513), 16, 4, U16(0), 64, 1, 8, &start)));
    EXPECT(ROPE_POSITION_COUNT_MISMATCH,
           untouched(rope_learned_add_bf16(U16(512), 16, 4, U16(0), 64, 3, 8, &ids)));
    pos = start_at(UINT32_MAX);
    EXPECT(ROPE_POSITION_OVERFLOW,
           untouched(rope_learned_add_f16_table_f32(table, 16, 4, U16(0), 64, 2, 8, &pos)));
    EXPECT(ROPE_BEYOND_TRAINED_LENGTH,
           untouched(rope_learned_add_bf16_table_f32(table, 16, 4, U16(0), 64, 4, 8, &ids)));
    EXPECT(ROPE_OK, untouched(rope_learned_add_bf16_table_f32(table, 16, 4, NULL, 0, 0, 8, &start)));

    /* Relative. out: int32 at 1024. */
    rope_relative r = scheme(0);
    rope_relative_grid g = {2, 3, 0, 0};
    int32_t *out = I32(1024);
    EXPECT(ROPE_ENCODING_BUFFER_TOO_SHORT, untouched(rope_relative_fill(&r, &g, out, 5)));
    g.q_offset = UINT32_MAX;
    EXPECT(ROPE_POSITION_OVERFLOW, untouched(rope_relative_fill(&r, &g, out, 6)));
    g.q_offset = 0;
    g.k_offset = UINT32_MAX - 1;
    EXPECT(ROPE_POSITION_OVERFLOW, untouched(rope_relative_fill(&r, &g, out, 6)));
    g.k_offset = 0;
#if SIZE_MAX > UINT32_MAX
    rope_relative_grid huge = {(size_t)UINT32_MAX + 1, (size_t)UINT32_MAX + 1, 0, 0};
    EXPECT(ROPE_ENCODING_SIZE_OVERFLOW, untouched(rope_relative_fill(&r, &huge, out, 6)));
#endif
    r.max_distance = 0;
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER, untouched(rope_relative_fill(&r, &g, out, 6)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER, rope_relative_validate(&r));
    r = scheme(4);
    r.num_buckets = 3; /* bidirectional needs 4 */
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER, untouched(rope_relative_index(&r, 0, 1, out)));
    r = scheme(3);
    r.max_position = 5; /* must exceed bucket_size / 2 + 1 = 5 */
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER, rope_relative_validate(&r));
    r = scheme(2);
    r.kind = 6;
    EXPECT(ROPE_UNKNOWN_ENUM, untouched(rope_relative_fill(&r, &g, out, 6)));
    r = scheme(2);
    r.struct_size = sizeof r - 4;
    EXPECT(ROPE_UNSUPPORTED_STRUCT_SIZE, untouched(rope_relative_fill(&r, &g, out, 6)));
    EXPECT(ROPE_NULL_POINTER, untouched(rope_relative_fill(NULL, &g, out, 6)));
    r = scheme(2);
    EXPECT(ROPE_NULL_POINTER, untouched(rope_relative_fill(&r, NULL, out, 6)));
    EXPECT(ROPE_MISALIGNED_POINTER, untouched(rope_relative_fill(&r, &g, I32(1026), 6)));
    EXPECT(ROPE_NULL_POINTER, untouched(rope_relative_index(&r, 0, 0, NULL)));
    EXPECT(ROPE_OK, untouched(rope_relative_fill(&r, &g, out, 6)));
    /* DeBERTa-v2 log buckets whose base is barely above 1 overflow int32 far away. */
    rope_relative steep = scheme(3);
    steep.bucket_size = 1u << 21;
    steep.max_position = (1u << 20) + 1025;
    EXPECT(ROPE_OK, rope_relative_validate(&steep));
    EXPECT(ROPE_RELATIVE_INDEX_OVERFLOW, untouched(rope_relative_index(&steep, 0, UINT32_MAX, out)));
    rope_relative_grid far = {1, 2, UINT32_MAX, 0};
    EXPECT(ROPE_RELATIVE_INDEX_OVERFLOW, untouched(rope_relative_fill(&steep, &far, out, 2)));
    EXPECT(ROPE_INVALID_ARGUMENT, untouched(rope_t5_relative_position_bucket(5, 2, 32, 128, out)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER, untouched(rope_t5_relative_position_bucket(5, 0, 32, 16, out)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER,
           untouched(rope_t5_relative_position_bucket(5, 1, UINT32_MAX, 1u << 31, out)));
    EXPECT(ROPE_MISALIGNED_POINTER, untouched(rope_t5_relative_position_bucket(5, 1, 32, 128, I32(1025))));
    int32_t far_bucket = 0; /* the last of 2^31 - 1 causal buckets, without overflow */
    EXPECT(ROPE_OK, rope_t5_relative_position_bucket(INT64_MIN, 0, 0x7FFFFFFF, 1u << 30, &far_bucket));
    CHECK(far_bucket == 0x7FFFFFFE, "t5 bucket of INT64_MIN: %d", far_bucket);
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER,
           untouched(rope_deberta_log_bucket_position(5, 1, 512, I64(1024))));
    EXPECT(ROPE_NULL_POINTER, untouched(rope_deberta_log_bucket_position(5, 256, 512, NULL)));
    EXPECT(ROPE_MISALIGNED_POINTER, untouched(rope_deberta_log_bucket_position(5, 256, 512, I64(1028))));
    EXPECT(ROPE_OK, untouched(rope_deberta_log_bucket_position(INT64_MIN, 256, 512, I64(1024))));

    /* ALiBi. scores at 0, slopes at 2048. */
    float *sl = F32(2048);
    rope_relative_grid ag = {2, 3, 0, 0};
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER, untouched(rope_alibi_slopes_with_bias_max(sl, 4, NAN)));
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER, untouched(rope_alibi_slopes_with_bias_max(sl, 4, 0.0)));
    EXPECT(ROPE_NULL_POINTER, untouched(rope_alibi_slopes(NULL, 4)));
    EXPECT(ROPE_MISALIGNED_POINTER, untouched(rope_alibi_slopes(F32(2049), 4)));
    EXPECT(ROPE_INVALID_ARGUMENT, untouched(rope_alibi_slopes(sl, SIZE_MAX / 2)));
    EXPECT(ROPE_OK, rope_alibi_slopes(sl, 2)); /* finite slopes for the calls below */
    memcpy(scratch_pattern + 2048, scratch + 2048, 8);
    EXPECT(ROPE_ENCODING_BUFFER_TOO_SHORT, untouched(rope_alibi_add_f32(F32(0), 11, 3, &ag, sl, 2, 0)));
    EXPECT(ROPE_ROW_STRIDE_TOO_SMALL, untouched(rope_alibi_add_f32(F32(0), 64, 2, &ag, sl, 2, 0)));
    EXPECT(ROPE_ENCODING_SIZE_OVERFLOW,
           untouched(rope_alibi_add_f32(F32(0), 64, SIZE_MAX / 2, &ag, sl, 2, 0)));
    EXPECT(ROPE_UNKNOWN_ENUM, untouched(rope_alibi_add_f32(F32(0), 64, 3, &ag, sl, 2, 2)));
    EXPECT(ROPE_OVERLAPPING_BUFFERS, untouched(rope_alibi_add_f32(F32(0), 64, 3, &ag, F32(8), 2, 0)));
    EXPECT(ROPE_NULL_POINTER, untouched(rope_alibi_add_f32(F32(0), 64, 3, NULL, sl, 2, 0)));
    ag.k_offset = UINT32_MAX;
    EXPECT(ROPE_POSITION_OVERFLOW, untouched(rope_alibi_add_f32(F32(0), 64, 3, &ag, sl, 2, 1)));
    ag.k_offset = 0;
    float bad[2] = {0.5f, NAN};
    EXPECT(ROPE_INVALID_ENCODING_PARAMETER, untouched(rope_alibi_add_f32(F32(0), 64, 3, &ag, bad, 2, 0)));
    EXPECT(ROPE_OK, untouched(rope_alibi_add_f32(F32(0), 64, 3, &ag, sl, 2, 1)));
    EXPECT(ROPE_OK, untouched(rope_alibi_add_f32(NULL, 0, 0, &ag, NULL, 0, 0))); /* no heads */
}

#undef F32
#undef U16
#undef I32
#undef I64
#undef U32

/* Every status has a name and a message and was produced by some call (after sections 3
 * and 4); unknown values too. */
/* ---- 5. buffers over the handle's own storage (issue 16) ---- */

#define GUARD 512
static alignas(ROPE_STORAGE_ALIGN) unsigned char arena[GUARD + ROPE_STORAGE_SIZE + GUARD];
static alignas(ROPE_STORAGE_ALIGN) unsigned char arena_before[sizeof arena];

/* A one-head tensor of `n` elements at `p`. */
static rope_tensor at(void *p, size_t n) {
    rope_tensor t = {p, n, {1, 1, n, n}};
    return t;
}

/* A rope_init handle lives in caller memory: a call whose output (or, for rope_frequencies,
 * attention_factor) overlaps it must return ROPE_OVERLAPPING_BUFFERS and write nothing;
 * one just outside it works and leaves the handle intact. */
static void check_handle_overlap(void) {
    rope_config cfg;
    llama3_config(&cfg);
    rope_t *h = NULL;
    EXPECT(ROPE_OK, rope_init(arena + GUARD, ROPE_STORAGE_SIZE, &cfg, &h));
    if (!h) return;
    /* The handle's bytes: storage sized to the configuration (issue 13). */
    size_t size = 0;
    EXPECT(ROPE_OK, rope_storage_size(&cfg, &size));
    static float in_q[HD], in_k[HD], cos_t[PAIRS], sin_t[PAIRS];
    static double freqs[PAIRS];
    for (int i = 0; i < HD; i++) in_q[i] = in_k[i] = (float)i / HD;
    /* Every buffer below is at most 4 * HD bytes, aligned to 8. */
    enum { N_CALLS = 11 };
    const size_t bytes[N_CALLS] = {sizeof(size_t), 8 * PAIRS, 8, 4 * PAIRS, 4 * PAIRS, 4 * HD,
                                   4 * HD,         2 * HD,    4 * HD, 2 * HD,    2 * HD};
    for (int c = 0; c < N_CALLS; c++) {
        /* Offsets from the handle: just before, over its first 8 bytes, inside, over its
         * last 8 bytes, just after; the middle three overlap it. */
        const ptrdiff_t starts[5] = {-(ptrdiff_t)bytes[c], 8 - (ptrdiff_t)bytes[c], (ptrdiff_t)(size / 16 * 8),
                                     (ptrdiff_t)size - 8, (ptrdiff_t)size};
        for (int i = 0; i < 5; i++) {
            void *p = arena + GUARD + starts[i];
            rope_tensor tq = at(in_q, HD), tk = at(in_k, HD), tp = at(p, HD);
            memcpy(arena_before, arena, sizeof arena);
            rope_status s;
            switch (c) {
            case 0: s = rope_pairs(h, (size_t *)p); break;
            case 1: s = rope_frequencies(h, 0, (double *)p, PAIRS, NULL); break;
            case 2: s = rope_frequencies(h, 0, freqs, PAIRS, (double *)p); break;
            case 3: s = rope_fill_table(h, 0, (float *)p, sin_t, PAIRS); break;
            case 4: s = rope_fill_table(h, 0, cos_t, (float *)p, PAIRS); break;
            case 5: s = rope_apply_f32(h, &tp, NULL, NULL); break;
            case 6: s = rope_apply_f32(h, &tq, &tp, NULL); break;
            case 7: s = rope_apply_f16(h, &tp, NULL, NULL); break;
            case 8: s = rope_apply_into_f32(h, &tq, &tp, NULL, NULL, NULL); break;
            case 9: s = rope_apply_into_bf16(h, &tq, &tp, NULL, NULL, NULL); break;
            default: s = rope_apply_into_f16(h, &tq, &tk, &tq, &tp, NULL); break;
            }
            const int overlaps = i >= 1 && i <= 3;
            CHECK(s == (overlaps ? ROPE_OVERLAPPING_BUFFERS : ROPE_OK),
                  "call %d with its buffer at handle%+td: got %s", c, starts[i], rope_status_name(s));
            CHECK(same(arena + GUARD, arena_before + GUARD, size), "call %d at handle%+td wrote the handle", c,
                  starts[i]);
            if (overlaps) CHECK(same(arena, arena_before, sizeof arena), "a refused call %d wrote", c);
        }
    }
    size_t pairs = 0;
    EXPECT(ROPE_OK, rope_pairs(h, &pairs));
    CHECK(pairs == PAIRS, "the handle changed: pairs %zu", pairs);
}

static void check_every_status_seen(void) {
    static const rope_status all[] = {
        ROPE_OK, ROPE_ZERO_HEAD_DIM, ROPE_INVALID_ROTARY_DIM, ROPE_ROTARY_DIM_EXCEEDS_HEAD_DIM,
        ROPE_ROTARY_DIM_TOO_LARGE, ROPE_INVALID_THETA, ROPE_INVALID_SCALING_PARAMETER,
        ROPE_INV_FREQ_LENGTH, ROPE_OVERLAPPING_STRIDES, ROPE_STRIDE_OVERFLOW, ROPE_BUFFER_TOO_SMALL,
        ROPE_SHAPE_MISMATCH, ROPE_POSITION_COUNT_MISMATCH, ROPE_POSITION_OVERFLOW,
        ROPE_POSITION_OUT_OF_RANGE, ROPE_TABLE_SHAPE, ROPE_TIER_UNAVAILABLE, ROPE_NULL_POINTER,
        ROPE_MISALIGNED_POINTER, ROPE_UNKNOWN_ENUM, ROPE_INVALID_ARGUMENT,
        ROPE_UNSUPPORTED_STRUCT_SIZE, ROPE_INVALID_HANDLE, ROPE_OVERLAPPING_BUFFERS,
        ROPE_OUT_OF_MEMORY, ROPE_PANIC, ROPE_INVALID_ENCODING_PARAMETER,
        ROPE_ENCODING_BUFFER_TOO_SHORT, ROPE_ROW_STRIDE_TOO_SMALL, ROPE_ENCODING_SIZE_OVERFLOW,
        ROPE_RAGGED_TABLE, ROPE_BEYOND_TRAINED_LENGTH, ROPE_RELATIVE_INDEX_OVERFLOW};
    int n_all = (int)(sizeof all / sizeof all[0]), n_seen = 0;
    for (int i = 0; i < n_all; i++) {
        const char *name = rope_status_name(all[i]), *msg = rope_status_str(all[i]);
        CHECK(name && strncmp(name, "ROPE_", 5) == 0 && strcmp(name, "ROPE_UNKNOWN_STATUS") != 0,
              "status %d has no name", (int)all[i]);
        CHECK(msg && strlen(msg) > 0 && strcmp(msg, "unknown rope_status") != 0, "status %d has no message",
              (int)all[i]);
        if (seen[all[i]])
            n_seen++;
        else if (all[i] == ROPE_TIER_UNAVAILABLE && !missing_tier)
            n_seen++; /* reported above */
        else
            CHECK(0, "status %s was never produced", name);
    }
    printf("statuses produced: %d of %d\n", n_seen, n_all);
    CHECK(strcmp(rope_status_str(-1), "unknown rope_status") == 0, "unknown status message");
    CHECK(strcmp(rope_status_name(1000), "ROPE_UNKNOWN_STATUS") == 0, "unknown status name");
    CHECK(strcmp(rope_status_name(ROPE_NULL_POINTER), "ROPE_NULL_POINTER") == 0, "status name");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s EXPECTED.bin\n", argv[0]);
        return 2;
    }
    load(argv[1]);
    CHECK(rope_abi_version() == ROPE_ABI_VERSION, "ABI version %u, header %u", rope_abi_version(),
          ROPE_ABI_VERSION);
    printf("rope_kernels %s, ABI %u, handle %zu bytes (align %zu)\n", rope_version(), rope_abi_version(),
           rope_size(), rope_align());
#if defined(__SANITIZE_ADDRESS__)
    printf("AddressSanitizer and UBSan: on\n");
#endif

    rope_config cfg;
    llama3_config(&cfg);
    rope_t *rope = NULL;
    EXPECT(ROPE_OK, rope_init(storage, sizeof storage, &cfg, &rope));
    CHECK(rope == (rope_t *)(void *)storage, "rope_init handle is not the storage");
    if (!rope) return 1;

    check_results(rope);
    check_statuses(rope);
    check_encodings();
    check_encoding_statuses();
    check_handle_overlap();
    check_every_status_seen();

    if (failures) {
        printf("0 passed, %d failed\n", failures);
        return 1;
    }
    printf("test_capi: all checks passed\n");
    return 0;
}
