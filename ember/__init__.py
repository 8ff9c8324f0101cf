"""ember: PyTorch's API in one small Python codebase. ``import ember as torch``."""

from __future__ import annotations

from .backends.cpu import tune_allocator as _tune_allocator  # noqa: E402
from .backends.cpu import num_threads as get_num_threads, set_num_threads  # noqa: E402,F401

_tune_allocator()

from ._version import __version__  # noqa: E402,F401

from ._dtype import (bool_ as bool, uint8, int8, int16, int32, int64, float16,  # noqa: E402
                     bfloat16, float32, float64, complex64, complex128, float8_e4m3fn,
                     float8_e5m2, dtype, finfo, iinfo,
                     get_default_dtype, set_default_dtype, promote_types,
                     can_cast)
from ._dtype import ALIASES as _ALIASES  # noqa: E402
from ._dtype import result_type_of_pair as result_type  # noqa: E402,F401
from ._device import device  # noqa: E402
from ._dispatch import get_default_device, set_default_device  # noqa: F401
from ._tensor import Tensor, Size, MEMORY_FORMATS as _FORMATS  # noqa: E402
from ._print import set_printoptions  # noqa: E402
from .autograd.grad_mode import (no_grad, enable_grad, set_grad_enabled,  # noqa: E402
                                 inference_mode, is_grad_enabled, is_inference_mode_enabled)
from . import autograd  # noqa: E402
from . import ops as _ops  # noqa: E402

globals().update(_ALIASES)
globals().update(_FORMATS)  # preserve_format, contiguous_format, channels_last, ..., strided
_ops.bind_namespace(globals())

from . import fft, linalg, nn, optim, random, utils, serialization  # noqa: E402,F401
from . import multiprocessing  # noqa: E402,F401
from . import amp, cpu, cuda, profiler  # noqa: E402,F401
from .cuda import amp as _cuda_amp  # noqa: E402,F401  (torch.cuda.amp)
from .amp.autocast_mode import (  # noqa: E402,F401
    autocast, is_autocast_enabled, set_autocast_enabled, get_autocast_dtype, set_autocast_dtype,
    is_autocast_cache_enabled, set_autocast_cache_enabled, clear_autocast_cache,
    autocast_increment_nesting, autocast_decrement_nesting,
    # PyTorch's deprecated per-device spellings
    is_autocast_cpu_enabled, set_autocast_cpu_enabled, get_autocast_cpu_dtype,
    set_autocast_cpu_dtype, get_autocast_gpu_dtype, set_autocast_gpu_dtype,
    is_autocast_xla_enabled, set_autocast_xla_enabled, get_autocast_xla_dtype,
    set_autocast_xla_dtype, is_autocast_ipu_enabled, set_autocast_ipu_enabled,
    get_autocast_ipu_dtype, set_autocast_ipu_dtype)
from . import accelerator  # noqa: E402,F401
from .backends.cuda import (set_float32_matmul_precision,  # noqa: E402,F401
                            get_float32_matmul_precision)
from ._device import OutOfMemoryError  # noqa: E402,F401
from ._stream import Event, Stream  # noqa: E402,F401
from .serialization import save, load  # noqa: E402,F401
from .compiler import compile  # noqa: E402,F401
from . import distributed, jit, onnx  # noqa: E402,F401
from .ops.creation import (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor,  # noqa: E402,F401,E501
                           ByteTensor, CharTensor, ShortTensor, IntTensor, LongTensor,
                           BoolTensor)
from . import _dynamo  # noqa: E402,F401
from .ops.arguments import takes_tensors as _takes_tensors  # noqa: E402


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


@_takes_tensors("input")
def is_floating_point(input) -> bool:
    return input.is_floating_point()


@_takes_tensors("input")
def is_complex(input) -> bool:
    return input.is_complex()


@_takes_tensors("input")
def numel(input) -> int:
    return input.numel()
