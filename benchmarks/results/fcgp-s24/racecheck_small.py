"""The racecheck case set of session 24's last call (run as /tmp/rc.py there; the second run with
_C._fcgp_sm90_bwd_go_rows(32) set after `n = 0`): the torch op's forward and backward, Cl(2,0) and
Cl(3,0), tf32 and bfloat16, a small batch and two chunks."""
import torch

import flashclifford as fc

torch.manual_seed(0)
n = 0
for alg in (fc.Algebra(2), fc.Algebra(3)):
    for dt, prec in ((torch.float32, "tf32"), (torch.bfloat16, "highest")):
        for B, ni, no in ((70, 64, 96), (2085, 72, 24)):
            x = torch.randn(alg.D, B, ni, device="cuda").to(dt).requires_grad_()
            y = torch.randn(alg.D, B, ni, device="cuda").to(dt).requires_grad_()
            w = (torch.randn(alg.P, ni, no, device="cuda") / ni**0.5).to(dt).requires_grad_()
            g = torch.randn(alg.D, B, no, device="cuda").to(dt)
            fc.gelu_fcgp_norm(x, y, w, alg, True, precision=prec).backward(g)
            n += 1
torch.cuda.synchronize()
print("cases", n)
