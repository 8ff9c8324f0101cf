"""``DistributedDataParallel`` on CPU process groups: PyTorch's data-parallel wrapper.

At construction the parameters and buffers are broadcast from rank 0 and the parameters are
put into gradient buckets: in reverse registration order (the order backward produces
gradients), one dtype per bucket, closed once they hold ``bucket_cap_mb`` (25 MiB by default;
with the default the first bucket closes at 1 MiB, as in PyTorch). PyTorch starts with one
bucket and rebuilds the buckets after the first iteration in the order gradients arrived;
ember keeps the reverse registration order throughout. A post-accumulate-grad hook on each
parameter marks it ready; when every parameter of a bucket is ready, its gradients are copied
into the bucket's flat buffer, divided by the world size and all-reduced (SUM) without
waiting, while backward goes on. Buckets are issued in bucket order on every rank. When the
last bucket has been issued (the end of backward), every reduction is waited for and written
back into ``param.grad``.

``no_sync()`` skips the reduction (gradients accumulate locally until a synced backward).
``find_unused_parameters=True`` walks the autograd graph from the forward's outputs and marks
the parameters it does not reach ready at once (they contribute zeros; a parameter no rank used
keeps ``grad`` None). ``broadcast_buffers`` broadcasts the buffers from rank 0 before each
forward. ``static_graph`` is accepted (the hooks need no per-iteration discovery here).
"""

from __future__ import annotations

import contextlib

import numpy as np

from .._tensor import _wrap
from ..autograd.engine import AccumulateGrad
from ..autograd.grad_mode import is_grad_enabled
from ..nn import parallel as _parallel
from ..nn.modules.module import Module
from .collectives import all_reduce, broadcast
from .process_group import resolve
from .work import ReduceOp

_FIRST_BUCKET_BYTES = 1 << 20
_DEFAULT_CAP_MB = 25


def _coalesced_broadcast(tensors, pg, src: int = 0) -> None:
    """Broadcast ``tensors`` from ``src``: one flat buffer per dtype."""
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for dtype, ts in by_dtype.items():
        arrays = [t._data for t in ts]
        flat = np.concatenate([a.reshape(-1) for a in arrays]) if arrays else None
        if flat is None or flat.size == 0:
            continue
        broadcast(_wrap(flat, dtype), src, group=pg)
        offset = 0
        for t, a in zip(ts, arrays):
            a[...] = flat[offset:offset + a.size].reshape(a.shape)
            offset += a.size
            t._bump()


class _Bucket:
    def __init__(self, index: int, params: list, dtype):
        self.index = index
        self.params = params
        self.dtype = dtype
        self.numel = sum(p.numel() for p in params)
        self.pending = len(params)
        self.work = None
        self.flat = None


class DistributedDataParallel(Module):
    """``DistributedDataParallel(module, device_ids=None, ..., process_group=None,
    bucket_cap_mb=None, find_unused_parameters=False, ...)``: ``module`` replicated on every
    rank of the group, its gradients averaged over the ranks during backward."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool | None = True, init_sync: bool = True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, **kwargs):
        super().__init__()
        pg = resolve(process_group)
        if any(p.is_cuda for p in module.parameters()):
            raise RuntimeError("ember.distributed: DistributedDataParallel over CUDA parameters "
                               "needs the NCCL engine, which is not built yet")
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        self.process_group = pg
        self.device_ids = None
        self.output_device = None
        self.dim = dim
        self.broadcast_buffers = True if broadcast_buffers is None else broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        cap = _DEFAULT_CAP_MB if bucket_cap_mb is None else bucket_cap_mb
        self.bucket_bytes_cap = int(cap * 1024 * 1024)
        self._first_bucket_cap = _FIRST_BUCKET_BYTES if bucket_cap_mb is None else \
            self.bucket_bytes_cap
        self._world = pg.size()
        named = []
        seen = set()
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        self._named_params = named
        self._record_hooks = False  # when True, _hook_log records ("grad", name) and
        self._hook_log = []         # ("allreduce", bucket) events in the order they happen
        if init_sync and self._world > 1:
            _coalesced_broadcast([p.detach() for _, p in named] +
                                 [b for b in module.buffers()], pg)
        self._buckets = self._make_buckets()
        self._bucket_of = {}
        for b in self._buckets:
            for p in b.params:
                self._bucket_of[id(p)] = b
        self._names = {id(p): n for n, p in named}
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_ready)
                         for _, p in named]
        self._reset()

    # ------------------------------------------------------------------ buckets
    def _make_buckets(self) -> list:
        buckets, open_by_dtype = [], {}
        for _, p in reversed(self._named_params):
            cap = self._first_bucket_cap if not buckets else self.bucket_bytes_cap
            group = open_by_dtype.get(p.dtype)
            if group is None:
                group = open_by_dtype[p.dtype] = [[], 0]
            group[0].append(p)
            group[1] += p.numel() * p.element_size()
            if group[1] >= cap:
                buckets.append(_Bucket(len(buckets), group[0], p.dtype))
                del open_by_dtype[p.dtype]
        for dtype, (params, _) in open_by_dtype.items():
            buckets.append(_Bucket(len(buckets), params, dtype))
        return buckets

    @property
    def bucket_param_names(self) -> list:
        """The parameter names of each gradient bucket, in the order they are reduced."""
        return [[self._names[id(p)] for p in b.params] for b in self._buckets]

    def _reset(self) -> None:
        for b in self._buckets:
            b.pending = len(b.params)
            b.work = None
            b.flat = None
        self._next_bucket = 0
        self._ready = set()
        self._locally_used = None
        self._in_progress = False

    def _grad_ready(self, p) -> None:
        if not self.require_backward_grad_sync:
            return
        key = id(p)
        if key in self._ready:
            return
        self._ready.add(key)
        self._in_progress = True
        if self._record_hooks:
            self._hook_log.append(("grad", self._names[key]))
        bucket = self._bucket_of[key]
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch_ready()
        elif self._next_bucket:
            for b in self._buckets[:self._next_bucket]:  # let MPI progress issued buckets
                if b.work is not None:
                    b.work.is_completed()

    def _launch_ready(self) -> None:
        buckets = self._buckets
        while self._next_bucket < len(buckets) and buckets[self._next_bucket].pending == 0:
            b = buckets[self._next_bucket]
            self._next_bucket += 1
            flat = np.zeros(b.numel, b.params[0]._data.dtype)
            offset = 0
            for p in b.params:
                n = p.numel()
                if p.grad is not None and (self._locally_used is None or
                                           id(p) in self._locally_used):
                    flat[offset:offset + n] = p.grad._data.reshape(-1)
                offset += n
            if self._world > 1:
                np.divide(flat, self._world, out=flat, casting="unsafe")
            b.flat = flat
            if self._record_hooks:
                self._hook_log.append(("allreduce", b.index))
            b.work = all_reduce(_wrap(flat, b.dtype), ReduceOp.SUM, self.process_group,
                                async_op=True)
        if self._next_bucket == len(buckets):
            self._finalize()

    def _finalize(self) -> None:
        used = None
        if self._locally_used is not None:
            mask = np.array([id(p) in self._locally_used for _, p in self._named_params],
                            np.int32)
            all_reduce(_wrap(mask, _int32()), ReduceOp.MAX, self.process_group)
            used = {id(p) for (_, p), m in zip(self._named_params, mask) if m}
        for b in self._buckets:
            b.work.wait()
            offset = 0
            for p in b.params:
                n = p.numel()
                if used is None or id(p) in used:
                    value = b.flat[offset:offset + n].reshape(p._data.shape)
                    if p.grad is None:
                        p.grad = _wrap(value.copy(), p.dtype)
                    else:
                        p.grad._data[...] = value
                        p.grad._bump()
                offset += n
        self._reset()

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        if self._in_progress:
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one. This error indicates that your module has parameters that were not "
                "used in producing loss. You can enable unused parameter detection by passing "
                "the keyword argument `find_unused_parameters=True` to "
                "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` "
                "function outputs participate in calculating loss.")
        if self.broadcast_buffers and self._world > 1:
            buffers = list(self.module.buffers())
            if buffers:
                _coalesced_broadcast(buffers, self.process_group)
        out = self.module(*inputs, **kwargs)
        if self.find_unused_parameters and self.require_backward_grad_sync and \
                is_grad_enabled() and any(t.requires_grad for t in _tensors(out)):
            self._mark_unused(out)
        return out

    def _mark_unused(self, out) -> None:
        """Mark ready the parameters the graph of ``out`` does not reach."""
        reached, stack, seen = set(), [], set()
        for t in _tensors(out):
            if t.grad_fn is not None:
                stack.append(t.grad_fn)
            elif getattr(t, "_leaf_rg", False):
                reached.add(id(t))
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, AccumulateGrad):
                v = node.variable
                if v is not None:
                    reached.add(id(v))
                continue
            for e in node.edges:
                if e is not None and e[0] is not None:
                    stack.append(e[0])
        self._locally_used = {id(p) for _, p in self._named_params if id(p) in reached}
        unused = [p for _, p in self._named_params if id(p) not in reached]
        if unused:
            self._in_progress = True
            for p in unused:
                self._ready.add(id(p))
                self._bucket_of[id(p)].pending -= 1
            self._launch_ready()

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally (no all-reduce) inside this context."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def _get_ddp_logging_data(self) -> dict:
        return {"world_size": self._world, "bucket_cap_bytes": self.bucket_bytes_cap,
                "num_buckets": len(self._buckets), "find_unused_parameters":
                self.find_unused_parameters, "backend_name": self.process_group._backend}


def _int32():
    from .. import _dtype
    return _dtype.int32


def _tensors(obj):
    from .._tensor import Tensor
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


_parallel.DistributedDataParallel = DistributedDataParallel
