"""einsum: parsing and checks in ``einsum`` (the public function), the contraction in the op.

The public function rewrites any equation into an explicit one with one letter per dimension
(ellipses become fresh letters, the implicit output is spelled out) and expands size-1 dimensions
that broadcast, so the op only ever sees consistent sizes. The op runs numpy's einsum (with its
BLAS-backed path optimisation) and differentiates by einsum again: the gradient of an operand
contracts the output gradient with the conjugates of the other operands.
"""

from __future__ import annotations

import string

import numpy as np

from .._tensor import Tensor
from .creation import eye
from .linalg import _LOW, tname
from .arguments import type_name
from .registry import op

PUBLIC = ["einsum"]

_LETTERS = string.ascii_uppercase + string.ascii_lowercase  # sublist subscript i -> letter i


def _from_sublists(args) -> tuple[str, list]:
    """einsum(op0, sub0, op1, sub1, ..., [out]) -> ("eq", operands)."""
    args = list(args)
    out = args.pop() if len(args) % 2 else None
    ops, terms = args[0::2], args[1::2]

    def letters(sub):
        s = ""
        for i in sub:
            if i is Ellipsis:
                s += "..."
            elif isinstance(i, int) and 0 <= i < 52:
                s += _LETTERS[i]
            else:
                raise ValueError("einsum(): subscript in subscript list is not within the valid "
                                 "range [0, 52)")
        return s

    eq = ",".join(letters(t) for t in terms)
    if out is not None:
        eq += "->" + letters(out)
    return eq, ops


def _split_term(term: str, k: int, offset: int) -> tuple[list[str], int]:
    """A term's subscripts, with "..." as one entry; ``offset`` is its index in the equation."""
    subs, i = [], 0
    while i < len(term):
        c = term[i]
        if c == ".":
            if term[i:i + 3] != "...":
                raise RuntimeError(f"einsum(): found '.' for operand {k} that is not part of any "
                                   "ellipsis")
            if "..." in subs:
                raise RuntimeError(f"einsum(): found '.' for operand {k} for which an ellipsis "
                                   "was already found")
            subs.append("...")
            i += 3
            continue
        if c not in _LETTERS:
            raise RuntimeError(f"einsum(): invalid subscript given at index {offset + i} in the "
                               "equation string, subscripts must be in [a-zA-Z]")
        subs.append(c)
        i += 1
    return subs, i


def _parse(eq: str, shapes: list[tuple]) -> tuple[list[str], str, dict]:
    """Explicit subscripts (one letter per dimension) for each operand and the output, and the
    broadcast size of every letter."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    raw = lhs.split(",")
    if len(raw) > len(shapes):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                           "equation")
    if len(raw) < len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    parsed, offset = [], 0
    for k, term in enumerate(raw):
        parsed.append(_split_term(term, k, offset)[0])
        offset += len(term) + 1
    used = set(eq)
    spare = [c for c in _LETTERS if c not in used]
    ell = 0
    for k, (subs, shape) in enumerate(zip(parsed, shapes)):
        n = len([s for s in subs if s != "..."])
        if "..." not in subs and n != len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n}) does not "
                               f"match the number of dimensions ({len(shape)}) for operand {k} "
                               "and no ellipsis was given")
        if n > len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n}) is more "
                               f"than the number of dimensions ({len(shape)}) for operand {k}")
        if "..." in subs:
            ell = max(ell, len(shape) - n)
    ell_letters = "".join(spare[:ell])
    terms = []
    for subs, shape in zip(parsed, shapes):
        width = len(shape) - (len(subs) - 1)
        terms.append("".join(ell_letters[ell - width:] if s == "..." else s for s in subs))
    sizes: dict = {}
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        seen: dict = {}
        for c, n in zip(term, shape):
            if c in seen and seen[c] != n:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but the "
                                   f"sizes don't match, {n} != {seen[c]}")
            seen[c] = n
            prev = sizes.get(c)
            if prev is not None and n != prev and 1 not in (n, prev):
                if c in ell_letters:
                    raise RuntimeError(f"einsum(): dimension {ell_letters.index(c)} covered by "
                                       f"ellipsis in operand {k}has size {n} which does not "
                                       "broadcast with previously seen ellipsis with size "
                                       f"{prev} for the respective dimension")
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} which "
                                   f"does not broadcast with previously seen size {prev}")
            sizes[c] = n if prev is None or prev == 1 else prev
    if arrow:
        out = ""
        for c in _split_term(rhs, -1, len(lhs) + 2)[0]:
            if c == "...":
                out += ell_letters
                continue
            if c not in sizes:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   "equation for any input operand")
            if c in out:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in "
                                   "the output")
            out += c
    else:  # implicit output: the ellipsis dims, then the letters used once, in ASCII order
        counts: dict = {}
        for t in terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell_letters + "".join(sorted(c for c, n in counts.items()
                                           if n == 1 and c not in ell_letters))
    return terms, out, sizes


def einsum(*args):
    """einsum(equation, *operands) -> Tensor: sums of products over the subscripts of
    ``equation``. Operands may also be passed as one list, or in sublist form
    ``einsum(op0, [0, 1], op1, [1, 2], [0, 2])``."""
    if not args or (isinstance(args[0], str) and len(args) == 1):
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], str):
        eq, ops = args[0], list(args[1:])
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = list(ops[0])
    else:
        eq, ops = _from_sublists(args)
    for k, t in enumerate(ops):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 1, but got "
                            f"{type_name(t)}")
    terms, out, sizes = _parse(eq, [tuple(t.shape) for t in ops])
    for t in ops[1:]:
        if t.dtype is not ops[0].dtype:
            raise RuntimeError(f"expected scalar type {tname(ops[0])} but found {tname(t)}")
    for k, (term, t) in enumerate(zip(terms, ops)):
        full = [sizes[c] for c in term]
        if list(t.shape) != full:  # size-1 dims broadcast against the other operands
            ops[k] = t.expand(full)
    return _einsum(",".join(terms) + "->" + out, ops)


@op("einsum", saves=("operands",), function=False, method=False, out=False,
    grad_name="EinsumBackward0")
def _einsum(xp, equation, operands: "Tensor[]"):
    lhs, out = equation.split("->")
    dt = operands[0].dtype
    summed = set(lhs) - set(out) - {","}
    if dt.kind in "biu" and summed and len(operands) == 1:
        operands = [operands[0].astype(np.int64)]  # a plain sum: integers accumulate as int64
    elif dt == np.bool_ and summed:
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    elif dt in _LOW:
        r = xp.einsum(equation, *[a.astype(np.float32) for a in operands],
                      optimize=len(operands) > 1)
        return xp.asarray(r).astype(dt)
    r = xp.asarray(xp.einsum(equation, *operands, optimize=len(operands) > 1))
    if any(xp.may_share_memory(r, a) for a in operands):
        r = r.copy()  # numpy returns views for pure relabelings ("ij->ji", "ii->i")
    return r


@_einsum.def_backward
def _(ctx, g):
    lhs, out = ctx.equation.split("->")
    terms = lhs.split(",")
    ops = ctx.operands
    return [_operand_grad(k, terms, out, ops, g) if ops[k].requires_grad else None
            for k in range(len(ops))]


def _operand_grad(k: int, terms: list[str], out: str, ops: list, g):
    """d(einsum)/d(operand k): contract g with the other operands' conjugates, then broadcast
    letters only operand k has and put repeated letters back on their diagonal."""
    subs = terms[k]
    others = [j for j in range(len(terms)) if j != k]
    avail = set(out).union(*(terms[j] for j in others))
    uniq = list(dict.fromkeys(subs))
    keep = "".join(c for c in uniq if c in avail)
    eq = ",".join([out] + [terms[j] for j in others]) + "->" + keep
    gk = _einsum(eq, [g] + [ops[j].conj() for j in others])
    size = dict(zip(subs, ops[k].shape))
    if len(keep) < len(uniq):  # letters summed inside operand k alone: broadcast back
        for i, c in enumerate(uniq):
            if c not in avail:
                gk = gk.unsqueeze(i)
        gk = gk.expand([size[c] for c in uniq])
    if len(uniq) < len(subs):  # "ii": each repeat gets a fresh letter tied by an identity
        spare = iter(c for c in _LETTERS if c not in "".join(terms) + out)
        renamed, eye_terms, eyes, seen = "", [], [], set()
        for c in subs:
            if c in seen:
                n = next(spare)
                renamed += n
                eye_terms.append(c + n)
                eyes.append(eye(size[c], dtype=g.dtype, device=g.device))
            else:
                renamed += c
                seen.add(c)
        gk = _einsum(",".join(["".join(uniq)] + eye_terms) + "->" + renamed, [gk] + eyes)
    return gk
