"""FlexAttention's block-sparse mask (PyTorch 2.13's ``BlockMask``) and the functions that build
masks from a ``mask_mod``: ``create_mask``, ``create_block_mask``, ``and_masks``, ``or_masks``,
``noop_mask``.

A BlockMask tiles the (Q_LEN, KV_LEN) score matrix of every (batch, head) into blocks of
``BLOCK_SIZE = (Q_BLOCK, KV_BLOCK)``. For each row of blocks it lists the KV blocks that are
*partial* (some elements allowed: ``mask_mod`` decides) in ``kv_num_blocks``/``kv_indices`` and
the blocks that are *full* (every element allowed: ``mask_mod`` is skipped) in
``full_kv_num_blocks``/``full_kv_indices``; the first ``num`` entries of a row of indices are
its blocks, in ascending column order, the rest are the other columns. Blocks listed in neither
are skipped. The ``q_*`` tensors are the same lists by column (for a backward over KV blocks).

The index arguments ember passes to ``mask_mod``/``score_mod`` are int32 tensors that broadcast
against each other (batch ``(B, 1, 1, 1)``, head ``(1, H, 1, 1)``, query ``(1, 1, L, 1)``, key
``(1, 1, 1, S)``) where PyTorch's eager path maps the function over 0-d tensors; a function
written elementwise gives the same values either way.
"""

from __future__ import annotations

import inspect
import itertools
import math
import warnings
from collections.abc import Callable
from typing import Any

from ... import _dtype
from ... import accelerator as _accelerator
from ..._device import device as _as_device
from ..._tensor import Tensor
from ...ops import registry as _ops
from ...ops.padding import pad as _pad

_score_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]
_mask_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30
INDEX_DTYPE = _dtype.int32  # the dtype of b, h, q_idx, kv_idx (PyTorch documents torch.int)


class _OpTable:
    """``_op.name``: the op ``name`` of the op table (what ``ember.name`` is)."""

    def __getattr__(self, name: str):
        return _ops.OPS[name]


_op = _OpTable()


def _identity(score: Tensor, batch: Tensor, head: Tensor, token_q: Tensor,
              token_kv: Tensor) -> Tensor:
    return score


def noop_mask(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """A mask_mod that allows every position (a 0-d True)."""
    return batch.new_ones(size=(), dtype=_dtype.bool_, device=batch.device)


def _sliced_mask_mod_error(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor):
    """The mask_mod of a sliced BlockMask: slicing drops the original's mask_mod."""
    raise RuntimeError(
        "Cannot use mask_mod from a sliced BlockMask. Indexing a BlockMask with [] resets its "
        "mask_mod; set the slice's mask_mod from the original BlockMask's mask_mod instead "
        "(for example sliced.mask_mod = apply_offset(base.mask_mod, offset)).")


def _positional_count(fn: Callable) -> int:
    code = getattr(fn, "__code__", None)
    if code is not None:
        return code.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    return sum(1 for p in inspect.signature(fn).parameters.values()
               if p.default is inspect.Parameter.empty)


def _is_score_mod(fn: Callable) -> bool:
    """5 positional parameters: a score_mod; 4: a mask_mod; else PyTorch's AssertionError."""
    n = _positional_count(fn)
    if n not in (4, 5):
        raise AssertionError(f"Expected 4 or 5 positional args, got {n}")
    return n == 5


def or_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """The mask_mod allowing a position where any of ``mask_mods`` does."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        out = b.new_zeros((), dtype=_dtype.bool_)
        for m in mask_mods:
            out = out | m(b, h, q_idx, kv_idx)
        return out
    return or_mask


def and_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """The mask_mod allowing a position where all of ``mask_mods`` do."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        out = b.new_ones((), dtype=_dtype.bool_)
        for m in mask_mods:
            out = out & m(b, h, q_idx, kv_idx)
        return out
    return and_mask


def index_grids(B: int, H: int, q_lo: int, q_hi: int, kv_lo: int, kv_hi: int, device,
                heads=None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The (b, h, q_idx, kv_idx) int32 tensors of a tile, shaped to broadcast to
    (B, H, q_hi - q_lo, kv_hi - kv_lo)."""
    b = _op.arange(B, dtype=INDEX_DTYPE, device=device).view(B, 1, 1, 1)
    h = (heads if heads is not None else _op.arange(H, dtype=INDEX_DTYPE, device=device)
         ).view(1, H, 1, 1)
    q = _op.arange(q_lo, q_hi, dtype=INDEX_DTYPE, device=device).view(1, 1, q_hi - q_lo, 1)
    kv = _op.arange(kv_lo, kv_hi, dtype=INDEX_DTYPE, device=device).view(1, 1, 1, kv_hi - kv_lo)
    return b, h, q, kv


def _default_device(device):
    if device is None:
        device = _accelerator.current_accelerator() or "cpu"
    return _as_device(device)


def create_mask(mod_fn: Callable, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int,
                device=None) -> Tensor:
    """The dense (B, H, Q_LEN, KV_LEN) bool mask of a mask_mod, or of a score_mod (where its
    result on zero scores is not -inf)."""
    device = _default_device(device)
    B, H = B or 1, H or 1
    b, h, q, kv = index_grids(B, H, 0, Q_LEN, 0, KV_LEN, device)
    if _is_score_mod(mod_fn):
        out = mod_fn(_op.zeros(B, H, Q_LEN, KV_LEN, device=device), b, h, q, kv)
        mask = _op.logical_not(_op.isneginf(out))
    else:
        mask = mod_fn(b, h, q, kv)
    return mask.expand(B, H, Q_LEN, KV_LEN)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _block_sums(mask: Tensor, QB: int, KB: int) -> Tensor:
    """(B, H, nQ, nK) counts of allowed elements per block of a (B, H, L, S) bool mask (the
    padding past L and S counts as disallowed)."""
    if mask.dtype != _dtype.bool_:
        raise AssertionError(f"mask.dtype must be torch.bool, got {mask.dtype}")
    while mask.dim() < 4:
        mask = mask.unsqueeze(0)
    B, H, L, S = mask.shape
    Lp, Sp = _round_up(L, QB), _round_up(S, KB)
    m = _pad(mask.to(_dtype.int32), (0, Sp - S, 0, Lp - L))
    return m.view(B, H, Lp // QB, QB, Sp // KB, KB).sum(dim=(3, 5), dtype=_dtype.int32)


def _dense_to_ordered(dense: Tensor) -> tuple[Tensor, Tensor]:
    """(num, indices) of a 0/1 block table: the count per row and the columns, set ones first
    in ascending order."""
    dense = dense.to(_dtype.int32)
    num = dense.sum(dim=-1, dtype=_dtype.int32)
    idx = _op.argsort(dense, dim=-1, descending=True, stable=True).to(_dtype.int32)
    return num.contiguous(), idx.contiguous()


def _ordered_to_dense(num: Tensor, indices: Tensor, num_cols: int) -> Tensor:
    """The 0/1 int32 block table (..., rows, num_cols) of (num, indices)."""
    entries = indices.shape[-1]
    pos = _op.arange(entries, dtype=_dtype.int32, device=indices.device)
    valid = pos < num.unsqueeze(-1)                                  # (..., rows, entries)
    cols = _op.arange(num_cols, dtype=_dtype.int32, device=indices.device)
    hit = (indices.unsqueeze(-1) == cols) & valid.unsqueeze(-1)      # (..., rows, entries, cols)
    return hit.any(dim=-2).to(_dtype.int32)


def _transpose_ordered(num: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
    dense = _ordered_to_dense(num, indices, indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


class BlockMask:
    """A block-sparse attention mask (see the module docstring for its layout)."""

    _TENSOR_ATTRS = ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                     "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"]

    def __init__(self, seq_lengths: tuple[int, int], kv_num_blocks: Tensor, kv_indices: Tensor,
                 full_kv_num_blocks: Tensor | None, full_kv_indices: Tensor | None,
                 q_num_blocks: Tensor | None, q_indices: Tensor | None,
                 full_q_num_blocks: Tensor | None, full_q_indices: Tensor | None,
                 BLOCK_SIZE: tuple[int, int] = (_DEFAULT_SPARSE_BLOCK_SIZE,
                                                _DEFAULT_SPARSE_BLOCK_SIZE),
                 mask_mod: _mask_mod_signature = noop_mask) -> None:
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError(
                "full_q_num_blocks and full_q_indices must be both provided or omitted")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks: Tensor, kv_indices: Tensor,
                       full_kv_num_blocks: Tensor | None = None,
                       full_kv_indices: Tensor | None = None,
                       BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod: _mask_mod_signature | None = None,
                       seq_lengths: tuple[int, int] | None = None,
                       compute_q_blocks: bool = True) -> BlockMask:
        """A BlockMask from its KV-side lists; the Q-side lists are derived (transposed)."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num = q_idx = fq_num = fq_idx = None
        if compute_q_blocks:
            q_num, q_idx = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                fq_num, fq_idx = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0],
                           kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                   q_num, q_idx, fq_num, fq_idx, BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask)

    def as_tuple(self, flatten: bool = True) -> tuple[Any, ...]:
        """The attributes in PyTorch's order (block size and lengths flattened or as pairs)."""
        seq = self.seq_lengths if flatten else (self.seq_lengths,)
        bs = self.BLOCK_SIZE if flatten else (self.BLOCK_SIZE,)
        return (*seq, *(getattr(self, a) for a in self._TENSOR_ATTRS), *bs, self.mask_mod)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.kv_indices.shape[:-2]) + tuple(self.seq_lengths)

    def numel(self) -> int:
        """The number of elements the mask covers (ignoring sparsity)."""
        return math.prod(self.shape)

    def sparsity(self) -> float:
        """The percentage of the mask's area in blocks that are skipped."""
        computed = int(self.kv_num_blocks.sum().item())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.sum().item())
        area = computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - area / self.numel())

    def to_dense(self) -> Tensor:
        """The (…, rows, cols) int32 table of computed blocks (partial or full)."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def block_tables(self) -> tuple[Tensor, Tensor | None]:
        """The partial and full 0/1 block tables (full: None when not kept apart)."""
        partial = _ordered_to_dense(self.kv_num_blocks, self.kv_indices,
                                    self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is None:
            return partial, None
        return partial, _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                          self.full_kv_indices.shape[-1])

    def to_string(self, grid_size: int | tuple[int, int] = (20, 20), limit: int = 4) -> str:
        """A picture of the block table of each (batch, head): '█' computed, '░' partly,
        ' ' skipped, summarising groups of blocks to fit ``grid_size`` (-1: no summary)."""
        dense = self.to_dense()
        *batch_dims, rows, cols = dense.shape
        table = dense.tolist()
        if grid_size == -1:
            max_r, max_c = rows, cols
        elif isinstance(grid_size, int):
            max_r = max_c = grid_size
        else:
            max_r, max_c = grid_size
        rstep, cstep = max(1, -(-rows // max_r)), max(1, -(-cols // max_c))
        pictures = []
        for n, where in enumerate(itertools.product(*(range(d) for d in batch_dims))):
            if n == limit:
                pictures += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a "
                             "specific batch or head"]
                break
            grid = table
            for i in where:
                grid = grid[i]
            lines = [f"{where}"]
            for r in range(0, rows, rstep):
                line = ""
                for c in range(0, cols, cstep):
                    cells = [v for row in grid[r:r + rstep] for v in row[c:c + cstep]]
                    frac = sum(cells) / len(cells)
                    line += ("█" if frac == 1 else " " if frac == 0 else "░") * 2
                lines.append(line)
            pictures.append("\n".join(lines) + "\n")
        return "\n".join(pictures)

    def __str__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self) -> str:
        def shape(x):
            return None if x is None else x.shape
        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        fields = "".join(f"    {a}={shape(getattr(self, a))},\n" for a in self._TENSOR_ATTRS)
        return (f"BlockMask(\n{fields}    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={name}\n)")

    def __getitem__(self, index) -> BlockMask:
        """The BlockMask of some batches/heads/query-block rows (an int keeps its dim, as
        PyTorch's slicing does); its mask_mod raises until set from the original's."""
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = tuple(self.kv_num_blocks.shape[:3])
        index = tuple((slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1))
                      if isinstance(i, int) else i for i, n in zip(padded, sizes))
        full = (None, None) if self.full_kv_num_blocks is None else \
            (self.full_kv_num_blocks[index], self.full_kv_indices[index])
        return BlockMask.from_kv_blocks(
            self.kv_num_blocks[index], self.kv_indices[index], *full,
            BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
            seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len: int, new_kv_len: int) -> BlockMask:
        """This mask cropped (or, for new blocks, extended with skipped blocks) to new lengths:
        the upper-left corner of the block table."""
        rows = -(-new_q_len // self.BLOCK_SIZE[0])
        cols = -(-new_kv_len // self.BLOCK_SIZE[1])

        def crop(num, idx):
            dense = _ordered_to_dense(num, idx, idx.shape[-1])[..., :rows, :cols]
            pr, pc = rows - dense.shape[-2], cols - dense.shape[-1]
            if pr or pc:
                dense = _pad(dense, (0, pc, 0, pr))
            return _dense_to_ordered(dense)
        kv = crop(self.kv_num_blocks, self.kv_indices)
        full = (None, None) if self.full_kv_num_blocks is None else \
            crop(self.full_kv_num_blocks, self.full_kv_indices)
        return self.from_kv_blocks(*kv, *full, BLOCK_SIZE=self.BLOCK_SIZE,
                                   mask_mod=self.mask_mod, seq_lengths=(new_q_len, new_kv_len),
                                   compute_q_blocks=self.q_indices is not None)

    def to(self, device) -> BlockMask:
        """A BlockMask with every tensor moved to ``device``."""
        moved = {a: (None if getattr(self, a) is None else getattr(self, a).to(device))
                 for a in self._TENSOR_ATTRS}
        return BlockMask(self.seq_lengths, **moved, BLOCK_SIZE=self.BLOCK_SIZE,
                         mask_mod=self.mask_mod)


def create_block_mask(mask_mod: _mask_mod_signature, B: int | None, H: int | None,
                      Q_LEN: int, KV_LEN: int, device=None,
                      BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile=False, separate_full_blocks: bool = True) -> BlockMask:
    """The BlockMask of ``mask_mod`` for a (B, H, Q_LEN, KV_LEN) score matrix: blocks with
    every element allowed are full (kept apart unless ``separate_full_blocks`` is False),
    blocks with some are partial, the rest skipped. B or H None means 1 (broadcast)."""
    if _is_score_mod(mask_mod):
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    QB, KB = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    if _compile:
        warnings.warn("create_block_mask's _compile flag is deprecated: to compile it, wrap the "
                      "call in ember.compile (the flag is ignored).", DeprecationWarning,
                      stacklevel=2)
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    sums = _block_sums(mask, QB, KB)
    if separate_full_blocks:
        full = sums == QB * KB
        partial = (sums > 0) & (sums < QB * KB)
        full_lists = _dense_to_ordered(full)
    else:
        partial, full_lists = sums > 0, (None, None)
    return BlockMask.from_kv_blocks(*_dense_to_ordered(partial), *full_lists,
                                    BLOCK_SIZE=(QB, KB), mask_mod=mask_mod,
                                    seq_lengths=(Q_LEN, KV_LEN))


def _create_empty_block_mask(query: Tensor, key: Tensor) -> BlockMask:
    """The default mask: one block, larger than any sequence, computed (noop mask_mod)."""
    return BlockMask.from_kv_blocks(
        _op.ones([1, 1, 1], dtype=_dtype.int32, device=query.device),
        _op.zeros([1, 1, 1, 1], dtype=_dtype.int32, device=query.device),
        BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))
