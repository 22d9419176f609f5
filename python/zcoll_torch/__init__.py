"""zcoll_torch: zcoll as a torch.distributed backend.

    import zcoll_torch                      # registers the backend "zcoll"
    dist.init_process_group("zcoll", ...)   # env://, tcp://, a store: as with gloo

Pure Python over libzcoll.so with ctypes: nothing to compile against torch, so one build of
zcoll serves torch 1.13 and 2.x alike. The library is found at $ZCOLL_LIBRARY, in the source
tree this package sits in (build/libzcoll.so), beside an installed package, then by the system
loader. See python/README.md.
"""

import inspect

import torch.distributed as dist

from . import _lib
from ._group import ProcessGroupZcoll
from ._work import ZcollWork

__all__ = ['ProcessGroupZcoll', 'ZcollWork', 'create_process_group', 'library_path']
BACKEND = 'zcoll'


def create_process_group(store, rank, size, timeout, *args, **kwargs):
    """The creator torch calls for every group of backend "zcoll" (on its members only)."""
    return ProcessGroupZcoll(store, rank, size, timeout)


def library_path():
    """The file libzcoll was loaded from."""
    return _lib.lib._name


def _register():
    if BACKEND.upper() in getattr(dist.Backend, '_plugins', {}) or \
            getattr(dist.Backend, BACKEND.upper(), None) == BACKEND:
        return
    params = inspect.signature(dist.Backend.register_backend).parameters
    if 'devices' in params:   # torch 2.x: one process group for both device types
        dist.Backend.register_backend(BACKEND, create_process_group, devices=['cpu', 'cuda'])
    else:
        dist.Backend.register_backend(BACKEND, create_process_group)


def _wrap_destroy():
    """dist.destroy_process_group says goodbye on the default zcoll group first (a bounded
    barrier, _group._Comm.goodbye): rank 0's process holds torch's TCPStore, and a rank 0 that
    finishes its last collective early (a broadcast root returns at once) would otherwise leave
    while the others still poll the store in new_group's barrier ("Broken pipe", torch 1.13).
    mp.Process children end with os._exit, so a finalizer alone would never run."""
    original = dist.destroy_process_group
    if getattr(original, '_zcoll_goodbye', False):
        return

    def destroy_process_group(group=None):
        pg = None
        try:
            pg = dist.distributed_c10d._get_default_group()
        except RuntimeError:   # not initialized: the original says so
            pass
        if isinstance(pg, ProcessGroupZcoll) and (group is None or group is dist.group.WORLD
                                                  or group is pg):
            pg.goodbye()
        return original(group) if group is not None else original()

    destroy_process_group._zcoll_goodbye = True
    destroy_process_group.__doc__ = original.__doc__
    dist.destroy_process_group = destroy_process_group


_register()
_wrap_destroy()
