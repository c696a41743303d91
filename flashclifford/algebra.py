"""Clifford algebras Cl(p, q, r) from their metric, derived in pure Python.

Shapes: D = 2^n components, G = n + 1 grades, P product paths.

  blades       list of D index tuples, grade by grade, lexicographic inside a grade;
               indices count from 1 as in SPEC (e_1 .. e_n, e_i * e_i = metric[i-1])
  grades       (D,) int64, the grade of each component
  grade_signs  (D,) float64, s_A = prod of metric[e-1] over e in A
  cayley       (D, D, D) float64, C[i, j, k]: e_{A_i} e_{A_k} = C[i, j, k] e_{A_j}
  paths        P grade triples (left, output, right) with some C != 0, lexicographic
  path_index   (D, D, D) int64, the path of (i, j, k); -1 where C[i, j, k] == 0

This derivation is deliberately independent of the C one (csrc/algebra_rules.h, which
works on bitmaps): it sorts the concatenated index tuples with counted swaps and then
contracts repeated indices with their metric factor. The tests compare the two, so a
mistake in either shows up. Tables are derived once per metric and shared read-only.
"""

from __future__ import annotations

import itertools
import operator
import threading
from dataclasses import dataclass

import numpy as np

__all__ = ["Algebra", "KERNEL_METRICS"]

# The algebras the kernels are compiled for, in kernel-id order (FC_ALGEBRA_LIST in
# csrc/algebra_rules.h; SPEC section 1).
KERNEL_METRICS = (
    (1, 1),  # Cl(2,0)
    (1, 1, 1),  # Cl(3,0)
    (1, -1, -1, -1),  # Cl(1,3), time axis first
    (0, 1, 1, 1),  # Cl(3,0,1), e0 first
    (1, 1, 1, 1),  # Cl(4,0)
)

# The Cayley table is D^3 float64: n = 6 is 2 MiB, n = 8 would be 128 MiB.
MAX_N = 6


def _sort_sign(indices):
    """(+1 or -1, sorted list) for bubble-sorting `indices`, one sign flip per swap."""
    seq = list(indices)
    swaps = 0
    for end in range(len(seq) - 1, 0, -1):
        for t in range(end):
            if seq[t] > seq[t + 1]:
                seq[t], seq[t + 1] = seq[t + 1], seq[t]
                swaps += 1
    return (-1 if swaps % 2 else 1), seq


def _blade_product(a, b, metric):
    """e_a * e_b for index tuples a, b: (coefficient, result tuple); coefficient may be 0."""
    sign, seq = _sort_sign(a + b)
    out = []
    t = 0
    # Each index occurs at most twice (once per factor) and equal ones are now adjacent.
    while t < len(seq):
        if t + 1 < len(seq) and seq[t] == seq[t + 1]:
            sign *= metric[seq[t] - 1]
            t += 2
        else:
            out.append(seq[t])
            t += 1
    return sign, tuple(out)


@dataclass(frozen=True)
class _Tables:
    blades: tuple
    grades: np.ndarray
    grade_signs: np.ndarray
    cayley: np.ndarray
    paths: tuple
    path_index: np.ndarray


_tables_cache: dict[tuple, _Tables] = {}
_tables_lock = threading.Lock()


def _derive(metric: tuple) -> _Tables:
    n = len(metric)
    blades = [c for g in range(n + 1) for c in itertools.combinations(range(1, n + 1), g)]
    position = {b: i for i, b in enumerate(blades)}
    D = len(blades)
    grades = np.array([len(b) for b in blades], dtype=np.int64)
    grade_signs = np.array([np.prod([metric[e - 1] for e in b]) for b in blades], dtype=np.float64)

    cayley = np.zeros((D, D, D), dtype=np.float64)
    for i, a in enumerate(blades):
        for k, b in enumerate(blades):
            coef, res = _blade_product(a, b, metric)
            if coef != 0:
                cayley[i, position[res], k] = coef

    nz = np.argwhere(cayley != 0)
    paths = sorted({(int(grades[i]), int(grades[j]), int(grades[k])) for i, j, k in nz})
    path_of = {p: t for t, p in enumerate(paths)}
    path_index = np.full((D, D, D), -1, dtype=np.int64)
    for i, j, k in nz:
        path_index[i, j, k] = path_of[(int(grades[i]), int(grades[j]), int(grades[k]))]

    for arr in (grades, grade_signs, cayley, path_index):
        arr.flags.writeable = False  # shared by every Algebra with this metric
    return _Tables(tuple(blades), grades, grade_signs, cayley, tuple(paths), path_index)


def _tables(metric: tuple) -> _Tables:
    t = _tables_cache.get(metric)
    if t is None:
        with _tables_lock:
            t = _tables_cache.get(metric)
            if t is None:
                t = _tables_cache[metric] = _derive(metric)
    return t


def _supported_text() -> str:
    names = ", ".join(f"{Algebra(m).name} {m}" for m in KERNEL_METRICS)
    return (
        "expected an Algebra, an int n (Euclidean Cl(n,0), e.g. 2 or 3) or a metric tuple "
        f"of +1/-1/0; the kernels support {names}"
    )


class Algebra:
    """A Clifford algebra given by its metric, e_i * e_i = metric[i-1].

    Algebra(3) is Cl(3,0); Algebra((1, -1, -1, -1)) is Cl(1,3); Algebra((0, 1, 1, 1)) is
    projective Cl(3,0,1) with e0 * e0 = 0. `id` is the kernel id (position in
    KERNEL_METRICS) or None for an algebra the kernels do not support; the tables here
    work for any metric up to MAX_N basis vectors.
    """

    __slots__ = ("metric",)

    def __init__(self, metric):
        if isinstance(metric, Algebra):
            metric = metric.metric
        elif not isinstance(metric, bool) and _is_int(metric):
            n = operator.index(metric)
            if not 1 <= n <= MAX_N:
                raise ValueError(f"algebra: {_supported_text()}; got {metric!r}")
            metric = (1,) * n
        elif isinstance(metric, (tuple, list)):
            try:
                metric = tuple(_metric_entry(m) for m in metric)
            except (TypeError, ValueError):
                raise ValueError(f"algebra: {_supported_text()}; got {metric!r}") from None
            if not 1 <= len(metric) <= MAX_N:
                raise ValueError(f"algebra: {_supported_text()}; got {metric!r}")
        else:
            raise ValueError(f"algebra: {_supported_text()}; got {metric!r}")
        object.__setattr__(self, "metric", metric)

    def __setattr__(self, name, value):
        raise AttributeError("Algebra is immutable")

    @classmethod
    def resolve(cls, obj) -> Algebra:
        """The Algebra for `obj`: an Algebra, an int n (Cl(n,0)) or a metric tuple."""
        return obj if isinstance(obj, Algebra) else cls(obj)

    # -- sizes and names ------------------------------------------------------------

    @property
    def n(self) -> int:
        return len(self.metric)

    @property
    def D(self) -> int:
        return 1 << self.n

    @property
    def G(self) -> int:
        return self.n + 1

    @property
    def P(self) -> int:
        return len(self.paths)

    @property
    def signature(self) -> tuple:
        """(p, q, r): the numbers of basis vectors squaring to +1, -1 and 0."""
        return (self.metric.count(1), self.metric.count(-1), self.metric.count(0))

    @property
    def name(self) -> str:
        p, q, r = self.signature
        return f"Cl({p},{q})" if r == 0 else f"Cl({p},{q},{r})"

    @property
    def id(self):
        try:
            return KERNEL_METRICS.index(self.metric)
        except ValueError:
            return None

    # -- tables ---------------------------------------------------------------------

    @property
    def blades(self) -> list:
        return list(_tables(self.metric).blades)

    @property
    def blade_names(self) -> list:
        # PGA convention: the null vector comes first and is called e0.
        base = 0 if self.metric[0] == 0 else 1
        return ["1" if not b else "e" + "".join(str(e - 1 + base) for e in b) for b in self.blades]

    @property
    def grades(self) -> np.ndarray:
        return _tables(self.metric).grades

    @property
    def grade_signs(self) -> np.ndarray:
        return _tables(self.metric).grade_signs

    @property
    def reverse_signs(self) -> np.ndarray:
        """(D,) float64: the reverse of blade A is (-1)^(g(g-1)/2) A."""
        g = self.grades
        return np.where((g * (g - 1) // 2) % 2 == 0, 1.0, -1.0)

    @property
    def cayley(self) -> np.ndarray:
        return _tables(self.metric).cayley

    @property
    def paths(self) -> list:
        return list(_tables(self.metric).paths)

    @property
    def path_index(self) -> np.ndarray:
        return _tables(self.metric).path_index

    @property
    def path_masks(self) -> np.ndarray:
        """(P, D, D, D) float64: C[i, j, k] where path(i, j, k) == p, else 0."""
        C, idx = self.cayley, self.path_index
        return np.stack([np.where(idx == p, C, 0.0) for p in range(self.P)])

    # -- identity -------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"Algebra({self.name}, metric={self.metric})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Algebra) and other.metric == self.metric

    def __hash__(self) -> int:
        return hash(("Algebra", self.metric))

    def __reduce__(self):
        return (Algebra, (self.metric,))


def _is_int(obj) -> bool:
    try:
        operator.index(obj)
    except TypeError:
        return False
    return True


def _metric_entry(m) -> int:
    if isinstance(m, bool) or not _is_int(m):
        raise TypeError
    m = operator.index(m)
    if m not in (1, -1, 0):
        raise ValueError
    return m
