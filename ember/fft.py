"""``ember.fft``: PyTorch's discrete Fourier transform namespace. The functions live in the op
table (``ember/ops/fft.py``, ``ember/ops/fft_freq.py``; gradients in ``ember/ops/fft_grad.py``);
this module gives them their ``torch.fft`` names."""

from __future__ import annotations

from .ops.fft import OPS as _OPS
from .ops.fft_freq import (fft_fftfreq as fftfreq, fft_fftshift as fftshift,
                           fft_ifftshift as ifftshift, fft_rfftfreq as rfftfreq)

fft = _OPS["fft"]
ifft = _OPS["ifft"]
fft2 = _OPS["fft2"]
ifft2 = _OPS["ifft2"]
fftn = _OPS["fftn"]
ifftn = _OPS["ifftn"]
rfft = _OPS["rfft"]
irfft = _OPS["irfft"]
rfft2 = _OPS["rfft2"]
irfft2 = _OPS["irfft2"]
rfftn = _OPS["rfftn"]
irfftn = _OPS["irfftn"]
hfft = _OPS["hfft"]
ihfft = _OPS["ihfft"]
hfft2 = _OPS["hfft2"]
ihfft2 = _OPS["ihfft2"]
hfftn = _OPS["hfftn"]
ihfftn = _OPS["ihfftn"]

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "hfft2", "hfftn", "ifft",
           "ifft2", "ifftn", "ifftshift", "ihfft", "ihfft2", "ihfftn", "irfft", "irfft2",
           "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn"]
