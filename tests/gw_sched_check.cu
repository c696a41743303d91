/* gw_sched_check.cu — the one-path weight gradient's schedules (fcgp_gw_sched.h: PseqSched, the
 * stream of weighted steps and the rounds it may keep) checked on the host over a sweep of shapes,
 * algebras and SM counts: every step of every unit taken by exactly one block, a put only as a
 * block's first piece and into that block's slot, a head's nget slots the puts of the blocks right
 * after it, of its own unit and covering the unit's other steps (so no wait can close a cycle and
 * each unit is summed once, in block order), no block without steps, steps(b) the ring's length,
 * and the stream chosen only where its cost (pseq_load) is below the rounds'. Prints the issue-4
 * shapes' schedules. Built and run by tests/test_lab_builds.py (host code only: no GPU).
 *   nvcc -std=c++17 -Icsrc tests/gw_sched_check.cu -o gw_sched_check && ./gw_sched_check
 */
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
    int w[P];
    for (int i = 0; i < P; ++i)
        w[i] = pseq_step_cost<ID>(PseqPlan<ID>::order.path[i]);
    const PseqSched s = pseq_sched<ID>(upp, kb, sms, true), r = pseq_sched<ID>(upp, kb, sms, false);
    const long long ls = pseq_load(s, w, upp, kPseqHand), lr = pseq_load(r, w, upp, kPseqHand);
    int bad = 0;
    auto fail = [&](const char *what, int b) {
        if (bad++ < 5)
            printf("FAIL Cl(%d,0) upp %d kb %d sms %d: %s (block %d)\n", AlgebraTraits<ID>::n, upp, kb, sms, what, b);
    };
    if (ls > lr || (s.stream && ls == lr))
        fail("the stream kept where it costs no less than the rounds", -1);
    for (const PseqSched *q : {&s, &r}) {
        const PseqSched &x = *q;
        if (x.stream && x.grid > kPseqMaxGrid)
            fail("more blocks than the runs hold", x.grid);
        std::vector<int> cover((size_t)P * upp * kb, 0), put_unit(x.grid, -1);
        std::vector<GwUnit> last(x.grid, GwUnit{-1, 0, 0, -1, 0, 0});
        for (int b = 0; b < x.grid; ++b) {
            GwUnit u;
            int n = 0, steps = 0;
            for (int j = x.begin(b); x.at(b, j, u); ++j) {
                if (u.tile < 0)
                    continue;
                if (u.tile >= P * upp || u.k0 < 0 || u.k1 > kb || u.k0 >= u.k1)
                    fail("a piece out of range or empty", b);
                for (int k = u.k0; k < u.k1 && u.tile < P * upp; ++k)
                    cover[(size_t)u.tile * kb + k]++;
                steps += u.k1 - u.k0;
                if (x.stream && u.put >= 0) {
                    if (n != 0 || u.put != b)
                        fail("a put not the block's first piece, or not into its slot", b);
                    put_unit[b] = u.tile;
                }
                if (x.stream && u.nget > 0)
                    last[b] = u;
                ++n;
            }
            if (x.stream && n == 0)
                fail("a block without steps", b);
            if (steps != x.steps(b))
                fail("steps(b) not the pieces' steps", b);
        }
        for (int b = 0; b < x.grid; ++b)
            if (last[b].nget > 0) {
                int held = last[b].k1 - last[b].k0;
                for (int q = 0; q < last[b].nget; ++q) {
                    const int o = last[b].get + q;
                    if (o != b + 1 + q || o >= x.grid || put_unit[o] != last[b].tile) {
                        fail("a head's slots not the next blocks' puts of its unit", b);
                        break;
                    }
                    GwUnit u;
                    x.at(o, x.begin(o), u);
                    held += u.k1 - u.k0;
                }
                if (held != kb)
                    fail("a head and its slots not the whole unit", b);
            }
        for (int c : cover)
            if (c != 1) {
                fail("a step taken other than once", -1);
                break;
            }
    }
    if (show)
        printf("Cl(%d,0) %3d units of %3d steps on %3d SMs: %s on %3d blocks, load %6lld (rounds: %3d blocks, %6lld)\n",
               AlgebraTraits<ID>::n, P * upp, kb, sms, s.stream ? "stream" : "rounds", s.grid, ls, r.grid, lr);
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
