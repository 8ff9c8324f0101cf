"""``torch._dynamo``'s user-facing names, for programs that call them directly
(``torch._dynamo.mark_dynamic(x, 0)``, ``torch._dynamo.reset()``, ...). They are ember's
compiler functions (``ember.compiler``)."""

from .compiler import (config, disable, explain, mark_dynamic, mark_static,  # noqa: F401
                       maybe_mark_dynamic, reset)
from .compiler.api import is_compiling  # noqa: F401
