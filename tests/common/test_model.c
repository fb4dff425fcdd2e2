/* Unit tests of the model library (common/): matmul.h, mlp.h, optimizer.h,
 * dataset.h and progress.h, each checked against a reference written
 * differently (plain loops in double) with a stated tolerance. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "compare.h"
#include "dataset.h"
#include "matmul.h"
#include "memory_ledger.h"
#include "mlp.h"
#include "optimizer.h"
#include "progress.h"
#include "rng.h"

/* Unit roundoff of float. */
static const double float_u = 0x1.0p-24;

/* gamma_n for float: the bound n*u/(1 - n*u) on the relative error that n
 * roundings can accumulate (Higham, Lemma 3.1). */
static double gamma_float(size_t n)
{
    double nu = (double)n * float_u;
    return nu / (1.0 - nu);
}

static float *floats(size_t count)
{
    float *data = malloc((count ? count : 1) * sizeof *data);
    ck_assert_msg(data != NULL, "out of memory for %zu floats", count);
    return data;
}

static double *doubles(size_t count)
{
    double *data = malloc((count ? count : 1) * sizeof *data);
    ck_assert_msg(data != NULL, "out of memory for %zu doubles", count);
    return data;
}

/* Floats uniform in [-1, 1) from (seed, k). */
static void fill_random(float *data, size_t count, uint64_t seed)
{
    for (size_t k = 0; k < count; k++)
        data[k] = (float)rng_at_signed(seed, k, 0);
}

/* ---- matmul.h ---- */

typedef enum { PRODUCT_ABT, PRODUCT_ATB, PRODUCT_AB } product_kind;
static const char *const product_names[] = { "A B^T", "A^T B", "A B" };

static const size_t matmul_shapes[][3] = {   /* m, n, k */
    { 1, 1, 1 }, { 7, 13, 5 }, { 33, 17, 65 }, { 128, 96, 200 },
};

static void run_product(product_kind kind, size_t m, size_t n, size_t k,
                        const float *A, const float *B, float *C,
                        int accumulate)
{
    if (kind == PRODUCT_ABT)
        matmul_abt(m, n, k, A, B, C, accumulate);
    else if (kind == PRODUCT_ATB)
        matmul_atb(m, n, k, A, B, C, accumulate);
    else
        matmul_ab(m, n, k, A, B, C, accumulate);
}

/* A(i,p) and B(p,j) as each product reads its operands. */
static float operand_a(product_kind kind, const float *A, size_t m, size_t k,
                       size_t i, size_t p)
{
    return kind == PRODUCT_ATB ? A[p * m + i] : A[i * k + p];
}

static float operand_b(product_kind kind, const float *B, size_t n, size_t k,
                       size_t p, size_t j)
{
    return kind == PRODUCT_ABT ? B[j * k + p] : B[p * n + j];
}

/* Each product, plain and accumulating, on odd shapes, against a triple
 * loop in double. A product of two floats is exact in double (48 bits of
 * 53), and a sum of at most 201 of them in double errs by 201 * 2^-53
 * relative to sum |terms|, far below the float bound. The float result, a
 * sum of k products (k + 1 terms when accumulating) in any order, with or
 * without fused multiply-adds, errs by at most gamma_k * sum |a b| (Higham,
 * section 3.1); the bound allowed is that, plus the double's own error. */
START_TEST(matmul_matches_double_reference)
{
    product_kind kind = (product_kind)_i;
    for (size_t shape = 0; shape < sizeof matmul_shapes /
                                   sizeof matmul_shapes[0]; shape++) {
        size_t m = matmul_shapes[shape][0], n = matmul_shapes[shape][1],
               k = matmul_shapes[shape][2];
        float *A = floats(m * k), *B = floats(k * n), *C = floats(m * n),
              *C0 = floats(m * n);
        double *expected = doubles(m * n), *got = doubles(m * n),
               *bound = doubles(m * n);
        fill_random(A, m * k, 1 + shape);
        fill_random(B, k * n, 100 + shape);
        fill_random(C0, m * n, 200 + shape);
        for (int accumulate = 0; accumulate <= 1; accumulate++) {
            memcpy(C, C0, m * n * sizeof *C);
            run_product(kind, m, n, k, A, B, C, accumulate);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    double sum = accumulate ? C0[i * n + j] : 0.0;
                    double magnitude = fabs(sum);
                    for (size_t p = 0; p < k; p++) {
                        double term = (double)operand_a(kind, A, m, k, i, p) *
                                      operand_b(kind, B, n, k, p, j);
                        sum += term;
                        magnitude += fabs(term);
                    }
                    expected[i * n + j] = sum;
                    got[i * n + j] = C[i * n + j];
                    bound[i * n + j] =
                        (gamma_float(k + (size_t)accumulate) +
                         (double)(k + 1) * 0x1.0p-53) * magnitude;
                }
            comparison_t c = compare_within(expected, got, bound, m * n);
            char what[128];
            snprintf(what, sizeof what, "C = %s%s (m %zu, n %zu, k %zu)",
                     product_names[kind], accumulate ? " + C" : "", m, n, k);
            EXPECT_COMPARISON(&c, what, "common/matmul.c: each element is "
                              "a sum over k of A(i,k) B(k,j)");
        }
        free(A);
        free(B);
        free(C);
        free(C0);
        free(expected);
        free(got);
        free(bound);
    }
}
END_TEST

/* Every element is summed by one thread in a fixed order, so the bits do
 * not depend on how many threads share the rows. */
START_TEST(matmul_bits_independent_of_threads)
{
    product_kind kind = (product_kind)_i;
    for (size_t shape = 1; shape < sizeof matmul_shapes /
                                   sizeof matmul_shapes[0]; shape++) {
        size_t m = matmul_shapes[shape][0], n = matmul_shapes[shape][1],
               k = matmul_shapes[shape][2];
        float *A = floats(m * k), *B = floats(k * n), *one = floats(m * n),
              *four = floats(m * n);
        fill_random(A, m * k, 3);
        fill_random(B, k * n, 4);
        fill_random(one, m * n, 5);
        memcpy(four, one, m * n * sizeof *one);
        omp_set_num_threads(1);
        run_product(kind, m, n, k, A, B, one, 1);
        omp_set_num_threads(4);
        run_product(kind, m, n, k, A, B, four, 1);
        for (size_t e = 0; e < m * n; e++)
            ck_assert_msg(memcmp(&one[e], &four[e], sizeof(float)) == 0,
                          "%s, %zu x %zu x %zu: C[%zu][%zu] is %.9g with 1 "
                          "thread, %.9g with 4", product_names[kind], m, n, k,
                          e / n, e % n, one[e], four[e]);
        free(A);
        free(B);
        free(one);
        free(four);
    }
}
END_TEST

/* ---- mlp.h ---- */

enum { MAX_NAIVE_WIDTH = 256 };
static const double gelu_scale_double = 0.7978845608028654;

/* The loss of mlp_step, computed plainly in double from the same float
 * parameters: one sample at a time, every sum a plain loop, softmax
 * straight from its definition after subtracting the largest logit.
 * pattern, when not NULL, receives for each hidden unit of each sample
 * whether its pre-activation is positive (where ReLU is on). */
static double naive_loss(const mlp *model, const float *inputs,
                         const int *labels, size_t batch,
                         unsigned char *pattern)
{
    double total = 0.0;
    size_t marks = 0;
    for (size_t b = 0; b < batch; b++) {
        double in[MAX_NAIVE_WIDTH], out[MAX_NAIVE_WIDTH] = { 0 };
        for (int i = 0; i < model->config.inputs; i++)
            in[i] = inputs[b * (size_t)model->config.inputs + (size_t)i];
        for (int l = 0; l < model->layer_count; l++) {
            const mlp_layer *layer = &model->layers[l];
            ck_assert(layer->out <= MAX_NAIVE_WIDTH);
            const float *W = &model->params[layer->weights];
            const float *bias = &model->params[layer->biases];
            for (int j = 0; j < layer->out; j++) {
                double sum = bias[j];
                for (int i = 0; i < layer->in; i++)
                    sum += (double)W[(size_t)j * (size_t)layer->in +
                                     (size_t)i] * in[i];
                out[j] = sum;
            }
            if (l == model->layer_count - 1)
                break;
            for (int j = 0; j < layer->out; j++) {
                double x = out[j];
                if (pattern != NULL)
                    pattern[marks++] = x > 0.0;
                if (model->config.activation == ACTIVATION_RELU)
                    in[j] = x > 0.0 ? x : 0.0;
                else
                    in[j] = 0.5 * x * (1.0 + tanh(gelu_scale_double *
                                                  (x + 0.044715 * x * x * x)));
            }
        }
        double largest = out[0];
        for (int c = 1; c < model->config.classes; c++)
            if (out[c] > largest)
                largest = out[c];
        double sum = 0.0;
        for (int c = 0; c < model->config.classes; c++)
            sum += exp(out[c] - largest);
        total += -(out[labels[b]] - largest - log(sum));
    }
    return total / (double)batch;
}

/* The small model of the gradient checks, its batch, and its labels. */
enum { SMALL_INPUTS = 5, SMALL_WIDTH = 7, SMALL_CLASSES = 3, SMALL_BATCH = 4 };
static const int small_labels[SMALL_BATCH] = { 0, 2, 1, 2 };

static void make_small(mlp *model, activation_kind activation,
                       float inputs[SMALL_BATCH * SMALL_INPUTS])
{
    mlp_config config = { SMALL_INPUTS, SMALL_CLASSES, 2, SMALL_WIDTH,
                          activation };
    char error[256] = "";
    ck_assert_msg(mlp_create(model, &config, SMALL_BATCH, error,
                             sizeof error) == 0, "mlp_create: %s", error);
    mlp_init(model, 7);
    /* Biases are zero after mlp_init; small nonzero ones exercise them. */
    for (int l = 0; l < model->layer_count; l++)
        for (int j = 0; j < model->layers[l].out; j++)
            model->params[model->layers[l].biases + (size_t)j] =
                (float)(0.1 * rng_at_signed(8, (uint64_t)l, (uint64_t)j));
    for (int k = 0; k < SMALL_BATCH * SMALL_INPUTS; k++)
        inputs[k] = (float)rng_at_signed(9, (uint64_t)k, 0);
}

/* The step used for parameter k: 1e-2 of the layer's parameter scale
 * (mlp_init's sqrt(6/in) for weights; biases are 0.1 here, scale 1). */
static double finite_difference_step(const mlp *model, size_t k)
{
    for (int l = 0; l < model->layer_count; l++) {
        const mlp_layer *layer = &model->layers[l];
        if (k < layer->biases)
            return 1e-2 * sqrt(6.0 / layer->in);
        if (k < layer->biases + (size_t)layer->out)
            return 1e-2;
    }
    return 1e-2;
}

/* Backward against central differences of the forward, for every
 * parameter of the small model (122 of them), with ReLU and with GELU.
 *
 * The differences are taken of mlp_step's float loss, with h = 1e-2 of
 * the parameter's scale. Their error has two parts. Truncation: (L(p+h) -
 * L(p-h)) / 2h = L'(p) + h^2 L'''(p) / 6 + ..., and L''' is of order 1
 * here (inputs and weights of order 1), so about 2e-5. Rounding: the float
 * forward gives each L with an error of a few dozen roundings of relative
 * size u = 6e-8 (|L| is about 1): at most about 1e-6 in the difference,
 * divided by 2h = 2e-2, about 5e-5. The float backward's own error is
 * relative, some k u with k < 20: negligible. So |difference - gradient|
 * <= 2e-4 + 1e-3 |gradient| allows both with a margin of two to three (the
 * worst seen is 3e-5), while a wrong gradient (a missing term, a
 * transposed product, a wrong derivative, a bias gradient off by 1%) is
 * off by more.
 *
 * ReLU has kinks: a difference across a kink measures neither side. The
 * parameters whose step moves any hidden pre-activation of the batch
 * across zero (the naive forward in double shows it) are skipped; the test
 * requires that at most a tenth are. */
START_TEST(mlp_gradient_matches_finite_differences)
{
    activation_kind activation = _i == 0 ? ACTIVATION_RELU : ACTIVATION_GELU;
    const char *name = _i == 0 ? "ReLU" : "GELU";
    mlp model;
    float inputs[SMALL_BATCH * SMALL_INPUTS];
    make_small(&model, activation, inputs);
    const size_t count = model.parameter_count;
    ck_assert_uint_eq(count, (5 * 7 + 7) + (7 * 7 + 7) + (7 * 3 + 3));

    float loss = mlp_step(&model, inputs, small_labels, SMALL_BATCH, 1, NULL);
    ck_assert_msg(isfinite(loss), "loss is %g", loss);
    double *analytic = doubles(count);
    for (size_t k = 0; k < count; k++)
        analytic[k] = model.grads[k];

    enum { PATTERN = SMALL_BATCH * 2 * SMALL_WIDTH };
    unsigned char base[PATTERN], plus[PATTERN], minus[PATTERN];
    naive_loss(&model, inputs, small_labels, SMALL_BATCH, base);
    size_t skipped = 0;
    double worst = 0.0;
    for (size_t k = 0; k < count; k++) {
        const float saved = model.params[k];
        const double h = finite_difference_step(&model, k);
        model.params[k] = (float)(saved + h);
        double step_up = (double)model.params[k] - saved;
        float loss_up = mlp_step(&model, inputs, small_labels, SMALL_BATCH,
                                 0, NULL);
        naive_loss(&model, inputs, small_labels, SMALL_BATCH, plus);
        model.params[k] = (float)(saved - h);
        double step_down = saved - (double)model.params[k];
        float loss_down = mlp_step(&model, inputs, small_labels,
                                   SMALL_BATCH, 0, NULL);
        naive_loss(&model, inputs, small_labels, SMALL_BATCH, minus);
        model.params[k] = saved;
        if (activation == ACTIVATION_RELU &&
            (memcmp(base, plus, PATTERN) != 0 ||
             memcmp(base, minus, PATTERN) != 0)) {
            skipped++;
            continue;
        }
        /* The steps actually taken, after rounding p +- h to float. */
        double difference = ((double)loss_up - loss_down) /
                            (step_up + step_down);
        double error = fabs(difference - analytic[k]);
        double allowed = 2e-4 + 1e-3 * fabs(analytic[k]);
        if (error / allowed > worst)
            worst = error / allowed;
        ck_assert_msg(error <= allowed, "%s: gradient of parameter %zu is "
                      "%.6g, central difference %.6g (error %.3g, allowed "
                      "%.3g)", name, k, analytic[k], difference, error,
                      allowed);
    }
    ck_assert_msg(skipped <= count / 10, "%s: %zu of %zu parameters skipped "
                  "near a ReLU kink: too many to trust the check", name,
                  skipped, count);
    free(analytic);
    mlp_free(&model);
}
END_TEST

/* mlp_step's loss and its count of right answers against the naive double
 * forward, on the small model and on lesson 05's default shape (64 inputs,
 * two hidden layers of 128, 10 classes, batch 64). The float forward's
 * logits err by at most about gamma_(in+1) times the sum of the magnitudes
 * of their terms, layer after layer: some 1e-5 relative for dot products
 * of length 128. A logit's error moves the loss by at most as much (the
 * softmax's gradient has entries of magnitude below 1, summing to at most
 * 2 in absolute value), so 1e-4 (1 + |loss|) is a safe bound, and a wrong
 * forward (a missing bias, a wrong activation) misses it by far. */
START_TEST(mlp_loss_matches_naive_double)
{
    for (int activation = 0; activation <= 1; activation++) {
        mlp model;
        float inputs[SMALL_BATCH * SMALL_INPUTS];
        make_small(&model, (activation_kind)activation, inputs);
        int correct = -1;
        float loss = mlp_step(&model, inputs, small_labels, SMALL_BATCH, 0,
                              &correct);
        double expected = naive_loss(&model, inputs, small_labels,
                                     SMALL_BATCH, NULL);
        ck_assert_msg(fabs(loss - expected) <= 1e-5 * (1 + fabs(expected)),
                      "small model, %s: loss %.9g, naive double %.9g",
                      activation ? "GELU" : "ReLU", loss, expected);
        ck_assert(correct >= 0 && correct <= SMALL_BATCH);
        mlp_free(&model);
    }

    enum { BATCH = 64, INPUTS = 64, CLASSES = 10 };
    mlp model;
    mlp_config config = { INPUTS, CLASSES, 2, 128, ACTIVATION_RELU };
    char error[256] = "";
    ck_assert_msg(mlp_create(&model, &config, BATCH, error, sizeof error) == 0,
                  "%s", error);
    mlp_init(&model, 3);
    float *inputs = floats(BATCH * INPUTS);
    int labels[BATCH];
    fill_random(inputs, BATCH * INPUTS, 4);
    for (int b = 0; b < BATCH; b++)
        labels[b] = b % CLASSES;
    int correct = -1;
    float loss = mlp_step(&model, inputs, labels, BATCH, 1, &correct);
    double expected = naive_loss(&model, inputs, labels, BATCH, NULL);
    ck_assert_msg(fabs(loss - expected) <= 1e-4 * (1 + fabs(expected)),
                  "64-128-128-10: loss %.9g, naive double %.9g", loss,
                  expected);
    /* The count of right answers, from the naive logits' arg max. */
    int naive_correct = 0;
    for (int b = 0; b < BATCH; b++) {
        int single_label[1];
        double best = -INFINITY;
        int best_class = 0;
        for (int c = 0; c < CLASSES; c++) {
            single_label[0] = c;
            /* The class with the smallest loss has the largest logit. */
            double score = -naive_loss(&model, &inputs[b * INPUTS],
                                       single_label, 1, NULL);
            if (score > best) {
                best = score;
                best_class = c;
            }
        }
        naive_correct += best_class == labels[b];
    }
    ck_assert_int_eq(correct, naive_correct);
    free(inputs);
    mlp_free(&model);
}
END_TEST

/* grads are overwritten, not accumulated: whatever they held before, a
 * step leaves the same bits; and the same batch twice gives the same bits.
 * Also: the results do not depend on the number of threads. */
START_TEST(mlp_grads_overwritten_and_thread_independent)
{
    enum { BATCH = 48, INPUTS = 64, CLASSES = 10 };
    mlp model;
    mlp_config config = { INPUTS, CLASSES, 2, 96, ACTIVATION_GELU };
    char error[256] = "";
    ck_assert_msg(mlp_create(&model, &config, BATCH, error, sizeof error) == 0,
                  "%s", error);
    mlp_init(&model, 5);
    const size_t count = model.parameter_count;
    float *inputs = floats(BATCH * INPUTS), *first = floats(count);
    int labels[BATCH];
    fill_random(inputs, BATCH * INPUTS, 6);
    for (int b = 0; b < BATCH; b++)
        labels[b] = (b * 7) % CLASSES;

    omp_set_num_threads(1);
    float loss_one = mlp_step(&model, inputs, labels, BATCH, 1, NULL);
    memcpy(first, model.grads, count * sizeof *first);
    for (size_t k = 0; k < count; k++)
        model.grads[k] = 1e30f;
    omp_set_num_threads(4);
    float loss_four = mlp_step(&model, inputs, labels, BATCH, 1, NULL);
    ck_assert_msg(memcmp(&loss_one, &loss_four, sizeof loss_one) == 0,
                  "loss %.9g with 1 thread, %.9g with 4", loss_one, loss_four);
    for (size_t k = 0; k < count; k++)
        ck_assert_msg(memcmp(&first[k], &model.grads[k], sizeof(float)) == 0,
                      "grads[%zu] is %.9g after a step from garbage (4 "
                      "threads), %.9g from a fresh model (1 thread): grads "
                      "must be overwritten, and not depend on threads", k,
                      model.grads[k], first[k]);
    mlp_step(&model, inputs, labels, BATCH, 1, NULL);
    ck_assert_msg(memcmp(first, model.grads, count * sizeof *first) == 0,
                  "the same batch twice gave other gradients: accumulated?");
    free(inputs);
    free(first);
    mlp_free(&model);
}
END_TEST

/* A batch of 0, larger than max_batch, or a label out of range returns
 * NAN and leaves grads and *correct alone. */
START_TEST(mlp_step_refuses_bad_batches)
{
    mlp model;
    float inputs[SMALL_BATCH * SMALL_INPUTS * 2];
    make_small(&model, ACTIVATION_RELU, inputs);
    memcpy(&inputs[SMALL_BATCH * SMALL_INPUTS], inputs,
           sizeof(float) * SMALL_BATCH * SMALL_INPUTS);
    for (size_t k = 0; k < model.parameter_count; k++)
        model.grads[k] = 42.0f;
    int labels[2 * SMALL_BATCH] = { 0, 1, 2, 0, 1, 2, 0, 1 };
    int correct = -7;
    ck_assert(isnan(mlp_step(&model, inputs, labels, 0, 1, &correct)));
    ck_assert(isnan(mlp_step(&model, inputs, labels, SMALL_BATCH + 1, 1,
                             &correct)));
    labels[2] = SMALL_CLASSES;
    ck_assert(isnan(mlp_step(&model, inputs, labels, SMALL_BATCH, 1,
                             &correct)));
    labels[2] = -1;
    ck_assert(isnan(mlp_step(&model, inputs, labels, SMALL_BATCH, 1,
                             &correct)));
    ck_assert_int_eq(correct, -7);
    for (size_t k = 0; k < model.parameter_count; k++)
        ck_assert_msg(model.grads[k] == 42.0f, "grads[%zu] changed by a "
                      "refused step", k);
    /* A batch smaller than max_batch is fine. */
    labels[2] = 2;
    ck_assert(isfinite(mlp_step(&model, inputs, labels, 1, 1, &correct)));
    mlp_free(&model);
}
END_TEST

/* Parameter k is a function of (seed, k): the formula itself, the same
 * bits for two models of one seed, others for another seed. */
START_TEST(mlp_init_is_a_function_of_seed_and_index)
{
    mlp_config config = { 6, 4, 1, 9, ACTIVATION_RELU };
    mlp one, two, other;
    char error[256] = "";
    ck_assert_msg(mlp_create(&one, &config, 3, error, sizeof error) == 0 &&
                  mlp_create(&two, &config, 3, error, sizeof error) == 0 &&
                  mlp_create(&other, &config, 3, error, sizeof error) == 0,
                  "%s", error);
    for (size_t k = 0; k < two.parameter_count; k++)
        two.params[k] = -99.0f; /* init must overwrite everything */
    mlp_init(&one, 11);
    mlp_init(&two, 11);
    mlp_init(&other, 12);
    ck_assert_uint_eq(one.parameter_count, (6 * 9 + 9) + (9 * 4 + 4));
    ck_assert(memcmp(one.params, two.params,
                     one.parameter_count * sizeof(float)) == 0);
    size_t same = 0;
    for (int l = 0; l < one.layer_count; l++) {
        const mlp_layer *layer = &one.layers[l];
        double scale = sqrt(6.0 / layer->in);
        for (size_t k = layer->weights; k < layer->biases; k++) {
            float expected = (float)(scale * rng_at_signed(11, k, 0));
            ck_assert_msg(one.params[k] == expected, "params[%zu] is %.9g, "
                          "not sqrt(6/%d) * rng_at_signed(seed, %zu, 0) = "
                          "%.9g", k, one.params[k], layer->in, k, expected);
            ck_assert(fabsf(one.params[k]) <= (float)scale);
            same += one.params[k] == other.params[k];
        }
        for (int j = 0; j < layer->out; j++)
            ck_assert(one.params[layer->biases + (size_t)j] == 0.0f);
    }
    ck_assert_msg(same == 0, "%zu weights equal under seeds 11 and 12", same);
    mlp_free(&one);
    mlp_free(&two);
    mlp_free(&other);
}
END_TEST

/* The layout of the flat buffer, the ledger's categories, and mlp_free. */
START_TEST(mlp_create_lays_out_and_accounts)
{
    size_t parameters0 = memory_ledger_current(MEMORY_PARAMETERS);
    size_t gradients0 = memory_ledger_current(MEMORY_GRADIENTS);
    size_t activations0 = memory_ledger_current(MEMORY_ACTIVATIONS);
    mlp_config config = { 5, 3, 2, 7, ACTIVATION_RELU };
    mlp model;
    char error[256] = "";
    ck_assert_msg(mlp_create(&model, &config, 4, error, sizeof error) == 0,
                  "%s", error);
    ck_assert_int_eq(model.layer_count, 3);
    size_t offset = 0;
    for (int l = 0; l < 3; l++) {
        const mlp_layer *layer = &model.layers[l];
        ck_assert_int_eq(layer->in, l == 0 ? 5 : 7);
        ck_assert_int_eq(layer->out, l == 2 ? 3 : 7);
        ck_assert_uint_eq(layer->weights, offset);
        offset += (size_t)layer->in * (size_t)layer->out;
        ck_assert_uint_eq(layer->biases, offset);
        offset += (size_t)layer->out;
    }
    ck_assert_uint_eq(model.parameter_count, offset);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_PARAMETERS),
                      parameters0 + offset * sizeof(float));
    ck_assert_uint_eq(memory_ledger_current(MEMORY_GRADIENTS),
                      gradients0 + offset * sizeof(float));
    ck_assert_uint_gt(memory_ledger_current(MEMORY_ACTIVATIONS),
                      activations0);
    mlp_free(&model);
    ck_assert(model.params == NULL && model.layers == NULL);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_PARAMETERS), parameters0);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_GRADIENTS), gradients0);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_ACTIVATIONS),
                      activations0);

    /* Logistic regression: no hidden layer, width ignored. */
    mlp_config logistic = { 4, 2, 0, 0, ACTIVATION_RELU };
    ck_assert_msg(mlp_create(&model, &logistic, 1, error, sizeof error) == 0,
                  "%s", error);
    ck_assert_uint_eq(model.parameter_count, 4 * 2 + 2);
    mlp_free(&model);
}
END_TEST

START_TEST(mlp_create_refuses_bad_configs)
{
    static const struct {
        mlp_config config;
        size_t max_batch;
        const char *says;
    } cases[] = {
        { { 0, 3, 1, 4, ACTIVATION_RELU }, 8, "inputs must be at least 1" },
        { { 5, 1, 1, 4, ACTIVATION_RELU }, 8, "classes must be at least 2" },
        { { 5, 3, -1, 4, ACTIVATION_RELU }, 8, "hidden_layers must be 0" },
        { { 5, 3, 2, 0, ACTIVATION_RELU }, 8, "width must be at least 1" },
        { { 5, 3, 1, 4, (activation_kind)7 }, 8, "activation must be" },
        { { 5, 3, 1, 4, ACTIVATION_RELU }, 0, "max_batch must be at least 1" },
        { { 5, 3, 1, 4, ACTIVATION_RELU }, SIZE_MAX / 2, "overflows" },
        { { 1 << 30, 3, 1 << 20, 1 << 30, ACTIVATION_RELU }, 1, "overflows" },
#if !defined(__SANITIZE_ADDRESS__)
        /* 2^62 bytes: the allocator says no (AddressSanitizer's aborts
         * instead, so the sanitizer build leaves this case out). */
        { { 1 << 30, 3, 1, 1 << 30, ACTIVATION_RELU }, 1, "no memory" },
#endif
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mlp model;
        char error[256] = "";
        int result = mlp_create(&model, &cases[k].config, cases[k].max_batch,
                                error, sizeof error);
        ck_assert_msg(result == -1, "case %zu accepted", k);
        ck_assert_msg(strstr(error, cases[k].says) != NULL && strchr(error,
                      '\n') == NULL, "case %zu: message '%s' lacks '%s'", k,
                      error, cases[k].says);
        ck_assert(model.params == NULL && model.layers == NULL);
        mlp_free(&model); /* harmless after a failure */
    }
}
END_TEST

/* mlp_step_hooked: the hook sees each layer once, last first, with its
 * slice of grads complete; scribbling on the slice afterwards (as a
 * non-blocking reduction may) changes no other layer's gradient. */
typedef struct {
    int calls;
    int layers[8];
    size_t offsets[8], counts[8];
    float *copy;             /* each slice as the hook received it */
} hook_record;

static void record_layer(int layer, float *slice, size_t count, void *context)
{
    hook_record *record = context;
    ck_assert(record->calls < 8);
    record->layers[record->calls] = layer;
    record->counts[record->calls] = count;
    record->calls++;
    memcpy(record->copy, slice, count * sizeof *slice);
    record->copy += count;
    for (size_t k = 0; k < count; k++)
        slice[k] = NAN;
}

START_TEST(mlp_hook_sees_each_finished_layer)
{
    mlp model;
    float inputs[SMALL_BATCH * SMALL_INPUTS];
    make_small(&model, ACTIVATION_GELU, inputs);
    const size_t count = model.parameter_count;
    float *reference = floats(count), *seen = floats(count);
    float loss = mlp_step(&model, inputs, small_labels, SMALL_BATCH, 1, NULL);
    memcpy(reference, model.grads, count * sizeof *reference);
    hook_record record = { .calls = 0, .copy = seen };
    float hooked = mlp_step_hooked(&model, inputs, small_labels, SMALL_BATCH,
                                   NULL, record_layer, &record);
    ck_assert(memcmp(&loss, &hooked, sizeof loss) == 0);
    ck_assert_int_eq(record.calls, model.layer_count);
    size_t at = 0;
    for (int call = 0; call < record.calls; call++) {
        int l = model.layer_count - 1 - call;
        const mlp_layer *layer = &model.layers[l];
        ck_assert_int_eq(record.layers[call], l);
        ck_assert_uint_eq(record.counts[call],
                          (size_t)layer->out * (size_t)(layer->in + 1));
        ck_assert_msg(memcmp(&seen[at], &reference[layer->weights],
                             record.counts[call] * sizeof(float)) == 0,
                      "layer %d's slice differs from mlp_step's gradient", l);
        at += record.counts[call];
    }
    free(reference);
    free(seen);
    mlp_free(&model);
}
END_TEST

/* ---- optimizer.h ---- */

/* One step of SGD with momentum against the formula in double, with the
 * float constants. velocity = fl(fl(mu v) + g): two roundings, so within
 * 2u (|mu v| + |g|); param = fl(p - fl(lr velocity)): two more, plus lr
 * times velocity's error, so within 2u |p| + 4u lr (|mu v| + |g|) (about
 * two ulps of p). */
START_TEST(sgd_momentum_step_by_hand)
{
    enum { N = 5 };
    float params[N] = { 1.0f, -0.5f, 0.25f, 3.0f, -2.0f };
    const float grads[N] = { 0.1f, -0.2f, 0.3f, -0.4f, 0.05f };
    float velocity[N] = { 0.5f, 0.25f, -1.0f, 0.0f, 2.0f };
    const float p0[N] = { 1.0f, -0.5f, 0.25f, 3.0f, -2.0f };
    const float v0[N] = { 0.5f, 0.25f, -1.0f, 0.0f, 2.0f };
    const sgd_config config = { 0.1f, 0.9f };
    sgd_step(&config, params, grads, velocity, N);
    const double mu = config.momentum, lr = config.learning_rate;
    for (int i = 0; i < N; i++) {
        double v = mu * v0[i] + grads[i];
        double p = p0[i] - lr * v;
        double terms = fabs(mu * v0[i]) + fabs(grads[i]);
        ck_assert_msg(fabs(velocity[i] - v) <= 2 * float_u * terms,
                      "velocity[%d] %.9g, expected %.9g", i, velocity[i], v);
        ck_assert_msg(fabs(params[i] - p) <= 2 * float_u * fabs(p0[i]) +
                      4 * float_u * lr * terms, "params[%d] %.9g, expected "
                      "%.9g", i, params[i], p);
    }
    /* Momentum 0 is plain SGD. */
    float p[1] = { 1.0f }, v[1] = { 123.0f };
    const float g[1] = { 0.5f };
    const sgd_config plain = { 0.5f, 0.0f };
    sgd_step(&plain, p, g, v, 1);
    ck_assert(p[0] == 0.75f && v[0] == 0.5f);
}
END_TEST

/* Two AdamW steps against the formulas in double, with the float
 * constants:
 *   m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
 *   m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t),
 *   p -= lr (m_hat / (sqrt(v_hat) + eps) + wd p).
 * Each float operation rounds once (relative error at most u): m takes 3
 * roundings of nonnegative-signed terms here, v 4; the ratio m_hat /
 * (sqrt(v_hat) + eps) about 10 more (two corrections, two divisions, a
 * square root, an addition), plus the moments' errors carried from step 1:
 * within 24u of its size. The new parameter rounds once more. So the
 * bounds are 4u of each moment's terms and 2u |p| + 24u lr (|ratio| + wd
 * |p|) for the parameter: two or three ulps of it. */
START_TEST(adamw_two_steps_by_hand)
{
    enum { N = 4 };
    float params[N] = { 0.5f, -1.5f, 2.0f, 0.125f };
    float m[N] = { 0 }, v[N] = { 0 };
    const float grads1[N] = { 0.2f, -0.3f, 1e-3f, 4.0f };
    const float grads2[N] = { 0.1f, -0.5f, 2e-3f, 3.0f };
    const adamw_config config = { 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f };
    double p[N], dm[N] = { 0 }, dv[N] = { 0 };
    for (int i = 0; i < N; i++)
        p[i] = params[i];
    const double b1 = config.beta1, b2 = config.beta2, lr =
        config.learning_rate, eps = config.epsilon, wd = config.weight_decay;
    for (long t = 1; t <= 2; t++) {
        const float *grads = t == 1 ? grads1 : grads2;
        adamw_step(&config, t, params, grads, m, v, N);
        for (int i = 0; i < N; i++) {
            double g = grads[i];
            double m_terms = fabs(b1 * dm[i]) + fabs((1 - b1) * g);
            double v_terms = fabs(b2 * dv[i]) + fabs((1 - b2) * g * g);
            dm[i] = b1 * dm[i] + (1 - b1) * g;
            dv[i] = b2 * dv[i] + (1 - b2) * g * g;
            double m_hat = dm[i] / (1 - pow(b1, (double)t));
            double v_hat = dv[i] / (1 - pow(b2, (double)t));
            double ratio = m_hat / (sqrt(v_hat) + eps);
            double bound = 2 * float_u * fabs(p[i]) +
                           24 * float_u * lr * (fabs(ratio) + wd * fabs(p[i]));
            p[i] -= lr * (ratio + wd * p[i]);
            ck_assert_msg(fabs(m[i] - dm[i]) <= 4 * float_u * m_terms,
                          "step %ld: m[%d] %.9g, expected %.9g", t, i, m[i],
                          dm[i]);
            ck_assert_msg(fabs(v[i] - dv[i]) <= 4 * float_u * v_terms,
                          "step %ld: v[%d] %.9g, expected %.9g", t, i, v[i],
                          dv[i]);
            ck_assert_msg(fabs(params[i] - p[i]) <= bound, "step %ld: "
                          "params[%d] %.9g, expected %.9g (error %.3g, "
                          "allowed %.3g)", t, i, params[i], p[i],
                          fabs(params[i] - p[i]), bound);
        }
    }
    /* The first step of Adam moves each parameter by about lr against the
     * sign of its gradient (m_hat / sqrt(v_hat) = g / |g|): a check on the
     * bias correction that needs no arithmetic. */
    float q[1] = { 0.0f }, qm[1] = { 0 }, qv[1] = { 0 };
    const float qg[1] = { 1e-4f };
    const adamw_config no_decay = { 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f };
    adamw_step(&no_decay, 1, q, qg, qm, qv, 1);
    ck_assert_msg(fabsf(q[0] + 1e-2f) < 1e-5f, "first step moved 0 to %.9g, "
                  "not about -0.01: bias correction?", q[0]);
}
END_TEST

/* ---- dataset.h ---- */

static dataset synthetic(size_t first, size_t count, int features,
                         int classes, uint64_t seed)
{
    dataset data;
    char error[256] = "";
    int result = dataset_synthetic_range(&data, first, count, features,
                                         classes, seed, error, sizeof error);
    ck_assert_msg(result == 0, "dataset_synthetic_range: %s", error);
    return data;
}

/* Sample k depends on (seed, k) only: the same bits from one call, from
 * pieces, and from dataset_synthetic; other bits from another seed. */
START_TEST(synthetic_is_deterministic_and_sliceable)
{
    enum { COUNT = 300, FEATURES = 64, CLASSES = 10 };
    dataset whole, again, other;
    char error[256] = "";
    ck_assert_msg(dataset_synthetic(&whole, COUNT, FEATURES, CLASSES, 1,
                                    error, sizeof error) == 0, "%s", error);
    again = synthetic(0, COUNT, FEATURES, CLASSES, 1);
    other = synthetic(0, COUNT, FEATURES, CLASSES, 2);
    ck_assert(whole.count == COUNT && whole.features == FEATURES &&
              whole.classes == CLASSES);
    const size_t values = (size_t)COUNT * FEATURES;
    ck_assert(memcmp(whole.inputs, again.inputs, values * sizeof(float)) == 0);
    ck_assert(memcmp(whole.labels, again.labels, COUNT * sizeof(int)) == 0);
    size_t same = 0;
    for (size_t k = 0; k < values; k++)
        same += whole.inputs[k] == other.inputs[k];
    ck_assert_msg(same == 0, "%zu features equal under seeds 1 and 2", same);

    const size_t cuts[] = { 0, 1, 37, 150, 299, 300 };
    for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts[0]; c++) {
        size_t first = cuts[c], count = cuts[c + 1] - cuts[c];
        dataset piece = synthetic(first, count, FEATURES, CLASSES, 1);
        ck_assert_msg(memcmp(piece.inputs, &whole.inputs[first * FEATURES],
                             count * FEATURES * sizeof(float)) == 0 &&
                      memcmp(piece.labels, &whole.labels[first],
                             count * sizeof(int)) == 0,
                      "samples %zu to %zu generated alone differ from the "
                      "same samples generated together", first,
                      first + count - 1);
        dataset_free(&piece);
    }

    int seen[CLASSES] = { 0 };
    for (size_t k = 0; k < COUNT; k++) {
        ck_assert_msg(whole.labels[k] >= 0 && whole.labels[k] < CLASSES,
                      "label %d of sample %zu", whole.labels[k], k);
        seen[whole.labels[k]]++;
    }
    for (int c = 0; c < CLASSES; c++)
        ck_assert_msg(seen[c] > 0, "class %d never drawn in %d samples", c,
                      COUNT);
    for (size_t k = 0; k < values; k++)
        ck_assert(isfinite(whole.inputs[k]) && fabsf(whole.inputs[k]) < 10.0f);

    dataset bad;
    ck_assert(dataset_synthetic(&bad, 10, 0, 3, 1, error, sizeof error) == -1);
    ck_assert_msg(strstr(error, "features must be at least 1") != NULL, "%s",
                  error);
    ck_assert(dataset_synthetic(&bad, 10, 4, 1, 1, error, sizeof error) == -1);
    ck_assert_msg(strstr(error, "classes must be at least 2") != NULL, "%s",
                  error);
    ck_assert(dataset_synthetic_range(&bad, SIZE_MAX, 2, 4, 3, 1, error,
                                      sizeof error) == -1);
    ck_assert(dataset_synthetic(&bad, SIZE_MAX / 2, 64, 3, 1, error,
                                sizeof error) == -1);
    ck_assert(bad.inputs == NULL && bad.labels == NULL);
    dataset_free(&whole);
    dataset_free(&again);
    dataset_free(&other);
}
END_TEST

/* Trains lesson 05's default model on the default task for `steps` steps
 * and returns its held-out accuracy (the recipe stated in dataset.h). */
static double train_default(int hidden_layers, long steps)
{
    enum { FEATURES = 64, CLASSES = 10, TRAIN = 8192, HELD = 2048, BATCH = 64 };
    dataset train = synthetic(0, TRAIN, FEATURES, CLASSES, 1);
    dataset held = synthetic(TRAIN, HELD, FEATURES, CLASSES, 1);
    mlp model;
    mlp_config config = { FEATURES, CLASSES, hidden_layers, 128,
                          ACTIVATION_RELU };
    char error[256] = "";
    ck_assert_msg(mlp_create(&model, &config, BATCH, error, sizeof error) == 0,
                  "%s", error);
    mlp_init(&model, 1);
    float *m = floats(model.parameter_count), *v = floats(model.parameter_count);
    memset(m, 0, model.parameter_count * sizeof *m);
    memset(v, 0, model.parameter_count * sizeof *v);
    const adamw_config adamw = { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f };
    for (long step = 1; step <= steps; step++) {
        size_t first = (size_t)(step - 1) * BATCH % TRAIN;
        float loss = mlp_step(&model, &train.inputs[first * FEATURES],
                              &train.labels[first], BATCH, 1, NULL);
        ck_assert_msg(isfinite(loss), "step %ld: loss %g", step, loss);
        adamw_step(&adamw, step, model.params, model.grads, m, v,
                   model.parameter_count);
    }
    double result = mlp_accuracy(&model, held.inputs, held.labels,
                                 held.count);
    free(m);
    free(v);
    mlp_free(&model);
    dataset_free(&train);
    dataset_free(&held);
    return result;
}

/* dataset.h's claim: the MLP learns the task (measured 96% after 300
 * steps; 90% required), it is not solved in one step, and a linear model
 * does not solve it (measured 10-11%; below 30% required). */
START_TEST(synthetic_is_learnable_by_mlp_not_linear)
{
    double after_one = train_default(2, 1);
    ck_assert_msg(after_one < 0.5, "held-out accuracy %.3f after one step: "
                  "the task is too easy to teach anything", after_one);
    double held_out = train_default(2, 300);
    ck_assert_msg(held_out >= 0.90, "held-out accuracy %.4f after 300 "
                  "steps, below the 90%% that dataset.h states",
                  held_out);
    double linear_accuracy = train_default(0, 300);
    ck_assert_msg(linear_accuracy < 0.30, "a linear model reached %.4f: "
                  "the task is not beyond a linear model", linear_accuracy);
}
END_TEST

/* ---- MNIST's IDX files ---- */

static void put32(unsigned char *bytes, uint32_t value)
{
    bytes[0] = (unsigned char)(value >> 24);
    bytes[1] = (unsigned char)(value >> 16);
    bytes[2] = (unsigned char)(value >> 8);
    bytes[3] = (unsigned char)value;
}

static void write_file(const char *path, const unsigned char *bytes,
                       size_t length)
{
    FILE *file = fopen(path, "wb");
    ck_assert_msg(file != NULL, "cannot create %s", path);
    ck_assert(length == 0 || fwrite(bytes, 1, length, file) == length);
    ck_assert(fclose(file) == 0);
}

/* An images file: header (magic, count, rows, cols), then `pixels` bytes
 * with values 0, 1, 2, ... (times 37, mod 256). Returns its length. */
static size_t make_images(unsigned char *bytes, uint32_t magic,
                          uint32_t count, uint32_t rows, uint32_t cols,
                          size_t pixels)
{
    put32(bytes, magic);
    put32(bytes + 4, count);
    put32(bytes + 8, rows);
    put32(bytes + 12, cols);
    for (size_t k = 0; k < pixels; k++)
        bytes[16 + k] = (unsigned char)(k * 37 % 256);
    return 16 + pixels;
}

static size_t make_labels(unsigned char *bytes, uint32_t magic,
                          uint32_t count, const unsigned char *labels,
                          size_t present)
{
    put32(bytes, magic);
    put32(bytes + 4, count);
    memcpy(bytes + 8, labels, present);
    return 8 + present;
}

typedef struct {
    char dir[HARNESS_PATH];
    char images[HARNESS_PATH + 16], labels[HARNESS_PATH + 16];
} idx_paths;

static void idx_paths_make(idx_paths *paths)
{
    harness_out_dir(paths->dir);
    snprintf(paths->images, sizeof paths->images, "%s/images", paths->dir);
    snprintf(paths->labels, sizeof paths->labels, "%s/labels", paths->dir);
}

static void idx_paths_remove(const idx_paths *paths)
{
    unlink(paths->images);
    unlink(paths->labels);
    rmdir(paths->dir);
}

START_TEST(mnist_reads_tiny_files_exactly)
{
    idx_paths paths;
    idx_paths_make(&paths);
    unsigned char images[64], labels[16];
    const unsigned char digits[3] = { 7, 0, 9 };
    write_file(paths.images, images,
               make_images(images, 0x803, 3, 2, 2, 12));
    write_file(paths.labels, labels, make_labels(labels, 0x801, 3, digits, 3));
    dataset data;
    char error[256] = "";
    int result = dataset_load_mnist(&data, paths.images, paths.labels, error,
                                    sizeof error);
    idx_paths_remove(&paths);
    ck_assert_msg(result == 0, "refused a valid file: %s", error);
    ck_assert_uint_eq(data.count, 3);
    ck_assert_int_eq(data.features, 4);
    ck_assert_int_eq(data.classes, 10);
    for (size_t k = 0; k < 12; k++)
        ck_assert_msg(data.inputs[k] == (float)(k * 37 % 256) / 255.0f,
                      "pixel %zu is %.9g, not %u/255", k, data.inputs[k],
                      (unsigned)(k * 37 % 256));
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(data.labels[k], digits[k]);
    dataset_free(&data);
    ck_assert(data.inputs == NULL && data.labels == NULL && data.count == 0);
}
END_TEST

/* Each malformed pair is refused with -1 and a one-line reason naming
 * what is wrong, never a crash (the sanitizer build reads these too). */
START_TEST(mnist_refuses_malformed_files)
{
    static const unsigned char good[3] = { 1, 2, 3 };
    static const unsigned char twelve[3] = { 1, 12, 3 };
    enum { CASES = 13 };
    for (int which = 0; which < CASES; which++) {
        idx_paths paths;
        idx_paths_make(&paths);
        unsigned char images[64] = { 0 }, labels[16] = { 0 };
        size_t image_length = make_images(images, 0x803, 3, 2, 2, 12);
        size_t label_length = make_labels(labels, 0x801, 3, good, 3);
        const char *says = NULL, *path = paths.images;
        int write_images = 1, write_labels = 1;
        switch (which) {
        case 0:
            image_length = make_images(images, 0x804, 3, 2, 2, 12);
            says = "has magic number 0x00000804, not 0x00000803";
            break;
        case 1: /* an images file given as labels */
            label_length = make_labels(labels, 0x803, 3, good, 3);
            says = "not 0x00000801: 3 dimensions, where MNIST labels have 1";
            path = paths.labels;
            break;
        case 2: /* 10 pixels: 2 whole images of 4, and half of one */
            image_length = make_images(images, 0x803, 3, 2, 2, 10);
            says = "ends after 2 of 3 images";
            break;
        case 3:
            label_length = make_labels(labels, 0x801, 3, good, 2);
            says = "ends after 2 of 3 labels";
            path = paths.labels;
            break;
        case 4:
            label_length = make_labels(labels, 0x801, 2, good, 2);
            says = "declares 3 images but labels file";
            break;
        case 5:
            image_length = make_images(images, 0x803, 1u << 31, 28, 28, 12);
            says = "declares 2147483648 images of 28 x 28: more than this "
                   "loader accepts";
            break;
        case 6:
            image_length = make_images(images, 0x803, 0xffffffffu,
                                       0xffffffffu, 0xffffffffu, 12);
            says = "more than this loader accepts";
            break;
        case 7:
            label_length = make_labels(labels, 0x801, 3, twelve, 3);
            says = "label 12 of sample 1 is not a digit";
            path = paths.labels;
            break;
        case 8:
            write_images = 0;
            says = "cannot open images file";
            break;
        case 9:
            image_length = 0;
            says = "is empty";
            break;
        case 10:
            image_length = 10;
            says = "ends inside its header";
            break;
        case 11:
            image_length = make_images(images, 0x803, 3, 0, 2, 0);
            says = "no pixels";
            break;
        case 12: /* not IDX at all: a text file */
            memcpy(images, "P2\n# a PGM image, not IDX\n", 27);
            image_length = 27;
            says = "not an IDX file of MNIST images";
            break;
        }
        if (write_images)
            write_file(paths.images, images, image_length);
        if (write_labels)
            write_file(paths.labels, labels, label_length);
        dataset data;
        char error[256] = "";
        int result = dataset_load_mnist(&data, paths.images, paths.labels,
                                        error, sizeof error);
        idx_paths_remove(&paths);
        ck_assert_msg(result == -1, "case %d: a malformed file was accepted",
                      which);
        ck_assert_msg(strstr(error, says) != NULL, "case %d: message '%s' "
                      "lacks '%s'", which, error, says);
        ck_assert_msg(strstr(error, path) != NULL, "case %d: message '%s' "
                      "does not name %s", which, error, path);
        ck_assert_msg(strchr(error, '\n') == NULL, "case %d: message is "
                      "more than one line", which);
        ck_assert(data.inputs == NULL && data.labels == NULL &&
                  data.count == 0);
    }
}
END_TEST

/* A path that is not a regular file is refused at once: a FIFO would
 * block the open until something wrote to it (train hung forever), and a
 * directory holds no data. The test's own time limit is what catches a
 * loader that blocks. */
START_TEST(mnist_refuses_paths_that_are_not_files)
{
    static const unsigned char digits[3] = { 7, 0, 9 };
    for (int which = 0; which < 3; which++) {
        idx_paths paths;
        idx_paths_make(&paths);
        unsigned char images[64], labels[16];
        const char *says, *path;
        if (which == 2) { /* labels from a FIFO, after good images */
            write_file(paths.images, images,
                       make_images(images, 0x803, 3, 2, 2, 12));
            ck_assert(mkfifo(paths.labels, 0600) == 0);
            says = "labels file '%s' is a FIFO, not a regular file";
            path = paths.labels;
        } else {
            write_file(paths.labels, labels,
                       make_labels(labels, 0x801, 3, digits, 3));
            ck_assert(which == 0 ? mkfifo(paths.images, 0600) == 0
                                 : mkdir(paths.images, 0700) == 0);
            says = which == 0
                       ? "images file '%s' is a FIFO, not a regular file"
                       : "images file '%s' is a directory, not a regular file";
            path = paths.images;
        }
        dataset data;
        char error[512] = "", want[HARNESS_PATH + 96];
        int result = dataset_load_mnist(&data, paths.images, paths.labels,
                                        error, sizeof error);
        snprintf(want, sizeof want, says, path);
        if (which == 1)
            rmdir(paths.images);
        idx_paths_remove(&paths);
        ck_assert_msg(result == -1, "case %d: accepted", which);
        ck_assert_msg(strstr(error, want) != NULL, "case %d: message '%s' "
                      "lacks '%s'", which, error, want);
        ck_assert(data.inputs == NULL && data.labels == NULL &&
                  data.count == 0);
    }
}
END_TEST

/* ---- progress.h ---- */

START_TEST(progress_writes_plain_lines_to_files)
{
    FILE *out = tmpfile();
    ck_assert_msg(out != NULL, "tmpfile failed");
    progress_line line = progress_start(out, 300);
    ck_assert_int_eq(line.interactive, 0);
    progress_report(&line, 3, 1.2345, 192);
    progress_report(&line, 4, 1.125, 256);
    progress_finish(&line);
    char text[512] = "";
    rewind(out);
    size_t length = fread(text, 1, sizeof text - 1, out);
    text[length] = '\0';
    fclose(out);
    ck_assert_msg(strstr(text, "step 3") != NULL && strstr(text, "1.2345") &&
                  strstr(text, "samples/s") != NULL, "report reads '%s'",
                  text);
    ck_assert_msg(strstr(text, "step 4/300") != NULL, "'%s'", text);
    ck_assert_msg(strchr(text, '\r') == NULL && strchr(text, '\033') == NULL,
                  "terminal codes in a file: '%s'", text);
    const char *newline = strchr(text, '\n');
    ck_assert_msg(newline != NULL && strchr(newline + 1, '\n') != NULL &&
                  text[length - 1] == '\n', "not two plain lines: '%s'",
                  text);
    ck_assert_msg(strstr(text, "step 4") > newline, "step 4 is not on the "
                  "second line: '%s'", text);
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("model");
    harness_add(suite, "matmul: A B^T against double, odd shapes",
                matmul_matches_double_reference, PRODUCT_ABT, 10);
    harness_add(suite, "matmul: A^T B against double, odd shapes",
                matmul_matches_double_reference, PRODUCT_ATB, 10);
    harness_add(suite, "matmul: A B against double, odd shapes",
                matmul_matches_double_reference, PRODUCT_AB, 10);
    harness_add(suite, "matmul: A B^T same bits on 1 and 4 threads",
                matmul_bits_independent_of_threads, PRODUCT_ABT, 10);
    harness_add(suite, "matmul: A^T B same bits on 1 and 4 threads",
                matmul_bits_independent_of_threads, PRODUCT_ATB, 10);
    harness_add(suite, "matmul: A B same bits on 1 and 4 threads",
                matmul_bits_independent_of_threads, PRODUCT_AB, 10);
    harness_add(suite, "mlp: ReLU gradient against central differences",
                mlp_gradient_matches_finite_differences, 0, 10);
    harness_add(suite, "mlp: GELU gradient against central differences",
                mlp_gradient_matches_finite_differences, 1, 10);
    harness_add(suite, "mlp: loss against a naive forward in double",
                mlp_loss_matches_naive_double, 0, 10);
    harness_add(suite, "mlp: grads overwritten, same bits on any threads",
                mlp_grads_overwritten_and_thread_independent, 0, 10);
    harness_add(suite, "mlp: bad batches and labels give NAN, grads kept",
                mlp_step_refuses_bad_batches, 0, 10);
    harness_add(suite, "mlp: init is a function of (seed, k)",
                mlp_init_is_a_function_of_seed_and_index, 0, 10);
    harness_add(suite, "mlp: layout and memory ledger",
                mlp_create_lays_out_and_accounts, 0, 10);
    harness_add(suite, "mlp: bad configurations refused with a reason",
                mlp_create_refuses_bad_configs, 0, 10);
    harness_add(suite, "mlp: hook sees each finished layer",
                mlp_hook_sees_each_finished_layer, 0, 10);
    harness_add(suite, "optimizer: SGD with momentum by hand",
                sgd_momentum_step_by_hand, 0, 10);
    harness_add(suite, "optimizer: two AdamW steps by hand",
                adamw_two_steps_by_hand, 0, 10);
    harness_add(suite, "dataset: synthetic deterministic and sliceable",
                synthetic_is_deterministic_and_sliceable, 0, 10);
    harness_add(suite, "dataset: synthetic learnable by an MLP, not linearly",
                synthetic_is_learnable_by_mlp_not_linear, 0, 60);
    harness_add(suite, "dataset: MNIST tiny files read exactly",
                mnist_reads_tiny_files_exactly, 0, 10);
    harness_add(suite, "dataset: MNIST malformed files refused",
                mnist_refuses_malformed_files, 0, 10);
    harness_add(suite, "dataset: MNIST FIFOs and directories refused at once",
                mnist_refuses_paths_that_are_not_files, 0, 5);
    harness_add(suite, "progress: plain lines in a file",
                progress_writes_plain_lines_to_files, 0, 10);
    return suite;
}
