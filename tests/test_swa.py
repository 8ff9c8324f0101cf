"""optim.swa_utils against PyTorch: AveragedModel (SWA and EMA, per-tensor and list averaging
functions, with and without buffers), SWALR's learning rates epoch by epoch, update_bn's
recomputed BatchNorm statistics, and the same errors."""

import warnings

import numpy as np
import pytest
import torch

import ember
from oracle import to_numpy

rng = np.random.default_rng(3)
BATCHES = [rng.standard_normal((8, 4)) for _ in range(6)]
IMAGES = [rng.standard_normal((4, 2, 5, 5)) for _ in range(4)]


def mlp(lib, dtype="float32"):
    model = lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.BatchNorm1d(6), lib.nn.ReLU(),
                              lib.nn.Linear(6, 1))
    with lib.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(lib.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape))))
    return model.to(getattr(lib, dtype))


AVERAGERS = {
    "swa": lambda sw: {},
    "ema_multi": lambda sw: {"multi_avg_fn": sw.get_ema_multi_avg_fn(0.9)},
    "ema_default_decay": lambda sw: {"multi_avg_fn": sw.get_ema_multi_avg_fn()},
    "ema_fn": lambda sw: {"avg_fn": sw.get_ema_avg_fn(0.8)},
    "swa_fn": lambda sw: {"avg_fn": sw.get_swa_avg_fn()},
    "swa_multi": lambda sw: {"multi_avg_fn": sw.get_swa_multi_avg_fn()},
    "custom": lambda sw: {"avg_fn": lambda a, c, n: a * 0.5 + c * 0.5 + n * 0.0},
}


def averaged_run(lib, kind, use_buffers, dtype):
    """Train an MLP with BatchNorm; fold the weights into an AveragedModel after each step.
    Returns the averaged model's state_dict after each update."""
    model = mlp(lib, dtype)
    sw = lib.optim.swa_utils
    avg = sw.AveragedModel(model, **AVERAGERS[kind](sw), use_buffers=use_buffers)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    out = []
    for x in BATCHES:
        opt.zero_grad()
        model(lib.tensor(x, dtype=getattr(lib, dtype))).pow(2).mean().backward()
        opt.step()
        avg.update_parameters(model)
        out.append({k: to_numpy(v).copy() for k, v in avg.state_dict().items()})
    return avg, out


def _compare_states(a, b, rtol, atol):
    for k, (se, st) in enumerate(zip(a, b)):
        assert list(se) == list(st)
        for key in st:
            assert se[key].dtype == st[key].dtype, key
            np.testing.assert_allclose(se[key], st[key], rtol=rtol, atol=atol,
                                       err_msg=f"update {k}: {key}")


@pytest.mark.parametrize("kind", list(AVERAGERS))
@pytest.mark.parametrize("use_buffers", [False, True], ids=["params", "buffers"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_averaged_model_matches_torch(kind, use_buffers, dtype):
    if kind == "swa_multi" and use_buffers:
        # the list SWA average divides the integer num_batches_tracked with addcdiv, which
        # PyTorch refuses: ember raises the same error
        for lib in (ember, torch):
            with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer "
                                                   "supported"):
                averaged_run(lib, kind, use_buffers, dtype)
        return
    (ae, se), (at, st) = averaged_run(ember, kind, use_buffers, dtype), \
        averaged_run(torch, kind, use_buffers, dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    _compare_states(se, st, **tol)
    assert int(ae.n_averaged) == int(at.n_averaged) == len(BATCHES)
    x = BATCHES[0]
    ae.eval(), at.eval()
    np.testing.assert_allclose(to_numpy(ae(ember.tensor(x, dtype=getattr(ember, dtype)))),
                               to_numpy(at(torch.tensor(x, dtype=getattr(torch, dtype)))),
                               **tol)


def test_averaged_model_buffers_follow_the_model_without_use_buffers():
    model = mlp(ember)
    avg = ember.optim.swa_utils.AveragedModel(model)
    model(ember.tensor(BATCHES[0], dtype=ember.float32))
    avg.update_parameters(model)
    bn, bn_avg = model[1], avg.module[1]
    np.testing.assert_array_equal(to_numpy(bn.running_mean), to_numpy(bn_avg.running_mean))
    assert int(bn_avg.num_batches_tracked) == 1
    assert avg.module is not model and avg.module[0].weight is not model[0].weight


def test_averaged_model_errors():
    for lib in (ember, torch):
        sw = lib.optim.swa_utils
        with pytest.raises(AssertionError,
                           match="Only one of avg_fn and multi_avg_fn should be provided"):
            sw.AveragedModel(mlp(lib), avg_fn=sw.get_swa_avg_fn(),
                             multi_avg_fn=sw.get_swa_multi_avg_fn())
        for make in (sw.get_ema_avg_fn, sw.get_ema_multi_avg_fn):
            with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided. Please "
                                                 r"provide a value in \[0,1\] range."):
                make(1.5)


# ---------------------------------------------------------------------- update_bn
def convnet(lib):
    model = lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.BatchNorm2d(3, momentum=0.3),
                              lib.nn.ReLU(), lib.nn.Flatten(), lib.nn.Linear(27, 4),
                              lib.nn.BatchNorm1d(4))
    with lib.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(lib.tensor(np.random.default_rng(10 + i).standard_normal(tuple(p.shape))))
    return model


@pytest.mark.parametrize("loader_kind", ["tensors", "pairs", "averaged"])
def test_update_bn_matches_torch(loader_kind):
    """Running stats recomputed from the loader (stale stats and batch counts reset first),
    BatchNorm momenta and the model's eval mode restored."""
    results = []
    for lib in (ember, torch):
        model = convnet(lib)
        model(lib.tensor(IMAGES[0] * 3 + 1, dtype=lib.float32))  # stale statistics
        model.eval()
        xs = [lib.tensor(x, dtype=lib.float32) for x in IMAGES]
        loader = [(x, lib.zeros(4)) for x in xs] if loader_kind == "pairs" else xs
        target = model
        if loader_kind == "averaged":
            target = lib.optim.swa_utils.AveragedModel(model)
            target.update_parameters(model)
            target.eval()
        lib.optim.swa_utils.update_bn(loader, target)
        assert not target.training
        bns = [m for m in target.modules() if isinstance(m, (lib.nn.BatchNorm1d,
                                                             lib.nn.BatchNorm2d))]
        assert [m.momentum for m in bns] == [0.3, 0.1]
        results.append([(to_numpy(m.running_mean), to_numpy(m.running_var),
                         int(m.num_batches_tracked)) for m in bns])
    for (me, ve, ne), (mt, vt, nt) in zip(*results):
        np.testing.assert_allclose(me, mt, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ve, vt, rtol=1e-5, atol=1e-6)
        assert ne == nt == len(IMAGES)


def test_update_bn_device_argument_and_no_batchnorm():
    model = convnet(ember)
    model.train()
    ember.optim.swa_utils.update_bn([ember.tensor(x, dtype=ember.float32) for x in IMAGES],
                                    model, device="cpu")
    assert model.training and int(model[1].num_batches_tracked) == len(IMAGES)
    plain = ember.nn.Linear(4, 2)
    before = to_numpy(plain.weight).copy()
    ember.optim.swa_utils.update_bn([ember.ones(3, 4)], plain)  # nothing to update
    np.testing.assert_array_equal(to_numpy(plain.weight), before)


# ---------------------------------------------------------------------- SWALR
SWALR_CASES = [
    dict(swa_lr=0.05),
    dict(swa_lr=[0.01, 0.2], anneal_epochs=4, anneal_strategy="linear"),
    dict(swa_lr=0.05, anneal_epochs=0),
    dict(swa_lr=0.3, anneal_epochs=1, anneal_strategy="cos"),
    dict(swa_lr=(0.02, 0.04), anneal_epochs=7),
]


def swalr_path(lib, kwargs, before=0):
    """Two param groups; a cosine schedule for ``before`` epochs, then SWALR (built at the
    start, as in the usual recipe)."""
    ps = [lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)]
    opt = lib.optim.SGD([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5}], lr=0.1)
    cosine = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    swa = lib.optim.swa_utils.SWALR(opt, **kwargs)
    path = [[g["lr"] for g in opt.param_groups]]
    for epoch in range(16):
        opt.step()
        (cosine if epoch < before else swa).step()
        path.append([g["lr"] for g in opt.param_groups])
    return path, swa


@pytest.mark.parametrize("kwargs", SWALR_CASES, ids=[str(i) for i in range(len(SWALR_CASES))])
@pytest.mark.parametrize("before", [0, 5])
def test_swalr_matches_torch(kwargs, before):
    pe, se = swalr_path(ember, kwargs, before)
    pt, st = swalr_path(torch, kwargs, before)
    np.testing.assert_allclose(pe, pt, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(se.get_last_lr(), st.get_last_lr(), rtol=1e-12)
    assert [g["swa_lr"] for g in se.optimizer.param_groups] == \
        [g["swa_lr"] for g in st.optimizer.param_groups]


def test_swalr_state_dict_resume():
    def prog(lib):
        _, s = swalr_path(lib, dict(swa_lr=0.05, anneal_epochs=20, anneal_strategy="linear"))
        sd = s.state_dict()
        assert "optimizer" not in sd and "anneal_func" not in sd
        s2 = lib.optim.swa_utils.SWALR(s.optimizer, swa_lr=0.05, anneal_strategy="cos")
        s2.load_state_dict(sd)
        out = []
        for _ in range(6):
            s2.optimizer.step()
            s2.step()
            out.append(s2.get_last_lr())
        return out, s2._anneal_strategy

    (pe, ke), (pt, kt) = prog(ember), prog(torch)
    np.testing.assert_allclose(pe, pt, rtol=1e-12)
    assert ke == kt == "linear"


def test_swalr_errors_and_warning():
    for lib in (ember, torch):
        opt = lib.optim.SGD([{"params": [lib.zeros(2, requires_grad=True)]},
                             {"params": [lib.zeros(2, requires_grad=True)]}], lr=0.1)
        SWALR = lib.optim.swa_utils.SWALR
        with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or "
                                             "'linear', instead got exp"):
            SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
        for bad in (-1, 2.0):
            with pytest.raises(ValueError, match=f"anneal_epochs must be equal or greater than "
                                                 f"0, got {bad}"):
                SWALR(opt, swa_lr=0.1, anneal_epochs=bad)
        with pytest.raises(ValueError, match=r"swa_lr must have the same length as "
                                             r"optimizer.param_groups. swa_lr has 3 values, "
                                             r"param_groups has 2."):
            SWALR(opt, swa_lr=[0.1, 0.2, 0.3])
        s = SWALR(opt, swa_lr=0.1)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s.get_lr()
        assert any("please use `get_last_lr()`" in str(x.message) for x in w)
