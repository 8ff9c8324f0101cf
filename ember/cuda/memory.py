"""``ember.cuda.memory_summary``: the memory numbers of a device as a text table."""

from __future__ import annotations

from ..backends.cuda import memory as _memory
from ..backends.cuda import runtime as _runtime

_WIDTH = 75


def _line(char: str = "-") -> str:
    return "|" + char * _WIDTH + "|"


def _row(name: str, now: str = "", peak: str = "") -> str:
    return f"| {name:<34}|{now:>18} |{peak:>18} |"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def summary_table(index: int, stats: dict, abbreviated: bool = False) -> str:
    """The table of ``stats`` (``memory_stats``' keys; absent ones count 0) for GPU
    ``index``."""
    def get(key):
        return stats.get(key, 0)

    title = f"ember CUDA memory summary, device ID {index}"
    ooms = f" CUDA OOMs: {get('num_ooms')}"
    retries = f" cudaMalloc retries: {get('num_alloc_retries')}"
    lines = [_line("="), "|" + title.center(_WIDTH) + "|", _line(),
             "|" + ooms.ljust(37) + "|" + retries.ljust(_WIDTH - 38) + "|",
             _line("="), _row("Metric", "Cur Usage", "Peak Usage"), _line(),
             _row("Allocated memory", _size(get("allocated_bytes.all.current")),
                  _size(get("allocated_bytes.all.peak"))),
             _row("Reserved memory", _size(get("reserved_bytes.all.current")),
                  _size(get("reserved_bytes.all.peak"))),
             _row("Reserved, not allocated", _size(get("inactive_split_bytes.all.current")))]
    if not abbreviated:
        lines += [_line(), _row("Free cached blocks", str(get("inactive_split.all.current"))),
                  _row("Frees waiting on streams", str(get("num_pending_frees")))]
    lines.append(_line("="))
    return "\n".join(lines) + "\n"


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """``ember.cuda.memory_summary(device=None, abbreviated=False)``: the allocator's numbers
    for ``device`` (the current GPU) as a table: allocated and reserved bytes now and at
    their peaks, the cached bytes not allocated, out-of-memory errors and retries (and, unless
    ``abbreviated``, the free cached blocks and the frees waiting on streams). Without a GPU,
    or before CUDA is used, every number is 0."""
    if not _runtime.initialized():
        index = 0 if device is None else _given_index(device)
        return summary_table(index, {}, abbreviated)
    from .streams import _index
    index = _index(device)
    return summary_table(index, _memory.stats(index), abbreviated)


def _given_index(device) -> int:
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if isinstance(device, str):
        _, _, i = device.partition(":")
        index = int(i) if i else None
    return 0 if index is None else index
