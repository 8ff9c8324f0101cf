"""Module: parameters, buffers and submodules registered by attribute assignment; state_dict;
train/eval; hooks; device and dtype moves. ``Module.compile`` is bound by ``ember.compiler``."""

from __future__ import annotations

import itertools
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator

from ..._tensor import Tensor
from ...backends.meta import NO_DATA
from ...ops.creation import empty_like
from ..._tensor import share_memory as _share_memory
from ...autograd.grad_mode import no_grad
from ..parameter import Buffer, Parameter

class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


class RemovableHandle:
    _ids = itertools.count()

    def __init__(self, *dicts):
        self.dicts = dicts
        self.id = next(RemovableHandle._ids)

    def remove(self):
        for d in self.dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_global_forward_pre_hooks: dict = OrderedDict()
_global_forward_hooks: dict = OrderedDict()


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    h = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[h.id] = hook
    return h


def register_module_forward_hook(hook) -> RemovableHandle:
    h = RemovableHandle(_global_forward_hooks)
    _global_forward_hooks[h.id] = hook
    return h


class Module:
    """Base class of every layer and model."""

    dump_patches = False
    _version = 1
    training: bool
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_hooks_always_called"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_backward_hooks"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()

    forward: Callable

    def _forward_unimplemented(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    forward = _forward_unimplemented

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or _global_forward_pre_hooks
                or _global_forward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    _call_impl = __call__

    def _call_with_hooks(self, args, kwargs):
        for hid, hook in itertools.chain(_global_forward_pre_hooks.items(),
                                         self._forward_pre_hooks.items()):
            if self._forward_pre_hooks_with_kwargs.get(hid):
                r = hook(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {r}.")
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        try:
            out = self.forward(*args, **kwargs)
        except Exception:
            for hid, hook in self._forward_hooks.items():
                if self._forward_hooks_always_called.get(hid):
                    hook(self, args, None)
            raise
        for hid, hook in itertools.chain(_global_forward_hooks.items(),
                                         self._forward_hooks.items()):
            if self._forward_hooks_with_kwargs.get(hid):
                r = hook(self, args, kwargs, out)
            else:
                r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        h = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[h.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[h.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(h.id, last=False)
        return h

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        h = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs,
                            self._forward_hooks_always_called)
        self._forward_hooks[h.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[h.id] = True
        if always_call:
            self._forward_hooks_always_called[h.id] = True
        if prepend:
            self._forward_hooks.move_to_end(h.id, last=False)
        return h

    def register_full_backward_hook(self, hook, prepend=False):
        raise NotImplementedError("Module.register_full_backward_hook is not supported by ember "
                                  "yet; use Tensor.register_hook on the module's output")

    # ------------------------------------------------------------------ attributes
    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, "_buffers", "_modules")
            d.pop(name, None)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, "_parameters", "_buffers")
            d.pop(name, None)
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (torch.nn.Module or None expected)")
            d["_modules"][name] = value
        elif isinstance(value, Buffer):
            self.register_buffer(name, value, persistent=value.persistent)
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_from(self, name, *stores):
        for s in stores:
            self.__dict__[s].pop(name, None)
        self.__dict__["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[store]:
                del self.__dict__[store][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) |
                      set(self._modules))

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ------------------------------------------------------------------ registration
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter", self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (torch.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             "parameters must be created explicitly. To express '"
                             f"{name}' as a function of another Tensor, compute the value in "
                             "the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module", self._modules)
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name, kind, store):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if hasattr(self, name) and name not in store:
            raise KeyError(f"attribute '{name}' already exists")

    def get_submodule(self, target: str) -> Module:
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    # ------------------------------------------------------------------ traversal
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name,
                                       remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, store).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------ modes
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad = p.grad.detach()
                p.grad.zero_()

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ dtype / device
    def _apply(self, fn, recurse=True):
        if recurse:
            for m in self.children():
                m._apply(fn)
        # the Parameter objects stay the same (only their data changes), as in PyTorch, so
        # an optimizer built before .double()/.to() still holds the module's parameters
        for p in self._parameters.values():
            if p is None:
                continue
            with no_grad():
                new = fn(p)
                if new is not p:
                    p.data = new
                if p.grad is not None:
                    g = fn(p.grad)
                    if g is not p.grad:
                        p.grad.data = g
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs) -> Module:
        from ..._device import check_device
        from ..._dtype import dtype as dtype_cls
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        for a in args:
            if isinstance(a, dtype_cls):
                dtype = a
            elif isinstance(a, Tensor):
                dtype = a.dtype
            else:
                device = a
        if device is not None:
            check_device(device)
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")
        if dtype is None and device is None:
            return self

        def move(t):
            if device is not None:
                t = t.to(device)
            if dtype is not None and (t.is_floating_point() or t.is_complex()):
                t = t.to(dtype)
            return t
        try:
            return self._apply(move)
        except NotImplementedError as e:
            if str(e) != NO_DATA:
                raise
            raise NotImplementedError(
                f"{e} Please use torch.nn.Module.to_empty() instead of torch.nn.Module.to() "
                "when moving module from meta to a different device.") from None

    def to_empty(self, *, device, recurse: bool = True) -> Module:
        """Move the parameters and buffers to ``device`` as uninitialised tensors (no copy:
        how a module built on the meta device gets memory); Parameters stay Parameters with
        their ``requires_grad``."""
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def _cast(self, dtype):
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> Module:
        from ..._dtype import float32
        return self._cast(float32)

    def double(self) -> Module:
        from ..._dtype import float64
        return self._cast(float64)

    def half(self) -> Module:
        from ..._dtype import float16
        return self._cast(float16)

    def bfloat16(self) -> Module:
        from ..._dtype import bfloat16
        return self._cast(bfloat16)

    def type(self, dst_type) -> Module:
        return self._apply(lambda t: t.to(dst_type))

    def cpu(self) -> Module:
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> Module:
        return self.to("cuda" if device is None else
                       device if not isinstance(device, int) else f"cuda:{device}")

    def share_memory(self) -> Module:
        """Move every parameter, gradient and buffer into shared memory (in place, one walk:
        see ``_tensor.share_memory``), so processes given this module share them."""
        ts = []
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None:
                    ts.append(p)
                    if p.grad is not None:
                        ts.append(p.grad)
            ts.extend(b for b in m._buffers.values() if b is not None)
        _share_memory(ts)
        return self

    # ------------------------------------------------------------------ state_dict
    def register_state_dict_pre_hook(self, hook):
        h = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[h.id] = hook
        return h

    def register_state_dict_post_hook(self, hook):
        h = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[h.id] = hook
        return h

    _register_state_dict_hook = register_state_dict_post_hook

    def register_load_state_dict_pre_hook(self, hook):
        h = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[h.id] = hook
        return h

    def register_load_state_dict_post_hook(self, hook):
        h = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[h.id] = hook
        return h

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        extra = getattr(type(self), "get_extra_state", None)
        if extra is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        if args:  # the positional (destination, prefix, keep_vars) form is deprecated
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            r = hook(self, destination, prefix, {})
            if r is not None:
                destination = r
        return destination

    def get_extra_state(self):
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never "
                           "be called.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never "
                           "be called.")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                 error_msgs)
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in (*self._parameters.items(), *persistent.items())
                 if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            if param is None:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected '
                                  "torch.Tensor or Tensor-like object from checkpoint but "
                                  f"received {type(value)}")
                continue
            if tuple(value.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{_size_repr(value.shape)} from checkpoint, the shape in "
                                  f"current model is {_size_repr(param.shape)}.")
                continue
            if param.is_meta and not value.is_meta and not assign:
                warnings.warn(f"for {key}: copying from a non-meta parameter in the checkpoint to "
                              "a meta parameter in the current model, which is a no-op. (Did you "
                              "mean to pass `assign=True` to assign items in the state dictionary "
                              "to their corresponding key in the module instead of copying them "
                              "in place?)", stacklevel=3)
            if assign:  # the state dict's tensor itself (its dtype and device); a Parameter
                # keeps the module's requires_grad
                if isinstance(param, Parameter):
                    if isinstance(value, Parameter):
                        value.requires_grad_(param.requires_grad)
                    else:
                        value = Parameter(value, param.requires_grad)
                    self._parameters[name] = value
                else:
                    self._buffers[name] = value
            else:
                try:
                    with no_grad():
                        param.copy_(value)
                except Exception as e:
                    error_msgs.append(f'While copying the parameter named "{key}", whose '
                                      f"dimensions in the model are {_size_repr(param.shape)} "
                                      "and whose dimensions in the checkpoint are "
                                      f"{_size_repr(value.shape)}, an exception occurred : "
                                      f"{e.args}.")
        extra_key = prefix + "_extra_state"
        if getattr(type(self), "set_extra_state", None) is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        if strict:
            children = set(self._modules)
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    rest = key[len(prefix):]
                    head = rest.split(".", 1)[0]
                    if "." in rest and head in children:
                        continue
                    if rest not in local:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        state_dict = OrderedDict(state_dict)

        def load(module, prefix=""):
            module._load_from_state_dict(state_dict, prefix, {}, True, missing, unexpected,
                                         errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                hook(module, keys)

        load(self)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" +
                               "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ repr
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, m in self._modules.items():
            text = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {text}")
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _size_repr(shape) -> str:
    from ..._tensor import Size
    return repr(Size(shape))
