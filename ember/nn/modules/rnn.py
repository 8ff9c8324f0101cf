"""Recurrent layers: RNN, LSTM, GRU and their single-step cells.

Parameter names and shapes are PyTorch's (``weight_ih_l{k}[_reverse]``, ``weight_hh_l{k}``,
``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}`` for LSTM projections; gates stacked
in PyTorch's order: LSTM i, f, g, o; GRU r, z, n), so state dicts interchange.

Speed: each layer and direction projects the whole input sequence with one matmul (the
hidden bias folded in where the gate math allows). An LSTM without projections then runs the
recurrence as one op, ``_lstm_layer`` (ops/rnn_layers.py: per step one product and one fused
cell kernel on CUDA, forward and backward, and no autograd node per step). GRU and projected
LSTM loop over time in Python: one matmul per step and the gate math as one fused cell op
(``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell``, ops/rnn_cells.py); RNN's steps are an
addmm and its activation. Everything is ember ops, so gradients of any order come from the
op table.
"""

from __future__ import annotations

import math
import numbers
import warnings

from ..._tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .utils import empty_param

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


# ---------------------------------------------------------------------- one time step
def _same_dtype(*tensors):
    """The tensors in their promoted dtype where they differ (autocast gives a step's
    products a lower precision than the carried state; the fused cells take one dtype)."""
    dt = tensors[0].dtype
    if all(t.dtype == dt for t in tensors):
        return tensors
    from ..._dtype import promote_types
    for t in tensors[1:]:
        dt = promote_types(dt, t.dtype)
    return tuple(t.to(dt) for t in tensors)


def _simple_act(mode: str):
    return Tensor.tanh if mode == "RNN_TANH" else Tensor.relu


# ---------------------------------------------------------------------- sequence modules
class RNNBase(Module):
    """The shared machinery of RNN, LSTM and GRU; ``mode`` is "RNN_TANH", "RNN_RELU", "LSTM"
    or "GRU"."""

    __constants__ = ("mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first",
                     "dropout", "bidirectional", "proj_size")

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                  ("input_size", input_size, int),
                                  ("hidden_size", hidden_size, int)):
            if not isinstance(value, kind):
                raise TypeError(f"{name} should be of type {kind.__name__}, got: "
                                f"{type(value).__name__}")
            if kind is int and value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        out_size = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(2 if bidirectional else 1):
                in_size = input_size if layer == 0 else out_size * (2 if bidirectional else 1)
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, in_size)),
                          ("weight_hh", (gate_size, out_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for stem, shape in shapes:
                    name = f"{stem}_l{layer}{suffix}"
                    setattr(self, name, empty_param(*shape, device=device, dtype=dtype))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list]:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """Kept for PyTorch compatibility: ember's weights need no flat buffer."""

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # -------------------------------------------------------------- argument checks
    def check_input(self, input: Tensor, batch_sizes=None) -> None:
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({input.dtype})")
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes=None) -> tuple[int, int, int]:
        batch = input.size(0) if self.batch_first else input.size(1)
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple,
                          msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor, batch_sizes=None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        return hx

    # -------------------------------------------------------------- the recurrence
    def _batch_input(self, input: Tensor, name: str, tensor_word: str):
        """(input as a 3-D batched tensor, whether it was batched), with PyTorch's check;
        ``tensor_word`` reproduces a wording difference between PyTorch's messages."""
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D"
                             f"{tensor_word} instead")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
        return input, batched

    def _run(self, input: Tensor, h0: Tensor, c0: Tensor | None):
        """The stacked recurrence over a batched input; returns (output, h_n, c_n)."""
        from ...ops.joining import cat, stack
        x = input.transpose(0, 1) if self.batch_first else input
        if x.size(0) == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        dirs = 2 if self.bidirectional else 1
        h_last, c_last = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                out, h, c = self._direction(x, h0[k], None if c0 is None else c0[k],
                                            self._all_weights[k], reverse=d == 1)
                outs.append(out)
                h_last.append(h)
                c_last.append(c)
            x = outs[0] if dirs == 1 else cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        out = x.transpose(0, 1) if self.batch_first else x
        return out, stack(h_last), (stack(c_last) if c0 is not None else None)

    def _direction(self, x: Tensor, h: Tensor, c: Tensor | None, names: list[str],
                   reverse: bool):
        """One layer in one direction over (T, B, I); returns (outputs (T, B, H), h, c)."""
        from ...ops.joining import stack
        from ...ops.linalg import addmm, mm
        from ...ops.rnn_cells import _thnn_fused_gru_cell, _thnn_fused_lstm_cell
        from ...ops.rnn_layers import _lstm_layer
        params = [getattr(self, n) for n in names]
        w_ih, w_hh = params[0], params[1]
        b_ih, b_hh = (params[2], params[3]) if self.bias else (None, None)
        w_hr = params[-1] if self.proj_size > 0 else None
        steps = range(x.size(0) - 1, -1, -1) if reverse else range(x.size(0))
        outs: list = [None] * x.size(0)
        w_hh_t = w_hh.t()
        if self.mode == "GRU":
            # the n gate sees r * (W_hn h + b_hn): b_hh stays in the step's product
            xs = F.linear(x, w_ih, b_ih).unbind(0)
            cell = _thnn_fused_gru_cell
            for t in steps:
                hg = mm(h, w_hh_t) if b_hh is None else addmm(b_hh, h, w_hh_t)
                h = cell(*_same_dtype(xs[t], hg, h))[0]
                outs[t] = h
            return stack(outs), h, None
        bias = None if b_ih is None else b_ih + b_hh
        if self.mode == "LSTM" and w_hr is None:
            # the whole recurrence as one op (ops/rnn_layers.py)
            out, h, c, _, _ = _lstm_layer(F.linear(x, w_ih, bias), h, c, w_hh, reverse)
            return out, h, c
        xs = F.linear(x, w_ih, bias).unbind(0)
        if self.mode == "LSTM":  # with projections: one fused cell op per step
            cell = _thnn_fused_lstm_cell
            w_hr_t = w_hr.t()
            for t in steps:
                h, c, _ = cell(*_same_dtype(xs[t], mm(h, w_hh_t), c))
                h = mm(h, w_hr_t)
                outs[t] = h
            return stack(outs), h, c
        act = _simple_act(self.mode)
        for t in steps:
            h = act(addmm(xs[t], h, w_hh_t))
            outs[t] = h
        return stack(outs), h, None

    def _zeros(self, input: Tensor, size: int) -> Tensor:
        from ...ops.creation import zeros
        batch = input.size(0) if self.batch_first else input.size(1)
        return zeros((self.num_layers * (2 if self.bidirectional else 1), batch, size),
                     dtype=input.dtype, device=input.device)

    def _forward_single_state(self, input: Tensor, hx: Tensor | None, name: str,
                              tensor_word: str):
        """RNN and GRU: one hidden state tensor."""
        input, batched = self._batch_input(input, name, tensor_word)
        if hx is not None:
            if not batched and hx.dim() != 2:
                raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                   f"{hx.dim()}-D tensor")
            if batched and hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{hx.dim()}-D tensor")
            if not batched:
                hx = hx.unsqueeze(1)
        else:
            hx = self._zeros(input, self.hidden_size)
        self.check_forward_args(input, hx)
        out, h, _ = self._run(input, hx, None)
        if not batched:
            out = out.squeeze(0 if self.batch_first else 1)
            h = h.squeeze(1)
        return out, h


class RNN(RNNBase):
    """``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)``:
    h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh). ``forward(input, hx=None) ->
    (output, h_n)``."""

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return self._forward_single_state(input, hx, "RNN", " tensor")


class GRU(RNNBase):
    """``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)``; ``forward(input, hx=None) ->
    (output, h_n)``."""

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return self._forward_single_state(input, hx, "GRU", "")


class LSTM(RNNBase):
    """``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
    dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None)``;
    ``forward(input, hx=None) -> (output, (h_n, c_n))`` with ``hx = (h_0, c_0)``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input: Tensor, batch_sizes=None) -> tuple[int, int, int]:
        batch = input.size(0) if self.batch_first else input.size(1)
        return (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)

    def check_forward_args(self, input: Tensor, hidden, batch_sizes=None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
        input, batched = self._batch_input(input, "LSTM", "")
        if hx is None:
            real = self.proj_size if self.proj_size > 0 else self.hidden_size
            hx = (self._zeros(input, real), self._zeros(input, self.hidden_size))
        else:
            nd = 3 if batched else 2
            if hx[0].dim() != nd or hx[1].dim() != nd:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {nd}-D but got "
                                   f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            if not batched:
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        self.check_forward_args(input, hx)
        out, h, c = self._run(input, hx[0], hx[1])
        if not batched:
            out = out.squeeze(0 if self.batch_first else 1)
            h, c = h.squeeze(1), c.squeeze(1)
        return out, (h, c)


# ---------------------------------------------------------------------- cells
class RNNCellBase(Module):
    """Parameters of a single-step cell: weight_ih (G, I), weight_hh (G, H), bias_ih, bias_hh
    with G = num_chunks * hidden_size."""

    __constants__ = ("input_size", "hidden_size", "bias")

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        g = num_chunks * hidden_size
        self.weight_ih = empty_param(g, input_size, device=device, dtype=dtype)
        self.weight_hh = empty_param(g, hidden_size, device=device, dtype=dtype)
        if bias:
            self.bias_ih = empty_param(g, device=device, dtype=dtype)
            self.bias_hh = empty_param(g, device=device, dtype=dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += f", bias={self.bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, name: str, input: Tensor, states) -> tuple[Tensor, list, bool]:
        """Checks; batches an unbatched call; zero states where none are given."""
        from ...ops.creation import zeros
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             "instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        out = []
        for s in states:
            s = (zeros((input.size(0), self.hidden_size), dtype=input.dtype,
                       device=input.device) if s is None
                 else s if batched else s.unsqueeze(0))
            out.append(s)
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} "
                               f"expected {self.input_size}")
        for k, s in enumerate(out):
            if s.size(0) != input.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{k} "
                                   f"batch size {s.size(0)}")
            if s.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {s.size(1)}, "
                                   f"expected {self.hidden_size}")
        return input, out, batched

    def _gates(self, input: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        return F.linear(input, self.weight_ih, self.bias_ih), \
            F.linear(h, self.weight_hh, self.bias_hh)


class RNNCell(RNNCellBase):
    """``RNNCell(input_size, hidden_size, bias=True, nonlinearity='tanh', device=None,
    dtype=None)``; ``forward(input, hx=None) -> h'``."""

    __constants__ = ("input_size", "hidden_size", "bias", "nonlinearity")

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"RNNCell: Expected hidden to be 1D or 2D, got {hx.dim()}D "
                             "instead")
        input, (h,), batched = self._prepare("RNNCell", input, [hx])
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        xg, hg = self._gates(input, h)
        h = _simple_act("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU")(xg + hg)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """``LSTMCell(input_size, hidden_size, bias=True, device=None, dtype=None)``;
    ``forward(input, hx=None) -> (h', c')`` with ``hx = (h, c)``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
        if hx is not None:
            for k, s in enumerate(hx):
                if s.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{k}] to be 1D or 2D, got "
                                     f"{s.dim()}D instead")
        input, (h, c), batched = self._prepare("LSTMCell", input,
                                               [None, None] if hx is None else list(hx))
        from ...ops.rnn_cells import _thnn_fused_lstm_cell
        xg = F.linear(input, self.weight_ih)
        hg = F.linear(h, self.weight_hh)
        xg, hg, c = _same_dtype(xg, hg, c)
        b_ih, b_hh = self.bias_ih, self.bias_hh
        if b_ih is not None and b_ih.dtype != xg.dtype:
            b_ih, b_hh = b_ih.to(xg.dtype), b_hh.to(xg.dtype)
        h, c, _ = _thnn_fused_lstm_cell(xg, hg, c, b_ih, b_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """``GRUCell(input_size, hidden_size, bias=True, device=None, dtype=None)``;
    ``forward(input, hx=None) -> h'``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected hidden to be 1D or 2D, got {hx.dim()}D "
                             "instead")
        input, (h,), batched = self._prepare("GRUCell", input, [hx])
        from ...ops.rnn_cells import _thnn_fused_gru_cell
        xg = F.linear(input, self.weight_ih)
        hg = F.linear(h, self.weight_hh)
        xg, hg, h = _same_dtype(xg, hg, h)
        b_ih, b_hh = self.bias_ih, self.bias_hh
        if b_ih is not None and b_ih.dtype != xg.dtype:
            b_ih, b_hh = b_ih.to(xg.dtype), b_hh.to(xg.dtype)
        h = _thnn_fused_gru_cell(xg, hg, h, b_ih, b_hh)[0]
        return h if batched else h.squeeze(0)
