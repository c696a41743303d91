/* fcgp_gw_sched.h — how the Hopper weight gradient's blocks (fcgp_wgmma_gw.cuh) share its tiles,
 * host and device alike.
 *
 * A tile (64 rows of N_in x 48 columns of N_out of one path group) sums over the batch: kb steps.
 * The kernel runs one block an SM, in rounds. The first rounds take whole tiles, one a block
 * (tile r grid + b in round r: the blocks of a round start together at step 0, so the operand
 * tiles they share are read from L2 once). The tiles left over, fewer than the blocks, are cut
 * into `segs` segments of the batch on consecutive blocks (tpr tiles a round): every segment but
 * the last writes its fp32 sum to a slot and raises its flag, and the block of the last segment
 * waits for those flags, adds the slots in segment order to its own sum and writes the tile. So
 * a tile's result is written once, by one block, in a fixed order of additions: deterministic,
 * without atomics on floats and without the separate reduction of batch-split partials. A block
 * waits only on blocks of lower index in the same round, which every earlier round has left free
 * to run, so the waits cannot form a cycle.
 */
#pragma once

namespace fc {
namespace fcgp {
namespace sm90 {

struct GwUnit {
    int tile;     /* < 0: this block has nothing in this round */
    int k0, k1;   /* its steps of the batch */
    int put;      /* >= 0: a segment before the last, its sum to this slot */
    int get, nget; /* the last piece: first add slots [get, get + nget) */
};

struct GwSched {
    int tiles, kb, grid;                 /* tiles; steps a tile; blocks */
    int dp_rounds;                       /* rounds of whole tiles */
    int segs, tpr, sk_rounds, seg_steps; /* the rest: segments a tile, tiles a round, rounds, steps a segment */

    __host__ __device__ int units() const { return dp_rounds + sk_rounds; }
    __host__ __device__ int slots() const { return sk_rounds * tpr * (segs - 1); }
    /* Block b's steps, all its pieces: the length of its ring. */
    __host__ __device__ int steps(int b) const
    {
        int n = 0;
        for (int u = 0; u < units(); ++u) {
            const GwUnit w = unit(b, u);
            n += w.tile >= 0 ? w.k1 - w.k0 : 0;
        }
        return n;
    }
    /* Block b's piece of round u. */
    __host__ __device__ GwUnit unit(int b, int u) const
    {
        GwUnit w{-1, 0, 0, -1, 0, 0};
        if (u < dp_rounds) {
            w.tile = u * grid + b, w.k1 = kb;
            return w;
        }
        const int r = u - dp_rounds, i = b / segs, s = b % segs, t = dp_rounds * grid + r * tpr + i;
        if (i >= tpr || t >= tiles)
            return w;
        const int base = (r * tpr + i) * (segs - 1);
        w.tile = t;
        w.k0 = s * seg_steps < kb ? s * seg_steps : kb;
        w.k1 = (s + 1) * seg_steps < kb ? (s + 1) * seg_steps : kb;
        if (s < segs - 1)
            w.put = base + s;
        else
            w.get = base, w.nget = segs - 1;
        return w;
    }
};

/* The schedule of `tiles` tiles of kb steps on `sms` blocks: whole-tile rounds while a round
 * fills every block, then the segment count (at most 8, each segment non-empty) with the fewest
 * rounds x (steps a segment + hand x the slots its last segment reads back), the fewest segments
 * among equals; hand: a slot's read in steps (0: the slots cost nothing). */
inline GwSched make_gw_sched(int tiles, int kb, int sms, int hand = 0)
{
    GwSched g{};
    g.tiles = tiles, g.kb = kb < 1 ? 1 : kb;
    g.dp_rounds = tiles / sms;
    const int rest = tiles - g.dp_rounds * sms;
    g.segs = 1, g.tpr = sms, g.sk_rounds = 0, g.seg_steps = g.kb;
    if (rest > 0) {
        long best = -1;
        for (int s = 1; s <= 8 && s <= sms; ++s) {
            const int step = (g.kb + s - 1) / s, tpr = sms / s, rounds = (rest + tpr - 1) / tpr;
            if ((s - 1) * step >= g.kb)
                break; /* the last segment would be empty */
            const long cost = (long)rounds * (step + (long)(s - 1) * hand);
            if (best < 0 || cost < best)
                best = cost, g.segs = s, g.tpr = tpr, g.sk_rounds = rounds, g.seg_steps = step;
        }
    }
    g.grid = g.dp_rounds > 0 ? sms : (rest < g.tpr ? rest : g.tpr) * g.segs;
    return g;
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
