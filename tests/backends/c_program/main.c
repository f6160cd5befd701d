/* A service in C: reads n rows of the model's features from stdin (text, "nan" for missing), prints each
 * row's margins from predict_raw and from predict_row, and checks that 4 threads calling predict_raw at
 * once on the same library agree with the serial call. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct { const double *rows; int64_t n; double *out; } job_t;

static void *work(void *arg) {
    job_t *j = (job_t *)arg;
    for (int rep = 0; rep < 50; rep++)
        if (lumber_predict_raw(j->rows, j->n, j->out, 1) != 0) return (void *)1;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: main N < rows.txt\n"); return 2; }
    int64_t n = atoll(argv[1]);
    int32_t f = lumber_n_features(), k = lumber_n_outputs();
    if (lumber_input_is_float32()) { fprintf(stderr, "this program passes doubles\n"); return 2; }
    double *rows = malloc(sizeof(double) * n * f), *out = malloc(sizeof(double) * n * k);
    for (int64_t i = 0; i < n * f; i++) {
        char word[64];
        if (scanf("%63s", word) != 1) { fprintf(stderr, "short input\n"); return 2; }
        rows[i] = strcmp(word, "nan") == 0 ? NAN : strtod(word, NULL);
    }
    if (lumber_predict_raw(rows, n, out, 1) != 0) return 3;
    double one[64];
    for (int64_t i = 0; i < n; i++) {
        lumber_predict_row(rows + i * f, one);
        for (int32_t c = 0; c < k; c++) printf("%.17g %.17g\n", out[i * k + c], one[c]);
    }
    pthread_t t[4];
    job_t jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job_t){rows, n, malloc(sizeof(double) * n * k)};
        pthread_create(&t[i], NULL, work, &jobs[i]);
    }
    int agree = 1;
    for (int i = 0; i < 4; i++) {
        void *status;
        pthread_join(t[i], &status);
        agree &= status == NULL && memcmp(jobs[i].out, out, sizeof(double) * n * k) == 0;
        free(jobs[i].out);
    }
    printf("fingerprint %s\nthreads %s\n", lumber_fingerprint(), agree ? "agree" : "DIFFER");
    free(rows);
    free(out);
    return 0;
}
