"""flashclifford.algebra: SPEC facts, algebraic identities, and the Python derivation
against the C one (flashclifford._C.algebra_table).

Multivectors here are (D, batch) float64; gp(a, b)_j = sum_ik a_i C[i, j, k] b_k.
"""

import pickle

import numpy as np
import pytest
from conftest import ALGEBRAS, rel_err

from flashclifford.algebra import KERNEL_METRICS, Algebra

# (metric, name, D, P) from SPEC section 1.
SPEC_TABLE = [
    ((1, 1), "Cl(2,0)", 4, 10),
    ((1, 1, 1), "Cl(3,0)", 8, 20),
    ((1, -1, -1, -1), "Cl(1,3)", 16, 35),
    ((0, 1, 1, 1), "Cl(3,0,1)", 16, 34),
    ((1, 1, 1, 1), "Cl(4,0)", 16, 35),
]


def gp(alg, a, b):
    return np.einsum("i...,ijk,k...->j...", a, alg.cayley, b)


def reverse(alg, a):
    return alg.reverse_signs.reshape(-1, *([1] * (a.ndim - 1))) * a


def basis(alg, name):
    v = np.zeros(alg.D)
    v[alg.blade_names.index(name)] = 1.0
    return v


# ------------------------------------------------------------------------ SPEC facts


@pytest.mark.parametrize("metric,name,D,P", SPEC_TABLE, ids=[r[1] for r in SPEC_TABLE])
def test_spec_sizes(metric, name, D, P):
    alg = Algebra(metric)
    assert (alg.name, alg.D, alg.P, alg.n, alg.G) == (name, D, P, len(metric), len(metric) + 1)
    assert alg.id == [r[0] for r in SPEC_TABLE].index(metric)
    assert alg.cayley.shape == (D, D, D) and alg.cayley.dtype == np.float64
    assert alg.path_index.shape == (D, D, D) and alg.path_index.dtype.kind == "i"
    assert alg.grades.shape == (D,) and alg.grades.dtype == np.int64
    assert alg.grade_signs.shape == (D,) and alg.grade_signs.dtype == np.float64
    assert len(alg.blades) == len(alg.blade_names) == D


def test_kernel_metrics_order():
    assert KERNEL_METRICS == tuple(r[0] for r in SPEC_TABLE)


def test_blade_order_3d():
    alg = Algebra(3)
    assert alg.blade_names == "1,e1,e2,e3,e12,e13,e23,e123".split(",")
    assert alg.blades == [(), (1,), (2,), (3,), (1, 2), (1, 3), (2, 3), (1, 2, 3)]
    assert alg.grades.tolist() == [0, 1, 1, 1, 2, 2, 2, 3]


def test_blade_order_4d_and_pga_names():
    names4 = "1,e1,e2,e3,e4,e12,e13,e14,e23,e24,e34,e123,e124,e134,e234,e1234".split(",")
    assert Algebra(4).blade_names == names4
    assert Algebra((1, -1, -1, -1)).blade_names == names4
    pga = "1,e0,e1,e2,e3,e01,e02,e03,e12,e13,e23,e012,e013,e023,e123,e0123".split(",")
    assert Algebra((0, 1, 1, 1)).blade_names == pga


def test_paths_3d_weight_order():
    paths = Algebra(3).paths
    assert paths[0] == (0, 0, 0)
    assert paths[1] == (0, 1, 1)
    assert paths[4] == (1, 0, 1)
    # Euclidean 3D: output grades |gl-gr|, |gl-gr|+2, ... up to min(gl+gr, 6-gl-gr)
    expected = sorted(
        (gl, go, gr)
        for gl in range(4)
        for gr in range(4)
        for go in range(abs(gl - gr), min(gl + gr, 6 - gl - gr) + 1, 2)
    )
    assert paths == expected


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_paths_and_path_index_consistent(alg):
    C, idx, g = alg.cayley, alg.path_index, alg.grades
    assert np.array_equal(idx == -1, C == 0)
    assert alg.paths == sorted(set(alg.paths))
    used = set()
    for i, j, k in np.argwhere(C != 0):
        p = idx[i, j, k]
        assert alg.paths[p] == (g[i], g[j], g[k])
        used.add(p)
    assert used == set(range(alg.P))  # every listed path has a non-zero entry
    masks = alg.path_masks
    assert masks.shape == (alg.P, alg.D, alg.D, alg.D)
    assert np.array_equal(masks.sum(axis=0), C)


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_cayley_structure(alg):
    C = alg.cayley
    assert set(np.unique(C)) <= {-1.0, 0.0, 1.0}
    blades = alg.blades
    for i, a in enumerate(blades):
        for k, b in enumerate(blades):
            res = tuple(sorted(set(a) ^ set(b)))
            j = blades.index(res)
            nonzero = np.flatnonzero(C[i, :, k])
            null_repeat = any(alg.metric[e - 1] == 0 for e in set(a) & set(b))
            assert nonzero.tolist() == ([] if null_repeat else [j])


def test_pga_null_vector():
    alg = Algebra((0, 1, 1, 1))
    e0 = basis(alg, "e0")
    assert not gp(alg, e0, e0).any()
    assert alg.grade_signs[alg.blade_names.index("e0123")] == 0
    assert alg.grade_signs[alg.blade_names.index("e123")] == 1


# ------------------------------------------------------------------- known products


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_vectors_square_to_metric_and_anticommute(alg):
    vecs = [basis(alg, n) for n, g in zip(alg.blade_names, alg.grades, strict=True) if g == 1]
    one = basis(alg, "1")
    for a, u in enumerate(vecs):
        assert np.array_equal(gp(alg, u, u), alg.metric[a] * one)
        for v in vecs[a + 1 :]:
            assert np.array_equal(gp(alg, u, v), -gp(alg, v, u))


def test_known_products_3d():
    alg = Algebra(3)

    def e(n):
        return basis(alg, n)

    assert np.array_equal(gp(alg, e("e1"), e("e12")), e("e2"))
    assert np.array_equal(gp(alg, e("e12"), e("e12")), -e("1"))
    assert np.array_equal(gp(alg, e("e2"), e("e1")), -e("e12"))
    assert np.array_equal(gp(alg, e("e12"), e("e3")), e("e123"))
    assert np.array_equal(gp(alg, e("e123"), e("e123")), -e("1"))
    # C[i, j, k] directly: e1 * e12 = +e2 uses path (1, 1, 2), e12 * e12 = -1 uses (2, 0, 2)
    i, j, k = (alg.blade_names.index(n) for n in ("e1", "e2", "e12"))
    assert alg.cayley[i, j, k] == 1 and alg.paths[alg.path_index[i, j, k]] == (1, 1, 2)
    assert alg.cayley[k, 0, k] == -1 and alg.paths[alg.path_index[k, 0, k]] == (2, 0, 2)


@pytest.mark.parametrize(
    "metric,square", [((1, 1, 1, 1), 1), ((1, -1, -1, -1), -1), ((0, 1, 1, 1), 0), ((1, 1), -1)]
)
def test_pseudoscalar_square(metric, square):
    alg = Algebra(metric)
    ps = np.zeros(alg.D)
    ps[-1] = 1.0
    assert np.array_equal(gp(alg, ps, ps), square * basis(alg, "1"))


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_blade_square_is_reverse_times_grade_sign(alg):
    # e_A e_A = (-1)^(g(g-1)/2) s_A: ties grade_signs and the Cayley table together
    diag = alg.cayley[np.arange(alg.D), 0, np.arange(alg.D)]
    assert np.array_equal(diag, alg.reverse_signs * alg.grade_signs)
    expected = [np.prod([alg.metric[e - 1] for e in b]) for b in alg.blades]
    assert alg.grade_signs.tolist() == expected


# ------------------------------------------------------------------------ identities


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_associativity(alg, rng):
    a, b, c = (rng.standard_normal((alg.D, 64)) for _ in range(3))
    left = gp(alg, gp(alg, a, b), c)
    right = gp(alg, a, gp(alg, b, c))
    assert rel_err(left, right) <= 1e-12  # float64; both sides are short exact-sign sums


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_associativity_on_basis_blades_exact(alg):
    C = alg.cayley
    # (e_a e_b) e_c == e_a (e_b e_c) for all triples, as exact tables
    left = np.einsum("ajb,jkc->abkc", C, C)  # (e_a e_b) -> j, then j * e_c -> k
    right = np.einsum("bjc,akj->abkc", C, C)  # (e_b e_c) -> j, then e_a * j -> k
    assert np.array_equal(left, right)


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_scalar_identity_exact(alg, rng):
    a = rng.standard_normal((alg.D, 16))
    one = np.zeros((alg.D, 16))
    one[0] = 1.0
    assert np.array_equal(gp(alg, one, a), a)
    assert np.array_equal(gp(alg, a, one), a)


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_reverse_anti_automorphism(alg, rng):
    a, b = (rng.standard_normal((alg.D, 32)) for _ in range(2))
    assert rel_err(reverse(alg, gp(alg, a, b)), gp(alg, reverse(alg, b), reverse(alg, a))) <= 1e-12


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_distributive_and_bilinear(alg, rng):
    a, b, c = (rng.standard_normal((alg.D, 8)) for _ in range(3))
    s = 1.7
    assert rel_err(gp(alg, a, s * b + c), s * gp(alg, a, b) + gp(alg, a, c)) <= 1e-12


# ---------------------------------------------------------------- construction, API


def test_resolve_forms_agree():
    a3 = Algebra.resolve(3)
    assert a3 == Algebra((1, 1, 1)) == Algebra([1, 1, 1]) == Algebra(np.int64(3))
    assert Algebra.resolve(a3) is a3
    assert hash(a3) == hash(Algebra((1, 1, 1)))
    assert Algebra.resolve(2) == Algebra((1, 1)) and Algebra.resolve(2).id == 0
    assert Algebra((1, 1, 1)) != Algebra((1, 1, 1, 1))
    assert repr(a3) == "Algebra(Cl(3,0), metric=(1, 1, 1))"
    assert pickle.loads(pickle.dumps(a3)) == a3


def test_non_kernel_algebra_has_no_id():
    alg = Algebra((1, 1, -1))
    assert alg.name == "Cl(2,1)" and alg.id is None and alg.D == 8
    assert Algebra((1, 0, -1)).name == "Cl(1,1,1)"


@pytest.mark.parametrize("bad", ["x", 2.5, None, True, 0, 99, (), (1, 2), (1, 1.5), [1, "a"], {1}])
def test_bad_algebra_raises(bad):
    with pytest.raises(ValueError, match=r"^algebra: .*Cl\(3,0\).*Cl\(3,0,1\)"):
        Algebra.resolve(bad)


def test_tables_cached_and_read_only():
    a, b = Algebra(3), Algebra((1, 1, 1))
    assert a.cayley is b.cayley and a.path_index is b.path_index
    with pytest.raises(ValueError):
        a.cayley[0, 0, 0] = 5.0
    with pytest.raises(AttributeError):
        a.metric = (1, 1)


# ---------------------------------------------------------- Python vs C derivation


def _c_module():
    try:
        from flashclifford import _C
    except ImportError as e:
        pytest.skip(f"flashclifford._C is not built yet ({e}); the C tables cannot be compared")
    return _C


def _python_terms(alg):
    """(i, j, k, sign, path) for every non-zero C[i, j, k], ordered by (i, k) like the C list."""
    C, idx = alg.cayley, alg.path_index
    terms = []
    for i in range(alg.D):
        for k in range(alg.D):
            for j in np.flatnonzero(C[i, :, k]):
                terms.append((i, int(j), k, int(C[i, j, k]), int(idx[i, j, k])))
    return terms


def _as_tuple(blade):
    """A C blade (bitmap, bit e-1 for e_e, or an index tuple) as a 1-based index tuple."""
    if isinstance(blade, int):
        return tuple(e + 1 for e in range(blade.bit_length()) if blade >> e & 1)
    return tuple(int(e) for e in blade)


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_python_matches_c_derivation(alg):
    _C = _c_module()
    t = _C.algebra_table(alg.id)
    assert t["name"] == alg.name
    assert (t["n"], t["D"], t["G"], t["P"]) == (alg.n, alg.D, alg.G, alg.P)
    assert tuple(t["metric"])[: alg.n] == alg.metric
    assert [_as_tuple(b) for b in t["blades"]] == alg.blades
    assert list(t["grades"]) == alg.grades.tolist()
    assert [float(s) for s in t["grade_signs"]] == alg.grade_signs.tolist()
    assert [tuple(p) for p in t["path_grades"]] == alg.paths
    py_terms = _python_terms(alg)
    c_terms = [tuple(int(v) for v in term) for term in t["terms"]]
    assert t["T"] == len(c_terms) == len(py_terms)
    assert c_terms == py_terms
    starts = list(t["grade_start"])
    assert starts == [int(np.searchsorted(alg.grades, g)) for g in range(alg.G)] + [alg.D]
    assert _C.find_algebra(alg.metric) == alg.id


def test_c_find_algebra_unknown():
    _C = _c_module()
    assert _C.find_algebra((1, 1, -1)) == -1
