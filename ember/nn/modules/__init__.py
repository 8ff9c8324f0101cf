"""ember.nn modules."""

from .module import Module, register_module_forward_hook, register_module_forward_pre_hook  # noqa
from .container import (ModuleDict, ModuleList, ParameterDict, ParameterList,  # noqa: F401
                        Sequential)
