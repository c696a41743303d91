"""Equivariance of the fused ops and of nn.Layer under the algebra's own group (issue 7).

Multivectors are (D, *batch, N) as in SPEC section 2; the group acts on the component axis.

The group element is a versor g = v_1 v_2 ... v_m, a product of random invertible vectors,
built and applied only through flashclifford.algebra's tables (Cayley table, grades,
reverse signs), never a per-algebra formula. It acts by the twisted sandwich

    rho_g(x) = g x^ g^-1,   x^ = the grade involution of x when g is odd (m odd), else x,

which is an algebra automorphism (conjugation and the grade involution both are) that
keeps grades, fixes the scalar and leaves <x x~>_0 unchanged. So the MVGELU gate
(it reads the scalar), every grade-projected product (one weight per path), the grade norm
(sum_A s_A o_A^2 is <o_g o_g~>_0) and the grade-wise linear map all commute with it:
f(rho x, rho y) = rho f(x, y) for any weights.

Per algebra: reflections and rotations (1 to 4 vectors); for Cl(1,3) also boosts (two
timelike vectors) and timelike x spacelike products; for Cl(3,0,1) also translations (two
parallel planes, i.e. vectors that differ only in their e0 part).

The check has teeth: a float64 NumPy reimplementation of the SGP passes it with the right
tables and fails it, in every algebra, with one Cayley sign flipped or one grade sign of
the norm flipped.
"""

import inspect

import numpy as np
import pytest
from conftest import ALGEBRAS, needs_torch, rel_err, seed_for

import flashclifford as fc
from flashclifford import reference

# float64 throughout. The transformed inputs have entries up to ~10 (boosts of rapidity
# <= 0.94, see random_vector), the grade norms are O(1) for random data, so rounding gives
# ~1e-14; a wrong sign gives O(1). 1e-10 separates the two by orders of magnitude.
TOL = 1e-10
BROKEN = 1e-3  # the broken variants must miss by at least this much

B, N, N_OUT = 3, 5, 4


# ---------------------------------------------------------------------------------------
# the group action, from the tables


def gp(alg, a, b):
    """Geometric product of two multivectors (D,) -> (D,), float64."""
    return np.einsum("i,ijk,k->j", a, alg.cayley, b)


def random_vector(alg, rng, square=None):
    """A random grade-1 element v with |v^2| >= 0.3 ||v||^2 (well away from the null cone,
    which also bounds Cl(1,3) rapidities: tanh(eta) <= sqrt(0.7 / 1.3)). square: None for any
    invertible vector, +1 / -1 for v^2 > 0 / v^2 < 0 (timelike / spacelike in Cl(1,3))."""
    vec = np.flatnonzero(alg.grades == 1)
    metric = np.array(alg.metric, dtype=np.float64)
    for _ in range(1000):
        a = rng.standard_normal(alg.n)
        sq = float(np.sum(metric * a * a))
        if abs(sq) >= 0.3 * float(a @ a) and (square is None or np.sign(sq) == square):
            v = np.zeros(alg.D)
            v[vec] = a
            return v
    raise AssertionError(f"no vector with square sign {square} in {alg.name}")


def null_vector(alg):
    """The basis vector that squares to 0 (Cl(3,0,1)'s e0), as a multivector."""
    v = np.zeros(alg.D)
    v[np.flatnonzero(alg.grades == 1)[alg.metric.index(0)]] = 1.0
    return v


def versors(alg, rng):
    """[(name, [vectors])]: the group elements drawn for `alg`, as lists of vector factors."""
    out = [(f"{m} vectors", [random_vector(alg, rng) for _ in range(m)]) for m in (1, 2, 3, 4)]
    if 1 in alg.metric and -1 in alg.metric:
        out.append(("boost", [random_vector(alg, rng, +1), random_vector(alg, rng, +1)]))
        out.append(("boost x reflection", [random_vector(alg, rng, s) for s in (+1, +1, -1)]))
    if 0 in alg.metric:
        v = random_vector(alg, rng)
        out.append(("translation", [v, v + rng.uniform(0.5, 2.0) * null_vector(alg)]))
        out.append(("screw", [random_vector(alg, rng) for _ in range(2)]
                    + [v, v - rng.uniform(0.5, 2.0) * null_vector(alg)]))
    return out


def action_matrix(alg, vectors):
    """(D, D) float64 R with rho_g(x)_j = sum_i R[j, i] x_i for g = prod(vectors)."""
    g = np.zeros(alg.D)
    g[0] = 1.0
    for v in vectors:
        g = gp(alg, g, v)
    g_rev = alg.reverse_signs * g
    norm = gp(alg, g, g_rev)  # a versor's g g~ is the scalar prod v_i^2
    assert np.allclose(norm[1:], 0, atol=1e-12 * abs(norm[0])), "g g~ is not a scalar"
    assert abs(norm[0]) > 1e-6, "g is not invertible"
    g_inv = g_rev / norm[0]
    C = alg.cayley
    left = np.einsum("i,ijk->jk", g, C)  # (g a)_j = left[j, k] a_k
    right = np.einsum("ijk,k->ji", C, g_inv)  # (a g^-1)_j = right[j, i] a_i
    odd = len(vectors) % 2 == 1
    involution = np.where(alg.grades % 2 == 1, -1.0, 1.0) if odd else np.ones(alg.D)
    return left @ right @ np.diag(involution)


def act(R, x):
    """rho_g on a multivector array (D, ...)."""
    return np.einsum("ji,i...->j...", R, x)


def elements(alg, seed):
    """[(name, R)] for the drawn group elements of `alg`."""
    rng = np.random.default_rng(seed)
    return [(name, action_matrix(alg, vs)) for name, vs in versors(alg, rng)]


def equivariance_error(f, R, grades, *args):
    """max over grades g of rel_err(<f(rho a, rho b, ...)>_g, <rho f(a, b, ...)>_g), float64.

    Per grade, because grades differ in scale by orders of magnitude: in Cl(3,0,1) the norm
    of the pseudoscalar e0123 is 0 (s_A = 0), so that grade is divided by sqrt(eps) = 1e-3
    and would hide an error in every other grade from a whole-array measure."""
    got = np.asarray(f(*(act(R, a) for a in args)), np.float64)
    want = act(R, np.asarray(f(*args), np.float64))
    return max(rel_err(got[grades == g], want[grades == g]) for g in range(int(grades.max()) + 1))


def data(alg, rng, n_in=N, n_out=N_OUT):
    x = rng.standard_normal((alg.D, B, n_in))
    y = rng.standard_normal((alg.D, B, n_in))
    w = rng.standard_normal((n_in, alg.P))
    W = rng.standard_normal((alg.P, n_in, n_out))
    return x, y, w, W


# ---------------------------------------------------------------------------------------
# the action itself is what it claims to be


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_action_is_a_grade_preserving_automorphism(alg, request):
    rng = np.random.default_rng(seed_for(request.node.nodeid))
    a, b = rng.standard_normal(alg.D), rng.standard_normal(alg.D)
    same_grade = alg.grades[:, None] == alg.grades[None, :]
    for name, R in elements(alg, seed_for(request.node.nodeid)):
        assert np.all(R[~same_grade] == 0) or np.abs(R[~same_grade]).max() < 1e-12, f"{name}: mixes grades"
        assert abs(R[0, 0] - 1) < 1e-12, f"{name}: moves the scalar"
        err = rel_err(act(R, gp(alg, a, b)), gp(alg, act(R, a), act(R, b)))
        assert err < TOL, f"{name}: rho(ab) != rho(a) rho(b), rel err {err:.2e}"
        assert np.abs(R - np.eye(alg.D)).max() > 0.1, f"{name}: acts trivially"
        vec = alg.grades == 1
        R1 = R[np.ix_(vec, vec)]
        if name in ("boost", "translation"):
            # not a Euclidean rotation of the component vector: a genuine boost / translation
            assert np.abs(R1 @ R1.T - np.eye(alg.n)).max() > 0.1, f"{name}: is orthogonal"
        if 0 not in alg.metric:
            # an isometry of the metric on vectors
            M = np.diag(np.array(alg.metric, np.float64))
            assert np.abs(R1.T @ M @ R1 - M).max() < 1e-12, f"{name}: not an isometry"


# ---------------------------------------------------------------------------------------
# the library


def _gate_options():
    """gate=False is checked too once flashclifford.ops takes the keyword."""
    if "gate" in inspect.signature(fc.ops.sgp_forward).parameters:
        return [{}, {"gate": False}]
    return [{}]


@pytest.mark.parametrize("gate_kw", _gate_options(), ids=lambda kw: "gate_off" if kw else "gate_on")
@pytest.mark.parametrize("normalize", [True, False], ids=["norm", "nonorm"])
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_ops_equivariant(alg, normalize, gate_kw, request):
    rng = np.random.default_rng(seed_for(request.node.nodeid))
    x, y, w, W = data(alg, rng)
    ops = {
        "sgp_forward": lambda a, b: fc.ops.sgp_forward(a, b, w, alg, normalize, **gate_kw),
        "fcgp_forward": lambda a, b: fc.ops.fcgp_forward(a, b, W, alg, normalize, **gate_kw),
    }
    for name, R in elements(alg, seed_for(request.node.nodeid)):
        for op_name, f in ops.items():
            err = equivariance_error(f, R, alg.grades, x, y)
            assert err < TOL, f"{alg.name} {op_name} under {name}: rel err {err:.2e}"


@needs_torch
@pytest.mark.parametrize("normalize", [True, False], ids=["norm", "nonorm"])
@pytest.mark.parametrize("use_fc", [False, True], ids=["sgp", "fcgp"])
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_layer_equivariant(alg, use_fc, normalize, request):
    import torch

    torch.manual_seed(seed_for(request.node.nodeid))
    layer = fc.nn.Layer(N, alg, normalize=normalize, use_fc=use_fc, dtype=torch.float64)
    with torch.no_grad():
        layer.linear_bias.normal_()  # zero at init; a scalar-only bias must stay equivariant
    rng = np.random.default_rng(seed_for(request.node.nodeid))
    x = rng.standard_normal((alg.D, 2, B, N))  # two batch dims

    def f(a):
        with torch.no_grad():
            return layer(torch.from_numpy(np.ascontiguousarray(a))).numpy()

    for name, R in elements(alg, seed_for(request.node.nodeid)):
        err = equivariance_error(f, R, alg.grades, x)
        assert err < TOL, f"{alg.name} Layer(use_fc={use_fc}) under {name}: rel err {err:.2e}"


# ---------------------------------------------------------------------------------------
# the check catches a wrong table: a float64 NumPy SGP on explicit tables


def sgp_numpy(x, y, w, cayley, path_index, grades, grade_signs, normalize):
    """SPEC section 2's SGP in float64 from the tables it is given (D, B, N) -> (D, B, N)."""
    gelu = reference.mvgelu_np
    Cw = np.where(path_index >= 0, cayley, 0.0)[None] * w[:, np.maximum(path_index, 0)]  # (N, D, D, D)
    o = np.einsum("nijk,ibn,kbn->jbn", Cw, gelu(x), gelu(y))
    if not normalize:
        return o
    G = int(grades.max()) + 1
    onehot = np.zeros((G, len(grades)))
    onehot[grades, np.arange(len(grades))] = grade_signs
    r = np.sqrt(np.abs(np.einsum("ga,abn->gbn", onehot, o * o)).mean(axis=-1) + reference.NORM_EPS)
    return o / r[grades][:, :, None]


def tables(alg):
    return dict(cayley=alg.cayley.copy(), path_index=alg.path_index, grades=alg.grades,
                grade_signs=alg.grade_signs.copy())


def flipped_cayley(alg):
    """The tables with the sign of e_1 e_2 = C e_12 flipped: a nonzero entry in every algebra
    (e_1 may be null, e_2 never is), on the vector x vector -> bivector path."""
    t = tables(alg)
    i, k, j = (alg.blades.index(b) for b in ((1,), (2,), (1, 2)))
    assert t["cayley"][i, j, k] != 0
    t["cayley"][i, j, k] *= -1
    return t


def flipped_grade_sign(alg):
    """The tables with the norm's sign s_A flipped for the last vector e_n (s_A != 0 there in
    every kernel algebra, so the flip changes the grade-1 norm)."""
    t = tables(alg)
    a = alg.blades.index((alg.n,))
    assert t["grade_signs"][a] != 0
    t["grade_signs"][a] *= -1
    return t


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_numpy_sgp_on_true_tables_is_the_reference_and_equivariant(alg, request):
    rng = np.random.default_rng(seed_for(request.node.nodeid))
    x, y, w, _ = data(alg, rng)
    for normalize in (True, False):
        f = lambda a, b, nm=normalize: sgp_numpy(a, b, w, normalize=nm, **tables(alg))  # noqa: E731
        assert rel_err(f(x, y), reference.sgp_np(x, y, w, alg, normalize)) < 1e-13
        for name, R in elements(alg, seed_for(request.node.nodeid)):
            assert equivariance_error(f, R, alg.grades, x, y) < TOL, name


@pytest.mark.parametrize("broken", [flipped_cayley, flipped_grade_sign], ids=["cayley_sign", "grade_sign"])
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_check_fails_for_a_broken_table(alg, broken, request):
    rng = np.random.default_rng(seed_for(request.node.nodeid))
    x, y, w, _ = data(alg, rng)
    t = broken(alg)
    # A pure translation cannot see a wrong s_A: it changes only the e0 parts, whose s_A
    # are 0, so every term of the norm is translation invariant whatever its sign.
    blind = {"translation"} if broken is flipped_grade_sign else set()
    # the grade-sign flip shows only through the norm; the Cayley flip either way
    for normalize in (True,) if broken is flipped_grade_sign else (True, False):
        f = lambda a, b, nm=normalize: sgp_numpy(a, b, w, normalize=nm, **t)  # noqa: E731
        for name, R in elements(alg, seed_for(request.node.nodeid)):
            err = equivariance_error(f, R, alg.grades, x, y)
            if name in blind:
                assert err < TOL, f"{alg.name} {name}: should be blind to a grade sign, rel err {err:.2e}"
            else:
                assert err > BROKEN, f"{alg.name} {broken.__name__} norm={normalize}: {name} passed {err:.1e}"
