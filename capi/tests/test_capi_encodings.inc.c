/* Section 4 of test_capi.c: the sibling encodings (sinusoidal, learned, relative, ALiBi)
 * against the values the Rust API wrote, and their statuses. Included by test_capi.c (it
 * shares that file's helpers and counters); not a program of its own. */


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

