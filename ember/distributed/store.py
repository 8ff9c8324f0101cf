"""Key-value stores for rendezvous: ``TCPStore`` (a server thread in the process made with
``is_master=True``, clients over TCP) and ``FileStore`` (a file shared by the processes, locked
with ``fcntl``). Both have PyTorch's ``Store`` methods: set/get/add/wait/check/compare_set/
delete_key/num_keys, values as bytes, and a timeout after which a blocking call raises
``DistStoreError``."""

from __future__ import annotations

import fcntl
import os
import pickle
import socket
import struct
import threading
import time
from datetime import timedelta

from .errors import DistNetworkError, DistStoreError

_DEFAULT_TIMEOUT = timedelta(seconds=300)
_INIT_KEY = "init/"  # the workers' counter (PyTorch's TCPStore keeps one too: num_keys counts it)


def _as_bytes(value) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, (list, tuple)):  # PyTorch accepts a list of ints (bytes)
        return bytes(value)
    raise TypeError(f"set(): incompatible value type {type(value).__name__}, expected str or "
                    "bytes")


def _seconds(timeout) -> float:
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _timeout_error(seconds: float, keys) -> DistStoreError:
    names = ", ".join("/" + k for k in keys)
    return DistStoreError(f"wait timeout after {round(seconds * 1000)}ms, keys: {names}")


class Store:
    """The shared part of the stores: the operations on a dict, run under a lock."""

    def __init__(self, timeout=_DEFAULT_TIMEOUT):
        self._timeout = timeout if isinstance(timeout, timedelta) else \
            timedelta(seconds=float(timeout))

    @property
    def timeout(self) -> timedelta:
        return self._timeout

    def set_timeout(self, timeout) -> None:
        self._timeout = timeout if isinstance(timeout, timedelta) else \
            timedelta(seconds=float(timeout))

    def get(self, key: str) -> bytes:
        self.wait([key])
        return self._call("get", key)

    def set(self, key: str, value) -> None:
        self._call("set", key, _as_bytes(value))

    def add(self, key: str, amount: int) -> int:
        return self._call("add", key, int(amount))

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        return self._call("compare_set", key, _as_bytes(expected_value),
                          _as_bytes(desired_value))

    def check(self, keys) -> bool:
        return self._call("check", list(keys))

    def delete_key(self, key: str) -> bool:
        return self._call("delete_key", key)

    def num_keys(self) -> int:
        return self._call("num_keys")

    def wait(self, keys, timeout=None) -> None:
        seconds = _seconds(self._timeout if timeout is None else timeout)
        self._wait(list(keys), seconds)


def _apply(data: dict, op: str, args):
    """One store operation on ``data`` (the caller holds the lock)."""
    if op == "get":
        return data[args[0]]
    if op == "set":
        data[args[0]] = args[1]
        return None
    if op == "add":
        value = int(data.get(args[0], b"0")) + args[1]
        data[args[0]] = str(value).encode()
        return value
    if op == "compare_set":
        key, expected, desired = args
        current = data.get(key)
        if current is None:
            if expected == b"":
                data[key] = desired
                return desired
            return expected
        if current == expected:
            data[key] = desired
            return desired
        return current
    if op == "check":
        return all(k in data for k in args[0])
    if op == "delete_key":
        return data.pop(args[0], None) is not None
    if op == "num_keys":
        return len(data)
    raise ValueError(f"unknown store operation {op!r}")


# ---------------------------------------------------------------------- TCPStore
def _send(sock, obj) -> None:
    payload = pickle.dumps(obj)
    sock.sendall(struct.pack("!Q", len(payload)) + payload)


def _recv_exact(sock, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the store's peer closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(sock):
    (n,) = struct.unpack("!Q", _recv_exact(sock, 8))
    return pickle.loads(_recv_exact(sock, n))


class _Server:
    """The TCPStore server: one thread accepting, one thread per client."""

    def __init__(self, host: str, port: int):
        self.data: dict = {}
        self.cond = threading.Condition()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind(("" if host in ("", "0.0.0.0") else host, port))
        except OSError as e:
            self.sock.close()
            raise DistNetworkError(f"The server socket has failed to listen on any local "
                                   f"network address. port: {port}, useIpv6: 0, code: "
                                   f"{-e.errno}, name: {e.strerror}") from None
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="ember-store").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn) -> None:
        try:
            while True:
                op, args = _recv(conn)
                if op == "wait":
                    keys, seconds = args
                    with self.cond:
                        ok = self.cond.wait_for(lambda: all(k in self.data for k in keys),
                                                seconds)
                    _send(conn, (True, ok))
                    continue
                try:
                    with self.cond:
                        result = _apply(self.data, op, args)
                        self.cond.notify_all()
                    _send(conn, (True, result))
                except KeyError as e:
                    _send(conn, (False, e))
        except (ConnectionError, OSError, EOFError):
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


class TCPStore(Store):
    """``TCPStore(host_name, port, world_size=None, is_master=False, timeout=300s,
    wait_for_workers=True)``: the master runs the server (``port=0`` picks a free port, see
    ``.port``); every instance, the master's included, is a client of it."""

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout=_DEFAULT_TIMEOUT, wait_for_workers: bool = True,
                 multi_tenant: bool = False, master_listen_fd=None, use_libuv: bool = True):
        super().__init__(timeout)
        self.host = host_name
        self._server = _Server(host_name, port) if is_master else None
        self.port = self._server.port if is_master else port
        self._lock = threading.Lock()
        self._sock = self._connect()
        self.add(_INIT_KEY, 1)
        if is_master and wait_for_workers and world_size:
            self._wait_count(_INIT_KEY, world_size)

    def _connect(self):
        deadline = time.monotonic() + self._timeout.total_seconds()
        while True:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=10)
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistNetworkError(f"The client socket has timed out after "
                                           f"{self._timeout.total_seconds():g}s while trying "
                                           f"to connect to ({self.host}, {self.port}).") from e
                time.sleep(0.05)

    def _wait_count(self, key: str, n: int) -> None:
        deadline = time.monotonic() + self._timeout.total_seconds()
        while int(self._call("get", key)) < n:
            if time.monotonic() > deadline:
                raise DistStoreError(f"Timed out after {self._timeout.total_seconds():g}s "
                                     f"waiting for {n} workers to join the store")
            time.sleep(0.01)

    def _call(self, op: str, *args):
        with self._lock:
            _send(self._sock, (op, args))
            ok, result = _recv(self._sock)
        if not ok:
            raise DistStoreError(f"key {result.args[0]!r} not found in the store")
        return result

    def _wait(self, keys, seconds: float) -> None:
        if not self._call("wait", keys, seconds):
            raise _timeout_error(seconds, keys)

    def __del__(self):
        try:
            self._sock.close()
            if self._server is not None:
                self._server.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass


# ---------------------------------------------------------------------- FileStore
class FileStore(Store):
    """``FileStore(file_name, world_size=-1)``: the keys live in one file that every process
    opens; each operation reads and rewrites it under an exclusive ``fcntl`` lock."""

    def __init__(self, file_name: str, world_size: int = -1, timeout=_DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self.path = file_name
        self.world_size = world_size
        fd = os.open(file_name, os.O_RDWR | os.O_CREAT, 0o644)
        os.close(fd)
        self._call("add", _INIT_KEY, 1)  # the processes using the file (num_keys counts it)

    def _call(self, op: str, *args):
        with open(self.path, "r+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                raw = fh.read()
                data = pickle.loads(raw) if raw else {}
                try:
                    result = _apply(data, op, args)
                except KeyError as e:
                    raise DistStoreError(f"key {e.args[0]!r} not found in the store") from None
                if op in ("set", "add", "compare_set", "delete_key"):
                    fh.seek(0)
                    fh.truncate()
                    fh.write(pickle.dumps(data))
                    fh.flush()
                return result
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def delete_key(self, key: str) -> bool:
        self._call("delete_key", key)
        return True  # PyTorch's FileStore answers True whether the key was there or not

    def _wait(self, keys, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._call("check", keys):
            if time.monotonic() > deadline:
                raise DistStoreError(f"Timeout waiting for key: {', '.join(keys)} after "
                                     f"{round(seconds * 1000)} ms")
            time.sleep(0.005)


class PrefixStore(Store):
    """``PrefixStore(prefix, store)``: every key of ``store`` under ``prefix + "/"``."""

    def __init__(self, prefix: str, store: Store):
        super().__init__(store.timeout)
        self.prefix = prefix
        self.underlying_store = store

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def _call(self, op: str, *args):
        if op == "check":
            return self.underlying_store._call(op, [self._key(k) for k in args[0]])
        if op == "num_keys":
            return self.underlying_store._call(op)
        return self.underlying_store._call(op, self._key(args[0]), *args[1:])

    def _wait(self, keys, seconds: float) -> None:
        self.underlying_store._wait([self._key(k) for k in keys], seconds)
