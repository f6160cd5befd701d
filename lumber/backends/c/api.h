/* Public interface of a lumber-compiled tree ensemble (generated; do not edit).
 *
 * Rows are C-contiguous arrays of @IN_T@ with @PREFIX@_n_features() columns.
 * NaN means "missing" and is routed as the source model routes it.
 * Outputs are @PREFIX@_n_outputs() doubles per row.
 */
#ifndef @GUARD@
#define @GUARD@

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raw margins (what Forest.evaluate returns) for n rows; threads <= 1 runs serially
   (more threads are used only when the library was built with OpenMP).
   Returns 0, or 1 when working memory could not be allocated. */
int32_t @PREFIX@_predict_raw(const @IN_T@ *rows, int64_t n, double *out, int32_t threads);
/* Margins after the model's post-transform (sigmoid, softmax, exp, isolation score). */
int32_t @PREFIX@_predict_transformed(const @IN_T@ *rows, int64_t n, double *out, int32_t threads);
/* Margins of n rows given as doubles (rows_double; a float model rounds them to float as it goes,
   so no converted copy is needed) or as @IN_T@; options: 1 apply the post-transform, 2 check the
   values the source model refuses (NaN, infinities after rounding; see the model's schema).
   Returns 0, or the bits 1 (working memory could not be allocated) and 2 (a refused value). */
int32_t @PREFIX@_predict_rows(const void *rows, int32_t rows_double, int64_t n, double *out, int32_t threads,
                             int32_t options);
/* Raw margins of one row: the low-latency entry point. */
void @PREFIX@_predict_row(const @IN_T@ *row, double *out);
/* One row with the options of predict_rows (1 post-transform, 2 check refused values): predict_row
   plus the check, for callers that validate nothing themselves. Returns 0, or 2 (a refused value). */
int32_t @PREFIX@_predict_one(const @IN_T@ *row, double *out, int32_t options);
/* For a Python process that loads the library (see lumber/backends/c/loader.py): py_init takes the
   addresses of the CPython functions py_one calls; py_one is a METH_FASTCALL builtin's body. */
int32_t @PREFIX@_py_init(void *const *api);
void *@PREFIX@_py_one(void *self, void *const *args, intptr_t nargs);
/* Leaf reached in every tree, as a node id local to its tree: n x n_trees int32 (returns 0). */
int32_t @PREFIX@_apply(const @IN_T@ *rows, int64_t n, int32_t *out);

int32_t @PREFIX@_n_features(void);
int32_t @PREFIX@_n_outputs(void);
int32_t @PREFIX@_n_trees(void);
/* 1 when rows are float (the source model compares in float32), 0 for double. */
int32_t @PREFIX@_input_is_float32(void);
int32_t @PREFIX@_has_openmp(void);
int32_t @PREFIX@_abi_version(void);
/* Content hash of the model this code was generated from (hex sha256). */
const char *@PREFIX@_fingerprint(void);
/* JSON: schema, fingerprint and generator version. */
const char *@PREFIX@_metadata(void);

#ifdef __cplusplus
}
#endif

#endif /* @GUARD@ */
