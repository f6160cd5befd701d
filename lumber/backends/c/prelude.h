#include <stddef.h>
#include <stdint.h>
#include <math.h>

/* One node slot: go right iff x > thr (numerical nodes); leaves are self loops with thr = NaN. */
typedef struct { LUMBER_IN_T thr; int32_t feat; int32_t child; } lumber_node;
/* One tree: root slot, output column (-1: a vector over all outputs), steps and walk mode. */
typedef struct { int32_t root; int32_t output; int32_t steps; int32_t mode; } lumber_tree;
/* A category set: a bitset of `size` words, or a sorted list of `size` codes. */
typedef struct { uint32_t offset; uint32_t size; uint32_t is_list; } lumber_catset;
#if LUMBER_BINNED
/* One node slot of a binned walk: go right iff row[col] > thr (codes; leaves: the largest code).
 * Eight bytes, so one 64-bit load brings threshold and child together (`all`). */
typedef union { struct { uint16_t thr; uint16_t col; int32_t child; } f; uint64_t all; } lumber_wnode;
#endif
