"""Selective activation checkpointing and checkpoint's debug logs, as ``context_fn`` pairs.

``create_selective_checkpoint_contexts(policy)`` returns two context managers for
``checkpoint(..., use_reentrant=False, context_fn=...)``: the forward one runs each op call of
the region, asks the policy about it and stores the outputs of the ops to save; the
recomputation one hands those stored outputs back instead of running the op again (and runs
the others). Both are the "checkpoint" interposer of the dispatch stack
(``ember/_dispatch.py``), which sees op-table calls after autocast has cast them. Stored
outputs are keyed by op name and call index. The policy gets ``(ctx, op, *args, **kwargs)``
where ``op`` is the op-table entry (``ember.mm`` is one; PyTorch's ``torch.ops.aten.mm.default``
has this role).

An op the recomputation takes from storage still gets its autograd node, with the
recomputed inputs saved, so the recomputation saves what the forward saved.
"""

from __future__ import annotations

import enum
import traceback
from collections import defaultdict

from .._dispatch import interposing, redispatch
from .._tensor import Tensor, _wrap
from ..autograd import engine
from ..autograd.grad_mode import state as _grad_state
from ..ops.registry import OpDef

__all__ = ["CheckpointPolicy", "SelectiveCheckpointContext",
           "create_selective_checkpoint_contexts"]


class CheckpointPolicy(enum.Enum):
    """Whether an op's output is saved (``*_SAVE``), recomputed (``*_RECOMPUTE``) or saved on
    the CPU (``*_CPU_OFFLOAD``); ``MUST_`` says other systems may not override it."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


class SelectiveCheckpointContext:
    def __init__(self, *, is_recompute, op_output=None):
        self.is_recompute = is_recompute
        self.op_output = op_output


_RECOMPUTE = object()
_CONSUMED = object()
_MISMATCH = ("This can happen if the operations in the checkpointed region are "
             "nondeterministic or depend on global state that changed between forward and "
             "backward.")


def _detached(out):
    if isinstance(out, Tensor):
        return (out.detach(), out._version_counter()[0])
    if isinstance(out, tuple):
        return type(out), tuple(_detached(o) for o in out)
    return out


def _fresh(entry, allow_mutation):
    """A stored output as new tensors (the recomputed graph's own), checking no one wrote to
    the stored ones since."""
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], Tensor):
        t, version = entry
        if not allow_mutation and t._version_counter()[0] != version:
            raise RuntimeError("Tensor cached during selective activation checkpoint has been "
                               "mutated")
        return _wrap(t._data, t._dtype, t._backend)
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], type):
        cls, items = entry
        vals = [_fresh(e, allow_mutation) for e in items]
        return cls(*vals) if hasattr(cls, "_fields") else cls(vals)
    return entry


def _record(op, args, kwargs, out):
    """Attach ``op``'s autograd node to ``out`` as if the op had computed it from ``args``."""
    if not _grad_state.enabled or op.backward is None:
        return
    if not op._tensor_kw.isdisjoint(kwargs):
        args, kwargs = op.normalize(args, kwargs)
    inputs = []
    for i in op.tensor_pos:
        if i >= len(args):
            break
        a = args[i]
        if isinstance(a, Tensor):
            inputs.append(a)
        elif isinstance(a, (list, tuple)) and i in op.list_pos:
            inputs.extend(x for x in a if isinstance(x, Tensor))
    if any(t._leaf_rg or t.grad_fn is not None for t in inputs):
        outs = tuple(out) if isinstance(out, tuple) else out
        engine.record(op, args, kwargs, inputs, outs)


class _Caching:
    """The forward's context: runs each call and stores what the policy saves."""

    def __init__(self, policy_fn, storage):
        self.policy_fn, self.storage = policy_fn, storage
        self.counter: defaultdict = defaultdict(int)

    def handle(self, op, args, kwargs, mode):
        out = redispatch("checkpoint", op, args, kwargs, mode)
        if mode != "call":
            return out  # in-place calls are always run again
        idx = self.counter[op.name]
        self.counter[op.name] = idx + 1
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False, op_output=out),
                                op, *args, **kwargs)
        if isinstance(policy, bool):
            policy = CheckpointPolicy.MUST_SAVE if policy else CheckpointPolicy.PREFER_RECOMPUTE
        if policy in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
            self.storage[op.name][idx] = _detached(out)
        else:
            self.storage[op.name][idx] = _RECOMPUTE
        return out

    def __enter__(self):
        self._cm = interposing("checkpoint", self.handle)
        self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


class _Cached:
    """The recomputation's context: stored outputs come back, the rest runs again."""

    def __init__(self, storage, allow_mutation):
        self.storage, self.allow_mutation = storage, allow_mutation
        self.counter: defaultdict = defaultdict(int)

    def handle(self, op, args, kwargs, mode):
        if mode != "call":
            return redispatch("checkpoint", op, args, kwargs, mode)
        idx = self.counter[op.name]
        self.counter[op.name] = idx + 1
        stored = self.storage.get(op.name)
        if stored is None:
            raise RuntimeError(f"{op.name} encountered during backward but not found in "
                               f"storage. {_MISMATCH}")
        entry = stored.get(idx)
        if entry is None:
            raise RuntimeError(f"{op.name} invocation index {idx} encountered during backward "
                               f"but not found in storage. {_MISMATCH}")
        if entry is _CONSUMED:
            raise RuntimeError("Trying to backward an extra time. You are only allowed to "
                               "backward once on any region computed under selective "
                               "activation checkpoint.")
        if entry is _RECOMPUTE:
            return redispatch("checkpoint", op, args, kwargs, mode)
        stored[idx] = _CONSUMED
        out = _fresh(entry, self.allow_mutation)
        _record(op, args, kwargs, out)
        return out

    def __enter__(self):
        self.counter.clear()
        self._cm = interposing("checkpoint", self.handle)
        self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """The ``(forward, recompute)`` context pair that saves the outputs of the ops a policy
    picks: a function ``policy(ctx, op, *args, **kwargs) -> CheckpointPolicy`` (or bool), or
    a list of ops (those saved, the rest recomputed)."""
    if isinstance(policy_fn_or_list, list):
        ops = policy_fn_or_list
        for o in ops:
            if not isinstance(o, OpDef):
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {o} "
                                 f"of type {type(o)}. ")

        def policy_fn(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if op in ops else CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    storage: defaultdict = defaultdict(dict)
    return _Caching(policy_fn, storage), _Cached(storage, allow_cache_entry_mutation)


# ---------------------------------------------------------------------- debug=True
class _Log:
    """Logs each op call of a region (name, argument shapes) with its stack."""

    def __init__(self):
        self.ops: list = []
        self.stacks: list = []

    def handle(self, op, args, kwargs, mode):
        out = redispatch("checkpoint", op, args, kwargs, mode)
        shapes = ", ".join(f"{list(a.shape)}" if isinstance(a, Tensor) else type(a).__name__
                           for a in args)
        name = op.name + ("_" if mode == "inplace" else "")
        self.ops.append(f"${len(self.ops)}: aten.{name}.default({shapes})")
        self.stacks.append("".join(traceback.format_stack(limit=12)[:-2]))
        return out

    def context(self):
        self.ops.clear()
        self.stacks.clear()
        return interposing("checkpoint", self.handle)


def debug_contexts(error_type):
    """``debug=True``: contexts that log the forward's and the recomputation's op calls, and
    the callback that re-raises a checkpoint error with both logs."""
    fwd, rec = _Log(), _Log()

    def error_cb(e):
        raise error_type(
            "An error happened while unpacking tensors; dumping logs of latest computation "
            "because you passed `debug=True` to `torch.utils.checkpoint.checkpoint()`.\n\n"
            "Stack traces of the operators that ran in the original forward:\n\n"
            + "\n".join(fwd.stacks) +
            "\nStack traces of the operators that ran during recomputation:\n\n"
            + "\n".join(rec.stacks) +
            "\nOperations executed during the original forward:\n\n" + "\n".join(fwd.ops) +
            "\n\nOperations executed during recomputation:\n\n" + "\n".join(rec.ops) +
            "\n\nERROR: Detected non-determinism while running activation checkpointing\n\n"
            f"{e}") from e

    def context_fn():
        return _LogContext(fwd), _LogContext(rec)
    return context_fn, error_cb


class _LogContext:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self._cm = self.log.context()
        self._cm.__enter__()

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)
