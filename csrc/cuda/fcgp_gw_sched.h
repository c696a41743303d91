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

/* The one-path gW's schedule (gw_pseq_kernel). Its units differ in cost by path (a step of
 * Cl(3,0)'s costliest path brings 48 KB and runs three wgmmas, of its lightest 16 KB and one),
 * while the rounds above count units alike: at N 512 Cl(3,0)'s 160 units went 132 in a round,
 * the blocks of its one-pair units idle for most of it, and the other 28 in segments after it;
 * Cl(2,0)'s 80 cut alike into three segments in two rounds. So the units may instead go out by
 * cost (w: a step's cost by path, fcgp_wgmma_gw_pseq.cuh), in lists: block b takes the pieces
 * list[first[b] .. first[b + 1]) in that order, a piece being unit list[j]'s segment seg[j] & 15
 * of seg[j] >> 4 (equal runs of steps, on consecutive blocks: segment i of a unit whose first
 * segment lies on block b0 puts its sum in slot b0 + i, the last reads back the others). Two
 * forms: where the units are at least the blocks (and fit the lists), whole units, heaviest
 * first, each to the block with the least cost so far; where they are fewer, one round, each
 * unit cut into as many segments as bring its cost down most, the costliest first, one piece a
 * block. Either way every block starts at step 0 of its first piece with the others, as a round
 * does, so the operand tiles they share come from L2 once (a stream of weighted steps, each block
 * a run starting mid-unit, balanced better on paper but read the whole chunk's operands at once
 * and ran Cl(3,0) 24-52% slower: NOTES_FCGP.md session 43), and a segment's wait is on blocks of
 * lower index whose one piece puts without waiting. `lpt` false: the rounds. The lists travel in
 * the launch's parameters. */
constexpr int kPseqMaxGrid = 160, kPseqMaxList = 400;

struct PseqSched {
    bool lpt;
    int grid, kb, nslots; /* nslots: the lists' (a slot a block where units are cut, else none) */
    GwSched rounds;
    unsigned short first[kPseqMaxGrid + 1];
    unsigned short list[kPseqMaxList];
    unsigned char seg[kPseqMaxList];

    /* list entry j on block b as a piece */
    __host__ __device__ GwUnit piece(int b, int j) const
    {
        const int i = seg[j] & 15, n = seg[j] >> 4, len = (kb + n - 1) / n;
        const int k0 = i * len, k1 = k0 + len < kb ? k0 + len : kb;
        GwUnit u{list[j], k0, k1, -1, 0, 0};
        if (i < n - 1)
            u.put = b;
        else if (n > 1)
            u.get = b - i, u.nget = n - 1;
        return u;
    }
    /* where block b's pieces begin (then j + 1, ...) */
    __host__ __device__ int begin(int b) const { return lpt ? first[b] : 0; }
    /* Block b's piece at j: false past its last; a piece with tile < 0 is empty (skip it). */
    __host__ __device__ bool at(int b, int j, GwUnit &u) const
    {
        if (lpt) {
            if (j >= first[b + 1])
                return false;
            u = piece(b, j);
            return true;
        }
        if (j >= rounds.units())
            return false;
        u = rounds.unit(b, j);
        return true;
    }
    /* f(piece) for block b's pieces in order, empty ones too: a loop for each kind of schedule,
     * for the producer thread (one loop over both kinds spilled its 24 registers) */
    template <class F> __host__ __device__ void each(int b, F &&f) const
    {
        if (lpt) {
            for (int j = first[b]; j < first[b + 1]; ++j)
                f(piece(b, j));
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
    int slots() const { return lpt ? nslots : rounds.slots(); }
};

/* A schedule's cost in the units of w (path by unit order index, upp units a path): the most any
 * block carries, its steps' cost and hand a slot it writes or reads back. */
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
 * or, with lpt, the lists (PseqSched) where they fit and cost less (pseq_load; hand: a slot's
 * write or read in the units of w). */
inline PseqSched make_pseq_sched(const int *w, int np, int upp, int kb, int sms, int hand, int hand_steps, bool lpt)
{
    PseqSched s{};
    s.kb = kb < 1 ? 1 : kb;
    s.rounds = make_gw_sched(np * upp, s.kb, sms, hand_steps);
    s.grid = s.rounds.grid;
    const int units = np * upp, most = sms < kPseqMaxGrid ? sms : kPseqMaxGrid;
    if (!lpt || units > kPseqMaxList || units < 1)
        return s;
    PseqSched t{};
    t.lpt = true, t.kb = s.kb;
    auto cost = [&](int u) { return (long long)w[u / upp]; };
    if (units >= most) {
        /* whole units by cost, heaviest first (stable: unit order within a cost), each to the
         * least-loaded block (the lowest index among equals), in the order taken */
        int order[kPseqMaxList], block[kPseqMaxList], count[kPseqMaxGrid] = {}, at[kPseqMaxGrid];
        long long load[kPseqMaxGrid] = {};
        for (int u = 0; u < units; ++u)
            order[u] = u;
        for (int a = 1; a < units; ++a) /* insertion sort: a few hundred units */
            for (int b = a; b > 0 && cost(order[b]) > cost(order[b - 1]); --b) {
                const int x = order[b];
                order[b] = order[b - 1], order[b - 1] = x;
            }
        t.grid = most;
        for (int a = 0; a < units; ++a) {
            int least = 0;
            for (int b = 1; b < most; ++b)
                least = load[b] < load[least] ? b : least;
            load[least] += s.kb * cost(order[a]);
            block[a] = least, ++count[least];
        }
        for (int b = 0; b < most; ++b)
            t.first[b + 1] = (unsigned short)(t.first[b] + count[b]), at[b] = t.first[b];
        for (int a = 0; a < units; ++a) {
            t.list[at[block[a]]] = (unsigned short)order[a];
            t.seg[at[block[a]]++] = 1 << 4;
        }
    } else {
        /* one round: each unit n segments (1 to 8, none empty), the costliest unit's n raised while
         * blocks remain and that lowers its cost (its longest segment's steps, and hand a slot
         * written or read back: the last segment reads n - 1) */
        int n[kPseqMaxList], used = units;
        auto seg_cost = [&](int u, int k) {
            const long long len = (s.kb + k - 1) / k;
            return len * cost(u) + (k > 1 ? (long long)hand * (k - 1) : 0);
        };
        for (int u = 0; u < units; ++u)
            n[u] = 1;
        while (used < most) {
            int top = 0;
            for (int u = 1; u < units; ++u)
                top = seg_cost(u, n[u]) > seg_cost(top, n[top]) ? u : top;
            const int k = n[top] + 1;
            if (k > 8 || (long long)(s.kb + k - 1) / k * (k - 1) >= s.kb || seg_cost(top, k) >= seg_cost(top, n[top]))
                break;
            n[top] = k, ++used;
        }
        t.grid = t.nslots = used;
        for (int u = 0, b = 0; u < units; ++u)
            for (int i = 0; i < n[u]; ++i, ++b) {
                t.first[b + 1] = (unsigned short)(b + 1);
                t.list[b] = (unsigned short)u;
                t.seg[b] = (unsigned char)(i | n[u] << 4);
            }
    }
    return pseq_load(t, w, upp, hand) < pseq_load(s, w, upp, hand) ? t : s;
}

} // namespace sm90
} // namespace fcgp
} // namespace fc
