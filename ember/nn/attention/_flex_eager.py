"""FlexAttention's reference computation, written with ember ops only (so it runs on every
backend and autograd differentiates it, captured tensors of score_mod/mask_mod included).

``blockwise`` walks the BlockMask: for each row of query blocks it visits only the KV blocks
the mask computes, in chunks of consecutive blocks; chunks of blocks that are full for every
(batch, head) skip ``mask_mod``, the others apply it (and keep full blocks whole). Softmax is
online in float32 (float64 for float64 inputs): a running row maximum, sum of exponentials and
weighted sum of values, so one step holds (B, H, Q_BLOCK, chunk) scores, not (L, S). The
maximum is a stabiliser only (the result does not depend on it), so it is detached from the
graph. Rows with no allowed key give 0 and a log-sum-exp of -inf, as PyTorch's do.

``dense`` is the same computation as one tile, with the block tables expanded to elements by
ops (no host reads): ``ember.compile`` captures it as a graph, where ``blockwise`` would need
the BlockMask's values on the host.

The fused kernels (issue 15/16: Triton on CUDA, C on CPU) plug in under ``flex_attention``
and must agree with these.
"""

from __future__ import annotations

import math

from ... import _dtype
from ..._tensor import Tensor
from ._flex_block_mask import (_LARGE_SPARSE_BLOCK_SIZE, INDEX_DTYPE, BlockMask, _identity, _op,
                               index_grids, noop_mask)

Q_TILE = 128      # query rows per step when the mask has no blocks of its own
KV_CHUNK = 1024   # at most this many key columns per step (whole blocks, at least one)


def _full_mask(bm: BlockMask) -> bool:
    return bm.BLOCK_SIZE[0] == _LARGE_SPARSE_BLOCK_SIZE and \
        bm.BLOCK_SIZE[1] == _LARGE_SPARSE_BLOCK_SIZE


class _Problem:
    """The tensors and sizes of one call, in the working precision."""

    def __init__(self, q, k, v, score_mod, mask_mod, scale):
        wd = _dtype.float64 if q.dtype == _dtype.float64 else _dtype.float32
        self.wd = wd
        self.q, self.k, self.v = q.to(wd), k.to(wd), v.to(wd)
        self.B, self.Hq, self.L, _ = q.shape
        self.Hkv, self.S, self.Ev = k.shape[1], k.shape[2], v.shape[-1]
        self.G = self.Hq // self.Hkv
        self.score_mod = None if score_mod is _identity else score_mod
        self.mask_mod = None if mask_mod is noop_mask else mask_mod
        self.scale = scale
        self.device = q.device

    def scores(self, qs: int, qe: int, cs: int, ce: int) -> Tensor:
        """(B, Hq, qe - qs, ce - cs) scaled scores after score_mod, in the working dtype."""
        B, Hq, G, lq = self.B, self.Hq, self.G, qe - qs
        qb = self.q[:, :, qs:qe]
        if G > 1:  # query heads h = hk * G + g share key head hk
            qb = qb.reshape(B, self.Hkv, G * lq, qb.shape[-1])
        s = _op.matmul(qb, self.k[:, :, cs:ce].transpose(-2, -1)).view(B, Hq, lq, ce - cs)
        s = s * self.scale
        if self.score_mod is not None:
            grids = index_grids(B, Hq, qs, qe, cs, ce, self.device)
            out = self.score_mod(s, *grids)
            if not isinstance(out, Tensor):
                out = _op.full((), out, dtype=self.wd, device=self.device)
            s = out.to(self.wd).expand(s.shape)
        return s

    def mask(self, qs: int, qe: int, cs: int, ce: int) -> Tensor:
        """mask_mod over a tile (checked to be bool, as PyTorch's ``where`` does)."""
        grids = index_grids(self.B, self.Hq, qs, qe, cs, ce, self.device)
        m = self.mask_mod(*grids)
        if not isinstance(m, Tensor):
            m = _op.full((), bool(m), dtype=_dtype.bool_, device=self.device)
        return m

    def values(self, p: Tensor, cs: int, ce: int) -> Tensor:
        """(B, Hq, lq, Ev) products of probabilities p (B, Hq, lq, lc) with the value rows."""
        B, Hq, lq, lc = p.shape
        if self.G > 1:
            p = p.reshape(B, self.Hkv, self.G * lq, lc)
        return _op.matmul(p, self.v[:, :, cs:ce]).view(B, Hq, lq, self.Ev)


class _Online:
    """Running softmax statistics of one block of query rows."""

    def __init__(self, pb: _Problem, lq: int):
        shape = (pb.B, pb.Hq, lq)
        self.m = _op.full(shape, -math.inf, dtype=pb.wd, device=pb.device)
        self.l = _op.zeros(shape, dtype=pb.wd, device=pb.device)
        self.acc = _op.zeros(shape + (pb.Ev,), dtype=pb.wd, device=pb.device)
        self.empty = True  # no chunk added yet: nothing to rescale

    def add(self, pb: _Problem, s: Tensor, cs: int, ce: int) -> None:
        m_new = s.detach().amax(dim=-1)
        if not self.empty:
            m_new = _op.maximum(self.m, m_new)
        safe = _op.where(_op.isneginf(m_new), 0.0, m_new)
        p = _op.exp(s - safe.unsqueeze(-1))
        if self.empty:
            self.l, self.acc = p.sum(dim=-1), pb.values(p, cs, ce)
        else:
            alpha = _op.exp(self.m - safe)
            self.l = self.l * alpha + p.sum(dim=-1)
            self.acc = self.acc * alpha.unsqueeze(-1) + pb.values(p, cs, ce)
        self.m, self.empty = m_new, False

    def result(self) -> tuple[Tensor, Tensor, Tensor]:
        empty = self.l == 0
        l_safe = _op.where(empty, 1.0, self.l)
        out = self.acc / l_safe.unsqueeze(-1)
        safe = _op.where(_op.isneginf(self.m), 0.0, self.m)
        lse = _op.where(empty, -math.inf, safe + _op.log(l_safe))
        return out, lse, self.m


def _host_tables(bm: BlockMask):
    """Per (query block, kv block), over all (batch, head) of the mask: any partial, any
    full, all full (Python lists), and the partial/full tables as bool tensors."""
    partial, full = bm.block_tables()
    partial = partial.to(_dtype.bool_)
    any_p = partial.to(_dtype.int32).amax(dim=(0, 1)).tolist() if partial.dim() == 4 else \
        partial.to(_dtype.int32).tolist()
    if full is None:
        rows, cols = len(any_p), len(any_p[0]) if any_p else 0
        zeros = [[0] * cols for _ in range(rows)]
        return partial, None, any_p, zeros, zeros
    full = full.to(_dtype.bool_)
    fi = full.to(_dtype.int32)
    any_f = fi.amax(dim=(0, 1)).tolist() if fi.dim() == 4 else fi.tolist()
    all_f = fi.amin(dim=(0, 1)).tolist() if fi.dim() == 4 else fi.tolist()
    return partial, full, any_p, any_f, all_f


def _as4(t: Tensor) -> Tensor:
    while t.dim() < 4:
        t = t.unsqueeze(0)
    return t


def _expand_blocks(tab: Tensor, i: int, j0: int, j1: int, KB: int, lc: int) -> Tensor:
    """The (Bm, Hm, 1, lc) element flags of blocks j0..j1-1 of block row i."""
    t = _as4(tab)[:, :, i, j0:j1]
    return _op.repeat_interleave(t, KB, dim=-1)[..., :lc].unsqueeze(-2)


def _chunks(need: list, cls: list, KB: int, S: int):
    """Runs of consecutive needed blocks of one class, at most KV_CHUNK columns each."""
    per = max(1, KV_CHUNK // KB)
    j, n = 0, len(need)
    while j < n:
        if not need[j]:
            j += 1
            continue
        j1 = j + 1
        while j1 < n and need[j1] and cls[j1] == cls[j] and j1 - j < per:
            j1 += 1
        yield j, j1, j * KB, min(j1 * KB, S), cls[j]
        j = j1


def blockwise(q, k, v, score_mod, bm: BlockMask, scale: float):
    """(out in the working dtype, lse, row max) walking ``bm``'s blocks (module docstring)."""
    pb = _Problem(q, k, v, score_mod, bm.mask_mod, scale)
    L, S = pb.L, pb.S
    outs, lses, maxes = [], [], []
    if _full_mask(bm):
        QB, KB = Q_TILE, min(KV_CHUNK, max(S, 1))
        nK = -(-S // KB)
        tables = None
        computed = bool(bm.kv_num_blocks.sum().item()) or (
            bm.full_kv_num_blocks is not None and bool(bm.full_kv_num_blocks.sum().item()))
        mixed = pb.mask_mod is not None
    else:
        QB, KB = bm.BLOCK_SIZE
        nK = -(-S // KB)
        partial, full, any_p, any_f, all_f = _host_tables(bm)
        tables = (partial, full)
    for i in range(-(-L // QB)):
        qs, qe = i * QB, min((i + 1) * QB, L)
        if tables is None:
            need, cls = [computed] * nK, ["mixed" if mixed else "full"] * nK
        else:
            need = [bool(any_p[i][j] or any_f[i][j]) for j in range(nK)]
            # full everywhere, or partial where the mask_mod allows everything: no mask
            cls = ["full" if all_f[i][j] or (pb.mask_mod is None and not any_f[i][j])
                   else "mixed" for j in range(nK)]
        st = _Online(pb, qe - qs)
        for j0, j1, cs, ce, kind in _chunks(need, cls, KB, S):
            s = pb.scores(qs, qe, cs, ce)
            if kind == "mixed":
                m = pb.mask(qs, qe, cs, ce) if pb.mask_mod is not None else None
                if tables is None:
                    allowed = m
                else:
                    pf = _expand_blocks(tables[0], i, j0, j1, KB, ce - cs)
                    ff = None if tables[1] is None else \
                        _expand_blocks(tables[1], i, j0, j1, KB, ce - cs)
                    if m is None:
                        allowed = pf if ff is None else pf | ff
                    else:
                        allowed = _op.where(m, pf if ff is None else pf | ff,
                                          False if ff is None else ff)
                s = _op.where(allowed, s, -math.inf)
            st.add(pb, s, cs, ce)
        out, lse, mx = st.result()
        outs.append(out)
        lses.append(lse)
        maxes.append(mx)
    if not outs:  # no query rows
        shape = (pb.B, pb.Hq, 0)
        z = _op.zeros(shape, dtype=pb.wd, device=pb.device)
        return _op.zeros(shape + (pb.Ev,), dtype=pb.wd, device=pb.device), z, z
    if len(outs) == 1:
        return outs[0], lses[0], maxes[0]
    return _op.cat(outs, dim=2), _op.cat(lses, dim=2), _op.cat(maxes, dim=2)


def dense(q, k, v, score_mod, bm: BlockMask, scale: float):
    """The same result as ``blockwise`` as one tile, reading no tensor's values on the host
    (what ``ember.compile`` captures)."""
    pb = _Problem(q, k, v, score_mod, bm.mask_mod, scale)
    L, S = pb.L, pb.S
    s = pb.scores(0, L, 0, S)
    if not _full_mask(bm):
        QB, KB = bm.BLOCK_SIZE
        partial, full = bm.block_tables()
        rows = _op.arange(L, dtype=INDEX_DTYPE, device=pb.device) // QB
        cols = _op.arange(S, dtype=INDEX_DTYPE, device=pb.device) // KB

        def expand(tab):
            return _as4(tab).to(_dtype.bool_).index_select(2, rows).index_select(3, cols)
        pf = expand(partial)
        ff = None if full is None else expand(full)
        if pb.mask_mod is None:
            allowed = pf if ff is None else pf | ff
        else:
            allowed = _op.where(pb.mask(0, L, 0, S), pf if ff is None else pf | ff,
                              False if ff is None else ff)
        s = _op.where(allowed, s, -math.inf)
    elif pb.mask_mod is not None:
        s = _op.where(pb.mask(0, L, 0, S), s, -math.inf)
    st = _Online(pb, L)
    st.add(pb, s, 0, S)
    return st.result()
