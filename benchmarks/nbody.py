"""Charged-particle N-body in Cl(3,0): an end-to-end training benchmark and worked example.

The task of the Clifford group equivariant network papers: 5 particles with charges +-1,
random positions and velocities; predict the positions after a fixed time. The data is
simulated here (Coulomb forces, velocity Verlet), nothing is downloaded.

Embedding, per system (one batch row), as (D=8, B, C) multivectors:
  channel p     (p = 0..4): scalar = charge q_p, vector = position_p - centroid
  channel 5 + p           : vector = velocity_p
Model: CliffordMLP(features, Cl(3,0), layers, in_features=10, out_features=5); the vector part
of output channel p is particle p's displacement. The model is O(3)-equivariant (checked).

Two runs from the same initial weights and the same batches: flashclifford.nn.Layer (fused
kernels) and BaselineLayer (the unfused torch ops of flashclifford.reference). Prints the
loss per epoch and the time per step of each, checks that the two loss curves agree over
the first 50 steps within float32 noise, and reports the speed-up.

  python benchmarks/nbody.py --device cpu --steps 60
  torchrun --nproc_per_node=2 benchmarks/nbody.py --device cuda     # DDP, NCCL (gloo on CPU)

``--batch`` is the global batch: under torchrun each of the W ranks takes batch / W rows of
the same global batch, so W-GPU and 1-GPU runs follow the same trajectory per sample seen.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist

import flashclifford as fc
from flashclifford import nn as fnn

N_PARTICLES = 5
CL3 = fc.Algebra(3)


# ---------------------------------------------------------------------------------------
# data


def simulate(n_systems, seed, n_steps=250, dt=4e-3, softening=0.2):
    """Coulomb N-body (unit masses, k = 1, like charges repel), velocity Verlet in float64.

    Returns pos0, vel0 (S, 5, 3), charge (S, 5) and the positions after n_steps * dt (S, 5, 3).
    The softening length keeps close encounters integrable at this step size.
    """
    g = torch.Generator().manual_seed(seed)
    pos = 0.5 * torch.randn(n_systems, N_PARTICLES, 3, generator=g, dtype=torch.float64)
    vel = 0.5 * torch.randn(n_systems, N_PARTICLES, 3, generator=g, dtype=torch.float64)
    q = torch.randint(0, 2, (n_systems, N_PARTICLES), generator=g).to(torch.float64) * 2 - 1
    qq = q[:, :, None] * q[:, None, :]  # (S, 5, 5)

    def accel(r):
        diff = r[:, :, None, :] - r[:, None, :, :]  # r_i - r_j, (S, 5, 5, 3); zero on the diagonal
        inv3 = (diff.square().sum(-1) + softening**2).pow(-1.5)
        return ((qq * inv3)[..., None] * diff).sum(2)

    pos0, vel0 = pos.clone(), vel.clone()
    a = accel(pos)
    for _ in range(n_steps):
        vel = vel + 0.5 * dt * a
        pos = pos + dt * vel
        a = accel(pos)
        vel = vel + 0.5 * dt * a
    return pos0, vel0, q, pos


def embed(pos0, vel0, q):
    """Inputs as (8, S, 10) Cl(3,0) multivectors (see the module docstring) and the centroid."""
    S = pos0.shape[0]
    centroid = pos0.mean(1, keepdim=True)
    x = torch.zeros(CL3.D, S, 2 * N_PARTICLES, dtype=pos0.dtype)
    x[0, :, :N_PARTICLES] = q
    x[1:4, :, :N_PARTICLES] = (pos0 - centroid).permute(2, 0, 1)  # components e1, e2, e3
    x[1:4, :, N_PARTICLES:] = vel0.permute(2, 0, 1)
    return x


def displacement(out):
    """The vector part of the (8, B, 5) output as (B, 5, 3) displacements."""
    return out[1:4].permute(1, 2, 0)


# ---------------------------------------------------------------------------------------
# training


def rotate_vectors(x, R):
    """Apply R (3, 3) to the vector components of x (8, ..., C); x has no grade-2/3 parts."""
    x = x.clone()
    x[1:4] = torch.einsum("ij,j...->i...", R, x[1:4])
    return x


def train(model, data, args, world, rank, device, label):
    """Adam on the MSE of the displacements; returns (per-step global losses, seconds per step)."""
    x_all, target_all = data
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    local = args.batch // world
    steps_per_epoch = x_all.shape[1] // args.batch
    order = torch.Generator().manual_seed(args.seed + 1)  # the same batches for both runs and all ranks
    losses, epoch_losses = [], []
    t_start, t_epoch = None, time.perf_counter()
    for step in range(args.steps):
        if step % steps_per_epoch == 0:
            perm = torch.randperm(x_all.shape[1], generator=order).to(device)
        k = step % steps_per_epoch
        idx = perm[k * args.batch + rank * local : k * args.batch + (rank + 1) * local]
        if step == args.warmup:
            sync(device)
            t_start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        pred = displacement(model(x_all[:, idx]))
        loss = (pred - target_all[idx]).square().mean()
        loss.backward()
        opt.step()
        epoch_losses.append(loss.detach())
        if k == steps_per_epoch - 1 or step == args.steps - 1:
            # losses leave the device once per epoch, so the steps themselves never wait on the host
            el = torch.stack(epoch_losses)
            if world > 1:
                dist.all_reduce(el)
                el /= world
            el = el.tolist()
            now = time.perf_counter()
            losses += el
            if rank == 0:
                print(
                    f"  {label:9s} epoch {step // steps_per_epoch + 1:3d}  "
                    f"samples {(step + 1) * args.batch:8d}  loss {sum(el) / len(el):.6f}  "
                    f"{1e3 * (now - t_epoch) / len(el):8.2f} ms/step",
                    flush=True,
                )
            epoch_losses, t_epoch = [], now
    sync(device)
    sec = (
        (time.perf_counter() - t_start) / (args.steps - args.warmup) if t_start is not None else float("nan")
    )
    return losses, sec


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate(model, data):
    x, target = data
    with torch.no_grad():
        return (displacement(model(x)) - target).square().mean().item()


def equivariance_error(model, x, gen):
    """||f(R x) - R f(x)|| / ||f(x)|| for a random orthogonal R with det -1 (rotation and reflection)."""
    R, _ = torch.linalg.qr(torch.randn(3, 3, generator=gen, dtype=torch.float64))
    if torch.det(R) > 0:
        R = -R
    R = R.to(x.dtype).to(x.device)
    with torch.no_grad():
        out = displacement(model(x))
        out_r = displacement(model(rotate_vectors(x, R)))
    return ((out_r - out @ R.T).norm() / out.norm()).item()


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cpu or cuda")
    p.add_argument("--steps", type=int, default=300, help="training steps per run")
    p.add_argument("--batch", type=int, default=256, help="global batch (split over torchrun ranks)")
    p.add_argument("--features", type=int, default=64, help="Layer width N")
    p.add_argument("--layers", type=int, default=4, help="number of Layers")
    p.add_argument("--use-fc", action="store_true", help="fully connected product (FCGP) instead of SGP")
    p.add_argument("--train", type=int, default=2048, help="training systems")
    p.add_argument("--val", type=int, default=512, help="validation systems")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the timing")
    p.add_argument("--compile", action="store_true", help="torch.compile both models")
    p.add_argument(
        "--check-steps", type=int, default=50, help="steps over which the two loss curves must agree"
    )
    p.add_argument(
        "--tol",
        type=float,
        default=1e-3,
        help="max relative loss difference over --check-steps (float32 noise grows ~1e-7 per "
        "step through Adam; 1e-3 leaves room without hiding a wrong gradient)",
    )
    args = p.parse_args(argv)

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank if world > 1 else (device.index or 0))
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must be divisible by the number of ranks {world}")
    if args.train < args.batch:
        raise SystemExit(f"--train {args.train} must be at least --batch {args.batch}")

    # every rank simulates the same data (seeded): about a second on one CPU core
    t_sim = time.perf_counter()
    pos0, vel0, q, posT = simulate(args.train + args.val, args.seed)
    t_sim = time.perf_counter() - t_sim
    x = embed(pos0, vel0, q).float().to(device)
    target = (posT - pos0).float().to(device)
    train_data = (x[:, : args.train], target[: args.train])
    val_data = (x[:, args.train :], target[args.train :])

    torch.manual_seed(args.seed)
    kw = {
        "in_features": 2 * N_PARTICLES,
        "out_features": N_PARTICLES,
        "use_fc": args.use_fc,
        "device": device,
    }
    fused = fnn.CliffordMLP(args.features, CL3, args.layers, **kw)
    baseline = fnn.CliffordMLP(args.features, CL3, args.layers, baseline=True, **kw)
    baseline.load_state_dict(fused.state_dict())  # identical initial weights

    if rank == 0:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        print(
            f"N-body Cl(3,0): {name}, world size {world}, torch {torch.__version__}, flashclifford "
            f"{fc.__version__}\n  {args.layers} layers x {args.features} features "
            f"({'FCGP' if args.use_fc else 'SGP'}), global batch {args.batch}, {args.steps} steps, "
            f"{args.train} training systems "
            f"(simulated in {t_sim:.1f} s), compile={args.compile}",
            flush=True,
        )

    results = {}
    for label, model in (("fused", fused), ("baseline", baseline)):
        run = model
        if world > 1:
            run = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None
            )
        if args.compile:
            run = torch.compile(run)
        losses, sec = train(run, train_data, args, world, rank, device, label)
        results[label] = (losses, sec, evaluate(model, val_data))

    (lf, tf, vf), (lb, tb, vb) = results["fused"], results["baseline"]
    n = min(args.check_steps, len(lf))
    max_abs = max(abs(a - b) for a, b in zip(lf[:n], lb[:n], strict=True))
    max_rel = max(abs(a - b) / abs(b) for a, b in zip(lf[:n], lb[:n], strict=True))
    equiv = equivariance_error(fused, val_data[0][:, :256], torch.Generator().manual_seed(args.seed + 2))
    if rank == 0:
        seen = args.steps * args.batch
        print(f"samples seen: {seen} ({args.batch // world} per rank per step, {world} rank(s))")
        print(f"final training loss  fused {lf[-1]:.6f}  baseline {lb[-1]:.6f}")
        print(f"validation loss      fused {vf:.6f}  baseline {vb:.6f}")
        print(
            f"time per step        fused {1e3 * tf:.2f} ms  baseline {1e3 * tb:.2f} ms  "
            f"speed-up {tb / tf:.2f}x"
        )
        print(
            f"loss curves over the first {n} steps: max |difference| {max_abs:.3g}, "
            f"max relative {max_rel:.3g} (tolerance {args.tol:g})"
        )
        print(f"O(3) equivariance error of the trained fused model: {equiv:.2g}")
    ok = max_rel <= args.tol and all(math.isfinite(v) for v in lf + lb) and equiv < 1e-4
    if world > 1:
        dist.destroy_process_group()
    if not ok:
        print(
            "FAILED: the loss curves differ beyond float32 noise, a loss is not finite, "
            "or equivariance is broken",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
