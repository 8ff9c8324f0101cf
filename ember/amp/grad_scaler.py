"""GradScaler with PyTorch's semantics: the same scale schedule, the same skipped steps, the
same state_dict and the same errors for calls out of order."""

from __future__ import annotations

import enum
import warnings
from collections import defaultdict
from collections.abc import Iterable

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..ops.creation import full


class OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


_NO_SCALE = ("Attempted {} but _scale is None.  This may indicate your script did not use "
             "scaler.scale(loss or outputs) earlier in the iteration.")


class GradScaler:
    """``GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)``.

    Each iteration: ``scaler.scale(loss).backward()``, ``scaler.step(optimizer)`` (unscales the
    gradients first unless ``unscale_`` did, and skips ``optimizer.step()`` when any gradient
    is inf or NaN), ``scaler.update()`` (after a skipped step the scale is multiplied by
    ``backoff_factor``; after ``growth_interval`` steps in a row without one, by
    ``growth_factor``). For ``device="cuda"`` without a CUDA device it warns and disables
    itself (every method then passes through), as PyTorch's does."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        from .. import cuda
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled and not cuda.is_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=2)
            self._enabled = False
        if not self._enabled:
            return
        if growth_factor <= 1.0:
            raise AssertionError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = init_scale
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._scale: Tensor | None = None  # made by the first scale(), on the outputs' device
        self._growth_tracker: Tensor | None = None
        self._per_optimizer_states: dict = defaultdict(_fresh_state)

    # ------------------------------------------------------------------ the iteration
    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them, nested) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale_for(outputs)
        if isinstance(outputs, Iterable):
            scaled = map(self.scale, outputs)
            return type(outputs)(scaled) if isinstance(outputs, (list, tuple)) else scaled
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _scale_for(self, t: Tensor) -> Tensor:
        if self._scale is None:
            self._scale = full((), self._init_scale, dtype=D.float32, device=t.device)
            self._growth_tracker = full((), self._init_growth_tracker, dtype=D.int32,
                                        device=t.device)
        return self._scale

    def _checked(self, what: str) -> tuple[Tensor, Tensor]:
        if self._scale is None or self._growth_tracker is None:
            raise AssertionError(_NO_SCALE.format(what))
        return self._scale, self._growth_tracker

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and note whether any is
        inf or NaN. Once per optimizer and iteration, before ``step``."""
        if not self._enabled:
            return
        scale, _ = self._checked("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = scale.double().reciprocal().float()  # the reciprocal in float64, then rounded
        state["found_inf_per_device"] = self._unscale_grads(optimizer, inv_scale)
        state["stage"] = OptState.UNSCALED

    def _unscale_grads(self, optimizer, inv_scale: Tensor) -> dict:
        found = {}
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype is D.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    key = str(g.device)
                    if key not in found:
                        found[key] = full((), 0.0, dtype=D.float32, device=g.device)
                    # inf or NaN anywhere: found becomes 1 (every gradient is unscaled anyway)
                    found[key] = found[key].maximum((~g.isfinite().all()).float())
                    g.mul_(inv_scale.to(g.dtype))
        return found

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` on unscaled gradients, skipped (returning None)
        when any of them is inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._checked("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(v.item() for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """The next iteration's scale: ``new_scale`` if given (a float, or a one-element float
        tensor on the scaler's device), else backed off after a skipped step and grown after
        ``growth_interval`` good ones (a growth that would overflow to inf is not taken)."""
        if not self._enabled:
            return
        scale, tracker = self._checked("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                          "torch.FloatTensor with requires_grad=False.")
                if not isinstance(new_scale, Tensor) or new_scale.device.type != self._device \
                        or new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                scale.copy_(new_scale)
        else:
            found = [f for s in self._per_optimizer_states.values()
                     for f in s["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if sum(f.item() for f in found):
                scale.mul_(self._backoff_factor)
                tracker.fill_(0)
            elif int(tracker.item()) + 1 == self._growth_interval:
                grown = scale * self._growth_factor
                if bool(grown.isfinite()):
                    scale.copy_(grown)
                tracker.fill_(0)
            else:
                tracker.add_(1)
        self._per_optimizer_states = defaultdict(_fresh_state)

    # ------------------------------------------------------------------ state
    def get_scale(self) -> float:
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker (empty
        when disabled): call it after ``update``."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._enabled:
            if self._per_optimizer_states:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning "
                                     "of an iteration, or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()  # the tensors are made again lazily
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = state["_growth_tracker"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
