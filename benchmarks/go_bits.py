"""A digest of the CUDA FCGP backward's gradients at fixed inputs, for comparing two builds or two
start-up settings bit for bit (run it under each, compare the lines):

    FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0 python benchmarks/go_bits.py
    python benchmarks/go_bits.py

One line a case: algebra, dtype, shape, and a SHA-256 of grad_x, grad_y, grad_weight's bytes.
Needs a GPU.
"""

import hashlib

import torch

import flashclifford as fc

CASES = [(n, dt, B, ni, no) for n in (2, 3) for dt in (torch.float32, torch.bfloat16)
         for B, ni, no in ((200, 64, 104), (2085, 72, 40), (4096, 512, 512))]


def main():
    for n, dt, B, ni, no in CASES:
        alg = fc.Algebra(n)
        g = torch.Generator(device="cuda").manual_seed(B + ni + no)
        x, y = (torch.randn(alg.D, B, ni, device="cuda", generator=g).to(dt).requires_grad_() for _ in range(2))
        w = (torch.randn(alg.P, ni, no, device="cuda", generator=g) / ni**0.5).to(dt).requires_grad_()
        gout = torch.randn(alg.D, B, no, device="cuda", generator=g).to(dt)
        prec = "tf32" if dt == torch.float32 else "highest"
        fc.gelu_fcgp_norm(x, y, w, alg, True, precision=prec).backward(gout)
        h = hashlib.sha256()
        for t in (x.grad, y.grad, w.grad):
            h.update(t.contiguous().view(torch.uint8).cpu().numpy().tobytes())
        print(f"Cl({n},0) {str(dt)[6:]:9s} B{B} {ni}->{no} {h.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
