/* algebra_traits.cuh — compile-time algebra tables for the CUDA kernels.
 *
 * AlgebraTraits<ID> evaluates the rules of algebra_rules.h (the same functions the CPU
 * backend calls at run time) as constant expressions, so kernels loop over the product
 * terms with `#pragma unroll` and every index into a register array is a constant.
 * Adding an algebra: one line in FC_ALGEBRA_LIST and one instantiation in each launcher.
 *
 * Shapes: D components, G grades, P paths, T non-zero Cayley terms.
 */
#pragma once

#include <utility>

#include "../algebra_rules.h"

namespace fc {

struct AlgebraTable {
    int n, D, G, P, T;
    int metric[FC_MAX_N];
    unsigned char grade[FC_MAX_D];
    signed char grade_sign[FC_MAX_D];
    int grade_start[FC_MAX_G + 1];
    fc_term term[FC_MAX_T];
};

constexpr AlgebraTable make_table(int n, int m1, int m2, int m3, int m4)
{
    AlgebraTable t{};
    t.n = n;
    t.D = 1 << n;
    t.G = n + 1;
    t.metric[0] = m1;
    t.metric[1] = m2;
    t.metric[2] = m3;
    t.metric[3] = m4;
    unsigned blades[FC_MAX_D] = {0};
    fc_blade_order(n, blades);
    for (int i = 0; i < t.D; ++i) {
        t.grade[i] = (unsigned char)fc_popcount(blades[i]);
        t.grade_sign[i] = (signed char)fc_grade_sign(blades[i], t.metric);
    }
    int i = 0;
    for (int g = 0; g <= t.G; ++g) {
        while (i < t.D && t.grade[i] < g)
            ++i;
        t.grade_start[g] = i;
    }
    t.grade_start[t.G] = t.D;
    unsigned char path_grades[FC_MAX_P][3] = {};
    t.T = fc_derive_terms(n, t.metric, t.term, path_grades, &t.P);
    return t;
}

template <int ID> struct AlgebraTraits;

#define FC_TRAITS(id, name_, n_, m1, m2, m3, m4)                                   \
    template <> struct AlgebraTraits<id> {                                          \
        static constexpr AlgebraTable table = make_table(n_, m1, m2, m3, m4);        \
        static constexpr int n = n_, D = 1 << n_, G = n_ + 1;                       \
        static constexpr int P = table.P, T = table.T;                              \
    };
FC_ALGEBRA_LIST(FC_TRAITS)
#undef FC_TRAITS

/* Call f(std::integral_constant<int, I>{}) for I = 0 .. N-1, each I a compile-time constant:
 * kernels index register arrays through the table only this way, so the compiler never
 * has to keep the table (or the arrays) in local memory. */
template <class F, int... I>
__host__ __device__ __forceinline__ void static_for_impl(F &&f, std::integer_sequence<int, I...>)
{
    (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F> __host__ __device__ __forceinline__ void static_for(F &&f)
{
    static_for_impl(f, std::make_integer_sequence<int, N>{});
}

/* Dispatch a run-time algebra id to a template functor call: f.template operator()<ID>(). */
template <class F> inline auto dispatch_algebra(int id, F &&f) -> decltype(f.template operator()<0>())
{
    switch (id) {
#define FC_CASE(id_, ...) \
    case id_:             \
        return f.template operator()<id_>();
        FC_ALGEBRA_LIST(FC_CASE)
#undef FC_CASE
    }
    return f.template operator()<0>(); /* unreachable: ids are validated by the bindings */
}

} // namespace fc
