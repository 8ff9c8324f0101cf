"""Which ops run on float8 tensors: PyTorch 2.13's CPU build, as one table.

float8 is a storage type in PyTorch: copies, views, joins, indexing, conversions and a few
kernels (mul, abs, eq/ne, mm) accept it; everything else raises ``NotImplementedError:
"<kernel>" not implemented for 'Float8_e4m3fn'``, naming the C++ kernel that refused. The
dispatcher asks ``check`` before an op's impl whenever a float8 tensor reaches an op that is
not simply supported (``rule(op)`` is not True), so a new op refuses float8 until it is
listed here.

For a pointwise op the dtype that counts is the one it computes in: PyTorch's promotion runs
first (float8 with another dtype is its RuntimeError), and a float8 zero-dim tensor beside a
float32 tensor is just a number (``ones(3) * tensor(2., dtype=float8)`` is float32 and fine).
"""

from __future__ import annotations

from .. import _dtype as D

# ops that accept float8 as they accept any dtype (views are always in)
SUPPORTED = frozenset((
    "_to_copy", "_to_device", "_view_take", "_index_map", "as_strided", "clone", "copy", "fill",
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "eye", "cat", "stack", "repeat", "roll", "diag", "diag_embed", "index",
    "index_put", "index_select", "masked_select", "repeat_interleave", "where", "unfold",
    "tensor_split", "split", "unbind", "abs", "eq", "ne", "isnan", "isreal", "all", "any", "mm",
    "addmm", "linear"))


def _scalar_path(name: str, tensors_ok: bool):
    # PyTorch's mul and div take a CPU scalar (a number anywhere, a zero-dim tensor second)
    # through a "reduced float" kernel without float8; of two tensors mul has float8, div not
    def rule(args, kwargs):
        a, b = args[0], args[1] if len(args) > 1 else kwargs.get("other")
        if getattr(a, "ndim", None) is None or not getattr(b, "ndim", 0):
            return f"{name}_cpu_reduced_float"
        return None if tensors_ok else ""
    return rule


def _flips_last(dims, ndim: int) -> bool:
    return any(d % max(ndim, 1) == ndim - 1 for d in dims)


def _flip(args, kwargs):
    # PyTorch copies whole rows unless the last dim is flipped; that case is a kernel
    x, dims = args[0], args[1] if len(args) > 1 else kwargs.get("dims", ())
    dims = (dims,) if isinstance(dims, int) else dims
    return "flip_cpu" if _flips_last(dims, x.ndim) else None


def _rot90(args, kwargs):
    x = args[0]
    k = (args[1] if len(args) > 1 else kwargs.get("k", 1)) % 4
    dims = tuple(args[2] if len(args) > 2 else kwargs.get("dims", (0, 1)))
    flipped = {0: (), 1: dims[1:], 2: dims, 3: dims[:1]}[k]  # rot90 is flips and a transpose
    return "flip_cpu" if _flips_last(flipped, x.ndim) else None


def _pad(args, kwargs):
    mode = args[2] if len(args) > 2 else kwargs.get("mode", "constant")
    n = len(args[1] if len(args) > 1 else kwargs["pad"]) // 2
    return {"reflect": f"reflection_pad{n}d", "replicate": f"replication_pad{n}d"}.get(mode)


def _matmul(args, kwargs):
    a, b = args[0], args[1] if len(args) > 1 else kwargs.get("other")
    if a.ndim == 1 and b.ndim == 1:
        return "dot"
    if a.ndim == 1 or b.ndim == 1:
        return "addmv_impl_cpu"
    return "bmm" if b.ndim > 2 else None  # a batch of a by one matrix folds into one mm


def _with_inf(kernel):
    # float8_e5m2 has infinities and these kernels; float8_e4m3fn has neither
    return lambda args, kwargs: None if args[0].dtype is D.float8_e5m2 else kernel


def _equal(args, kwargs):
    a, b = args[0], args[1]
    # PyTorch answers a tensor compared with itself by checking it for NaN
    return "equal_notnan_cpu" if a is b else None


# ops that accept float8 only in some calls: rule(args, kwargs) -> the refusing kernel or None
RULES = {"mul": _scalar_path("mul", True), "div": _scalar_path("div", False), "pad": _pad,
         "flip": _flip, "rot90": _rot90, "matmul": _matmul, "equal": _equal,
         "isinf": _with_inf("isinf"), "isfinite": _with_inf("isfinite")}

# the kernel PyTorch names when it refuses, where it is not "<op>_cpu"
KERNEL = {
    "add": "add_stub", "sub": "add_stub", "true_divide": "div_cpu",
    "isclose": "mul_cpu_reduced_float", "allclose": "mul_cpu_reduced_float",
    "sum": "sum_cpu", "mean": "sum_cpu", "nansum": "nansum_cpu", "sum_to_size": "sum_cpu",
    "max": "max_all", "min": "min_all", "prod": "prod_out_cpu", "cumsum": "cumsum_out_cpu",
    "cumprod": "cumprod_out_cpu", "sort": "sorting_kernel_method_name",
    "argsort": "sorting_kernel_method_name", "msort": "sorting_kernel_method_name",
    "unique": "unique", "nonzero": "nonzero_count_cpu", "count_nonzero": "nonzero_count_cpu",
    "gather": "scatter_gather_tensor_cpu", "scatter": "scatter_gather_tensor_cpu",
    "scatter_add": "scatter_gather_tensor_cpu", "index_add": "scatter_gather_tensor_cpu",
    "tril": "tril", "triu": "triu", "masked_fill": "masked_fill",
    "masked_scatter": "masked_scatter", "take": "take_cpu", "clamp": "clamp_scalar_cpu",
    "clamp_min": "clamp_min_scalar_cpu", "clamp_max": "clamp_max_scalar_cpu",
    "relu": "clamp_min_scalar_cpu", "sgn": "sign_cpu", "pow": "pow", "square": "pow",
    "lerp": "lerp_kernel_scalar", "addcmul": "addcmul_cpu_out", "addcdiv": "addcdiv_cpu_out",
    "softmax": "softmax_kernel_impl", "log_softmax": "log_softmax_kernel_impl", "dot": "dot",
    "vdot": "dot", "mv": "addmv_impl_cpu", "addmv": "addmv_impl_cpu", "bmm": "bmm",
    "baddbmm": "bmm", "einsum": "bmm", "rand": "check_uniform_bounds",
    "uniform": "check_uniform_bounds", "randn": "normal_kernel_cpu",
    "normal": "normal_kernel_cpu", "nan_to_num": "nan_to_num", "isin": "isin_default_cpu",
    "topk": "topk_cpu", "argmax": "argmax_cpu", "argmin": "argmin_cpu",
    "amax": "amax_cpu", "amin": "amin_cpu", "maximum": "maximum_cpu", "minimum": "minimum_cpu",
    "exp": "exp_vml_cpu", "sqrt": "sqrt_vml_cpu", "floor": "floor_vml_cpu",
    "ceil": "ceil_vml_cpu", "trunc": "trunc_vml_cpu", "round": "round_vml_cpu",
    "log": "log_vml_cpu", "sin": "sin_vml_cpu", "cos": "cos_vml_cpu", "tanh": "tanh_cpu",
    "sigmoid": "sigmoid_cpu",
}
# ops whose own error for a float dtype PyTorch raises first (``~x``: a TypeError)
OWN_ERROR = frozenset(["bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"])


def rule(op):
    """What the dispatcher keeps on the op: True (float8 welcome), or the rule to ask."""
    if op.view or op.name in SUPPORTED or op.name in OWN_ERROR:
        return True
    return RULES.get(op.name, _refused)


def _refused(args, kwargs):
    return ""


def check(op, args: tuple, kwargs: dict) -> None:
    """Raise PyTorch's error for a call of ``op`` with a float8 tensor it refuses."""
    dt = next((a._dtype for a in _tensors(args, kwargs) if a._dtype.is_float8), None)
    dt = dt or kwargs["dtype"]
    operands = [args[i] for i in op.operand_pos if i < len(args)]
    if operands:
        dt = D.result_type(*operands)  # PyTorch's promotion error first
        if not dt.is_float8:
            return  # computed in another dtype
    kernel = op.float8(args, kwargs)
    if kernel is None:
        return
    kernel = kernel or KERNEL.get(op.name, f"{op.name}_cpu")
    raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.TYPE_NAME[dt]}'")


def _tensors(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(getattr(x, "_dtype", None), D.dtype))
        elif isinstance(getattr(a, "_dtype", None), D.dtype):
            yield a
