/* lumber oblivious-table evaluator (shipped with lumber; emitted code includes it verbatim).
 *
 * A model is an lt_model (below): binarized columns with sorted borders, and per
 * tree its levels (column, bin) and a table of 2^depth rows. Rows are evaluated
 * in super-blocks (a few thousand rows, so their bins fit in L2):
 *   1. binarize: every column once per row, bin = #{borders b : x > b} (NaN: the
 *      column's NaN bin), stored column-major as LT_BIN_T so step 2 reads
 *      contiguous small integers (AVX2 and AVX-512 count a column of up to 255
 *      borders in two steps of 16 compares per row; see "binarization by
 *      counting"); a set column (category level) gets 1 when the
 *      value's category code (the model's category rule) is one of its borders,
 *      0 for another valid code and col_invalid_bin for an invalid value;
 *   2. per tree: leaf index = OR over levels of (bin > level_bin) << level, for
 *      LT_BLOCK rows at once (one vector compare per level: 64 rows with AVX-512, 32 with AVX2);
 *      a tree with bin levels sums *terms* instead: its index is sum_j (bin[col_j] > g_j) << shift_j,
 *      one term per plain level (shift = the level) and one per border of a bin group (all with
 *      the group's first level as shift: together they add the group's code);
 *   3. per tree: add table[index] to the row's sums (a tree with a dictionary: the
 *      value its cell's byte code names).
 * Trees go in chunks whose tables fit in L2 (LT_CHUNK_BYTES); a chunk is swept over
 * the whole super-block before the next, so big ensembles do not stream their
 * tables once per LT_BLOCK rows. Every row still adds trees in order from the base
 * score, so results equal the numpy evaluator bit for bit. Super-blocks are
 * independent: OpenMP threads take them (when built with -fopenmp).
 * Single-output models of depth <= 16 take the fused kernels (portable C, AVX2 or
 * AVX-512, chosen per call: see "the fused kernels" below); one row takes lt_row (on AVX-512 with the
 * one-row layout: 64 trees' indices per step, the row's bins in two registers).
 *
 * Configuration macros (set by the includer):
 *   LT_IN_T   float or double: the model's input type (borders are values of it)
 *   LT_BIN_T  uint8_t or uint16_t: bins (borders per column must fit)
 *   LT_BLOCK  rows per vector step block (a multiple of 64)
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
#ifndef LT_CHUNK_BYTES
#define LT_CHUNK_BYTES (192 * 1024)
#endif
#ifndef LT_BINS_BYTES
#define LT_BINS_BYTES (192 * 1024)
#endif
#define LT_SUPER_MAX 8192
#ifndef LT_SUPER_MIN
#define LT_SUPER_MIN 8192
#endif
#ifndef LT_BINS_MAX_BYTES
#define LT_BINS_MAX_BYTES (4096 * 1024)
#endif

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
    int32_t cat_rule;               /* lumber.ir.schema.CategoryRule */
    const int32_t *col_invalid_bin; /* NULL, or per column: -1 border column, else a set column's invalid bin */
    const int64_t *term_offset;     /* NULL, or per tree: its terms term_offset[t]..[t+1] (none: plain tree) */
    const int32_t *term_col;        /* column a term reads */
    const LT_BIN_T *term_bin;       /* the term is bin > term_bin ... */
    const int32_t *term_shift;      /* ... times 2^term_shift */
    const int32_t *tree_plain;      /* its first tree_plain[t] terms are its plain levels 0, 1, ... */
    const int64_t *dict_offset;     /* NULL, or per tree: its distinct cell values dict_value[dict_offset[t]..[t+1]) */
    const double *dict_value;       /* (none: the tree reads value[]) ... */
    const uint8_t *cell_code;       /* ... and cell i of tree t holds dict_value[dict_offset[t] + cell_code[value_offset[t] + i]] */
    const int64_t *row_off;         /* NULL, or the one-row kernel's layout: per group of 64 trees its slots */
    const uint8_t *row_vec;         /* row_off[g]..[g + 1], each 4 x 64 bytes: the trees' term column, bin, low and high weight */
} lt_model;
#define LT_DICT(M, t) ((M)->dict_offset != NULL && (M)->dict_offset[(t) + 1] > (M)->dict_offset[t])

/* Bin of a non-NaN value in set column c: 1 member, 0 valid non-member, the invalid bin otherwise. */
static LT_BIN_T lt_set_bin(const lt_model *M, int32_t c, LT_IN_T v)
{
    const double x = (double)v, t = trunc(x);
    int valid;
    switch (M->cat_rule) {
    case 0: valid = fabs(x) < 2147483648.0 && t >= 0; break;       /* LightGBM: -0.5 is category 0 */
    case 1: valid = x >= 0 && x < 16777216.0; break;                /* XGBoost */
    case 2: valid = x >= 0 && x < 4294967296.0 && t == x; break;    /* scikit-learn: exact codes only */
    default: valid = x >= 0 && x < 4294967296.0; break;             /* treelite */
    }
    if (!valid) return (LT_BIN_T)M->col_invalid_bin[c];
    const LT_IN_T *b = M->border + M->border_offset[c];
    int lo = 0, hi = (int)(M->border_offset[c + 1] - M->border_offset[c]);
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if ((double)b[mid] < t) lo = mid + 1; else hi = mid;
    }
    return (LT_BIN_T)(lo < (int)(M->border_offset[c + 1] - M->border_offset[c]) && (double)b[lo] == t);
}

#define LT_CODE_INVALID (-1.0)
#define LT_CODE_NAN (-2.0)
/* Category code of each value (truncated), LT_CODE_INVALID where the model's rule calls it invalid,
 * LT_CODE_NAN for NaN: what lt_set_bin decides per value, for a block of rows at once. */
LT_HOT static void lt_codes(const lt_model *M, const LT_IN_T *xs, int lanes, double *code)
{
    for (int i = 0; i < lanes; ++i) {
        const double x = (double)xs[i], t = trunc(x);
        int valid;
        switch (M->cat_rule) {
        case 0: valid = fabs(x) < 2147483648.0 && t >= 0; break;
        case 1: valid = x >= 0 && x < 16777216.0; break;
        case 2: valid = x >= 0 && x < 4294967296.0 && t == x; break;
        default: valid = x >= 0 && x < 4294967296.0; break;
        }
        code[i] = x != x ? LT_CODE_NAN : valid ? t : LT_CODE_INVALID;
    }
}

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

typedef struct {
    LT_IN_T *pad;   /* per counted column: 16 splitters, then its blocks */
    int64_t *off;   /* per column: its splitters' offset in pad, or -1 (binarized the general way) */
    int32_t *nblk;  /* per column: its blocks */
} lt_counts;

/* Step 1: bins of rows X[0..m), m <= lanes <= LT_BLOCK, for every column into bins[c * stride + i]
 * (lanes, a multiple of 32, is how many rows the vector loops cover: m rounded up; lt_super passes a
 * multiple of 64). */
LT_HOT static void lt_binarize(const lt_model *M, const lt_counts *cb, const LT_IN_T *X, int m, int lanes, LT_BIN_T *bins,
                               int64_t stride)
{
    LT_IN_T xs[LT_BLOCK];
    int32_t pos[LT_BLOCK];
    double code[LT_BLOCK];
    int32_t code_f = -1;  /* feature whose codes are in code[] */
    const int64_t F = LT_F(M);
    for (int32_t c = 0; c < M->n_cols; ++c) {
        if (cb && cb->off[c] >= 0) continue;  /* counted by lt_binarize_path */
        const LT_IN_T *b = M->border + M->border_offset[c];
        const int nb = (int)(M->border_offset[c + 1] - M->border_offset[c]);
        const int32_t f = M->col_feature[c];
        const LT_BIN_T nan_bin = (LT_BIN_T)M->col_nan_bin[c];
        LT_BIN_T *out = bins + (int64_t)c * stride;
        for (int i = 0; i < m; ++i) xs[i] = X[(int64_t)i * F + f];
        for (int i = m; i < lanes; ++i) xs[i] = 0;
        if (M->col_invalid_bin && M->col_invalid_bin[c] >= 0) {
            /* set column: the rows' codes once per feature (columns of one feature are adjacent),
               then membership by comparing with the set's few codes, vectorized over rows */
            if (f != code_f) {
                lt_codes(M, xs, lanes, code);
                code_f = f;
            }
            const LT_BIN_T inv = (LT_BIN_T)M->col_invalid_bin[c];
            for (int i = 0; i < lanes; ++i) pos[i] = 0;
            for (int k = 0; k < nb; ++k) {
                const double bk = (double)b[k];
                for (int i = 0; i < lanes; ++i) pos[i] |= code[i] == bk;
            }
            for (int i = 0; i < lanes; ++i)
                out[i] = code[i] == LT_CODE_NAN ? nan_bin : code[i] == LT_CODE_INVALID ? inv : (LT_BIN_T)pos[i];
            continue;
        }
        if (nb <= LT_LINEAR_MAX) {
            /* few borders: count them, vectorized over rows */
            for (int i = 0; i < lanes; ++i) pos[i] = 0;
            for (int k = 0; k < nb; ++k) {
                const LT_IN_T bk = b[k];
                for (int i = 0; i < lanes; ++i) pos[i] += xs[i] > bk;
            }
        } else {
            /* branch-free binary search, all rows of the block in lock step:
               pos = last index with b[pos] < x (or 0), then one final compare */
            for (int i = 0; i < lanes; ++i) pos[i] = 0;
            for (int n = nb; n > 1;) {
                const int half = n >> 1;
                for (int i = 0; i < lanes; ++i) pos[i] = (b[pos[i] + half] < xs[i]) ? pos[i] + half : pos[i];
                n -= half;
            }
            for (int i = 0; i < lanes; ++i) pos[i] += (b[pos[i]] < xs[i]);
        }
        for (int i = 0; i < lanes; ++i) out[i] = (xs[i] != xs[i]) ? nan_bin : (LT_BIN_T)pos[i];
    }
}

/* Step 2 for one tree: leaf index of every row of the block. */
#define LT_INDEX_FN(NAME, IDX_T)                                                              \
    LT_HOT static void NAME(const lt_model *M, int32_t t, const LT_BIN_T *bins, int64_t stride, int lanes, IDX_T *idx) \
    {                                                                                         \
        const int64_t lo = M->level_offset[t];                                                \
        const int d = M->depth[t];                                                            \
        for (int i = 0; i < lanes; ++i) idx[i] = 0;                                           \
        for (int l = 0; l < d; ++l) {                                                         \
            const LT_BIN_T *bc = bins + (int64_t)M->level_col[lo + l] * stride;               \
            const LT_BIN_T k = M->level_bin[lo + l];                                          \
            for (int i = 0; i < lanes; ++i) idx[i] |= (IDX_T)((IDX_T)(bc[i] > k) << l);       \
        }                                                                                     \
    }
LT_INDEX_FN(lt_index8, uint8_t)
LT_INDEX_FN(lt_index16, uint16_t)
LT_INDEX_FN(lt_index32, uint32_t)

/* Step 2 with the level count D known at compile time: the level loop unrolls and the index of 32
 * rows stays in registers across levels, as bytes (levels 0-7 and 8-15 OR-ed into two bytes, widened
 * once: 10% fewer instructions on credit at depth 10 than OR-ing every level into 16-bit lanes,
 * callgrind). Levels l < D read column col[l] against bin kb[l]: a plain tree's levels, or the plain
 * levels (first terms) of a tree with bin levels. */
#define LT_LEVELS_FIXED(D, IDX_T, SUFFIX)                                                     \
    LT_HOT static void lt_levels##SUFFIX##_##D(const int32_t *col, const LT_BIN_T *kb, const LT_BIN_T *bins, \
                                               int64_t stride, int lanes, IDX_T *idx)         \
    {                                                                                         \
        const LT_BIN_T *bc[D];                                                                \
        LT_BIN_T kk[D];                                                                       \
        for (int l = 0; l < D; ++l) {                                                         \
            bc[l] = bins + (int64_t)col[l] * stride;                                          \
            kk[l] = kb[l];                                                                    \
        }                                                                                     \
        for (int i = 0; i < lanes; ++i) {                                                     \
            uint8_t lo = 0, hi = 0;                                                           \
            for (int l = 0; l < D && l < 8; ++l) lo |= (uint8_t)((bc[l][i] > kk[l]) << l);    \
            for (int l = 8; l < D; ++l) hi |= (uint8_t)((bc[l][i] > kk[l]) << (l - 8));       \
            idx[i] = (IDX_T)(lo | (uint32_t)hi << 8);                                         \
        }                                                                                     \
    }
#define LT_LEVELS_1_8(IDX_T, SUFFIX)                                                          \
    LT_LEVELS_FIXED(1, IDX_T, SUFFIX) LT_LEVELS_FIXED(2, IDX_T, SUFFIX) LT_LEVELS_FIXED(3, IDX_T, SUFFIX) \
    LT_LEVELS_FIXED(4, IDX_T, SUFFIX) LT_LEVELS_FIXED(5, IDX_T, SUFFIX) LT_LEVELS_FIXED(6, IDX_T, SUFFIX) \
    LT_LEVELS_FIXED(7, IDX_T, SUFFIX) LT_LEVELS_FIXED(8, IDX_T, SUFFIX)
LT_LEVELS_1_8(uint8_t, 8)
LT_LEVELS_1_8(uint16_t, 16)
LT_LEVELS_1_8(uint32_t, 32)
LT_LEVELS_FIXED(9, uint16_t, 16)
LT_LEVELS_FIXED(10, uint16_t, 16)
LT_LEVELS_FIXED(11, uint16_t, 16)
LT_LEVELS_FIXED(12, uint16_t, 16)

/* Step 2 for a tree with bin levels. Its plain levels come first (term_offset[t] .. + tree_plain[t]:
 * one term each, shift = the level), unrolled by count with the index in a register; then each bin
 * group adds its code: the count of its code bins below the bin (a byte per row, summed without
 * shifts so the row loop vectorizes), shifted once to the group's first level. */
/* One bin group of G borders (G known at compile time): its code in a register, OR-ed in once. */
#define LT_GROUP_FIXED(G, IDX_T, SUFFIX)                                                      \
    LT_HOT static void lt_group##SUFFIX##_##G(const LT_BIN_T *g, const LT_BIN_T *bc, int s, int lanes, IDX_T *idx) \
    {                                                                                         \
        LT_BIN_T gg[G];                                                                       \
        for (int q = 0; q < G; ++q) gg[q] = g[q];                                             \
        for (int i = 0; i < lanes; ++i) {                                                     \
            uint8_t c = 0;                                                                    \
            for (int q = 0; q < G; ++q) c += (uint8_t)(bc[i] > gg[q]);                        \
            idx[i] |= (IDX_T)((IDX_T)c << s);                                                 \
        }                                                                                     \
    }
#define LT_CODED_FN(IDX_T, SUFFIX)                                                            \
    LT_GROUP_FIXED(2, IDX_T, SUFFIX) LT_GROUP_FIXED(3, IDX_T, SUFFIX) LT_GROUP_FIXED(4, IDX_T, SUFFIX) \
    LT_GROUP_FIXED(5, IDX_T, SUFFIX) LT_GROUP_FIXED(6, IDX_T, SUFFIX) LT_GROUP_FIXED(7, IDX_T, SUFFIX) \
    LT_HOT static void lt_terms##SUFFIX(const lt_model *M, int32_t t, const LT_BIN_T *bins, int64_t stride, \
                                        int lanes, IDX_T *idx)                                \
    {                                                                                         \
        const int64_t lo = M->term_offset[t], hi = M->term_offset[t + 1];                     \
        const int p = M->tree_plain[t];                                                       \
        switch (p) {                                                                          \
        case 1: lt_levels##SUFFIX##_1(M->term_col + lo, M->term_bin + lo, bins, stride, lanes, idx); break;                 \
        case 2: lt_levels##SUFFIX##_2(M->term_col + lo, M->term_bin + lo, bins, stride, lanes, idx); break;                 \
        case 3: lt_levels##SUFFIX##_3(M->term_col + lo, M->term_bin + lo, bins, stride, lanes, idx); break;                 \
        case 4: lt_levels##SUFFIX##_4(M->term_col + lo, M->term_bin + lo, bins, stride, lanes, idx); break;                 \
        case 5: lt_levels##SUFFIX##_5(M->term_col + lo, M->term_bin + lo, bins, stride, lanes, idx); break;                 \
        case 6: lt_levels##SUFFIX##_6(M->term_col + lo, M->term_bin + lo, bins, stride, lanes, idx); break;                 \
        case 7: lt_levels##SUFFIX##_7(M->term_col + lo, M->term_bin + lo, bins, stride, lanes, idx); break;                 \
        case 8: lt_levels##SUFFIX##_8(M->term_col + lo, M->term_bin + lo, bins, stride, lanes, idx); break;                 \
        default:                                                                              \
            for (int i = 0; i < lanes; ++i) idx[i] = 0;                                       \
            for (int l = 0; l < p; ++l) {                                                     \
                const LT_BIN_T *bc = bins + (int64_t)M->term_col[lo + l] * stride;            \
                const LT_BIN_T k = M->term_bin[lo + l];                                       \
                for (int i = 0; i < lanes; ++i) idx[i] |= (IDX_T)((IDX_T)(bc[i] > k) << l);   \
            }                                                                                 \
        }                                                                                     \
        for (int64_t j = lo + p; j < hi;) {                                                   \
            const int s = M->term_shift[j];                                                   \
            const LT_BIN_T *bc = bins + (int64_t)M->term_col[j] * stride;                     \
            int64_t e = j + 1;                                                                \
            while (e < hi && M->term_shift[e] == s) ++e;                                      \
            switch (e - j) {                                                                  \
            case 2: lt_group##SUFFIX##_2(M->term_bin + j, bc, s, lanes, idx); break;          \
            case 3: lt_group##SUFFIX##_3(M->term_bin + j, bc, s, lanes, idx); break;          \
            case 4: lt_group##SUFFIX##_4(M->term_bin + j, bc, s, lanes, idx); break;          \
            case 5: lt_group##SUFFIX##_5(M->term_bin + j, bc, s, lanes, idx); break;          \
            case 6: lt_group##SUFFIX##_6(M->term_bin + j, bc, s, lanes, idx); break;          \
            case 7: lt_group##SUFFIX##_7(M->term_bin + j, bc, s, lanes, idx); break;          \
            default: {                                                                        \
                uint8_t code[LT_BLOCK];                                                       \
                for (int i = 0; i < lanes; ++i) code[i] = 0;                                  \
                for (int64_t q = j; q < e; ++q) {                                             \
                    const LT_BIN_T g = M->term_bin[q];                                        \
                    for (int i = 0; i < lanes; ++i) code[i] += (uint8_t)(bc[i] > g);          \
                }                                                                             \
                for (int i = 0; i < lanes; ++i) idx[i] |= (IDX_T)((IDX_T)code[i] << s);       \
            }                                                                                 \
            }                                                                                 \
            j = e;                                                                            \
        }                                                                                     \
    }
LT_CODED_FN(uint8_t, 8)
LT_CODED_FN(uint16_t, 16)
LT_CODED_FN(uint32_t, 32)
#define LT_CODED(M, t) ((M)->term_offset != NULL && (M)->term_offset[(t) + 1] > (M)->term_offset[t])

static void lt_index_small(const lt_model *M, int32_t t, int d, const LT_BIN_T *bins, int64_t stride, int lanes,
                           uint8_t *idx)
{
    if (LT_CODED(M, t)) {
        lt_terms8(M, t, bins, stride, lanes, idx);
        return;
    }
    const int64_t lo = M->level_offset[t];
    switch (d) {
    case 1: lt_levels8_1(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 2: lt_levels8_2(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 3: lt_levels8_3(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 4: lt_levels8_4(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 5: lt_levels8_5(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 6: lt_levels8_6(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 7: lt_levels8_7(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 8: lt_levels8_8(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    default: lt_index8(M, t, bins, stride, lanes, idx); break;
    }
}

static void lt_index_mid(const lt_model *M, int32_t t, int d, const LT_BIN_T *bins, int64_t stride, int lanes,
                         uint16_t *idx)
{
    if (LT_CODED(M, t)) {
        lt_terms16(M, t, bins, stride, lanes, idx);
        return;
    }
    const int64_t lo = M->level_offset[t];
    switch (d) {
    case 9: lt_levels16_9(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 10: lt_levels16_10(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 11: lt_levels16_11(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    case 12: lt_levels16_12(M->level_col + lo, M->level_bin + lo, bins, stride, lanes, idx); break;
    default: lt_index16(M, t, bins, stride, lanes, idx); break;
    }
}

/* Step 3 for one tree: add its table rows to the rows' sums (acc[k * stride + i]). */
#define LT_ADD_FN(NAME, IDX_T)                                                                \
    LT_HOT static void NAME(const lt_model *M, int32_t t, const IDX_T *idx, int m, double *acc, int64_t stride) \
    {                                                                                         \
        const double *tab = M->value + M->value_offset[t];                                    \
        const int32_t k = M->tree_output[t];                                                  \
        if (k >= 0) {                                                                         \
            double *a = acc + (int64_t)k * stride;                                            \
            for (int i = 0; i < m; ++i) a[i] += tab[idx[i]];                                  \
        } else {                                                                              \
            const int K = LT_K(M);                                                            \
            for (int i = 0; i < m; ++i)                                                       \
                for (int j = 0; j < K; ++j) acc[(int64_t)j * stride + i] += tab[(int64_t)idx[i] * K + j]; \
        }                                                                                     \
    }
LT_ADD_FN(lt_add8, uint8_t)
LT_ADD_FN(lt_add16, uint16_t)
LT_ADD_FN(lt_add32, uint32_t)

typedef struct {
    LT_BIN_T *bins;  /* n_cols x rows */
    double *acc;     /* n_outputs x rows */
    int64_t rows;    /* super-block rows, a multiple of LT_BLOCK */
} lt_scratch;

/* Rows per super-block: as many LT_BLOCKs as keep the bins within LT_BINS_BYTES (L2), but at least
 * LT_SUPER_MIN while the bins stay within LT_BINS_MAX_BYTES: every chunk of tables is read once per
 * super-block, so a model with many columns (category set columns) and deep tables would otherwise
 * stream all its tables every few hundred rows (Adult 500 x 63 at depth 10 has 485 columns, which
 * leaves 256-row super-blocks within L2: about 3.5x the time per row and tree of 8192-row ones). */
static int64_t lt_super_rows(const lt_model *M)
{
    const int64_t per_row = (int64_t)(M->n_cols > 0 ? M->n_cols : 1) * (int64_t)sizeof(LT_BIN_T);
    int64_t r = LT_BINS_BYTES / per_row;
    if (r < LT_SUPER_MIN) {
        r = LT_BINS_MAX_BYTES / per_row;
        if (r > LT_SUPER_MIN) r = LT_SUPER_MIN;
    }
    r = r / LT_BLOCK * LT_BLOCK;
    if (r < LT_BLOCK) r = LT_BLOCK;
    if (r > LT_SUPER_MAX) r = LT_SUPER_MAX;
    return r;
}

static int lt_scratch_init(const lt_model *M, lt_scratch *s, int64_t rows)
{
    s->rows = rows;
    s->bins = (LT_BIN_T *)malloc((size_t)(M->n_cols > 0 ? M->n_cols : 1) * (size_t)rows * sizeof(LT_BIN_T));
    s->acc = (double *)malloc((size_t)LT_K(M) * (size_t)rows * sizeof(double));
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

/* Trees [t0, t1) for the rows of one LT_BLOCK (bins and acc point at its first row). */
static void lt_trees(const lt_model *M, int32_t t0, int32_t t1, const LT_BIN_T *bins, double *acc, int64_t stride,
                     int m, int32_t *leaf, int64_t leaf_stride)
{
    const int lanes = (m + 31) & ~31;
    union { uint8_t u8[LT_BLOCK]; uint16_t u16[LT_BLOCK]; uint32_t u32[LT_BLOCK]; } idx;
    for (int32_t t = t0; t < t1; ++t) {
        const int d = M->depth[t];
        if (d <= 8) {
            lt_index_small(M, t, d, bins, stride, lanes, idx.u8);
            lt_add8(M, t, idx.u8, m, acc, stride);
            if (leaf) for (int i = 0; i < m; ++i) leaf[(int64_t)i * leaf_stride + t] = idx.u8[i];
        } else if (d <= 16) {
            lt_index_mid(M, t, d, bins, stride, lanes, idx.u16);
            lt_add16(M, t, idx.u16, m, acc, stride);
            if (leaf) for (int i = 0; i < m; ++i) leaf[(int64_t)i * leaf_stride + t] = idx.u16[i];
        } else {
            if (LT_CODED(M, t)) lt_terms32(M, t, bins, stride, lanes, idx.u32);
            else lt_index32(M, t, bins, stride, lanes, idx.u32);
            lt_add32(M, t, idx.u32, m, acc, stride);
            if (leaf) for (int i = 0; i < m; ++i) leaf[(int64_t)i * leaf_stride + t] = (int32_t)idx.u32[i];
        }
    }
}

/* -- the fused kernels: one output, no leaf ids, depth <= 16 --------------------------------------
 *
 * Trees go in groups of up to LT_GROUP. For a group, each tree's 16-bit cell index of every row of
 * the block is computed first (step 2), then the rows add the group's values in registers (step 3):
 * a row's sum is loaded once per group, and each lane (one row) adds the trees in order, so every path
 * rounds exactly as the numpy evaluator. A tree's index is the sum of its terms
 * (bin[col] > bin_j) * 2^shift_j: its plain levels (shift = the level) or, for a tree with bin levels,
 * its terms (a bin group's borders share the group's first level as shift: they add its code).
 *
 * Three paths, chosen per call (lt_run's isa; ISA_AUTO: the best this CPU runs):
 *   portable  plain C: the compiler vectorizes the index loops for the build's baseline; scalar sums;
 *   avx2      32 rows per byte compare; scalar sums, eight rows' chains at a time;
 *   avx512    a group's setup once per super-block, then block by block: 64 rows per byte compare (a
 *             mask) and masked byte adds, a byte index of up to 1024 rows in registers across a tree's
 *             terms; a tree of at most 256 cells or with a dictionary gets byte codes (its cells' codes
 *             by byte permutes), else 16-bit indices; the sums: a tree whose distinct values fit in 8,
 *             16 or 32 doubles looks them up with register permutes, its codes spread (lt_spread8) so a
 *             64-bit shift, not a widening shuffle, feeds each permute; any other tree gathers its values. */
#define LT_GROUP 16
#define LT_ISA_AUTO 0
#define LT_ISA_PORTABLE 1
#define LT_ISA_AVX2 2
#define LT_ISA_AVX512 3
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(LT_NO_X86)
#define LT_X86 1
#include <immintrin.h>
#define LT_TARGET_AVX2 __attribute__((target("avx2,popcnt")))
#define LT_TARGET_AVX512 __attribute__((target("avx2,popcnt,avx512f,avx512bw,avx512vl,avx512vbmi")))
#endif

/* Whether this CPU runs the given path. */
static int lt_isa_available(int isa)
{
    if (isa == LT_ISA_PORTABLE || isa == LT_ISA_AUTO) return 1;
#ifdef LT_X86
    __builtin_cpu_init();
    if (isa == LT_ISA_AVX2) return __builtin_cpu_supports("avx2") != 0;
    if (isa == LT_ISA_AVX512)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
               && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi");
#endif
    return 0;
}

/* The path a call takes: the requested one, or for ISA_AUTO the widest available; -1 if unavailable. */
static int lt_isa_resolve(int isa)
{
    if (isa == LT_ISA_AUTO) {
        if (lt_isa_available(LT_ISA_AVX512)) return LT_ISA_AVX512;
        if (lt_isa_available(LT_ISA_AVX2)) return LT_ISA_AVX2;
        return LT_ISA_PORTABLE;
    }
    return isa >= LT_ISA_PORTABLE && isa <= LT_ISA_AVX512 && lt_isa_available(isa) ? isa : -1;
}

/* Tree t's terms: n of them, column col[j], bin kb[j]; shift[j] (NULL: the term's position j). */
typedef struct {
    const int32_t *col;
    const LT_BIN_T *kb;
    const int32_t *shift;
    int n;
} lt_terms_of;

static lt_terms_of lt_tree_terms(const lt_model *M, int32_t t)
{
    lt_terms_of r;
    if (LT_CODED(M, t)) {
        const int64_t lo = M->term_offset[t];
        r.col = M->term_col + lo; r.kb = M->term_bin + lo; r.shift = M->term_shift + lo;
        r.n = (int)(M->term_offset[t + 1] - lo);
    } else {
        const int64_t lo = M->level_offset[t];
        r.col = M->level_col + lo; r.kb = M->level_bin + lo; r.shift = NULL;
        r.n = M->depth[t];
    }
    return r;
}

/* Step 3 without vectors: eight rows at a time, eight independent chains over the ng trees of a group
 * (VALUE(j, c): tree j's value of cell c). */
#define LT_GROUP_SUMS(VALUE)                                                                  \
    for (; i + 8 <= m; i += 8) {                                                              \
        double s0 = acc[i], s1 = acc[i + 1], s2 = acc[i + 2], s3 = acc[i + 3];                \
        double s4 = acc[i + 4], s5 = acc[i + 5], s6 = acc[i + 6], s7 = acc[i + 7];            \
        for (int j = 0; j < ng; ++j) {                                                        \
            const uint16_t *g = gidx[j] + i;                                                  \
            s0 += VALUE(j, g[0]); s1 += VALUE(j, g[1]); s2 += VALUE(j, g[2]); s3 += VALUE(j, g[3]); \
            s4 += VALUE(j, g[4]); s5 += VALUE(j, g[5]); s6 += VALUE(j, g[6]); s7 += VALUE(j, g[7]); \
        }                                                                                     \
        acc[i] = s0; acc[i + 1] = s1; acc[i + 2] = s2; acc[i + 3] = s3;                       \
        acc[i + 4] = s4; acc[i + 5] = s5; acc[i + 6] = s6; acc[i + 7] = s7;                   \
    }                                                                                         \
    for (; i < m; ++i) {                                                                      \
        double sum = acc[i];                                                                  \
        for (int j = 0; j < ng; ++j) sum += VALUE(j, gidx[j][i]);                             \
        acc[i] = sum;                                                                         \
    }
#define LT_TABLE_VALUE(j, c) tabs[j][c]
#define LT_DICT_VALUE(j, c) tabs[j][codes[j][c]]

/* Scalar sums of trees [g0, g0 + ng) (all with dictionaries, or all without) for rows [0, m). */
static inline void lt_sums_scalar(const lt_model *M, int32_t g0, int ng, int dict, uint16_t (*gidx)[LT_BLOCK],
                                  double *acc, int m)
{
    const double *tabs[LT_GROUP];
    const uint8_t *codes[LT_GROUP];
    for (int j = 0; j < ng; ++j) {
        const int32_t t = g0 + j;
        if (dict) {
            tabs[j] = M->dict_value + M->dict_offset[t];
            codes[j] = M->cell_code + M->value_offset[t];
        } else {
            tabs[j] = M->value + M->value_offset[t];
        }
    }
    int i = 0;
    if (dict) {
        LT_GROUP_SUMS(LT_DICT_VALUE)
    } else {
        LT_GROUP_SUMS(LT_TABLE_VALUE)
    }
}

/* Length of the group starting at g0: up to LT_GROUP trees of one kind (with or without a dictionary). */
static inline int lt_group_len(const lt_model *M, int32_t g0, int32_t t1)
{
    const int dict = LT_DICT(M, g0);
    int ng = 1;
    while (ng < LT_GROUP && g0 + ng < t1 && LT_DICT(M, g0 + ng) == dict) ++ng;
    return ng;
}

/* What tree t's terms below bit 8 add at most: at most 255, its index sums in two bytes per row (bits
 * 0-7 and 8-15) without a carry between them (a bin group straddling bit 8 can exceed it). */
static inline int lt_low_sum(const lt_terms_of *q)
{
    int low = 0;
    for (int j = 0; j < q->n; ++j) {
        const int s = q->shift ? q->shift[j] : j;
        if (s < 8) low += 1 << s;
    }
    return low;
}

/* Portable step 2: tree t's index of rows [0, lanes), in two bytes per row where no carry crosses them
 * (the row loops vectorize 16 or more rows per instruction), else in 16 bits. */
static void lt_index_portable(const lt_model *M, int32_t t, const LT_BIN_T *bins, int64_t stride, int lanes,
                              uint16_t *idx)
{
    const lt_terms_of q = lt_tree_terms(M, t);
    if (lt_low_sum(&q) <= 255) {
        uint8_t lo[LT_BLOCK], hi[LT_BLOCK];
        for (int i = 0; i < lanes; ++i) lo[i] = hi[i] = 0;
        for (int j = 0; j < q.n; ++j) {
            const LT_BIN_T *bc = bins + (int64_t)q.col[j] * stride;
            const LT_BIN_T k = q.kb[j];
            const int s = q.shift ? q.shift[j] : j;
            uint8_t *a = s < 8 ? lo : hi;
            const uint8_t w = (uint8_t)(1u << (s & 7));
            for (int i = 0; i < lanes; ++i) a[i] = (uint8_t)(a[i] + (bc[i] > k ? w : 0));
        }
        for (int i = 0; i < lanes; ++i) idx[i] = (uint16_t)(lo[i] | (uint16_t)hi[i] << 8);
        return;
    }
    for (int i = 0; i < lanes; ++i) idx[i] = 0;
    for (int j = 0; j < q.n; ++j) {
        const LT_BIN_T *bc = bins + (int64_t)q.col[j] * stride;
        const LT_BIN_T k = q.kb[j];
        const uint16_t w = (uint16_t)(1u << (q.shift ? q.shift[j] : j));
        for (int i = 0; i < lanes; ++i) idx[i] = (uint16_t)(idx[i] + (bc[i] > k ? w : 0));
    }
}

/* Trees [t0, t1) for the rows of one block (bins and acc point at its first row; lanes: m rounded up to 64). */
static void lt_fused_portable(const lt_model *M, int32_t t0, int32_t t1, const LT_BIN_T *bins, double *acc,
                              int64_t stride, int m)
{
    uint16_t gidx[LT_GROUP][LT_BLOCK];
    const int lanes = (m + 63) & ~63;
    for (int32_t g0 = t0, ng; g0 < t1; g0 += ng) {
        ng = lt_group_len(M, g0, t1);
        for (int j = 0; j < ng; ++j) lt_index_portable(M, g0 + j, bins, stride, lanes, gidx[j]);
        lt_sums_scalar(M, g0, ng, LT_DICT(M, g0), gidx, acc, m);
    }
}

#ifdef LT_X86
/* AVX2 step 2 for nch (1-4) chunks of 32 rows from row i0 (byte bins, no carry out of the low byte):
 * per term one compare of 32 bins (unsigned through the sign flip) and one add of its weight into the
 * rows' low or high index byte; then the bytes interleave into 16-bit indices. */
static inline __attribute__((always_inline)) LT_TARGET_AVX2 void lt_index256_chunks(
    const lt_terms_of *q, const LT_BIN_T *bins, int64_t stride, int i0, const int nch, uint16_t *idx)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256i lo[4], hi[4];
    for (int c = 0; c < nch; ++c) lo[c] = hi[c] = _mm256_setzero_si256();
    for (int j = 0; j < q->n; ++j) {
        const LT_BIN_T *bc = bins + (int64_t)q->col[j] * stride + i0;
        const __m256i k = _mm256_set1_epi8((char)(q->kb[j] ^ 0x80));
        const int s = q->shift ? q->shift[j] : j;
        const __m256i w = _mm256_set1_epi8((char)(1 << (s & 7)));
        if (s < 8) {
            for (int c = 0; c < nch; ++c) {
                const __m256i b = _mm256_loadu_si256((const __m256i *)(bc + 32 * c));
                lo[c] = _mm256_add_epi8(lo[c], _mm256_and_si256(_mm256_cmpgt_epi8(_mm256_xor_si256(b, flip), k), w));
            }
        } else {
            for (int c = 0; c < nch; ++c) {
                const __m256i b = _mm256_loadu_si256((const __m256i *)(bc + 32 * c));
                hi[c] = _mm256_add_epi8(hi[c], _mm256_and_si256(_mm256_cmpgt_epi8(_mm256_xor_si256(b, flip), k), w));
            }
        }
    }
    for (int c = 0; c < nch; ++c) {  /* per 128-bit lane: rows 0-7 (16-23), then 8-15 (24-31) */
        const __m256i a = _mm256_unpacklo_epi8(lo[c], hi[c]), b = _mm256_unpackhi_epi8(lo[c], hi[c]);
        _mm256_storeu_si256((__m256i *)(idx + i0 + 32 * c), _mm256_permute2x128_si256(a, b, 0x20));
        _mm256_storeu_si256((__m256i *)(idx + i0 + 32 * c + 16), _mm256_permute2x128_si256(a, b, 0x31));
    }
}

/* AVX2 step 2: tree t's index of rows [0, lanes) (lanes a multiple of 64). */
LT_TARGET_AVX2 static void lt_index_avx2(const lt_model *M, int32_t t, const LT_BIN_T *bins, int64_t stride,
                                         int lanes, uint16_t *idx)
{
    const lt_terms_of q = lt_tree_terms(M, t);
    if (sizeof(LT_BIN_T) != 1 || lt_low_sum(&q) > 255) {
        lt_index_portable(M, t, bins, stride, lanes, idx);
        return;
    }
    int i = 0;
    for (; i + 128 <= lanes; i += 128) lt_index256_chunks(&q, bins, stride, i, 4, idx);
    if (i < lanes) lt_index256_chunks(&q, bins, stride, i, 2, idx);  /* lanes - i == 64 */
}

LT_TARGET_AVX2 static void lt_fused_avx2(const lt_model *M, int32_t t0, int32_t t1, const LT_BIN_T *bins,
                                         double *acc, int64_t stride, int m)
{
    uint16_t gidx[LT_GROUP][LT_BLOCK];
    const int lanes = (m + 63) & ~63;
    for (int32_t g0 = t0, ng; g0 < t1; g0 += ng) {
        ng = lt_group_len(M, g0, t1);
        for (int j = 0; j < ng; ++j) lt_index_avx2(M, g0 + j, bins, stride, lanes, gidx[j]);
        lt_sums_scalar(M, g0, ng, LT_DICT(M, g0), gidx, acc, m);
    }
}

/* The byte codes of 64 rows' cells (index bits 0-7 in lo, 8-9 in hi) from a tree's table of cells
 * (<= 1024, a power of two) byte codes: a two-register byte permute per 128 cells, the parts then
 * picked by index bits 7, 8 and 9. */
static inline __attribute__((always_inline)) LT_TARGET_AVX512 __m512i lt_codes512(const uint8_t *tab, int cells,
                                                                                  __m512i lo, __m512i hi)
{
    if (cells <= 128) {
        const __mmask64 m0 = cells >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << cells) - 1);
        const __mmask64 m1 = cells >= 128 ? ~(__mmask64)0 : cells <= 64 ? 0 : (((__mmask64)1 << (cells - 64)) - 1);
        return _mm512_permutex2var_epi8(_mm512_maskz_loadu_epi8(m0, tab), lo, _mm512_maskz_loadu_epi8(m1, tab + 64));
    }
    __m512i r[8];
    const int parts = cells >> 7;
    for (int p = 0; p < parts; ++p)
        r[p] = _mm512_permutex2var_epi8(_mm512_loadu_si512((const void *)(tab + 128 * p)), lo,
                                        _mm512_loadu_si512((const void *)(tab + 128 * p + 64)));
    const __mmask64 m7 = _mm512_movepi8_mask(lo);
    for (int p = 0; p < parts / 2; ++p) r[p] = _mm512_mask_blend_epi8(m7, r[2 * p], r[2 * p + 1]);
    if (parts >= 4) {
        const __mmask64 m8 = _mm512_test_epi8_mask(hi, _mm512_set1_epi8(1));
        for (int p = 0; p < parts / 4; ++p) r[p] = _mm512_mask_blend_epi8(m8, r[2 * p], r[2 * p + 1]);
    }
    if (parts >= 8) r[0] = _mm512_mask_blend_epi8(_mm512_test_epi8_mask(hi, _mm512_set1_epi8(2)), r[0], r[1]);
    return r[0];
}

/* The byte codes of 64 rows as the AVX-512 sums read them: byte 8q + j holds row 8j + q, so each 64-bit
 * lane q holds rows q, 8 + q, ..., 56 + q and a shift right by 8j brings row 8j + q to the lane's low
 * byte (the eight rows 8j..8j+7 in the eight lanes, in order): a shift instead of a widening shuffle. */
static inline __attribute__((always_inline)) LT_TARGET_AVX512 __m512i lt_spread8(__m512i codes)
{
    const __m512i t = _mm512_set_epi8(63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6,
                                      61, 53, 45, 37, 29, 21, 13, 5, 60, 52, 44, 36, 28, 20, 12, 4,
                                      59, 51, 43, 35, 27, 19, 11, 3, 58, 50, 42, 34, 26, 18, 10, 2,
                                      57, 49, 41, 33, 25, 17, 9, 1, 56, 48, 40, 32, 24, 16, 8, 0);
    return _mm512_permutexvar_epi8(t, codes);
}
static inline __attribute__((always_inline)) LT_TARGET_AVX512 __m512i lt_spread_if(int spread, __m512i codes)
{
    return spread ? lt_spread8(codes) : codes;
}

/* AVX-512 step 2 for nch (1-4) chunks of 64 rows from row i0, byte bins: each term is one compare (a
 * mask of 64 rows) and one masked byte add; index bits 0-7 sum in one byte per row, bits 8-15 in
 * another. Only for trees whose low-byte terms add up to at most 255 (no carry out of a byte; a bin
 * group straddling bit 8 does not). With codes (the tree's cell codes, cells of them) the rows' codes
 * go to out8; else the 16-bit indices to idx. */
static inline __attribute__((always_inline)) LT_TARGET_AVX512 void lt_index512_chunks(
    const lt_terms_of *q, const LT_BIN_T *bins, int64_t stride, int i0, const int nch, const uint8_t *codes,
    int cells, uint16_t *idx, uint8_t *out8, int spread)
{
    __m512i lo[4], hi[4];
    for (int c = 0; c < nch; ++c) lo[c] = hi[c] = _mm512_setzero_si512();
    for (int j = 0; j < q->n; ++j) {
        const LT_BIN_T *bc = bins + (int64_t)q->col[j] * stride + i0;
        const __m512i k = _mm512_set1_epi8((char)q->kb[j]);
        const int s = q->shift ? q->shift[j] : j;
        if (s < 8) {
            const __m512i w = _mm512_set1_epi8((char)(1 << s));
            for (int c = 0; c < nch; ++c)
                lo[c] = _mm512_mask_add_epi8(lo[c], _mm512_cmpgt_epu8_mask(_mm512_loadu_si512((const void *)(bc + 64 * c)), k),
                                             lo[c], w);
        } else {
            const __m512i w = _mm512_set1_epi8((char)(1 << (s - 8)));
            for (int c = 0; c < nch; ++c)
                hi[c] = _mm512_mask_add_epi8(hi[c], _mm512_cmpgt_epu8_mask(_mm512_loadu_si512((const void *)(bc + 64 * c)), k),
                                             hi[c], w);
        }
    }
    if (codes) {
        for (int c = 0; c < nch; ++c)
            _mm512_storeu_si512((void *)(out8 + i0 + 64 * c), lt_spread_if(spread, lt_codes512(codes, cells, lo[c], hi[c])));
        return;
    }
    if (out8) {  /* a table of at most 256 cells read directly: the index is its low byte */
        for (int c = 0; c < nch; ++c) _mm512_storeu_si512((void *)(out8 + i0 + 64 * c), lt_spread_if(spread, lo[c]));
        return;
    }
    /* in each 128-bit lane, unpack interleaves its first (then last) 8 rows; the permutes restore row order */
    const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (int c = 0; c < nch; ++c) {
        const __m512i a = _mm512_unpacklo_epi8(lo[c], hi[c]), b = _mm512_unpackhi_epi8(lo[c], hi[c]);
        _mm512_storeu_si512((void *)(idx + i0 + 64 * c), _mm512_permutex2var_epi64(a, first, b));
        _mm512_storeu_si512((void *)(idx + i0 + 64 * c + 32), _mm512_permutex2var_epi64(a, second, b));
    }
}

/* Whether tree t's index is a byte: every term's shift below 8 and at most 255 in all. */
static inline int lt_low_only(const lt_terms_of *q)
{
    for (int j = 0; j < q->n; ++j)
        if ((q->shift ? q->shift[j] : j) >= 8) return 0;
    return lt_low_sum(q) <= 255;
}

/* AVX-512 step 2 for a tree whose index is a byte (lt_low_only), nch (1-16) chunks of 64 rows from row
 * i0: per term one compare and one masked byte add per chunk, up to 1024 rows' indices in registers
 * across the terms. Out as lt_index512_chunks: codes to out8 (codes given), the index to out8, or
 * 16-bit indices to idx. */
static inline __attribute__((always_inline)) LT_TARGET_AVX512 void lt_lo512_chunks(
    const lt_terms_of *q, const LT_BIN_T *bins, int64_t stride, int i0, const int nch, const uint8_t *codes,
    int cells, uint16_t *idx, uint8_t *out8, int spread)
{
    __m512i lo[16];
    for (int c = 0; c < nch; ++c) lo[c] = _mm512_setzero_si512();
    for (int j = 0; j < q->n; ++j) {
        const LT_BIN_T *bc = bins + (int64_t)q->col[j] * stride + i0;
        const __m512i k = _mm512_set1_epi8((char)q->kb[j]);
        const __m512i w = _mm512_set1_epi8((char)(1 << (q->shift ? q->shift[j] : j)));
        for (int c = 0; c < nch; ++c)
            lo[c] = _mm512_mask_add_epi8(lo[c], _mm512_cmpgt_epu8_mask(_mm512_loadu_si512((const void *)(bc + 64 * c)), k),
                                         lo[c], w);
    }
    if (codes) {
        for (int c = 0; c < nch; ++c)
            _mm512_storeu_si512((void *)(out8 + i0 + 64 * c), lt_spread_if(spread, lt_codes512(codes, cells, lo[c], _mm512_setzero_si512())));
    } else if (out8) {
        for (int c = 0; c < nch; ++c) _mm512_storeu_si512((void *)(out8 + i0 + 64 * c), lt_spread_if(spread, lo[c]));
    } else {
        for (int c = 0; c < nch; ++c) {
            _mm512_storeu_si512((void *)(idx + i0 + 64 * c), _mm512_cvtepu8_epi16(_mm512_castsi512_si256(lo[c])));
            _mm512_storeu_si512((void *)(idx + i0 + 64 * c + 32), _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(lo[c], 1)));
        }
    }
}

/* lt_lo512_chunks over rows [0, lanes) (a multiple of 64): 16 chunks at a time, then 8, 4, 2, 1. */
LT_TARGET_AVX512 static void lt_lo512(const lt_terms_of *q, const LT_BIN_T *bins, int64_t stride, int lanes,
                                      const uint8_t *codes, int cells, uint16_t *idx, uint8_t *out8, int spread)
{
    int i = 0;
    for (; i + 1024 <= lanes; i += 1024) lt_lo512_chunks(q, bins, stride, i, 16, codes, cells, idx, out8, spread);
    const int r = (lanes - i) >> 6;
    if (r & 8) { lt_lo512_chunks(q, bins, stride, i, 8, codes, cells, idx, out8, spread); i += 512; }
    if (r & 4) { lt_lo512_chunks(q, bins, stride, i, 4, codes, cells, idx, out8, spread); i += 256; }
    if (r & 2) { lt_lo512_chunks(q, bins, stride, i, 2, codes, cells, idx, out8, spread); i += 128; }
    if (r & 1) lt_lo512_chunks(q, bins, stride, i, 1, codes, cells, idx, out8, spread);
}

/* Whether the AVX-512 path looks tree t's cell codes up in registers: a dictionary, byte bins, at most
 * 1024 cells and no carry out of the index's low byte. */
static inline int lt_byte_codes(const lt_model *M, int32_t t, const lt_terms_of *q)
{
    return sizeof(LT_BIN_T) == 1 && LT_DICT(M, t) && M->depth[t] <= 10 && lt_low_sum(q) <= 255;
}

/* Whether the AVX-512 path reads tree t's table (no dictionary) by its byte index: at most 256 cells (a
 * CatBoost tree of depth <= 8, a small table; from registers up to 32), byte bins. */
static inline int lt_byte_direct(const lt_model *M, int32_t t)
{
    return sizeof(LT_BIN_T) == 1 && !LT_DICT(M, t) && M->tree_output[t] >= 0
           && M->value_offset[t + 1] - M->value_offset[t] <= 256;
}

/* AVX-512 step 2 for a tree with byte codes: the rows' codes of rows [0, lanes) into out8. */
LT_TARGET_AVX512 static void lt_codes_avx512(const lt_model *M, int32_t t, const lt_terms_of *q, const LT_BIN_T *bins,
                                             int64_t stride, int lanes, uint8_t *out8, int spread)
{
    const uint8_t *codes = LT_DICT(M, t) ? M->cell_code + M->value_offset[t] : NULL;  /* NULL: the index */
    const int cells = (int)(M->value_offset[t + 1] - M->value_offset[t]);
    if (lt_low_only(q)) {
        lt_lo512(q, bins, stride, lanes, codes, cells, NULL, out8, spread);
        return;
    }
    int i = 0;
    for (; i + 256 <= lanes; i += 256) lt_index512_chunks(q, bins, stride, i, 4, codes, cells, NULL, out8, spread);
    switch ((lanes - i) >> 6) {
    case 3: lt_index512_chunks(q, bins, stride, i, 3, codes, cells, NULL, out8, spread); break;
    case 2: lt_index512_chunks(q, bins, stride, i, 2, codes, cells, NULL, out8, spread); break;
    case 1: lt_index512_chunks(q, bins, stride, i, 1, codes, cells, NULL, out8, spread); break;
    default: break;
    }
}

/* AVX-512 step 2: tree t's index of rows [0, lanes) (lanes a multiple of 64). */
LT_TARGET_AVX512 static void lt_index_avx512(const lt_terms_of *qp, const LT_BIN_T *bins, int64_t stride, int lanes,
                                             uint16_t *idx)
{
    const lt_terms_of q = *qp;
    if (sizeof(LT_BIN_T) == 1 && lt_low_only(&q)) {
        lt_lo512(&q, bins, stride, lanes, NULL, 0, idx, NULL, 0);
    } else if (sizeof(LT_BIN_T) == 1 && lt_low_sum(&q) <= 255) {
        int i = 0;
        for (; i + 256 <= lanes; i += 256) lt_index512_chunks(&q, bins, stride, i, 4, NULL, 0, idx, NULL, 0);
        switch ((lanes - i) >> 6) {
        case 3: lt_index512_chunks(&q, bins, stride, i, 3, NULL, 0, idx, NULL, 0); break;
        case 2: lt_index512_chunks(&q, bins, stride, i, 2, NULL, 0, idx, NULL, 0); break;
        case 1: lt_index512_chunks(&q, bins, stride, i, 1, NULL, 0, idx, NULL, 0); break;
        default: break;
        }
    } else if (sizeof(LT_BIN_T) == 1) {
        /* 16-bit sums: the mask's halves add 2^shift to two 32-lane registers */
        for (int i = 0; i < lanes; i += 64) {
            __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
            for (int j = 0; j < q.n; ++j) {
                const __m512i b = _mm512_loadu_si512((const void *)(bins + (int64_t)q.col[j] * stride + i));
                const __mmask64 gt = _mm512_cmpgt_epu8_mask(b, _mm512_set1_epi8((char)q.kb[j]));
                const __m512i w = _mm512_set1_epi16((short)(1 << (q.shift ? q.shift[j] : j)));
                a0 = _mm512_mask_add_epi16(a0, (__mmask32)gt, a0, w);
                a1 = _mm512_mask_add_epi16(a1, (__mmask32)(gt >> 32), a1, w);
            }
            _mm512_storeu_si512((void *)(idx + i), a0);
            _mm512_storeu_si512((void *)(idx + i + 32), a1);
        }
    } else {
        for (int i = 0; i < lanes; i += 32) {
            __m512i a = _mm512_setzero_si512();
            for (int j = 0; j < q.n; ++j) {
                const __m512i b = _mm512_loadu_si512((const void *)(bins + (int64_t)q.col[j] * stride + i));
                const __mmask32 gt = _mm512_cmpgt_epu16_mask(b, _mm512_set1_epi16((short)q.kb[j]));
                a = _mm512_mask_add_epi16(a, gt, a, _mm512_set1_epi16((short)(1 << (q.shift ? q.shift[j] : j))));
            }
            _mm512_storeu_si512((void *)(idx + i), a);
        }
    }
}

/* Eight rows' values of a tree whose r (1, 2 or 4) registers d0-d3 hold its distinct values, from the
 * rows' codes c (one per 64-bit lane; only the low 3, 4 or 5 bits are read). */
static inline __attribute__((always_inline)) LT_TARGET_AVX512 __m512d lt_look8(int r, __m512i c, __m512d d0,
                                                                               __m512d d1, __m512d d2, __m512d d3)
{
    if (r == 1) return _mm512_permutexvar_pd(c, d0);
    const __m512d v = _mm512_permutex2var_pd(d0, c, d1);
    if (r == 2) return v;
    /* code bit 4 picks the upper 16 */
    return _mm512_mask_blend_pd(_mm512_test_epi64_mask(c, _mm512_set1_epi64(16)), v, _mm512_permutex2var_pd(d2, c, d3));
}

/* What the AVX-512 kernels know of the trees of a group, set up once per group and super-block. */
typedef struct {
    lt_terms_of q[LT_GROUP];
    int byte[LT_GROUP];            /* the rows' byte codes (else 16-bit indices) */
    const double *tabs[LT_GROUP];  /* the values a code or index reads: the dictionary's or the table's */
    const uint8_t *codes[LT_GROUP];/* the cells' codes, or NULL */
    int regs[LT_GROUP];            /* 1, 2, 4: distinct values in registers; 0: gathered */
    __mmask8 dm[LT_GROUP][4];
    int spread;                    /* some tree's byte codes are spread (lt_spread8): the 64-row sums */
} lt_group512;

static void lt_group512_init(const lt_model *M, int32_t g0, int ng, lt_group512 *G)
{
    G->spread = 0;
    for (int j = 0; j < ng; ++j) {
        const int32_t t = g0 + j;
        G->q[j] = lt_tree_terms(M, t);
        G->byte[j] = lt_byte_codes(M, t, &G->q[j]) || lt_byte_direct(M, t);
        /* the values a byte reads: the dictionary's, or a small table's own (lt_byte_direct) */
        const int64_t nd = LT_DICT(M, t) ? M->dict_offset[t + 1] - M->dict_offset[t]
                           : G->byte[j] ? M->value_offset[t + 1] - M->value_offset[t] : 0;
        G->regs[j] = nd == 0 ? 0 : nd <= 8 ? 1 : nd <= 16 ? 2 : nd <= 32 ? 4 : 0;
        G->spread |= G->byte[j] && G->regs[j] != 0;
        for (int r = 0; r < 4; ++r) {
            const int64_t have = nd - 8 * r;
            G->dm[j][r] = (__mmask8)(have >= 8 ? 0xff : have <= 0 ? 0 : (1u << have) - 1);
        }
        if (LT_DICT(M, t)) {
            G->tabs[j] = M->dict_value + M->dict_offset[t];
            G->codes[j] = M->cell_code + M->value_offset[t];
        } else {
            G->tabs[j] = M->value + M->value_offset[t];
            G->codes[j] = NULL;
        }
    }
}

/* AVX-512 step 3 for the ng trees of group G, 32 rows per step (four registers of sums). Tree j's rows
 * come as byte codes (G->byte[j]: gcode[j]) or as 16-bit indices (gidx[j]); a tree whose distinct values
 * fit in 8, 16 or 32 doubles looks them up with register permutes (regs 1, 2, 4), any other gathers
 * them (from its dictionary by code, or from its table by index). */
LT_TARGET_AVX512 static void lt_sums32_avx512(const lt_group512 *G, int ng, uint16_t (*gidx)[LT_BLOCK],
                                            uint8_t (*gcode)[LT_BLOCK], double *acc, int m)
{
    const int *byte = G->byte, *regs = G->regs;
    const double *const *tabs = G->tabs;
    const uint8_t *const *codes = G->codes;
    for (int i = 0; i < m; i += 32) {
        __mmask8 k[4];
        __m512d s[4];
        for (int q = 0; q < 4; ++q) {
            const int left = m - i - 8 * q;
            k[q] = left >= 8 ? 0xff : left <= 0 ? 0 : (__mmask8)((1u << left) - 1);
            s[q] = _mm512_maskz_loadu_pd(k[q], acc + i + 8 * q);
        }
        for (int j = 0; j < ng; ++j) {
            __m512d v[4];
            __m512i c[4];
            const int r = regs[j];
            if (byte[j]) {
                if (r == 0) {  /* many distinct values: gather them from the dictionary or table */
                    for (int h = 0; h < 2; ++h) {
                        const __m512i g = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(gcode[j] + i + 16 * h)));
                        v[2 * h] = _mm512_i32gather_pd(_mm512_castsi512_si256(g), tabs[j], 8);
                        v[2 * h + 1] = _mm512_i32gather_pd(_mm512_extracti64x4_epi64(g, 1), tabs[j], 8);
                    }
                    goto add;
                }
                for (int q = 0; q < 4; ++q)
                    c[q] = _mm512_cvtepu8_epi64(_mm_loadl_epi64((const __m128i *)(gcode[j] + i + 8 * q)));
            } else {
                for (int h = 0; h < 2; ++h) {
                    const __m512i g = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(gidx[j] + i + 16 * h)));
                    if (r == 0 && codes[j] == NULL) {  /* no dictionary: gather from the table */
                        v[2 * h] = _mm512_i32gather_pd(_mm512_castsi512_si256(g), tabs[j], 8);
                        v[2 * h + 1] = _mm512_i32gather_pd(_mm512_extracti64x4_epi64(g, 1), tabs[j], 8);
                        continue;
                    }
                    /* each lane reads the 4 bytes at its cell's code: the code is the low byte (cell_code is padded) */
                    const __m512i cc = _mm512_and_si512(_mm512_i32gather_epi32(g, (const void *)codes[j], 1),
                                                        _mm512_set1_epi32(0xff));
                    if (r == 0) {
                        v[2 * h] = _mm512_i32gather_pd(_mm512_castsi512_si256(cc), tabs[j], 8);
                        v[2 * h + 1] = _mm512_i32gather_pd(_mm512_extracti64x4_epi64(cc, 1), tabs[j], 8);
                        continue;
                    }
                    c[2 * h] = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(cc));
                    c[2 * h + 1] = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(cc, 1));
                }
                if (r == 0) goto add;
            }
            {
                const __m512d d0 = _mm512_maskz_loadu_pd(G->dm[j][0], tabs[j]);
                const __m512d d1 = r >= 2 ? _mm512_maskz_loadu_pd(G->dm[j][1], tabs[j] + 8) : d0;
                const __m512d d2 = r == 4 ? _mm512_maskz_loadu_pd(G->dm[j][2], tabs[j] + 16) : d0;
                const __m512d d3 = r == 4 ? _mm512_maskz_loadu_pd(G->dm[j][3], tabs[j] + 24) : d0;
                for (int q = 0; q < 4; ++q) v[q] = lt_look8(r, c[q], d0, d1, d2, d3);
            }
        add:
            for (int q = 0; q < 4; ++q) s[q] = _mm512_add_pd(s[q], v[q]);
        }
        for (int q = 0; q < 4; ++q) _mm512_mask_storeu_pd(acc + i + 8 * q, k[q], s[q]);
    }
}

LT_TARGET_AVX512 static void lt_sums_avx512(const lt_group512 *G, int ng, uint16_t (*gidx)[LT_BLOCK],
                                            uint8_t (*gcode)[LT_BLOCK], double *acc, int m)
{
    const int *byte = G->byte, *regs = G->regs;
    const double *const *tabs = G->tabs;
    const uint8_t *const *codes = G->codes;
    for (int i = 0; i < m; i += 64) {
        __mmask8 k[8];
        __m512d s[8];
        for (int q = 0; q < 8; ++q) {
            const int left = m - i - 8 * q;
            k[q] = left >= 8 ? 0xff : left <= 0 ? 0 : (__mmask8)((1u << left) - 1);
            s[q] = _mm512_maskz_loadu_pd(k[q], acc + i + 8 * q);
        }
        for (int j = 0; j < ng; ++j) {
            const int r = regs[j];
            if (byte[j]) {  /* codes spread by lt_spread8: rows 8q..8q+7 are the low bytes after a shift by 8q */
                if (r == 0) {  /* many distinct values, codes in row order: gathered from the dictionary or table */
                    for (int h = 0; h < 4; ++h) {
                        const __m512i g = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(gcode[j] + i + 16 * h)));
                        s[2 * h] = _mm512_add_pd(s[2 * h], _mm512_i32gather_pd(_mm512_castsi512_si256(g), tabs[j], 8));
                        s[2 * h + 1] = _mm512_add_pd(s[2 * h + 1],
                                                     _mm512_i32gather_pd(_mm512_extracti64x4_epi64(g, 1), tabs[j], 8));
                    }
                    continue;
                }
                const __m512i cs = _mm512_loadu_si512((const void *)(gcode[j] + i));
                const __m512d d0 = _mm512_maskz_loadu_pd(G->dm[j][0], tabs[j]);
                const __m512d d1 = r >= 2 ? _mm512_maskz_loadu_pd(G->dm[j][1], tabs[j] + 8) : d0;
                const __m512d d2 = r == 4 ? _mm512_maskz_loadu_pd(G->dm[j][2], tabs[j] + 16) : d0;
                const __m512d d3 = r == 4 ? _mm512_maskz_loadu_pd(G->dm[j][3], tabs[j] + 24) : d0;
                /* lt_look8 reads only the low 3, 4 or 5 bits of a lane */
                for (int q = 0; q < 8; ++q)
                    s[q] = _mm512_add_pd(s[q], lt_look8(r, _mm512_srli_epi64(cs, 8 * q), d0, d1, d2, d3));
                continue;
            }
            for (int h = 0; h < 4; ++h) {  /* 16-bit indices, in row order */
                __m512d v[2];
                __m512i c[2];
                const __m512i g = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(gidx[j] + i + 16 * h)));
                if (r == 0 && codes[j] == NULL) {  /* no dictionary: gather from the table */
                    v[0] = _mm512_i32gather_pd(_mm512_castsi512_si256(g), tabs[j], 8);
                    v[1] = _mm512_i32gather_pd(_mm512_extracti64x4_epi64(g, 1), tabs[j], 8);
                } else {
                    /* each lane reads the 4 bytes at its cell's code: the code is the low byte (cell_code is padded) */
                    const __m512i cc = _mm512_and_si512(_mm512_i32gather_epi32(g, (const void *)codes[j], 1),
                                                        _mm512_set1_epi32(0xff));
                    if (r == 0) {
                        v[0] = _mm512_i32gather_pd(_mm512_castsi512_si256(cc), tabs[j], 8);
                        v[1] = _mm512_i32gather_pd(_mm512_extracti64x4_epi64(cc, 1), tabs[j], 8);
                    } else {
                        c[0] = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(cc));
                        c[1] = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(cc, 1));
                        const __m512d d0 = _mm512_maskz_loadu_pd(G->dm[j][0], tabs[j]);
                        const __m512d d1 = r >= 2 ? _mm512_maskz_loadu_pd(G->dm[j][1], tabs[j] + 8) : d0;
                        const __m512d d2 = r == 4 ? _mm512_maskz_loadu_pd(G->dm[j][2], tabs[j] + 16) : d0;
                        const __m512d d3 = r == 4 ? _mm512_maskz_loadu_pd(G->dm[j][3], tabs[j] + 24) : d0;
                        v[0] = lt_look8(r, c[0], d0, d1, d2, d3);
                        v[1] = lt_look8(r, c[1], d0, d1, d2, d3);
                    }
                }
                s[2 * h] = _mm512_add_pd(s[2 * h], v[0]);
                s[2 * h + 1] = _mm512_add_pd(s[2 * h + 1], v[1]);
            }
        }
        for (int q = 0; q < 8; ++q) _mm512_mask_storeu_pd(acc + i + 8 * q, k[q], s[q]);
    }
}

/* Trees [t0, t1) for rows [0, m) of a super-block (bins and acc point at its first row): per group of
 * trees, its setup once, then block by block its indices or codes and its sums. */
LT_TARGET_AVX512 static void lt_fused_avx512(const lt_model *M, int32_t t0, int32_t t1, const LT_BIN_T *bins,
                                             double *acc, int64_t stride, int64_t m)
{
    uint16_t gidx[LT_GROUP][LT_BLOCK];
    uint8_t gcode[LT_GROUP][LT_BLOCK];
    lt_group512 G;
    for (int32_t g0 = t0, ng; g0 < t1; g0 += ng) {
        ng = (int)(t1 - g0 < LT_GROUP ? t1 - g0 : LT_GROUP);
        lt_group512_init(M, g0, ng, &G);
        for (int64_t r = 0; r < m; r += LT_BLOCK) {
            const int mb = (int)(m - r < LT_BLOCK ? m - r : LT_BLOCK);
            const int lanes = (mb + 63) & ~63;
            for (int j = 0; j < ng; ++j) {
                if (G.byte[j]) lt_codes_avx512(M, g0 + j, &G.q[j], bins + r, stride, lanes, gcode[j], G.regs[j] != 0);
                else lt_index_avx512(&G.q[j], bins + r, stride, lanes, gidx[j]);
            }
            if (G.spread) lt_sums_avx512(&G, ng, gidx, gcode, acc + r, mb);
            else lt_sums32_avx512(&G, ng, gidx, gcode, acc + r, mb);
        }
    }
}
#endif

/* -- binarization by counting (the AVX2 and AVX-512 paths) ----------------------------------------
 *
 * A border column with 1-255 borders (byte bins) binarizes one row at a time by counting, in at most
 * two steps of 16 compares: its borders in blocks of 16 (the last padded with +inf, which no value
 * exceeds), and 16 splitters, the last border of each block but the last (padded with +inf). The
 * splitters below x are c1 (so every border of blocks 0..c1-1 is below x and none after block c1),
 * and the bin is 16 c1 plus the borders of block c1 below x: the count bin = #{b : b < x} exactly.
 * A column of at most 16 borders is one block and one step. Every row reads its value from the row
 * (no transpose) and no lane waits on a gather. */
#define LT_COUNT_MAX 255
static int lt_counts_init(const lt_model *M, lt_counts *cb)
{
    const int C = M->n_cols;
    cb->pad = NULL;
    cb->off = (int64_t *)malloc((size_t)(C > 0 ? C : 1) * sizeof(int64_t));
    cb->nblk = (int32_t *)malloc((size_t)(C > 0 ? C : 1) * sizeof(int32_t));
    if (!cb->off || !cb->nblk) return 0;
    int64_t total = 0;
    for (int32_t c = 0; c < C; ++c) {
        const int nb = (int)(M->border_offset[c + 1] - M->border_offset[c]);
        const int set = M->col_invalid_bin && M->col_invalid_bin[c] >= 0;
        if (set || nb < 1 || nb > LT_COUNT_MAX || sizeof(LT_BIN_T) != 1) {
            cb->off[c] = -1;
            cb->nblk[c] = 0;
            continue;
        }
        cb->nblk[c] = (nb + 15) / 16;
        cb->off[c] = total;
        total += 16 + 16 * (int64_t)cb->nblk[c];
    }
    cb->pad = (LT_IN_T *)malloc((size_t)(total > 0 ? total : 1) * sizeof(LT_IN_T));
    if (!cb->pad) return 0;
    for (int32_t c = 0; c < C; ++c) {
        if (cb->off[c] < 0) continue;
        const LT_IN_T *b = M->border + M->border_offset[c];
        const int nb = (int)(M->border_offset[c + 1] - M->border_offset[c]), K = cb->nblk[c];
        LT_IN_T *sp = cb->pad + cb->off[c], *blk = sp + 16;
        for (int q = 0; q < 16 * K; ++q) blk[q] = q < nb ? b[q] : (LT_IN_T)INFINITY;
        for (int k = 0; k < 16; ++k) sp[k] = k < K - 1 ? blk[16 * k + 15] : (LT_IN_T)INFINITY;
    }
    return 1;
}

static void lt_counts_free(lt_counts *cb)
{
    free(cb->pad);
    free(cb->off);
    free(cb->nblk);
}

/* Rows [0, m) of counted column c into out: CNT16(p, x) counts p[0..16) below x. */
#define LT_COUNT_ROWS(CNT16)                                                            \
    {                                                                                         \
        const LT_IN_T *sp = cb->pad + cb->off[c], *blk = sp + 16;                             \
        const LT_BIN_T nan_bin = (LT_BIN_T)M->col_nan_bin[c];                                 \
        const int32_t f = M->col_feature[c];                                                  \
        if (cb->nblk[c] == 1) {                                                               \
            for (int i = 0; i < m; ++i) {                                                     \
                const LT_IN_T x = X[(int64_t)i * F + f];                                      \
                const unsigned n = CNT16(blk, x);                                       \
                out[i] = x != x ? nan_bin : (LT_BIN_T)n;                                      \
            }                                                                                 \
        } else {                                                                              \
            for (int i = 0; i < m; ++i) {                                                     \
                const LT_IN_T x = X[(int64_t)i * F + f];                                      \
                const unsigned c1 = CNT16(sp, x);                                       \
                const unsigned n = 16 * c1 + CNT16(blk + 16 * c1, x);                   \
                out[i] = x != x ? nan_bin : (LT_BIN_T)n;                                      \
            }                                                                                 \
        }                                                                                     \
        for (int i = m; i < lanes; ++i) out[i] = 0;                                           \
    }

#ifdef LT_X86
static inline __attribute__((always_inline)) LT_TARGET_AVX2 unsigned lt_cnt16_256ps(const float *p, __m256 xv)
{
    const unsigned a = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p), xv, _CMP_LT_OQ));
    const unsigned b = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + 8), xv, _CMP_LT_OQ));
    return (unsigned)__builtin_popcount(a | b << 8);
}
static inline __attribute__((always_inline)) LT_TARGET_AVX2 unsigned lt_cnt16_256pd(const double *p, __m256d xv)
{
    unsigned m = 0;
    for (int h = 0; h < 4; ++h)
        m |= (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(p + 4 * h), xv, _CMP_LT_OQ)) << (4 * h);
    return (unsigned)__builtin_popcount(m);
}
static inline __attribute__((always_inline)) LT_TARGET_AVX512 unsigned lt_cnt16_512ps(const float *p, __m512 xv)
{
    return (unsigned)__builtin_popcount((unsigned)_mm512_cmp_ps_mask(_mm512_loadu_ps(p), xv, _CMP_LT_OQ));
}
static inline __attribute__((always_inline)) LT_TARGET_AVX512 unsigned lt_cnt16_512pd(const double *p, __m512d xv)
{
    const unsigned a = (unsigned)_mm512_cmp_pd_mask(_mm512_loadu_pd(p), xv, _CMP_LT_OQ);
    const unsigned b = (unsigned)_mm512_cmp_pd_mask(_mm512_loadu_pd(p + 8), xv, _CMP_LT_OQ);
    return (unsigned)__builtin_popcount(a | b << 8);
}
/* (sizeof picks the input type's version; the other is dead code) */
#define LT_CNT16_256(p, x)                                                                   \
    (sizeof(LT_IN_T) == 4 ? lt_cnt16_256ps((const float *)(const void *)(p), _mm256_set1_ps((float)(x)))        \
                          : lt_cnt16_256pd((const double *)(const void *)(p), _mm256_set1_pd((double)(x))))
#define LT_CNT16_512(p, x)                                                                   \
    (sizeof(LT_IN_T) == 4 ? lt_cnt16_512ps((const float *)(const void *)(p), _mm512_set1_ps((float)(x)))        \
                          : lt_cnt16_512pd((const double *)(const void *)(p), _mm512_set1_pd((double)(x))))
LT_TARGET_AVX2 static void lt_count_avx2(const lt_model *M, const lt_counts *cb, int32_t c, const LT_IN_T *X, int m,
                                         int lanes, LT_BIN_T *out)
{
    const int64_t F = LT_F(M);
    LT_COUNT_ROWS(LT_CNT16_256)
}
LT_TARGET_AVX512 static void lt_count_avx512(const lt_model *M, const lt_counts *cb, int32_t c, const LT_IN_T *X,
                                             int m, int lanes, LT_BIN_T *out)
{
    const int64_t F = LT_F(M);
    LT_COUNT_ROWS(LT_CNT16_512)
}
#endif

/* Step 1 on path isa: on AVX2 and AVX-512 the counted columns by counting, the others (and every
 * column of the portable path) by lt_binarize's searches. */
static void lt_binarize_path(const lt_model *M, const lt_counts *cb, int isa, const LT_IN_T *X, int m, int lanes,
                             LT_BIN_T *bins, int64_t stride)
{
#ifdef LT_X86
    if (isa == LT_ISA_AVX2 || isa == LT_ISA_AVX512) {
        lt_binarize(M, cb, X, m, lanes, bins, stride);
        for (int32_t c = 0; c < M->n_cols; ++c) {
            if (cb->off[c] < 0) continue;
            LT_BIN_T *out = bins + (int64_t)c * stride;
            if (isa == LT_ISA_AVX512) lt_count_avx512(M, cb, c, X, m, lanes, out);
            else lt_count_avx2(M, cb, c, X, m, lanes, out);
        }
        return;
    }
#else
    (void)cb; (void)isa;
#endif
    lt_binarize(M, NULL, X, m, lanes, bins, stride);
}

/* Bytes tree t's evaluation reads from its table: its cells' codes and distinct values, or its values. */
static int64_t lt_table_bytes(const lt_model *M, int32_t t)
{
    const int64_t cells = M->value_offset[t + 1] - M->value_offset[t];
    if (LT_DICT(M, t)) return cells + (M->dict_offset[t + 1] - M->dict_offset[t]) * (int64_t)sizeof(double);
    return cells * (int64_t)sizeof(double);
}

/* End of the chunk of trees starting at t0: tables up to LT_CHUNK_BYTES (at least one tree). */
static int32_t lt_chunk_end(const lt_model *M, int32_t t0)
{
    int64_t bytes = lt_table_bytes(M, t0);
    int32_t t = t0 + 1;
    while (t < M->n_trees && (bytes += lt_table_bytes(M, t)) <= LT_CHUNK_BYTES) ++t;
    return t;
}

/* Margins of rows X[0..m), m <= s->rows, into out (row-major m x K); leaf ids into leaf (m x T) if given. */
static void lt_super(const lt_model *M, const lt_counts *cb, int path, const LT_IN_T *X, int64_t m, double *out,
                     int32_t *leaf, int transform, int fused, lt_scratch *s)  /* fused: 0, or the fused kernels' path */
{
    const int K = LT_K(M);
    const int64_t R = s->rows;
    const int64_t F = LT_F(M);
    double *acc = s->acc;
    for (int64_t r = 0; r < m; r += LT_BLOCK) {
        const int mb = (int)(m - r < LT_BLOCK ? m - r : LT_BLOCK);
        lt_binarize_path(M, cb, path, X + r * F, mb, (mb + 63) & ~63, s->bins + r, R);
    }
    for (int k = 0; k < K; ++k)
        for (int64_t i = 0; i < m; ++i) acc[(int64_t)k * R + i] = M->base[k];
    for (int32_t t0 = 0; t0 < M->n_trees;) {
        const int32_t t1 = lt_chunk_end(M, t0);
#ifdef LT_X86
        if (fused == LT_ISA_AVX512) {
            lt_fused_avx512(M, t0, t1, s->bins, acc, R, m);
            t0 = t1;
            continue;
        }
#endif
        for (int64_t r = 0; r < m; r += LT_BLOCK) {
            const int mb = (int)(m - r < LT_BLOCK ? m - r : LT_BLOCK);
            if (fused == LT_ISA_PORTABLE)
                lt_fused_portable(M, t0, t1, s->bins + r, acc + r, R, mb);
#ifdef LT_X86
            else if (fused == LT_ISA_AVX2)
                lt_fused_avx2(M, t0, t1, s->bins + r, acc + r, R, mb);
#endif
            else
                lt_trees(M, t0, t1, s->bins + r, acc + r, R, mb, leaf ? leaf + r * M->n_trees : NULL, M->n_trees);
        }
        t0 = t1;
    }
    if (!out) return;
    for (int64_t i = 0; i < m; ++i) {
        double *o = out + i * K;
        for (int k = 0; k < K; ++k) {
            const double v = acc[(int64_t)k * R + i];
            o[k] = M->average ? v / M->divisor[k] : v;
        }
        if (transform) lt_transform(M, o);
    }
}

#ifdef LT_X86
/* AVX-512: the indices of trees [t0, t0 + nt) for one row whose byte bins are in bins (n_cols <= 128,
 * padded to 128): per tree, 16 terms at a time, its columns' bins picked from two registers by a byte
 * permute, compared with its bins under a mask, and the weights 2^shift of the true ones summed. */
LT_TARGET_AVX512 static void lt_row_index_avx512(const lt_model *M, int32_t t0, int32_t nt, const uint8_t *bins,
                                                 uint32_t *idx)
{
    const __m512i b0 = _mm512_loadu_si512((const void *)bins), b1 = _mm512_loadu_si512((const void *)(bins + 64));
    const __m512i one = _mm512_set1_epi32(1), pos = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int32_t u = 0; u < nt; ++u) {
        const lt_terms_of q = lt_tree_terms(M, t0 + u);
        uint32_t i = 0;
        for (int j = 0; j < q.n; j += 16) {
            const int left = q.n - j;
            const __mmask16 nm = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
            const __m128i cols = _mm512_cvtepi32_epi8(_mm512_maskz_loadu_epi32(nm, q.col + j));
            const __m128i got = _mm512_castsi512_si128(
                _mm512_permutex2var_epi8(b0, _mm512_castsi128_si512(cols), b1));
            const __m128i kb = _mm_maskz_loadu_epi8(nm, (const void *)(q.kb + j));
            const __mmask16 gt = _mm_mask_cmpgt_epu8_mask(nm, got, kb);
            const __m512i sh = q.shift ? _mm512_maskz_loadu_epi32(nm, q.shift + j)
                                       : _mm512_add_epi32(pos, _mm512_set1_epi32(j));
            i += (uint32_t)_mm512_reduce_add_epi32(_mm512_maskz_sllv_epi32(gt, one, sh));
        }
        idx[u] = i;
    }
}
#endif

#ifdef LT_X86
/* AVX-512: the indices of the (up to) 64 trees of group g of the one-row layout (row_off, row_vec) for
 * one row whose byte bins are in bins (padded to 128): per slot one byte permute picks every
 * tree's column's bin, one compare with the trees' bins, and two masked byte adds of their weights to
 * the indices' low and high bytes. */
LT_TARGET_AVX512 static void lt_row_group_avx512(const lt_model *M, int64_t g, const uint8_t *bins, uint32_t *idx)
{
    const __m512i b0 = _mm512_loadu_si512((const void *)bins), b1 = _mm512_loadu_si512((const void *)(bins + 64));
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    const uint8_t *v = M->row_vec + M->row_off[g] * 256;
    for (int64_t j = M->row_off[g]; j < M->row_off[g + 1]; ++j, v += 256) {
        const __m512i got = _mm512_permutex2var_epi8(b0, _mm512_loadu_si512((const void *)v), b1);
        const __mmask64 gt = _mm512_cmpgt_epu8_mask(got, _mm512_loadu_si512((const void *)(v + 64)));
        lo = _mm512_mask_add_epi8(lo, gt, lo, _mm512_loadu_si512((const void *)(v + 128)));
        hi = _mm512_mask_add_epi8(hi, gt, hi, _mm512_loadu_si512((const void *)(v + 192)));
    }
    for (int q = 0; q < 4; ++q) {
        const __m512i l = _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(lo, q));
        const __m512i h = _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(hi, q));
        _mm512_storeu_si512((void *)(idx + 16 * q), _mm512_or_si512(l, _mm512_slli_epi32(h, 8)));
    }
}
#endif

/* One row, no vector lanes and no threads: the low-latency path (same sums in the same order). */
static int lt_row(const lt_model *M, const LT_IN_T *x, double *out, int32_t *leaf, int transform, int path)
{
    LT_BIN_T small[1024];
    LT_BIN_T *bins = M->n_cols <= 1024 ? small : (LT_BIN_T *)malloc((size_t)M->n_cols * sizeof(LT_BIN_T));
    const int K = LT_K(M);
    double acc[64];
    double *a = K <= 64 ? acc : (double *)malloc((size_t)K * sizeof(double));
    if (bins == NULL || a == NULL) {
        if (bins != small) free(bins);
        if (a != acc) free(a);
        return -1;
    }
    for (int32_t c = 0; c < M->n_cols; ++c) {
        const LT_IN_T v = x[M->col_feature[c]];
        const LT_IN_T *b = M->border + M->border_offset[c];
        int lo = 0, hi = (int)(M->border_offset[c + 1] - M->border_offset[c]);
        while (lo < hi) {  /* number of borders below v */
            const int mid = (lo + hi) >> 1;
            if (b[mid] < v) lo = mid + 1; else hi = mid;
        }
        bins[c] = (v != v) ? (LT_BIN_T)M->col_nan_bin[c]
                  : (M->col_invalid_bin && M->col_invalid_bin[c] >= 0) ? lt_set_bin(M, c, v) : (LT_BIN_T)lo;
    }
    for (int k = 0; k < K; ++k) a[k] = M->base[k];
    /* trees in chunks: every index of a chunk first (compute only), then its table reads, which then
     * overlap (the reads, not the index arithmetic, bound a row through thousands of tables) */
    uint32_t idx[256];
#ifdef LT_X86
    uint8_t bins128[128];
    const int vec = path == LT_ISA_AVX512 && sizeof(LT_BIN_T) == 1 && M->n_cols <= 128;
    if (vec) {
        memset(bins128, 0, sizeof bins128);
        memcpy(bins128, bins, (size_t)M->n_cols);
    }
#else
    (void)path;
#endif
    for (int32_t t0 = 0; t0 < M->n_trees; t0 += 256) {
        const int32_t nt = M->n_trees - t0 < 256 ? M->n_trees - t0 : 256;
#ifdef LT_X86
        if (vec && M->row_off)
            for (int32_t u = 0; u < nt; u += 64) lt_row_group_avx512(M, (t0 + u) / 64, bins128, idx + u);
        else if (vec) lt_row_index_avx512(M, t0, nt, bins128, idx);
        else
#endif
        for (int32_t u = 0; u < nt; ++u) {
            const lt_terms_of q = lt_tree_terms(M, t0 + u);
            uint32_t i = 0;
            if (q.shift)
                for (int j = 0; j < q.n; ++j) i += (uint32_t)(bins[q.col[j]] > q.kb[j]) << q.shift[j];
            else
                for (int j = 0; j < q.n; ++j) i |= (uint32_t)(bins[q.col[j]] > q.kb[j]) << j;
            idx[u] = i;
        }
        for (int32_t u = 0; u < nt; ++u) {
            const int32_t t = t0 + u;
            const int32_t k = M->tree_output[t];
            if (k >= 0 && LT_DICT(M, t)) {
                a[k] += M->dict_value[M->dict_offset[t] + M->cell_code[M->value_offset[t] + idx[u]]];
            } else {
                const double *tab = M->value + M->value_offset[t];
                if (k >= 0) a[k] += tab[idx[u]];
                else for (int j = 0; j < K; ++j) a[j] += tab[(int64_t)idx[u] * K + j];
            }
            if (leaf) leaf[t] = (int32_t)idx[u];
        }
    }
    if (out) {
        for (int k = 0; k < K; ++k) out[k] = M->average ? a[k] / M->divisor[k] : a[k];
        if (transform) lt_transform(M, out);
    }
    if (bins != small) free(bins);
    if (a != acc) free(a);
    return 0;
}

/* All rows, super-blocks shared among threads, the fused kernels on path isa (LT_ISA_*); returns 0,
 * -1 when scratch memory ran out, or -2 when this CPU lacks the requested path. */
static int lt_run(const lt_model *M, const LT_IN_T *rows, int64_t n, double *out, int32_t *leaf, int32_t threads,
                  int transform, int isa)
{
    const int path = lt_isa_resolve(isa);
    if (path < 0) return -2;
    if (n == 1) return lt_row(M, rows, out, leaf, transform, path);
    int64_t R = lt_super_rows(M);
    if (n < R) R = (n + LT_BLOCK - 1) / LT_BLOCK * LT_BLOCK;
    if (R < LT_BLOCK) R = LT_BLOCK;
    const int64_t nsuper = (n + R - 1) / R;
    const int64_t F = LT_F(M);
    const int K = LT_K(M);
    int failed = 0;
    /* the fused kernels: one output, no leaf ids, depth <= 16 */
    int fused = K == 1 && leaf == NULL ? path : 0;
    for (int32_t t = 0; t < M->n_trees && fused; ++t)
        if (M->tree_output[t] != 0 || M->depth[t] > 16) fused = 0;
    lt_counts cb;
    if (!lt_counts_init(M, &cb)) {
        lt_counts_free(&cb);
        return -1;
    }
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads > 1 ? threads : 1) reduction(| : failed)
#endif
    {
        lt_scratch s;
        if (!lt_scratch_init(M, &s, R)) {
            failed = 1;
        } else {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t b = 0; b < nsuper; ++b) {
                const int64_t r0 = b * R;
                const int64_t m = n - r0 < R ? n - r0 : R;
                lt_super(M, &cb, path, rows + r0 * F, m, out ? out + r0 * K : NULL, leaf ? leaf + r0 * M->n_trees : NULL,
                         transform, fused, &s);
            }
        }
        lt_scratch_free(&s);
    }
    lt_counts_free(&cb);
    return failed ? -1 : 0;
}
