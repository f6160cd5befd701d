/* Popcounts of AND-ed row bitsets: the inner loop of the rule estimators' Projected Forest cells
 * (lumber/passes/analyses/rules/cells.py). Built once per process by bitsets.py.
 *
 * bits:  (n_keys, words) row bitsets, row i at bit i % 64 of word i / 64.
 * Group g ANDs the bitsets keys[start[g]] .. keys[start[g + 1] - 1] (every row, the bitset
 * `all_key`, when the group is empty) and writes W[g] = set bits of the AND and H[g] = set bits
 * of the AND with `hit`. Exact integer counts, so any order of work gives the same numbers. */
#include <stdint.h>

#define LB_ABI 1
#define BLOCK 64 /* words AND-ed at once: the accumulator stays in L1 */

int32_t lb_abi(void) { return LB_ABI; }

static inline int64_t pop64(uint64_t v) { return (int64_t)__builtin_popcountll(v); }

int32_t lb_and_counts(const uint64_t *bits, int64_t words, const int64_t *keys, const int64_t *start,
                      int64_t n_groups, int64_t all_key, const uint64_t *hit, int64_t *W, int64_t *H)
{
    uint64_t acc[BLOCK];
    for (int64_t g = 0; g < n_groups; ++g) {
        int64_t a = start[g], b = start[g + 1];
        const int64_t *ks = keys + a;
        int64_t n = b - a;
        if (n <= 0) {
            ks = &all_key;
            n = 1;
        }
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
        W[g] = w_sum;
        H[g] = h_sum;
    }
    return 0;
}
