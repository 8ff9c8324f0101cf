"""The Module base against torch: registration, traversal with shared and tied parameters,
state_dict / load_state_dict, hooks, apply, dtype moves, repr, grads, submodule lookup."""

from __future__ import annotations

import copy

import pytest
import torch
from nn_compare import copy_state, from_torch
from oracle import assert_same, to_torch

import ember


def build(lib):
    """The same small model in either library: tied weights, a shared submodule, a
    non-persistent buffer, an integer buffer and a direct parameter."""

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = lib.nn.Embedding(10, 4)
            self.block = lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.ReLU(),
                                           lib.nn.BatchNorm1d(4))
            self.head = lib.nn.Linear(4, 10, bias=False)
            self.head.weight = self.emb.weight
            self.shared = self.block[0]
            self.register_buffer("steps", lib.zeros((), dtype=lib.int64))
            self.register_buffer("scratch", lib.ones(2), persistent=False)
            self.scale = lib.nn.Parameter(lib.ones(1))

        def forward(self, idx):
            return self.head(self.block(self.emb(idx)) * self.scale)

        def extra_repr(self):
            return "custom=1"

    torch.manual_seed(0)
    return Net()


def both():
    tm = build(torch)
    em = build(ember)
    copy_state(tm, em)
    return em, tm


def names(it):
    return [n for n, _ in it]


def test_traversal_matches_torch():
    em, tm = both()
    for fn in ("named_parameters", "named_buffers", "named_modules"):
        assert names(getattr(em, fn)()) == names(getattr(tm, fn)())
        assert names(getattr(em, fn)(remove_duplicate=False)) == \
            names(getattr(tm, fn)(remove_duplicate=False))
        assert names(getattr(em, fn)(prefix="m")) == names(getattr(tm, fn)(prefix="m"))
    for fn in ("named_parameters", "named_buffers"):
        assert names(getattr(em, fn)(recurse=False)) == names(getattr(tm, fn)(recurse=False))
    assert names(em.named_children()) == names(tm.named_children())
    assert len(list(em.parameters())) == len(list(tm.parameters())) == 6
    assert len(list(em.modules())) == len(list(tm.modules()))
    assert len(list(em.children())) == len(list(tm.children()))


def test_state_dict_keys_and_keep_vars():
    em, tm = both()
    assert list(em.state_dict()) == list(tm.state_dict())
    assert "scratch" not in em.state_dict()
    sd = em.state_dict()
    assert sd["emb.weight"] is not em.emb.weight and not sd["emb.weight"].requires_grad
    kv = em.state_dict(keep_vars=True)
    assert kv["emb.weight"] is em.emb.weight and kv["head.weight"] is em.emb.weight
    # the values share memory with the parameters
    sd["scale"].fill_(3.0)
    assert em.scale.item() == 3.0


def test_loaded_model_computes_like_torch():
    em, tm = both()
    em.double()
    tm.double()
    idx = ember.tensor([[1, 2, 3], [4, 5, 6]])
    out_t = tm(to_torch(idx).reshape(-1))
    out_e = em(idx.reshape(-1))
    assert_same(out_e, out_t)
    g = torch.randn(out_t.shape, dtype=torch.float64)
    out_e.backward(from_torch(g))
    out_t.backward(g)
    assert_same(em.emb.weight.grad, tm.emb.weight.grad)
    assert_same(em.block[2].running_mean, tm.block[2].running_mean)


def _err(fn):
    with pytest.raises(Exception) as e:
        fn()
    return e.value


def _same_error(fn, args_e, args_t):
    """``fn(*args_t)`` and ``fn(*args_e)`` raise the same exception type and message."""
    et, ee = _err(lambda: fn(*args_t)), _err(lambda: fn(*args_e))
    assert type(ee) is type(et)
    assert str(ee).replace("ember", "torch") == str(et)


def test_load_state_dict_errors_match_torch():
    em, tm = both()
    sd_t = tm.state_dict()
    sd_e = {k: from_torch(v) for k, v in sd_t.items()}
    for edit in ("missing", "unexpected", "both", "shape", "not a tensor"):
        t, e = dict(sd_t), dict(sd_e)
        if edit in ("missing", "both"):
            del t["block.0.bias"], e["block.0.bias"]
        if edit in ("unexpected", "both"):
            t["block.9.weight"], e["block.9.weight"] = torch.zeros(1), ember.zeros(1)
        if edit == "shape":
            t["head.weight"], e["head.weight"] = torch.zeros(3, 3), ember.zeros(3, 3)
        if edit == "not a tensor":
            t["scale"], e["scale"] = 1.0, 1.0
        _same_error(lambda m, sd: m.load_state_dict(sd), (em, e), (tm, t))
        if edit in ("missing", "unexpected", "both"):
            r_e, r_t = em.load_state_dict(e, strict=False), tm.load_state_dict(t, strict=False)
            assert r_e.missing_keys == r_t.missing_keys
            assert r_e.unexpected_keys == r_t.unexpected_keys
            assert repr(r_e) == repr(r_t)
    assert repr(em.load_state_dict(sd_e)) == repr(tm.load_state_dict(sd_t)) == \
        "<All keys matched successfully>"
    _same_error(lambda m: m.load_state_dict([1]), (em,), (tm,))


def test_load_state_dict_tied_and_assign():
    em, _ = both()
    sd = {k: v.clone() * 0 + 2.0 if v.is_floating_point() else v.clone()
          for k, v in em.state_dict().items()}
    em.load_state_dict(sd)
    assert em.head.weight is em.emb.weight and float(em.emb.weight.mean()) == 2.0
    new = {k: v.clone() for k, v in sd.items()}
    em.load_state_dict(new, assign=True)
    assert isinstance(em.scale, ember.nn.Parameter) and em.scale.requires_grad
    new["scale"].fill_(7.0)  # assign keeps the given storage
    assert em.scale.item() == 7.0
    assert em.block[2].running_var is new["block.2.running_var"]


def _hook_log(lib) -> list:
    log = []
    m = lib.nn.Linear(2, 2)
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    m.register_forward_pre_hook(lambda mod, args: log.append("pre-first"), prepend=True)
    m.register_forward_pre_hook(
        lambda mod, args, kwargs: log.append(("kw", sorted(kwargs))), with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: out + 1)
    m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("post", sorted(kwargs))),
                            with_kwargs=True)
    g = lib.nn.modules.module.register_module_forward_hook(
        lambda mod, args, out: log.append("global"))
    x = lib.ones(1, 2)
    with lib.no_grad():
        base = lib.nn.functional.linear(x * 2, m.weight, m.bias) + 1
        log.append(bool((m(x) == base).all()))
        h1.remove()
        log.append(bool((m(x) == base).all()))
    g.remove()
    m(x)
    return log


def test_hooks_order_and_effects():
    assert _hook_log(ember) == _hook_log(torch)


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_always_called_hook_sees_exception(lib):
    seen = []
    m = lib.nn.Linear(2, 2)
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(RuntimeError):
        m(lib.ones(1, 3))
    assert seen == [None]


def _state_hook_log(lib) -> list:
    log = []
    m = lib.nn.Sequential(lib.nn.Linear(2, 2))
    m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", prefix)))

    def post(mod, sd, prefix, local_metadata):
        sd["extra"] = 1
    m[0].register_state_dict_post_hook(post)
    sd = m.state_dict()
    log.append(sorted(sd))
    del sd["extra"]
    m.register_load_state_dict_post_hook(
        lambda mod, keys: log.append(("loaded", list(keys.missing_keys))))
    m.load_state_dict(sd)
    return log


def test_state_dict_and_load_hooks():
    assert _state_hook_log(ember) == _state_hook_log(torch)


def _apply_order(lib) -> list:
    order = []
    build(lib).apply(lambda mod: order.append(type(mod).__name__))
    return order


def test_apply_visits_children_first():
    assert _apply_order(ember) == _apply_order(torch)


@pytest.mark.parametrize("move", ["double", "half", "bfloat16", "float", "to64", "totensor"])
def test_dtype_moves(move):
    em, tm = both()
    p = em.emb.weight
    em(ember.tensor([1, 2])).sum().backward()
    g = p.grad

    def apply(m, lib):
        if move == "to64":
            return m.to(lib.float64)
        if move == "totensor":
            return m.to(lib.zeros(1, dtype=lib.float16))
        return getattr(m, move)()
    assert apply(em, ember) is em
    apply(tm, torch)
    assert [(k, str(v.dtype).split(".")[1]) for k, v in em.state_dict().items()] == \
        [(k, str(v.dtype).split(".")[1]) for k, v in tm.state_dict().items()]
    assert em.emb.weight is p and em.head.weight is p  # parameters keep their identity
    assert p.grad is g and p.grad.dtype is p.dtype
    assert em.scratch.dtype.name == str(tm.scratch.dtype).split(".")[1]
    _same_error(lambda m, dt: m.to(dt), (em, ember.int32), (tm, torch.int32))


def test_repr_with_extra_repr():
    em, tm = both()
    assert repr(em) == repr(tm)
    seq_e = ember.nn.Sequential(ember.nn.Conv2d(1, 2, 3), ember.nn.ModuleList(
        [ember.nn.ReLU(), ember.nn.ModuleDict({"a": ember.nn.Identity()})]))
    seq_t = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ModuleList(
        [torch.nn.ReLU(), torch.nn.ModuleDict({"a": torch.nn.Identity()})]))
    assert repr(seq_e) == repr(seq_t)


def test_requires_grad_and_zero_grad():
    em, _ = both()
    em(ember.tensor([1, 2])).sum().backward()
    assert all(p.grad is not None for p in em.parameters())
    em.zero_grad(set_to_none=False)
    assert all(not p.grad.numpy().any() for p in em.parameters())
    em.zero_grad()
    assert all(p.grad is None for p in em.parameters())
    assert em.requires_grad_(False) is em
    assert not any(p.requires_grad for p in em.parameters())
    out = em(ember.tensor([1, 2]))
    assert not out.requires_grad


def test_train_eval():
    em, tm = both()
    em.eval()
    assert all(not m.training for m in em.modules())
    em.train()
    assert all(m.training for m in em.modules())
    _same_error(lambda m: m.train("yes"), (em,), (tm,))


def test_get_submodule_parameter_buffer():
    em, tm = both()
    assert em.get_submodule("block.2") is em.block[2]
    assert em.get_submodule("") is em
    assert em.get_parameter("block.0.weight") is em.block[0].weight
    assert em.get_buffer("block.2.running_mean") is em.block[2].running_mean
    for method, targets in [("get_submodule", ("block.7", "block.0.weight.x", "nothing")),
                            ("get_parameter", ("block.0.nothing", "block.0.weight.x",
                                               "block.1.training", "block")),
                            ("get_buffer", ("block.2.nothing", "block.2.weight"))]:
        for target in targets:
            _same_error(lambda m, meth, t: getattr(m, meth)(t), (em, method, target),
                        (tm, method, target))


REGISTRATION_ERRORS = [
    lambda lib, m: m.register_parameter("w", lib.zeros(2)),
    lambda lib, m: m.register_parameter("a.b", None),
    lambda lib, m: m.register_parameter("", None),
    lambda lib, m: m.register_parameter(3, None),
    lambda lib, m: m.register_buffer("weight", lib.zeros(1)),
    lambda lib, m: m.register_buffer("b", [1]),
    lambda lib, m: m.add_module("x", 3),
    lambda lib, m: m.add_module("x.y", lib.nn.ReLU()),
    lambda lib, m: m.register_parameter("training", None),
    lambda lib, m: setattr(m, "weight", lib.zeros(2, 2)),
    lambda lib, m: setattr(m.__class__.__new__(m.__class__), "p", lib.nn.Parameter(lib.ones(1))),
    lambda lib, m: m.nothing,
    lambda lib, m: m.register_parameter("q", lib.nn.Parameter(lib.ones(1)) * 2),
]


@pytest.mark.parametrize("k", range(len(REGISTRATION_ERRORS)))
def test_registration_errors(k):
    fn = REGISTRATION_ERRORS[k]
    et = _err(lambda: fn(torch, torch.nn.Linear(2, 2)))
    ee = _err(lambda: fn(ember, ember.nn.Linear(2, 2)))
    assert type(ee) is type(et), (ee, et)


def test_registration_semantics():
    for lib in (torch, ember):
        m = lib.nn.Module()
        m.w = lib.nn.Parameter(lib.ones(2))
        m.sub = lib.nn.Linear(1, 1)
        m.register_buffer("b", lib.zeros(1))
        m.b = lib.ones(1)  # plain tensor assignment keeps it a buffer
        assert names(m.named_buffers()) == ["b"]
        m.w = None  # a parameter slot may be cleared
        assert names(m.named_parameters()) == ["sub.weight", "sub.bias"]
        m.sub = lib.nn.Parameter(lib.ones(1))  # re-registering as a parameter moves it
        assert "sub" not in dict(m.named_children())
        del m.b
        assert names(m.named_buffers()) == []
        m.buf = lib.nn.Buffer(lib.ones(1), persistent=False)
        assert list(m.state_dict()) == ["sub"] and names(m.named_buffers()) == ["buf"]
        assert "sub" in dir(m)
        with pytest.raises(NotImplementedError):
            lib.nn.Module()(1)


def test_deepcopy_copies_parameters():
    em, _ = both()
    c = copy.deepcopy(em)
    assert c.emb.weight is not em.emb.weight
    assert c.head.weight is c.emb.weight  # the tie survives the copy
    assert_same(c.emb.weight, to_torch(em.emb.weight))
