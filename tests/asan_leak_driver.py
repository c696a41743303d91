"""Leak attribution driver for tests/asan_check.sh (not a pytest module).

Calls every entry point of tests/test_leaks.py (valid calls and every error path of
flashclifford._C / flashclifford.ops) ROUNDS times and exits. The script runs it under
LeakSanitizer with full (slow) stack unwinding, so that a leaked Python object allocated
inside our module (a missing Py_DECREF) carries our frames in its allocation stack and is
reported as ours; the suite run uses fast unwinding, which stops at the first frame of
libpython (built without frame pointers) and so can attribute only raw mallocs.
A leak that happens once per call shows up as ROUNDS objects.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_leaks  # noqa: E402

ROUNDS = int(os.environ.get("ASAN_DRIVER_ROUNDS", "20"))


def main():
    for name, call in test_leaks.ENTRY_POINTS.items():
        for _ in range(ROUNDS):
            call()
        print(f"{name}: {ROUNDS} calls", flush=True)
    if os.environ.get("ASAN_DRIVER_TORCH") == "1":
        import torch

        import flashclifford as fc

        arrays = (test_leaks.X, test_leaks.Y, test_leaks.W)
        x, y, w = (torch.from_numpy(a.copy()).requires_grad_() for a in arrays)
        for _ in range(ROUNDS):
            fc.gelu_sgp_norm(x, y, w, 3).sum().backward()
            fc.ops.sgp_backward(x.detach(), x.detach(), y.detach(), w.detach(), 3)  # exchange-API path
        print(f"torch ops: {ROUNDS} calls", flush=True)


if __name__ == "__main__":
    main()
