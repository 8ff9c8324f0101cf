"""``ember.onnx``: ONNX export. Programs import it at the top; the exporter itself arrives with
the export issue (through ember.export and the ``[onnx]`` extra), so ``export`` raises a
NotImplementedError saying so."""

from __future__ import annotations


def is_in_onnx_export() -> bool:
    return False


def export(model, args=(), f=None, *unused, **kwargs):
    raise NotImplementedError("ember.onnx.export: the ONNX exporter is not available in this "
                              "version of ember (it arrives with ember.export)")
