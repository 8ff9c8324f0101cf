"""Device backends (the interface: ``base.py``). CPU arrays are numpy's (``cpu``, with
``native`` kernels, the per-op overrides of ``cpu_kernels`` and ``special`` functions).
``cuda``, ``cudnn`` and ``mps`` are also PyTorch's public settings namespaces
(``ember.backends.cudnn.benchmark``, ``ember.backends.cuda.matmul.allow_tf32``). ``meta``
holds tensors without data (``device="meta"``)."""

from . import cpu_kernels, cuda, cudnn, meta, mps  # noqa: F401
