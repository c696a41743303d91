"""Provenance of a benchmark run: device, driver, clocks, library versions, commit, command line.

Everything here is best effort: a missing tool (nvidia-smi, git) gives None, never an error,
so the harness runs on a bare machine.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

_REPO = Path(__file__).resolve().parents[2]


def _run(cmd, cwd=None, timeout=10):
    """stdout of a command, stripped, or None when it is missing or fails."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def git_commit():
    """(commit, dirty) of the source tree flashclifford was imported from, or (None, None).

    --no-optional-locks keeps `git status` from rewriting the index while a run is going on.
    """
    commit = _run(["git", "rev-parse", "HEAD"], cwd=_REPO)
    if commit is None:
        return None, None
    status = _run(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"], cwd=_REPO)
    return commit, (bool(status) if status is not None else None)


def gpu_state(index=0):
    """SM and memory clocks (MHz), power (W), temperature (C) and driver from nvidia-smi, or {}."""
    fields = "driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu,pstate"
    out = _run(["nvidia-smi", f"--id={index}", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    if not out:
        return {}
    values = [v.strip() for v in out.splitlines()[0].split(",")]
    return dict(zip(fields.split(","), values, strict=False))


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(torch, device, settings: dict, argv) -> dict:
    """The run's metadata block (JSON 'meta'). `torch` is the module or None; `argv` the
    harness arguments (which differ from sys.argv when a benchmarks/ script calls main)."""
    import flashclifford

    commit, dirty = git_commit()
    meta = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "-m", "flashclifford.bench", *argv]),
        "process_argv": list(sys.argv),
        "device": device,
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": getattr(torch, "__version__", None),
        "flashclifford": flashclifford.__version__,
        "build_info": flashclifford.build_info(),
        "commit": commit,
        "dirty": dirty,
        "settings": settings,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "load_average_start": load_average(),
    }
    if torch is not None:
        meta["torch_threads"] = torch.get_num_threads()
        meta["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    if device == "cuda":
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        meta["gpu"] = props.name
        meta["gpu_index"] = idx
        meta["gpu_memory_gib"] = round(props.total_memory / 2**30, 2)
        meta["gpu_sm_count"] = props.multi_processor_count
        meta["gpu_capability"] = f"{props.major}.{props.minor}"
        meta["gpu_l2_bytes"] = getattr(props, "L2_cache_size", None)
        meta["cuda_runtime"] = torch.version.cuda
        state = gpu_state(idx)
        meta["driver"] = state.pop("driver_version", None)
        meta["gpu_state_start"] = state
    return meta


def load_average():
    """1, 5 and 15 minute load averages: other work on the machine moves CPU timings."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def device_name(meta: dict) -> str:
    return meta.get("gpu") or meta.get("cpu") or "unknown"
