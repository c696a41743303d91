/* fcgp_lab.cu — standalone lab for the CUDA FCGP (csrc/cuda/fcgp.cu): a plain-loop float64
 * CPU reference that is the spec, a check of every algebra x precision x normalize on odd
 * and aligned shapes (forward, norms, all three gradients, bitwise determinism), edge
 * sizes, and a timing table with achieved TFLOP/s.
 *
 *   nvcc -std=c++17 -O3 -I csrc -gencode=arch=compute_90,code=sm_90 \
 *        benchmarks/lab/fcgp_lab.cu -o fcgp_lab
 *   ./fcgp_lab            check (all)        ./fcgp_lab --small   small cases (sanitizer)
 *   ./fcgp_lab --time     timing table       ./fcgp_lab --edge    empty sizes
 *   ./fcgp_lab --tiny     one case per path (racecheck)
 *   ./fcgp_lab --profile  one Cl(3,0) tf32 + bf16 forward and backward (ncu)
 *
 * Shapes: x, y (D, B, N_in); W (P, N_in, N_out); out (D, B, N_out); norms (B, G).
 * Inputs are drawn representable in bf16, so one float64 reference serves every dtype;
 * the tolerances are SPEC section 2's.
 */
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../csrc/cuda/fcgp.cu"
#include "../../csrc/cuda/runtime.cu"
#include "lab_check.h"

extern "C" {
static char lab_msg[512];
void fc_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lab_msg, sizeof lab_msg, fmt, ap);
    va_end(ap);
}
const char *fc_error_message(void) { return lab_msg; }
}


using std::vector;
typedef std::vector<double> vec;

/* ---------------------------------------------------------------- algebra (run time) */
struct Alg {
    fc_algebra a;
    fc::AlgebraTable tb;
};

static Alg make_alg(int id)
{
    static const int metrics[5][5] = {{2, 1, 1, 0, 0}, {3, 1, 1, 1, 0}, {4, 1, -1, -1, -1}, {4, 0, 1, 1, 1}, {4, 1, 1, 1, 1}};
    static const char *names[5] = {"Cl(2,0)", "Cl(3,0)", "Cl(1,3)", "Cl(3,0,1)", "Cl(4,0)"};
    const int *m = metrics[id];
    Alg r;
    r.tb = fc::make_table(m[0], m[1], m[2], m[3], m[4]);
    memset(&r.a, 0, sizeof r.a);
    r.a.id = id;
    r.a.name = names[id];
    r.a.n = r.tb.n, r.a.D = r.tb.D, r.a.G = r.tb.G, r.a.P = r.tb.P, r.a.T = r.tb.T;
    for (int i = 0; i < r.tb.D; ++i) {
        r.a.grade[i] = r.tb.grade[i];
        r.a.grade_sign[i] = r.tb.grade_sign[i];
    }
    for (int g = 0; g <= r.tb.G; ++g)
        r.a.grade_start[g] = r.tb.grade_start[g];
    for (int t = 0; t < r.tb.T; ++t)
        r.a.term[t] = r.tb.term[t];
    return r;
}

static int num_pairs(const fc::AlgebraTable &tb)
{
    int n = 0;
    for (int t = 0; t < tb.T; ++t) {
        bool seen = false;
        for (int u = 0; u < t; ++u)
            seen |= tb.term[u].j == tb.term[t].j && tb.term[u].path == tb.term[t].path;
        n += !seen;
    }
    return n;
}

/* ---------------------------------------------------------------- float64 reference */
static double Phi(double t) { return 0.5 * (1.0 + erf(t / sqrt(2.0))); }
static double phi(double t) { return exp(-0.5 * t * t) / sqrt(2.0 * M_PI); }

struct Ref {
    vec out, norms, gx, gy, gw;
};

/* Everything by plain loops over (b, term, n, m), SPEC section 2 read literally. */
static Ref reference(const fc::AlgebraTable &tb, int64_t B, int64_t Ni, int64_t No, bool normalize, const vec &x,
                     const vec &y, const vec &W, const vec &gout)
{
    const int D = tb.D, G = tb.G, P = tb.P;
    const int64_t BNi = B * Ni, BNo = B * No;
    vec xg(D * BNi), yg(D * BNi), o(D * BNo, 0.0);
    for (int a = 0; a < D; ++a)
        for (int64_t e = 0; e < BNi; ++e) {
            xg[a * BNi + e] = x[a * BNi + e] * Phi(x[e]);
            yg[a * BNi + e] = y[a * BNi + e] * Phi(y[e]);
        }
    for (int64_t b = 0; b < B; ++b)
        for (int t = 0; t < tb.T; ++t) {
            const fc_term &e = tb.term[t];
            for (int64_t n = 0; n < Ni; ++n) {
                const double c = e.sign * xg[e.i * BNi + b * Ni + n] * yg[e.k * BNi + b * Ni + n];
                const double *w = &W[(e.path * Ni + n) * No];
                double *oj = &o[e.j * BNo + b * No];
                for (int64_t m = 0; m < No; ++m)
                    oj[m] += c * w[m];
            }
        }
    Ref R;
    R.out = o;
    vec r(B * G, 1.0), tg(G * BNo, 0.0);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t m = 0; m < No; ++m)
            for (int a = 0; a < D; ++a)
                tg[tb.grade[a] * BNo + b * No + m] += tb.grade_sign[a] * o[a * BNo + b * No + m] * o[a * BNo + b * No + m];
    if (normalize) {
        R.norms.resize(B * G);
        for (int64_t b = 0; b < B; ++b)
            for (int g = 0; g < G; ++g) {
                double q = 0;
                for (int64_t m = 0; m < No; ++m)
                    q += fabs(tg[g * BNo + b * No + m]);
                if (No > 0)
                    q /= (double)No;
                r[b * G + g] = R.norms[b * G + g] = sqrt(q + FC_NORM_EPS);
            }
        for (int a = 0; a < D; ++a)
            for (int64_t b = 0; b < B; ++b)
                for (int64_t m = 0; m < No; ++m)
                    R.out[a * BNo + b * No + m] = o[a * BNo + b * No + m] / r[b * G + tb.grade[a]];
    }
    /* backward */
    vec go = gout;
    if (normalize) {
        for (int64_t b = 0; b < B; ++b)
            for (int g = 0; g < G; ++g) {
                double dot = 0;
                for (int a = tb.grade_start[g]; a < tb.grade_start[g + 1]; ++a)
                    for (int64_t m = 0; m < No; ++m)
                        dot += gout[a * BNo + b * No + m] * o[a * BNo + b * No + m];
                const double rg = r[b * G + g];
                for (int a = tb.grade_start[g]; a < tb.grade_start[g + 1]; ++a)
                    for (int64_t m = 0; m < No; ++m) {
                        const double t = tg[g * BNo + b * No + m], sg = (t > 0) - (t < 0);
                        const int64_t i = a * BNo + b * No + m;
                        go[i] = gout[i] / rg - dot * sg * tb.grade_sign[a] * o[i] / (No * rg * rg * rg);
                    }
            }
    }
    vec gxg(D * BNi, 0.0), gyg(D * BNi, 0.0);
    R.gw.assign(P * Ni * No, 0.0);
    for (int64_t b = 0; b < B; ++b)
        for (int t = 0; t < tb.T; ++t) {
            const fc_term &e = tb.term[t];
            const double *gj = &go[e.j * BNo + b * No];
            for (int64_t n = 0; n < Ni; ++n) {
                const double *w = &W[(e.path * Ni + n) * No];
                double gz = 0;
                for (int64_t m = 0; m < No; ++m)
                    gz += gj[m] * w[m];
                const int64_t xi = e.i * BNi + b * Ni + n, yk = e.k * BNi + b * Ni + n;
                gxg[xi] += e.sign * yg[yk] * gz;
                gyg[yk] += e.sign * xg[xi] * gz;
                const double z = e.sign * xg[xi] * yg[yk];
                double *gw = &R.gw[(e.path * Ni + n) * No];
                for (int64_t m = 0; m < No; ++m)
                    gw[m] += z * gj[m];
            }
        }
    R.gx.assign(D * BNi, 0.0);
    R.gy.assign(D * BNi, 0.0);
    for (int64_t e = 0; e < BNi; ++e) {
        double sx = 0, sy = 0;
        for (int a = 0; a < D; ++a) {
            R.gx[a * BNi + e] = gxg[a * BNi + e] * Phi(x[e]);
            R.gy[a * BNi + e] = gyg[a * BNi + e] * Phi(y[e]);
            sx += gxg[a * BNi + e] * x[a * BNi + e];
            sy += gyg[a * BNi + e] * y[a * BNi + e];
        }
        R.gx[e] += sx * phi(x[e]);
        R.gy[e] += sy * phi(y[e]);
    }
    return R;
}

/* ---------------------------------------------------------------- device buffers */
static size_t esize(fc_dtype d) { return d == FC_F64 ? 8 : d == FC_F32 ? 4 : 2; }

static void *to_device(const vec &v, fc_dtype d)
{
    const size_t n = v.size(), es = esize(d);
    vector<unsigned char> h(n * es + 16);
    for (size_t i = 0; i < n; ++i) {
        if (d == FC_F64)
            ((double *)h.data())[i] = v[i];
        else if (d == FC_F32)
            ((float *)h.data())[i] = (float)v[i];
        else if (d == FC_BF16)
            ((__nv_bfloat16 *)h.data())[i] = __float2bfloat16((float)v[i]);
        else
            ((__half *)h.data())[i] = __float2half((float)v[i]);
    }
    void *p = nullptr;
    CK(cudaMalloc(&p, n * es + 16));
    CK(cudaMemcpy(p, h.data(), n * es, cudaMemcpyHostToDevice));
    return p;
}

static void *poisoned(size_t n, size_t es)
{
    void *p = nullptr;
    CK(cudaMalloc(&p, n * es + 16));
    CK(cudaMemset(p, 0xff, n * es + 16)); /* NaN in every float type */
    return p;
}

static vec from_device(const void *p, size_t n, fc_dtype d)
{
    const size_t es = esize(d);
    vector<unsigned char> h(n * es + 1);
    CK(cudaMemcpy(h.data(), p, n * es, cudaMemcpyDeviceToHost));
    vec v(n);
    for (size_t i = 0; i < n; ++i) {
        if (d == FC_F64)
            v[i] = ((double *)h.data())[i];
        else if (d == FC_F32)
            v[i] = ((float *)h.data())[i];
        else if (d == FC_BF16)
            v[i] = __bfloat162float(((__nv_bfloat16 *)h.data())[i]);
        else
            v[i] = __half2float(((__half *)h.data())[i]);
    }
    return v;
}

static bool same_bytes(const void *a, const void *b, size_t bytes)
{
    vector<unsigned char> ha(bytes + 1), hb(bytes + 1);
    CK(cudaMemcpy(ha.data(), a, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b, bytes, cudaMemcpyDeviceToHost));
    return memcmp(ha.data(), hb.data(), bytes) == 0;
}

/* ||a - r|| / ||r||, NaN never passes (returned as +inf). */
static double rel_err(const vec &a, const vec &r)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < r.size(); ++i) {
        if (!std::isfinite(a[i]))
            return INFINITY;
        num += (a[i] - r[i]) * (a[i] - r[i]);
        den += r[i] * r[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

struct ModeSpec {
    const char *name;
    fc_dtype dt;
    fc_precision prec;
    double tol;
};
static const ModeSpec kModes[] = {
    {"f64", FC_F64, FC_PREC_HIGHEST, 1e-12},   {"f32", FC_F32, FC_PREC_HIGHEST, 1e-5},
    {"tf32", FC_F32, FC_PREC_TF32, 2e-3},      {"f32-bf16", FC_F32, FC_PREC_BF16, 2e-2},
    {"bf16", FC_BF16, FC_PREC_HIGHEST, 2e-2},  {"f16", FC_F16, FC_PREC_HIGHEST, 5e-3},
};

static std::mt19937_64 rng(12345);
static vec randn_bf16(size_t n, double scale)
{
    std::normal_distribution<double> nd(0.0, scale);
    vec v(n);
    for (auto &e : v)
        e = __bfloat162float(__float2bfloat16((float)nd(rng)));
    return v;
}

static void *dev_ws(size_t bytes)
{
    void *p = nullptr;
    if (bytes)
        CK(cudaMalloc(&p, bytes));
    return p;
}

static int failures = 0;

static bool check_status(fc_status s, const char *what)
{
    if (s != FC_OK) {
        printf("  %s: status %d: %s\n", what, (int)s, fc_error_message());
        ++failures;
        return false;
    }
    return true;
}

/* One (algebra, shape, normalize) draw, every mode against one reference. */
static void check_case(int id, int64_t B, int64_t Ni, int64_t No, bool normalize, const vector<int> &modes)
{
    Alg al = make_alg(id);
    const fc::AlgebraTable &tb = al.tb;
    const int D = tb.D, G = tb.G, P = tb.P;
    vec x = randn_bf16(D * B * Ni, 1.0), y = randn_bf16(D * B * Ni, 1.0);
    vec W = randn_bf16(P * Ni * No, 1.0 / sqrt((double)Ni * 2));
    vec gout = randn_bf16(D * B * No, 1.0);
    Ref R = reference(tb, B, Ni, No, normalize, x, y, W, gout);
    for (int mi : modes) {
        const ModeSpec &M = kModes[mi];
        const fc_dtype cd = M.dt == FC_F64 ? FC_F64 : FC_F32;
        void *dx = to_device(x, M.dt), *dy = to_device(y, M.dt), *dw = to_device(W, M.dt), *dg = to_device(gout, M.dt);
        void *dout = poisoned(D * B * No, esize(M.dt)), *dn = poisoned(B * G, esize(cd));
        fc_args a;
        memset(&a, 0, sizeof a);
        a.gate = 1;
        a.alg = &al.a;
        a.dtype = M.dt;
        a.B = B, a.N_in = Ni, a.N_out = No;
        a.normalize = normalize;
        a.precision = M.prec;
        a.x = dx, a.y = dy, a.weight = dw, a.out = dout, a.norms = normalize ? dn : nullptr;
        a.device = 0;
        size_t wsb = fc_fcgp_forward_workspace_cuda(&a);
        a.workspace = dev_ws(wsb), a.workspace_bytes = wsb;
        bool ok = check_status(fc_fcgp_forward_cuda(&a, nullptr), "forward");
        CK(cudaDeviceSynchronize());
        const double e_out = rel_err(from_device(dout, D * B * No, M.dt), R.out);
        const double e_n = normalize ? rel_err(from_device(dn, B * G, cd), R.norms) : 0.0;
        cudaFree(a.workspace);

        /* backward: norms from the forward on every other mode, recomputed otherwise */
        const bool give_norms = normalize && (mi % 2 == 0);
        void *gx = poisoned(D * B * Ni, esize(M.dt)), *gy = poisoned(D * B * Ni, esize(M.dt)),
             *gw = poisoned(P * Ni * No, esize(M.dt));
        a.out = nullptr;
        a.norms = give_norms ? dn : nullptr;
        a.grad_out = dg, a.grad_x = gx, a.grad_y = gy, a.grad_weight = gw;
        wsb = fc_fcgp_backward_workspace_cuda(&a);
        a.workspace = dev_ws(wsb), a.workspace_bytes = wsb;
        ok &= check_status(fc_fcgp_backward_cuda(&a, nullptr), "backward");
        CK(cudaDeviceSynchronize());
        const double e_gx = rel_err(from_device(gx, D * B * Ni, M.dt), R.gx);
        const double e_gy = rel_err(from_device(gy, D * B * Ni, M.dt), R.gy);
        const double e_gw = rel_err(from_device(gw, P * Ni * No, M.dt), R.gw);
        /* bitwise determinism: again into fresh poisoned buffers */
        void *gx2 = poisoned(D * B * Ni, esize(M.dt)), *gy2 = poisoned(D * B * Ni, esize(M.dt)),
             *gw2 = poisoned(P * Ni * No, esize(M.dt));
        a.grad_x = gx2, a.grad_y = gy2, a.grad_weight = gw2;
        ok &= check_status(fc_fcgp_backward_cuda(&a, nullptr), "backward again");
        CK(cudaDeviceSynchronize());
        const bool det = same_bytes(gx, gx2, D * B * Ni * esize(M.dt)) && same_bytes(gy, gy2, D * B * Ni * esize(M.dt)) &&
                         same_bytes(gw, gw2, P * Ni * No * esize(M.dt));
        /* only grad_y requested: the others untouched */
        CK(cudaMemset(gx2, 0xff, D * B * Ni * esize(M.dt)));
        CK(cudaMemset(gy2, 0xff, D * B * Ni * esize(M.dt)));
        a.grad_x = nullptr, a.grad_weight = nullptr, a.grad_y = gy2;
        ok &= check_status(fc_fcgp_backward_cuda(&a, nullptr), "backward (grad_y only)");
        CK(cudaDeviceSynchronize());
        const bool only_y = same_bytes(gy, gy2, D * B * Ni * esize(M.dt));
        cudaFree(a.workspace);

        const double worst = std::max(std::max(e_out, e_n), std::max(e_gx, std::max(e_gy, e_gw)));
        const bool pass = ok && worst <= M.tol && det && only_y;
        failures += !pass;
        printf("%-9s %-8s norm=%d B=%-4lld Ni=%-4lld No=%-4lld | out %.2e norms %.2e gx %.2e gy %.2e gW %.2e | det %d "
               "y-only %d | tol %.0e %s\n",
               al.a.name, M.name, (int)normalize, (long long)B, (long long)Ni, (long long)No, e_out, e_n, e_gx, e_gy,
               e_gw, (int)det, (int)only_y, M.tol, pass ? "PASS" : "FAIL");
        fflush(stdout);
        for (void *p : {dx, dy, dw, dg, dout, dn, gx, gy, gw, gx2, gy2, gw2})
            cudaFree(p);
    }
}

/* Empty sizes: statuses, zero gradients, norms = sqrt(eps). */
static void check_edges()
{
    Alg al = make_alg(1);
    const int D = 8, G = 4, P = 20;
    struct {
        int64_t B, Ni, No;
    } shapes[] = {{0, 16, 16}, {5, 0, 16}, {5, 16, 0}};
    for (auto s : shapes) {
        for (int mi : {1, 2, 4}) {
            const ModeSpec &M = kModes[mi];
            const fc_dtype cd = FC_F32;
            vec x(D * s.B * s.Ni, 0.5), W(P * s.Ni * s.No, 0.25), go(D * s.B * s.No, 1.0);
            void *dx = to_device(x, M.dt), *dy = to_device(x, M.dt), *dw = to_device(W, M.dt), *dg = to_device(go, M.dt);
            void *dout = poisoned(D * s.B * s.No, esize(M.dt)), *dn = poisoned(s.B * G, 4);
            void *gx = poisoned(D * s.B * s.Ni, esize(M.dt)), *gy = poisoned(D * s.B * s.Ni, esize(M.dt)),
                 *gw = poisoned(P * s.Ni * s.No, esize(M.dt));
            fc_args a;
            memset(&a, 0, sizeof a);
            a.gate = 1;
            a.alg = &al.a, a.dtype = M.dt, a.B = s.B, a.N_in = s.Ni, a.N_out = s.No, a.normalize = 1,
            a.precision = M.prec;
            a.x = dx, a.y = dy, a.weight = dw, a.out = dout, a.norms = dn;
            size_t wsb = fc_fcgp_forward_workspace_cuda(&a);
            a.workspace = dev_ws(wsb), a.workspace_bytes = wsb;
            bool ok = check_status(fc_fcgp_forward_cuda(&a, nullptr), "edge forward");
            CK(cudaDeviceSynchronize());
            vec out = from_device(dout, D * s.B * s.No, M.dt), nr = from_device(dn, s.B * G, cd);
            for (double v : out)
                ok &= v == 0.0;
            for (double v : nr)
                ok &= fabs(v - 1e-3) < 1e-9;
            cudaFree(a.workspace);
            a.out = nullptr, a.grad_out = dg, a.grad_x = gx, a.grad_y = gy, a.grad_weight = gw;
            wsb = fc_fcgp_backward_workspace_cuda(&a);
            a.workspace = dev_ws(wsb), a.workspace_bytes = wsb;
            ok &= check_status(fc_fcgp_backward_cuda(&a, nullptr), "edge backward");
            CK(cudaDeviceSynchronize());
            for (double v : from_device(gx, D * s.B * s.Ni, M.dt))
                ok &= v == 0.0;
            for (double v : from_device(gw, P * s.Ni * s.No, M.dt))
                ok &= v == 0.0;
            /* too small a workspace is refused */
            if (wsb > 0) {
                a.workspace_bytes = wsb - 1;
                ok &= fc_fcgp_backward_cuda(&a, nullptr) == FC_ERR_VALUE;
            }
            cudaFree(a.workspace);
            failures += !ok;
            printf("edge B=%lld Ni=%lld No=%lld %-5s %s\n", (long long)s.B, (long long)s.Ni, (long long)s.No, M.name,
                   ok ? "PASS" : "FAIL");
            for (void *p : {dx, dy, dw, dg, dout, dn, gx, gy, gw})
                cudaFree(p);
        }
    }
}

/* ---------------------------------------------------------------- timing */
static float median(vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class Fn> static float time_ms(Fn &&fn, int reps = 15)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i)
        fn();
    vector<float> ts;
    for (int i = 0; i < reps; ++i) {
        CK(cudaEventRecord(e0));
        fn();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts.push_back(ms);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return median(ts);
}

static void timing(int64_t B, int64_t N, bool once = false)
{
    printf("\n%-9s %-6s %5s %5s | %9s %8s | %9s %9s %9s | %8s\n", "algebra", "mode", "B", "N", "fwd ms", "TF/s", "bwd ms",
           "bwd x,y", "bwd W", "fwd+bwd");
    for (int id : {1, 0}) {
        if (once && id != 1)
            continue;
        Alg al = make_alg(id);
        const int D = al.tb.D, G = al.tb.G, P = al.tb.P, Tp = num_pairs(al.tb);
        const double flop = 2.0 * Tp * B * N * N;
        for (int mi : {2, 4, 1, 5}) {
            if (once && mi != 2 && mi != 4)
                continue;
            const ModeSpec &M = kModes[mi];
            vec x = randn_bf16(D * B * N, 1.0), W = randn_bf16(P * N * N, 1.0 / sqrt(2.0 * N));
            vec go = randn_bf16(D * B * N, 1.0);
            void *dx = to_device(x, M.dt), *dy = to_device(x, M.dt), *dw = to_device(W, M.dt), *dg = to_device(go, M.dt);
            void *dout = poisoned(D * B * N, esize(M.dt)), *dn = poisoned(B * G, 4);
            void *gx = poisoned(D * B * N, esize(M.dt)), *gy = poisoned(D * B * N, esize(M.dt)),
                 *gw = poisoned(P * N * N, esize(M.dt));
            fc_args a;
            memset(&a, 0, sizeof a);
            a.gate = 1;
            a.alg = &al.a, a.dtype = M.dt, a.B = B, a.N_in = N, a.N_out = N, a.normalize = 1, a.precision = M.prec;
            a.x = dx, a.y = dy, a.weight = dw, a.out = dout, a.norms = dn;
            fc_args b = a;
            b.out = nullptr, b.norms = nullptr, b.grad_out = dg, b.grad_x = gx, b.grad_y = gy, b.grad_weight = gw;
            const size_t wsb = std::max(fc_fcgp_forward_workspace_cuda(&a), fc_fcgp_backward_workspace_cuda(&b));
            void *ws = dev_ws(wsb);
            a.workspace = b.workspace = ws, a.workspace_bytes = b.workspace_bytes = wsb;
            fc_args bxy = b, bw = b;
            bxy.grad_weight = nullptr;
            bw.grad_x = bw.grad_y = nullptr;
            bool ok = check_status(fc_fcgp_forward_cuda(&a, nullptr), "timing forward") &&
                      check_status(fc_fcgp_backward_cuda(&b, nullptr), "timing backward");
            CK(cudaDeviceSynchronize());
            if (!ok || once)
                continue;
            const float tf = time_ms([&] { fc_fcgp_forward_cuda(&a, nullptr); });
            const float tb = time_ms([&] { fc_fcgp_backward_cuda(&b, nullptr); });
            const float txy = time_ms([&] { fc_fcgp_backward_cuda(&bxy, nullptr); });
            const float tw = time_ms([&] { fc_fcgp_backward_cuda(&bw, nullptr); });
            CK(cudaGetLastError());
            printf("%-9s %-6s %5lld %5lld | %9.3f %8.1f | %9.3f %9.3f %9.3f | %8.3f   (T'=%d, %.1f GFLOP/pass)\n",
                   al.a.name, M.name, (long long)B, (long long)N, tf, flop / tf * 1e-9, tb, txy, tw, tf + tb, Tp,
                   flop * 1e-9);
            fflush(stdout);
            for (void *p : {dx, dy, dw, dg, dout, dn, gx, gy, gw, ws})
                cudaFree(p);
        }
    }
}

int main(int argc, char **argv)
{
    const std::string arg = argc > 1 ? argv[1] : "";
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    const vector<int> all = {0, 1, 2, 3, 4, 5};
    if (arg == "--time") {
        timing(4096, 512);
    } else if (arg == "--profile") { /* one forward + backward of Cl(3,0) tf32 and bf16, for ncu */
        timing(4096, 512, true);
    } else if (arg == "--edge") {
        check_edges();
    } else if (arg == "--tiny") { /* racecheck: one case per matrix path */
        check_case(1, 19, 21, 35, true, {1, 2, 4});
    } else if (arg == "--small") {
        for (int id : {1, 3})
            check_case(id, 19, 21, 35, true, all);
        check_case(0, 9, 16, 24, false, all);
    } else {
        for (int id = 0; id < 5; ++id) {
            check_case(id, 67, 45, 70, true, all);  /* odd: element loads, every tail */
            check_case(id, 130, 64, 96, false, all); /* aligned: cp.async 16-byte path */
            check_case(id, 97, 136, 40, true, all);  /* N_in > N_out, several K stages */
        }
        check_edges();
    }
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "ALL PASS", failures);
    return failures ? 1 : 0;
}
