"""ember.nn: modules, parameters, functional, init."""

from .parameter import Buffer, Parameter  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import Module, ModuleDict, ModuleList, ParameterDict, ParameterList  # noqa: F401
from .modules import Sequential  # noqa: F401
from . import functional, init, utils  # noqa: F401
