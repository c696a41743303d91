/* algebra.c — the run-time algebra tables for the CPU backend and the bindings.
 *
 * Each table is derived once from its metric in FC_ALGEBRA_LIST by algebra_rules.h, the
 * same functions the CUDA templates evaluate at compile time.
 */
#include <pthread.h>
#include <string.h>

#include "fc.h"

static fc_algebra algebras[FC_NUM_ALGEBRAS];
static pthread_once_t algebras_once = PTHREAD_ONCE_INIT;

static void build_one(fc_algebra *a, int id, const char *name, int n, const int *metric)
{
    memset(a, 0, sizeof *a);
    a->id = id;
    a->name = name;
    a->n = n;
    a->D = 1 << n;
    a->G = n + 1;
    for (int e = 0; e < n; ++e)
        a->metric[e] = metric[e];
    fc_blade_order(n, a->blade);
    for (int i = 0; i < a->D; ++i) {
        a->grade[i] = (unsigned char)fc_popcount(a->blade[i]);
        a->grade_sign[i] = (signed char)fc_grade_sign(a->blade[i], metric);
    }
    /* blades are sorted by grade, so each grade is one contiguous range */
    for (int g = 0, i = 0; g <= a->G; ++g) {
        while (i < a->D && a->grade[i] < g)
            ++i;
        a->grade_start[g] = i;
    }
    a->grade_start[a->G] = a->D;
    a->T = fc_derive_terms(n, metric, a->term, a->path_grades, &a->P);
}

static void build_all(void)
{
#define FC_BUILD(id, name, n, m1, m2, m3, m4)            \
    {                                                     \
        const int metric[FC_MAX_N] = {m1, m2, m3, m4};    \
        build_one(&algebras[id], id, name, n, metric);    \
    }
    FC_ALGEBRA_LIST(FC_BUILD)
#undef FC_BUILD
}

const fc_algebra *fc_algebra_get(int id)
{
    if (id < 0 || id >= FC_NUM_ALGEBRAS)
        return NULL;
    pthread_once(&algebras_once, build_all);
    return &algebras[id];
}

int fc_algebra_find(int n, const int *metric)
{
    for (int id = 0; id < FC_NUM_ALGEBRAS; ++id) {
        const fc_algebra *a = fc_algebra_get(id);
        if (a->n == n && memcmp(a->metric, metric, (size_t)n * sizeof(int)) == 0)
            return id;
    }
    return -1;
}
