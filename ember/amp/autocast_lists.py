"""What autocast does to each op of ember's op table, per device type: data for ``autocast.py``.

Policies (how the float tensors of the device's type among an op's arguments are cast; float64
tensors are never cast):

    lower     to the autocast dtype (float16 / bfloat16)
    fp32      to float32
    promote   to the widest of their dtypes and the autocast dtype (float32 wins); a half type
              other than the autocast dtype is PyTorch's error
    banned    PyTorch's error: the op is unsafe to autocast on that device

Ops not listed run unchanged. The tables are keyed by ember op name; an op that ember only
reaches from a public function of another name (``nll_loss_nd`` from ``F.nll_loss``,
``_separable_map`` from ``F.interpolate``) follows what PyTorch does to that function.

How they were derived (``tests/autocast_derive.py`` re-derives them; ``tests/test_autocast.py``
checks ember against torch case by case): each op's sample call (``tests/autocast_cases.py``)
was run with torch 2.13 under autocast with float32, autocast-dtype and other-half-dtype
inputs, and the output dtypes sorted the op into a policy (float32 in, half out: lower; half
in, float32 out: fp32; the other half type refused: promote; refused under autocast only:
banned). CPU ran on CPU tensors; CUDA ran on torch's fake CUDA tensors, which reach torch's
CUDA autocast kernels without a GPU. The set of aten ops that have an autocast kernel of their
own (``torch._C._dispatch_has_kernel_for_dispatch_key``) was used to check that no op ember
has was missed. For CUDA this agrees with PyTorch's public "Autocast Op Reference" lists
(which lag behind torch: ``einsum`` and ``vdot`` have CUDA autocast kernels they do not name).
"""

from __future__ import annotations

CPU = {
    "lower": frozenset((
        "addbmm", "addmm", "baddbmm", "bmm", "mm", "matmul", "einsum", "linear",
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "prelu",
        # nn.LSTM's recurrence, ember's own op: it stands for torch's CPU LSTM layer
        # (mkldnn_rnn_layer), a lower-precision op
        "_lstm_layer",
    )),
    "fp32": frozenset((
        "prod", "trace", "polar", "view_as_complex",
        "inverse", "linalg_cholesky", "linalg_eigh", "linalg_eigvalsh", "linalg_qr",
        "linalg_solve", "linalg_svd", "linalg_svdvals",
        # torch.pinverse is an fp32 op; torch.linalg.pinv is a composition on CPU (SVD in
        # float32, then a lower-precision matmul: half out). ember's one op computes in float32
        # for both, since it has no half-precision kernel.
        "linalg_pinv",
        "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d_with_indices",
        # torch's max_pool3d is an fp32 op, its max_pool3d_with_indices (return_indices=True)
        # is not; ember's F.max_pool3d calls this op either way
        "max_pool3d_with_indices",
        "_max_unpool",  # F.max_unpool1d/2d/3d
        "nll_loss_nd",  # F.nll_loss, F.cross_entropy's second half
        "binary_cross_entropy_op",  # F.binary_cross_entropy
        # torch.fft: all but the hfft2/hfftn/ihfft2/ihfftn family (no CPU autocast kernel)
        "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_rfft",
        "fft_irfft", "fft_rfft2", "fft_irfft2", "fft_rfftn", "fft_irfftn", "fft_hfft",
        "fft_ihfft",
    )),
    "promote": frozenset(("cat", "stack", "index_copy")),
    "banned": frozenset(),
}

# Ops whose policy depends on an argument: op -> (policy, selector, the selector's values that
# take the policy). The selectors are functions of the call in ``autocast.py``.
CPU_WHEN = {
    # F.pad: torch's reflection_pad1d/2d and replication_pad1d/2d/3d kernels are fp32 ops
    "pad": ("fp32", "pad_mode_dims", frozenset((("reflect", 1), ("reflect", 2), ("replicate", 1),
                                                ("replicate", 2), ("replicate", 3)))),
}

CUDA = {
    "lower": frozenset((
        "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "mm", "mv", "matmul", "einsum",
        "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "prelu",
        "_fused_attention",  # F.scaled_dot_product_attention's fused kernel (torch: lower)
        "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell",
    )),
    "fp32": frozenset((
        "acos", "asin", "cosh", "sinh", "tan", "erfinv", "exp", "expm1", "log", "log10", "log1p",
        "log2", "reciprocal", "rsqrt", "pow", "square", "softplus",
        "prod", "sum", "sum_to_size", "cumprod", "cumsum", "logsumexp", "softmax", "log_softmax",
        "norm", "linalg_vector_norm",
        "native_layer_norm",  # F.layer_norm
        "native_group_norm",  # F.group_norm
        "_fused_rms_norm",  # F.rms_norm
        "_index_map", "_separable_map",  # F.interpolate (torch's upsample_* kernels)
        "nll_loss_nd",
        # nn.LSTM's recurrence, ember's own op: torch's CUDA LSTM (cuDNN's) has no autocast
        # kernel and runs in its input's float32
        "_lstm_layer",
    )),
    "promote": frozenset(("addcdiv", "addcmul", "atan2", "dot", "vdot", "index_put",
                          "scatter_add")),
    "banned": frozenset(("binary_cross_entropy_op",)),
}

CUDA_WHEN = {
    # ``2 / x``: torch computes x.reciprocal() * 2, and reciprocal is an fp32 op
    "div": ("fp32", "number_first", frozenset((True,))),
}

# PyTorch's error for a banned op, per op
BANNED_MESSAGE = {
    "binary_cross_entropy_op": (
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
        "In this case, combine the two layers using "
        "torch.nn.functional.binary_cross_entropy_with_logits\n"
        "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
        "safe to autocast."),
}

# device type -> (policy table, conditional policies); device types without an entry (xla,
# mps, ...) have no ember tensors, so autocast for them changes nothing
TABLES = {"cpu": (CPU, CPU_WHEN), "cuda": (CUDA, CUDA_WHEN)}
