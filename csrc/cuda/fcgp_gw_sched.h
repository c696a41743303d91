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

#include "../algebra_rules.h" /* FC_MAX_P */

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

/* The one-path gW's schedule (gw_pseq_kernel) as one stream of weighted steps. Its units differ
 * in cost by path (a step of Cl(3,0)'s costliest path brings 48 KB and runs three wgmmas, of its
 * lightest 16 KB and one), and the rounds above count units alike: at N 512 Cl(2,0)'s 80 units
 * went in segments of equal steps, Cl(3,0)'s 96 three-pair and 36 one-pair units in one round,
 * the blocks of the light ones idle for most of it (NOTES_FCGP.md session 43). Here the units'
 * steps, in unit order, are laid end to end, each weighted by its path's step cost w, and block b
 * takes the steps whose cost starts in [b W / grid, (b + 1) W / grid) (W: the total): a run from
 * step k0 of unit j0 to step k1 of unit j1 (PseqRun). A run's first piece may be a unit's tail or
 * middle: its block puts its sum in slot b and raises flag b, without waiting. Its last piece may
 * be a unit's head: that block waits for the flags of the nget blocks after it, which hold the
 * rest of the unit (each holds a step or more: W / grid is at least the costliest step), adds
 * their slots in block order and writes the unit. So every put comes before any wait on its
 * block, no wait can close a cycle, and each unit is written once in a fixed order of additions.
 * The runs are formed on the host (PseqStream) and travel in the launch's parameters, so a grid
 * holds at most kPseqMaxGrid blocks. `stream` false keeps the rounds (`rounds`). */
struct PseqRun {
    int j0, k0, j1, k1, nget;
};
constexpr int kPseqMaxGrid = 160; /* 3.2 KB of runs, within the 4 KB of a launch's parameters */

struct PseqSched {
    bool stream;
    int grid, kb;
    GwSched rounds;
    PseqRun run[kPseqMaxGrid];

    /* where block b's pieces begin: a round (rounds), or its run's first unit */
    __host__ __device__ int begin(int b) const { return stream ? run[b].j0 : 0; }
    /* Block b's piece at j (begin(b), then j + 1, ...): false past its last; a piece with tile < 0
     * is empty (skip it). */
    __host__ __device__ bool at(int b, int j, GwUnit &u) const
    {
        if (stream)
            return at_run(b, j, u);
        if (j >= rounds.units())
            return false;
        u = rounds.unit(b, j);
        return true;
    }
    __host__ __device__ bool at_run(int b, int j, GwUnit &u) const
    {
        const PseqRun &r = run[b];
        if (j > r.j1)
            return false;
        u = GwUnit{j, j == r.j0 ? r.k0 : 0, j == r.j1 ? r.k1 : kb, -1, 0, 0};
        if (u.k0 > 0)
            u.put = b;
        else if (u.k1 < kb)
            u.get = b + 1, u.nget = r.nget;
        return true;
    }
    /* f(piece) for block b's pieces in order, empty ones too: a loop for each kind of schedule,
     * for the producer thread (one loop over both kinds spilled its 24 registers) */
    template <class F> __host__ __device__ void each(int b, F &&f) const
    {
        GwUnit u;
        if (stream) {
            for (int j = run[b].j0; at_run(b, j, u); ++j)
                f(u);
        } else {
            for (int j = 0; j < rounds.units(); ++j)
                f(rounds.unit(b, j));
        }
    }
    /* block b's steps, all its pieces: the length of its ring */
    __host__ __device__ int steps(int b) const
    {
        int n = 0;
        GwUnit u;
        for (int j = begin(b); at(b, j, u); ++j)
            n += u.tile >= 0 ? u.k1 - u.k0 : 0;
        return n;
    }
    int slots() const { return stream ? grid : rounds.slots(); }
};

/* The stream's arithmetic on the host: np paths' units (upp a path, kb steps each) in unit order,
 * a step of path i costing w[i]; grid blocks. */
struct PseqStream {
    int grid, kb, upp, np;
    long long W;                 /* every unit's steps, weighted */
    int w[FC_MAX_P];
    long long cum[FC_MAX_P + 1]; /* the cost before path i's first unit */

    long long start(int b) const { return (long long)b * W / grid; }
    long long unit_start(int j) const { return cum[j / upp] + (long long)(j % upp) * kb * w[j / upp]; }
    /* the unit in which the cost pos falls */
    int unit_at(long long pos) const
    {
        int i = 0;
        while (i + 1 < np && cum[i + 1] <= pos)
            ++i;
        return i * upp + (int)((pos - cum[i]) / ((long long)kb * w[i]));
    }
    /* the block whose steps include the one whose cost starts at pos */
    int owner(long long pos) const { return (int)(((pos + 1) * grid - 1) / W); }
    /* block b's run: the steps whose cost starts in [start(b), start(b + 1)) */
    PseqRun run(int b) const
    {
        const long long lo = start(b), hi = start(b + 1);
        PseqRun r{};
        r.j0 = unit_at(lo);
        long long c0 = unit_start(r.j0), k0 = (lo - c0 + w[r.j0 / upp] - 1) / w[r.j0 / upp];
        if (k0 >= kb) /* lo inside the unit's last step: the run starts with the next unit */
            c0 = unit_start(++r.j0), k0 = 0;
        r.k0 = (int)k0;
        r.j1 = unit_at(hi - 1);
        const long long c1 = unit_start(r.j1), k1 = (hi - c1 + w[r.j1 / upp] - 1) / w[r.j1 / upp];
        r.k1 = (int)(k1 < kb ? k1 : kb);
        if (r.k1 < kb && !(r.j1 == r.j0 && r.k0 > 0)) /* a head: the rest of its unit on the blocks after */
            r.nget = owner(c1 + (long long)(kb - 1) * w[r.j1 / upp]) - b;
        return r;
    }
};

/* A schedule's cost in the units of w: the most any block carries, its steps' cost and hand a
 * slot it writes or reads back. */
inline long long pseq_load(const PseqSched &s, const int *w, int upp, int hand)
{
    long long most = 0;
    for (int b = 0; b < s.grid; ++b) {
        long long l = 0;
        GwUnit u;
        for (int j = s.begin(b); s.at(b, j, u); ++j)
            if (u.tile >= 0)
                l += (long long)(u.k1 - u.k0) * w[u.tile / upp] + (long long)hand * ((u.put >= 0) + u.nget);
        most = l > most ? l : most;
    }
    return most;
}

/* The schedule of np paths' units (upp a path, kb steps each; w: a step's cost by path in unit
 * order) on at most sms blocks: the rounds of make_gw_sched (hand_steps: a slot's read in steps),
 * or with stream the stream on the block count of least pseq_load (hand: a slot's write or read
 * in the units of w), where that is less than the rounds' (with few long units, heads reading
 * back many slots, the rounds can be less). Every block count is tried where the units are fewer
 * than twice the blocks, else the most. */
inline PseqSched make_pseq_sched(const int *w, int np, int upp, int kb, int sms, int hand, int hand_steps, bool stream)
{
    PseqSched s{};
    s.kb = kb < 1 ? 1 : kb;
    s.rounds = make_gw_sched(np * upp, s.kb, sms, hand_steps);
    s.grid = s.rounds.grid;
    PseqStream st{};
    st.kb = s.kb, st.upp = upp, st.np = np;
    int wmax = 1;
    for (int i = 0; i < np; ++i) {
        st.w[i] = w[i] < 1 ? 1 : w[i];
        st.cum[i + 1] = st.cum[i] + (long long)upp * st.kb * st.w[i];
        wmax = st.w[i] > wmax ? st.w[i] : wmax;
    }
    st.W = st.cum[np];
    if (!stream || st.W <= 0)
        return s;
    PseqSched t = s, best = s;
    long long least = pseq_load(s, st.w, upp, hand);
    t.stream = true;
    const int most = sms < kPseqMaxGrid ? sms : kPseqMaxGrid;
    for (int g = np * upp >= 2 * most ? most : 1; g <= most && st.W / g >= wmax; ++g) {
        st.grid = t.grid = g;
        for (int b = 0; b < g; ++b)
            t.run[b] = st.run(b);
        const long long l = pseq_load(t, st.w, upp, hand);
        if (l < least)
            least = l, best = t;
    }
    return best;
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
