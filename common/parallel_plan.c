/* The planner's layouts: see parallel_plan.h. */
#include "parallel_plan.h"

#include <stdio.h>
#include <stdlib.h>

#include "zero_memory.h"

/* a * b into *product; false when it would pass 64 bits. */
static bool times(uint64_t a, uint64_t b, uint64_t *product)
{
    return !__builtin_mul_overflow(a, b, product);
}

static bool plus(uint64_t a, uint64_t b, uint64_t *sum)
{
    return !__builtin_add_overflow(a, b, sum);
}

/* Items one rank sends, at most, in a ring reduce-scatter or allgather of
 * `items` over `ranks` under the balanced partition: all but its block,
 * the smallest of which is floor(items / ranks). */
static uint64_t ring_items(uint64_t items, uint64_t ranks)
{
    return ranks <= 1 ? 0 : items - items / ranks;
}

/* Whether (tp, pp) is a layout the planner considers: tp divides the
 * heads, pp is at most the layers, tp pp divides the devices. */
static bool is_layout(const plan_model *model, const plan_cluster *cluster,
                      uint64_t tp, uint64_t pp)
{
    return model->shape.heads % tp == 0 && pp <= model->layers &&
           cluster->devices % (tp * pp) == 0;
}

/* Whether a group of the axis has ranks on two hosts: rank
 * (d pp + p) tp + t on host rank / H. A group is the ranks that differ
 * only in the axis' own coordinate; each is compared with the group's
 * first. */
static bool axis_crosses(int axis, uint64_t tp, uint64_t pp,
                         uint64_t devices, uint64_t per_host)
{
    for (uint64_t rank = 0; rank < devices; rank++) {
        const uint64_t t = rank % tp, p = rank / tp % pp;
        const uint64_t first = axis == PLAN_TP   ? rank - t
                               : axis == PLAN_PP ? rank - p * tp
                                                 : rank % (tp * pp);
        if (first / per_host != rank / per_host)
            return true;
    }
    return false;
}

int plan_layout_of(const plan_model *model, const plan_cluster *cluster,
                   uint64_t tp, uint64_t pp, int stage, plan_layout *layout,
                   char *error, size_t error_len)
{
    const transformer_shape *shape = &model->shape;
    if (model->parameters == 0 || model->layers == 0 ||
        model->micro_batches == 0 || cluster->devices == 0 ||
        cluster->per_host == 0 || tp == 0 || pp == 0) {
        snprintf(error, error_len, "a plan needs parameters, layers, "
                 "micro-batches, devices, devices a host, tp and pp of at "
                 "least 1");
        return -1;
    }
    if (!is_layout(model, cluster, tp, pp)) {
        snprintf(error, error_len, "tp = %llu and pp = %llu: tp must divide "
                 "the %llu heads, pp be at most the %llu layers, and tp x pp "
                 "divide the %llu devices", (unsigned long long)tp,
                 (unsigned long long)pp, (unsigned long long)shape->heads,
                 (unsigned long long)model->layers,
                 (unsigned long long)cluster->devices);
        return -1;
    }
    plan_layout l = { .tp = tp, .pp = pp, .dp = cluster->devices / (tp * pp),
                      .stage = stage };
    l.stage_layers = (model->layers + pp - 1) / pp;
    /* Ψd = ceil(Ψ Lp / (L tp)). */
    uint64_t numerator, denominator;
    bool fits = times(model->parameters, l.stage_layers, &numerator) &&
                times(model->layers, tp, &denominator);
    if (fits)
        l.parameters = numerator / denominator +
                       (numerator % denominator != 0);

    zero_model device_model = { l.parameters, model->parameter_bytes,
                                model->gradient_bytes,
                                model->optimizer_bytes };
    zero_bytes state, layer;
    if (!fits || zero_bytes_per_rank(&device_model, stage, l.dp, &state,
                                     error, error_len) != 0)
        goto too_big;
    l.state = zero_bytes_ceiling(state);
    if (transformer_activation_bytes(shape, TENSOR_SEQUENCE_PARALLEL, tp,
                                     &layer, error, error_len) != 0)
        return -1;
    const uint64_t in_flight = model->gpipe || model->micro_batches < pp
                                   ? model->micro_batches
                                   : pp;
    uint64_t rows, row_bytes, items;
    fits = times(l.stage_layers, in_flight, &l.activations) &&
           times(l.activations, zero_bytes_ceiling(layer), &l.activations) &&
           times(shape->sequence, shape->micro_batch, &rows) &&
           times(2, shape->hidden, &row_bytes) &&
           /* tp: 8 rings a layer and micro-batch, of rows of h values */
           times(8, model->micro_batches, &items) &&
           times(items, l.stage_layers, &items) &&
           times(items, row_bytes, &items) &&
           times(items, ring_items(rows, tp), &l.sent[PLAN_TP]) &&
           /* pp: the first rows' block each way, once at an end stage */
           times(model->micro_batches, pp >= 3 ? 2 : pp == 2 ? 1 : 0,
                 &items) &&
           times(items, (rows + tp - 1) / tp, &items) &&
           times(items, row_bytes, &l.sent[PLAN_PP]);
    const uint64_t per_parameter =
        stage == 0   ? 2 * model->gradient_bytes
        : stage < 3  ? model->gradient_bytes + model->parameter_bytes
                     : model->gradient_bytes + 2 * model->parameter_bytes;
    fits = fits && times(ring_items(l.parameters, l.dp), per_parameter,
                         &l.sent[PLAN_DP]);
    if (!fits)
        goto too_big;
    for (int axis = 0; axis < PLAN_AXES; axis++) {
        l.crosses[axis] = axis_crosses(axis, tp, pp, cluster->devices,
                                       cluster->per_host);
        if (l.crosses[axis] && !plus(l.crossing, l.sent[axis], &l.crossing))
            goto too_big;
    }
    uint64_t held;
    l.fits = plus(l.state, l.activations, &held) && held <= cluster->capacity;
    *layout = l;
    return 0;
too_big:
    snprintf(error, error_len, "tp = %llu, pp = %llu, ZeRO stage %d: the "
             "bytes would pass 2^64", (unsigned long long)tp,
             (unsigned long long)pp, stage);
    return -1;
}

/* Fewer bytes crossing hosts first, then fewer bytes held, then the
 * smaller tp, pp and stage. */
static int compare_layouts(const void *a_, const void *b_)
{
    const plan_layout *a = a_, *b = b_;
    const uint64_t held_a = a->state + a->activations;
    const uint64_t held_b = b->state + b->activations;
    if (a->crossing != b->crossing)
        return a->crossing < b->crossing ? -1 : 1;
    if (held_a != held_b)
        return held_a < held_b ? -1 : 1;
    if (a->tp != b->tp)
        return a->tp < b->tp ? -1 : 1;
    if (a->pp != b->pp)
        return a->pp < b->pp ? -1 : 1;
    return (a->stage > b->stage) - (a->stage < b->stage);
}

int plan_layouts(const plan_model *model, const plan_cluster *cluster,
                 plan_layout *layouts, size_t most, size_t *count,
                 char *error, size_t error_len)
{
    /* Every fitting layout, sorted, then the first `most`. */
    size_t held = 0, room = 0;
    plan_layout *all = NULL;
    for (uint64_t tp = 1; tp <= cluster->devices; tp++)
        for (uint64_t pp = 1; pp <= cluster->devices / tp; pp++) {
            if (!is_layout(model, cluster, tp, pp))
                continue;
            const bool one_replica = cluster->devices / (tp * pp) == 1;
            for (int stage = 0; stage < (one_replica ? 1 : ZERO_STAGES);
                 stage++) {
                plan_layout l;
                if (plan_layout_of(model, cluster, tp, pp, stage, &l, error,
                                   error_len) != 0) {
                    free(all);
                    return -1;
                }
                if (!l.fits)
                    continue;
                if (held == room) {
                    room = room ? 2 * room : 64;
                    plan_layout *grown = realloc(all, room * sizeof *all);
                    if (grown == NULL) {
                        free(all);
                        snprintf(error, error_len, "no memory for %zu "
                                 "layouts", room);
                        return -1;
                    }
                    all = grown;
                }
                all[held++] = l;
            }
        }
    if (held > 0)
        qsort(all, held, sizeof *all, compare_layouts);
    for (size_t k = 0; k < held && k < most; k++)
        layouts[k] = all[k];
    *count = held;
    free(all);
    return 0;
}
