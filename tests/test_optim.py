"""Optimizers and schedulers: the same parameters and gradients give the same trajectory as
PyTorch, step after step; state_dict round trips mid-run; bad hyperparameters raise alike."""

import copy

import numpy as np
import pytest
import torch

import ember
from oracle import assert_same

rng = np.random.default_rng(0)
P0 = [rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((3, 5))]
C = [rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((3, 5))]


def make_params(lib, dtype="float32"):
    return [lib.tensor(p, dtype=getattr(lib, dtype), requires_grad=True) for p in P0]


def loss_fn(lib, params):
    cs = [lib.tensor(c, dtype=params[0].dtype) for c in C]
    total = 0
    for p, c in zip(params, cs):
        total = total + ((p - c) ** 2 * (1 + c.abs())).sum() + (p * 3).sin().sum()
    return total


OPTIMIZERS = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, maximize=True)),
    ("Adam", dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.5, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.01)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
]


def run(lib, name, kwargs, steps, dtype="float32", tensor_hypers=False):
    params = make_params(lib, dtype)
    kw = dict(kwargs)
    if tensor_hypers:
        kw["lr"] = lib.tensor(kw["lr"])
        kw["betas"] = (lib.tensor(0.9), lib.tensor(0.999))
    opt = getattr(lib.optim, name)(params, **kw)
    traj = []
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(lib, params).backward()
        opt.step()
        traj.append([p.detach().clone() for p in params])
    return params, opt, traj


@pytest.mark.parametrize("name,kwargs", OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in
                                                         enumerate(OPTIMIZERS)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_trajectory_matches_torch(name, kwargs, dtype):
    _, _, te = run(ember, name, kwargs, 12, dtype)
    _, _, tt = run(torch, name, kwargs, 12, dtype)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    for k, (a, b) in enumerate(zip(te, tt)):
        assert_same(a, b, path=f"step {k}", **tol)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_tensor_lr_and_betas(name):
    _, _, te = run(ember, name, dict(lr=0.01), 6, tensor_hypers=True)
    _, _, tt = run(torch, name, dict(lr=0.01), 6, tensor_hypers=True)
    assert_same(te[-1], tt[-1], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name,kwargs", [OPTIMIZERS[1], OPTIMIZERS[5], OPTIMIZERS[11],
                                         OPTIMIZERS[13], OPTIMIZERS[16], OPTIMIZERS[18]],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_state_dict_round_trip_mid_run(name, kwargs):
    """Stop after 5 steps, rebuild the optimizer from its state_dict, continue: same path."""
    params, opt, _ = run(ember, name, kwargs, 5)
    sd = copy.deepcopy(opt.state_dict())
    assert sorted(sd) == ["param_groups", "state"] and sd["param_groups"][0]["params"] == [0, 1,
                                                                                          2]
    fresh = getattr(ember.optim, name)(params, **kwargs)
    fresh.load_state_dict(sd)
    tparams, topt, _ = run(torch, name, kwargs, 5)
    for _ in range(5):
        for o, ps, lib in ((fresh, params, ember), (topt, tparams, torch)):
            o.zero_grad()
            loss_fn(lib, ps).backward()
            o.step()
    assert_same([p.detach() for p in params], [p.detach() for p in tparams], rtol=2e-5,
                atol=2e-6)


def test_state_dict_layout_matches_torch_with_names():
    def sd(lib):
        params = make_params(lib)
        opt = lib.optim.AdamW([("a", params[0]), ("b", params[1]), ("c", params[2])], lr=0.01)
        loss_fn(lib, params).backward()
        opt.step()
        return opt.state_dict()

    e, t = sd(ember), sd(torch)
    assert e["param_groups"][0].keys() == t["param_groups"][0].keys()
    assert e["param_groups"][0]["param_names"] == ["a", "b", "c"]
    assert e["state"].keys() == t["state"].keys()
    for k in t["state"]:
        assert e["state"][k].keys() == t["state"][k].keys()
        assert_same(e["state"][k]["step"], t["state"][k]["step"])


def test_param_groups_and_add_param_group():
    def prog(lib):
        a, b, c = make_params(lib)
        opt = lib.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.5)
        opt.add_param_group({"params": c, "momentum": 0.0})
        for _ in range(3):
            opt.zero_grad()
            loss_fn(lib, [a, b, c]).backward()
            opt.step()
        return [a.detach(), b.detach(), c.detach()], [g["lr"] for g in opt.param_groups]

    assert_same(prog(ember), prog(torch), rtol=1e-5, atol=1e-6)


def test_closure_and_zero_grad_modes():
    params = make_params(ember)
    opt = ember.optim.SGD(params, lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = loss_fn(ember, params)
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert calls == [1] and isinstance(loss, ember.Tensor)
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in params)
    opt.zero_grad()
    assert all(p.grad is None for p in params)


def test_step_hooks():
    params = make_params(ember)
    opt = ember.optim.SGD(params, lr=0.1)
    seen = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: seen.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: seen.append("post"))
    loss_fn(ember, params).backward()
    opt.step()
    h1.remove()
    opt.step()
    assert seen == ["pre", "post", "post"]


def test_muon_matches_torch():
    def prog(lib):
        w = lib.tensor(P0[0], dtype=lib.float32, requires_grad=True)
        v = lib.tensor(P0[2], dtype=lib.float32, requires_grad=True)
        opt = lib.optim.Muon([w, v], lr=0.02, adjust_lr_fn="match_rms_adamw")
        out = []
        for _ in range(6):
            opt.zero_grad()
            loss_fn(lib, [w, lib.tensor(P0[1], dtype=lib.float32), v]).backward()
            opt.step()
            out.append((w.detach().clone(), v.detach().clone()))
        return out

    assert_same(prog(ember), prog(torch), rtol=2e-2, atol=2e-3)


BAD = [
    ("SGD", dict(lr=-1.0)), ("SGD", dict(lr=0.1, momentum=-0.5)),
    ("SGD", dict(lr=0.1, nesterov=True)), ("Adam", dict(betas=(1.0, 0.9))),
    ("Adam", dict(eps=-1.0)), ("Adam", dict(weight_decay=-1.0)),
    ("AdamW", dict(lr=-0.1)), ("RMSprop", dict(alpha=-0.1)), ("Adagrad", dict(lr_decay=-1.0)),
    ("Muon", dict(adjust_lr_fn="foo")),
]


@pytest.mark.parametrize("name,kwargs", BAD, ids=[f"{n}-{list(k)[0]}" for n, k in BAD])
def test_bad_hyperparameters(name, kwargs):
    with pytest.raises(Exception) as te:
        getattr(torch.optim, name)([torch.zeros(2, 2, requires_grad=True)], **kwargs)
    with pytest.raises(type(te.value)) as ee:
        getattr(ember.optim, name)([ember.zeros(2, 2, requires_grad=True)], **kwargs)
    assert str(ee.value).split(":")[0] == str(te.value).split(":")[0]


def test_bad_params():
    for lib in (ember, torch):
        with pytest.raises(TypeError):
            lib.optim.SGD(lib.zeros(2, requires_grad=True), lr=0.1)
        with pytest.raises(ValueError, match="empty parameter list"):
            lib.optim.SGD([], lr=0.1)
        with pytest.raises(ValueError, match="non-leaf"):
            lib.optim.SGD([lib.zeros(2, requires_grad=True) * 2], lr=0.1)
        with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
            lib.optim.Muon([lib.zeros(3, requires_grad=True)])
        p = lib.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match="more than one parameter group"):
            lib.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


# ---------------------------------------------------------------------- schedulers
SCHEDULERS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3)),
    ("ConstantLR", dict(factor=0.25, total_iters=4)),
    ("LinearLR", dict(start_factor=0.2, end_factor=0.9, total_iters=6)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts", dict(T_0=4, T_mult=2, eta_min=0.01)),
    ("PolynomialLR", dict(total_iters=8, power=2.0)),
    ("LambdaLR", dict(lr_lambda=lambda e: 0.95 ** e)),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.9)),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=20)),
    ("OneCycleLR", dict(max_lr=[1.0, 0.5], total_steps=20, three_phase=True,
                        anneal_strategy="linear")),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=4,
                      mode="triangular2")),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3, mode="exp_range",
                      gamma=0.9)),
]


def _lr_path(lib, name, kwargs, steps=18, optimizer="SGD"):
    params = make_params(lib)
    opt = getattr(lib.optim, optimizer)([{"params": params[:2]}, {"params": params[2:]}],
                                        lr=0.1, momentum=0.9)
    sched = getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)
    path = [sched.get_last_lr()]
    moms = [[g["momentum"] for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()
        sched.step()
        path.append(sched.get_last_lr())
        moms.append([g["momentum"] for g in opt.param_groups])
    return path, moms


@pytest.mark.parametrize("name,kwargs", SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in
                                                          enumerate(SCHEDULERS)])
def test_scheduler_matches_torch(name, kwargs):
    steps = 19 if name == "OneCycleLR" else 18
    pe, me = _lr_path(ember, name, kwargs, steps)
    pt, mt = _lr_path(torch, name, kwargs, steps)
    np.testing.assert_allclose(pe, pt, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(me, mt, rtol=1e-12, atol=1e-15)


def _compose(lib, kind):
    params = make_params(lib)
    opt = lib.optim.SGD(params, lr=0.1)
    S = lib.optim.lr_scheduler
    if kind == "sequential":
        sched = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3),
                                     S.ExponentialLR(opt, gamma=0.9)], milestones=[3])
    elif kind == "chained":
        sched = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=4),
                                    S.ExponentialLR(opt, gamma=0.9)])
    else:
        sched = S.ReduceLROnPlateau(opt, patience=1, factor=0.5, cooldown=1)
    path = []
    metrics = [5, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 2]
    for m in metrics:
        opt.step()
        sched.step(m) if kind == "plateau" else sched.step()
        path.append(sched.get_last_lr())
    return path


@pytest.mark.parametrize("kind", ["sequential", "chained", "plateau"])
def test_composite_schedulers(kind):
    np.testing.assert_allclose(_compose(ember, kind), _compose(torch, kind), rtol=1e-12)


def test_scheduler_state_dict_resume():
    def prog(lib):
        params = make_params(lib)
        opt = lib.optim.SGD(params, lr=0.1)
        s = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        for _ in range(4):
            opt.step()
            s.step()
        sd = s.state_dict()
        s2 = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        s2.load_state_dict(sd)
        for _ in range(3):
            opt.step()
            s2.step()
        return s2.get_last_lr(), s2.last_epoch

    assert_same(prog(ember), prog(torch))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("name,kw", [("AdamW", {}), ("AdamW", {"maximize": True}),
                                     ("Adam", {"weight_decay": 0.1}), ("Adam", {}),
                                     ("AdamW", {"amsgrad": True})])
def test_adam_one_pass_kernel_gives_the_numpy_paths_bits(name, kw, dtype, monkeypatch):
    """Adam's C kernel (native.adam: one pass over each p, g, m, v, all parameters in one
    call) does the numpy path's arithmetic operation for operation: five steps give the same
    bits either way (amsgrad keeps the numpy path)."""
    from ember.backends import native
    calls = []
    real = native.adam
    monkeypatch.setattr(native, "adam", lambda *a: calls.append(len(a[0])) or real(*a))
    runs = []
    for env in ("0", "1"):
        monkeypatch.setenv("EMBER_EAGER_KERNELS", env)
        ember.manual_seed(0)
        ps = [ember.randn(300, 70, dtype=dtype).requires_grad_(),
              ember.randn(50, dtype=dtype).requires_grad_()]
        opt = getattr(ember.optim, name)(ps, lr=1e-2, **kw)
        for _ in range(5):
            for p in ps:
                p.grad = ember.randn(*p.shape, dtype=dtype)
            opt.step()
        runs.append([t.numpy().copy() for p in ps for t in (p.detach(), *(
            s for s in opt.state[p].values() if isinstance(s, ember.Tensor) and s.ndim))])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    # with the fast path on, one call per step for both parameters; amsgrad keeps numpy
    assert calls == ([] if kw.get("amsgrad") else [2] * 5), calls
