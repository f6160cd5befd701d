/* lumber oblivious-table evaluator (shipped with lumber; emitted code includes it verbatim).
 *
 * A model is an lt_model (below): binarized columns with sorted borders, and per
 * tree its levels (column, bin) and a table of 2^depth rows. Rows are evaluated
 * in super-blocks (a few thousand rows, so their bins fit in L2):
 *   1. binarize: every column once per row, bin = #{borders b : x > b} (NaN: the
 *      column's NaN bin), stored column-major as LT_BIN_T so step 2 reads
 *      contiguous small integers; a set column (category level) gets 1 when the
 *      value's category code (the model's category rule) is one of its borders,
 *      0 for another valid code and col_invalid_bin for an invalid value;
 *   2. per tree: leaf index = OR over levels of (bin > level_bin) << level, for
 *      LT_BLOCK rows at once (one vector compare per level and 32 rows with AVX2);
 *      a tree with bin levels sums *terms* instead: its index is sum_j (bin[col_j] > g_j) << shift_j,
 *      one term per plain level (shift = the level) and one per border of a bin group (all with
 *      the group's first level as shift: together they add the group's code);
 *   3. per tree: add table[index] to the row's sums.
 * Trees go in chunks whose tables fit in L2 (LT_CHUNK_BYTES); a chunk is swept over
 * the whole super-block before the next, so big ensembles do not stream their
 * tables once per LT_BLOCK rows. Every row still adds trees in order from the base
 * score, so results equal the numpy evaluator bit for bit. Super-blocks are
 * independent: OpenMP threads take them (when built with -fopenmp).
 *
 * Configuration macros (set by the includer):
 *   LT_IN_T   float or double: the model's input type (borders are values of it)
 *   LT_BIN_T  uint8_t or uint16_t: bins (borders per column must fit)
 *   LT_BLOCK  rows per vector step block (a multiple of 32)
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

/* Step 1: bins of rows X[0..m), m <= lanes <= LT_BLOCK, for every column into bins[c * stride + i]
 * (lanes, a multiple of 32, is how many rows the vector loops cover: m rounded up). */
LT_HOT static void lt_binarize(const lt_model *M, const LT_IN_T *X, int m, int lanes, LT_BIN_T *bins, int64_t stride)
{
    LT_IN_T xs[LT_BLOCK];
    int32_t pos[LT_BLOCK];
    double code[LT_BLOCK];
    int32_t code_f = -1;  /* feature whose codes are in code[] */
    const int64_t F = LT_F(M);
    for (int32_t c = 0; c < M->n_cols; ++c) {
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

#define LT_GROUP 16
/* Eight rows at a time, eight independent chains of additions over the ng trees of a group:
 * VALUE(j, c) is tree j's value of cell c. */
#define LT_GROUP_SUMS(VALUE)                                                                  \
    for (; i + 8 <= m; i += 8) {                                                              \
        double s0 = acc[i], s1 = acc[i + 1], s2 = acc[i + 2], s3 = acc[i + 3];                \
        double s4 = acc[i + 4], s5 = acc[i + 5], s6 = acc[i + 6], s7 = acc[i + 7];            \
        for (int j = 0; j < ng; ++j) {                                                        \
            const IDX_T_ *g = gidx[j] + i;                                                    \
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
/* Single-output models, trees of depth <= 16: the indices of a group of up to LT_GROUP trees are
 * computed first, then each row adds their values in a register (no load/store of the sum per tree).
 * A group is a run of trees of one kind: all with dictionaries (a byte code per cell, then the
 * tree's few distinct values: a d10 tree reads 1 KiB of codes instead of 8 KiB of doubles, so a
 * group's tables stay in L1) or all without. Two widths: byte indices when every tree has depth
 * <= 8, else 16-bit ones. */
#define LT_FUSED_FN(NAME, IDX_T, INDEX)                                                       \
    LT_HOT static void NAME(const lt_model *M, int32_t t0, int32_t t1, const LT_BIN_T *bins, double *acc, \
                            int64_t stride, int m)                                            \
    {                                                                                         \
        typedef IDX_T IDX_T_;                                                                 \
        IDX_T gidx[LT_GROUP][LT_BLOCK];                                                       \
        const double *tabs[LT_GROUP];                                                         \
        const uint8_t *codes[LT_GROUP];                                                       \
        const int lanes = (m + 31) & ~31;                                                     \
        for (int32_t g0 = t0, ng; g0 < t1; g0 += ng) {                                        \
            const int dict = LT_DICT(M, g0);                                                  \
            ng = 1;                                                                           \
            while (ng < LT_GROUP && g0 + ng < t1 && LT_DICT(M, g0 + ng) == dict) ++ng;        \
            for (int j = 0; j < ng; ++j) {                                                    \
                const int32_t t = g0 + j;                                                     \
                if (dict) {                                                                   \
                    tabs[j] = M->dict_value + M->dict_offset[t];                              \
                    codes[j] = M->cell_code + M->value_offset[t];                             \
                } else {                                                                      \
                    tabs[j] = M->value + M->value_offset[t];                                  \
                }                                                                             \
                INDEX(M, t, M->depth[t], bins, stride, lanes, gidx[j]);                       \
            }                                                                                 \
            int i = 0;                                                                        \
            if (dict) {                                                                       \
                LT_GROUP_SUMS(LT_DICT_VALUE)                                                  \
            } else {                                                                          \
                LT_GROUP_SUMS(LT_TABLE_VALUE)                                                 \
            }                                                                                 \
        }                                                                                     \
    }

/* Index of a tree of any depth <= 16 as 16-bit values. */
static void lt_index_wide(const lt_model *M, int32_t t, int d, const LT_BIN_T *bins, int64_t stride, int lanes,
                          uint16_t *idx)
{
    if (d <= 8) {
        uint8_t idx8[LT_BLOCK];
        lt_index_small(M, t, d, bins, stride, lanes, idx8);
        for (int i = 0; i < lanes; ++i) idx[i] = idx8[i];
    } else {
        lt_index_mid(M, t, d, bins, stride, lanes, idx);
    }
}
LT_FUSED_FN(lt_trees_fused8, uint8_t, lt_index_small)
LT_FUSED_FN(lt_trees_fused16, uint16_t, lt_index_wide)

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
static void lt_super(const lt_model *M, const LT_IN_T *X, int64_t m, double *out, int32_t *leaf, int transform,
                     int fused, lt_scratch *s)
{
    const int K = LT_K(M);
    const int64_t R = s->rows;
    const int64_t F = LT_F(M);
    double *acc = s->acc;
    for (int64_t r = 0; r < m; r += LT_BLOCK) {
        const int mb = (int)(m - r < LT_BLOCK ? m - r : LT_BLOCK);
        lt_binarize(M, X + r * F, mb, (mb + 31) & ~31, s->bins + r, R);
    }
    for (int k = 0; k < K; ++k)
        for (int64_t i = 0; i < m; ++i) acc[(int64_t)k * R + i] = M->base[k];
    for (int32_t t0 = 0; t0 < M->n_trees;) {
        const int32_t t1 = lt_chunk_end(M, t0);
        for (int64_t r = 0; r < m; r += LT_BLOCK) {
            const int mb = (int)(m - r < LT_BLOCK ? m - r : LT_BLOCK);
            if (fused == 8)
                lt_trees_fused8(M, t0, t1, s->bins + r, acc + r, R, mb);
            else if (fused == 16)
                lt_trees_fused16(M, t0, t1, s->bins + r, acc + r, R, mb);
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

/* One row, no vector lanes and no threads: the low-latency path (same sums in the same order). */
static int lt_row(const lt_model *M, const LT_IN_T *x, double *out, int32_t *leaf, int transform)
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
    for (int32_t t = 0; t < M->n_trees; ++t) {
        const int64_t lo = M->level_offset[t];
        const int d = M->depth[t];
        uint32_t idx = 0;
        if (LT_CODED(M, t)) {
            for (int64_t j = M->term_offset[t]; j < M->term_offset[t + 1]; ++j)
                idx += (uint32_t)(bins[M->term_col[j]] > M->term_bin[j]) << M->term_shift[j];
        } else {
            for (int l = 0; l < d; ++l) idx |= (uint32_t)(bins[M->level_col[lo + l]] > M->level_bin[lo + l]) << l;
        }
        const double *tab = M->value + M->value_offset[t];
        const int32_t k = M->tree_output[t];
        if (k >= 0) a[k] += tab[idx];
        else for (int j = 0; j < K; ++j) a[j] += tab[(int64_t)idx * K + j];
        if (leaf) leaf[t] = (int32_t)idx;
    }
    if (out) {
        for (int k = 0; k < K; ++k) out[k] = M->average ? a[k] / M->divisor[k] : a[k];
        if (transform) lt_transform(M, out);
    }
    if (bins != small) free(bins);
    if (a != acc) free(a);
    return 0;
}

/* All rows, super-blocks shared among threads; returns 0, or -1 when scratch memory ran out. */
static int lt_run(const lt_model *M, const LT_IN_T *rows, int64_t n, double *out, int32_t *leaf, int32_t threads,
                  int transform)
{
    if (n == 1) return lt_row(M, rows, out, leaf, transform);
    int64_t R = lt_super_rows(M);
    if (n < R) R = (n + LT_BLOCK - 1) / LT_BLOCK * LT_BLOCK;
    if (R < LT_BLOCK) R = LT_BLOCK;
    const int64_t nsuper = (n + R - 1) / R;
    const int64_t F = LT_F(M);
    const int K = LT_K(M);
    int failed = 0;
    /* the fused paths: one output, no leaf ids, depth <= 8 (byte indices) or <= 16 */
    int fused = K == 1 && leaf == NULL ? 8 : 0;
    for (int32_t t = 0; t < M->n_trees && fused; ++t) {
        if (M->tree_output[t] != 0 || M->depth[t] > 16) fused = 0;
        else if (M->depth[t] > 8) fused = 16;
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
                lt_super(M, rows + r0 * F, m, out ? out + r0 * K : NULL, leaf ? leaf + r0 * M->n_trees : NULL,
                         transform, fused, &s);
            }
        }
        lt_scratch_free(&s);
    }
    return failed ? -1 : 0;
}
