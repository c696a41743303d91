/* gw_sched_check.cu — the one-path weight gradient's schedules (fcgp_gw_sched.h: PseqSched's lists,
 * whole units to the least-loaded block or one round of weighted segments, and make_gw_sched's
 * rounds) checked on the host over a sweep of shapes, algebras and SM counts: every step of every
 * unit taken by exactly one block; each segment before a unit's last putting into a slot of its
 * unit's and the last reading back exactly the unit's other segments, each from a block of lower
 * index whose piece there puts without waiting (its one piece, or in rounds the same round), so
 * no wait can close a cycle and each unit is summed once in a fixed order; whole units with every
 * block starting on one of the heaviest (as a round starts together); no more blocks than SMs;
 * steps(b) the ring's length; the lists chosen only where they cost less (pseq_load). Prints the
 * issue-4 shapes' schedules. Built and run by tests/test_lab_builds.py (host code only: no GPU).
 *   nvcc -std=c++17 -Icsrc tests/gw_sched_check.cu -o gw_sched_check && ./gw_sched_check
 */
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/fcgp_wgmma_gw_pseq.cuh"

using namespace fc;
using namespace fc::fcgp;
using namespace fc::fcgp::sm90;

template <int ID> int check(int upp, int kb, int sms, bool show)
{
    constexpr int P = AlgebraTraits<ID>::P;
    const int units = P * upp;
    constexpr PseqCosts<ID> costs = pseq_costs<ID>();
    const int *w = costs.w;
    const PseqSched s = pseq_sched<ID>(upp, kb, sms, true), r = pseq_sched<ID>(upp, kb, sms, false);
    const long long ls = pseq_load(s, w, upp, kPseqHand), lr = pseq_load(r, w, upp, kPseqHand);
    int bad = 0;
    auto fail = [&](const char *what, int b) {
        if (bad++ < 5)
            printf("FAIL Cl(%d,0) upp %d kb %d sms %d: %s (block %d)\n", AlgebraTraits<ID>::n, upp, kb, sms, what, b);
    };
    if (r.lpt || (s.lpt && ls >= lr))
        fail("lists kept where they cost no less than the rounds, or under setting 3", -1);
    for (const PseqSched *q : {&s, &r}) {
        const PseqSched &x = *q;
        if (x.lpt && (x.grid > kPseqMaxGrid || x.grid > sms || units > kPseqMaxList))
            fail("more blocks than the SMs or the lists hold", x.grid);
        std::vector<int> cover((size_t)units * kb, 0);
        std::vector<int> costs;
        for (int u = 0; u < units; ++u)
            costs.push_back(w[u / upp]);
        std::sort(costs.begin(), costs.end(), [](int a, int b) { return a > b; });
        const int heavy = costs[std::min(x.grid, units) - 1]; /* the grid-th heaviest step cost */
        bool whole = true;
        for (int b = 0; b < x.grid; ++b) {
            GwUnit u;
            for (int j = x.begin(b); x.at(b, j, u); ++j)
                whole = whole && (u.tile < 0 || (u.k0 == 0 && u.k1 == kb));
        }
        for (int b = 0; b < x.grid; ++b) {
            GwUnit u;
            int n = 0, steps = 0;
            for (int j = x.begin(b); x.at(b, j, u); ++j) {
                if (u.tile < 0)
                    continue;
                if (u.tile >= units || u.k0 < 0 || u.k1 > kb || u.k0 >= u.k1) {
                    fail("a piece out of range or empty", b);
                    continue;
                }
                for (int k = u.k0; k < u.k1; ++k)
                    cover[(size_t)u.tile * kb + k]++;
                if (x.lpt && whole && n == 0 && w[u.tile / upp] < heavy)
                    fail("whole units, a block not starting on one of the heaviest", b);
                if (x.lpt && (u.put >= 0 || u.nget > 0) && (x.first[b + 1] - x.first[b] != 1 || u.put >= x.slots()))
                    fail("a segment not its block's one piece, or its slot past the slots", b);
                if (u.nget > 0) { /* the last segment: the unit's others, each putting without waiting */
                    int held = u.k1 - u.k0;
                    for (int o = 0; o < b; ++o) {
                        GwUnit v;
                        for (int jj = x.begin(o); x.at(o, jj, v); ++jj)
                            if (v.tile == u.tile && v.put >= 0) {
                                if (v.put < u.get || v.put >= u.get + u.nget || (!x.lpt && jj != j))
                                    fail("a segment's slot outside its unit's, or in another round", o);
                                held += v.k1 - v.k0;
                            }
                    }
                    if (held != kb)
                        fail("a unit's last segment not reading back the rest of the unit", b);
                }
                steps += u.k1 - u.k0;
                ++n;
            }
            if (x.lpt && n == 0)
                fail("a block without pieces", b);
            if (steps != x.steps(b))
                fail("steps(b) not the pieces' steps", b);
        }
        for (int c : cover)
            if (c != 1) {
                fail("a step taken other than once", -1);
                break;
            }
    }
    if (show) {
        const char *form = !s.lpt ? "rounds" : s.slots() ? "one round of weighted segments" : "whole units";
        printf("Cl(%d,0) %3d units of %3d steps on %3d SMs: %s on %3d blocks, load %6lld (rounds: %3d blocks, %6lld)\n",
               AlgebraTraits<ID>::n, units, kb, sms, form, s.grid, ls, r.grid, lr);
    }
    return bad;
}

int main()
{
    int bad = 0;
    /* the issue-4 shapes (N 512: 8 units a path; a chunk of 2048 rows: 128 steps) and N 256 */
    for (int upp : {8, 2}) {
        bad += check<0>(upp, 128, 132, true);
        bad += check<1>(upp, 128, 132, true);
    }
    for (int upp = 1; upp <= 40; upp += 3)
        for (int kb = 1; kb <= 300; kb += 11)
            for (int sms : {1, 7, 132, 170}) {
                bad += check<0>(upp, kb, sms, false);
                bad += check<1>(upp, kb, sms, false);
            }
    printf("%s\n", bad ? "gw_sched_check: FAILED" : "gw_sched_check: every schedule whole, ordered and acyclic");
    return bad ? 1 : 0;
}
