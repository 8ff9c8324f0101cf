"""Process groups (PyTorch's c10d API): ``init_process_group`` and its rendezvous (env://,
tcp://, file://, or a store), the default group, ``new_group``, and the queries on groups.

Every group here runs on the MPI engine (``_engine``): "mpi" by name, and "gloo" — the CPU
backend PyTorch programs ask for — on it too (one log line says so). "nccl" (CUDA tensors)
is not built yet.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from datetime import timedelta

from . import _engine
from .store import FileStore, PrefixStore, TCPStore

log = logging.getLogger("ember.distributed")

default_pg_timeout = timedelta(minutes=30)
_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")
_NCCL = ("ember.distributed: the NCCL engine (CUDA tensors) is not built yet (the "
         "distributed-training issue, milestone 2); use backend 'gloo' or 'mpi' for CPU tensors")


class Backend(str):
    """A backend's name: ``Backend("GLOO") == "gloo"``, and the names as attributes."""
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: "
                             f"{type(name)}")
        return str.__new__(cls, name.lower())


class ProcessGroup:
    """A group of ranks and the MPI communicator its collectives run on. ``rank()`` and
    ``size()`` are this process's rank in the group and the group's size."""

    def __init__(self, comm, global_ranks: list, backend: str, timeout: timedelta,
                 global_rank: int, name: str = ""):
        self._comm = comm
        self._global_ranks = list(global_ranks)
        self._group_rank = {g: i for i, g in enumerate(global_ranks)}
        self._backend = backend
        self.timeout = timeout
        self._global_rank = global_rank
        self._seq = 0
        self.group_name = name
        self._store = None  # the rendezvous store, asked whether the world was aborted

    def rank(self) -> int:
        return self._comm.rank

    def size(self) -> int:
        return self._comm.size

    def name(self) -> str:
        return self._backend

    @property
    def bound_device_id(self):
        return None

    def __repr__(self):
        return f"ProcessGroup(backend={self._backend}, size={self.size()})"


class _State:
    default = None  # the default (WORLD) ProcessGroup
    groups: list = []  # every group made by this process (destroyed with the default)
    store = None


_state = _State()


class GroupMember:
    """``GroupMember.WORLD`` (the default group once initialised) and ``NON_GROUP_MEMBER``."""
    NON_GROUP_MEMBER = -100

    class _World:
        def __get__(self, obj, owner):
            return _state.default

    WORLD = _World()


class group:
    """``group.WORLD``: the default process group (None before ``init_process_group``)."""
    WORLD = GroupMember._World()


def is_available() -> bool:
    """Whether process groups can be created: the MPI engine's packages are installed."""
    import importlib.util
    return importlib.util.find_spec("mpi4py") is not None


def is_mpi_available() -> bool:
    return is_available()


is_gloo_available = is_mpi_available  # "gloo" runs on the MPI engine


def is_nccl_available() -> bool:
    return False


def is_initialized() -> bool:
    return _state.default is not None


def is_torchelastic_launched() -> bool:
    """Whether a torchrun-style elastic launcher started this process."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def _default():
    if _state.default is None:
        raise ValueError(_NOT_INITIALIZED)
    return _state.default


def resolve(group_arg):
    """The ProcessGroup a collective's ``group=`` argument names (None: the default)."""
    if group_arg is None or group_arg is GroupMember.WORLD:
        return _default()
    _default()
    return group_arg


def _env_int(name: str, given: int) -> int:
    if given is not None and given >= 0:
        return given
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"Error initializing torch.distributed using env:// rendezvous: "
                         f"environment variable {name} expected, but not set")
    return int(value)


def _rendezvous(init_method: str, rank: int, world_size: int, timeout: timedelta):
    """(store, rank, world_size) from an init_method URL."""
    url = urllib.parse.urlparse(init_method)
    query = dict(urllib.parse.parse_qsl(url.query))
    if url.scheme == "env":
        if _engine.under_process_manager() and "RANK" not in os.environ and \
                "PMI_RANK" in os.environ:
            # started by mpiexec: MPI_COMM_WORLD is the world, no store is needed to form it
            rank = int(os.environ["PMI_RANK"]) if rank < 0 else rank
            world_size = int(os.environ["PMI_SIZE"]) if world_size < 0 else world_size
            if "MASTER_ADDR" not in os.environ:
                return None, rank, world_size
        rank = _env_int("RANK", int(query.get("rank", rank)))
        world_size = _env_int("WORLD_SIZE", int(query.get("world_size", world_size)))
        host = os.environ.get("MASTER_ADDR")
        port = os.environ.get("MASTER_PORT")
        if host is None:
            raise ValueError("Error initializing torch.distributed using env:// rendezvous: "
                             "environment variable MASTER_ADDR expected, but not set")
        if port is None:
            raise ValueError("Error initializing torch.distributed using env:// rendezvous: "
                             "environment variable MASTER_PORT expected, but not set")
        store = TCPStore(host, int(port), world_size, rank == 0, timeout)
    elif url.scheme == "tcp":
        rank = int(query.get("rank", rank))
        world_size = int(query.get("world_size", world_size))
        if rank < 0 or world_size < 1:
            raise ValueError("rank and world_size must be given with a tcp:// init_method")
        store = TCPStore(url.hostname, url.port, world_size, rank == 0, timeout)
    elif url.scheme == "file":
        rank = int(query.get("rank", rank))
        world_size = int(query.get("world_size", world_size))
        if rank < 0 or world_size < 1:
            raise ValueError("rank and world_size must be given with a file:// init_method")
        store = FileStore(url.path, world_size, timeout)
    else:
        raise RuntimeError(f"No rendezvous handler for {url.scheme}://")
    return store, rank, world_size


def init_process_group(backend=None, init_method=None, timeout=None, world_size: int = -1,
                       rank: int = -1, store=None, group_name: str = "", pg_options=None,
                       device_id=None) -> None:
    """Make the default process group of ``world_size`` ranks (every rank calls this)."""
    if _state.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = "gloo" if backend is None else Backend(backend)
    if name == "cpu:gloo":
        name = "gloo"
    if name == "nccl":
        raise RuntimeError(_NCCL)
    if name not in ("gloo", "mpi"):
        raise RuntimeError(f"Invalid backend: '{name}' (ember.distributed has the MPI engine, "
                           f"as 'mpi' and 'gloo')")
    if timeout is None:
        timeout = default_pg_timeout
    if not isinstance(timeout, timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got "
                        f"{type(timeout)}")
    if store is None:
        if init_method is None:
            init_method = "env://"
        store, rank, world_size = _rendezvous(init_method, rank, world_size, timeout)
    else:
        if init_method is not None:
            raise ValueError("Cannot specify both init_method and store.")
        if rank < 0 or world_size < 1:
            raise ValueError("world_size and rank must be given with a store")
    if not 0 <= rank < world_size:
        raise ValueError(f"Invalid rank {rank} for world size {world_size}")
    if name == "gloo":
        log.info("ember.distributed: backend 'gloo' runs on ember's MPI engine (MPICH)")
    seconds = timeout.total_seconds()
    prefixed = None if store is None else PrefixStore("ember", store)
    comm = _engine.form_world(rank, world_size, prefixed, seconds)
    pg = ProcessGroup(comm, list(range(world_size)), str(name), timeout, rank, "0")
    pg._store = store if world_size > 1 else None
    if world_size > 1:
        _engine.install_excepthook(store, rank)  # a failing rank aborts the world
    _state.store = store
    _state.default = pg
    _state.groups = [pg]


def destroy_process_group(group=None) -> None:
    """Destroy ``group`` (default: the default group and every group made after it)."""
    pg = _default() if group is None else group
    targets = list(_state.groups) if pg is _state.default else [pg]
    for g in targets:
        if g._comm is not None and not _engine.broken:
            g._comm.Free()
        g._comm = None
        if g in _state.groups:
            _state.groups.remove(g)
    if pg is _state.default:
        _state.default = None
        _state.store = None


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization: bool = False, group_desc=None, device_id=None,
              sort_ranks: bool = True):
    """A group of the given global ranks (every rank of the default group calls this; those
    not in ``ranks`` get ``GroupMember.NON_GROUP_MEMBER``)."""
    world = _default()
    if backend is not None and Backend(backend) == "nccl":
        raise RuntimeError(_NCCL)
    size = world.size()
    ranks = list(range(size)) if ranks is None else list(ranks)
    if sort_ranks:
        ranks = sorted(ranks)
    for r in ranks:
        if not 0 <= r < size:
            raise ValueError(f"The new group's rank should be within the world_size set by "
                             f"init_process_group, got {r}")
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"ranks must be distinct, got {ranks}")
    comm = world._comm.Create(world._comm.group.Incl(ranks))
    if world.rank() not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, ranks, world._backend, timeout or world.timeout, world.rank(),
                      str(len(_state.groups)))
    pg._store = world._store
    _state.groups.append(pg)
    return pg


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (-1 if it is not a member)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group).rank()


def get_world_size(group=None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group).size()


def get_backend(group=None) -> str:
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("Invalid process group specified")
    return resolve(group)._backend


def get_group_rank(group, global_rank: int) -> int:
    pg = resolve(group)
    if global_rank not in pg._group_rank:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
    return pg._group_rank[global_rank]


def get_global_rank(group, group_rank: int) -> int:
    pg = resolve(group)
    if not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {pg}")
    return pg._global_ranks[group_rank]


def get_process_group_ranks(group) -> list:
    return list(resolve(group)._global_ranks)


def get_default_store():
    _default()
    return _state.store
