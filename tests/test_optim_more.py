"""Adadelta, ASGD, Rprop, Adafactor and LBFGS against PyTorch: the same parameters follow the
same trajectory step after step, state_dicts saved by one library load into the other and
training goes on identically, bad hyperparameters raise PyTorch's errors."""

import io

import numpy as np
import pytest
import torch

import ember
from oracle import assert_same, to_numpy

rng = np.random.default_rng(7)
# a matrix, a vector, a 0-dim scalar, a 3-D tensor (Adafactor factors its last two dims), and
# one parameter the loss never reaches (its grad stays None)
SHAPES = [(4, 3), (3,), (), (2, 3, 5), (2,)]
P0 = [rng.standard_normal(s) for s in SHAPES]
C = [rng.standard_normal(s) for s in SHAPES]
USED = 4  # the last parameter gets no gradient


def make_params(lib, dtype="float32"):
    return [lib.tensor(p, dtype=getattr(lib, dtype), requires_grad=True) for p in P0]


def loss_fn(lib, params):
    total = 0
    for p, c in zip(params[:USED], C[:USED]):
        c = lib.tensor(c, dtype=p.dtype)
        total = total + ((p - c) ** 2 * (1 + c.abs())).sum() + (p * 3).sin().sum()
    return total


def build(lib, name, kwargs, params, group2=None):
    """Two param groups: the first three params with the defaults, the rest with ``group2``
    overrides (its own lr, say)."""
    groups = [{"params": params[:3]}, {"params": params[3:], **(group2 or {})}]
    kw = dict(kwargs)
    if kw.get("lr") == "tensor":
        kw["lr"] = lib.tensor(0.05)
    return getattr(lib.optim, name)(groups, **kw)


def train(lib, opt, params, steps):
    traj = []
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(lib, params).backward()
        opt.step()
        traj.append([p.detach().clone() for p in params])
    return traj


CASES = [
    ("Adadelta", dict(), None),
    ("Adadelta", dict(lr=0.5, rho=0.5, eps=1e-4), {"lr": 2.0}),
    ("Adadelta", dict(weight_decay=0.1, maximize=True), {"rho": 0.99}),
    ("Adadelta", dict(lr="tensor", foreach=True), None),
    ("ASGD", dict(lr=0.05), None),
    ("ASGD", dict(lr=0.05, t0=3, lambd=0.01, alpha=0.5), {"lr": 0.02}),
    ("ASGD", dict(lr=0.05, t0=0, weight_decay=0.1, maximize=True), {"t0": 5}),
    ("ASGD", dict(lr="tensor", t0=2, lambd=0.1), None),
    ("Rprop", dict(), None),
    ("Rprop", dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(0.01, 0.2)), {"lr": 0.05}),
    ("Rprop", dict(lr=0.05, maximize=True), {"etas": (0.6, 1.1)}),
    ("Rprop", dict(lr="tensor", step_sizes=(1e-3, 0.06), foreach=True), None),
    ("Adafactor", dict(), None),
    ("Adafactor", dict(lr=0.1, beta2_decay=-0.5, eps=(1e-5, 1e-2), d=1.5), {"lr": 0.03}),
    ("Adafactor", dict(lr=0.05, weight_decay=0.1, maximize=True), {"d": 2.0}),
    ("Adafactor", dict(lr=0.05, eps=(1e-3, 1e-3), weight_decay=0.0), {"beta2_decay": -0.3}),
    ("Adafactor", dict(lr="tensor"), None),
]
IDS = [f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)]
TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-10, atol=1e-12)}


def _state_arrays(opt, params):
    return [{k: to_numpy(v) for k, v in opt.state[p].items()} for p in params if opt.state[p]]


@pytest.mark.parametrize("name,kwargs,group2", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_trajectory_matches_torch(name, kwargs, group2, dtype):
    """Eight steps from the same values: parameters within tolerance after every step, the
    same state (keys in PyTorch's order, same values) at the end, no state for the parameter
    without a gradient."""
    pe, pt = make_params(ember, dtype), make_params(torch, dtype)
    oe, ot = build(ember, name, kwargs, pe, group2), build(torch, name, kwargs, pt, group2)
    te, tt = train(ember, oe, pe, 8), train(torch, ot, pt, 8)
    for k, (a, b) in enumerate(zip(te, tt)):
        assert_same(a, b, path=f"step {k}", **TOL[dtype])
    assert not oe.state[pe[USED]] and not ot.state[pt[USED]]
    se, st = _state_arrays(oe, pe), _state_arrays(ot, pt)
    assert [list(s) for s in se] == [list(s) for s in st]
    for a, b in zip(se, st):
        for key in b:
            np.testing.assert_allclose(a[key], b[key], **TOL[dtype], err_msg=key)
            assert a[key].dtype == b[key].dtype, key


def test_tensor_lr_with_more_than_zero_dims():
    """A 1-element lr of any shape acts as its value, as in PyTorch."""
    for name in ("Adadelta", "ASGD", "Rprop", "Adafactor"):
        runs = []
        for lib in (ember, torch):
            ps = make_params(lib)
            opt = getattr(lib.optim, name)(ps, lr=lib.tensor([[0.05]]))
            runs.append(train(lib, opt, ps, 4)[-1])
        assert_same(*runs, rtol=2e-5, atol=2e-6)


def _save(lib, obj):
    buf = io.BytesIO()
    lib.save(obj, buf)
    buf.seek(0)
    return buf


def _interop(first, second, name, kwargs, group2, steps=(4, 4)):
    """Train ``steps[0]`` in ``first``, move params and the optimizer's state_dict through a
    checkpoint file into ``second``, then train both libraries on: the run continued in
    ``second`` must match a run that stayed in ``first``."""
    pa = make_params(first)
    oa = build(first, name, kwargs, pa, group2)
    train(first, oa, pa, steps[0])
    loaded = second.load(_save(first, {"params": [p.detach() for p in pa],
                                       "opt": oa.state_dict()}))
    pb = [second.tensor(to_numpy(p), requires_grad=True) for p in loaded["params"]]
    ob = build(second, name, kwargs, pb, group2)
    ob.load_state_dict(loaded["opt"])
    sa, sb = oa.state_dict(), ob.state_dict()
    assert [list(g) for g in sa["param_groups"]] == [list(g) for g in sb["param_groups"]]
    assert {k: list(v) for k, v in sa["state"].items()} == \
        {k: list(v) for k, v in sb["state"].items()}
    ta, tb = train(first, oa, pa, steps[1]), train(second, ob, pb, steps[1])
    for k, (a, b) in enumerate(zip(ta, tb)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(to_numpy(x), to_numpy(y), rtol=2e-5, atol=2e-6,
                                       err_msg=f"step {k}")


INTEROP = [CASES[2], CASES[6], CASES[9], CASES[13]]


@pytest.mark.parametrize("name,kwargs,group2", INTEROP, ids=[c[0] for c in INTEROP])
@pytest.mark.parametrize("direction", ["ember_to_torch", "torch_to_ember"])
def test_state_dict_moves_between_libraries(name, kwargs, group2, direction):
    libs = (ember, torch) if direction == "ember_to_torch" else (torch, ember)
    _interop(*libs, name, kwargs, group2)


@pytest.mark.parametrize("name,kwargs,group2", INTEROP, ids=[c[0] for c in INTEROP])
def test_state_dict_round_trip_within_ember(name, kwargs, group2):
    _interop(ember, ember, name, kwargs, group2)


def test_state_dict_layout_matches_torch():
    """The same param_groups (keys, order, values) and per-parameter state keys."""
    for name, kwargs, group2 in CASES:
        if kwargs.get("lr") == "tensor":
            continue
        sds = []
        for lib in (ember, torch):
            ps = make_params(lib)
            opt = build(lib, name, kwargs, ps, group2)
            train(lib, opt, ps, 1)
            sds.append(opt.state_dict())
        e, t = sds
        assert e["param_groups"] == t["param_groups"], name
        assert [list(g) for g in e["param_groups"]] == [list(g) for g in t["param_groups"]]
        assert {k: list(v) for k, v in e["state"].items()} == \
            {k: list(v) for k, v in t["state"].items()}, name


def test_old_checkpoint_with_float_steps_loads():
    """A state_dict whose ``step`` (and ASGD's ``eta``/``mu``) are Python floats, as old
    PyTorch versions wrote them, becomes tensor state on load, and training goes on alike."""
    for name, kwargs in (("Adadelta", {}), ("ASGD", dict(lr=0.05, t0=1)), ("Rprop", {}),
                         ("Adafactor", {})):
        runs = []
        for lib in (ember, torch):
            ps = make_params(lib)
            opt = getattr(lib.optim, name)(ps, **kwargs)
            train(lib, opt, ps, 2)
            sd = opt.state_dict()
            for s in sd["state"].values():
                for k in ("step", "eta", "mu"):
                    if k in s:
                        s[k] = s[k].item()
            fresh = getattr(lib.optim, name)(ps, **kwargs)
            fresh.load_state_dict(sd)
            assert all(isinstance(s["step"], lib.Tensor) for s in fresh.state.values())
            runs.append(train(lib, fresh, ps, 3)[-1])
        assert_same(*runs, rtol=2e-5, atol=2e-6, path=name)


BAD = [
    ("Adadelta", dict(lr=-1.0)), ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(rho=-0.1)),
    ("Adadelta", dict(eps=-1e-3)), ("Adadelta", dict(weight_decay=-0.5)),
    ("ASGD", dict(lr=-0.1)), ("ASGD", dict(weight_decay=-1.0)),
    ("Rprop", dict(lr=-0.1)), ("Rprop", dict(etas=(1.2, 0.5))), ("Rprop", dict(etas=(0.0, 1.2))),
    ("Rprop", dict(etas=(0.5, 1.0))),
    ("Adafactor", dict(lr=-0.1)), ("Adafactor", dict(beta2_decay=0.5)),
    ("Adafactor", dict(eps=(-1.0, 1e-3))), ("Adafactor", dict(eps=(None, -1e-3))),
    ("Adafactor", dict(d=0.5)), ("Adafactor", dict(weight_decay=-0.1)),
    ("LBFGS", dict(lr=-1.0)),
]


@pytest.mark.parametrize("name,kwargs", BAD, ids=[f"{n}-{list(k)[0]}-{i}" for i, (n, k) in
                                                  enumerate(BAD)])
def test_bad_hyperparameters(name, kwargs):
    with pytest.raises(Exception) as te:
        getattr(torch.optim, name)([torch.zeros(2, 2, requires_grad=True)], **kwargs)
    with pytest.raises(type(te.value)) as ee:
        getattr(ember.optim, name)([ember.zeros(2, 2, requires_grad=True)], **kwargs)
    assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("name", ["Adadelta", "ASGD", "Rprop", "Adafactor", "LBFGS"])
def test_tensor_lr_must_have_one_element(name):
    for lib in (ember, torch):
        with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
            getattr(lib.optim, name)([lib.zeros(2, requires_grad=True)], lr=lib.ones(2))


def test_adafactor_refuses_complex_params():
    for lib in (ember, torch):
        p = lib.zeros(2, dtype=lib.complex64, requires_grad=True)
        opt = lib.optim.Adafactor([p])
        p.grad = lib.ones(2, dtype=lib.complex64)
        with pytest.raises(RuntimeError, match="Adafactor does not support complex parameters"):
            opt.step()


@pytest.mark.parametrize("name", ["Adadelta", "ASGD", "Rprop"])
def test_complex_params_move_as_real_pairs(name):
    """A complex parameter is optimised as its real and imaginary parts, as in PyTorch."""
    z0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    runs = []
    for lib in (ember, torch):
        z = lib.tensor(z0, dtype=lib.complex64, requires_grad=True)
        opt = getattr(lib.optim, name)([z], lr=0.05)
        for _ in range(5):
            opt.zero_grad()
            (z.abs() ** 2 + (z * (1 + 2j)).real).sum().backward()
            opt.step()
        runs.append(to_numpy(z))
    np.testing.assert_allclose(runs[0], runs[1], rtol=2e-5, atol=2e-6)


# ---------------------------------------------------------------------- LBFGS
def rosenbrock(lib, dtype, steps, **kwargs):
    x = lib.tensor([-1.5, 2.0], dtype=getattr(lib, dtype), requires_grad=True)
    opt = lib.optim.LBFGS([x], **kwargs)

    def closure():
        opt.zero_grad()
        loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        loss.backward()
        return loss

    return opt, [x], closure


def steep(lib, dtype, steps, **kwargs):
    """Flat near the minimum, steep away from it: the line search extrapolates, exhausts its
    budget, zooms, and moves trials off the bracket's ends."""
    x = lib.tensor([1.3, -0.7, 2.0], dtype=getattr(lib, dtype), requires_grad=True)
    opt = lib.optim.LBFGS([x], **kwargs)

    def closure():
        opt.zero_grad()
        loss = (x ** 4).sum() + (-2 * x).exp().sum() + (x.abs() + 1e-3).sqrt().sum()
        loss.backward()
        return loss

    return opt, [x], closure


LSQ = [rng.standard_normal((20, 5)), rng.standard_normal((20, 2)),
       rng.standard_normal((2, 5)) * 0.1, rng.standard_normal(2) * 0.1]


def least_squares(lib, dtype, steps, **kwargs):
    """A small linear model with a 0-dim output scale and one parameter the loss never uses."""
    dt = getattr(lib, dtype)
    X, Y = lib.tensor(LSQ[0], dtype=dt), lib.tensor(LSQ[1], dtype=dt)
    w = lib.tensor(LSQ[2], dtype=dt, requires_grad=True)
    b = lib.tensor(LSQ[3], dtype=dt, requires_grad=True)
    s = lib.tensor(0.8, dtype=dt, requires_grad=True)
    unused = lib.zeros(3, dtype=dt, requires_grad=True)
    params = [w, b, s, unused]
    opt = lib.optim.LBFGS(params, **kwargs)

    def closure():
        opt.zero_grad()
        loss = ((s * (X @ w.T) + b - Y) ** 2).mean() + 0.01 * (w ** 4).sum() + \
            0.1 * (s - 1) ** 2
        loss.backward()
        return loss

    return opt, params, closure


def lbfgs_run(lib, problem, dtype, steps, **kwargs):
    opt, params, closure = problem(lib, dtype, steps, **kwargs)
    traj, losses = [], []
    for _ in range(steps):
        losses.append(float(opt.step(closure).detach()))
        traj.append([p.detach().clone() for p in params])
    return opt, traj, losses


LBFGS_CASES = [
    (rosenbrock, dict(line_search_fn="strong_wolfe")),
    (rosenbrock, dict(line_search_fn="strong_wolfe", history_size=3, max_iter=7)),
    (rosenbrock, dict(lr=0.5, history_size=2)),
    (rosenbrock, dict(lr=0.1, max_iter=5, history_size=3)),
    (rosenbrock, dict(line_search_fn="strong_wolfe", max_iter=30, max_eval=12,
                      tolerance_change=1e-12)),
    (rosenbrock, dict(line_search_fn="strong_wolfe", lr=1e-3, max_eval=4, max_iter=3)),
    (rosenbrock, dict(line_search_fn="strong_wolfe", lr=30)),
    (steep, dict(line_search_fn="strong_wolfe", lr=0.05)),
    (steep, dict(line_search_fn="strong_wolfe", lr=5, history_size=4)),
    (least_squares, dict()),
    (least_squares, dict(line_search_fn="strong_wolfe")),
    (least_squares, dict(line_search_fn="strong_wolfe", history_size=2, max_iter=6)),
    (least_squares, dict(lr=0.3, history_size=3, tolerance_grad=1e-5)),
]


@pytest.mark.parametrize("problem,kwargs", LBFGS_CASES,
                         ids=[f"{p.__name__}-{i}" for i, (p, _) in enumerate(LBFGS_CASES)])
def test_lbfgs_iterates_match_torch(problem, kwargs):
    """Six ``step(closure)`` calls in float64: the same iterates and losses after each, the
    same number of closure evaluations and iterations, the same state keys in the same order
    (with ``t`` and ``H_diag`` of the same kinds: float or tensor)."""
    oe, te, le = lbfgs_run(ember, problem, "float64", 6, **kwargs)
    ot, tt, lt = lbfgs_run(torch, problem, "float64", 6, **kwargs)
    for k, (a, b) in enumerate(zip(te, tt)):
        assert_same(a, b, path=f"step {k}", rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(le, lt, rtol=1e-6, atol=1e-12)
    se, st = oe.state[oe.param_groups[0]["params"][0]], ot.state[ot.param_groups[0]["params"][0]]
    assert list(se) == list(st) == ["func_evals", "n_iter", "al", "d", "t", "old_dirs",
                                    "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss"]
    assert (se["func_evals"], se["n_iter"]) == (st["func_evals"], st["n_iter"])
    assert len(se["old_dirs"]) == len(st["old_dirs"]) <= kwargs.get("history_size", 100)
    if "history_size" in kwargs:  # the history filled up and wrapped
        assert len(se["old_dirs"]) == kwargs["history_size"] < se["n_iter"] - 1
    assert len(se["al"]) == len(st["al"])
    for key in ("t", "H_diag", "prev_loss"):
        assert isinstance(se[key], ember.Tensor) == isinstance(st[key], torch.Tensor), key
    assert_same(se["d"], st["d"], rtol=1e-3, atol=1e-9)


@pytest.mark.parametrize("kwargs", [dict(), dict(lr=0.3, max_iter=5, history_size=3)])
def test_lbfgs_float32(kwargs):
    """In float32 LBFGS's iterates hang on 1-ulp differences in its dot products (its line
    tests and curvature pairs branch on them), which a BLAS or a CPU's vector width decide:
    on an SSE-only CPU ember's and torch's iterates part by ~1e-3 after 20 inner iterations.
    So float32 is held to the objective (each step's loss within 1e-3 of torch's, relative to
    the starting loss); the exact algorithm is checked in float64 above."""
    _, _, le = lbfgs_run(ember, least_squares, "float32", 4, **kwargs)
    _, _, lt = lbfgs_run(torch, least_squares, "float32", 4, **kwargs)
    scale = max(abs(lt[0]), 1e-30)
    for k, (a, b) in enumerate(zip(le, lt)):
        assert abs(a - b) <= 1e-3 * scale, (k, a, b)


@pytest.mark.parametrize("direction", ["ember_to_torch", "torch_to_ember"])
@pytest.mark.parametrize("kwargs", [dict(line_search_fn="strong_wolfe", history_size=3),
                                    dict(lr=0.5, history_size=2)], ids=["wolfe", "fixed"])
def test_lbfgs_state_dict_moves_between_libraries(direction, kwargs):
    """Two steps in one library, its params and LBFGS state through a checkpoint file into the
    other (lists of tensors, None entries of ``al``, float ``prev_loss``), three more steps:
    the same iterates as staying put."""
    first, second = (ember, torch) if direction == "ember_to_torch" else (torch, ember)
    oa, pa, ca = rosenbrock(first, "float64", 0, **kwargs)
    for _ in range(2):
        oa.step(ca)
    loaded = second.load(_save(first, {"x": pa[0].detach(), "opt": oa.state_dict()}))
    ob, pb, cb = rosenbrock(second, "float64", 0, **kwargs)
    with second.no_grad():
        pb[0].copy_(second.tensor(to_numpy(loaded["x"])))
    ob.load_state_dict(loaded["opt"])
    assert list(ob.state[pb[0]]) == list(oa.state[pa[0]])
    for _ in range(3):
        oa.step(ca)
        ob.step(cb)
        np.testing.assert_allclose(to_numpy(pa[0]), to_numpy(pb[0]), rtol=1e-6, atol=1e-9)
    assert ob.state[pb[0]]["func_evals"] == oa.state[pa[0]]["func_evals"]


def test_lbfgs_errors_and_closure_grad_mode():
    for lib in (ember, torch):
        a, b = lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match=r"LBFGS doesn't support per-parameter options "
                                             r"\(parameter groups\)"):
            lib.optim.LBFGS([{"params": [a]}, {"params": [b]}])
        opt = lib.optim.LBFGS([a], line_search_fn="backtracking")

        def closure():
            opt.zero_grad()
            loss = ((a - 1) ** 2).sum()
            loss.backward()
            return loss

        with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
            opt.step(closure)
        opt = lib.optim.LBFGS([a], max_iter=3)
        with lib.no_grad():  # the closure still runs with grad enabled
            loss = opt.step(closure)
        assert float(loss.detach()) == 2.0 and opt.state[a]["func_evals"] == 3
        assert opt.param_groups[0]["max_eval"] == 3


@pytest.mark.parametrize("name", ["Adadelta", "ASGD", "Rprop", "Adafactor", "LBFGS"])
def test_signature_and_flag_keywords_match_torch(name):
    """The constructor's parameters (names, kinds, defaults) are PyTorch's, and the
    foreach/maximize/capturable/differentiable flags it takes land in the param groups."""
    import inspect

    def sig(cls):
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]

    assert sig(getattr(ember.optim, name)) == sig(getattr(torch.optim, name))
    flags = [k for k in ("foreach", "maximize", "capturable", "differentiable")
             if k in inspect.signature(getattr(torch.optim, name)).parameters]
    groups = []
    for lib in (ember, torch):
        opt = getattr(lib.optim, name)([lib.zeros(2, requires_grad=True)],
                                       **{k: True for k in flags})
        groups.append(opt.param_groups[0])
    assert {k: v for k, v in groups[0].items() if k != "params"} == \
        {k: v for k, v in groups[1].items() if k != "params"}
