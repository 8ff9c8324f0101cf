"""A user's own Triton kernels, as a user writes them (``triton.jit``, launched with
``kernel[grid](...)``), for the tests that launch them on ember's CUDA tensors."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def _now(dummy):
    """The GPU's global timer, in nanoseconds."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dummy],
                                     dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def spin_kernel(out_ptr, ns):
    """Busy for ``ns`` nanoseconds, then write the time it spun to ``out_ptr[0]`` (int64)."""
    pid = tl.program_id(0)
    start = _now(pid)
    now = start
    while now - start < ns:
        now = _now(pid)
    tl.store(out_ptr, now - start)
