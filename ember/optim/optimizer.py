"""The Optimizer base class: parameter groups (optionally named), state, hooks, state_dict."""

from __future__ import annotations

import copy
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from .. import _dtype
from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad, no_grad


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


class _Handle:
    def __init__(self, store: dict, key: int):
        self.store, self.key = store, key

    def remove(self):
        self.store.pop(self.key, None)


_global_pre_hooks: dict = OrderedDict()
_global_post_hooks: dict = OrderedDict()
_hook_ids = iter(range(1 << 62))


def register_optimizer_step_pre_hook(hook):
    k = next(_hook_ids)
    _global_pre_hooks[k] = hook
    return _Handle(_global_pre_hooks, k)


def register_optimizer_step_post_hook(hook):
    k = next(_hook_ids)
    _global_post_hooks[k] = hook
    return _Handle(_global_post_hooks, k)


def value(x) -> float:
    """A hyperparameter that may be a 1-element tensor, as a Python float."""
    return x.item() if isinstance(x, Tensor) else x


class Optimizer:
    """Base class of all optimizers. Subclasses implement ``step`` over ``self.param_groups``."""

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self._step_pre_hooks: dict = OrderedDict()
        self._step_post_hooks: dict = OrderedDict()
        self._state_dict_pre_hooks: dict = OrderedDict()
        self._state_dict_post_hooks: dict = OrderedDict()
        self._load_pre_hooks: dict = OrderedDict()
        self._load_post_hooks: dict = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {params.type()}")
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(dict(g))

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_step_pre_hooks", "_step_post_hooks", "_state_dict_pre_hooks",
                     "_state_dict_post_hooks", "_load_pre_hooks", "_load_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key not in ("params", "param_names"):
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: dict) -> None:
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        names = None
        if params and isinstance(params[0], tuple):
            if not all(isinstance(p, tuple) and len(p) == 2 for p in params):
                raise ValueError("all optimizer params should be with/without names. Some param "
                                 "names are missing")
            names = [n for n, _ in params]
            params = [p for _, p in params]
        elif any(isinstance(p, tuple) for p in params):
            raise ValueError("all optimizer params should be with/without names. Some param "
                             "names are missing")
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        if self.param_groups:
            has_names = "param_names" in self.param_groups[0]
            if has_names != (names is not None):
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {'with' if names else 'without'} "
                                 "names to the optimizer")
        param_group["params"] = params
        if names is not None:
            param_group["param_names"] = names
        for k, v in self.defaults.items():
            if v is required and k not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {k}")
            param_group.setdefault(k, v)
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see github.com/pytorch/pytorch/"
                          "issues/40967 for more information", stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ------------------------------------------------------------------ gradients, step
    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad = p.grad.detach()
                    p.grad.zero_()

    def _run_step(self, update: Callable, closure):
        """Run hooks, the closure (with grad enabled) and ``update()`` (without grad)."""
        for hook in list(_global_pre_hooks.values()) + list(self._step_pre_hooks.values()):
            r = hook(self, (), {})
            if r is not None:
                raise RuntimeError("optimizer step pre-hooks may not change the arguments")
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            update()
        for hook in list(self._step_post_hooks.values()) + list(_global_post_hooks.values()):
            hook(self, (), {})
        return loss

    def step(self, closure=None):
        """One update of every parameter with a gradient; ``closure`` (re-evaluating the loss)
        runs first, with grad enabled, and its loss is returned. Subclasses write ``_update``
        (run without grad, between the step hooks)."""
        return self._run_step(self._update, closure)

    def _update(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} defines no update")

    def register_step_pre_hook(self, hook):
        k = next(_hook_ids)
        self._step_pre_hooks[k] = hook
        return _Handle(self._step_pre_hooks, k)

    def register_step_post_hook(self, hook):
        k = next(_hook_ids)
        self._step_post_hooks[k] = hook
        return _Handle(self._step_post_hooks, k)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        return self._add_hook(self._state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        return self._add_hook(self._state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        return self._add_hook(self._load_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        return self._add_hook(self._load_post_hooks, hook, prepend)

    @staticmethod
    def _add_hook(store, hook, prepend):
        k = next(_hook_ids)
        store[k] = hook
        if prepend:
            store.move_to_end(k, last=False)
        return _Handle(store, k)

    # ------------------------------------------------------------------ state_dict
    def state_dict(self) -> dict[str, Any]:
        for hook in self._state_dict_pre_hooks.values():
            hook(self)
        index: dict[int, int] = {}
        groups = []
        start = 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for i, p in enumerate(g["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in g["params"]]
            start += len(g["params"])
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        sd = {"state": state, "param_groups": groups}
        for hook in self._state_dict_post_hooks.values():
            r = hook(self, sd)
            if r is not None:
                sd = r
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = state_dict.copy()
        for hook in self._load_pre_hooks.values():
            r = hook(self, state_dict)
            if r is not None:
                state_dict = r
        groups, saved_groups = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = {}
        for g, s in zip(groups, saved_groups):
            for old, p in zip(s["params"], g["params"]):
                id_map[old] = p
        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = {key: _cast_state(p, key, val) for key, val in v.items()}
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            ng = copy.deepcopy({k: v for k, v in s.items() if k != "params"})
            ng["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                ng["param_names"] = g["param_names"]
            new_groups.append(ng)
        self.__setstate__({"state": state, "param_groups": new_groups,
                           "defaults": self.defaults})
        for hook in self._load_post_hooks.values():
            hook(self)


def _cast_state(p, key, val):
    if isinstance(val, Tensor):
        if key == "step":
            return val.clone()
        if val.is_floating_point() or val.is_complex():
            return val.to(p.dtype).clone()
        return val.clone()
    if isinstance(val, dict):
        return {k: _cast_state(p, k, v) for k, v in val.items()}
    if isinstance(val, (list, tuple)):
        return type(val)(_cast_state(p, key, v) for v in val)
    return val


def check_range(name: str, v, low: float = 0.0, high: float | None = None, index=None) -> None:
    """PyTorch's hyperparameter validation (ValueError naming the parameter and value)."""
    x = value(v)
    if isinstance(v, Tensor) and v.numel() != 1:
        raise ValueError(f"Tensor {name} must be 1-element")
    if x < low or (high is not None and x >= high):
        where = f" at index {index}" if index is not None else ""
        raise ValueError(f"Invalid {name}{where}: {x}")


def check_adam_family(lr, eps, betas, weight_decay) -> None:
    """The hyperparameter checks Adam's relatives share."""
    check_range("learning rate", lr)
    check_range("epsilon value", eps)
    for i, b in enumerate(betas):
        check_range("beta parameter", b, 0.0, 1.0, index=i)
    check_range("weight_decay value", weight_decay)


def new_step() -> Tensor:
    """A fresh step counter: a float32 scalar tensor, as PyTorch keeps it."""
    from ..ops.creation import zeros
    return zeros((), dtype=_dtype.float32)


def advance_state(state: dict, p: Tensor, *buffers: str) -> int:
    """Advance a parameter's step counter and return the new step. The first call creates
    the state in PyTorch's key order: ``step`` (a float32 scalar tensor), then a zero tensor
    like ``p`` per name in ``buffers``."""
    if not state:
        from ..ops.creation import zeros_like
        state["step"] = new_step()
        for name in buffers:
            state[name] = zeros_like(p)
    step = state["step"]
    if isinstance(step, Tensor) and not step.requires_grad and step._data.ndim == 0:
        step._data += 1  # in place and version-bumped as step += 1 is, without dispatch
        step._bump()  # (~10 us a parameter, a tenth of a small model's Adam step)
        return step._data.item()
    state["step"] += 1
    return state["step"].item()


def weight_decay(p: Tensor, g: Tensor, lr: float, wd: float, decoupled: bool) -> Tensor:
    """Apply weight decay; returns the gradient to use: L2 adds ``wd * p`` to it, decoupled
    decay (AdamW-style) shrinks ``p`` by ``1 - lr * wd`` in place instead."""
    if wd == 0:
        return g
    if decoupled:
        p.mul_(1 - lr * wd)
        return g
    return g.add(p, alpha=wd)


FUSED_DEVICES = ["cpu", "cuda", "mps"]  # where fused=True is accepted (PyTorch's check)
_FLOATS = (_dtype.float16, _dtype.bfloat16, _dtype.float32, _dtype.float64)


def check_fused(p: Tensor) -> None:
    """``fused=True``'s requirement on a parameter (PyTorch's RuntimeError when not met)."""
    if p.device.type not in FUSED_DEVICES or not p.is_floating_point():
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors "
                           f"of supported devices: {FUSED_DEVICES} but {p.dtype} and "
                           f"{p.device.type}")


def fusable(p: Tensor, g: Tensor, group: dict) -> bool:
    """Whether a parameter may take its backend's fused step (``Backend.fused_step``): a real
    floating-point parameter with a dense gradient of its dtype, in a step that is not
    differentiated. The step's ``fits`` then decides on the arrays."""
    return (not group.get("differentiable") and p.dtype in _FLOATS and g.dtype is p.dtype
            and not g.is_sparse and g.grad_fn is None)


def grads_of(group) -> Iterable:
    for p in group["params"]:
        if p.grad is not None:
            yield p, p.grad
