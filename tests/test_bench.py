"""The benchmark harness on the CPU: tiny grids end to end (files written and well formed,
errors against the float64 reference within tolerance), OOM rows, the compare exit code,
argument parsing, and the README's --quick command under a minute."""

import csv
import json
import os
import subprocess
import sys
import time

import pytest
from conftest import HAVE_TORCH, needs_torch

from flashclifford.algebra import KERNEL_METRICS, Algebra
from flashclifford.bench import COLUMNS, KEY, cli, impls, report
from flashclifford.bench import main as bench_main

# tiny sizes, odd on purpose; few reps and short time limits keep each run to seconds
TINY = [
    "-B",
    "4",
    "7",
    "-N",
    "3",
    "5",
    "--reps",
    "3",
    "--warmup",
    "1",
    "--max-seconds",
    "0.02",
    "--copy-gib",
    "0.004",
    "--device",
    "cpu",
    "--no-plots",
    "--no-progress",
]


def _run(tmp_path, *args):
    out = tmp_path / "res"
    assert bench_main([*TINY, *args, "--out", str(out)]) == 0
    with (out / "results.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        header, csv_rows = reader.fieldnames, list(reader)
    data = json.loads((out / "results.json").read_text())
    return header, csv_rows, data


def _check_rows(rows, n_expected, ours_ok=True):
    assert len(rows) == n_expected
    for r in rows:
        assert r["status"] == "ok", r
        assert r["time_us"] > 0 and r["time_p20_us"] <= r["time_us"] <= r["time_p80_us"]
        assert r["reps"] >= 3 and len(r["times_us"]) == r["reps"]
        assert r["speedup"] is not None and r["speedup"] > 0
        if r["impl"] == "flashclifford":
            assert r["speedup"] == pytest.approx(1.0)
            assert r["host_us"] > 0
            if ours_ok:
                assert r["err_ok"] is True and r["err_rel"] <= r["err_tol"], r
            if r["pass"] == "forward+backward":
                assert {"out", "grad_x"} <= set(r["errors"])


@needs_torch
def test_sgp_tiny_grid(tmp_path):
    header, csv_rows, data = _run(
        tmp_path, "--op", "sgp", "--algebra", "3", "Cl(1,3)", "--baselines", "eager", "einsum"
    )
    assert header == COLUMNS
    assert set(data) == {"schema", "meta", "rows"} and data["schema"] == report.SCHEMA
    meta = data["meta"]
    for k in (
        "timestamp",
        "command",
        "cpu",
        "numpy",
        "torch",
        "flashclifford",
        "build_info",
        "commit",
        "copy_bandwidth",
        "settings",
    ):
        assert k in meta, k
    assert meta["copy_bandwidth"]["bytes_per_s"] > 0
    n = 2 * 2 * 2 * 2 * 3  # algebras x B x N x passes x impls
    assert len(csv_rows) == n
    _check_rows(data["rows"], n)
    for r in data["rows"]:
        assert r["frac_copy_bw"] > 0 and r["gbps"] > 0  # SGP roofline column
        assert r["err_rel"] is not None  # baselines are checked too
    assert {r["algebra"] for r in data["rows"]} == {"Cl(3,0)", "Cl(1,3)"}
    # long format: one row per cell x pass x impl, no duplicates
    assert len({tuple(str(r[k]) for k in KEY) for r in data["rows"]}) == n
    # the CSV parses back to the same cells
    rows_csv, _ = report.load(tmp_path / "res" / "results.csv")
    assert [r["time_us"] for r in rows_csv] == pytest.approx([r["time_us"] for r in data["rows"]], rel=1e-5)


@needs_torch
def test_fcgp_tiny_grid(tmp_path):
    _, _, data = _run(
        tmp_path,
        "--op",
        "fcgp",
        "--algebra",
        "2",
        "--dtype",
        "float32",
        "float64",
        "--baselines",
        "einsum",
        "--no-normalize",
    )
    rows = data["rows"]
    _check_rows(rows, 2 * 2 * 2 * 2 * 2)
    for r in rows:
        assert r["bmm_us"] > 0 and r["bmm_ratio"] > 0 and r["tflops"] > 0
        assert r["normalize"] is False
        assert r["precision"] == ("highest" if r["dtype"] == "float32" else "")
    assert {r["err_tol"] for r in rows if r["dtype"] == "float64"} == {1e-12}


@needs_torch
def test_layer_tiny_grid(tmp_path):
    _, _, data = _run(
        tmp_path, "--op", "layer", "--algebra", "3", "--baselines", "eager", "einsum", "-B", "5", "-N", "4"
    )
    rows = data["rows"]
    _check_rows(rows, 2 * 3)
    grads = rows[1]["errors"]
    assert {"out", "grad_x", "grad_gp_weight", "grad_linear_weight", "grad_linear_bias"} <= set(grads)


def test_no_host_baselines_measures_ours_only(tmp_path):
    _, _, data = _run(tmp_path, "--algebra", "2", "--baselines", "eager", "--no-host-baselines")
    assert data["meta"]["settings"]["host_baselines"] is False
    rows = data["rows"]
    assert {r["impl"] for r in rows} == {"flashclifford", "eager"}
    for r in rows:
        assert (r.get("host_us") is not None) == (r["impl"] == "flashclifford"), r


def test_numpy_path(tmp_path):
    """What runs without torch: flashclifford.ops on NumPy against the NumPy einsum."""
    _, _, data = _run(
        tmp_path, "--framework", "numpy", "--op", "sgp", "--algebra", "2", "--baselines", "einsum"
    )
    rows = data["rows"]
    _check_rows(rows, 2 * 2 * 2 * 2)
    assert {r["framework"] for r in rows} == {"numpy"}
    assert all(r["err_rel"] is None for r in rows if r["impl"] == "einsum")  # it is the reference


def test_without_torch_the_numpy_path_runs(tmp_path):
    """With torch unimportable, the harness says so in one line and runs the NumPy path."""
    code = (
        "import sys; sys.modules['torch'] = None\n"  # makes `import torch` raise ImportError
        "from flashclifford.bench import main\n"
        f"sys.exit(main({[*TINY, '--algebra', '2', '--passes', 'forward', '--out', str(tmp_path)]!r}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "torch is not installed" in res.stderr
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert {r["framework"] for r in rows} == {"numpy"} and {r["impl"] for r in rows} == {
        "flashclifford",
        "einsum",
    }
    assert all(r["status"] == "ok" for r in rows)


@needs_torch
def test_oom_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    real = impls.TorchCase.baseline

    def baseline(self, name, cache):
        impl = real(self, name, cache)
        if name == "eager" and self.spec.B == 7:

            def oom(*args):
                raise MemoryError("out of memory (simulated)")

            impl.fn = oom
        return impl

    monkeypatch.setattr(impls.TorchCase, "baseline", baseline)
    _, _, data = _run(
        tmp_path, "--op", "sgp", "--algebra", "2", "--baselines", "eager", "--passes", "forward"
    )
    by = {(r["batch"], r["features"], r["impl"]): r for r in data["rows"]}
    assert len(by) == 2 * 2 * 2
    for N in (3, 5):
        assert by[(7, N, "eager")]["status"] == "OOM" and by[(7, N, "eager")]["time_us"] is None
        assert by[(4, N, "eager")]["status"] == "ok"
        assert by[(7, N, "flashclifford")]["status"] == "ok"


@needs_torch
@pytest.mark.slow
def test_compiled_baseline(tmp_path):
    pytest.importorskip("torch._inductor")
    _, _, data = _run(
        tmp_path,
        "--op",
        "sgp",
        "--algebra",
        "2",
        "-B",
        "6",
        "-N",
        "3",
        "--baselines",
        "compiled",
        "--passes",
        "forward",
    )
    rows = data["rows"]
    compiled = [r for r in rows if r["impl"] == "compiled"]
    assert len(compiled) == 1
    if compiled[0]["status"] != "ok":  # no C++ compiler for inductor here: recorded, not raised
        assert compiled[0]["status"].startswith("error")
    else:
        assert compiled[0]["err_rel"] <= 1e-5


def _compiled_or_skip(rows, impl="compiled"):
    """The rows of a torch.compile'd impl; skip when torch.compile cannot run on this machine
    (no C++ compiler for inductor: the harness records an error row, as test_compiled_baseline checks)."""
    rows = [r for r in rows if r["impl"] == impl]
    for r in rows:
        if any(k in r["status"] for k in ("CppCompileError", "InductorError", "BackendCompilerFailed")):
            pytest.skip(f"torch.compile unavailable here: {r['status']}")
    return rows


@needs_torch
@pytest.mark.slow
def test_compile_dynamic_one_graph_for_every_shape(tmp_path):
    """--compile dynamic: recorded in the JSON and the console header; the compiled baseline
    captures one graph per pass in the first cell and none in the second (a new B and N)."""
    pytest.importorskip("torch._inductor")
    args = "--op sgp --algebra 2 -B 6 9 -N 3 --baselines compiled --compile dynamic"
    _, _, data = _run(tmp_path, *args.split())
    meta, rows = data["meta"], data["rows"]
    assert meta["settings"]["compile"] == "dynamic" and meta["settings"]["compile_ours"] is False
    compiled = _compiled_or_skip(rows)
    assert len(compiled) == 2 * 2
    for r in compiled:
        assert r["status"] == "ok" and r["err_ok"], r
        assert r["new_graphs"] == (1 if r["batch"] == 6 else 0), r  # the second shape reuses the graph
    assert meta["dynamo_graphs"] == 2  # forward (no grad) and forward+backward
    assert "compile: dynamic" in report.console_table(rows, meta)


@needs_torch
@pytest.mark.slow
def test_compile_ours_dynamic_layer(tmp_path):
    """--compile-ours: our Layer under torch.compile(fullgraph=True), compiled once for both
    shapes (its weights are arguments of the compiled function), checked and with parts."""
    pytest.importorskip("torch._inductor")
    args = "--op layer --algebra 3 -B 5 8 -N 4 --baselines none --passes forward --compile dynamic"
    _, _, data = _run(tmp_path, *args.split(), "--compile-ours")
    assert data["meta"]["settings"]["compile_ours"] is True
    rows = _compiled_or_skip(data["rows"], "flashclifford")
    assert [r["new_graphs"] for r in rows] == [1, 0]
    for r in rows:
        assert r["status"] == "ok" and r["err_ok"] and r["parts_us"] > 0 and r["vs_parts"] > 0, r


@needs_torch
def test_layer_parts(tmp_path):
    """Layer forward rows carry parts_us (grade_linear + fused op, each timed alone) and
    vs_parts = time / parts_us, in the JSON, the CSV and the console table; other rows none."""
    header, csv_rows, data = _run(
        tmp_path, "--op", "layer", "--algebra", "2", "--baselines", "eager", "-B", "5", "-N", "4"
    )
    assert {"parts_us", "vs_parts"} <= set(header)
    rows = data["rows"]
    _check_rows(rows, 2 * 2)
    for r, c in zip(rows, csv_rows, strict=True):
        if r["pass"] == "forward":
            assert r["parts_us"] > 0 and r["vs_parts"] > 0, r
            assert r["vs_parts"] == pytest.approx(r["time_us"] / r["parts_us"])
            assert r["parts_us"] == pytest.approx(r["parts"]["linear_us"] + r["parts"]["op_us"])
            assert float(c["vs_parts"]) == pytest.approx(r["vs_parts"], rel=1e-5)
        else:
            assert r["parts_us"] is None and r["vs_parts"] is None and c["vs_parts"] == ""
    table = report.console_table(rows, data["meta"])
    assert "vs parts" in table.splitlines()[1]
    # tables without layer rows have no such column
    assert "vs parts" not in report.console_table([dict(r, vs_parts=None) for r in rows])


def test_figure_scripts_forward_extra_flags(monkeypatch):
    """benchmarks/*.py: flags on their command line reach every harness run they make."""
    import runpy

    import flashclifford.bench as bench

    root = os.path.join(os.path.dirname(__file__), "..", "benchmarks")
    extra = ["--compile", "dynamic", "--reps", "30", "--max-seconds", "0.5"]
    calls = []
    monkeypatch.setattr(bench, "main", lambda argv: calls.append(list(argv)) or 0)
    cases = [("sgp.py", [], 1), ("fcgp.py", [], 1), ("layer.py", [], 2), ("algebras16.py", [], 6)]
    # leading run names or op prefixes select runs
    cases += [("algebras16.py", ["fcgp"], 3), ("algebras16.py", ["sgp-cl13", "fcgp-cl40"], 2)]
    for script, select, runs in cases:
        calls.clear()
        monkeypatch.setattr(sys, "argv", [script, *select, *extra])
        with pytest.raises(SystemExit) as e:
            runpy.run_path(os.path.join(root, script), run_name="__main__")
        assert e.value.code == 0
        assert len(calls) == runs, script
        for argv in calls:
            assert argv[-len(extra) :] == extra, (script, argv)
            assert not select or argv[argv.index("--op") + 1] in {w.split("-")[0] for w in select}


# --- compare -----------------------------------------------------------------------------------


def _result(path, times, statuses=None):
    rows = []
    for i, t in enumerate(times):
        rows.append(
            {
                "op": "sgp",
                "algebra": "Cl(3,0)",
                "dtype": "float32",
                "precision": "",
                "normalize": True,
                "pass": "forward",
                "batch": 1024 * (i + 1),
                "features": 128,
                "impl": "flashclifford",
                "status": (statuses or {}).get(i, "ok"),
                "time_us": t,
            }
        )
    rows.append(dict(rows[0], impl="eager", time_us=1000.0))
    path.write_text(json.dumps({"schema": report.SCHEMA, "meta": {}, "rows": rows}))
    return path


def test_compare_equal_files_exit_0(tmp_path, capsys):
    old = _result(tmp_path / "old.json", [10.0, 20.0, 40.0])
    new = _result(tmp_path / "new.json", [10.0, 20.0, 40.0])
    assert bench_main(["compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "3 cells compared" in out and "no regression" in out


def test_compare_slower_cell_exit_1(tmp_path, capsys):
    old = _result(tmp_path / "old.json", [10.0, 20.0, 40.0])
    new = _result(tmp_path / "new.json", [10.5, 22.5, 40.0])  # +5% passes, +12.5% fails
    assert bench_main(["compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert out.count("SLOWER") == 1 and "1 regression" in out
    assert bench_main(["compare", str(old), str(new), "--threshold", "0.2"]) == 0
    assert bench_main(["compare", str(old), str(new), "--threshold", "0.01"]) == 1


def test_compare_failure_now_is_a_regression(tmp_path):
    old = _result(tmp_path / "old.json", [10.0, 20.0])
    new = _result(tmp_path / "new.json", [10.0, None], statuses={1: "OOM"})
    assert bench_main(["compare", str(old), str(new)]) == 1


def test_compare_baselines_ignored_unless_asked(tmp_path):
    old = _result(tmp_path / "old.json", [10.0])
    rows = json.loads(old.read_text())["rows"]
    rows[1]["time_us"] = 5000.0  # the eager baseline got 5x slower: torch's business
    new = tmp_path / "new.json"
    new.write_text(json.dumps({"rows": rows}))
    assert bench_main(["compare", str(old), str(new)]) == 0
    assert bench_main(["compare", str(old), str(new), "--impl", "all"]) == 1


@needs_torch
def test_compare_csv_and_json_of_a_real_run(tmp_path):
    _run(tmp_path, "--op", "sgp", "--algebra", "2", "--baselines", "none", "--passes", "forward")
    res = tmp_path / "res"
    assert bench_main(["compare", str(res / "results.json"), str(res / "results.csv")]) == 0


# --- plots -------------------------------------------------------------------------------------


def test_plots_from_rows(tmp_path):
    from flashclifford.bench import plots

    rows = []
    for B in (4, 8):
        for N in (3, 5):
            for impl, t in (("flashclifford", 1.0), ("eager", 3.0)):
                rows.append(
                    {
                        "op": "sgp",
                        "algebra": "Cl(3,0)",
                        "dtype": "float32",
                        "precision": "",
                        "normalize": True,
                        "pass": "forward",
                        "batch": B,
                        "features": N,
                        "impl": impl,
                        "status": "OOM" if (impl == "eager" and B == 8) else "ok",
                        "time_us": t,
                        "speedup": t,
                        "mem_ratio": None,
                    }
                )
    files, note = plots.make_heatmaps(rows, tmp_path)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert files == [] and "matplotlib" in note
        return
    assert note is None and len(files) == 1 and files[0].stat().st_size > 0


# --- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,metric",
    [
        ("2", (1, 1)),
        ("3", (1, 1, 1)),
        ("Cl(1,3)", (1, -1, -1, -1)),
        ("cl(3,0,1)", (0, 1, 1, 1)),
        ("Cl(4, 0)", (1, 1, 1, 1)),
        ("1,-1,-1,-1", (1, -1, -1, -1)),
        ("(0,1,1,1)", (0, 1, 1, 1)),
    ],
)
def test_parse_algebra(text, metric):
    assert cli.parse_algebra(text).metric == metric


def test_parse_algebra_names_round_trip():
    for m in KERNEL_METRICS:
        assert cli.parse_algebra(Algebra(m).name).metric == m


def test_bad_arguments_exit_with_a_message(tmp_path):
    for bad in (
        ["--dtype", "int8"],
        ["--baselines", "jax"],
        ["--passes", "sideways"],
        ["--algebra", "Cl(x)"],
        ["--compile", "sometimes"],
    ):
        with pytest.raises(SystemExit) as e:
            bench_main([*TINY, *bad, "--out", str(tmp_path)])
        assert e.value.code not in (0, None)


def test_fc_products_counts():
    # T' of issue 4: the (output component, path) pairs FCGP's matrix products run over
    expect = {(1, 1): 14, (1, 1, 1): 44, (0, 1, 1, 1): 108, (1, -1, -1, -1): 128, (1, 1, 1, 1): 128}
    for m, t in expect.items():
        assert impls.fc_products(Algebra(m)) == t


# --- the README's main job ---------------------------------------------------------------------


@pytest.mark.slow
def test_quick_under_a_minute(tmp_path):
    """`python -m flashclifford.bench --quick` on this CPU machine: under 60 s, files written."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "flashclifford.bench", "--quick", "--no-progress", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    wall = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "results.csv").exists() and (tmp_path / "results.json").exists()
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    expect_impls = {"flashclifford", "einsum", "eager"} if HAVE_TORCH else {"flashclifford", "einsum"}
    assert {r["impl"] for r in rows} == expect_impls
    assert all(r["status"] == "ok" for r in rows)
    assert all(r["err_ok"] for r in rows if r["impl"] == "flashclifford")
    assert "flashclifford us" in res.stdout
    if wall >= 60 and load > (os.cpu_count() or 1):
        pytest.skip(
            f"--quick took {wall:.0f} s with the machine already loaded (load {load:.1f}): timing not judged"
        )
    assert wall < 60, f"--quick took {wall:.1f} s"
