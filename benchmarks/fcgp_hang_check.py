"""The CUDA FCGP forward and backward in a loop, synchronized after each: a hang check.

Run it under `timeout` to catch an intermittent hang (NOTES_FCGP.md session 28): a line is
printed and flushed after each cell's progress, so a killed run's last line says how far it got.

    python benchmarks/fcgp_hang_check.py [--cells ALG,DTYPE,B,N ...] [--iters 200]
    python benchmarks/fcgp_hang_check.py --small I     # case I of the racecheck set, once

benchmarks/fcgp_hang_check.sh runs it under `timeout`. --small runs one case of results/fcgp-s24/
racecheck_small.py's set (the torch op's forward and backward, small shapes) so that racecheck
can be given one case at a time. Needs a GPU.
"""

import argparse
import os
import sys
import time

import torch
from fcgp_parts import CELLS, cases

import flashclifford as fc

# racecheck_small.py's set: (algebra n, dtype, precision, B, N_in, N_out)
SMALL = [(n, dt, prec, B, ni, no)
         for n in (2, 3)
         for dt, prec in ((torch.float32, "tf32"), (torch.bfloat16, "highest"))
         for B, ni, no in ((70, 64, 96), (2085, 72, 24))]
# 8-11: gW one path a tile (gw_pseq_kernel, forced unless FLASHCLIFFORD_FCGP_GW_PSEQ is set: N_in a
# multiple of 128, N_out of 256, fewer units than SMs, where the rule would take the path-group kernel)
PSEQ_START = len(SMALL)
SMALL += [(n, dt, prec, 70, 128, 256)
          for n in (2, 3)
          for dt, prec in ((torch.float32, "tf32"), (torch.bfloat16, "highest"))]
# 12-13: the same kernel at 512 x 512 (66 steps; on 132 SMs Cl(2,0)'s 80 units in one round of
# weighted segments, Cl(3,0)'s 160 whole, each to the least-loaded block: fcgp_gw_sched.h, PseqSched)
SMALL += [(n, torch.bfloat16, "highest", 1043, 512, 512) for n in (2, 3)]
# 14: Cl(3,0) tf32 at 512 x 512: go_rows' two-column loads (session 54's CW 2, N_out 257 to 512 at
# D 8) with fp32 data, one row at a time (case 13 takes its bf16 form, both rows in flight)
SMALL += [(3, torch.float32, "tf32", 1043, 512, 512)]
PSEQ_CASES = range(PSEQ_START, len(SMALL))


def say(msg):
    print(f"{time.monotonic():10.3f} {msg}", flush=True)


def run_small(i):
    n, dt, prec, B, ni, no = SMALL[i]
    if i in PSEQ_CASES and "FLASHCLIFFORD_FCGP_GW_PSEQ" not in os.environ:  # the environment's, else forced
        fc._C._fcgp_sm90_gw_pseq(1)
    alg = fc.Algebra(n)
    torch.manual_seed(i)
    x = torch.randn(alg.D, B, ni, device="cuda").to(dt).requires_grad_()
    y = torch.randn(alg.D, B, ni, device="cuda").to(dt).requires_grad_()
    w = (torch.randn(alg.P, ni, no, device="cuda") / ni**0.5).to(dt).requires_grad_()
    g = torch.randn(alg.D, B, no, device="cuda").to(dt)
    say(f"small {i}: Cl({n},0) {dt} {prec} B{B} {ni}->{no} forward")
    out = fc.gelu_fcgp_norm(x, y, w, alg, True, precision=prec)
    torch.cuda.synchronize()
    say(f"small {i}: backward")
    out.backward(g)
    torch.cuda.synchronize()
    say(f"small {i}: done")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=CELLS)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--small", type=int, default=None,
                    help=f"one case of the racecheck set (0-{len(SMALL) - 1})")
    args = ap.parse_args(argv)
    if args.small is not None:
        run_small(args.small)
        return
    torch.backends.cuda.matmul.allow_tf32 = True
    sw = f"Hopper forward {fc._C._fcgp_sm90()}, backward {fc._C._fcgp_sm90_bwd()}"
    say(f"{torch.cuda.get_device_name(0)}; {sw}")
    for cell in args.cells:
        n, dtype, B, N = cell.split(",")
        fns = dict(cases(int(n), dtype, int(B), int(N)))
        torch.cuda.synchronize()
        for it in range(args.iters):
            for phase in ("forward", "backward"):
                fns[phase]()
                torch.cuda.synchronize()
            if it % 50 == 0 or it == args.iters - 1:
                say(f"Cl({n},0) {dtype} {B}x{N}: iteration {it} done")
    say("all done")


if __name__ == "__main__":
    main(sys.argv[1:])
