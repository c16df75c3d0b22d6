/* The --bpw allocation: a k in {2, 3, 4} per tensor under a budget of mean k, from a cost per
 * (tensor, k): the measured KL with only that tensor coded (sens.c).
 * The costs are taken as additive over tensors (the model's loss with several tensors coded is
 * the sum of each one's alone), which is what makes a per-tensor choice possible at all; the KL
 * of tinyqwen's mixes against the sum of their tensors' costs says how far that holds
 * (docs/PERFORMANCE.md, "Quantizer").
 *
 * Greedy on the cost drop per added bit, a multiple-choice knapsack heuristic: from every tensor
 * at k = 2, repeatedly take the upgrade (one tensor from its k to any higher k) with the largest
 * (cost[k] - cost[k']) / ((k' - k) * numel) that still fits.  Allowing the jump k -> k + 2 matters
 * only where a tensor's costs are not convex in k (measured costs can be: a tensor whose k = 3
 * still costs much may gain little from 3 and a lot from 4); for convex costs it takes the same
 * steps as one bit at a time.  Ties go to the earlier tensor and the smaller step. */
#include "quant.h"

#include <errno.h>
#include <math.h>
#include <string.h>

double tcq_quant_alloc(int64_t n, const int64_t *numel, const double (*cost)[3], double bpw, int *k)
{
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        k[i] = numel[i] > 0 ? 2 : 0;
        total += numel[i] > 0 ? numel[i] : 0;
    }
    if (!total) return 0;
    double used = 2.0 * (double)total;
    const double budget = bpw * (double)total;
    for (;;) {
        int64_t best = -1;
        int bk = 0;
        double bg = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!k[i]) continue;
            for (int to = k[i] + 1; to <= 4; to++) {
                const double bits = (double)(to - k[i]) * (double)numel[i];
                if (used + bits > budget) break;
                const double g = (cost[i][k[i] - 2] - cost[i][to - 2]) / bits;
                if (best < 0 || g > bg) best = i, bk = to, bg = g;
            }
        }
        if (best < 0) break;
        used += (double)(bk - k[best]) * (double)numel[best];
        k[best] = bk;
    }
    return used / (double)total;
}

/* The costs file (--save-alloc / --alloc-costs): "tcq-alloc-costs 1 MODE" then one line per
 * tensor "NAME C2 C3 C4" (%.17g: read back bit for bit), so other budgets skip the measuring. */
tcq_status tcq_quant_alloc_costs_write(const char *path, const char *mode, int64_t n, const char *const *names,
                                       const int64_t *numel, const double (*cost)[3])
{
    FILE *f = fopen(path, "w");
    if (!f) return tcq_fail(TCQ_ERR_IO, "%s: %s", path, strerror(errno));
    fprintf(f, "tcq-alloc-costs 1 %s\n", mode);   /* what the costs are ("kl") */
    for (int64_t i = 0; i < n; i++)
        if (numel[i] > 0) fprintf(f, "%s %.17g %.17g %.17g\n", names[i], cost[i][0], cost[i][1], cost[i][2]);
    const int bad = ferror(f) | fclose(f);
    return bad ? tcq_fail(TCQ_ERR_IO, "%s: write failed", path) : TCQ_OK;
}

tcq_status tcq_quant_alloc_costs_read(const char *path, int64_t n, const char *const *names, const int64_t *numel,
                                      double (*cost)[3])
{
    FILE *f = fopen(path, "r");
    if (!f) return tcq_fail(TCQ_ERR_IO, "%s: %s", path, strerror(errno));
    char line[1024], mode[32];
    tcq_status s = TCQ_OK;
    if (!fgets(line, sizeof line, f) || sscanf(line, "tcq-alloc-costs 1 %31s", mode) != 1)
        s = tcq_fail(TCQ_ERR_FORMAT, "%s: not a tcq allocation costs file", path);
    for (int64_t i = 0; i < n; i++) cost[i][0] = NAN;
    for (int ln = 2; s == TCQ_OK && fgets(line, sizeof line, f); ln++) {
        char name[512];
        double c[3];
        if (sscanf(line, "%511s %lf %lf %lf", name, &c[0], &c[1], &c[2]) != 4) {
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: line %d: want NAME C2 C3 C4", path, ln);
            break;
        }
        for (int64_t i = 0; i < n; i++)
            if (numel[i] > 0 && !strcmp(names[i], name)) memcpy(cost[i], c, sizeof c);
    }
    for (int64_t i = 0; s == TCQ_OK && i < n; i++)
        if (numel[i] > 0 && isnan(cost[i][0])) s = tcq_fail(TCQ_ERR_FORMAT, "%s: no costs for tensor %s", path, names[i]);
    fclose(f);
    return s;
}
