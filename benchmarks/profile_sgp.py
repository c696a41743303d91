"""Run SGP kernels a few times for a profiler (ncu) or a quick event timing.

    python benchmarks/profile_sgp.py ALG DTYPE B N [fwd|bwd|both] [reps]
    ncu --clock-control none -k regex:sgp_ ... python benchmarks/profile_sgp.py 1 bfloat16 8192 1024 fwd 3

Prints the median event time per call and the bytes-moved bandwidth (forward: x, y, out;
backward: x, y, grad_out, grad_x, grad_y), for the journal in benchmarks/NOTES.md.
"""

import sys

import torch

import flashclifford as fc


def main(argv):
    alg, dtype, B, N = int(argv[0]), getattr(torch, argv[1]), int(argv[2]), int(argv[3])
    what = argv[4] if len(argv) > 4 else "both"
    reps = int(argv[5]) if len(argv) > 5 else 20
    table = fc._C.algebra_table(alg)
    D, P, G = table["D"], table["P"], table["G"]
    g = torch.Generator(device="cuda").manual_seed(0)
    x, y, go = (torch.randn(D, B, N, device="cuda", generator=g).to(dtype) for _ in range(3))
    w = torch.randn(N, P, device="cuda", generator=g).to(dtype)
    out = torch.empty_like(x)
    norms = torch.empty(B, G, device="cuda", dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    gx, gy, gw = torch.empty_like(x), torch.empty_like(x), torch.empty_like(w)
    ws = torch.empty(fc._C.workspace_size("sgp", True, alg, str(dtype).split(".")[1], B, N, N),
                     dtype=torch.uint8, device="cuda")
    s = torch.cuda.current_stream().cuda_stream

    def fwd():
        fc._C.sgp_forward(x, y, w, alg, True, out=out, norms=norms, stream=s)

    def bwd():
        fc._C.sgp_backward(go, x, y, w, alg, True, norms=norms, grad_x=gx, grad_y=gy, grad_weight=gw,
                           workspace=ws, stream=s)

    fwd()
    calls = {"fwd": [fwd], "bwd": [bwd], "both": [fwd, bwd]}[what]
    passes = {"fwd": 3, "bwd": 5, "both": 8}[what]
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for c in calls:
            c()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)
    t = sorted(times)[len(times) // 2]
    gb = passes * D * B * N * x.element_size() / 1e9
    print(f"alg {alg} {argv[1]} B={B} N={N} {what}: {t:.1f} us, {gb / (t * 1e-6):.0f} GB/s")


if __name__ == "__main__":
    main(sys.argv[1:])
