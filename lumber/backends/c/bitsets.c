/* Popcounts of AND-ed row bitsets: the inner loop of the rule estimators' Projected Forest cells
 * (lumber/passes/analyses/rules/cells.py). Built once per process by bitsets.py.
 *
 * bits:  (n_keys, words) row bitsets, row i at bit i % 64 of word i / 64.
 * Group g ANDs the bitsets keys[start[g]] .. keys[start[g + 1] - 1] (every row, the bitset
 * `all_key`, when the group is empty) and writes W[g] = set bits of the AND and H[g] = set bits
 * of the AND with `hit`. Exact integer counts, so any order of work gives the same numbers.
 *
 * lb_route_counts does the whole cell of each (query, tree) from the query's routes (the route code
 * of every internal node: 1 left, 2 right, 3 both, 0 neither), as CellIndex.counts does with numpy:
 * walk the nodes the query reaches, keep per segment (tree, feature, missing rule) the tightest
 * split that the query determines on each side, AND those bitsets and count. */
#include <stdint.h>
#include <stdlib.h>

#define LB_ABI 2
#define BLOCK 64 /* words AND-ed at once: the accumulator stays in L1 */

int32_t lb_abi(void) { return LB_ABI; }

static inline int64_t pop64(uint64_t v) { return (int64_t)__builtin_popcountll(v); }

static void and_count(const uint64_t *bits, int64_t words, const int64_t *ks, int64_t n, const uint64_t *hit,
                      int64_t *W, int64_t *H)
{
    uint64_t acc[BLOCK];
    int64_t w_sum = 0, h_sum = 0;
    for (int64_t w0 = 0; w0 < words; w0 += BLOCK) {
        int64_t m = words - w0 < BLOCK ? words - w0 : BLOCK;
        const uint64_t *p = bits + ks[0] * words + w0;
        for (int64_t i = 0; i < m; ++i)
            acc[i] = p[i];
        for (int64_t k = 1; k < n; ++k) {
            p = bits + ks[k] * words + w0;
            for (int64_t i = 0; i < m; ++i)
                acc[i] &= p[i];
        }
        const uint64_t *h = hit + w0;
        for (int64_t i = 0; i < m; ++i) {
            w_sum += pop64(acc[i]);
            h_sum += pop64(acc[i] & h[i]);
        }
    }
    *W = w_sum;
    *H = h_sum;
}

int32_t lb_and_counts(const uint64_t *bits, int64_t words, const int64_t *keys, const int64_t *start,
                      int64_t n_groups, int64_t all_key, const uint64_t *hit, int64_t *W, int64_t *H)
{
    for (int64_t g = 0; g < n_groups; ++g) {
        int64_t n = start[g + 1] - start[g];
        if (n <= 0)
            and_count(bits, words, &all_key, 1, hit, W + g, H + g);
        else
            and_count(bits, words, keys + start[g], n, hit, W + g, H + g);
    }
    return 0;
}

/* routes: (q, V) int8; node_inner: per global node its internal index, -1 for a leaf; left/right: children
 * (global ids) per global node; roots: (T,); inner_seg/inner_rank: per internal index its segment and
 * threshold rank; seg_key: per segment the first key of its group; n_keys: K (left bitsets are keys
 * 0..K-1, right ones K..2K-1, every row 2K). Writes W, H, alive: (q, T). Returns 0, or -1 when out of
 * memory. */
int32_t lb_route_counts(const int8_t *routes, int64_t q, int64_t V, int64_t n_nodes, const int64_t *node_inner,
                        const int64_t *left, const int64_t *right, const int64_t *roots, int64_t T,
                        const int64_t *inner_seg, const int64_t *inner_rank, const int64_t *seg_key, int64_t n_segs,
                        int64_t n_keys, const uint64_t *bits, int64_t words, const uint64_t *hit, int64_t *W,
                        int64_t *H, uint8_t *alive)
{
    int64_t *stack = malloc(sizeof(int64_t) * (size_t)(n_nodes + 1));
    int64_t *lo = malloc(sizeof(int64_t) * (size_t)(n_segs + 1));
    int64_t *hi = malloc(sizeof(int64_t) * (size_t)(n_segs + 1));
    int64_t *touched = malloc(sizeof(int64_t) * (size_t)(n_segs + 1));
    int64_t *keys = malloc(sizeof(int64_t) * (size_t)(2 * n_segs + 1));
    if (!stack || !lo || !hi || !touched || !keys) {
        free(stack); free(lo); free(hi); free(touched); free(keys);
        return -1;
    }
    for (int64_t s = 0; s < n_segs; ++s) {
        lo[s] = INT64_MAX;
        hi[s] = -1;
    }
    const int64_t all_key = 2 * n_keys;
    for (int64_t qi = 0; qi < q; ++qi) {
        const int8_t *r = routes + qi * V;
        for (int64_t t = 0; t < T; ++t) {
            int64_t sp = 0, n_touched = 0, n_k = 0;
            int reached_leaf = 0;
            stack[sp++] = roots[t];
            while (sp > 0) {
                int64_t node = stack[--sp];
                int64_t v = node_inner[node];
                if (v < 0) {
                    reached_leaf = 1;
                    continue;
                }
                int8_t code = r[v];
                if (code == 1 || code == 2) {
                    int64_t s = inner_seg[v];
                    if (lo[s] == INT64_MAX && hi[s] < 0)
                        touched[n_touched++] = s;
                    if (code == 1) {
                        if (inner_rank[v] < lo[s])
                            lo[s] = inner_rank[v];
                    } else if (inner_rank[v] > hi[s]) {
                        hi[s] = inner_rank[v];
                    }
                }
                if (code & 2)
                    stack[sp++] = right[node];
                if (code & 1)
                    stack[sp++] = left[node];
            }
            for (int64_t k = 0; k < n_touched; ++k) {
                int64_t s = touched[k];
                if (lo[s] != INT64_MAX)
                    keys[n_k++] = seg_key[s] + lo[s];
                if (hi[s] >= 0)
                    keys[n_k++] = n_keys + seg_key[s] + hi[s];
                lo[s] = INT64_MAX;
                hi[s] = -1;
            }
            int64_t g = qi * T + t;
            if (n_k == 0)
                and_count(bits, words, &all_key, 1, hit, W + g, H + g);
            else
                and_count(bits, words, keys, n_k, hit, W + g, H + g);
            alive[g] = (uint8_t)reached_leaf;
        }
    }
    free(stack); free(lo); free(hi); free(touched); free(keys);
    return 0;
}
