"""``ember.amp``: mixed-precision training tools. ``GradScaler`` scales the loss so that small
float16 gradients do not flush to zero, unscales the gradients before the optimizer step,
skips steps whose gradients overflowed and adapts the scale."""

from .grad_scaler import GradScaler, OptState  # noqa: F401
