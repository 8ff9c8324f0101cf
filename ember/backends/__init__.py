"""Device backends. CPU arrays are numpy's (``cpu``, with ``native`` kernels and ``special``
functions). ``cuda``, ``cudnn`` and ``mps`` are also PyTorch's public settings namespaces
(``ember.backends.cudnn.benchmark``, ``ember.backends.cuda.matmul.allow_tf32``)."""

from . import cuda, cudnn, mps  # noqa: F401
