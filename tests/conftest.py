import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

# Without CuPy (no GPU), ember's Triton kernels run in Triton's interpreter on numpy buffers:
# set before any kernel module is imported, since Triton reads it when a kernel is defined.
if importlib.util.find_spec("cupy") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")
