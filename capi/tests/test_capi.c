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

/* ---- 4: the sibling encodings ---- */

#include "test_capi_encodings.inc.c"

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
