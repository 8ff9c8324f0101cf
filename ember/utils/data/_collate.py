"""default_collate / default_convert: turn a list of samples into a batch."""

from __future__ import annotations

import collections.abc as abc
import re

import numpy as np

from ..._dtype import float64, int64
from ..._tensor import Tensor
from ...ops.creation import as_tensor, tensor
from ...ops.joining import stack

_NP_STR = re.compile(r"[SaUO]")
_MSG = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        "found {}")


def default_convert(data):
    """Numpy arrays and numbers to tensors, recursively (no batching)."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray) and not _NP_STR.search(data.dtype.str):
        return as_tensor(data)
    if isinstance(data, np.generic) and not _NP_STR.search(data.dtype.str):
        return as_tensor(data)
    if isinstance(data, abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()}) \
            if not isinstance(data, dict) or type(data) is not dict else \
            {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Stack tensors, arrays and numbers along a new first dimension; recurse into containers."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray) or isinstance(elem, np.generic):
        if _NP_STR.search(elem.dtype.str):
            raise TypeError(_MSG.format(elem.dtype))
        return stack([as_tensor(b) for b in batch], 0) if isinstance(elem, np.ndarray) else \
            as_tensor(np.array(batch))
    if isinstance(elem, bool):
        return tensor(batch)
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, int):
        return tensor(batch, dtype=int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out) if type(elem) is not dict else out
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_MSG.format(type(elem)))
