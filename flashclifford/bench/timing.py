"""How the harness measures: device time, host overhead, copy bandwidth.

Device time (``measure``)
  GPU: one pair of CUDA events around each repetition. Before each repetition the L2 is
  flushed by reading a buffer larger than it (cache="flush", the default), so a repetition
  reads its inputs from HBM as a layer in a network would; cache="warm" skips the flush.
  cache="flush-dirty" flushes by zeroing the buffer instead (Triton's do_bench, NVBench):
  that leaves the L2 full of dirty lines, whose write-back then lands inside the timed call
  (H100: torch.add over 3 x 16 MiB reaches 72% of the copy bandwidth after a zeroing
  flush, 100% after a reading one), so short calls are charged for the flush's traffic.
  After the flush a spin kernel (torch.cuda._sleep) holds the stream for 1.5 times the
  wall time of one warm-up call, so the whole call (every kernel autograd launches) is
  queued before the start event runs: the events time the GPU's work alone, back to back,
  and a host-bound call no longer measures the CPU's launch gaps, which varied by up to 18%
  between runs (the NVBench "blocking kernel" method). Host cost is its own column (below).
  CPU: time.perf_counter around each call (the CPU ops are synchronous).
  Both: warm-up calls first (the first call, with compilation, is timed on its own as
  first_call_ms; when the harness checks correctness, that check is the first call), then
  repetitions until `reps` are done or `max_seconds` has passed (at least MIN_REPS). The
  statistics are the median and the 20th/80th percentiles.

Host overhead (``host_overhead``)
  GPU: the GPU is kept busy with a sleep kernel (torch.cuda._sleep) while `calls` calls are
  launched back to back; the CPU wall time of the launches divided by `calls` is the host
  cost of one call (dispatcher, argument checks, DLPack, allocation, launch). If the sleep
  has already ended when the launches return, the GPU may have drained and the CPU waited
  on it: the sleep is lengthened and the measurement repeated; a call that synchronises
  (so the GPU never stays ahead) is flagged. The median of three such measurements.
  CPU: the wall time of one call at the smallest shape (B = 1, N = 1), where the arithmetic
  is negligible: the fixed per-call cost.
  GPU, also: wall_per_call_cuda, the wall time per call of back-to-back calls with a
  synchronisation only at the ends (the larger of host and device cost, per call).

Copy bandwidth (``copy_bandwidth``)
  GPU: a device-to-device copy of `gib` GiB (default 2), bytes read + written, median of
  event-timed repetitions. CPU: numpy.copyto of a smaller buffer, same counting.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

MIN_REPS = 3


def quantiles(times):
    """(median, p20, p80) of a list of seconds (linear interpolation between order statistics)."""
    a = np.sort(np.asarray(times, dtype=np.float64))
    if a.size == 0:
        return math.nan, math.nan, math.nan
    return float(np.quantile(a, 0.5)), float(np.quantile(a, 0.2)), float(np.quantile(a, 0.8))


class Timing:
    """The result of ``measure``: per-repetition seconds and the first call's seconds."""

    def __init__(self, times, first):
        self.times = list(times)
        self.first = first
        self.p50, self.p20, self.p80 = quantiles(self.times)

    @property
    def reps(self):
        return len(self.times)


class Flusher:
    """Reads a buffer twice the L2 size (at least 256 MiB, as Triton's do_bench uses), so
    the L2 holds only clean lines of it; dirty=True zeroes the buffer instead (see the
    module docstring for why that is not the default)."""

    def __init__(self, torch, device, dirty=False):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 0
        self.nbytes = max(256 * 2**20, 2 * l2)
        self.buf = torch.zeros(self.nbytes // 4, dtype=torch.int32, device=device)
        self.dirty = dirty

    def __call__(self):
        if self.dirty:
            self.buf.zero_()
        else:
            self.buf.max()  # a reduction: reads every line, writes one value


def _noop():
    pass


def measure(
    fn, pre=None, *, torch=None, cuda=False, warmup=10, reps=100, max_seconds=5.0, flush=None, first=None
):
    """Time `fn()` (see the module docstring). `pre()` runs before each call, untimed
    (e.g. setting gradients to None). `first`: seconds of a first call the caller already
    made (the correctness check), which then counts as the first warm-up call. Returns a Timing."""
    pre = pre or _noop
    if cuda:
        return _measure_cuda(fn, pre, torch, warmup, reps, max_seconds, flush, first)
    return _measure_cpu(fn, pre, warmup, reps, max_seconds, first)


def _measure_cpu(fn, pre, warmup, reps, max_seconds, first=None):
    if first is None:
        pre()
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
    start = time.perf_counter()
    for _ in range(max(0, warmup - 1)):
        if time.perf_counter() - start > max_seconds / 2:
            break
        pre()
        fn()
    times = []
    deadline = time.perf_counter() + max_seconds
    while len(times) < reps and (len(times) < MIN_REPS or time.perf_counter() < deadline):
        pre()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return Timing(times, first)


def _measure_cuda(fn, pre, torch, warmup, reps, max_seconds, flush, first=None, hold_stream=True):
    flush = flush or _noop
    if first is None:
        torch.cuda.synchronize()
        pre()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
    # warm-up, also giving a per-call estimate to fit the repetitions into max_seconds
    n_warm = max(1, warmup - 1)
    t0 = time.perf_counter()
    for _ in range(n_warm):
        pre()
        flush()
        fn()
    torch.cuda.synchronize()
    per_call = (time.perf_counter() - t0) / n_warm
    n = int(min(reps, max(MIN_REPS, max_seconds / max(per_call, 1e-7))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    hold = int(min(1.5 * per_call, 0.05) * _sleep_cycles_per_second(torch)) if hold_stream else 0
    for i in range(n):
        pre()
        flush()
        if hold:
            torch.cuda._sleep(hold)  # the call is queued while this spins
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return Timing([s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends, strict=True)], first)


# --- host overhead ----------------------------------------------------------------------------

_sleep_rate: dict = {}


def _sleep_cycles_per_second(torch):
    """Calibrate torch.cuda._sleep: spin cycles per second on this GPU (cached)."""
    dev = torch.cuda.current_device()
    if dev not in _sleep_rate:
        cycles = 10_000_000
        torch.cuda._sleep(cycles)  # first use loads the kernel
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        torch.cuda.synchronize()
        _sleep_rate[dev] = cycles / max(s.elapsed_time(e) * 1e-3, 1e-6)
    return _sleep_rate[dev]


def host_overhead_cuda(fn, pre, torch, calls=10, trials=3):
    """(seconds per call on the host, ok). ok is False when the calls kept synchronising."""
    rate = _sleep_cycles_per_second(torch)
    results, ok_all = [], True
    for _ in range(trials):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            pre()
            fn()
        guess = time.perf_counter() - t0  # host time, or more if the queue was full
        torch.cuda.synchronize()
        busy_s, ok = 2.0 * guess + 2e-3, False
        for _attempt in range(4):
            torch.cuda._sleep(int(rate * busy_s))
            done = torch.cuda.Event()
            done.record()
            t0 = time.perf_counter()
            for _ in range(calls):
                pre()
                fn()
            host = time.perf_counter() - t0
            ok = not done.query()  # the sleep still runs: the CPU never waited for the GPU
            torch.cuda.synchronize()
            if ok or busy_s > 2.0:
                break
            busy_s *= 4
        results.append(host / calls)
        ok_all = ok_all and ok
    return statistics.median(results), ok_all


def wall_per_call_cuda(fn, pre, torch, calls=20, trials=3):
    """Wall time per call of `calls` back-to-back calls, synchronised before and after, L2
    warm: the steady-state cost of one call with its host overhead, as a loop of layers sees
    it when the GPU does not run ahead (median of `trials`)."""
    results = []
    for _ in range(trials):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            pre()
            fn()
        torch.cuda.synchronize()
        results.append((time.perf_counter() - t0) / calls)
    return statistics.median(results)


# --- copy bandwidth ---------------------------------------------------------------------------


def copy_bandwidth(torch=None, cuda=False, gib=None, reps=20):
    """Measured device copy bandwidth: dict(bytes_per_s, nbytes (read + written), seconds, method)."""
    if cuda:
        gib = 2.0 if gib is None else gib
        while True:
            nbytes = int(gib * 2**30) // 4 * 4
            try:
                src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
                dst = torch.empty_like(src)
                break
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                gib /= 2
                if gib < 1 / 64:
                    raise
        timing = _measure_cuda(lambda: dst.copy_(src), _noop, torch, 3, reps, 10.0, None, hold_stream=False)
        del src, dst
        torch.cuda.empty_cache()
        method = f"torch copy_ of {gib:g} GiB device to device, CUDA events, median of {timing.reps}"
    else:
        gib = 0.25 if gib is None else gib
        n = int(gib * 2**30) // 8
        src = np.full(n, 1.5)
        dst = np.empty_like(src)
        np.copyto(dst, src)  # fault the pages in
        timing = _measure_cpu(lambda: np.copyto(dst, src), _noop, 1, reps, 3.0)
        nbytes = n * 8
        method = f"numpy.copyto of {gib:g} GiB, perf_counter, median of {timing.reps}"
    moved = 2 * nbytes
    return {"bytes_per_s": moved / timing.p50, "nbytes": moved, "seconds": timing.p50, "method": method}
