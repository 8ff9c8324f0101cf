"""``ember.random`` (PyTorch's ``torch.random``): seeding and RNG state of the default generator."""

from ._random import *  # noqa: F401,F403
from ._random import __all__  # noqa: F401
