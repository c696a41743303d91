/* fcgp_sm90a.cu — the Hopper FCGP kernels behind fcgp_sm90a.h. Forward: one preparation launch
 * (fwd_prep: W^T in the workspace in stage order, which bf16 in one CTA skips by reading W as
 * stored (fwd_w_mn), with the gate the gate product g, the norm's
 * flags zeroed; under FLASHCLIFFORD_FCGP_FWD_WBULK=0 W^T for boxes by a tiled transpose and g by
 * gate_product), three or four tensor maps a call, and fwd_tma_kernel of fcgp_wgmma.cuh, one CTA
 * with a producer warpgroup by default or clusters of two that share a tile by multicast
 * (fwd_cluster; benchmarks/NOTES_FCGP.md), the grade norm finished in its epilogue
 * (FwdOut::kNorm: a count and a state a tile in the workspace, zeroed a call). Backward: per batch chunk,
 * xg^T and yg^T (gelu_transpose), the norm's statistics (fcgp.cu's norm_stats) and go^T (go_transpose),
 * the weight gradient (fcgp_wgmma_gw.cuh) and the input gradients (fcgp_wgmma_gz.cuh), as one
 * programmatic chain (pdl.cuh). setup.py builds this unit for sm_90a alone when 9.0 is a target
 * (FC_SM90A = 1); otherwise only its host side is compiled and the planning functions say no.
 */
#include "fcgp_sm90a.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <type_traits>

#include "common.cuh"
#include "fcgp_gw_sched.h"
#include "fcgp_norm_rows.cuh"
#include "mma_ptx.cuh" /* Mode */
#include "pdl.cuh"

#ifndef FC_SM90A
#define FC_SM90A 0
#endif

#if FC_SM90A
#include "fcgp_wgmma_gw.cuh" /* and fcgp_wgmma.cuh */
#include "fcgp_wgmma_gw_pseq.cuh"
#include "fcgp_wgmma_gz.cuh"
#endif

namespace fc {
namespace fcgp {
namespace sm90 {

namespace {

std::atomic<int> g_enabled{-1}; /* -1: FLASHCLIFFORD_FCGP_SM90 not read yet; on unless it is "0" */
std::atomic<int> g_bwd{-1};     /* the backward kernels: FLASHCLIFFORD_FCGP_SM90_BWD, on unless "0" */

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int kSteps(int mode) { return mode == kTF32 ? 8 : 16; } /* 32 bytes of K */
constexpr int kRows = 64;                                            /* rows a tile */
constexpr int kBlockRows = 16; /* the backward's batch blocks: kBatchBlock of fcgp_wgmma.cuh */
inline int64_t whole_steps(int64_t n, int mode) { return cdiv(n, kSteps(mode)) * kSteps(mode); } /* K padded */
constexpr int kPrepSteps = 8; /* steps of W^T a block of fwd_prep (wst_block) */
/* the tiles' N_out columns, Cfg::NT and GwCfg::NT (checked against them below, where the
 * device headers are compiled) */
constexpr int tile_cols(int D) { return 512 / D; }
constexpr int gw_cols(int) { return 48; }
constexpr int gw_groups(int D) { return D == 8 ? 2 : 1; } /* GwCfg::GROUPS: path groups, a block each */
/* the floats of a gW tile's accumulators (GwCfg: a group's paths x BM x NT): a segment slot */
constexpr size_t gw_slot_floats(int D, int P) { return (size_t)(P / gw_groups(D)) * 64 * gw_cols(D); }
inline size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }
/* gW's tiles (fcgp_gw_sched.h) */
int64_t gw_tiles(const fc_args *a)
{
    return cdiv(a->N_out, gw_cols(a->alg->D)) * gw_groups(a->alg->D) * cdiv(a->N_in, kRows);
}
/* gW one path a unit (gw_pseq_kernel): PseqCfg's tile, and its segment slot (both warpgroups'
 * accumulators); its units: paths x row blocks x column blocks */
constexpr int kPseqRows = 128, kPseqCols = 256;
constexpr size_t kPseqSlotFloats = (size_t)kPseqRows * kPseqCols;
int64_t pseq_units(const fc_args *a) { return (int64_t)a->alg->P * (a->N_in / kPseqRows) * (a->N_out / kPseqCols); }

/* A setting from the environment, read once into v (-1 until then): name's value when it is one
 * digit in [lo, hi], else dflt. */
int env_choice(std::atomic<int> &v, const char *name, int lo, int hi, int dflt)
{
    int c = v.load(std::memory_order_relaxed);
    if (c < 0) {
        const char *e = getenv(name);
        const int d = e && e[0] >= '0' && e[0] <= '9' && !e[1] ? e[0] - '0' : -1;
        int expected = -1;
        v.compare_exchange_strong(expected, d >= lo && d <= hi ? d : dflt);
        c = v.load();
    }
    return c;
}

/* A number from the environment, read once into v (-1 until then): name's value times scale when
 * it is a whole number in [lo, hi], else dflt. */
long long env_number(std::atomic<long long> &v, const char *name, long lo, long hi, long long dflt, long long scale)
{
    long long c = v.load(std::memory_order_relaxed);
    if (c < 0) {
        const char *e = getenv(name);
        char *end = nullptr;
        const long n = e ? strtol(e, &end, 10) : -1;
        long long expected = -1;
        v.compare_exchange_strong(expected, e && end != e && !*end && n >= lo && n <= hi ? n * scale : dflt);
        c = v.load();
    }
    return c;
}

/* An on/off switch: "1" or "0" sets it, anything else leaves the default. */
bool switch_state(std::atomic<int> &v, const char *env, int dflt) { return env_choice(v, env, 0, 1, dflt) == 1; }

/* What the Hopper kernels need of every call: the sm_90a code, a device of compute capability
 * 9.0 exactly (where that code runs), the D <= 8 algebras, tf32 or bf16 operands, sizes in int. */
bool eligible(const fc_args *a, int mode, int operand_bytes)
{
    if (!compiled() || a->alg->D > 8)
        return false;
    if (!((mode == kTF32 && operand_bytes == 4) || (mode == kBF16 && operand_bytes == 2)))
        return false;
    if (a->B <= 0 || a->N_in <= 0 || a->N_out <= 0 || a->B > INT_MAX || a->N_in > INT_MAX || a->N_out > INT_MAX)
        return false;
    const DeviceFacts &f = device_facts(a->device); /* queried once a device */
    return f.cc_major == 9 && f.cc_minor == 0;
}

} // namespace

namespace {
std::atomic<int> g_fwd_groups{-1}; /* FLASHCLIFFORD_FCGP_FWD_GROUPS: 1 or 2; 0: the rule */
}
/* The forward's component groups (Cfg's CG): 2 (a CTA computes half the output components over
 * 128 columns) at D 8 where W^T comes in stage order, else 1. H200, B 4096, N 512 (NOTES_FCGP.md
 * session 47): the kernel 239 -> 208 us at Cl(3,0) bf16 and 373 -> 353 tf32, the forward 259 ->
 * 226 and 404 -> 379 (against the one-group forms of the same build; 219 and 384 us before the
 * change). Setting 0 (the rule) takes 2 there unless a setting asks for a one-group form: setting
 * 1, a forced 2 x 1 or 1 x 2 cluster (FLASHCLIFFORD_FCGP_FWD_CLUSTER), or W as stored everywhere
 * (FLASHCLIFFORD_FCGP_FWD_WMN=1); setting 2 takes 2 whatever the others say.
 * FLASHCLIFFORD_FCGP_FWD_GROUPS at start-up or set_fwd_groups. */
int fwd_groups_setting() { return env_choice(g_fwd_groups, "FLASHCLIFFORD_FCGP_FWD_GROUPS", 1, 2, 0); }
void set_fwd_groups(int groups) { g_fwd_groups.store(groups >= 1 && groups <= 2 ? groups : 0); }
int fwd_groups(int D)
{
    const int c = fwd_groups_setting();
    if (D != 8 || !fwd_w_bulk() || c == 1)
        return 1;
    const int cl = fwd_cluster_setting();
    return c == 2 || (cl != 2 && cl != 3 && fwd_w_mn() != 1) ? 2 : 1;
}

namespace {
/* the forward's tile columns under the current setting, and its column blocks */
int64_t fwd_cols(const fc_args *a) { return (int64_t)tile_cols(a->alg->D) * fwd_groups(a->alg->D); }
/* fwd_prep's blocks of W^T in stage order: column blocks x groups of kPrepSteps steps (of 32
 * bytes of N_in in the operand mode) x paths */
int64_t wst_blocks(const fc_args *a, int mode)
{
    return cdiv(a->N_out, fwd_cols(a)) * cdiv(cdiv(a->N_in, kSteps(mode)), kPrepSteps) * a->alg->P;
}
} // namespace

bool compiled() { return FC_SM90A != 0; }

bool enabled() { return switch_state(g_enabled, "FLASHCLIFFORD_FCGP_SM90", 1); }
void set_enabled(bool on) { g_enabled.store(on ? 1 : 0); }
bool bwd_enabled() { return switch_state(g_bwd, "FLASHCLIFFORD_FCGP_SM90_BWD", 1); }
void set_bwd_enabled(bool on) { g_bwd.store(on ? 1 : 0); }

bool planned(const fc_args *a, int mode, int operand_bytes)
{
    /* rows of x a multiple of 16 bytes (the copy engine's stride rule); the kernel's grid
     * (column blocks in x, row blocks in y) and the W^T preparations' (in y, 32 x 32 tiles of
     * N_out for the boxes; the stage order's blocks with g's, at most 2048, in x) */
    return enabled() && (a->N_in * operand_bytes) % 16 == 0 && cdiv(a->B, kRows) <= 65534 &&
           cdiv(a->N_out, 32) <= 65535 && wst_blocks(a, mode) + 2048 <= INT32_MAX && eligible(a, mode, operand_bytes);
}

namespace {
std::atomic<int> g_fwd_wbulk{-1}; /* FLASHCLIFFORD_FCGP_FWD_WBULK: 0 boxes, 1 stage order */
std::atomic<int> g_fwd_cl{-1};    /* FLASHCLIFFORD_FCGP_FWD_CLUSTER: 1 (1 x 1), 2 (2 x 1), 3 (1 x 2); 0: the rule */
}
/* How the forward brings W^T: in stage order by 1-D bulk copies (on, the default), or as boxes of
 * 32-byte rows from W^T (P, N_out, Nip). Same run, B 4096, N 512 (NOTES_FCGP.md session 19),
 * kernel at the best cluster shape of each: 561 -> 505 us Cl(3,0) tf32, 204 -> 181 Cl(2,0)
 * tf32, 329 -> 272 Cl(3,0) bf16, 111 -> 103 Cl(2,0) bf16. FLASHCLIFFORD_FCGP_FWD_WBULK=0 or 1 at
 * start-up fixes it. */
bool fwd_w_bulk() { return switch_state(g_fwd_wbulk, "FLASHCLIFFORD_FCGP_FWD_WBULK", 1); }
void set_fwd_w_bulk(bool on) { g_fwd_wbulk.store(on ? 1 : 0); }
int fwd_cluster_setting() { return env_choice(g_fwd_cl, "FLASHCLIFFORD_FCGP_FWD_CLUSTER", 1, 3, 0); }
void set_fwd_cluster(int shape) { g_fwd_cl.store(shape >= 1 && shape <= 3 ? shape : 0); }
namespace {
std::atomic<int> g_fwd_wmn{-1}; /* FLASHCLIFFORD_FCGP_FWD_WMN: 0, 1 or 2 (fwd_w_mn) */
}
/* Where the bf16 forward in one CTA reads W as stored (MN-major wgmma B operands, no W^T to
 * prepare) instead of W^T in stage order as tf32 does: 0 nowhere, 1 at every tile width, 2 at
 * tiles of 128 columns or more (Cl(2,0)), the default. H100, B 4096, N 512 (NOTES_FCGP.md session
 * 35): at Cl(2,0) the kernel 76.4 -> 74.4-75.2 us and fwd_prep 9.4 -> 7.2 (the gate product
 * alone), the forward 86.7 -> 85.3-86.0; at Cl(3,0) (64-column tiles) the kernel 220.4 ->
 * 232.4-233.6, the forward 244.4 -> 249.0-250.6. FLASHCLIFFORD_FCGP_FWD_WMN at start-up (A/Bs;
 * the layout test compares it with the boxes of W^T bit for bit under the setting it runs in). */
int fwd_w_mn() { return env_choice(g_fwd_wmn, "FLASHCLIFFORD_FCGP_FWD_WMN", 0, 2, 2); }
namespace {
std::atomic<int> g_fwd_pipe{-1}; /* FLASHCLIFFORD_FCGP_FWD_PIPE: "0" one register set */
}
/* Whether the forward in one CTA forms each component's A fragments while the component before's
 * wgmmas run (fwd_tma_kernel's PIPE: two register sets; on, the default, where they fit:
 * Cl(2,0)) or after they completed (off). Bitwise the same result. H100, B 4096, N 512
 * (NOTES_FCGP.md session 36): the Cl(2,0) forward kernel about 1% faster.
 * FLASHCLIFFORD_FCGP_FWD_PIPE=0 at start-up (measurements). */
bool fwd_pipe() { return switch_state(g_fwd_pipe, "FLASHCLIFFORD_FCGP_FWD_PIPE", 1); }

namespace {
std::atomic<int> g_fwd_norm{-1}; /* FLASHCLIFFORD_FCGP_FWD_NORM: "0" keeps the finalize pass */
std::atomic<long long> g_go_rows{-1}; /* FLASHCLIFFORD_FCGP_BWD_GO_ROWS; -1: not read yet */
}
/* The rows a slice of go^T's transpose (see go_slice_rows): 0 (the default) one slice a chunk,
 * n > 0 n rows rounded up to whole 32-row blocks; FLASHCLIFFORD_FCGP_BWD_GO_ROWS (0 to 1048576)
 * at start-up, or set_go_rows, sets it. */
long long go_rows_setting() { return env_number(g_go_rows, "FLASHCLIFFORD_FCGP_BWD_GO_ROWS", 0, 1L << 20, 0, 1); }
void set_go_rows(long long rows) { g_go_rows.store(std::max<long long>(0, std::min<long long>(rows, 1LL << 20))); }
namespace {
std::atomic<int> g_bwd_pdl{-1}; /* FLASHCLIFFORD_FCGP_BWD_PDL: "0" plain stream order */
}
/* The backward's kernels as one programmatic chain (on, the default) or in plain stream order:
 * the backward 1178 -> 1148 us at Cl(3,0) tf32, 530 -> 501 Cl(2,0) tf32, 765 -> 736 Cl(3,0)
 * bf16, 384 -> 361 Cl(2,0) bf16 (H100, B 4096, N 512, NOTES_FCGP.md session 26). */
bool bwd_pdl() { return switch_state(g_bwd_pdl, "FLASHCLIFFORD_FCGP_BWD_PDL", 1); }
void set_bwd_pdl(bool on) { g_bwd_pdl.store(on ? 1 : 0); }
namespace {
std::atomic<int> g_gw_pseq{-1}; /* FLASHCLIFFORD_FCGP_GW_PSEQ: 1 on where it fits, 2 off, 3 rounds; 0 the rule */
}
/* The weight gradient one path a tile of 128 x 256 (gw_pseq_kernel, fcgp_wgmma_gw_pseq.cuh) or by
 * path groups (gw_tma_kernel): 0 by the rule (use_pseq: today the same as 1), 1 one path a tile
 * wherever N_in is a multiple of 128 and N_out of 256, its units whole to the least-loaded block
 * where that costs less than rounds (PseqSched), 2 path groups everywhere, 3 as 1 always in rounds
 * (session 42's schedule, for comparison);
 * FLASHCLIFFORD_FCGP_GW_PSEQ at start-up, or set_gw_pseq. */
int gw_pseq_setting() { return env_choice(g_gw_pseq, "FLASHCLIFFORD_FCGP_GW_PSEQ", 1, 3, 0); }
void set_gw_pseq(int mode) { g_gw_pseq.store(mode >= 1 && mode <= 3 ? mode : 0); }
namespace {
std::atomic<int> g_go_pairs{-1}; /* FLASHCLIFFORD_FCGP_BWD_GO_PAIRS: "0" one column a thread */
} // namespace
/* go^T two columns a thread (go_transpose's CW 2) or a load (go_rows' CW 2) where N_out is even and
 * the arrays aligned (on, the default), or one column everywhere: FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0
 * at start-up or set_go_pairs (measurements, tests). The same bits either way. */
bool go_pairs_setting() { return switch_state(g_go_pairs, "FLASHCLIFFORD_FCGP_BWD_GO_PAIRS", 1); }
void set_go_pairs(bool on) { g_go_pairs.store(on ? 1 : 0); }
namespace {
std::atomic<int> g_fwd_pdl{-1}; /* FLASHCLIFFORD_FCGP_FWD_PDL: "0" plain stream order */
}
/* The forward GEMM launched by programmatic dependent launch after fwd_prep (on, the default),
 * so that its launch and set-up overlap the preparation's tail, or in plain stream order;
 * FLASHCLIFFORD_FCGP_FWD_PDL=0 at start-up (NOTES_FCGP.md session 30). */
bool fwd_pdl() { return switch_state(g_fwd_pdl, "FLASHCLIFFORD_FCGP_FWD_PDL", 1); }
namespace {
std::atomic<int> g_go_fused{-1}; /* FLASHCLIFFORD_FCGP_BWD_GO_FUSED: 1 one pass, 2 two; 0 by the rule */
}
/* The norm's statistics and go^T in one pass (go_rows) or as two (norm_stats, then go_transpose,
 * sliced by go_rows_setting): 0 by the rule (bwd's: one pass for fp32 data and at D 8), 1 one
 * pass where N_out allows, 2 two passes; FLASHCLIFFORD_FCGP_BWD_GO_FUSED at start-up, or
 * set_go_fused. */
int go_fused_setting() { return env_choice(g_go_fused, "FLASHCLIFFORD_FCGP_BWD_GO_FUSED", 1, 2, 0); }
void set_go_fused(int mode) { g_go_fused.store(mode >= 1 && mode <= 2 ? mode : 0); }
bool fused_norm() { return switch_state(g_fwd_norm, "FLASHCLIFFORD_FCGP_FWD_NORM", 1); }
void set_fused_norm(bool on) { g_fwd_norm.store(on ? 1 : 0); }

namespace {
std::atomic<long long> g_norm_wait{-1};
}
/* kNorm: how long a tile waits for the rest of its row block before leaving its o to the last
 * tile (fcgp_wgmma.cuh FwdEpi): 100 us by default (B 4096, N 512, NOTES_FCGP.md session 18: 20 us
 * left 4-14 us of the gain on the table, 60 us some, 100-400 us measured alike; a tile there takes
 * 50-130 us, and finishing times inside a wave spread by tens of us); FLASHCLIFFORD_FCGP_FWD_NORM_WAIT_US
 * (0 to 10000) at start-up, or set_norm_wait_us, sets it (0: every tile but the last gives up at
 * once, which the tests use to reach the fix-up). */
long long norm_wait_ns()
{
    return env_number(g_norm_wait, "FLASHCLIFFORD_FCGP_FWD_NORM_WAIT_US", 0, 10000, 100000LL, 1000);
}
void set_norm_wait_us(long long us) { g_norm_wait.store(std::min<long long>(us, 10000) * 1000LL); }

bool bwd_planned(const fc_args *a, int mode, int operand_bytes)
{
    /* grids: go_transpose (B / 32, N_out / 32), gelu_transpose (N_in padded to 64 / 32 or 64, B / 32,
     * 2), gz (N_in / BN x groups, B / 64); gW's tiles and a block's steps over them in int */
    return bwd_enabled() && cdiv(a->B, 32) <= 65535 && cdiv(a->N_out, 32) <= 65535 &&
           2 * cdiv(a->N_in, kRows) <= 65535 && gw_tiles(a) <= INT_MAX / 2 &&
           cdiv(gw_tiles(a), 8) * cdiv(a->B, 8) <= INT_MAX / 2 && eligible(a, mode, operand_bytes);
}

namespace {

std::atomic<int> g_chunks{-1}; /* FLASHCLIFFORD_FCGP_BWD_CHUNKS: 1 or 2; 0: by the rule */

/* The backward's batch chunks: two from 2048 rows on, so that its batch-sized buffers (go^T, and
 * xg^T, yg^T where the gradients cannot hold them) span half the batch, while each chunk's
 * kernels still fill the GPU many times over; FLASHCLIFFORD_FCGP_BWD_CHUNKS=1 or 2 at start-up
 * fixes the count (for measurements). */
int bwd_chunks(const fc_args *a)
{
    const int c = env_choice(g_chunks, "FLASHCLIFFORD_FCGP_BWD_CHUNKS", 1, 2, 0);
    if (a->B < 2 * kBlockRows)
        return 1;
    return c > 0 ? c : a->B >= 2048 ? 2 : 1;
}

std::atomic<int> g_gw_kk{-1}; /* FLASHCLIFFORD_FCGP_GW_KK: 1 or 2; 0: by the rule */

/* gW's sub-steps (32 bytes of batch each) a ring step (GwCfg::KK): 2 (B 4096, N 512, NOTES_FCGP.md
 * session 17: 404 -> 318 us Cl(2,0) tf32, 225 -> 180 bf16, 485 -> 451 Cl(3,0) bf16). Cl(3,0) tf32,
 * where only three stages of 72 KB fit, measured slower at 2 in session 17 (972 -> 1043 us), and
 * faster since session 22's lighter steps (session 24, H100: 529 -> 454 us).
 * FLASHCLIFFORD_FCGP_GW_KK=1 or 2 at start-up fixes it. The schedule's steps and the kernel's
 * must agree: both come from here. */
int gw_sub_steps()
{
    const int c = env_choice(g_gw_kk, "FLASHCLIFFORD_FCGP_GW_KK", 1, 2, 0);
    return c > 0 ? c : 2;
}

/* Whether gW runs one path a unit (gw_pseq_kernel): where N_in has whole blocks of 128 rows and
 * N_out of 256 columns (its copies read whole tiles), unless set to path groups. By the rule as
 * with the setting 1: measured faster than gw_tma_kernel at every shape tried (H200, B 4096, chain
 * off, x2, us: N 512 Cl(3,0) bf16 219 against 257, tf32 368 / 433, Cl(2,0) bf16 101 / 125, tf32
 * 150 / 180; N 256 84 / 216, 128 / 276, 51 / 60, 62 / 76; NOTES_FCGP.md session 42), also where
 * its units are fewer than the SMs and all run in batch segments (Cl(2,0): 80 and 20 units). */
bool use_pseq(const fc_args *a)
{
    return gw_pseq_setting() != 2 && a->N_in % kPseqRows == 0 && a->N_out % kPseqCols == 0 && a->N_in > 0 &&
           a->N_out > 0;
}

/* gW's schedule for a chunk of Bp padded rows on this device, its steps the ring's: gw_tma_kernel's
 * (gw_sub_steps a ring step), and gw_pseq_kernel's (one step of 32 bytes of batch a ring step; the
 * Hopper backward's algebras: ids 0 and 1, by D as in dispatch) */
GwSched gw_sched(const fc_args *a, int mode, int64_t Bp)
{
    const int sms = std::max(1, sm_count(a->device));
    return make_gw_sched((int)gw_tiles(a), (int)cdiv(Bp, kSteps(mode) * gw_sub_steps()), sms);
}
PseqSched gw_pseq_sched(const fc_args *a, int mode, int64_t Bp)
{
    const int sms = std::max(1, sm_count(a->device)), kb = (int)cdiv(Bp, kSteps(mode));
    const int upp = (int)(pseq_units(a) / a->alg->P);
    const bool lpt = gw_pseq_setting() != 3;
    return a->alg->D == AlgebraTraits<0>::D ? pseq_sched<0>(upp, kb, sms, lpt) : pseq_sched<1>(upp, kb, sms, lpt);
}

int64_t up_block(int64_t n) { return cdiv(n, kBlockRows) * kBlockRows; }
/* N_out rounded up to whole row groups: the rows of go^T's panels (got_offset) */
__host__ __device__ constexpr int64_t got_rows(int64_t no) { return (no + 7) / 8 * 8; }
/* N_in in whole row blocks: the rows of xg^T, yg^T in stage order (xgt_offset) */
int64_t gw_rows(int64_t ni) { return cdiv(ni, kRows) * kRows; }

/* The backward's workspace: go^T (D x Bp x N_out rounded up to 8, in step panels: got_offset), xg^T and yg^T (D x Bp x N_in padded to whole row
 * blocks, in stage order: xgt_offset) unless grad_x and
 * grad_y hold them (in_grads), gz's W copy (P slots, N_in, N_out padded to whole steps), all in
 * the operand type; gW's segment slots (fp32 tiles) and their flags, and, where later chunks add
 * to the earlier ones' weight gradient and it is not fp32, an fp32 stash of it; Bp: the first
 * (largest) chunk's rows padded to whole batch blocks. */
struct BwdLayout {
    int chunks, nslots;
    int64_t Bc, Bp; /* rows a chunk (the last may have fewer), the first padded */
    bool in_grads;
    size_t got, xgt, ygt, wz, slots, flags, stash, total;
};
BwdLayout bwd_layout(const fc_args *a, int mode, int eb)
{
    BwdLayout L{};
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, D = a->alg->D, P = a->alg->P;
    const bool need_w = a->grad_weight, need_xy = a->grad_x || a->grad_y;
    const int db = a->dtype == FC_BF16 ? 2 : 4;
    L.chunks = bwd_chunks(a);
    L.Bc = L.chunks == 1 ? B : up_block(cdiv(B, L.chunks));
    L.Bp = up_block(L.Bc);
    /* xg^T, yg^T of chunk c in grad_x, grad_y's rows of that chunk (which gz overwrites only after
     * gW has read them): when both are given, 16-byte aligned, their components 16-byte strided,
     * and every chunk's padded rows fit in its rows of the data type */
    L.in_grads = need_w && a->grad_x && a->grad_y && ((uintptr_t)a->grad_x % 16) == 0 &&
                 ((uintptr_t)a->grad_y % 16) == 0 && (B * Ni * db) % 16 == 0;
    for (int64_t b0 = 0; b0 < B; b0 += L.Bc) {
        const int64_t rows = std::min(L.Bc, B - b0);
        L.in_grads = L.in_grads && up_block(rows) * gw_rows(Ni) * eb <= rows * Ni * db;
        if (need_w) /* chunks of two sizes at most: the slots of the larger need */
            L.nslots = std::max(L.nslots, use_pseq(a) ? gw_pseq_sched(a, mode, up_block(rows)).slots()
                                                      : gw_sched(a, mode, up_block(rows)).slots());
    }
    Bump bp;
    L.got = bp.take((size_t)(D * got_rows(No) * L.Bp) * eb);
    if (need_w && !L.in_grads) {
        L.xgt = bp.take((size_t)(D * gw_rows(Ni) * L.Bp) * eb);
        L.ygt = bp.take((size_t)(D * gw_rows(Ni) * L.Bp) * eb);
    }
    if (need_xy)
        L.wz = bp.take((size_t)(P * Ni * whole_steps(No, mode)) * eb);
    if (need_w) {
        L.slots = bp.take((size_t)L.nslots * (use_pseq(a) ? kPseqSlotFloats : gw_slot_floats((int)D, (int)P)) *
                          sizeof(float));
        L.flags = bp.take((size_t)std::max(1, L.nslots) * sizeof(int));
        if (L.chunks > 1 && db != 4)
            L.stash = bp.take((size_t)(P * Ni * No) * sizeof(float));
    }
    L.total = bp.off;
    return L;
}

/* W^T's bytes, rounded up to 256 so that g after it stays aligned for the copy engine */
size_t wt_bytes(const fc_args *a, int mode, int operand_bytes)
{
    /* N_out padded to whole column blocks; at D 8 of the two-group width (128), which covers the
     * one-group one (64) too, so that a setting changed after sizing still fits */
    const int64_t cols = tile_cols(a->alg->D) * (a->alg->D == 8 ? 2 : 1), nip = whole_steps(a->N_in, mode);
    const int64_t nop = cdiv(a->N_out, cols) * cols;
    return up256((size_t)a->alg->P * (size_t)nop * (size_t)nip * (size_t)operand_bytes);
}
} // namespace

size_t bwd_workspace_bytes(const fc_args *a, int mode, int operand_bytes)
{
    return bwd_layout(a, mode, operand_bytes).total;
}

/* the gate product's bytes (after W^T), rounded up to 256 so that the counters after it align */
size_t g_bytes(const fc_args *a, int operand_bytes)
{
    return a->gate ? up256((size_t)a->B * (size_t)a->N_in * (size_t)operand_bytes) : 0;
}
/* kNorm's flags: a count a row block, then a state a tile, over the one-group grid rounded up to
 * whole clusters (at most 2 x 2), which is also the two-group grid's width: 2 cdiv(N_out, 2 tc) */
int64_t norm_rows(const fc_args *a) { return cdiv(cdiv(a->B, kRows), 2) * 2; }
int64_t norm_flags(const fc_args *a)
{
    return norm_rows(a) * (1 + cdiv(cdiv(a->N_out, tile_cols(a->alg->D)), 2) * 2);
}

size_t workspace_bytes(const fc_args *a, int mode, int operand_bytes)
{
    return wt_bytes(a, mode, operand_bytes) + g_bytes(a, operand_bytes) +
           (a->normalize ? (size_t)norm_flags(a) * sizeof(int) : 0);
}

int64_t colblocks(const fc_args *a) { return cdiv(a->N_out, fwd_cols(a)); }

bool aligned(const void *x, const void *y, const void *o)
{
    return (((uintptr_t)x | (uintptr_t)y | (uintptr_t)o) & 15u) == 0;
}

#if FC_SM90A

/* W (P, N_in, N_out) -> W^T (P, N_out, Nip) for the forward's boxes: K (padded with zeros to
 * whole steps) fastest and permuted inside each step as the kernel reads x (phys_col),
 * tf32-rounded for the tf32 products. 32 x 32 tiles through shared memory, so both sides are
 * read and written along rows (steps of 8 or 16 divide 32, so a step's permutation stays inside
 * its tile). */
template <int MODE>
__global__ void __launch_bounds__(256) prep_wt(const Elem<MODE> *__restrict__ w, Elem<MODE> *__restrict__ wt,
                                                int64_t Ni, int64_t No, int64_t Nip)
{
    using E = Elem<MODE>;
    constexpr int KS = kSteps(MODE);
    __shared__ E tile[32][33];
    const int64_t k0 = (int64_t)blockIdx.x * 32, n0 = (int64_t)blockIdx.y * 32;
    const int p = blockIdx.z, tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    for (int r = ty; r < 32; r += 8) { /* logical K k0 + r, read from its physical column */
        const int64_t k = k0 + r, src = k - k % KS + phys_col(MODE, (int)(k % KS)), n = n0 + tx;
        E v = E(0.f);
        if (src < Ni && n < No) {
            v = w[((int64_t)p * Ni + src) * No + n];
            if constexpr (MODE == kTF32)
                v = __uint_as_float(to_tf32(v));
        }
        tile[r][tx] = v;
    }
    __syncthreads();
    for (int r = ty; r < 32; r += 8) {
        const int64_t n = n0 + r, k = k0 + tx;
        if (n < No && k < Nip)
            wt[((int64_t)p * No + n) * Nip + k] = tile[tx][r];
    }
}

/* W (P, N_in, N_out) -> W^T in stage order (wst_offset, fcgp_wgmma.cuh: stage column c of step s
 * holds W row s KS + phys_col(c); N_in padded with zeros to whole steps, N_out to whole column
 * blocks), tf32-rounded for the tf32 products. One block takes kPrepSteps steps (sg) of one
 * column block (cb) and path (p): that (kPrepSteps KS) x NT block of W[p] read along its rows
 * into shared memory, then written as the stages hold it, each step's NT x 32 bytes one
 * contiguous run in 16-byte pieces (half a row: the swizzle's unit). Session 19's 32 x 32
 * transpose with 4-byte stores took 30 us for Cl(3,0) W^T, twice its traffic's time. */
template <int MODE, int NT>
__device__ __forceinline__ void wst_block(const Elem<MODE> *__restrict__ w, Elem<MODE> *__restrict__ wst, int P,
                                          int Ni, int No, int steps, int cb, int sg, int p, int slot)
{
    using E = Elem<MODE>;
    constexpr int KS = kSteps(MODE), HALF = KS / 2, ROWS = kPrepSteps * KS;
    static_assert(HALF * sizeof(E) == 16, "a half row is 16 bytes");
    __shared__ E tile[ROWS][NT + 1];
    const int s0 = sg * kPrepSteps, n0 = cb * NT;
    /* the W row of tile row r (zero past N_in), rounded for the tf32 products */
    auto row = [&](int r) { return (s0 + r / KS) * KS + phys_col(MODE, r % KS); };
    auto put = [&](int r, int n, E v) {
        if constexpr (MODE == kTF32)
            v = __uint_as_float(to_tf32(v));
        tile[r][n] = v;
    };
    /* loads unrolled so that many are in flight: one at a time, each block's 32 or 64 dependent
     * rounds left the preparation latency-bound (23 us at Cl(2,0) bf16, three times its traffic) */
    if (No % HALF == 0 && ((uintptr_t)w & 15) == 0) { /* rows of whole 16-byte pieces */
        constexpr int NV = NT / HALF;
#pragma unroll 8
        for (int e = threadIdx.x; e < ROWS * NV; e += 256) {
            const int r = e / NV, n = e % NV * HALF, k = row(r);
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (k < Ni && n0 + n < No)
                v = __ldg((const uint4 *)(w + ((int64_t)p * Ni + k) * No + n0 + n));
            const E *ve = (const E *)&v;
#pragma unroll
            for (int i = 0; i < HALF; ++i)
                put(r, n + i, ve[i]);
        }
    } else {
#pragma unroll 8
        for (int e = threadIdx.x; e < ROWS * NT; e += 256) {
            const int r = e / NT, n = e % NT, k = row(r);
            put(r, n, k < Ni && n0 + n < No ? w[((int64_t)p * Ni + k) * No + n0 + n] : E(0.f));
        }
    }
    __syncthreads();
    for (int q = threadIdx.x; q < kPrepSteps * NT * 2; q += 256) { /* (step, row n, stored half h) */
        const int sl = q / (2 * NT), n = q / 2 % NT, h = q % 2, s = s0 + sl;
        if (s >= steps)
            break; /* q grows with the step */
        const int c0 = (h ^ ((n >> 2) & 1)) * HALF; /* the physical columns the swizzle stores there */
        alignas(16) E e[HALF];
#pragma unroll
        for (int i = 0; i < HALF; ++i)
            e[i] = tile[sl * KS + c0 + i][n];
        /* wst_offset puts physical column c0 at the start of stored half h; path p at its slot */
        *(uint4 *)(wst + wst_offset<MODE>(P, NT, steps, cb, s, slot, n, c0)) = *(const uint4 *)e;
    }
}

/* The forward's preparations in one launch (two kernel boundaries fewer than a kernel each):
 * blocks [0, wblocks) W^T in stage order (wst_block; wblocks = column blocks x step groups x P, or
 * 0 where the bf16 GEMM reads W as stored; path p in stage slot order.slot[p]: p itself, or the
 * slot order of component groups),
 * the rest the gate product g when gate (MVGELU: gate_pieces, n = B N_in values), and block 0
 * also zeroes the norm's nflags counts and states (flags). */
template <int MODE, int NT>
__global__ void __launch_bounds__(256) fwd_prep(const Elem<MODE> *__restrict__ w, Elem<MODE> *__restrict__ wst,
                                                 int P, int Ni, int No, int steps, int64_t wblocks,
                                                 const Elem<MODE> *__restrict__ x0, const Elem<MODE> *__restrict__ y0,
                                                 Elem<MODE> *__restrict__ g, int64_t n, int *flags, int nflags,
                                                 PathSlots order)
{
    const int64_t b = blockIdx.x;
    pdl::open(); /* the forward GEMM may start beside it (fwd_pdl), waiting for it before its copies */
    if (b == 0)
        for (int i = threadIdx.x; i < nflags; i += 256)
            flags[i] = 0;
    if (b < wblocks) {
        const int sgs = (steps + kPrepSteps - 1) / kPrepSteps;
        const int p = (int)(b % P);
        wst_block<MODE, NT>(w, wst, P, Ni, No, steps, (int)(b / P / sgs), (int)(b / P % sgs), p, order.slot[p]);
    } else if (g) {
        gate_pieces(x0, y0, g, n, b - wblocks, gridDim.x - wblocks);
    }
}

/* W (P, N_in, N_out) -> the input gradient's B operand (P slots, N_in, Nop): the paths in slot
 * order (PathSlots: slot s holds path slots.path[s]), each row padded with zeros to whole steps,
 * tf32-rounded for the tf32 products. 16 bytes a thread and step (Nop is whole steps), read as one
 * load where W's rows are 16-byte aligned (vec) and the piece lies inside N_out. Block 0 also
 * zeroes gW's nflags segment flags: a memset before it cost the backward ~2 us of launch latency
 * at its start (H200, NOTES_FCGP.md session 44). */
template <int MODE>
__global__ void __launch_bounds__(256) prep_wz(const Elem<MODE> *__restrict__ w, Elem<MODE> *__restrict__ wz,
                                                PathSlots slots, int64_t P, int64_t Ni, int64_t No, int64_t Nop, bool vec,
                                                int *flags, int nflags)
{
    using E = Elem<MODE>;
    constexpr int V = 16 / sizeof(E);
    const int64_t n = P * Ni * Nop / V;
    pdl::open(); /* the backward chain's first kernel (pdl.cuh): the next may start beside it */
    if (blockIdx.x == 0) /* gW's segment flags (nflags 0 without gW), read after the chain's waits */
        for (int i = threadIdx.x; i < nflags; i += blockDim.x)
            flags[i] = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i * V / Nop, k = i * V - r * Nop;
        const int64_t slot = r / Ni, row = (int64_t)slots.path[slot] * Ni + (r - slot * Ni);
        const E *src = w + row * No + k;
        alignas(16) E v[V];
        if (vec && k + V <= No) {
            *(uint4 *)v = *(const uint4 *)src;
        } else {
#pragma unroll
            for (int e = 0; e < V; ++e)
                v[e] = k + e < No ? src[e] : E(0.f);
        }
        if constexpr (MODE == kTF32) {
#pragma unroll
            for (int e = 0; e < V; ++e)
                v[e] = __uint_as_float(to_tf32(v[e]));
        }
        *(uint4 *)(wz + i * V) = *(const uint4 *)v;
    }
}

namespace {

/* The copy engine's element type of the operand mode. */
constexpr CUtensorMapDataType map_type(int mode)
{
    return mode == kTF32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

/* A tensor map encoding's status: FC_OK, or the error set (the driver without an encoder, or the
 * encoder's failure for the map `what` names, with sizes d0 .. d2) */
fc_status encoded(CUresult r, const char *what, long long d0, long long d1, long long d2)
{
    if (r == CUDA_ERROR_NOT_FOUND && !tma::tensor_map_encoder()) {
        fc_set_error("fcgp: the driver has no cuTensorMapEncodeTiled");
        return FC_ERR_CUDA;
    }
    if (r != CUDA_SUCCESS) {
        fc_set_error("fcgp: cuTensorMapEncodeTiled failed (%d) for %s (%lld, %lld, %lld)", (int)r, what, d0, d1, d2);
        return FC_ERR_CUDA;
    }
    return FC_OK;
}

/* A 3-D map of a (d2, d1, d0) array, rows contiguous, the d2 index stride2 bytes apart (0:
 * contiguous), boxes of (b2, b1, b0); zeros past its end. */
fc_status make_map(CUtensorMap *m, const void *base, CUtensorMapDataType ty, size_t es, uint64_t d0, uint64_t d1,
                   uint64_t d2, uint32_t b0, uint32_t b1, uint32_t b2, CUtensorMapSwizzle swizzle, uint64_t stride2 = 0)
{
    return encoded(tma::encode_3d(m, base, ty, es, d0, d1, d2, b0, b1, b2, swizzle, stride2), "dims", (long long)d0,
                   (long long)d1, (long long)d2);
}

/* gz's map of go^T's panels (got_offset): dims (8 rows x ks positions, Nor / 8 row groups,
 * Bp / ks steps, D components), boxes of (all, g row groups, st steps, jc components): a box's
 * rows are 256 contiguous bytes. */
fc_status got_map(CUtensorMap *m, const void *base, CUtensorMapDataType ty, size_t es, int ks, int64_t nor, int64_t bp,
                  int d, uint32_t g, uint32_t st, uint32_t jc)
{
    const uint64_t row = 8 * (uint64_t)ks * es, dims[4] = {8 * (uint64_t)ks, (uint64_t)nor / 8, (uint64_t)bp / ks, (uint64_t)d};
    const uint64_t strides[3] = {row, row * (uint64_t)nor / 8, row * (uint64_t)nor / 8 * (uint64_t)bp / ks};
    const uint32_t box[4] = {8 * (uint32_t)ks, g, st, jc};
    return encoded(tma::encode_nd<4>(m, base, ty, dims, strides, box), "go^T's panels (rows, positions, components)",
                   (long long)nor, (long long)bp, (long long)d);
}

/* The bf16 forward's map of W (P, N_in, N_out) as stored (fwd_tma_kernel's WMN): N_in's rows
 * folded as (N_in / 4 groups, 2 pairs, 2 rows), so that a box of (64 columns, 2 rows, 1 pair, 4
 * groups, P / 2 paths) at pair kg brings the 8 rows of a step's K group kg in the permuted order
 * the x fragments are read in (phys_col: rows 4 i + 2 kg + r, i = 0-3, r = 0-1), in the
 * 128-byte swizzle (WLayoutMN). N_in is a multiple of 8 (planned: 16-byte rows of x), N_out of 8. */
fc_status wmn_map(CUtensorMap *m, const void *w, int64_t Ni, int64_t No, int P)
{
    const uint64_t row = 2 * (uint64_t)No, dims[5] = {(uint64_t)No, 2, 2, (uint64_t)Ni / 4, (uint64_t)P};
    const uint64_t strides[4] = {row, 2 * row, 4 * row, (uint64_t)Ni * row};
    const uint32_t box[5] = {64, 2, 1, 4, (uint32_t)P / 2};
    return encoded(tma::encode_nd<5>(m, w, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, dims, strides, box,
                                     CU_TENSOR_MAP_SWIZZLE_128B),
                   "W as stored (paths, N_in, N_out)", P, (long long)Ni, (long long)No);
}

static_assert(tile_cols(4) == Cfg<0, kTF32>::NT && tile_cols(8) == Cfg<1, kTF32>::NT &&
                  2 * tile_cols(8) == Cfg<1, kTF32, 0, 2>::NT &&
                  gw_cols(4) == GwCfg<0, kTF32>::NT && gw_cols(8) == GwCfg<1, kTF32>::NT &&
                  gw_groups(4) == GwCfg<0, kTF32>::GROUPS && gw_groups(8) == GwCfg<1, kTF32>::GROUPS &&
                  kSteps(kTF32) == Cfg<1, kTF32>::KS && kSteps(kBF16) == Cfg<1, kBF16>::KS &&
                  kBlockRows == kBatchBlock && kRows == GwCfg<1, kTF32>::BM &&
                  gw_slot_floats(4, AlgebraTraits<0>::P) == 256 * GwCfg<0, kTF32>::PH * GwCfg<0, kTF32>::NT / 2 &&
                  gw_slot_floats(8, AlgebraTraits<1>::P) == 256 * GwCfg<1, kTF32>::PH * GwCfg<1, kTF32>::NT / 2 &&
                  kPseqRows == PseqCfg<1, kBF16>::BM && kPseqCols == PseqCfg<1, kBF16>::NT &&
                  kPseqSlotFloats == (size_t)PseqCfg<1, kBF16>::SLOT && kPseqSlotFloats == (size_t)PseqCfg<0, kTF32>::SLOT,
              "the host-side tile constants match the kernels' configurations");

/* f(id, mode) for the call's algebra and operand mode as compile-time constants: the D <= 8
 * algebras (the planning functions checked D), tf32 or bf16 products. */
template <class F> fc_status dispatch(const fc_args *a, int mode, const char *what, F &&f)
{
    auto by_algebra = [&](auto md) -> fc_status {
        switch (a->alg->D) {
        case AlgebraTraits<0>::D:
            return f(std::integral_constant<int, 0>{}, md);
        case AlgebraTraits<1>::D:
            return f(std::integral_constant<int, 1>{}, md);
        }
        fc_set_error("fcgp: no Hopper %s for %s", what, a->alg->name);
        return FC_ERR_VALUE;
    };
    static_assert(AlgebraTraits<0>::D == 4 && AlgebraTraits<1>::D == 8, "ids 0, 1: Cl(2,0), Cl(3,0)");
    if (mode == kTF32)
        return by_algebra(std::integral_constant<int, kTF32>{});
    if (mode == kBF16)
        return by_algebra(std::integral_constant<int, kBF16>{});
    fc_set_error("fcgp: no Hopper %s for operand mode %d", what, mode);
    return FC_ERR_VALUE;
}

/* The forward's cluster shape: 1 (one CTA) when W^T comes in stage order: multicast then saved
 * less than the cluster's lock step cost (same run: 2 x 1 / 1 x 2 / 1 x 1 kernel 527 / 526 / 505
 * us Cl(3,0) tf32, 283 / 323 / 272 Cl(3,0) bf16, 182 / 186 / 181 and 103 / 105 / 103 Cl(2,0)).
 * With W^T in boxes: 2 (2 x 1: two column tiles share x, y, each bringing one and multicasting
 * it) for Cl(3,0) tf32, 3 (1 x 2: two row tiles share W^T, half the paths each) otherwise, the
 * faster of the two in each cell (session 16: kernel 567 -> 536 us Cl(3,0) tf32, 207 -> 192
 * Cl(2,0) tf32, 298 -> 269 and 119 -> 100 in bf16, against one CTA).
 * FLASHCLIFFORD_FCGP_FWD_CLUSTER=1, 2 or 3 at start-up fixes it. */
int fwd_cluster(int D, int mode, bool bulk)
{
    const int c = fwd_cluster_setting();
    return c > 0 ? c : bulk ? 1 : D == 8 && mode == kTF32 ? 2 : 3;
}

std::atomic<int> g_gz_kk{-1}; /* FLASHCLIFFORD_FCGP_GZ_KK: 1, 2 or 4; 0: by the rule */

/* gz's wgmma K chunks (32 bytes of N_out) a ring step: 4 at Cl(2,0), 2 at Cl(3,0) (B 4096, N 512,
 * NOTES_FCGP.md session 17: one chunk a step spent most of each step on its waits; 446 -> 231
 * us Cl(2,0) tf32, 937 -> 515 Cl(3,0) tf32, 253 -> 158 Cl(2,0) bf16, 519 -> 379 Cl(3,0) bf16).
 * Since the producer warpgroup (session 21) the consumers have 240 registers: Cl(3,0) tf32 spills
 * 96 bytes at 4 and measured 481 us at 2 against 493-499; Cl(3,0) bf16 318 at 2, 323 at 4.
 * FLASHCLIFFORD_FCGP_GZ_KK=1, 2 or 4 at start-up fixes it. */
int gz_chunks_a_step(int D)
{
    const int c = env_choice(g_gz_kk, "FLASHCLIFFORD_FCGP_GZ_KK", 1, 4, 0);
    return c == 1 || c == 2 ? c : c == 4 ? 4 : D == 8 ? 2 : 4;
}

/* The forward in CG component groups (Cfg: 2 only at D 8, one CTA, W^T in stage order). */
template <int ID, int MODE, class Tout, int CG>
fc_status gemm_groups(const fc_args *a, const void *x, const void *y, const void *w, void *ws, const FwdOut &f,
                      cudaStream_t st)
{
    using C = Cfg<ID, MODE, 0, CG>;
    using E = Elem<MODE>;
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, Nip = whole_steps(Ni, MODE); /* as wt_bytes sizes it */
    E *wt = (E *)ws, *g = (E *)((char *)ws + wt_bytes(a, MODE, sizeof(E)));
    int *flags = (int *)((char *)g + g_bytes(a, sizeof(E))); /* kNorm: counts, then states */
    static_assert((int)FwdOut::kO == kEpiO && (int)FwdOut::kOut == kEpiOut && (int)FwdOut::kNorm == kEpiNorm,
                  "the host's kinds are the kernel's epilogue modes");
    /* bf16 out by the copy engine (store_out_tma) where a map of it can be made: rows of whole
     * 16-byte pieces, a 16-byte aligned start */
    const bool tma_out = std::is_same<Tout, __nv_bfloat16>::value && f.kind != FwdOut::kO && No % 8 == 0 &&
                         (uintptr_t)f.out % 16 == 0;
    const FwdEpi<Tout> ep{f.o,  f.partial,          (Tout *)f.out,  f.norms,      flags,
                          flags + norm_rows(a), norm_wait_ns(), (int)f.kind, tma_out ? 1 : 0};
    const bool bulk = fwd_w_bulk(), norm = f.kind == FwdOut::kNorm;
    const int64_t n = B * Ni, gblocks = std::min<int64_t>(cdiv(n, 256 * (16 / (int64_t)sizeof(E))), 2048);
    /* the cluster: CN column tiles sharing x, y (multicast), CM row tiles sharing W^T */
    const int shape = CG == 1 ? fwd_cluster(C::D, MODE, bulk) : 1;
    const unsigned CN = shape == 2 ? 2 : 1, CM = shape == 3 ? 2 : 1;
    /* bf16 in one CTA: W as stored, read MN-major (fwd_tma_kernel's WMN), where a map of it can be
     * made (rows of whole 16-byte pieces from a 16-byte aligned start): no W^T to prepare */
    const int wmn_at = fwd_w_mn();
    const bool wmn = CG == 1 && MODE == kBF16 && bulk && shape == 1 &&
                     (wmn_at == 1 || (wmn_at == 2 && C::NT >= 128)) && No % 8 == 0 && (uintptr_t)w % 16 == 0;
    /* W^T's paths in stage order: as numbered, or by slot (output grade) so that each component
     * group's are one run */
    PathSlots order = C::slots;
    if (CG == 1)
        for (int p = 0; p < C::P; ++p)
            order.slot[p] = order.path[p] = (unsigned char)p;
    const bool prep = bulk && (!wmn || norm || a->gate); /* fwd_prep runs, and the GEMM follows it by PDL */
    if (prep) { /* W^T in stage order (unless wmn), g and the zeroed flags in one launch */
        const int64_t wblocks = wmn ? 0 : wst_blocks(a, MODE);
        fwd_prep<MODE, C::NT><<<(unsigned)std::max<int64_t>(wblocks + (a->gate ? gblocks : 0), 1), 256, 0, st>>>(
            (const E *)w, wt, C::P, (int)Ni, (int)No, (int)(Nip / C::KS), wblocks, (const E *)x, (const E *)y,
            a->gate ? g : nullptr, n, norm ? flags : nullptr, norm ? (int)norm_flags(a) : 0, order);
        FC_LAUNCH_CHECK(st);
    } else if (!bulk) {
        if (norm)
            FC_CUDA_CHECK(cudaMemsetAsync(flags, 0, (size_t)norm_flags(a) * sizeof(int), st));
        prep_wt<MODE><<<dim3((unsigned)cdiv(Nip, 32), (unsigned)cdiv(No, 32), (unsigned)C::P), 256, 0, st>>>(
            (const E *)w, wt, Ni, No, Nip);
        FC_LAUNCH_CHECK(st);
        if (a->gate) { /* component 0 of x and y is their first B x N_in block */
            gate_product<E><<<(unsigned)gblocks, 256, 0, st>>>((const E *)x, (const E *)y, g, n);
            FC_LAUNCH_CHECK(st);
        }
    }

    constexpr CUtensorMapDataType ty = map_type(MODE);
    CUtensorMap xm, ym, wm, gm, om;
    fc_status s;
    /* x, y: a step's K x 64 rows x every component; W^T (unless in stage order, by bulk copies):
     * a step's K x the tile's columns x half the paths, in the 32-byte swizzle the kernel's wgmma
     * descriptors read; g: a step's K x 64 rows (without the gate the kernel never reads it: x's
     * map stands in, as for W^T in stage order) */
    if ((s = make_map(&xm, x, ty, sizeof(E), Ni, B, C::D, C::KS, C::BM, C::D, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK ||
        (s = make_map(&ym, y, ty, sizeof(E), Ni, B, C::D, C::KS, C::BM, C::D, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK)
        return s;
    if (wmn) {
        if ((s = wmn_map(&wm, w, Ni, No, C::P)) != FC_OK)
            return s;
    } else if (bulk) {
        wm = xm;
    } else if ((s = make_map(&wm, wt, ty, sizeof(E), Nip, No, C::P, C::KS, C::NT, C::P / 2,
                             CU_TENSOR_MAP_SWIZZLE_32B)) != FC_OK) {
        return s;
    }
    if (!a->gate)
        gm = xm;
    else if ((s = make_map(&gm, g, ty, sizeof(E), Ni, B, 1, C::KS, C::BM, 1, CU_TENSOR_MAP_SWIZZLE_NONE)) != FC_OK)
        return s;
    /* out (bf16, store_out_tma): boxes of 64 columns x 64 rows x a warpgroup's JW components, in
     * the 128-byte swizzle its staging is written in (otherwise x's map stands in, unread) */
    if (!tma_out)
        om = xm;
    else if ((s = make_map(&om, f.out, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, No, B, C::D, 64, C::BM, C::JW,
                           CU_TENSOR_MAP_SWIZZLE_128B)) != FC_OK)
        return s;

    /* the grid rounded up to whole clusters (tiles past the output read zeros and write nothing);
     * a column block's CG groups side by side in x */
    const dim3 grid((unsigned)(cdiv(cdiv(No, C::NT), CN) * CN * CG), (unsigned)(cdiv(cdiv(B, C::BM), CM) * CM));
    auto launch = [&](auto kern, int smem) -> fc_status {
        FC_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        cudaLaunchAttribute attr[2] = {};
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = CN, attr[0].val.clusterDim.y = CM, attr[0].val.clusterDim.z = 1;
        /* after fwd_prep (its one launch, which opens at once): the GEMM's start-up beside its tail */
        attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[1].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = grid, cfg.blockDim = dim3(kSplitThreads), cfg.dynamicSmemBytes = (size_t)smem;
        cfg.stream = st, cfg.attrs = attr, cfg.numAttrs = prep && fwd_pdl() ? 2 : 1;
        FC_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kern, xm, ym, wm, bulk && !wmn ? (const E *)wt : (const E *)nullptr, gm,
                                         om, ep, (int)B, (int)Ni, (int)No));
        return FC_OK;
    };
    /* two A register sets (PIPE) in one CTA where they fit: D 4 (at D 8, beside x's and y's 64
     * registers of fragments, ptxas spills 300-640 bytes); the clusters keep one set */
    constexpr bool SETS_FIT = C::D == 4;
    const bool pipe = SETS_FIT && fwd_pipe();
    auto pick = [&](auto gate) -> fc_status {
        constexpr bool GT = decltype(gate)::value;
        constexpr int smem = tma_smem_bytes<ID, MODE, GT, CG>();
        if constexpr (CG > 1) {
            return launch(fwd_tma_kernel<ID, MODE, 1, 1, GT, Tout, true, false, false, CG>, smem);
        }
        auto one_cta = [&](auto wmn_c) -> fc_status { /* 1 x 1, W as stored or not, by pipe */
            constexpr bool WM = decltype(wmn_c)::value;
            if constexpr (SETS_FIT)
                if (pipe)
                    return launch(fwd_tma_kernel<ID, MODE, 1, 1, GT, Tout, true, WM, true>, smem);
            return launch(fwd_tma_kernel<ID, MODE, 1, 1, GT, Tout, true, WM>, smem);
        };
        if constexpr (MODE == kBF16)
            if (wmn)
                return one_cta(std::true_type{});
        if (shape == 2)
            return launch(fwd_tma_kernel<ID, MODE, 2, 1, GT, Tout>, smem);
        if (shape == 3)
            return launch(fwd_tma_kernel<ID, MODE, 1, 2, GT, Tout>, smem);
        return one_cta(std::false_type{});
    };
    return a->gate ? pick(std::true_type{}) : pick(std::false_type{});
}

template <int ID, int MODE, class Tout>
fc_status gemm(const fc_args *a, const void *x, const void *y, const void *w, void *ws, const FwdOut &f,
               cudaStream_t st)
{
    if constexpr (AlgebraTraits<ID>::D == 8) {
        if (fwd_groups(8) == 2)
            return gemm_groups<ID, MODE, Tout, 2>(a, x, y, w, ws, f, st);
    }
    return gemm_groups<ID, MODE, Tout, 1>(a, x, y, w, ws, f, st);
}

} // namespace

fc_status forward_gemm(const fc_args *a, int mode, const void *x, const void *y, const void *w, void *ws,
                       const FwdOut &f, cudaStream_t stream)
{
    if (f.kind != FwdOut::kO && f.out_bytes != 4 && !(f.out_bytes == 2 && mode == kBF16)) {
        fc_set_error("fcgp: no Hopper forward writes %d-byte outputs in operand mode %d", f.out_bytes, mode);
        return FC_ERR_TYPE;
    }
    return dispatch(a, mode, "forward", [&](auto id, auto md) {
        constexpr int ID = decltype(id)::value, MODE = decltype(md)::value;
        if constexpr (MODE == kBF16) /* bf16 outputs only come with bf16 operands */
            if (f.kind != FwdOut::kO && f.out_bytes == 2)
                return gemm<ID, MODE, __nv_bfloat16>(a, x, y, w, ws, f, stream);
        return gemm<ID, MODE, float>(a, x, y, w, ws, f, stream);
    });
}

/* A ROWS x 32 tile of go (tile[component][batch row][column], rows from b0, columns from m0; ROWS
 * whole blocks of kBatchBlock) into go^T's panels (got_offset; components gcs apart): in the
 * operand type, tf32-rounded for the tf32 products, the batch inside each block of kBatchBlock in
 * got_row's order, the 16-byte stores along the panels (a tile's 32 rows of a step are 1 KB
 * contiguous); nothing past Nor or Bp. */
template <int MODE, int D, int ROWS = 32>
__device__ __forceinline__ void got_store(const float (*tile)[ROWS][33], Elem<MODE> *__restrict__ got, int64_t b0,
                                          int64_t m0, int64_t Nor, int64_t Bp, int64_t gcs)
{
    using E = Elem<MODE>;
    constexpr int KS = kSteps(MODE), V = 16 / sizeof(E), PIECES = ROWS * 32 / V;
    static_assert(V * 2 == KS && ROWS % kBatchBlock == 0 && kBatchBlock % KS == 0, "two pieces a 32-byte row");
    /* piece i of a component: step i / 64 of the tile, row (i / 2) % 32, 16-byte half i % 2 in
     * memory, which holds the batch positions of half (i % 2) ^ swizzle. A thread's piece i is the
     * same in every round (256 threads, PIECES dividing 256), so its place and tile rows are
     * formed once: formed a piece, their integer arithmetic outweighed the copy (session 31). */
    static_assert(D * PIECES % 256 == 0 && 256 % PIECES == 0, "whole rounds of pieces, one i a thread");
    const int i = threadIdx.x % PIECES, a0 = threadIdx.x / PIECES, step = i / 64, ml = i / 2 % 32;
    const int64_t m = m0 + ml, q0 = b0 + step * KS;
    if (m >= Nor || q0 >= Bp)
        return;
    const int half = (i % 2) ^ (int)((m >> 2) & 1); /* the positions this piece holds */
    int at[V];                                      /* its elements in a component's tile */
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const int pos = step * KS + half * V + k; /* in the tile, physical */
        at[k] = (pos / kBatchBlock * kBatchBlock + got_row(MODE, pos % kBatchBlock)) * 33 + ml;
    }
    E *out = got + got_offset<MODE>(gcs, Nor, 0, m, q0 + half * V);
#pragma unroll
    for (int it = 0; it < D * PIECES / 256; ++it) {
        const int a = it * (256 / PIECES) + a0;
        const float *ta = &tile[a][0][0];
        uint32_t w[4]; /* the piece's 16 bytes */
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if constexpr (MODE == kTF32)
                w[u] = to_tf32(ta[at[u]]);
            else
                w[u] = pack_bf16x2(__float2bfloat16_rn(ta[at[2 * u]]), __float2bfloat16_rn(ta[at[2 * u + 1]]));
        }
        stg_b128(out + a * gcs, w);
    }
}

/* go_A = gout_A / r_g - coef_g sign(t_g) s_A v_A, t_g = sum over the grade of s_A v_A^2, as fcgp.cu's
 * norm_bwd forms it, from one element's gout and v and its row's 1 / r_g (inv) and coef_g */
template <int ID>
__device__ __forceinline__ void go_of(const float (&gv)[AlgebraTraits<ID>::D], const float (&vv)[AlgebraTraits<ID>::D],
                                      const float *inv, const float *coef, float (&go)[AlgebraTraits<ID>::D])
{
    using A = AlgebraTraits<ID>;
    constexpr int D = A::D, G = A::G;
    float t[G] = {};
    static_for<D>([&](auto ac) {
        constexpr int a = decltype(ac)::value, g = A::table.grade[a], s = A::table.grade_sign[a];
        if constexpr (s != 0)
            t[g] += float(s) * vv[a] * vv[a];
    });
    static_for<D>([&](auto ac) {
        constexpr int a = decltype(ac)::value, g = A::table.grade[a], s = A::table.grade_sign[a];
        go[a] = gv[a] * inv[g] - coef[g] * sign_of(t[g]) * float(s) * vv[a];
    });
}

/* go^T (got_offset: step panels of Nor rows; components gcs apart) of a chunk of B rows, from
 * grad_out (D, rows, N_out; components cs apart) and, with the norm (stats != NULL), the
 * forward's out or o (v, the same layout) and the row statistics (B, 2 G: 1 / r_g, then coef_g;
 * go_of); without the norm go = gout. Zeros from B to Bp and from N_out to Nor. CW columns a
 * thread, CW tiles of ROWS x 32 of all D components through shared memory: the loads go along
 * grad_out's rows, the stores along the panels (got_store). The grid's row blocks start at row r0
 * of the chunk (a multiple of 32): the backward transposes a chunk in slices, each right after
 * norm_stats formed its statistics (go_slice_rows).
 * CW 1: one element a load, 32 x 32 a block. CW 2: one 2-element load a component (a warp's 32
 * lanes one 128-byte line of bf16, where CW 1's took 64 bytes), 16 x 64 a block; N_out even and
 * grad_out, v aligned to two elements (the launcher checks). At Cl(3,0) bf16 CW 1 moved 1.6 TB/s
 * (Nsight Compute, H200: DRAM 34%) on the backward's critical path; CW 2 took the transpose 45 ->
 * 34 us and the backward 627 -> 616 us (B 4096, N 512; NOTES_FCGP.md session 40). Each element's
 * arithmetic is the same, so the same bits. */
template <int ID, int MODE, class Tv, class Tg, int CW>
__global__ void __launch_bounds__(256) go_transpose(const Tv *__restrict__ v, const Tg *__restrict__ gout,
                                                     const float *__restrict__ stats, Elem<MODE> *__restrict__ got,
                                                     int64_t B, int64_t No, int64_t Bp, int64_t cs, int64_t gcs,
                                                     int64_t r0)
{
    static_assert(CW == 1 || CW == 2, "one or two columns a thread");
    constexpr int D = AlgebraTraits<ID>::D, G = AlgebraTraits<ID>::G, ROWS = CW == 1 ? 32 : kBatchBlock;
    __shared__ float tile[CW][D][ROWS][33]; /* tile h: columns [m0 + 32 h, m0 + 32 h + 32) */
    const int64_t b0 = r0 + (int64_t)blockIdx.x * ROWS, m0 = (int64_t)blockIdx.y * 32 * CW, Nor = got_rows(No);
    pdl::waiting(); /* go^T's buffer is free once the chunk before's gz is done, and the statistics are formed */
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32, h = CW * tx / 32, c = CW * tx % 32;
#pragma unroll
    for (int r = 0; r < ROWS / 8; ++r) {
        const int row = ty + 8 * r;
        const int64_t b = b0 + row, m = m0 + CW * tx; /* with CW 2 m is even, so m + 1 < N_out with m */
        float go[CW][D] = {};
        if (b < B && m < No) {
            float gv[CW][D];
            auto load_cols = [&](const auto *p, float(&out)[CW][D]) { /* the thread's columns of p's rows */
                if constexpr (CW == 2)
                    load_comps2(p + b * No + m, cs, out);
                else
                    static_for<D>([&](auto ac) { out[0][decltype(ac)::value] = load(p[decltype(ac)::value * cs + b * No + m]); });
            };
            load_cols(gout, gv);
            if (stats) {
                float vv[CW][D];
                load_cols(v, vv);
#pragma unroll
                for (int e = 0; e < CW; ++e) /* 1 / r_g, then coef_g */
                    go_of<ID>(gv[e], vv[e], stats + b * 2 * G, stats + b * 2 * G + G, go[e]);
            } else {
#pragma unroll
                for (int e = 0; e < CW; ++e)
#pragma unroll
                    for (int a = 0; a < D; ++a)
                        go[e][a] = gv[e][a];
            }
        }
#pragma unroll
        for (int a = 0; a < D; ++a)
#pragma unroll
            for (int e = 0; e < CW; ++e)
                tile[h][a][row][c + e] = go[e][a];
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < CW; ++t)
        got_store<MODE, D, ROWS>(tile[t], got, b0, m0 + 32 * t, Nor, Bp, gcs);
}

/* go_rows' cluster: kGoRowsCluster CTAs a 16-row block, each at most kGoRowsTiles 32-column tiles
 * of N_out, which it holds in shared memory between the statistics and the transpose; so the one
 * pass takes N_out up to 512 (the two passes any). */
constexpr int kGoRowsCluster = 8, kGoRowsTiles = 2;
/* its dynamic shared memory for `tiles` tiles a CTA: grad_out's and v's, as floats */
constexpr int go_rows_smem(int D, int tiles) { return 2 * tiles * D * kBatchBlock * 33 * 4; }

/* go^T of a chunk with the norm, its row statistics formed in the same pass (go_fused; the
 * two-pass form is norm_stats of fcgp.cu, then go_transpose above), each element of grad_out and
 * v read once. A cluster of kGoRowsCluster CTAs takes the chunk's batch rows [16 b, 16 b + 16),
 * b = blockIdx.x / kGoRowsCluster (one block of go^T's batch order, so the stores fill whole
 * 32-byte runs of the panels), CTA r the `per` 32-column tiles from r per: it loads them into
 * shared memory (the compute type, a row 33 floats apart) summing each row's grade dots; the
 * cluster's partial dots are summed in rank order through distributed shared memory, and 1 / r_g
 * and coef_g formed as norm_stats forms them (row_norm, norm_coef; from the forward's norms (B, G)
 * or its nparts partial sums; rows global from b0g); then go (go_of) replaces grad_out in shared
 * memory and goes into the panels (got_store). Summing the dots over the whole row first and
 * reading the row back from L2 after (a first form) missed L2: a chunk's rows are more than L2
 * holds and every block reads them at once (NOTES_FCGP.md session 30). grad_out, v: the chunk's
 * first row (components cs apart); rows from `rows` to Bp and columns from N_out to Nor get zeros.
 * CW 2 (two adjacent columns a load; at D 8, where a CTA takes two tiles, N_out is even and
 * grad_out, v are aligned to two elements) changes the loads alone, so the result is bitwise CW 1's. */
template <int ID, int MODE, class Tv, class Tg, int CW>
__global__ void __cluster_dims__(kGoRowsCluster, 1, 1) __launch_bounds__(256, 3)
    go_rows(const Tv *__restrict__ v, const Tg *__restrict__ gout, const float *__restrict__ norms,
            const float *__restrict__ partial, int nparts, bool from_out, int64_t Btot, int64_t b0g,
            Elem<MODE> *__restrict__ got, int64_t rows, int64_t No, int64_t Bp, int64_t cs, int64_t gcs, int per,
            bool free_role)
{
    using A = AlgebraTraits<ID>;
    constexpr int D = A::D, G = A::G, RB = kBatchBlock, WARPS = 8, QC = kGoRowsCluster;
    static_assert(RB == 2 * WARPS && RB * G <= 256, "two rows a thread");
    using Tile = float[D][RB][33];
    extern __shared__ __align__(16) unsigned char go_smem[];
    Tile *gs = (Tile *)go_smem, *vs = gs + per; /* [tile][component][row][column] */
    __shared__ float part[RB][G];   /* this CTA's dots, which the cluster reads */
    __shared__ float st[RB][2 * G]; /* each row's 1 / r_g, then coef_g */
    /* go^T's buffer is free once the chunk before's gz is done; the first chunk's go_rows reads and
     * writes nothing the chain's kernels before it touch (prep_wz, gelu_transpose), so it takes the
     * free role (pdl.cuh) and starts in gelu_transpose's last wave instead of after it: the
     * backward -1.5 us at Cl(2,0) tf32, B 4096, N 512 (H200, NOTES_FCGP.md session 44) */
    if (free_role)
        pdl::free_start();
    else
        pdl::waiting();
    const int tid = threadIdx.x, tx = tid % 32, ty = tid / 32;
    const int64_t r0 = (int64_t)(blockIdx.x / QC) * RB, Nor = got_rows(No), tiles = (No + 31) / 32;
    const int64_t c0 = (int64_t)tma::cluster_rank() * per;
    const int nt = (int)(c0 < tiles ? (tiles - c0 < per ? tiles - c0 : per) : 0); /* this CTA's tiles */

    /* thread (tx, ty): column tx of each tile, rows ty and ty + 8, into shared memory and the
     * dots. At D 4 every load of both tiles goes out before the first is used (32 values a
     * thread, still three CTAs an SM): go_rows 71 -> 60 us at Cl(2,0) fp32, where the loop over
     * the tiles waited for the first tile's loads; at D 8 the 64 values took two CTAs an SM and
     * it lost (110 -> 117 us at Cl(3,0) fp32; H100, NOTES_FCGP.md session 31), and two rows in
     * flight (32 values) measured the same as one (106.7 -> 107.4 us, session 32) */
    float dot[2][G] = {};
    constexpr bool GATHER = D <= 4;
    constexpr int SLOTS = GATHER ? 2 * kGoRowsTiles : 1;
    float gv[SLOTS][D], vv[SLOTS][D];
    auto load_row = [&](int i, int h, int slot) { /* tile i's row ty + 8 h into gv[slot], vv[slot] */
        const int64_t m = (c0 + i) * 32 + tx, b = r0 + ty + WARPS * h;
        const bool in = i < nt && b < rows && m < No;
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value;
            gv[slot][a] = in ? load<Tg>(gout[a * cs + b * No + m]) : 0.f;
            vv[slot][a] = in ? load<Tv>(v[a * cs + b * No + m]) : 0.f;
        });
    };
    auto keep_row = [&](int i, int h, int slot) { /* ... into shared memory, and its dots */
        const int row = ty + WARPS * h;
        static_for<D>([&](auto ac) {
            constexpr int a = decltype(ac)::value, g = A::table.grade[a];
            gs[i][a][row][tx] = gv[slot][a], vs[i][a][row][tx] = vv[slot][a];
            dot[h][g] += gv[slot][a] * vv[slot][a];
        });
    };
    if constexpr (CW == 2) {
        /* thread tx loads columns 2 tx, 2 tx + 1 of the CTA's two tiles (tile tx / 16) as one
         * 2-element load a component and array, every row of a round in flight together (both
         * rows where that is at most 128 bytes a thread), so a warp moves twice the bytes a load
         * of CW 1's and at D 8 has them in flight at once, where CW 1 waited for each row's 16
         * loads (at bf16, D 8: go_rows' 85 us over two chunks was 39% of the copy bandwidth at
         * B 4096, N 512; it took 74 us so, NOTES_FCGP.md session 54). The values go to shared
         * memory as loaded; the dots are then summed from there in CW 1's order, so the bits are
         * CW 1's. */
        static_assert(kGoRowsTiles == 2, "a CTA's two tiles are 64 adjacent columns");
        constexpr int WIDE = sizeof(Tv) > sizeof(Tg) ? sizeof(Tv) : sizeof(Tg);
        constexpr int HR = D * 2 * 2 * WIDE * 2 <= 128 ? 2 : 1; /* rows a round */
        const int i = tx / 16, col = 2 * (tx % 16);
        const int64_t m = (c0 + i) * 32 + col; /* even, so m + 1 < No with m */
        for (int h0 = 0; h0 < 2; h0 += HR) {
            ElemRun<Tg, 2> gr[HR][D];
            ElemRun<Tv, 2> vr[HR][D];
#pragma unroll
            for (int hh = 0; hh < HR; ++hh) {
                const int64_t b = r0 + ty + WARPS * (h0 + hh);
                const bool in = i < nt && b < rows && m < No;
#pragma unroll
                for (int a = 0; a < D; ++a) {
                    gr[hh][a] = in ? *(const ElemRun<Tg, 2> *)(gout + a * cs + b * No + m) : ElemRun<Tg, 2>{};
                    vr[hh][a] = in ? *(const ElemRun<Tv, 2> *)(v + a * cs + b * No + m) : ElemRun<Tv, 2>{};
                }
            }
            if (i < nt)
#pragma unroll
                for (int hh = 0; hh < HR; ++hh) {
                    const int row = ty + WARPS * (h0 + hh);
#pragma unroll
                    for (int a = 0; a < D; ++a)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            gs[i][a][row][col + e] = load<Tg>(gr[hh][a].e[e]);
                            vs[i][a][row][col + e] = load<Tv>(vr[hh][a].e[e]);
                        }
                }
        }
        __syncthreads(); /* each thread's dots read the columns another loaded */
        for (int i = 0; i < nt; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = ty + WARPS * h;
                static_for<D>([&](auto ac) {
                    constexpr int a = decltype(ac)::value, g = A::table.grade[a];
                    dot[h][g] += gs[i][a][row][tx] * vs[i][a][row][tx];
                });
            }
    } else if constexpr (GATHER) {
#pragma unroll
        for (int i = 0; i < kGoRowsTiles; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                load_row(i, h, 2 * i + h);
#pragma unroll
        for (int i = 0; i < kGoRowsTiles; ++i)
            if (i < nt)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    keep_row(i, h, 2 * i + h);
    } else { /* a row at a time, as up to session 31 */
        for (int i = 0; i < nt; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                load_row(i, h, 0);
                keep_row(i, h, 0);
            }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                dot[h][g] += __shfl_xor_sync(0xffffffffu, dot[h][g], off);
            if (tx == 0)
                part[ty + WARPS * h][g] = dot[h][g];
        }
    tma::cluster_sync(); /* every CTA's dots written and visible across the cluster */
    if (tid < RB * G) { /* row tid / G, grade tid % G: the cluster's dots in rank order */
        const int row = tid / G, g = tid % G;
        float d = 0.f;
#pragma unroll
        for (int r = 0; r < QC; ++r)
            d += tma::ld_cluster_f32(tma::cluster_addr(&part[row][g], (uint32_t)r));
        float inv = 0.f, coef = 0.f;
        if (r0 + row < rows) {
            inv = 1.f / row_norm(norms, partial, nparts, Btot, b0g + r0 + row, G, g, No);
            coef = from_out ? norm_coef<true>(d, inv, No) : norm_coef<false>(d, inv, No);
        }
        st[row][g] = inv, st[row][G + g] = coef;
    }
    tma::cluster_sync(); /* the statistics in place, and no CTA's dots read any more (it may exit) */

    /* go over grad_out in shared memory (each thread its own elements), then the panels */
    for (int i = 0; i < nt; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = ty + WARPS * h;
            float gv[D], vv[D], go[D];
#pragma unroll
            for (int a = 0; a < D; ++a)
                gv[a] = gs[i][a][row][tx], vv[a] = vs[i][a][row][tx];
            go_of<ID>(gv, vv, st[row], st[row] + G, go);
#pragma unroll
            for (int a = 0; a < D; ++a)
                gs[i][a][row][tx] = go[a];
        }
    __syncthreads();
    for (int i = 0; i < nt; ++i)
        got_store<MODE, D, RB>(gs[i], got, r0, (c0 + i) * 32, Nor, Bp, gcs);
}

namespace {

/* The rows of each slice of a chunk's go^T transpose, where fcgp.cu's norm_stats forms the norm's
 * statistics slice by slice just before it (BwdInputs::stats_rows), in whole 32-row blocks: by
 * default the chunk in one slice. Slices small enough that the transpose reads grad_out and out
 * back from L2 made it faster, and the statistics pass (then norm_bwd, one row a block), whose
 * grid then filled the GPU only once or less, slower by as much (H100, B 4096, N 512,
 * NOTES_FCGP.md session 24: Cl(3,0) tf32 63 + 67 us at a chunk, 77 + 54 at 512 rows, 72 + 57 at
 * 1024); go_rows_setting sets them. */
int64_t go_slice_rows(int64_t Bc)
{
    const int64_t whole = cdiv(Bc, 32) * 32, n = go_rows_setting();
    return n > 0 ? std::min(whole, cdiv(n, 32) * 32) : whole;
}

/* a type as a value, to pick a template's instantiation at run time */
template <class T> struct type_is {
    using type = T;
};

template <int ID, int MODE, class Tio>
fc_status bwd(const fc_args *a, const BwdInputs &in, void *ws, cudaStream_t st)
{
    using E = Elem<MODE>;
    using W = GwCfg<ID, MODE>;
    using Z = GzCfg<ID, MODE>;
    constexpr int D = AlgebraTraits<ID>::D, G = AlgebraTraits<ID>::G;
    constexpr CUtensorMapDataType ty = map_type(MODE);
    const BwdLayout L = bwd_layout(a, MODE, sizeof(E));
    const int64_t B = a->B, Ni = a->N_in, No = a->N_out, Nop = whole_steps(No, MODE), Nor = got_rows(No);
    constexpr int KSB = kSteps(MODE); /* batch positions a step of go^T's panels */
    const bool need_w = a->grad_weight, need_xy = a->grad_x || a->grad_y;
    char *p = (char *)ws;
    E *got = (E *)(p + L.got), *wz = (E *)(p + L.wz);
    const E *x = (const E *)in.x, *y = (const E *)in.y;
    Tio *gx = (Tio *)a->grad_x, *gy = (Tio *)a->grad_y, *gwt = (Tio *)a->grad_weight;
    /* gW's fp32 sum over the chunks so far: grad_weight itself when fp32, else the stash */
    float *wsum = std::is_same<Tio, float>::value ? (float *)gwt : (float *)(p + L.stash);
    int *flags = (int *)(p + L.flags);
    const int nflags = need_w ? std::max(1, L.nslots) : 0; /* the segments' flags, raised to the chunk's number + 1 */
    if (nflags && !need_xy) /* else prep_wz zeroes them */
        FC_CUDA_CHECK(cudaMemsetAsync(flags, 0, (size_t)nflags * sizeof(int), st));

    fc_status s;
    /* the launches below as one programmatic chain (pdl.cuh): prep_wz, and for each chunk
     * gelu_transpose and norm_stats (free: they touch nothing the chunk before still reads or
     * writes, so they fill the SMs its gz's last wave leaves idle), go_transpose (waiting) or
     * go_rows (waiting, but free in the first chunk, which has no gz before it), gW and gz
     * (waiting) */
    pdl::Chain chain(bwd_pdl());
    if (need_xy) { /* W in slot order */
        constexpr int V = 16 / sizeof(E); /* prep_wz's piece */
        const bool vec = No % V == 0 && (uintptr_t)in.w % 16 == 0;
        FC_CUDA_CHECK(pdl::launch(chain.next(), prep_wz<MODE>,
                                  dim3((unsigned)std::min<int64_t>(cdiv(Z::P * Ni * Nop / V, 256), 4096)), dim3(256), 0,
                                  st, (const E *)in.w, wz, Z::slots, (int64_t)Z::P, Ni, No, Nop, vec, flags, nflags));
        FC_LAUNCH_CHECK(st);
    }
    /* gz over a chunk, KK wgmma K chunks a ring step: the maps' boxes are a step long, W's rows in
     * the swizzle of its step's bytes */
    auto gz = [&](auto kk, int64_t b0, int64_t rows, int64_t Bp) -> fc_status {
        using Zk = GzCfg<ID, MODE, decltype(kk)::value>;
        auto kgz = gz_tma_kernel<ID, MODE, Tio, decltype(kk)::value>; /* clusters of GROUPS CTAs along x */
        FC_CUDA_CHECK(cudaFuncSetAttribute(kgz, cudaFuncAttributeMaxDynamicSharedMemorySize, Zk::SMEM));
        constexpr CUtensorMapSwizzle wsw = Zk::RB == 32   ? CU_TENSOR_MAP_SWIZZLE_32B
                                           : Zk::RB == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                          : CU_TENSOR_MAP_SWIZZLE_128B;
        CUtensorMap om, wm;
        fc_status r;
        if ((r = make_map(&wm, wz, ty, sizeof(E), Nop, Ni, Zk::P, Zk::KS, Zk::BN, Zk::PS, wsw)) != FC_OK ||
            (r = got_map(&om, got, ty, sizeof(E), KSB, Nor, Bp, D, Zk::KS / 8, Zk::BM / KSB, Zk::JG)) != FC_OK)
            return r;
        const dim3 grid((unsigned)(cdiv(Ni, Zk::BN) * Zk::GROUPS), (unsigned)cdiv(rows, Zk::BM));
        FC_CUDA_CHECK(pdl::launch(chain.next(), kgz, grid, dim3(Zk::THREADS), Zk::SMEM, st, om, wm, x + b0 * Ni,
                                  y + b0 * Ni, gx ? gx + b0 * Ni : nullptr, gy ? gy + b0 * Ni : nullptr, (int)rows,
                                  (int)Ni, (int)No, B * Ni, (int)a->gate));
        FC_LAUNCH_CHECK(st);
        return FC_OK;
    };
    const int gzk = gz_chunks_a_step(D);

    /* the norm's statistics and go^T in one pass (go_rows) or two (norm_stats, go_transpose). The
     * rule: one pass where grad_out and v are both fp32, or at D 8 (H100, B 4096, N 512,
     * NOTES_FCGP.md sessions 30-32: backward 1120 -> 1098 us at Cl(3,0) tf32; 477 -> 467 Cl(2,0)
     * tf32 once go_rows gathers its loads at D 4; session 53, today's kernels: 647 -> 609 us at
     * Cl(3,0) bf16). With 2-byte elements at D 4 it loses to the two passes, whose many small
     * blocks hide the latency better (317 -> 321 us at Cl(2,0) bf16 in session 32, 261 -> 263 in
     * session 53) */
    const int gf = go_fused_setting();
    const bool rule = (sizeof(Tio) == 4 && in.v_bytes == 4) || D == 8;
    const bool fused = in.stats_rows && No > 0 && cdiv(No, 32) <= kGoRowsCluster * kGoRowsTiles &&
                       (gf == 1 || (gf == 0 && rule));
    for (int64_t b0 = 0, c = 0; b0 < B; b0 += L.Bc, ++c) {
        const int64_t rows = std::min(L.Bc, B - b0), Bp = up_block(rows), cs = B * No, gcs = Bp * Nor;
        /* xg^T, yg^T of the chunk (in grad_x, grad_y's rows of it, or ws) for gW, first: it and the
         * statistics are the chunk's free kernels */
        E *xgt = nullptr, *ygt = nullptr;
        int64_t dcs = 0; /* their component stride, in elements */
        if (need_w) {
            if (L.in_grads) {
                xgt = (E *)((char *)a->grad_x + (size_t)(b0 * Ni) * sizeof(Tio));
                ygt = (E *)((char *)a->grad_y + (size_t)(b0 * Ni) * sizeof(Tio));
                dcs = B * Ni * (int64_t)sizeof(Tio) / (int64_t)sizeof(E);
            } else {
                xgt = (E *)(p + L.xgt), ygt = (E *)(p + L.ygt);
                dcs = gw_rows(Ni) * Bp;
            }
            /* bf16 two columns a load where both inputs allow it */
            const bool pair =
                MODE == kBF16 && Ni % 2 == 0 && fc::aligned(x, 2 * sizeof(E)) && fc::aligned(y, 2 * sizeof(E));
            const dim3 tgrid((unsigned)(gw_rows(Ni) / gelu_transpose_cols(MODE)), (unsigned)cdiv(Bp, 32), 2);
            FC_CUDA_CHECK(pdl::launch(chain.next(), pair ? gelu_transpose<MODE, D, MODE == kBF16> : gelu_transpose<MODE, D>,
                                      tgrid, dim3(256), 0, st, x + b0 * Ni, y + b0 * Ni, xgt, ygt, rows, Ni, Bp, B * Ni,
                                      dcs, (int)a->gate));
            FC_LAUNCH_CHECK(st);
        }

        /* go^T of the chunk: with the norm, statistics and go^T in one pass (go_rows), or each
         * slice's statistics, then its go^T */
        const Tio *gout = (const Tio *)a->grad_out + b0 * No;
        const float *stats = in.stats ? in.stats + b0 * 2 * G : nullptr;
        /* with v (the norm): its type, float or Tio, as a type_is value to f */
        auto by_v = [&](auto f) { return in.v && in.v_bytes == 4 ? f(type_is<float>{}) : f(type_is<Tio>{}); };
        if (fused) {
            s = by_v([&](auto vt) -> fc_status {
                using Tv = typename decltype(vt)::type;
                const Tv *vc = (const Tv *)in.v + b0 * No;
                const int per = (int)cdiv(cdiv(No, 32), kGoRowsCluster), smem = go_rows_smem(D, per);
                /* two columns a load (CW 2) at D 8 where a CTA takes two tiles and the arrays allow:
                 * the backward 607 -> 592 us at Cl(3,0) bf16 (go_rows x2 84 -> 74 us), 1014 -> 997
                 * Cl(3,0) tf32 (go_rows unchanged); at D 4 it lost (Cl(2,0) tf32 go_rows 59 -> 66 us,
                 * the backward +5 us), so D 4 keeps CW 1 (H100, B 4096, N 512, NOTES_FCGP.md
                 * session 54) */
                auto k = go_rows<ID, MODE, Tv, Tio, 1>;
                if constexpr (D == 8)
                    if (per == kGoRowsTiles && No % 2 == 0 && fc::aligned(gout, 2 * sizeof(Tio)) &&
                        fc::aligned(vc, 2 * sizeof(Tv)) && go_pairs_setting())
                        k = go_rows<ID, MODE, Tv, Tio, 2>;
                FC_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
                FC_CUDA_CHECK(pdl::launch(chain.next(), k, dim3((unsigned)(Bp / kBlockRows * kGoRowsCluster)),
                                          dim3(256), (size_t)smem, st, vc, gout, in.norms,
                                          in.partial, in.nparts, in.from_out, B, b0, got, rows, No, Bp, cs, gcs, per,
                                          c == 0));
                FC_LAUNCH_CHECK(st);
                return FC_OK;
            });
            if (s != FC_OK)
                return s;
        } else {
            const int64_t slice = in.stats_rows ? go_slice_rows(L.Bc) : cdiv(Bp, 32) * 32;
            for (int64_t r0 = 0; r0 < Bp; r0 += slice) {
                const int64_t n = std::min(slice, Bp - r0);
                if (in.stats_rows && r0 < rows &&
                    (s = in.stats_rows(in.stats_ctx, b0 + r0, std::min(n, rows - r0), st, chain.next())) != FC_OK)
                    return s;
                s = by_v([&](auto vt) -> fc_status {
                    using Tv = typename decltype(vt)::type;
                    const Tv *vc = in.v ? (const Tv *)in.v + b0 * No : nullptr;
                    /* two columns a thread where N_out is even and grad_out, v 2-element aligned */
                    if (No % 2 == 0 && fc::aligned(gout, 2 * sizeof(Tio)) && fc::aligned(vc, 2 * sizeof(Tv)) &&
                        go_pairs_setting()) {
                        const dim3 pgrid((unsigned)cdiv(n, kBatchBlock), (unsigned)cdiv(No, 64));
                        FC_CUDA_CHECK(pdl::launch(chain.next(), go_transpose<ID, MODE, Tv, Tio, 2>, pgrid, dim3(256),
                                                  0, st, vc, gout, stats, got, rows, No, Bp, cs, gcs, r0));
                    } else {
                        const dim3 tgrid((unsigned)cdiv(n, 32), (unsigned)cdiv(No, 32));
                        FC_CUDA_CHECK(pdl::launch(chain.next(), go_transpose<ID, MODE, Tv, Tio, 1>, tgrid, dim3(256),
                                                  0, st, vc, gout, stats, got, rows, No, Bp, cs, gcs, r0));
                    }
                    FC_LAUNCH_CHECK(st);
                    return FC_OK;
                });
                if (s != FC_OK)
                    return s;
            }
        }

        if (need_w) { /* gW of the chunk */
            /* all Bp positions: a row may lie past `rows` (got_row) */
            const bool last = b0 + rows >= B;
            auto gw = [&](auto kk) -> fc_status {
                /* xg^T, yg^T in stage order: rows of 256 bytes (8 of a tile's), a box one tile of 8
                 * rows and the group's (XC) or all (D) components; go^T's panels likewise, rows of 8
                 * N_out rows of a step (got_offset), a box NT / 8 of them (one step's NT columns) */
                CUtensorMap xm, ym, gm;
                fc_status r;
                const uint64_t xs2 = (uint64_t)dcs * sizeof(E), trows = (uint64_t)(Bp / W::KS) * (gw_rows(Ni) / kRows) * 8;
                if ((r = make_map(&xm, xgt, ty, sizeof(E), 8 * W::KS, trows, D, 8 * W::KS, 8, W::XC,
                                  CU_TENSOR_MAP_SWIZZLE_NONE, xs2)) != FC_OK ||
                    (r = make_map(&ym, ygt, ty, sizeof(E), 8 * W::KS, trows, D, 8 * W::KS, 8, D,
                                  CU_TENSOR_MAP_SWIZZLE_NONE, xs2)) != FC_OK ||
                    (r = make_map(&gm, got, ty, sizeof(E), 8 * W::KS, (uint64_t)(Bp / W::KS) * (Nor / 8), D, 8 * W::KS,
                                  W::NT / 8, D, CU_TENSOR_MAP_SWIZZLE_NONE, (uint64_t)gcs * sizeof(E))) != FC_OK)
                    return r;
                const GwSched sch = gw_sched(a, MODE, Bp);
                using Wk = GwCfg<ID, MODE, decltype(kk)::value>;
                auto kgw = gw_tma_kernel<ID, MODE, Tio, decltype(kk)::value>;
                FC_CUDA_CHECK(cudaFuncSetAttribute(kgw, cudaFuncAttributeMaxDynamicSharedMemorySize, Wk::SMEM));
                FC_CUDA_CHECK(pdl::launch(chain.next(), kgw, dim3((unsigned)sch.grid), dim3(Wk::THREADS), Wk::SMEM, st,
                                          xm, ym, gm, sch, (float *)(p + L.slots), flags, (int)c + 1,
                                          c > 0 ? (const float *)wsum : nullptr, last ? nullptr : wsum, gwt, (int)Ni,
                                          (int)No));
                FC_LAUNCH_CHECK(st);
                return FC_OK;
            };
            /* one path a unit where the shapes allow (use_pseq: by bulk copies, no tensor maps), else
             * the sub-steps gw_sched counted with */
            if (use_pseq(a)) {
                const PseqSched sch = gw_pseq_sched(a, MODE, Bp);
                auto kp = gw_pseq_kernel<ID, MODE, Tio>;
                constexpr int smem = PseqCfg<ID, MODE>::SMEM;
                FC_CUDA_CHECK(cudaFuncSetAttribute(kp, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
                FC_CUDA_CHECK(pdl::launch(chain.next(), kp, dim3((unsigned)sch.grid), dim3(kSplitThreads), smem, st,
                                          (const E *)xgt, (const E *)ygt, dcs, (const E *)got, gcs, (int)Nor, sch,
                                          (float *)(p + L.slots), flags, (int)c + 1,
                                          c > 0 ? (const float *)wsum : nullptr, last ? nullptr : wsum, gwt, (int)Ni,
                                          (int)No));
                FC_LAUNCH_CHECK(st);
                s = FC_OK;
            } else {
                s = gw_sub_steps() == 2 ? gw(std::integral_constant<int, 2>{}) : gw(std::integral_constant<int, 1>{});
            }
            if (s != FC_OK)
                return s;
        }
        if (need_xy) { /* the chunk's input gradients, over its xg^T, yg^T when they lay in grad_x, grad_y */
            s = gzk == 4   ? gz(std::integral_constant<int, 4>{}, b0, rows, Bp)
                : gzk == 2 ? gz(std::integral_constant<int, 2>{}, b0, rows, Bp)
                           : gz(std::integral_constant<int, 1>{}, b0, rows, Bp);
            if (s != FC_OK)
                return s;
        }
    }
    return FC_OK;
}

} // namespace

fc_status backward(const fc_args *a, int mode, const BwdInputs &in, void *ws, cudaStream_t stream)
{
    /* the data type: fp32 (tf32 products always), or bf16 for bf16 data */
    return dispatch(a, mode, "backward", [&](auto id, auto md) -> fc_status {
        constexpr int ID = decltype(id)::value, MODE = decltype(md)::value;
        if constexpr (MODE == kBF16)
            if (a->dtype == FC_BF16)
                return bwd<ID, MODE, __nv_bfloat16>(a, in, ws, stream);
        return bwd<ID, MODE, float>(a, in, ws, stream);
    });
}

#else /* not built for sm_90a: planned() is false, so this is never reached */

fc_status forward_gemm(const fc_args *, int, const void *, const void *, const void *, void *, const FwdOut &,
                       cudaStream_t)
{
    fc_set_error("fcgp: this build has no sm_90a code (build with 9.0 among FLASHCLIFFORD_CUDA_ARCHS)");
    return FC_ERR_VALUE;
}

fc_status backward(const fc_args *, int, const BwdInputs &, void *, cudaStream_t)
{
    fc_set_error("fcgp: this build has no sm_90a code (build with 9.0 among FLASHCLIFFORD_CUDA_ARCHS)");
    return FC_ERR_VALUE;
}

#endif

} // namespace sm90
} // namespace fcgp
} // namespace fc

extern "C" {

int fc_fcgp_sm90_compiled(void) { return fc::fcgp::sm90::compiled(); }

namespace {
/* The C API's on/off switches: on >= 0 sets the state (any non-zero: on); returns it. */
int toggle(int on, void (*set)(bool), bool (*get)())
{
    if (on >= 0)
        set(on != 0);
    return get();
}
} // namespace

int fc_fcgp_sm90_switch(int on) { return toggle(on, fc::fcgp::sm90::set_enabled, fc::fcgp::sm90::enabled); }
int fc_fcgp_sm90_bwd_switch(int on) { return toggle(on, fc::fcgp::sm90::set_bwd_enabled, fc::fcgp::sm90::bwd_enabled); }
int fc_fcgp_sm90_fwd_norm_switch(int on)
{
    return toggle(on, fc::fcgp::sm90::set_fused_norm, fc::fcgp::sm90::fused_norm);
}
int fc_fcgp_sm90_fwd_wbulk_switch(int on)
{
    return toggle(on, fc::fcgp::sm90::set_fwd_w_bulk, fc::fcgp::sm90::fwd_w_bulk);
}
int fc_fcgp_sm90_bwd_pdl_switch(int on) { return toggle(on, fc::fcgp::sm90::set_bwd_pdl, fc::fcgp::sm90::bwd_pdl); }
int fc_fcgp_sm90_bwd_go_pairs_switch(int on)
{
    return toggle(on, fc::fcgp::sm90::set_go_pairs, fc::fcgp::sm90::go_pairs_setting);
}
int fc_fcgp_sm90_gw_pseq(int mode)
{
    if (mode >= 0)
        fc::fcgp::sm90::set_gw_pseq(mode);
    return fc::fcgp::sm90::gw_pseq_setting();
}
int fc_fcgp_sm90_bwd_go_fused(int mode)
{
    if (mode >= 0)
        fc::fcgp::sm90::set_go_fused(mode);
    return fc::fcgp::sm90::go_fused_setting();
}
long long fc_fcgp_sm90_bwd_go_rows(long long rows)
{
    if (rows >= 0)
        fc::fcgp::sm90::set_go_rows(rows);
    return fc::fcgp::sm90::go_rows_setting();
}

int fc_fcgp_sm90_fwd_cluster(int shape)
{
    if (shape >= 0)
        fc::fcgp::sm90::set_fwd_cluster(shape);
    return fc::fcgp::sm90::fwd_cluster_setting();
}
int fc_fcgp_sm90_fwd_groups(int groups)
{
    if (groups >= 0)
        fc::fcgp::sm90::set_fwd_groups(groups);
    return fc::fcgp::sm90::fwd_groups_setting();
}

long long fc_fcgp_sm90_fwd_norm_wait(long long us)
{
    if (us >= 0)
        fc::fcgp::sm90::set_norm_wait_us(us);
    return fc::fcgp::sm90::norm_wait_ns() / 1000;
}

} // extern "C"
