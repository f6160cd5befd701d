/* lumber C runtime: walks the tree tables emitted above it (generated file; do not edit).
 *
 * Tables (emitted by lumber/backends/c/emit.py):
 *   L_NODES[s]   {thr, feat, child}: one slot per node. Siblings are adjacent, so the
 *                next slot is child + (went right). A leaf is a self loop (child == s)
 *                with thr = NaN, so walking it any number of steps stays put.
 *   L_FLAGS[s]   bit 0 missing goes left, 1 missing_zero, 2 categorical, 3 members go
 *                left, 4 invalid categories go left, 5 small category set (L_CATMASK).
 *   L_TREES[t]   root slot, output column (-1: vector leaves), steps, walk mode (fixed
 *                steps, or steps then until all rows sit on leaves, or code), plus a flag
 *                for trees with special (categorical or zero-as-missing) nodes.
 *
 * Batches are cut into blocks of rows walked tree by tree. A special node does not
 * branch in the walk: before a tree is walked, the direction of each of its special
 * nodes is computed for every row of the block into an extra column of a copy of the
 * rows (0 = left, 1 = right), and the node reads that column against threshold 0.5.
 * Binned walks (LUMBER_BINNED): each block of rows is first coded as small integers, per
 * feature the number of the model's thresholds below the value (L_BIN_VAL, searched without
 * branches); a node tests code > k for its k-th threshold, which routes exactly as value > t_k.
 * Codes take 1 or 2 bytes, so a block's rows stay in L1 cache while the trees are walked.
 * Each feature has two code columns: NaN is 0 in the first (every test sends it left) and
 * the threshold count in the second (every test sends it right); a node reads the column of
 * its missing direction, so the walk has no NaN test (L_WNODES). With LUMBER_GLOBAL_DEC the
 * decision columns are shared: one per distinct special test of the model (L_DEC_SLOT), filled
 * once per block as it starts, so special trees need no pass of their own.
 * Single rows (LUMBER_ROW_WALK) take the binned walk on their codes, sixteen trees at a time.
 * Code walks (LUMBER_WALK_CODE, binned): trees are if/else code comparing the rows' codes with
 * their threshold ranks as constants, CODE_BLOCK_TREES trees per function (L_CODE_FN); a block of
 * rows goes through one function's trees, row by row, before the next. The tables stay for apply.
 * Sums start from the base score and add trees in order, in LUMBER_ACC_T, so margins
 * equal the reference evaluator bit for bit.
 * predict_rows also takes double rows for a float model: each block is rounded to float as it
 * starts (what numpy's astype does), and the values the model refuses are checked there, so a
 * threaded batch has no serial conversion or check in front of it.
 */

#include <stdlib.h>
#include <string.h>

#define LUMBER_MODE_FIXED 0
#define LUMBER_MODE_CONVERGE 1
#define LUMBER_MODE_CODE 3
#define LUMBER_MODE_SPECIAL 4

#define L_FLAG_FASTCAT 32u

#define L_F ((int64_t)LUMBER_N_FEATURES)
#define L_XS ((int64_t)LUMBER_ROW_STRIDE) /* row stride of what the walk reads (features + decision columns) */
#define L_K LUMBER_N_OUTPUTS
#define L_IS_LEAF(s) (L_NODES[(s)].child == (s))

/* One step for data without NaN: right iff x > thr. */
#define L_STEP(n, x) do { const lumber_node *nd_ = L_NODES + (n); \
    (n) = (int64_t)nd_->child + ((x)[nd_->feat] > nd_->thr); } while (0)
/* One step when the data may hold NaN: NaN goes right unless the node sends it left. */
#define L_STEP_NAN(n, x) do { const lumber_node *nd_ = L_NODES + (n); const LUMBER_IN_T v_ = (x)[nd_->feat]; \
    (n) = (int64_t)nd_->child + ((v_ > nd_->thr) | ((v_ != v_) & ~L_FLAGS[(n)] & 1)); } while (0)

#define L_REP8(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define L_REP16(M) L_REP8(M) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#define L_REP10(M) L_REP8(M) M(8) M(9)
#if LUMBER_BINNED
#define L_GROUP 10 /* rows a binned walk advances together (L_REP10) */
#define L_BLOCK_ROWS ((LUMBER_BLOCK + L_GROUP - 1) / L_GROUP * L_GROUP) /* a block's rows, padded to groups */
#else
#define L_BLOCK_ROWS LUMBER_BLOCK
#endif

/* A pointer the compiler must treat as unknown (its loads stay indexed loads). */
#if defined(__GNUC__) || defined(__clang__)
#define L_OPAQUE(p) __asm__("" : "+r"(p))
#else
#define L_OPAQUE(p) ((void)0)
#endif

#if LUMBER_BINNED
typedef LUMBER_WALK_T lumber_wv;   /* what the walk reads: threshold codes */
#define L_WXS ((int64_t)LUMBER_WALK_STRIDE)
#define L_DEC0 (2 * L_F)           /* first decision column */
/* The node table's address in a register (wn_): position-independent code would recompute it per step. */
#if defined(__GNUC__) || defined(__clang__)
#define L_WN_DECL const lumber_wnode *wn_ = L_WNODES; __asm__("" : "+r"(wn_));
#else
#define L_WN_DECL const lumber_wnode *wn_ = L_WNODES;
#endif
/* One step on codes: right iff code > the node's threshold code (never NaN); the code is read
 * d bytes after x. On x86-64 with GNU C the step is written out, because compilers turn the
 * compare into setb + zero extension + add instead of one add-with-carry, and load threshold and
 * child separately: here it is three loads (node, column, code), a shift, a compare and an adc. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && defined(__BYTE_ORDER__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && !defined(LUMBER_PORTABLE_STEP)
#define L_XLOAD_(bytes) L_XLOAD_##bytes
#define L_XLOAD_1 "movzbl %c[d](%[x],%[c],1), %k[c]\n\t"
#define L_XLOAD_2 "movzwl %c[d](%[x],%[c],2), %k[c]\n\t"
#define L_XLOAD(bytes) L_XLOAD_(bytes)
#define L_WSTEP_AT(N_, X_, D_) do { uint64_t a_, c_; __asm__( \
    "movq (%[b],%[n],8), %[a]\n\t" \
    "movzwl 2(%[b],%[n],8), %k[c]\n\t" \
    L_XLOAD(LUMBER_WALK_BYTES) \
    "movq %[a], %[n]\n\t" \
    "sarq $32, %[n]\n\t" \
    "cmpw %w[c], %w[a]\n\t" \
    "adcq $0, %[n]" \
    : [n] "+r"(N_), [a] "=&r"(a_), [c] "=&r"(c_) : [b] "r"(wn_), [x] "r"(X_), [d] "i"(D_) : "cc", "memory"); \
    } while (0)
#else
#define L_WSTEP_AT(n, x, d) do { const lumber_wnode *nd_ = wn_ + (n); \
    (n) = (int64_t)nd_->f.child + ((x)[(d) / (int64_t)sizeof(lumber_wv) + nd_->f.col] > nd_->f.thr); } while (0)
#endif
#define L_WSTEP(n, x) L_WSTEP_AT(n, x, 0)
#else
typedef LUMBER_IN_T lumber_wv;
#define L_WXS L_XS
#define L_DEC0 L_F
#define L_WSTEP L_STEP
#define L_WN_DECL
#endif

#if LUMBER_HAS_CAT
/* Category code of a non-NaN value under the source library's rule; -1 when invalid. */
static inline int64_t lumber_category(double x)
{
#if LUMBER_RULE == 0
    /* LightGBM: truncate toward zero; negative (after truncation), >= 2^31 or inf is invalid. */
    if (!(x > -1.0 && x < 2147483648.0)) return -1;
#elif LUMBER_RULE == 1
    /* XGBoost: negative or >= 2^24 is invalid. */
    if (!(x >= 0.0 && x < 16777216.0)) return -1;
#elif LUMBER_RULE == 2
    /* scikit-learn: only exact integer codes in [0, 2^32) are categories (0.5 is invalid). */
    if (!(x >= 0.0 && x < 4294967296.0) || (double)(int64_t)x != x) return -1;
#else
    /* treelite: negative or >= 2^32 is invalid. */
    if (!(x >= 0.0 && x < 4294967296.0)) return -1;
#endif
    return (int64_t)x;
}

static inline int lumber_member(int32_t s, int64_t code)
{
    const lumber_catset *c = L_CAT_DESC + L_CAT_REF[s];
    if (c->is_list) {
#if LUMBER_HAS_CAT_LIST
        uint32_t lo = c->offset, hi = c->offset + c->size;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if ((int64_t)L_CAT_LIST[mid] < code) lo = mid + 1; else hi = mid;
        }
        return lo < c->offset + c->size && (int64_t)L_CAT_LIST[lo] == code;
#else
        return 0;
#endif
    }
    if (code >= (int64_t)c->size * 32) return 0;
    return (int)((L_CAT_WORDS[c->offset + (uint32_t)(code >> 5)] >> (code & 31)) & 1u);
}
#endif

#if LUMBER_HAS_SPECIAL
/* Full semantics of special node s (q-th special node overall): the reference's go_left. */
static inline int lumber_go_left_special(int32_t s, int32_t q, LUMBER_IN_T v)
{
    const unsigned f = L_FLAGS[s];
    if (v != v) return (int)(f & 1u);
    if ((f & 2u) && fabs((double)v) <= LUMBER_ZERO_THRESHOLD) return (int)(f & 1u);
#if LUMBER_HAS_CAT
    if (f & 4u) {
        const int64_t code = lumber_category((double)v);
        if (code < 0) return (int)((f >> 4) & 1u);
        return lumber_member(s, code) ? (int)((f >> 3) & 1u) : (int)(((f >> 3) & 1u) ^ 1u);
    }
#endif
    return v <= L_SPECIAL_THR[q];
}

/* One row of the user's data through tree t, node by node (single rows of special trees). */
static inline int32_t lumber_walk_general(int32_t t, const LUMBER_IN_T *x)
{
    int64_t s = L_TREES[t].root;
    while (!L_IS_LEAF(s)) {
        const lumber_node *nd = L_NODES + s;
        if (nd->feat >= L_F) {
            const int32_t q = L_SPECIAL_OFF[t] + (nd->feat - (int32_t)L_F);
            s = (int64_t)nd->child + !lumber_go_left_special((int32_t)s, q, x[L_SPECIAL_FEAT[q]]);
        } else {
            L_STEP_NAN(s, x);
        }
    }
    return (int32_t)s;
}
#endif

/* One row (of what the walk reads) through a tree: branch-free steps until a leaf. */
static inline int32_t lumber_walk_one(int32_t root, const LUMBER_IN_T *x)
{
    int64_t s = root;
    while (!L_IS_LEAF(s)) L_STEP_NAN(s, x);
    return (int32_t)s;
}

/* Row j of the group is xb + j * L_XS: a constant offset, so no register per row pointer. */
#define L_DECL(j) int64_t n##j = root;
#if LUMBER_BINNED
#define L_PLAIN(j) L_WSTEP_AT(n##j, xb, (j) * L_WXS * (int64_t)sizeof(lumber_wv));
#else
#define L_PLAIN(j) L_WSTEP(n##j, xb + j * L_WXS);
#endif
#define L_NAN(j) L_STEP_NAN(n##j, xb + j * L_XS);
#define L_NOTLEAF(j) !L_IS_LEAF(n##j) ||
#define L_STORE(j) leaf[i + j] = (int32_t)n##j;
#define L_ADD(j) a[(int64_t)(i + j) * L_K] += L_LEAF_VALUE[n##j];

/* G rows advance together, one level per step, so their loads overlap; a fixed-steps
 * tree has no branch that depends on the data. END is the last row a group may start below:
 * m - G + 1 for whole groups, or m when the block is padded to whole groups (L_BLOCK_ROWS). */
#define L_WALK_GROUPS(G, REP, STEP, XS) L_WALK_GROUPS_TO(G, REP, STEP, XS, L_STORE, m - G + 1)
#define L_WALK_GROUPS_TO(G, REP, STEP, XS, STORE, END) \
    for (; i < (END); i += G) { \
        const lumber_wv *xb = W + (int64_t)i * XS; \
        REP(L_DECL) \
        for (int s = 0; s < steps; ++s) { REP(STEP) } \
        if (converge) while (REP(L_NOTLEAF) 0) { REP(STEP) } \
        REP(STORE) \
    }

#if LUMBER_BINNED
/* Binned groups take the root's step from registers: every row of a tree starts at its root, so its
 * column, threshold code and first child are loaded once per tree (a root that is a leaf tests the
 * largest code, which no row exceeds, and stays put). */
#define L_BDECL(j) int64_t n##j = child0 + (xb[(j) * L_WXS + col0] > thr0);
#define L_WALK_BINNED(STORE, END) \
    for (; i < (END); i += L_GROUP) { \
        const lumber_wv *xb = W + (int64_t)i * L_WXS; \
        L_REP10(L_BDECL) \
        for (int s = 1; s < steps; ++s) { L_REP10(L_PLAIN) } \
        if (converge) while (L_REP10(L_NOTLEAF) 0) { L_REP10(L_PLAIN) } \
        L_REP10(STORE) \
    }
#endif

/* Leaf slot of rows W[0..m) (stride L_WXS) in one tree; with acc, the tree's leaf values are added
 * to acc (column tr->output, stride L_K) instead, as the walk ends (binned walks, scalar trees). */
static void lumber_walk_block(const lumber_tree *tr, const lumber_wv *W, int m, int has_nan, int32_t *leaf,
                              LUMBER_ACC_T *acc)
{
    const int64_t root = tr->root;
    const int steps = tr->steps;
    const int converge = (tr->mode & 3) == LUMBER_MODE_CONVERGE;
    int i = 0;
#if LUMBER_BINNED
    /* codes are NaN-free; ten rows' slots, two temporaries and three pointers fit the 15 registers
     * (measured: 10 beats 8, 12 and 16 on LightGBM 500 x 63 and GradientBoosting 300 x depth 6).
     * The last group of a block may run past m into the padding rows (L_BLOCK_ROWS): their codes
     * are initialized (zeros or an earlier block's), a walk stays inside the tree whatever the codes,
     * and what it stores lands in padding that nothing reads. Rows walked one at a time instead
     * cost several times a grouped row (a 128-row block, 8 rows alone: 20% more CPU). */
    L_WN_DECL
    const int64_t col0 = wn_[root].f.col, child0 = wn_[root].f.child;
    const lumber_wv thr0 = (lumber_wv)wn_[root].f.thr;
    (void)has_nan;
#if LUMBER_HAS_SCALAR
    if (acc != NULL) {
        LUMBER_ACC_T *a = acc + tr->output;
        L_WALK_BINNED(L_ADD, m)
        return;
    }
#endif
    (void)acc;
    L_WALK_BINNED(L_STORE, m)
#else
    (void)acc;
    if (!has_nan) {
        L_WALK_GROUPS(8, L_REP8, L_PLAIN, L_XS)
    } else {
        L_WALK_GROUPS(8, L_REP8, L_NAN, L_XS)
    }
    for (; i < m; ++i) leaf[i] = lumber_walk_one(tr->root, W + (int64_t)i * L_XS);
#endif
}

/* Per-block working memory (heap, zeroed: its size grows with features, outputs and special nodes). */
typedef struct {
    const lumber_wv *walk; /* what the walk reads: the user's rows, or ext */
    int has_nan;
    int32_t leaf[L_BLOCK_ROWS];
    LUMBER_ACC_T acc[L_BLOCK_ROWS * L_K];
#if LUMBER_HAS_SPECIAL || LUMBER_BINNED
    lumber_wv ext[L_BLOCK_ROWS * LUMBER_WALK_STRIDE];
#endif
#if LUMBER_HAS_FASTCAT
    uint8_t codes[LUMBER_BLOCK * LUMBER_N_FEATURES];
#endif
#if LUMBER_IN_FLOAT
    float rounded[LUMBER_BLOCK * LUMBER_N_FEATURES]; /* a block of double rows rounded to float */
#endif
} lumber_scratch;

#if !LUMBER_BINNED
static int lumber_has_nan(const LUMBER_IN_T *X, int m)
{
    const int64_t len = (int64_t)m * L_F;
    int any = 0;
    for (int64_t j = 0; j < len; ++j) any |= X[j] != X[j];
    return any;
}
#endif

#if LUMBER_HAS_FASTCAT
/* Per row and small-set categorical feature: the category code if it is at most 28, 29 for
 * another valid code, 30 for an invalid value, 31 for NaN (bit positions in L_CATMASK). */
static void lumber_codes(const LUMBER_IN_T *X, int m, uint8_t *codes)
{
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < LUMBER_N_FASTCAT_FEATURES; ++j) {
            const int64_t at = (int64_t)i * L_F + L_FASTCAT_FEATURES[j];
            const LUMBER_IN_T v = X[at];
            int64_t k;
            if (v != v) k = 31;
            else {
                k = lumber_category((double)v);
                k = k < 0 ? 30 : (k > 28 ? 29 : k);
            }
            codes[at] = (uint8_t)k;
        }
}
#endif

#if LUMBER_BINNED
/* Code b of value v: the number of thresholds u[0..] below v (NaN: 0), searched without branches. */
#define L_BIN_DECL(j) const LUMBER_IN_T v##j = X[(int64_t)(i + j) * L_F + f]; int64_t b##j = 0;
#define L_BIN_STEP(j) b##j += u[b##j + st - 1] < v##j ? st : 0;
#define L_BIN_STORE(j) { lumber_wv *o = W + (int64_t)(i + j) * L_WXS; o[f] = (lumber_wv)b##j; \
    o[L_F + f] = v##j != v##j ? nan_right : (lumber_wv)b##j; }

/* Threshold codes of rows X[0..m) into W: feature by feature, so its thresholds stay in cache,
 * eight rows' searches interleaved so their loads overlap; 64-bit positions, so no sign extension
 * sits in the chain of dependent loads (measured: 5% less CPU on GradientBoosting 300 x depth 6
 * than four rows with 32-bit positions, 2% on LightGBM 500 x 63). */
static void lumber_bin(const LUMBER_IN_T *X, int m, lumber_wv *W)
{
    for (int64_t f = 0; f < L_F; ++f) {
        const int64_t half = L_BIN_HALF[f];
        const LUMBER_IN_T *u = L_BIN_VAL + L_BIN_OFF[f];
        const lumber_wv nan_right = (lumber_wv)L_BIN_SIZE[f];
        int i = 0;
        for (; i + 8 <= m; i += 8) {
            L_REP8(L_BIN_DECL)
            for (int64_t st = half; st > 0; st >>= 1) { L_REP8(L_BIN_STEP) }
            L_REP8(L_BIN_STORE)
        }
        for (; i < m; ++i) {
            L_BIN_DECL(0)
            for (int64_t st = half; st > 0; st >>= 1) { L_BIN_STEP(0) }
            L_BIN_STORE(0)
        }
    }
}
#endif

#if LUMBER_GLOBAL_DEC
/* Shared decisions (binned walks): the directions of rows X[0..m) at every distinct special test of the
 * model (L_DEC_SLOT: one special node per test, L_DEC_Q its index among the special nodes), into column
 * 2 * n_features + d of W. Special nodes with the same test (a small category set's direction mask on
 * one feature, or a zero-as-missing threshold) read one column, and a block decides each test once. */
static void lumber_decide_all(const LUMBER_IN_T *X, int m, const uint8_t *codes, lumber_wv *W)
{
    for (int32_t d = 0; d < LUMBER_N_DEC; ++d) {
        const int32_t s = L_DEC_SLOT[d], q = L_DEC_Q[d];
        const int64_t f = L_SPECIAL_FEAT[q];
        lumber_wv *col = W + L_DEC0 + d;
#if LUMBER_HAS_FASTCAT
        if (L_FLAGS[s] & L_FLAG_FASTCAT) {
            const uint32_t mask = L_CATMASK[s];
            for (int i = 0; i < m; ++i) col[i * L_WXS] = (lumber_wv)((mask >> codes[i * L_F + f]) & 1u);
            continue;
        }
#else
        (void)codes;
#endif
        for (int i = 0; i < m; ++i) col[i * L_WXS] = (lumber_wv)!lumber_go_left_special(s, q, X[i * L_F + f]);
    }
}
#endif

/* Start a block: codes (binned walks), or the NaN scan and, with special nodes, the row copy
 * the decisions are added to. */
static void lumber_begin(lumber_scratch *w, const LUMBER_IN_T *X, int m)
{
#if LUMBER_BINNED
    w->has_nan = 0;
    lumber_bin(X, m, w->ext);
    w->walk = w->ext;
#else
    w->has_nan = lumber_has_nan(X, m);
    w->walk = X;
#if LUMBER_HAS_SPECIAL
    for (int i = 0; i < m; ++i) memcpy(w->ext + (int64_t)i * L_XS, X + (int64_t)i * L_F, sizeof(LUMBER_IN_T) * L_F);
    w->walk = w->ext;
#endif
#endif
#if LUMBER_HAS_FASTCAT
    lumber_codes(X, m, w->codes);
#endif
#if LUMBER_GLOBAL_DEC
#if LUMBER_HAS_FASTCAT
    lumber_decide_all(X, m, w->codes, w->ext);
#else
    lumber_decide_all(X, m, NULL, w->ext);
#endif
#endif
}

/* Directions of tree t's special nodes for the block's rows, into their decision columns (shared
 * decisions are made once per block instead, as the block starts). */
static void lumber_decide(lumber_scratch *w, const LUMBER_IN_T *X, int32_t t, int m)
{
#if LUMBER_HAS_SPECIAL && !LUMBER_GLOBAL_DEC
    for (int32_t q = L_SPECIAL_OFF[t]; q < L_SPECIAL_OFF[t + 1]; ++q) {
        const int32_t s = L_SPECIAL_SLOTS[q];
        lumber_wv *col = w->ext + L_DEC0 + (q - L_SPECIAL_OFF[t]);
        const int64_t f = L_SPECIAL_FEAT[q];
#if LUMBER_HAS_FASTCAT
        if (L_FLAGS[s] & L_FLAG_FASTCAT) {
            const uint32_t mask = L_CATMASK[s];
            for (int i = 0; i < m; ++i) col[i * L_WXS] = (lumber_wv)((mask >> w->codes[i * L_F + f]) & 1u);
            continue;
        }
#endif
        for (int i = 0; i < m; ++i) col[i * L_WXS] = (lumber_wv)!lumber_go_left_special(s, q, X[i * L_F + f]);
    }
#else
    (void)w; (void)X; (void)t; (void)m;
#endif
}

static void lumber_leaves(lumber_scratch *w, const LUMBER_IN_T *X, int32_t t, int m)
{
    const lumber_tree *tr = L_TREES + t;
#if LUMBER_HAS_CODE
    if ((tr->mode & 3) == LUMBER_MODE_CODE) {
        for (int i = 0; i < m; ++i) w->leaf[i] = L_TREE_FN[t](X + (int64_t)i * L_F);
        return;
    }
#endif
    if (tr->mode & LUMBER_MODE_SPECIAL) lumber_decide(w, X, t, m);
    lumber_walk_block(tr, w->walk, m, w->has_nan, w->leaf, NULL);
}

static inline void lumber_add(const lumber_tree *tr, const int32_t *leaf, int m, LUMBER_ACC_T *acc)
{
#if LUMBER_HAS_SCALAR
    if (tr->output >= 0) {
        LUMBER_ACC_T *a = acc + tr->output;
        for (int i = 0; i < m; ++i) a[(int64_t)i * L_K] += L_LEAF_VALUE[leaf[i]];
        return;
    }
#endif
#if LUMBER_HAS_VECTOR
    for (int i = 0; i < m; ++i) {
        const LUMBER_ACC_T *v = L_LEAF_VECTOR + (int64_t)leaf[i] * L_K;
        for (int k = 0; k < L_K; ++k) acc[(int64_t)i * L_K + k] += v[k];
    }
#endif
    (void)tr; (void)leaf; (void)m; (void)acc;
}

static inline void lumber_finish(const LUMBER_ACC_T *acc, double *out)
{
    for (int k = 0; k < L_K; ++k) {
#if LUMBER_AVERAGE
        out[k] = (double)acc[k] / L_DIVISOR[k];
#else
        out[k] = (double)acc[k];
#endif
    }
}

static void lumber_block(lumber_scratch *w, const LUMBER_IN_T *X, int m, double *out)
{
#if LUMBER_BINNED
    const int rows = (m + L_GROUP - 1) / L_GROUP * L_GROUP; /* padding rows too: their sums must stay finite */
#else
    const int rows = m;
#endif
    for (int i = 0; i < rows; ++i)
        for (int k = 0; k < L_K; ++k) w->acc[i * L_K + k] = L_BASE[k];
    lumber_begin(w, X, m);
#if LUMBER_WALK_CODE
    for (int b = 0; b < LUMBER_N_CODE_BLOCKS; ++b) L_CODE_FN[b](w->walk, X, m, w->acc);
#else
    for (int32_t t = 0; t < LUMBER_N_TREES; ++t) {
#if LUMBER_BINNED && LUMBER_HAS_SCALAR
        const lumber_tree *tr = L_TREES + t;
        if (tr->output >= 0 && (tr->mode & 3) != LUMBER_MODE_CODE) { /* walk and add in one pass */
            if (tr->mode & LUMBER_MODE_SPECIAL) lumber_decide(w, X, t, m);
            lumber_walk_block(tr, w->walk, m, 0, NULL, w->acc);
            continue;
        }
#endif
        lumber_leaves(w, X, t, m);
        lumber_add(L_TREES + t, w->leaf, m, w->acc);
    }
#endif
    for (int i = 0; i < m; ++i) lumber_finish(w->acc + i * L_K, out + (int64_t)i * L_K);
}

static void lumber_transform(double *o)
{
#if LUMBER_TRANSFORM == 1
    for (int k = 0; k < L_K; ++k) o[k] = 1.0 / (1.0 + exp(-LUMBER_SIGMOID_ALPHA * o[k]));
#elif LUMBER_TRANSFORM == 2
    double mx = o[0], sum = 0.0;
    for (int k = 1; k < L_K; ++k) mx = o[k] > mx ? o[k] : mx;
    for (int k = 0; k < L_K; ++k) { o[k] = exp(o[k] - mx); sum += o[k]; }
    for (int k = 0; k < L_K; ++k) o[k] /= sum;
#elif LUMBER_TRANSFORM == 3
    for (int k = 0; k < L_K; ++k) o[k] = exp(o[k]);
#elif LUMBER_TRANSFORM == 4
    for (int k = 0; k < L_K; ++k) o[k] = -pow(2.0, -o[k] / LUMBER_ISOLATION_C);
#else
    (void)o;
#endif
}

#define L_OPT_TRANSFORM 1 /* predict_rows options */
#define L_OPT_CHECK 2
#define L_REFUSED 2       /* status bit: a value the model refuses */

/* Whether values X[0..len) hold one the source model refuses (NaN, or an infinity after rounding
 * to the input type), by the model's schema; written as a reduction so it vectorizes. */
static int lumber_refused(const LUMBER_IN_T *X, int64_t len)
{
    int bad = 0;
#if LUMBER_REFUSE_NAN || LUMBER_REFUSE_INF
    for (int64_t j = 0; j < len; ++j) {
        const LUMBER_IN_T v = X[j];
#if LUMBER_REFUSE_NAN
        bad |= v != v;
#endif
#if LUMBER_REFUSE_INF
        bad |= (v == (LUMBER_IN_T)INFINITY) | (v == -(LUMBER_IN_T)INFINITY);
#endif
    }
#else
    (void)X; (void)len;
#endif
    return bad;
}

/* Block b of the batch (rows [b * LUMBER_BLOCK, ...)) into out; rows are of the input type, or doubles
 * (dbl) that a float model rounds block by block (as numpy's astype(float32) does, overflow to inf),
 * so no converted copy of the batch is made before the call. Returns L_REFUSED when checking found a
 * value the model refuses. */
static int lumber_one_block(lumber_scratch *w, const void *rows, int dbl, int64_t n, int64_t b, double *out,
                            int options)
{
    const int64_t r0 = b * LUMBER_BLOCK;
    const int m = (int)(n - r0 < LUMBER_BLOCK ? n - r0 : LUMBER_BLOCK);
    double *o = out + r0 * L_K;
    const LUMBER_IN_T *X = (const LUMBER_IN_T *)rows + r0 * L_F;
#if LUMBER_IN_FLOAT
    if (dbl) {
        const double *d = (const double *)rows + r0 * L_F;
        for (int64_t j = 0; j < (int64_t)m * L_F; ++j) w->rounded[j] = (float)d[j];
        X = w->rounded;
    }
#else
    (void)dbl;
#endif
    int status = 0;
    if (options & L_OPT_CHECK) status = lumber_refused(X, (int64_t)m * L_F) ? L_REFUSED : 0;
    lumber_block(w, X, m, o);
    if (options & L_OPT_TRANSFORM)
        for (int i = 0; i < m; ++i) lumber_transform(o + (int64_t)i * L_K);
    return status;
}

#define L_CHUNK_BLOCKS 4 /* blocks a thread takes at a time (a few hundred rows) */

/* All blocks of the batch; returns 0, or the bits 1 (memory ran out) and L_REFUSED. Threads take chunks
 * of blocks as they finish (dynamic schedule): on a shared machine one slowed thread does not hold up
 * the rest, and each thread allocates its scratch once per call. */
static int32_t lumber_blocks(const void *rows, int dbl, int64_t n, double *out, int32_t threads, int options)
{
    const int64_t nb = (n + LUMBER_BLOCK - 1) / LUMBER_BLOCK;
    int failed = 0;
#ifdef _OPENMP
    if (threads > 1 && nb > 1) {
#pragma omp parallel num_threads(threads) reduction(| : failed)
        {
            lumber_scratch *w = (lumber_scratch *)calloc(1, sizeof(lumber_scratch));
#pragma omp for schedule(dynamic, L_CHUNK_BLOCKS)
            for (int64_t b = 0; b < nb; ++b) {
                if (w == NULL) failed = 1;
                else failed |= lumber_one_block(w, rows, dbl, n, b, out, options);
            }
            free(w);
        }
        return failed;
    }
#else
    (void)threads;
#endif
    lumber_scratch *w = (lumber_scratch *)calloc(1, sizeof(lumber_scratch));
    if (w == NULL) return 1;
    for (int64_t b = 0; b < nb; ++b) failed |= lumber_one_block(w, rows, dbl, n, b, out, options);
    free(w);
    return failed;
}

int32_t LUMBER_FN(predict_raw)(const LUMBER_IN_T *rows, int64_t n, double *out, int32_t threads)
{
    return lumber_blocks(rows, 0, n, out, threads, 0);
}

int32_t LUMBER_FN(predict_transformed)(const LUMBER_IN_T *rows, int64_t n, double *out, int32_t threads)
{
    return lumber_blocks(rows, 0, n, out, threads, L_OPT_TRANSFORM);
}

int32_t LUMBER_FN(predict_rows)(const void *rows, int32_t rows_double, int64_t n, double *out, int32_t threads,
                                int32_t options)
{
    return lumber_blocks(rows, rows_double != 0, n, out, threads, options & (L_OPT_TRANSFORM | L_OPT_CHECK));
}

#if LUMBER_ROW_WALK
/* Single rows (binned models): the row's codes and its shared decisions (LUMBER_GLOBAL_DEC), then
 * L_ROW_G trees walked together on the node table, branch-free, their first steps from the roots'
 * copies in L_WROOT (one small table, instead of a root slot and its node per tree); each group of
 * trees takes its precomputed steps (L_ROW_GROUP: steps, plus bit 16 when a tree of the group may
 * need more), and leaf values are added in tree order. */
#define L_ROW_G 16
#define L_RDECL(j) const lumber_wnode r##j = L_WROOT[t + j]; \
    int64_t n##j = (int64_t)r##j.f.child + (wx[r##j.f.col] > r##j.f.thr);
#define L_RSTEP(j) L_WSTEP(n##j, wx);
#define L_RNOTLEAF(j) wn_[n##j].f.child != n##j ||
#if !LUMBER_HAS_VECTOR && LUMBER_N_OUTPUTS == 1
#define L_RADD(j) s0 += L_LEAF_VALUE[n##j];
#else
#define L_RADD(j) { const int32_t leaf_ = (int32_t)n##j; lumber_add(L_TREES + t + j, &leaf_, 1, acc); }
#endif

void LUMBER_FN(predict_row)(const LUMBER_IN_T *row, double *out)
{
    LUMBER_ACC_T acc[L_K];
    lumber_wv wx[LUMBER_WALK_STRIDE];
    L_WN_DECL
    lumber_bin(row, 1, wx);
#if LUMBER_GLOBAL_DEC
#if LUMBER_HAS_FASTCAT
    uint8_t codes[LUMBER_N_FEATURES];
    lumber_codes(row, 1, codes);
    lumber_decide_all(row, 1, codes, wx);
#else
    lumber_decide_all(row, 1, NULL, wx);
#endif
#endif
    for (int k = 0; k < L_K; ++k) acc[k] = L_BASE[k];
    LUMBER_ACC_T s0 = acc[0];
    int32_t t = 0;
    for (; t + L_ROW_G <= LUMBER_N_TREES; t += L_ROW_G) {
        const int32_t g = L_ROW_GROUP[t / L_ROW_G];
        L_REP16(L_RDECL)
        for (int s = (g & 0xffff) - 1; s > 0; --s) { L_REP16(L_RSTEP) }
        if (g >> 16) while (L_REP16(L_RNOTLEAF) 0) { L_REP16(L_RSTEP) }
        L_REP16(L_RADD)
    }
    for (; t < LUMBER_N_TREES; ++t) {
        L_RDECL(0)
        while (wn_[n0].f.child != n0) { L_RSTEP(0) }
        L_RADD(0)
    }
    (void)s0;
#if !LUMBER_HAS_VECTOR && LUMBER_N_OUTPUTS == 1
    acc[0] = s0;
#endif
    lumber_finish(acc, out);
}
#elif LUMBER_WALK_CODE
/* Code walks: the row goes through the generated functions, as a block of one row. */
void LUMBER_FN(predict_row)(const LUMBER_IN_T *row, double *out)
{
    LUMBER_ACC_T acc[L_K];
    lumber_wv wx[LUMBER_WALK_STRIDE];
    lumber_bin(row, 1, wx);
    for (int k = 0; k < L_K; ++k) acc[k] = L_BASE[k];
    for (int b = 0; b < LUMBER_N_CODE_BLOCKS; ++b) L_CODE_FN[b](wx, row, 1, acc);
    lumber_finish(acc, out);
}
#else
/* Start of tree t's walk for one row: its root, or directly its leaf for a code or special tree. */
static inline int64_t lumber_row_start(int32_t t, const LUMBER_IN_T *x, int *steps)
{
    const lumber_tree *tr = L_TREES + t;
    (void)x;
#if LUMBER_HAS_CODE
    if ((tr->mode & 3) == LUMBER_MODE_CODE) return L_TREE_FN[t](x);
#endif
#if LUMBER_HAS_SPECIAL
    if (tr->mode & LUMBER_MODE_SPECIAL) return lumber_walk_general(t, x);
#endif
    if (tr->steps > *steps) *steps = tr->steps;
    return tr->root;
}

#if LUMBER_BINNED && LUMBER_WALK_STRIDE * 2 <= 16384
/* Single rows walk codes too: one row's codes cost one search per feature, and the binned
 * nodes are half the size, so more of the model stays in cache between calls. */
#define L_ROW_BINNED 1
#define L_ROW_G 16
#define L_ROW_REP L_REP16
#define L_TSTEP(j) L_WSTEP(n##j, wx);
#else
#define L_ROW_BINNED 0
#define L_ROW_G 8
#define L_ROW_REP L_REP8
#define L_TSTEP(j) L_STEP_NAN(n##j, row);
#endif
#define L_TDECL(j) int64_t n##j = lumber_row_start(t + j, row, &steps);
#define L_TSTORE(j) leaf[t + j - t0] = (int32_t)n##j;

/* Leaves of trees [t0, t1) for one row (wx: its codes in a binned walk): L_ROW_G trees walked
 * together, so the row's single walk is not one long chain of dependent loads. */
static void lumber_row_leaves(const LUMBER_IN_T *row, const lumber_wv *wx, int32_t t0, int32_t t1, int32_t *leaf)
{
    int32_t t = t0;
#if L_ROW_BINNED
    L_WN_DECL
#endif
    (void)wx;
    for (; t + L_ROW_G <= t1; t += L_ROW_G) {
        int steps = 0;
        L_ROW_REP(L_TDECL)
        for (int s = 0; s < steps; ++s) { L_ROW_REP(L_TSTEP) }
        while (L_ROW_REP(L_NOTLEAF) 0) { L_ROW_REP(L_TSTEP) }
        L_ROW_REP(L_TSTORE)
    }
    for (; t < t1; ++t) {
        int steps = 0;
        int64_t n0 = lumber_row_start(t, row, &steps);
        while (!L_IS_LEAF(n0)) { L_TSTEP(0) }
        leaf[t - t0] = (int32_t)n0;
    }
}

void LUMBER_FN(predict_row)(const LUMBER_IN_T *row, double *out)
{
    LUMBER_ACC_T acc[L_K];
    int32_t leaf[64];
#if L_ROW_BINNED
    lumber_wv wx[LUMBER_WALK_STRIDE];
    lumber_bin(row, 1, wx);
#else
    const lumber_wv *wx = NULL;
#endif
    for (int k = 0; k < L_K; ++k) acc[k] = L_BASE[k];
    for (int32_t t0 = 0; t0 < LUMBER_N_TREES; t0 += 64) {
        const int32_t t1 = t0 + 64 < LUMBER_N_TREES ? t0 + 64 : LUMBER_N_TREES;
        lumber_row_leaves(row, wx, t0, t1, leaf);
        for (int32_t t = t0; t < t1; ++t) lumber_add(L_TREES + t, leaf + (t - t0), 1, acc);
    }
    lumber_finish(acc, out);
}
#endif

/* One row with predict_rows' options (2: check the values the model refuses; 1: the post-transform):
 * the single-row walk, with no per-call setup. Returns 0, or L_REFUSED. */
int32_t LUMBER_FN(predict_one)(const LUMBER_IN_T *row, double *out, int32_t options)
{
    const int status = (options & L_OPT_CHECK) && lumber_refused(row, L_F) ? L_REFUSED : 0;
    LUMBER_FN(predict_row)(row, out);
    if (options & L_OPT_TRANSFORM) lumber_transform(out);
    return status;
}

int32_t LUMBER_FN(apply)(const LUMBER_IN_T *rows, int64_t n, int32_t *out)
{
    lumber_scratch *w = (lumber_scratch *)calloc(1, sizeof(lumber_scratch));
    if (w == NULL) return 1;
    for (int64_t r0 = 0; r0 < n; r0 += LUMBER_BLOCK) {
        const int m = (int)(n - r0 < LUMBER_BLOCK ? n - r0 : LUMBER_BLOCK);
        const LUMBER_IN_T *X = rows + r0 * L_F;
        lumber_begin(w, X, m);
        for (int32_t t = 0; t < LUMBER_N_TREES; ++t) {
            lumber_leaves(w, X, t, m);
            for (int i = 0; i < m; ++i) out[(r0 + i) * LUMBER_N_TREES + t] = L_SLOT_NODE[w->leaf[i]];
        }
    }
    free(w);
    return 0;
}

/* A CPython door to predict_one, for a Python process that loads this library: py_one(X, out, options)
 * as a METH_FASTCALL builtin, with no per-call argument conversion. The library does not link against
 * Python: py_init receives the addresses of the few CPython functions it calls (stable ABI; the
 * Py_buffer layout below is that of CPython 3.11 and later), and the caller makes the builtin from
 * py_one's address. X: a (1, n_features) float64 or float32 array (any strides; a float model rounds
 * doubles as predict_rows does), out: a writable C-contiguous float64 array of n_outputs values,
 * options: predict_one's bits 1 and 2. Returns the int 0, 2 (a refused value), or -1 when X or out is
 * not such an array (nothing computed; the caller takes its general path). The GIL is released while
 * the row is walked. */
typedef struct {
    void *buf; void *obj; intptr_t len, itemsize; int readonly, ndim; char *format;
    intptr_t *shape, *strides, *suboffsets; void *internal;
} lumber_pybuffer;
typedef int (*lumber_py_getbuffer_fn)(void *, lumber_pybuffer *, int);
typedef void (*lumber_py_release_fn)(lumber_pybuffer *);
typedef void *(*lumber_py_long_fn)(long);
typedef long (*lumber_py_as_long_fn)(void *);
typedef void *(*lumber_py_save_fn)(void);
typedef void (*lumber_py_restore_fn)(void *);
typedef void (*lumber_py_clear_fn)(void);
static struct {
    lumber_py_getbuffer_fn getbuffer; lumber_py_release_fn release; lumber_py_long_fn from_long;
    lumber_py_as_long_fn as_long; lumber_py_save_fn save; lumber_py_restore_fn restore; lumber_py_clear_fn clear;
} L_PY;

/* api: PyObject_GetBuffer, PyBuffer_Release, PyLong_FromLong, PyLong_AsLong, PyEval_SaveThread,
 * PyEval_RestoreThread, PyErr_Clear. Returns sizeof(Py_buffer) as this library sees it, for the caller to compare. */
int32_t LUMBER_FN(py_init)(void *const *api)
{
    L_PY.getbuffer = (lumber_py_getbuffer_fn)api[0];
    L_PY.release = (lumber_py_release_fn)api[1];
    L_PY.from_long = (lumber_py_long_fn)api[2];
    L_PY.as_long = (lumber_py_as_long_fn)api[3];
    L_PY.save = (lumber_py_save_fn)api[4];
    L_PY.restore = (lumber_py_restore_fn)api[5];
    L_PY.clear = (lumber_py_clear_fn)api[6];
    return (int32_t)sizeof(lumber_pybuffer);
}

#define L_PYBUF_WRITABLE 0x0001
#define L_PYBUF_FORMAT 0x0004
#define L_PYBUF_STRIDES 0x0018

void *LUMBER_FN(py_one)(void *self, void *const *args, intptr_t nargs)
{
    lumber_pybuffer x, o;
    (void)self;
    if (nargs != 3 || L_PY.getbuffer == NULL) return L_PY.from_long(-1);
    if (L_PY.getbuffer(args[0], &x, L_PYBUF_STRIDES | L_PYBUF_FORMAT) != 0) {
        L_PY.clear();
        return L_PY.from_long(-1);
    }
    if (L_PY.getbuffer(args[1], &o, L_PYBUF_WRITABLE | L_PYBUF_FORMAT) != 0) {
        L_PY.clear();
        L_PY.release(&x);
        return L_PY.from_long(-1);
    }
    const long options = L_PY.as_long(args[2]) & (L_OPT_TRANSFORM | L_OPT_CHECK);
    long status = -1;
    const int dbl = x.format != NULL && x.format[0] == 'd' && x.format[1] == 0 && x.itemsize == 8;
    const int flt = x.format != NULL && x.format[0] == 'f' && x.format[1] == 0 && x.itemsize == 4;
    if ((dbl || flt) && x.ndim == 2 && x.shape[0] == 1 && x.shape[1] == LUMBER_N_FEATURES
        && o.format != NULL && o.format[0] == 'd' && o.format[1] == 0 && o.itemsize == 8
        && o.len == 8 * LUMBER_N_OUTPUTS && !o.readonly) {
        LUMBER_IN_T row[LUMBER_N_FEATURES];
        const char *p = (const char *)x.buf;
        const intptr_t step = x.strides[1];
        void *ts = L_PY.save();
        for (int j = 0; j < LUMBER_N_FEATURES; ++j, p += step)
            row[j] = dbl ? (LUMBER_IN_T)*(const double *)p : (LUMBER_IN_T)*(const float *)p;
        status = LUMBER_FN(predict_one)(row, (double *)o.buf, (int32_t)options);
        L_PY.restore(ts);
    }
    L_PY.release(&x);
    L_PY.release(&o);
    return L_PY.from_long(status);
}

int32_t LUMBER_FN(n_features)(void) { return LUMBER_N_FEATURES; }
int32_t LUMBER_FN(n_outputs)(void) { return LUMBER_N_OUTPUTS; }
int32_t LUMBER_FN(n_trees)(void) { return LUMBER_N_TREES; }
int32_t LUMBER_FN(input_is_float32)(void) { return (int32_t)(sizeof(LUMBER_IN_T) == sizeof(float)); }
int32_t LUMBER_FN(abi_version)(void) { return LUMBER_ABI_VERSION; }
const char *LUMBER_FN(fingerprint)(void) { return L_FINGERPRINT; }
const char *LUMBER_FN(metadata)(void) { return L_METADATA; }
int32_t LUMBER_FN(has_openmp)(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}
