"""Convolution, pooling, resampling ops (nn.functional kernels)."""
__all__: list = []
