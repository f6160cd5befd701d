/* lumber oblivious-table evaluator (shipped with lumber; emitted code includes it verbatim).
 *
 * A model is an lt_model (below): binarized columns with sorted borders, and per
 * tree its levels (column, bin) and a table of 2^depth rows. Rows are evaluated
 * in blocks of LT_BLOCK:
 *   1. binarize: every column once per row, bin = #{borders b : x > b} (NaN: the
 *      column's NaN bin), stored column-major as LT_BIN_T so step 2 reads
 *      contiguous small integers;
 *   2. per tree: leaf index = OR over levels of (bin > level_bin) << level, for the
 *      whole block at once (one vector compare per level and 32 rows with AVX2);
 *   3. per tree: add table[index] to the row's sums, trees in order from the base
 *      score, so results equal the numpy evaluator bit for bit.
 * Blocks are independent: OpenMP threads take blocks (when built with -fopenmp).
 *
 * Configuration macros (set by the includer):
 *   LT_IN_T   float or double: the model's input type (borders are values of it)
 *   LT_BIN_T  uint8_t or uint16_t: bins (borders per column must fit)
 *   LT_BLOCK  rows per block (a multiple of 32)
 *   LT_FIXED_K, LT_FIXED_F  optional compile-time output / feature counts
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef LT_IN_T
#define LT_IN_T double
#endif
#ifndef LT_BIN_T
#define LT_BIN_T uint8_t
#endif
#ifndef LT_BLOCK
#define LT_BLOCK 256
#endif
#define LT_LINEAR_MAX 8

/* Hot functions get an AVX2 clone picked at load time when the build does not already target
 * AVX2 (-march=native): a portable library that still vectorizes 32 rows per step where it can. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && !defined(__AVX2__) \
    && !defined(LT_NO_CLONES)
#define LT_HOT __attribute__((target_clones("avx2", "default")))
#else
#define LT_HOT
#endif

typedef struct {
    int32_t n_features, n_outputs, n_trees, n_cols;
    int32_t average, transform;
    double sigmoid_alpha, isolation_c;
    const int32_t *col_feature;
    const int32_t *col_nan_bin;
    const int64_t *border_offset;
    const LT_IN_T *border;
    const int32_t *depth;
    const int32_t *tree_output;
    const int64_t *level_offset;
    const int32_t *level_col;
    const LT_BIN_T *level_bin;
    const int64_t *value_offset;
    const double *value;
    const double *base;
    const double *divisor;
} lt_model;

#ifdef LT_FIXED_K
#define LT_K(M) LT_FIXED_K
#else
#define LT_K(M) ((M)->n_outputs)
#endif
#ifdef LT_FIXED_F
#define LT_F(M) ((int64_t)LT_FIXED_F)
#else
#define LT_F(M) ((int64_t)(M)->n_features)
#endif

/* Step 1: bins of rows X[0..m) for every column, column-major (bins[c * LT_BLOCK + i]). */
LT_HOT static void lt_binarize(const lt_model *M, const LT_IN_T *X, int m, LT_BIN_T *bins)
{
    LT_IN_T xs[LT_BLOCK];
    int32_t pos[LT_BLOCK];
    const int64_t F = LT_F(M);
    for (int32_t c = 0; c < M->n_cols; ++c) {
        const LT_IN_T *b = M->border + M->border_offset[c];
        const int nb = (int)(M->border_offset[c + 1] - M->border_offset[c]);
        const int32_t f = M->col_feature[c];
        const LT_BIN_T nan_bin = (LT_BIN_T)M->col_nan_bin[c];
        LT_BIN_T *out = bins + (int64_t)c * LT_BLOCK;
        for (int i = 0; i < m; ++i) xs[i] = X[(int64_t)i * F + f];
        for (int i = m; i < LT_BLOCK; ++i) xs[i] = 0;
        if (nb <= LT_LINEAR_MAX) {
            /* few borders: count them, vectorized over rows */
            for (int i = 0; i < LT_BLOCK; ++i) pos[i] = 0;
            for (int k = 0; k < nb; ++k) {
                const LT_IN_T bk = b[k];
                for (int i = 0; i < LT_BLOCK; ++i) pos[i] += xs[i] > bk;
            }
        } else {
            /* branch-free binary search, all rows of the block in lock step:
               pos = last index with b[pos] < x (or 0), then one final compare */
            for (int i = 0; i < LT_BLOCK; ++i) pos[i] = 0;
            for (int n = nb; n > 1;) {
                const int half = n >> 1;
                for (int i = 0; i < LT_BLOCK; ++i) pos[i] = (b[pos[i] + half] < xs[i]) ? pos[i] + half : pos[i];
                n -= half;
            }
            for (int i = 0; i < LT_BLOCK; ++i) pos[i] += (b[pos[i]] < xs[i]);
        }
        for (int i = 0; i < LT_BLOCK; ++i) out[i] = (xs[i] != xs[i]) ? nan_bin : (LT_BIN_T)pos[i];
    }
}

/* Step 2 for one tree: leaf index of every row of the block. */
#define LT_INDEX_FN(NAME, IDX_T)                                                              \
    LT_HOT static void NAME(const lt_model *M, int32_t t, const LT_BIN_T *bins, IDX_T *idx)   \
    {                                                                                         \
        const int64_t lo = M->level_offset[t];                                                \
        const int d = M->depth[t];                                                            \
        for (int i = 0; i < LT_BLOCK; ++i) idx[i] = 0;                                        \
        for (int l = 0; l < d; ++l) {                                                         \
            const LT_BIN_T *bc = bins + (int64_t)M->level_col[lo + l] * LT_BLOCK;             \
            const LT_BIN_T k = M->level_bin[lo + l];                                          \
            for (int i = 0; i < LT_BLOCK; ++i) idx[i] |= (IDX_T)((IDX_T)(bc[i] > k) << l);    \
        }                                                                                     \
    }
LT_INDEX_FN(lt_index8, uint8_t)
LT_INDEX_FN(lt_index16, uint16_t)
LT_INDEX_FN(lt_index32, uint32_t)

/* The same with the depth known at compile time: the level loop unrolls and the index of 32
 * rows stays in one register across levels. */
#define LT_INDEX_FIXED(D, IDX_T)                                                              \
    LT_HOT static void lt_index_d##D(const lt_model *M, int32_t t, const LT_BIN_T *bins, IDX_T *idx) \
    {                                                                                         \
        const int64_t lo = M->level_offset[t];                                                \
        const LT_BIN_T *bc[D];                                                                \
        LT_BIN_T kk[D];                                                                       \
        for (int l = 0; l < D; ++l) {                                                         \
            bc[l] = bins + (int64_t)M->level_col[lo + l] * LT_BLOCK;                          \
            kk[l] = M->level_bin[lo + l];                                                     \
        }                                                                                     \
        for (int i = 0; i < LT_BLOCK; ++i) {                                                  \
            IDX_T v = 0;                                                                      \
            for (int l = 0; l < D; ++l) v |= (IDX_T)((IDX_T)(bc[l][i] > kk[l]) << l);         \
            idx[i] = v;                                                                       \
        }                                                                                     \
    }
LT_INDEX_FIXED(1, uint8_t)
LT_INDEX_FIXED(2, uint8_t)
LT_INDEX_FIXED(3, uint8_t)
LT_INDEX_FIXED(4, uint8_t)
LT_INDEX_FIXED(5, uint8_t)
LT_INDEX_FIXED(6, uint8_t)
LT_INDEX_FIXED(7, uint8_t)
LT_INDEX_FIXED(8, uint8_t)
LT_INDEX_FIXED(9, uint16_t)
LT_INDEX_FIXED(10, uint16_t)
LT_INDEX_FIXED(11, uint16_t)
LT_INDEX_FIXED(12, uint16_t)

static void lt_index_small(const lt_model *M, int32_t t, int d, const LT_BIN_T *bins, uint8_t *idx)
{
    switch (d) {
    case 1: lt_index_d1(M, t, bins, idx); break;
    case 2: lt_index_d2(M, t, bins, idx); break;
    case 3: lt_index_d3(M, t, bins, idx); break;
    case 4: lt_index_d4(M, t, bins, idx); break;
    case 5: lt_index_d5(M, t, bins, idx); break;
    case 6: lt_index_d6(M, t, bins, idx); break;
    case 7: lt_index_d7(M, t, bins, idx); break;
    case 8: lt_index_d8(M, t, bins, idx); break;
    default: lt_index8(M, t, bins, idx); break;
    }
}

static void lt_index_mid(const lt_model *M, int32_t t, int d, const LT_BIN_T *bins, uint16_t *idx)
{
    switch (d) {
    case 9: lt_index_d9(M, t, bins, idx); break;
    case 10: lt_index_d10(M, t, bins, idx); break;
    case 11: lt_index_d11(M, t, bins, idx); break;
    case 12: lt_index_d12(M, t, bins, idx); break;
    default: lt_index16(M, t, bins, idx); break;
    }
}

/* Step 3 for one tree: add its table rows to the block's sums (acc[k * LT_BLOCK + i]). */
#define LT_ADD_FN(NAME, IDX_T)                                                                \
    LT_HOT static void NAME(const lt_model *M, int32_t t, const IDX_T *idx, int m, double *acc) \
    {                                                                                         \
        const double *tab = M->value + M->value_offset[t];                                    \
        const int32_t k = M->tree_output[t];                                                  \
        if (k >= 0) {                                                                         \
            double *a = acc + (int64_t)k * LT_BLOCK;                                          \
            for (int i = 0; i < m; ++i) a[i] += tab[idx[i]];                                  \
        } else {                                                                              \
            const int K = LT_K(M);                                                            \
            for (int i = 0; i < m; ++i)                                                       \
                for (int j = 0; j < K; ++j) acc[(int64_t)j * LT_BLOCK + i] += tab[(int64_t)idx[i] * K + j]; \
        }                                                                                     \
    }
LT_ADD_FN(lt_add8, uint8_t)
LT_ADD_FN(lt_add16, uint16_t)
LT_ADD_FN(lt_add32, uint32_t)

typedef struct {
    LT_BIN_T *bins;
    double *acc;
} lt_scratch;

static int lt_scratch_init(const lt_model *M, lt_scratch *s)
{
    const size_t nb = (size_t)(M->n_cols > 0 ? M->n_cols : 1) * LT_BLOCK;
    s->bins = (LT_BIN_T *)malloc(nb * sizeof(LT_BIN_T));
    s->acc = (double *)malloc((size_t)LT_K(M) * LT_BLOCK * sizeof(double));
    return s->bins != NULL && s->acc != NULL;
}

static void lt_scratch_free(lt_scratch *s)
{
    free(s->bins);
    free(s->acc);
}

static void lt_transform(const lt_model *M, double *o)
{
    const int K = LT_K(M);
    switch (M->transform) {
    case 1:
        for (int k = 0; k < K; ++k) o[k] = 1.0 / (1.0 + exp(-M->sigmoid_alpha * o[k]));
        break;
    case 2: {
        double mx = o[0], sum = 0.0;
        for (int k = 1; k < K; ++k) mx = o[k] > mx ? o[k] : mx;
        for (int k = 0; k < K; ++k) { o[k] = exp(o[k] - mx); sum += o[k]; }
        for (int k = 0; k < K; ++k) o[k] /= sum;
        break;
    }
    case 3:
        for (int k = 0; k < K; ++k) o[k] = exp(o[k]);
        break;
    case 4:
        for (int k = 0; k < K; ++k) o[k] = -pow(2.0, -o[k] / M->isolation_c);
        break;
    default:
        break;
    }
}

/* Margins of rows X[0..m), m <= LT_BLOCK, into out (row-major m x K); leaf ids into leaf (m x T) if given. */
static void lt_block(const lt_model *M, const LT_IN_T *X, int m, double *out, int32_t *leaf, int transform,
                     lt_scratch *s)
{
    union { uint8_t u8[LT_BLOCK]; uint16_t u16[LT_BLOCK]; uint32_t u32[LT_BLOCK]; } idx;
    const int K = LT_K(M);
    double *acc = s->acc;
    lt_binarize(M, X, m, s->bins);
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < LT_BLOCK; ++i) acc[(int64_t)k * LT_BLOCK + i] = M->base[k];
    for (int32_t t = 0; t < M->n_trees; ++t) {
        const int d = M->depth[t];
        if (d <= 8) {
            lt_index_small(M, t, d, s->bins, idx.u8);
            lt_add8(M, t, idx.u8, m, acc);
            if (leaf) for (int i = 0; i < m; ++i) leaf[(int64_t)i * M->n_trees + t] = idx.u8[i];
        } else if (d <= 16) {
            lt_index_mid(M, t, d, s->bins, idx.u16);
            lt_add16(M, t, idx.u16, m, acc);
            if (leaf) for (int i = 0; i < m; ++i) leaf[(int64_t)i * M->n_trees + t] = idx.u16[i];
        } else {
            lt_index32(M, t, s->bins, idx.u32);
            lt_add32(M, t, idx.u32, m, acc);
            if (leaf) for (int i = 0; i < m; ++i) leaf[(int64_t)i * M->n_trees + t] = (int32_t)idx.u32[i];
        }
    }
    if (!out) return;
    for (int i = 0; i < m; ++i) {
        double *o = out + (int64_t)i * K;
        for (int k = 0; k < K; ++k) {
            const double v = acc[(int64_t)k * LT_BLOCK + i];
            o[k] = M->average ? v / M->divisor[k] : v;
        }
        if (transform) lt_transform(M, o);
    }
}

/* All rows, blocks shared among threads; returns 0, or -1 when scratch memory ran out. */
static int lt_run(const lt_model *M, const LT_IN_T *rows, int64_t n, double *out, int32_t *leaf, int32_t threads,
                  int transform)
{
    const int64_t nblocks = (n + LT_BLOCK - 1) / LT_BLOCK;
    const int64_t F = LT_F(M);
    const int K = LT_K(M);
    int failed = 0;
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads > 1 ? threads : 1) reduction(| : failed)
#endif
    {
        lt_scratch s;
        if (!lt_scratch_init(M, &s)) {
            failed = 1;
        } else {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t b = 0; b < nblocks; ++b) {
                const int64_t r0 = b * LT_BLOCK;
                const int m = (int)(n - r0 < LT_BLOCK ? n - r0 : LT_BLOCK);
                lt_block(M, rows + r0 * F, m, out ? out + r0 * K : NULL, leaf ? leaf + r0 * M->n_trees : NULL,
                         transform, &s);
            }
        }
        lt_scratch_free(&s);
    }
    return failed ? -1 : 0;
}
