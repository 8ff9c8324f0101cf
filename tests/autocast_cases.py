"""One small call per ember op (and per composite that autocast cares about), written once for
torch and for ember: ``CASES[name](t, F, m)`` with ``t`` the library (``torch`` or ``ember``),
``F`` its ``nn.functional`` and ``m`` an ``Inputs`` that makes the tensors.

``autocast_derive`` runs the torch side under ``torch.autocast`` to derive ember's autocast
op lists; ``test_autocast`` runs both sides and compares them. A key is an ember op name
(``OPS``), optionally with a ``[variant]`` suffix, or a composite's name (``COMPOSITES``).
"""

from __future__ import annotations

import numpy as np

# the float dtypes a probe may give an op's float inputs (names shared by torch and ember)
FLOATS = ("float16", "bfloat16", "float32", "float64")


class Inputs:
    """Makes one case's tensors for one library. The values depend only on the seed and the
    order of the calls, so torch and ember get the same inputs. The k-th float tensor gets
    ``floats[k]`` (the last entry for all later ones): ``("float32", "bfloat16")`` makes the
    first float input float32 and the others bfloat16."""

    def __init__(self, lib, floats=("float32",), device: str = "cpu", seed: int = 0):
        self.lib = lib
        self.floats = tuple(floats)
        self.device = device
        self.rng = np.random.default_rng(seed)
        self.k = 0
        # torch moves to ``.to(tensor)``: it makes fake CUDA tensors that way, without a GPU
        self._on = lib.empty(0, device=device) if device != "cpu" and lib.__name__ == "torch" \
            else None

    def _make(self, arr: np.ndarray, dtype):
        t = self.lib.from_numpy(np.ascontiguousarray(arr))
        if self._on is not None:
            return t.to(self._on).to(dtype)
        return t.to(dtype) if self.device == "cpu" else t.to(device=self.device, dtype=dtype)

    def _float(self, arr: np.ndarray):
        name = self.floats[min(self.k, len(self.floats) - 1)]
        self.k += 1
        return self._make(arr.astype(np.float32), getattr(self.lib, name))

    def __call__(self, *shape, low: float = 0.1, high: float = 0.9):
        """A float tensor with values in [low, high)."""
        return self._float(self.rng.uniform(low, high, shape))

    def signed(self, *shape):
        return self(*shape, low=-1.0, high=1.0)

    def spd(self, n: int):
        """A well-conditioned symmetric positive definite n x n matrix."""
        a = self.rng.uniform(-1, 1, (n, n))
        return self._float(a @ a.T + n * np.eye(n))

    def long(self, high: int, *shape):
        return self._make(self.rng.integers(0, high, shape), self.lib.int64)

    def mask(self, *shape):
        return self._make(self.rng.uniform(0, 1, shape) < 0.5, self.lib.bool)

    def cplx(self, *shape):
        return self._make((self.rng.uniform(-1, 1, shape) + 1j * self.rng.uniform(-1, 1, shape))
                          .astype(np.complex64), self.lib.complex64)

    def distinct(self, n: int, *shape):
        """int64 indices below n, all different."""
        return self._make(self.rng.permutation(n)[:int(np.prod(shape))].reshape(shape),
                          self.lib.int64)


def _unary(name):
    return lambda t, F, m: getattr(t, name)(m(3, 4))


def _binary(name):
    return lambda t, F, m: getattr(t, name)(m(3, 4), m(3, 4))


def _activation(name, *args):
    return lambda t, F, m: getattr(F, name)(m.signed(3, 4), *args)


def _integers(name):
    return lambda t, F, m: getattr(t, name)(m.long(8, 3, 4), m.long(3, 3, 4))


def _along_dim(name):
    return lambda t, F, m: getattr(t, name)(m(3, 4), 1)


CASES: dict = {}
for _n in ("abs acos acosh angle asin asinh atan atanh ceil conj conj_physical cos cosh digamma "
           "erf erfc erfinv exp exp2 expm1 floor frac isfinite isinf isnan isneginf isposinf "
           "isreal lgamma log log10 log1p log2 logical_not logit neg positive reciprocal relu "
           "round rsqrt sgn sigmoid sign signbit sin sinh sqrt square tan tanh trunc nan_to_num "
           "clone t adjoint msort").split():
    CASES[_n] = _unary(_n)
for _n in ("add sub mul div atan2 copysign float_power fmax fmin fmod hypot logaddexp logaddexp2 "
           "maximum minimum pow remainder true_divide xlogy floor_divide eq ne lt le gt ge "
           "logical_and logical_or logical_xor complex polar isclose").split():
    CASES[_n] = _binary(_n)
for _n in ("elu gelu hardsigmoid hardswish hardtanh leaky_relu logsigmoid mish silu softplus "
           "softshrink hardshrink").split():
    CASES[_n] = _activation(_n)
CASES["threshold"] = _activation("threshold", 0.2, 0.0)
for _n in "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift".split():
    CASES[_n] = _integers(_n)
for _n in ("all any amax amin argmax argmin count_nonzero max min mean median nanmean nanmedian "
           "nansum prod std sum var trace").split():
    CASES[_n] = _unary(_n)
for _n in "logsumexp cummax cummin cumprod cumsum logcumsumexp softmax log_softmax".split():
    CASES[_n] = _along_dim(_n)
for _n in ("fft ifft fft2 ifft2 fftn ifftn rfft irfft rfft2 irfft2 rfftn irfftn hfft ihfft hfft2 "
           "ihfft2 hfftn ihfftn fftshift ifftshift").split():
    CASES["fft_" + _n] = (lambda name: lambda t, F, m: getattr(t.fft, name)(m(3, 4)))(_n)

CASES.update({
    # ------------------------------------------------------------------ pointwise, more args
    "div[number_first]": lambda t, F, m: 2.0 / m(3, 4),
    "pow[number_first]": lambda t, F, m: 2.0 ** m(3, 4),
    "sub[number_first]": lambda t, F, m: 2.0 - m(3, 4),
    "matmul[operator]": lambda t, F, m: m(3, 4) @ m(4, 2),
    "bitwise_not": lambda t, F, m: t.bitwise_not(m.long(8, 3, 4)),
    "addcdiv": lambda t, F, m: t.addcdiv(m(3, 4), m(3, 4), m(3, 4), value=0.5),
    "addcmul": lambda t, F, m: t.addcmul(m(3, 4), m(3, 4), m(3, 4), value=0.5),
    "lerp": lambda t, F, m: t.lerp(m(3, 4), m(3, 4), m(3, 4)),
    "clamp": lambda t, F, m: t.clamp(m(3, 4), m(3, 4, high=0.3), m(3, 4, low=0.6)),
    "clamp_min": lambda t, F, m: t.clamp_min(m(3, 4), m(3, 4)),
    "clamp_max": lambda t, F, m: t.clamp_max(m(3, 4), m(3, 4)),
    "where": lambda t, F, m: t.where(m.mask(3, 4), m(3, 4), m(3, 4)),
    "mvlgamma": lambda t, F, m: t.mvlgamma(m(3, 4, low=2, high=3), 2),
    "polygamma": lambda t, F, m: t.polygamma(1, m(3, 4)),
    "allclose": lambda t, F, m: t.allclose(m(3, 4), m(3, 4)),
    "equal": lambda t, F, m: t.equal(m(3, 4), m(3, 4)),
    "fill": lambda t, F, m: t.fill(m(3, 4), 2.0),
    "copy": lambda t, F, m: m(3, 4).copy_(m(3, 4)),
    # ------------------------------------------------------------------ reductions, scans
    "aminmax": lambda t, F, m: t.aminmax(m(3, 4), dim=1),
    "norm": lambda t, F, m: t.norm(m(3, 4), 2, 1),
    "linalg_vector_norm": lambda t, F, m: t.linalg.vector_norm(m(3, 4), 3, 1),
    "std_mean": lambda t, F, m: t.std_mean(m(3, 4), 1),
    "var_mean": lambda t, F, m: t.var_mean(m(3, 4), 1),
    "kthvalue": lambda t, F, m: t.kthvalue(m(3, 4), 2),
    "mode": lambda t, F, m: t.mode(m(3, 4)),
    "sort": lambda t, F, m: t.sort(m(3, 4)),
    "argsort": lambda t, F, m: t.argsort(m(3, 4)),
    "topk": lambda t, F, m: t.topk(m(3, 4), 2),
    "histc": lambda t, F, m: t.histc(m(12), 4),
    "sum_to_size": lambda t, F, m: m(3, 4).sum_to_size(1, 4),
    # ------------------------------------------------------------------ products
    "addbmm": lambda t, F, m: t.addbmm(m(3, 5), m(2, 3, 4), m(2, 4, 5)),
    "addmm": lambda t, F, m: t.addmm(m(3, 5), m(3, 4), m(4, 5)),
    "addmv": lambda t, F, m: t.addmv(m(3), m(3, 4), m(4)),
    "addr": lambda t, F, m: t.addr(m(3, 4), m(3), m(4)),
    "baddbmm": lambda t, F, m: t.baddbmm(m(2, 3, 5), m(2, 3, 4), m(2, 4, 5)),
    "bmm": lambda t, F, m: t.bmm(m(2, 3, 4), m(2, 4, 5)),
    "mm": lambda t, F, m: t.mm(m(3, 4), m(4, 5)),
    "mv": lambda t, F, m: t.mv(m(3, 4), m(4)),
    "dot": lambda t, F, m: t.dot(m(4), m(4)),
    "vdot": lambda t, F, m: t.vdot(m(4), m(4)),
    "matmul": lambda t, F, m: t.matmul(m(2, 3, 4), m(4, 5)),
    "einsum": lambda t, F, m: t.einsum("ij,jk->ik", m(3, 4), m(4, 5)),
    "linear": lambda t, F, m: F.linear(m(3, 4), m(5, 4), m(5)),
    "linalg_cross": lambda t, F, m: t.linalg.cross(m(4, 3), m(4, 3)),
    # ------------------------------------------------------------------ linear algebra
    "det": lambda t, F, m: t.det(m.spd(3)),
    "inverse": lambda t, F, m: t.inverse(m.spd(3)),
    "slogdet": lambda t, F, m: t.slogdet(m.spd(3)),
    "linalg_cholesky": lambda t, F, m: t.linalg.cholesky(m.spd(3)),
    "linalg_eigh": lambda t, F, m: t.linalg.eigh(m.spd(3))[0],  # eigenvectors: signs vary
    "linalg_eigvalsh": lambda t, F, m: t.linalg.eigvalsh(m.spd(3)),
    "linalg_pinv": lambda t, F, m: t.linalg.pinv(m.spd(3)),
    "linalg_qr": lambda t, F, m: t.linalg.qr(m.spd(3)),
    "linalg_solve": lambda t, F, m: t.linalg.solve(m.spd(3), m(3, 2)),
    "linalg_svd": lambda t, F, m: t.linalg.svd(m.spd(3)),
    "linalg_svdvals": lambda t, F, m: t.linalg.svdvals(m.spd(3)),
    # ------------------------------------------------------------------ convolution
    "conv1d": lambda t, F, m: F.conv1d(m(1, 2, 6), m(3, 2, 3), m(3)),
    "conv2d": lambda t, F, m: F.conv2d(m(1, 2, 5, 5), m(3, 2, 3, 3), m(3)),
    "conv3d": lambda t, F, m: F.conv3d(m(1, 2, 4, 4, 4), m(3, 2, 2, 2, 2), m(3)),
    "conv_transpose1d": lambda t, F, m: F.conv_transpose1d(m(1, 2, 5), m(2, 3, 3), m(3)),
    "conv_transpose2d": lambda t, F, m: F.conv_transpose2d(m(1, 2, 4, 4), m(2, 3, 3, 3), m(3)),
    "conv_transpose3d": lambda t, F, m: F.conv_transpose3d(m(1, 2, 3, 3, 3), m(2, 3, 2, 2, 2),
                                                           m(3)),
    "im2col": lambda t, F, m: F.unfold(m(1, 2, 4, 4), 2),
    "col2im": lambda t, F, m: F.fold(m(1, 8, 9), (4, 4), 2),
    "prelu": lambda t, F, m: F.prelu(m.signed(2, 3, 4), m(3)),
    # ------------------------------------------------------------------ pooling, resampling
    "avg_pool1d": lambda t, F, m: F.avg_pool1d(m(1, 2, 6), 2),
    "avg_pool2d": lambda t, F, m: F.avg_pool2d(m(1, 2, 4, 4), 2),
    "avg_pool3d": lambda t, F, m: F.avg_pool3d(m(1, 2, 4, 4, 4), 2),
    "adaptive_avg_pool1d": lambda t, F, m: F.adaptive_avg_pool1d(m(1, 2, 6), 3),
    "adaptive_avg_pool2d": lambda t, F, m: F.adaptive_avg_pool2d(m(1, 2, 4, 4), 2),
    "adaptive_avg_pool3d": lambda t, F, m: F.adaptive_avg_pool3d(m(1, 2, 4, 4, 4), 2),
    "adaptive_max_pool1d_with_indices": lambda t, F, m: F.adaptive_max_pool1d(m(1, 2, 6), 3),
    "adaptive_max_pool2d_with_indices": lambda t, F, m: F.adaptive_max_pool2d(m(1, 2, 4, 4), 2),
    "adaptive_max_pool3d_with_indices": lambda t, F, m: F.adaptive_max_pool3d(m(1, 2, 4, 4, 4),
                                                                              2),
    "adaptive_max_pool3d_with_indices[indices]": lambda t, F, m: F.adaptive_max_pool3d(
        m(1, 2, 4, 4, 4), 2, return_indices=True),
    "max_pool1d_with_indices": lambda t, F, m: F.max_pool1d(m(1, 2, 6), 2),
    "max_pool2d_with_indices": lambda t, F, m: F.max_pool2d(m(1, 2, 4, 4), 2),
    "max_pool3d_with_indices": lambda t, F, m: F.max_pool3d(m(1, 2, 4, 4, 4), 2),
    "max_pool1d_with_indices[indices]": lambda t, F, m: F.max_pool1d(m(1, 2, 6), 2,
                                                                      return_indices=True),
    "max_pool2d_with_indices[indices]": lambda t, F, m: F.max_pool2d(m(1, 2, 4, 4), 2,
                                                                      return_indices=True),
    "max_pool3d_with_indices[indices]": lambda t, F, m: F.max_pool3d(m(1, 2, 4, 4, 4), 2,
                                                                      return_indices=True),
    "_max_unpool[1d]": lambda t, F, m: F.max_unpool1d(m(1, 1, 3), m.distinct(6, 1, 1, 3),
                                                      2),
    "_max_unpool[2d]": lambda t, F, m: F.max_unpool2d(m(1, 1, 2, 2),
                                                      m.distinct(16, 1, 1, 2, 2), 2),
    "_max_unpool[3d]": lambda t, F, m: F.max_unpool3d(m(1, 1, 1, 1, 1), m.long(8, 1, 1, 1, 1, 1),
                                                      2),
    "_index_map": lambda t, F, m: F.interpolate(m(1, 2, 3, 3), scale_factor=2),
    "_separable_map": lambda t, F, m: F.interpolate(m(1, 2, 3, 3), scale_factor=2,
                                                    mode="bilinear"),
    "pixel_shuffle": lambda t, F, m: F.pixel_shuffle(m(1, 4, 2, 2), 2),
    "pixel_unshuffle": lambda t, F, m: F.pixel_unshuffle(m(1, 1, 4, 4), 2),
    "channel_shuffle": lambda t, F, m: F.channel_shuffle(m(1, 4, 2, 2), 2),
    # ------------------------------------------------------------------ padding
    "pad": lambda t, F, m: F.pad(m(1, 2, 4), (1, 2)),
    "pad[reflect1d]": lambda t, F, m: F.pad(m(1, 2, 4), (1, 2), mode="reflect"),
    "pad[reflect2d]": lambda t, F, m: F.pad(m(1, 2, 4, 4), (1, 2, 1, 1), mode="reflect"),
    "pad[reflect3d]": lambda t, F, m: F.pad(m(1, 2, 4, 4, 4), (1, 1, 1, 1, 1, 1),
                                            mode="reflect"),
    "pad[replicate1d]": lambda t, F, m: F.pad(m(1, 2, 4), (1, 2), mode="replicate"),
    "pad[replicate2d]": lambda t, F, m: F.pad(m(1, 2, 4, 4), (1, 2, 1, 1), mode="replicate"),
    "pad[replicate3d]": lambda t, F, m: F.pad(m(1, 2, 4, 4, 4), (1, 1, 1, 1, 1, 1),
                                              mode="replicate"),
    "pad[circular1d]": lambda t, F, m: F.pad(m(1, 2, 4), (1, 2), mode="circular"),
    "pad[circular2d]": lambda t, F, m: F.pad(m(1, 2, 4, 4), (1, 2, 1, 1), mode="circular"),
    # ------------------------------------------------------------------ normalisation, losses
    "native_batch_norm": lambda t, F, m: F.batch_norm(m(4, 3, 2), m(3), m(3), m(3), m(3),
                                                      training=True),
    "native_layer_norm": lambda t, F, m: F.layer_norm(m(3, 4), (4,), m(4), m(4)),
    "native_group_norm": lambda t, F, m: F.group_norm(m(2, 4, 3), 2, m(4), m(4)),
    "_fused_rms_norm": lambda t, F, m: F.rms_norm(m(3, 4), (4,), m(4)),
    "nll_loss_nd": lambda t, F, m: F.nll_loss(m.signed(4, 3), m.long(3, 4)),
    "binary_cross_entropy_op": lambda t, F, m: F.binary_cross_entropy(m(3, 4), m(3, 4)),
    "_safe_softmax": lambda t, F, m: t._safe_softmax(m(3, 4), 1),
    "embedding": lambda t, F, m: F.embedding(m.long(5, 3), m(5, 4)),
    "one_hot": lambda t, F, m: F.one_hot(m.long(4, 3), 4),
    # ------------------------------------------------------------------ shape, views
    "cat": lambda t, F, m: t.cat([m(2, 3), m(2, 3)]),
    "stack": lambda t, F, m: t.stack([m(2, 3), m(2, 3)]),
    "flatten": lambda t, F, m: t.flatten(m(2, 3, 4), 1),
    "flip": lambda t, F, m: t.flip(m(3, 4), (0,)),
    "movedim": lambda t, F, m: t.movedim(m(2, 3, 4), 0, 2),
    "narrow": lambda t, F, m: t.narrow(m(3, 4), 1, 1, 2),
    "permute": lambda t, F, m: t.permute(m(2, 3, 4), (2, 0, 1)),
    "repeat": lambda t, F, m: m(2, 3).repeat(2, 1),
    "reshape": lambda t, F, m: t.reshape(m(3, 4), (4, 3)),
    "view": lambda t, F, m: m(3, 4).view(12),
    "expand": lambda t, F, m: m(3, 1).expand(3, 4),
    "roll": lambda t, F, m: t.roll(m(3, 4), 1, 1),
    "rot90": lambda t, F, m: t.rot90(m(3, 4)),
    "select": lambda t, F, m: t.select(m(3, 4), 1, 2),
    "split": lambda t, F, m: t.split(m(4, 3), 2),
    "squeeze": lambda t, F, m: t.squeeze(m(3, 1, 4)),
    "unsqueeze": lambda t, F, m: t.unsqueeze(m(3, 4), 1),
    "transpose": lambda t, F, m: t.transpose(m(3, 4), 0, 1),
    "tril": lambda t, F, m: t.tril(m(3, 4)),
    "triu": lambda t, F, m: t.triu(m(3, 4)),
    "unbind": lambda t, F, m: t.unbind(m(3, 4)),
    "unflatten": lambda t, F, m: t.unflatten(m(3, 4), 1, (2, 2)),
    "unfold": lambda t, F, m: m(3, 6).unfold(1, 2, 2),
    "diag": lambda t, F, m: t.diag(m(3, 3)),
    "diag_embed": lambda t, F, m: t.diag_embed(m(2, 3)),
    "diagonal": lambda t, F, m: t.diagonal(m(3, 3)),
    "as_strided": lambda t, F, m: t.as_strided(m(3, 4), (2, 2), (4, 1)),
    "tensor_split": lambda t, F, m: t.tensor_split(m(5, 2), 2),
    "view_as_real": lambda t, F, m: t.view_as_real(m.cplx(3, 2)),
    "view_as_complex": lambda t, F, m: t.view_as_complex(m(3, 2)),
    "real": lambda t, F, m: t.real(m.cplx(3, 2)),
    "imag": lambda t, F, m: t.imag(m.cplx(3, 2)),
    "view_dtype": lambda t, F, m: m(3, 4).view(t.int32),
    "index_view": lambda t, F, m: m(3, 4)[1:, ::2],
    "index": lambda t, F, m: m(3, 4)[m.long(3, 2)],
    # ------------------------------------------------------------------ indexing, scatter
    "gather": lambda t, F, m: t.gather(m(3, 4), 1, m.long(4, 3, 2)),
    "index_add": lambda t, F, m: t.index_add(m(3, 4), 0, m.distinct(3, 2), m(2, 4)),
    "index_copy": lambda t, F, m: t.index_copy(m(3, 4), 0, m.distinct(3, 2), m(2, 4)),
    "index_fill": lambda t, F, m: t.index_fill(m(3, 4), 0, m.distinct(3, 2), 2.0),
    "index_put": lambda t, F, m: t.index_put(m(3, 4), (m.distinct(3, 2),), m(2, 4)),
    "index_select": lambda t, F, m: t.index_select(m(3, 4), 0, m.long(3, 2)),
    "masked_fill": lambda t, F, m: t.masked_fill(m(3, 4), m.mask(3, 4), 2.0),
    "masked_scatter": lambda t, F, m: t.masked_scatter(m(3, 4), m.mask(3, 4), m(3, 4)),
    "masked_select": lambda t, F, m: t.masked_select(m(3, 4), m.mask(3, 4)),
    "scatter": lambda t, F, m: t.scatter(m(3, 4), 1, m.long(4, 3, 2), m(3, 2)),
    "scatter_add": lambda t, F, m: t.scatter_add(m(3, 4), 1, m.long(4, 3, 2), m(3, 2)),
    "scatter_reduce": lambda t, F, m: t.scatter_reduce(m(3, 4), 1, m.long(4, 3, 2), m(3, 2),
                                                       "amax"),
    "take": lambda t, F, m: t.take(m(3, 4), m.long(12, 5)),
    "nonzero": lambda t, F, m: t.nonzero(m.signed(3, 4) > 0),
    "bincount": lambda t, F, m: t.bincount(m.long(4, 6), m(6)),
    "bucketize": lambda t, F, m: t.bucketize(m(5), t.sort(m(4))[0]),
    "searchsorted": lambda t, F, m: t.searchsorted(t.sort(m(4))[0], m(5)),
    "unique": lambda t, F, m: t.unique(t.round(m(8) * 4)),
    "unique_consecutive": lambda t, F, m: t.unique_consecutive(t.round(m(8) * 4)),
    "repeat_interleave": lambda t, F, m: t.repeat_interleave(m(3), 2),
    # ------------------------------------------------------------------ creation, random
    "empty_like": lambda t, F, m: t.empty_like(m(3, 4)),
    "zeros_like": lambda t, F, m: t.zeros_like(m(3, 4)),
    "ones_like": lambda t, F, m: t.ones_like(m(3, 4)),
    "full_like": lambda t, F, m: t.full_like(m(3, 4), 2.0),
    "rand_like": lambda t, F, m: t.rand_like(m(3, 4)),
    "randn_like": lambda t, F, m: t.randn_like(m(3, 4)),
    "randint_like": lambda t, F, m: t.randint_like(m(3, 4), 5),
    "zeros": lambda t, F, m: t.zeros(3, 4),
    "arange": lambda t, F, m: t.arange(0.0, 3.0, 0.5),
    "linspace": lambda t, F, m: t.linspace(0, 1, 5),
    "full": lambda t, F, m: t.full((2, 3), 1.5),
    "ones": lambda t, F, m: t.ones(2, 3),
    "empty": lambda t, F, m: t.empty(2, 3),
    "empty_strided": lambda t, F, m: t.empty_strided((2, 3), (1, 2)),
    "eye": lambda t, F, m: t.eye(3),
    "logspace": lambda t, F, m: t.logspace(0, 1, 5),
    "tril_indices": lambda t, F, m: t.tril_indices(3, 3),
    "triu_indices": lambda t, F, m: t.triu_indices(3, 3),
    "rand": lambda t, F, m: t.rand(2, 3),
    "randn": lambda t, F, m: t.randn(2, 3),
    "randint": lambda t, F, m: t.randint(0, 5, (2, 3)),
    "randperm": lambda t, F, m: t.randperm(5),
    "_to_copy": lambda t, F, m: m(3, 4).to(t.float64),
    "bernoulli": lambda t, F, m: t.bernoulli(m(3, 4)),
    "bernoulli_functional": lambda t, F, m: m(3, 4).bernoulli(0.5),
    "multinomial": lambda t, F, m: t.multinomial(m(4), 2),
    "normal": lambda t, F, m: t.normal(m(3, 4), m(3, 4)),
    "normal_functional": lambda t, F, m: m(3, 4).normal_(),
    "poisson": lambda t, F, m: t.poisson(m(3, 4)),
    "uniform": lambda t, F, m: m(3, 4).uniform_(),
    "exponential": lambda t, F, m: m(3, 4).exponential_(),
    "cauchy": lambda t, F, m: m(3, 4).cauchy_(),
    "log_normal": lambda t, F, m: m(3, 4).log_normal_(),
    "geometric": lambda t, F, m: m(3, 4).geometric_(0.5),
    "random": lambda t, F, m: m(3, 4).random_(5),
})

# Composite functions: ember builds them from ops (the autocast interposer sees those ops);
# torch has an op of their own for most of them.
COMPOSITES = {
    "mse_loss": lambda t, F, m: F.mse_loss(m(3, 4), m(3, 4)),
    "l1_loss": lambda t, F, m: F.l1_loss(m(3, 4), m(3, 4)),
    "smooth_l1_loss": lambda t, F, m: F.smooth_l1_loss(m(3, 4), m(3, 4)),
    "huber_loss": lambda t, F, m: F.huber_loss(m(3, 4), m(3, 4)),
    "kl_div": lambda t, F, m: F.kl_div(m(3, 4), m(3, 4), reduction="batchmean"),
    "cross_entropy": lambda t, F, m: F.cross_entropy(m.signed(4, 3), m.long(3, 4)),
    "binary_cross_entropy_with_logits": lambda t, F, m: F.binary_cross_entropy_with_logits(
        m.signed(3, 4), m(3, 4)),
    "margin_ranking_loss": lambda t, F, m: F.margin_ranking_loss(m(4), m(4), m.signed(4)),
    "soft_margin_loss": lambda t, F, m: F.soft_margin_loss(m(3, 4), m.signed(3, 4)),
    "hinge_embedding_loss": lambda t, F, m: F.hinge_embedding_loss(m(3, 4), m.signed(3, 4)),
    "cosine_embedding_loss": lambda t, F, m: F.cosine_embedding_loss(m(3, 4), m(3, 4),
                                                                     m.signed(3)),
    "poisson_nll_loss": lambda t, F, m: F.poisson_nll_loss(m(3, 4), m(3, 4)),
    "triplet_margin_loss": lambda t, F, m: F.triplet_margin_loss(m(3, 4), m(3, 4), m(3, 4)),
    "multi_margin_loss": lambda t, F, m: F.multi_margin_loss(m(3, 4), m.long(4, 3)),
    "multilabel_margin_loss": lambda t, F, m: F.multilabel_margin_loss(m(3, 4),
                                                                       m.long(4, 3, 4)),
    "cosine_similarity": lambda t, F, m: F.cosine_similarity(m(3, 4), m(3, 4)),
    "pdist": lambda t, F, m: F.pdist(m(3, 4)),
    "cdist": lambda t, F, m: t.cdist(m(3, 4), m(2, 4)),
    "bilinear": lambda t, F, m: F.bilinear(m(3, 4), m(3, 2), m(5, 4, 2), m(5)),
    "tensordot": lambda t, F, m: t.tensordot(m(3, 4), m(4, 5), 1),
    "chain_matmul": lambda t, F, m: t.linalg.multi_dot([m(3, 4), m(4, 5), m(5, 2)]),
    "linalg_matrix_norm": lambda t, F, m: t.linalg.matrix_norm(m(3, 4)),
    "linalg_vecdot": lambda t, F, m: t.linalg.vecdot(m(3, 4), m(3, 4)),
    "pinverse": lambda t, F, m: t.pinverse(m.spd(3)),
    "inner": lambda t, F, m: t.inner(m(3, 4), m(2, 4)),
    "outer": lambda t, F, m: t.outer(m(3), m(4)),
    "kron": lambda t, F, m: t.kron(m(2, 2), m(2, 3)),
    "cross": lambda t, F, m: t.cross(m(4, 3), m(4, 3), dim=1),
    "logdet": lambda t, F, m: t.logdet(m.spd(3)),
    "matrix_power": lambda t, F, m: t.matrix_power(m(3, 3), 2),
    "normalize": lambda t, F, m: F.normalize(m(3, 4)),
    "layer_norm": lambda t, F, m: F.layer_norm(m(3, 4), (4,)),
    "group_norm": lambda t, F, m: F.group_norm(m(2, 4, 3), 2),
    "instance_norm": lambda t, F, m: F.instance_norm(m(2, 3, 4)),
    "local_response_norm": lambda t, F, m: F.local_response_norm(m(1, 4, 3, 3), 2),
    "scaled_dot_product_attention": lambda t, F, m: F.scaled_dot_product_attention(
        m(1, 2, 3, 4), m(1, 2, 3, 4), m(1, 2, 3, 4)),
    "glu": lambda t, F, m: F.glu(m(3, 4)),
    "softmin": lambda t, F, m: F.softmin(m(3, 4), 1),
    "dropout_eval": lambda t, F, m: F.dropout(m(3, 4), training=False),
    "interpolate_bicubic": lambda t, F, m: F.interpolate(m(1, 2, 3, 3), scale_factor=2,
                                                         mode="bicubic"),
    "interpolate_area": lambda t, F, m: F.interpolate(m(1, 2, 4, 4), size=2, mode="area"),
    "lp_pool2d": lambda t, F, m: F.lp_pool2d(m(1, 2, 4, 4), 2, 2),
}


def _internal(lib, name: str):
    """An op PyTorch has only as ``torch.ops.aten.<name>`` (ember: its op table's entry)."""
    if lib.__name__ == "torch":
        return getattr(lib.ops.aten, name)
    from ember.ops.registry import OPS
    return OPS[name]


# the fused recurrent cells (PyTorch has them on CUDA only): hy
CASES["_thnn_fused_lstm_cell"] = lambda t, F, m: _internal(t, "_thnn_fused_lstm_cell")(
    m.signed(2, 8), m.signed(2, 8), m.signed(2, 2))[0]
CASES["_thnn_fused_gru_cell"] = lambda t, F, m: _internal(t, "_thnn_fused_gru_cell")(
    m.signed(2, 6), m.signed(2, 6), m.signed(2, 2))[0]


def run(name: str, lib, floats=("float32",), device: str = "cpu", seed: int = 0):
    """Run case ``name`` with library ``lib`` (torch or ember)."""
    fn = CASES.get(name) or COMPOSITES[name]
    return fn(lib, lib.nn.functional, Inputs(lib, floats, device, seed))
