"""The Hopper labs (benchmarks/lab/: the wgmma lab, the rate labs of NOTES_FCGP.md session 19,
gz's spill lab of session 37, the one-path gW lab of session 41, the racecheck lab of session
43, the initcheck lab of session 44 and the gate-product lab of session 46) include the sm_90a
PTX headers (csrc/cuda/wgmma.cuh, tma.cuh) and the FCGP kernels' pieces.
Compile them for sm_90a here, so CI (no GPU, but nvcc) catches a header or lab that no longer
assembles, or warns. Their results need the H100 (docs/testing.md)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def nvcc():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    found = shutil.which("nvcc") or str(Path(home, "bin", "nvcc"))
    return found if Path(found).exists() else None


# (the spill labs instantiate the library's own sm_90a kernels, which FC_SM90A switches on;
# fwd_spills and gw_spills take about 35 s, so only gz_spills, 10 s, and gw_pseq_lib, 20 s, run here)
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("lab,defines", [("wgmma_lab", []), ("wgmma_rate", []), ("tma_rate", []), ("gw_pseq", []),
                                         ("ring_race", []), ("init_store", []), ("gz_spills", ["-DFC_SM90A=1"]),
                                         ("gw_pseq_lib", ["-DFC_SM90A=1"]), ("gate_rate", ["-DFC_SM90A=1"])])
def test_lab_compiles_for_sm90a(tmp_path, lab, defines):
    cmd = [nvcc(), "-std=c++17", "-O1", "-I", str(ROOT / "csrc"), "-gencode=arch=compute_90a,code=sm_90a",
           *defines, "-c", str(ROOT / "benchmarks" / "lab" / f"{lab}.cu"), "-o", str(tmp_path / f"{lab}.o")]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "warning" not in run.stderr.lower(), run.stderr[-4000:]


# The one-path weight gradient's schedules (fcgp_gw_sched.h) are host arithmetic:
# tests/gw_sched_check.cu checks over a sweep of shapes, algebras and SM counts that every step is
# taken once, puts come first on their blocks and each head reads back exactly the rest of its
# unit (no wait can close a cycle), and that the stream is kept only where it costs less than the
# rounds. Built for the host in seconds.
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
def test_gw_schedules(tmp_path):
    exe = tmp_path / "gw_sched_check"
    cmd = [nvcc(), "-std=c++17", "-O1", "-I", str(ROOT / "csrc"), str(ROOT / "tests" / "gw_sched_check.cu"),
           "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-4000:]
    assert "every schedule whole, ordered and acyclic" in run.stdout
