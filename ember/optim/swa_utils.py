"""Stochastic Weight Averaging and exponential moving averages of a model's weights:
``AveragedModel`` keeps the running average, ``SWALR`` anneals each group's learning rate to a
constant SWA rate, ``update_bn`` recomputes BatchNorm statistics for the averaged weights."""

from __future__ import annotations

import itertools
import math
import warnings
from copy import deepcopy

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..nn.modules.module import Module
from ..nn.modules.normalization import _BatchNorm
from ..ops.creation import tensor
from .lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]

# device types on which PyTorch averages a whole (device, dtype) group of tensors at once
_FOREACH_DEVICES = ("cuda", "xpu", "mtia")


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def _floating(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def get_ema_multi_avg_fn(decay=0.999):
    """In-place EMA over lists of tensors: ema <- decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_params, current_params, _num_averaged):
        with no_grad():
            if _floating(ema_params[0]):
                for e, c in zip(ema_params, current_params):
                    e.lerp_(c, 1 - decay)
            else:
                for e, c in zip(ema_params, current_params, strict=True):
                    e.copy_(e * decay + c * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """In-place equal-weight average over lists of tensors, given how many models it holds."""

    def swa_update(averaged_params, current_params, num_averaged):
        with no_grad():
            if _floating(averaged_params[0]):
                weight = 1 / (num_averaged + 1)
                for a, c in zip(averaged_params, current_params):
                    a.lerp_(c, weight)
            else:
                for a, c in zip(averaged_params, current_params):
                    diff = c.sub(a)
                    if isinstance(num_averaged, Tensor):
                        a.addcdiv_(diff, num_averaged + 1)
                    else:
                        a.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """EMA of one tensor, returned: decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """Equal-weight running average of one tensor, returned."""

    def swa_update(averaged_param, current_param, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _by_device_and_dtype(averaged, current):
    """Pairs of lists grouped by the averaged tensor's (device, dtype), in first-seen order."""
    groups: dict = {}
    for a, c in zip(averaged, current):
        lists = groups.setdefault((a.device, a.dtype), ([], []))
        lists[0].append(a)
        lists[1].append(c)
    return groups


class AveragedModel(Module):
    """A copy of ``model`` (on ``device`` if given) whose parameters (and buffers, with
    ``use_buffers=True``) ``update_parameters(model)`` folds into a running average: an equal
    average by default (SWA), or ``avg_fn`` per tensor / ``multi_avg_fn`` per list of tensors
    (e.g. ``get_ema_multi_avg_fn(decay)``). The first update copies the model's values."""

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None,
                 use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=D.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        averaged, current = [], []
        first = bool(self.n_averaged == 0)
        for a, c in zip(mine, theirs):
            c = c.detach().to(a.device)
            averaged.append(a.detach())
            current.append(c)
            if first:
                a.detach().copy_(c)

        if self.n_averaged > 0:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                for (device, _), (avg_list, cur_list) in _by_device_and_dtype(
                        averaged, current).items():
                    n = self.n_averaged.to(device)
                    if self.multi_avg_fn is not None:
                        self.multi_avg_fn(avg_list, cur_list, n)
                    elif device.type in _FOREACH_DEVICES:
                        get_swa_multi_avg_fn()(avg_list, cur_list, n)
                    else:
                        swa = get_swa_avg_fn()
                        for a, c in zip(avg_list, cur_list):
                            a.copy_(swa(a, c, n))
            else:
                for a, c in zip(averaged, current):
                    a.detach().copy_(self.avg_fn(a.detach(), c,
                                                 self.n_averaged.to(a.device)))

        if not self.use_buffers:
            # buffers are not averaged: keep them equal to the source model's
            for b_mine, b_theirs in zip(self.module.buffers(), model.buffers(), strict=True):
                b_mine.detach().copy_(b_theirs.detach().to(b_mine.device))
        self.n_averaged += 1


def update_bn(loader, model: Module, device=None) -> None:
    """Recompute the running mean and variance of every BatchNorm layer in ``model`` with one
    pass over ``loader`` (batches are tensors, or lists/tuples whose first item is the input),
    as an equal average over the batches; the model's training mode and the layers' momenta
    are restored afterwards."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None  # cumulative average over the batches
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate from its current value to ``swa_lr`` (one value, or
    one per group) over ``anneal_epochs`` steps, by cosine or linear interpolation, then holds
    it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        swa_lrs = _per_group_copy("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        """The lr the annealing started from, given the lr it reached at weight ``alpha``."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else \
            self._linear_anneal

    def get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        alpha = self.anneal_func(max(0, min(1, step / span)))
        groups = self.optimizer.param_groups
        starts = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, starts)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)


def _per_group_copy(name, optimizer, value):
    """``value`` for each param group (a list/tuple must have one per group); tensors cloned."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has "
                             f"{len(optimizer.param_groups)}.")
    else:
        value = [value] * len(optimizer.param_groups)
    return [v.clone() if isinstance(v, Tensor) else v for v in value]
