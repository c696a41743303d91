"""Small cases of every CUDA kernel, for compute-sanitizer (run by tests/gpu_check.sh).

    python tests/gpu_sanitize.py [--quick]   every algebra x dtype x normalize, forward and
                                             backward, resident and two-pass rows, aligned
                                             and misaligned (--quick: two algebras, fp32/bf16)
    python tests/gpu_sanitize.py --canary    a deliberate out-of-bounds write (CuPy): the
                                             sanitizer must report it, else its run proves nothing
"""

import sys

import torch

import flashclifford as fc


def canary():
    import cupy

    k = cupy.RawKernel(r'extern "C" __global__ void canary(float *p) { p[threadIdx.x + 1] = 1.0f; }', "canary")
    a = cupy.zeros(32, dtype=cupy.float32)
    k((1,), (32,), (a,))  # writes one element past the end
    cupy.cuda.runtime.deviceSynchronize()


def run(quick):
    algebras = [fc.Algebra(3), fc.Algebra((1, -1, -1, -1))] if quick else [fc.Algebra(m) for m in
                                                                            fc.algebra.KERNEL_METRICS]
    dtypes = [torch.float32, torch.bfloat16] if quick else [torch.float32, torch.float64, torch.bfloat16,
                                                            torch.float16]
    shapes = [(3, 37), (2, 5000)]  # a resident row, and one long enough for the two-pass path
    n = 0
    for alg in algebras:
        for dtype in dtypes:
            for B, N in shapes:
                for normalize in (True, False):
                    for offset in (0, 1):
                        base = torch.randn(alg.D * B * N + offset, device="cuda").to(dtype)
                        x = base[offset:].view(alg.D, B, N)
                        y = torch.randn_like(x)
                        w = torch.randn(N, alg.P, device="cuda", dtype=dtype)
                        xs, ys, ws = (t.clone().requires_grad_() for t in (x, y, w))
                        out = fc.gelu_sgp_norm(xs, ys, ws, alg, normalize)
                        out.backward(torch.randn_like(out))
                        # the raw backward without saved norms (recompute path)
                        fc.ops.sgp_backward(torch.randn_like(x), x, y, w, alg, normalize)
                        n += 1
    torch.cuda.synchronize()
    print(f"gpu_sanitize: {n} cases ran")


if __name__ == "__main__":
    if "--canary" in sys.argv:
        canary()
    else:
        run("--quick" in sys.argv)
