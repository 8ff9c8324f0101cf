"""Padding helpers for variable-length sequences."""

from __future__ import annotations


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right"):
    """Stack tensors of shape (L_i, *) into (max L, B, *) (or (B, max L, *)), padding."""
    from ...ops.creation import full
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    if len(sequences) == 0:
        raise RuntimeError("received an empty list of sequences")
    seqs = list(sequences)
    longest = max(s.size(0) for s in seqs)
    trail = tuple(seqs[0].shape[1:])
    out = full((len(seqs), longest) + trail, padding_value, dtype=seqs[0].dtype)
    rows = []
    for i, s in enumerate(seqs):
        n = s.size(0)
        pad = longest - n
        if pad:
            filler = out[i, :pad] if padding_side == "left" else out[i, n:]
            from ...ops.joining import cat
            rows.append(cat([filler, s]) if padding_side == "left" else cat([s, filler]))
        else:
            rows.append(s)
    from ...ops.joining import stack
    res = stack(rows)
    return res if batch_first else res.transpose(0, 1)
