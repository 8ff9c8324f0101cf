"""``ember.amp``: mixed-precision training tools. ``autocast`` runs listed ops in a lower
precision (or in float32 where they need it) inside a region; ``GradScaler`` scales the loss so
that small float16 gradients do not flush to zero, unscales the gradients before the optimizer
step, skips steps whose gradients overflowed and adapts the scale."""

from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available  # noqa: F401
from .grad_scaler import GradScaler, OptState  # noqa: F401
