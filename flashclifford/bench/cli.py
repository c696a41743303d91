"""Command line of the harness: `python -m flashclifford.bench [run flags]`,
`python -m flashclifford.bench compare OLD NEW [--threshold 0.10]`,
`python -m flashclifford.bench plot RESULTS [--out DIR]`."""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

from ..algebra import KERNEL_METRICS, Algebra
from . import impls
from .sweep import FWD, FWD_BWD, Settings, Sweep

QUICK = {
    "op": "sgp",
    "algebra": ["3"],
    "dtype": ["float32"],
    "batch": [256, 1024],
    "features": [64, 128],
    "baselines": ["einsum", "eager"],
    "reps": 5,
    "warmup": 1,
    "max_seconds": 0.3,
    "copy_gib": 0.125,
}
DEFAULTS = {
    "op": "sgp",
    "algebra": ["3"],
    "dtype": ["float32"],
    "precision": ["highest"],
    "batch": [1024, 2048, 4096, 8192],
    "features": [128, 256, 512, 1024],
    "baselines": list(impls.BASELINES),
}
DEVICE_DEFAULTS = {
    "cuda": {"reps": 100, "warmup": 10, "max_seconds": 5.0},
    "cpu": {"reps": 20, "warmup": 2, "max_seconds": 2.0},
}
DTYPE_ALIASES = {
    "fp32": "float32",
    "f32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp64": "float64",
    "f64": "float64",
    "double": "float64",
}
PASS_ALIASES = {
    "forward": [FWD],
    "fwd": [FWD],
    "forward+backward": [FWD_BWD],
    "fwd+bwd": [FWD_BWD],
    "both": [FWD, FWD_BWD],
}


def parse_algebra(text: str) -> Algebra:
    """'3', 'Cl(1,3)', 'Cl(3,0,1)', '1,-1,-1,-1' or '(0,1,1,1)' -> Algebra.

    Cl(p,q,r) is the metric of r null vectors first (PGA's e0), then p with +1, then q with -1,
    the order of SPEC section 1.
    """
    t = text.strip().replace(" ", "")
    if t.isdigit():
        return Algebra(int(t))
    m = re.fullmatch(r"(?i)cl\((\d+),(\d+)(?:,(\d+))?\)", t)
    try:
        if m:
            p, q, r = int(m[1]), int(m[2]), int(m[3] or 0)
            return Algebra((0,) * r + (1,) * p + (-1,) * q)
        return Algebra(tuple(int(v) for v in t.strip("()").split(",") if v))
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(
        f"algebra: expected 2, 3, a name ({', '.join(Algebra(m).name for m in KERNEL_METRICS)}) or a metric "
        f"like 1,-1,-1,-1; got {text!r}"
    )


def _split(values):
    """Allow both `--x a b` and `--x a,b`."""
    return [p for v in values or [] for p in str(v).split(",") if p]


def run_parser():
    p = argparse.ArgumentParser(
        prog="python -m flashclifford.bench",
        description="Benchmark sweep of the fused Clifford ops against torch baselines. "
        "Subcommands: `compare OLD.json NEW.json [--threshold 0.10]` (regression check), "
        "`plot RESULTS.json [--out DIR]` (heatmaps from a file).",
        epilog="Method and columns: see the docstrings of flashclifford.bench.timing and .sweep.",
    )
    p.add_argument("--op", choices=["sgp", "fcgp", "layer"], help="default sgp")
    p.add_argument(
        "--algebra",
        "-a",
        nargs="+",
        metavar="ALG",
        help="2, 3, Cl(2,0), Cl(3,0), Cl(1,3), Cl(3,0,1), Cl(4,0) or a metric like 0,1,1,1 (default 3)",
    )
    p.add_argument("--dtype", nargs="+", help="float32 bfloat16 float16 float64 (default float32)")
    p.add_argument(
        "--precision",
        nargs="+",
        help="FCGP/layer float32 matmul precision: highest tf32 bf16 "
        "(default highest); applied to the baselines too, via torch.set_float32_matmul_precision",
    )
    p.add_argument("--batch", "-B", nargs="+", type=int, help="default 1024 2048 4096 8192")
    p.add_argument("--features", "-N", nargs="+", type=int, help="default 128 256 512 1024")
    p.add_argument(
        "--passes", nargs="+", default=["both"], help="forward, forward+backward or both (default)"
    )
    p.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="grade-wise RMSNorm after the product (default on)",
    )
    p.add_argument("--use-fc", action="store_true", help="op=layer: the fully connected product")
    p.add_argument(
        "--device",
        choices=["auto", "cuda", "cpu"],
        default="auto",
        help="auto: cuda when torch sees a GPU and flashclifford was built with CUDA, else cpu",
    )
    p.add_argument(
        "--framework",
        choices=["auto", "torch", "numpy"],
        default="auto",
        help="torch: the torch ops and baselines; numpy: flashclifford.ops on NumPy arrays against "
        "the NumPy float64 einsum (CPU only; what runs without torch). auto: torch if importable",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a small grid (Cl(3,0) sgp float32, B 256 1024, N 64 128, einsum and eager baselines, "
        "few reps) that finishes in under a minute on a small CPU machine",
    )
    p.add_argument("--baselines", nargs="+", help="subset of compiled eager einsum, or none (default all)")
    p.add_argument(
        "--compile",
        choices=impls.COMPILE_MODES,
        default="static",
        help="the compiled baseline: static (default) compiles a graph specialised to each shape "
        "(torch.compile dynamic=False, its best case, ~10 s per shape); dynamic compiles one graph "
        "per configuration (op, algebra, normalize, precision; per dtype and pass) with the batch and "
        "feature sizes symbolic, reused by every shape: far less compile time, graphs a little more general",
    )
    p.add_argument(
        "--compile-ours",
        action="store_true",
        help="op=layer: time flashclifford.nn.Layer under torch.compile(fullgraph=True), compiled "
        "as --compile says, instead of eager",
    )
    p.add_argument("--reps", type=int, help="timed repetitions (default 100 on cuda, 20 on cpu)")
    p.add_argument("--warmup", type=int, help="warm-up calls (default 10 on cuda, 2 on cpu)")
    p.add_argument(
        "--max-seconds", type=float, help="time limit of one measurement's repetitions (>= 3 reps)"
    )
    p.add_argument(
        "--cache",
        choices=["flush", "flush-dirty", "warm"],
        default="flush",
        help="cuda: flush the L2 before each repetition by reading a larger buffer (default), "
        "by zeroing one (leaves dirty lines whose write-back is timed), or leave it warm",
    )
    p.add_argument("--no-check", action="store_true", help="skip the float64 correctness check")
    p.add_argument("--no-host", action="store_true", help="skip the host-overhead measurement")
    p.add_argument(
        "--no-host-baselines",
        action="store_true",
        help="measure host overhead for flashclifford only "
        "(the baselines' take about half a long sweep's time)",
    )
    p.add_argument(
        "--copy-gib", type=float, help="copy-bandwidth buffer in GiB (default 2 on cuda, 0.25 on cpu)"
    )
    p.add_argument(
        "--out",
        help="output folder (default benchmarks/results/<time>-<op>-<device> when ./benchmarks "
        "exists, else flashclifford-bench/<time>-<op>-<device>)",
    )
    p.add_argument("--no-plots", action="store_true", help="no heatmap PNGs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _import_torch(framework):
    if framework == "numpy":
        return None
    try:
        import torch
    except ImportError:
        if framework == "torch":
            raise SystemExit("flashclifford.bench: --framework torch, but torch is not installed") from None
        print(
            "note: torch is not installed: running the NumPy path (flashclifford.ops against the NumPy "
            "float64 einsum, CPU only)",
            file=sys.stderr,
        )
        return None
    return torch


def settings_from_args(args, torch):
    import flashclifford

    framework = "torch" if torch is not None else "numpy"
    device = args.device
    gpu_build = bool(flashclifford.build_info().get("gpu_usable"))
    if device == "auto":
        device = "cuda" if torch is not None and torch.cuda.is_available() and gpu_build else "cpu"
        if device == "cpu" and torch is not None and torch.cuda.is_available():
            print(
                "note: torch sees a GPU but this flashclifford build has no usable CUDA backend: running on "
                "the CPU (--device cuda to time the baselines there anyway)",
                file=sys.stderr,
            )
    if device == "cuda" and torch is None:
        raise SystemExit("flashclifford.bench: --device cuda needs torch (the GPU path runs through torch)")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("flashclifford.bench: --device cuda, but torch sees no usable GPU")

    def pick(name):
        v = getattr(args, name)
        if v is not None:
            return v
        if args.quick and name in QUICK:
            return QUICK[name]
        if name in DEVICE_DEFAULTS[device]:
            return DEVICE_DEFAULTS[device][name]
        return DEFAULTS.get(name)

    try:
        algebras = [parse_algebra(a) for a in pick("algebra")]
    except (argparse.ArgumentTypeError, ValueError) as e:
        raise SystemExit(f"flashclifford.bench: {e}") from None
    dtypes = [DTYPE_ALIASES.get(d.lower(), d.lower()) for d in _split(pick("dtype"))]
    valid = impls.TORCH_DTYPES if framework == "torch" else impls.NUMPY_DTYPES
    for d in dtypes:
        if d not in valid:
            raise SystemExit(f"flashclifford.bench: dtype {d!r} not in {valid} ({framework} path)")
    precisions = _split(pick("precision"))
    for q in precisions:
        if q not in ("highest", "tf32", "bf16"):
            raise SystemExit(f"flashclifford.bench: precision {q!r} not in highest, tf32, bf16")
    passes = []
    for v in _split(args.passes):
        if v.lower() not in PASS_ALIASES:
            raise SystemExit(f"flashclifford.bench: pass {v!r} not in {sorted(PASS_ALIASES)}")
        passes += [q for q in PASS_ALIASES[v.lower()] if q not in passes]
    baselines = [b.lower() for b in _split(pick("baselines"))]
    if baselines == ["none"]:
        baselines = []
    for b in baselines:
        if b not in impls.BASELINES:
            raise SystemExit(f"flashclifford.bench: baseline {b!r} not in {impls.BASELINES} or none")
    if framework == "numpy":
        dropped = [b for b in baselines if b != "einsum"]
        if dropped:
            print(
                f"note: baselines {', '.join(dropped)} need torch; "
                "the NumPy path has the einsum baseline only",
                file=sys.stderr,
            )
        baselines = [b for b in baselines if b == "einsum"]
    op = pick("op")
    compile_ours = args.compile_ours and op == "layer"
    if args.compile_ours and not compile_ours:
        print("note: --compile-ours applies to --op layer only; ignored", file=sys.stderr)
    if args.op == "layer" and framework == "numpy":
        raise SystemExit("flashclifford.bench: --op layer needs torch (flashclifford.nn)")
    for n in pick("batch") + pick("features"):
        if n < 1:
            raise SystemExit("flashclifford.bench: batch and feature sizes must be >= 1")
    return Settings(
        op=op,
        algebras=[a.metric for a in algebras],
        dtypes=dtypes,
        precisions=precisions,
        batches=pick("batch"),
        features=pick("features"),
        passes=passes,
        normalize=args.normalize,
        use_fc=args.use_fc,
        device=device,
        framework=framework,
        baselines=baselines,
        reps=pick("reps"),
        warmup=pick("warmup"),
        max_seconds=pick("max_seconds"),
        cache=args.cache,
        check=not args.no_check,
        host=not args.no_host,
        host_baselines=not args.no_host_baselines,
        copy_gib=pick("copy_gib"),
        progress=not args.no_progress,
        compile=args.compile,
        compile_ours=compile_ours,
    )


def default_out(settings):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"{stamp}-{settings.op}-{settings.device}"
    return Path("benchmarks/results" if Path("benchmarks").is_dir() else "flashclifford-bench") / name


def run(argv):
    args = run_parser().parse_args(argv)
    torch = _import_torch(args.framework)
    settings = settings_from_args(args, torch)
    if torch is not None and settings.op in ("layer",):
        try:
            from .. import nn  # noqa: F401
        except ImportError as e:
            raise SystemExit(
                f"flashclifford.bench: --op layer needs flashclifford.nn, which failed to import: {e}"
            ) from None
    # torch.compile's settings (raised recompile limits, no silent eager fallback) are applied
    # by Sweep.run for the sweep's duration: sweep._dynamo_settings
    from . import env, plots, report

    meta = env.collect(torch, settings.device, settings.to_json(), argv)
    out_dir = Path(args.out) if args.out else default_out(settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    sweep = Sweep(settings, torch, meta)
    rows = sweep.run()
    csv_path = report.write_csv(out_dir / "results.csv", rows)
    json_path = report.write_json(out_dir / "results.json", rows, meta)
    print(report.console_table(rows, meta))
    pngs, note = ([], "plots skipped (--no-plots)") if args.no_plots else plots.make_heatmaps(rows, out_dir)
    print(f"wrote {csv_path}, {json_path}" + (f" and {len(pngs)} heatmaps" if pngs else ""))
    if note:
        print(f"note: {note}")
    print(f"wall time {meta['wall_seconds']:.1f} s")
    return 0


def compare_main(argv):
    p = argparse.ArgumentParser(
        prog="python -m flashclifford.bench compare",
        description="Per-cell time ratio new/old; exit 1 when a cell is more than "
        "--threshold slower (or fails now).",
    )
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--threshold", type=float, default=0.10, help="allowed slowdown, 0.10 = 10%% (default)")
    p.add_argument(
        "--impl",
        nargs="+",
        default=[impls.OURS],
        help="implementations to compare (default flashclifford; 'all' for every row)",
    )
    args = p.parse_args(argv)
    from .compare import compare

    chosen = () if args.impl == ["all"] else tuple(args.impl)
    return compare(args.old, args.new, args.threshold, chosen)


def plot_main(argv):
    p = argparse.ArgumentParser(
        prog="python -m flashclifford.bench plot", description="Heatmaps from a results file."
    )
    p.add_argument("results", help="results.json or results.csv")
    p.add_argument("--out", help="folder for the PNGs (default: the results file's folder)")
    args = p.parse_args(argv)
    from . import plots, report

    rows, _ = report.load(args.results)
    files, note = plots.make_heatmaps(rows, args.out or Path(args.results).parent)
    for f in files:
        print(f)
    if note:
        print(f"note: {note}")
        return 1
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "compare":
        return compare_main(argv[1:])
    if argv and argv[0] == "plot":
        return plot_main(argv[1:])
    if argv and argv[0] == "run":
        argv = argv[1:]
    return run(argv)
