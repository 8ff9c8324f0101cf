"""ember.nn: modules, parameters, functional, init."""

from . import functional, init, modules, utils  # noqa: F401
from .modules import *
from .modules import register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401
from .parameter import Buffer, Parameter  # noqa: F401
