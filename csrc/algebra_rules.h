/* algebra_rules.h — the one source of the algebra rules, shared by C and C++/CUDA.
 *
 * Every table the kernels use (blade order, Cayley signs, product paths, grade signs)
 * is derived from a metric by the functions below. C calls them at run time
 * (algebra.c, the CPU backend); CUDA evaluates the very same functions at compile time
 * (cuda/algebra_traits.cuh), so the product rules exist once.
 *
 * Blades are bitmaps: bit e-1 set means the basis vector e_e is present (e counts from 1
 * as in SPEC section 1). Shapes: D = 2^n components, G = n + 1 grades, P paths,
 * T = non-zero Cayley terms (i, j, k): e_{A_i} e_{A_k} = C[i, j, k] e_{A_j}.
 *
 * The list of supported algebras is FC_ALGEBRA_LIST: one line per algebra, and adding
 * one is one line there plus (for CUDA) one instantiation.
 */
#ifndef FC_ALGEBRA_RULES_H
#define FC_ALGEBRA_RULES_H

#ifdef __cplusplus
#define FC_CONSTEXPR constexpr
#else
#define FC_CONSTEXPR
#endif
#if defined(__CUDACC__)
#define FC_HD __host__ __device__
#else
#define FC_HD
#endif

#define FC_MAX_N 4
#define FC_MAX_D 16
#define FC_MAX_G (FC_MAX_N + 1)
#define FC_MAX_T (FC_MAX_D * FC_MAX_D)
#define FC_MAX_P ((FC_MAX_G) * (FC_MAX_G) * (FC_MAX_G))

/* X(id, name, n, m1, m2, m3, m4): the algebras of SPEC section 1, metric e_i^2 = m_i. */
#define FC_ALGEBRA_LIST(X)                   \
    X(0, "Cl(2,0)", 2, 1, 1, 0, 0)          \
    X(1, "Cl(3,0)", 3, 1, 1, 1, 0)          \
    X(2, "Cl(1,3)", 4, 1, -1, -1, -1)       \
    X(3, "Cl(3,0,1)", 4, 0, 1, 1, 1)        \
    X(4, "Cl(4,0)", 4, 1, 1, 1, 1)
#define FC_NUM_ALGEBRAS 5

static inline FC_HD FC_CONSTEXPR int fc_popcount(unsigned v)
{
    int c = 0;
    while (v) {
        c += (int)(v & 1u);
        v >>= 1;
    }
    return c;
}

/* Sign (+1/-1) of reordering the concatenated index list of blades a, b into sorted
 * order: one swap for every pair (e in a, f in b) with e > f. */
static inline FC_HD FC_CONSTEXPR int fc_reorder_sign(unsigned a, unsigned b)
{
    int swaps = 0;
    a >>= 1;
    while (a) {
        swaps += fc_popcount(a & b);
        a >>= 1;
    }
    return (swaps & 1) ? -1 : 1;
}

/* Coefficient of the product of blades a and b (bitmaps): the reorder sign times
 * m_e for each repeated index e; 0 when a repeated index squares to zero. The result
 * blade is a ^ b. */
static inline FC_HD FC_CONSTEXPR int fc_blade_product_sign(unsigned a, unsigned b, const int *metric)
{
    int s = fc_reorder_sign(a, b);
    unsigned common = a & b;
    for (int e = 0; common; ++e, common >>= 1)
        if (common & 1u)
            s *= metric[e];
    return s;
}

/* 1 when blade a precedes blade b: lower grade first, then the lexicographic order of
 * the sorted index tuples. */
static inline FC_HD FC_CONSTEXPR int fc_blade_before(unsigned a, unsigned b)
{
    int ga = fc_popcount(a), gb = fc_popcount(b);
    if (ga != gb)
        return ga < gb;
    while (a != b) {
        unsigned la = a & (~a + 1u), lb = b & (~b + 1u); /* lowest index of each */
        if (la != lb)
            return la < lb;
        a &= ~la;
        b &= ~lb;
    }
    return 0;
}

/* Fill blades[0..D) with the bitmaps in SPEC order (insertion sort: D <= 16). */
static inline FC_HD FC_CONSTEXPR void fc_blade_order(int n, unsigned *blades)
{
    int D = 1 << n;
    for (int i = 0; i < D; ++i) {
        unsigned v = (unsigned)i;
        int k = i;
        while (k > 0 && fc_blade_before(v, blades[k - 1])) {
            blades[k] = blades[k - 1];
            --k;
        }
        blades[k] = v;
    }
}

/* Position of bitmap v in the ordered blade list. */
static inline FC_HD FC_CONSTEXPR int fc_blade_index(int D, const unsigned *blades, unsigned v)
{
    for (int i = 0; i < D; ++i)
        if (blades[i] == v)
            return i;
    return -1;
}

/* Grade sign s_A = product of m_e over e in A. */
static inline FC_HD FC_CONSTEXPR int fc_grade_sign(unsigned a, const int *metric)
{
    int s = 1;
    for (int e = 0; a; ++e, a >>= 1)
        if (a & 1u)
            s *= metric[e];
    return s;
}

/* One non-zero Cayley entry: out_j += sign * w[path] * x_i * y_k. */
typedef struct fc_term {
    unsigned char i, j, k, path;
    signed char sign;
} fc_term;

/* Derive the product terms and paths of the algebra with n basis vectors and this metric.
 * terms: up to D*D entries, ordered by (i, k); path_grades: P rows of (gl, go, gr),
 * lexicographic. Returns T, writes *P. */
static inline FC_HD FC_CONSTEXPR int fc_derive_terms(int n, const int *metric, fc_term *terms,
                                                    unsigned char (*path_grades)[3], int *P)
{
    unsigned blades[FC_MAX_D] = {0};
    fc_blade_order(n, blades);
    int D = 1 << n, G = n + 1;
    /* which grade triples occur */
    int used[FC_MAX_G][FC_MAX_G][FC_MAX_G] = {0};
    for (int i = 0; i < D; ++i)
        for (int k = 0; k < D; ++k)
            if (fc_blade_product_sign(blades[i], blades[k], metric) != 0)
                used[fc_popcount(blades[i])][fc_popcount(blades[i] ^ blades[k])][fc_popcount(blades[k])] = 1;
    int index[FC_MAX_G][FC_MAX_G][FC_MAX_G] = {0};
    int p = 0;
    for (int gl = 0; gl < G; ++gl)
        for (int go = 0; go < G; ++go)
            for (int gr = 0; gr < G; ++gr)
                if (used[gl][go][gr]) {
                    index[gl][go][gr] = p;
                    path_grades[p][0] = (unsigned char)gl;
                    path_grades[p][1] = (unsigned char)go;
                    path_grades[p][2] = (unsigned char)gr;
                    ++p;
                }
    *P = p;
    int t = 0;
    for (int i = 0; i < D; ++i)
        for (int k = 0; k < D; ++k) {
            int s = fc_blade_product_sign(blades[i], blades[k], metric);
            if (s == 0)
                continue;
            unsigned r = blades[i] ^ blades[k];
            fc_term term = {0};
            term.i = (unsigned char)i;
            term.j = (unsigned char)fc_blade_index(D, blades, r);
            term.k = (unsigned char)k;
            term.path = (unsigned char)index[fc_popcount(blades[i])][fc_popcount(r)][fc_popcount(blades[k])];
            term.sign = (signed char)s;
            terms[t++] = term;
        }
    return t;
}

#endif /* FC_ALGEBRA_RULES_H */
