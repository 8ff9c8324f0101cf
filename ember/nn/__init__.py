"""ember.nn: modules, parameters, functional, init."""

from . import attention, functional, init, modules, parallel, utils  # noqa: F401
from .modules import *
from .modules import register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401
from .parameter import Buffer, Parameter  # noqa: F401
from .parallel import DataParallel  # noqa: F401
