"""_lib: ctypes binding of libzcoll.so (the C API of include/zcoll.h that zcoll_torch uses).

One build of the library serves every torch and Python version: nothing here is compiled.
The library is found, in order, at $ZCOLL_LIBRARY (a path), in the source tree this package
sits in (build/libzcoll.so beside python/), next to an installed package (PREFIX/lib when the
package is in PREFIX/lib/python3/dist-packages), then by the system loader (libzcoll.so.0).
"""

import ctypes
import os

# zc_status values used by the Python side (include/zcoll.h).
ZC_OK = 0
ZC_IN_PROGRESS = 1
ZC_AGAIN = -1
ZC_UNSUPPORTED = -6
ZC_TIMED_OUT = -7
ZC_THREADS_MULTI = 0
ZC_ANY_SOURCE = 0xffffffff

# zc_dtype and zc_op values (include/zcoll.h).
ZC_INT8, ZC_UINT8, ZC_INT32, ZC_UINT32, ZC_INT64, ZC_UINT64 = 0, 1, 2, 3, 4, 5
ZC_FLOAT16, ZC_BFLOAT16, ZC_FLOAT32, ZC_FLOAT64 = 6, 7, 8, 9
ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX, ZC_AVG = 0, 1, 2, 3, 4
ZC_MEM_HOST, ZC_MEM_CUDA = 0, 1

ZC_ADDR_BYTES = 64
ZC_SECRET_BYTES = 16
ZC_REQ_WORDS = 4


class Config(ctypes.Structure):
    """zc_config, field for field (tests/python compares the offsets with the C compiler's)."""
    _fields_ = [
        ('version', ctypes.c_uint32),
        ('rank', ctypes.c_uint32),
        ('nranks', ctypes.c_uint32),
        ('local_rank', ctypes.c_uint32),
        ('root_addr', ctypes.c_char * ZC_ADDR_BYTES),
        ('secret', ctypes.c_uint8 * ZC_SECRET_BYTES),
        ('secret_set', ctypes.c_bool),
        ('timeout_ns', ctypes.c_uint64),
        ('init_timeout_ns', ctypes.c_uint64),
        ('max_requests', ctypes.c_uint32),
        ('max_plans', ctypes.c_uint32),
        ('max_mems', ctypes.c_uint32),
        ('slot_bytes', ctypes.c_uint32),
        ('slots', ctypes.c_uint32),
        ('spin_polls', ctypes.c_uint32),
        ('transport', ctypes.c_int),
        ('allreduce_oneshot_max_bytes', ctypes.c_uint64),
        ('reduce_direct_max_bytes', ctypes.c_uint64),
        ('bcast_tree_max_bytes', ctypes.c_uint64),
        ('ib_device', ctypes.c_char * 64),
        ('ib_port', ctypes.c_uint32),
        ('ib_gid_index', ctypes.c_int32),
        ('ib_qps_per_peer', ctypes.c_uint32),
        ('ib_timeout', ctypes.c_uint32),
        ('ib_retry_cnt', ctypes.c_uint32),
        ('ib_zcopy_min_bytes', ctypes.c_uint32),
        ('gpu_device', ctypes.c_int32),
        ('gpu_stream_slots', ctypes.c_uint32),
        ('gpu_scratch_bytes', ctypes.c_uint64),
        ('gpu_oneshot_max_bytes', ctypes.c_uint64),
        ('gpu_provider', ctypes.c_uint32),
        ('sym_bytes', ctypes.c_uint64),
        ('gpu_path', ctypes.c_uint32),
        ('gpu_stage_bytes', ctypes.c_uint64),
        ('threads', ctypes.c_uint32),
        ('error_text', ctypes.c_char * 256),
        ('inproc_ranks_per_host', ctypes.c_uint32),
        ('log_min_ranks', ctypes.c_uint32),
        ('overlay_min_ranks', ctypes.c_uint32),
        ('overlay_relay', ctypes.c_uint32),
    ]


class Req(ctypes.Structure):
    """zc_req: caller-owned request storage."""
    _fields_ = [('opaque_', ctypes.c_uint64 * ZC_REQ_WORDS)]


def _candidates():
    """Library paths to try, in the documented order."""
    env = os.environ.get('ZCOLL_LIBRARY')
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, '..', '..', 'build', 'libzcoll.so')
    # PREFIX/lib/python3/dist-packages/zcoll_torch -> PREFIX/lib/libzcoll.so.0
    installed = os.path.join(here, '..', '..', '..', 'libzcoll.so.0')
    return [p for p in (tree, installed) if os.path.exists(p)] + ['libzcoll.so.0', 'libzcoll.so']


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(os.path.normpath(path) if os.sep in path else path)
        except OSError as e:
            errors.append('%s: %s' % (path, e))
    raise ImportError('zcoll_torch: libzcoll.so not found (set ZCOLL_LIBRARY to its path, or '
                      'build the tree with ./configure.py && ninja): ' + '; '.join(errors))


lib = _load()
P, SZ, U32, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int
REQ = ctypes.POINTER(Req)


def _sig(name, args, res=ctypes.c_int):
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = args, res
    return fn


_sig('zc_status_name', [I], ctypes.c_char_p)
_sig('zc_config_default', [ctypes.POINTER(Config)], None)
_sig('zc_config_from_env', [ctypes.POINTER(Config)])
_sig('zc_config_tunables_from_env', [ctypes.POINTER(Config)])
_sig('zc_comm_arena_bytes', [ctypes.POINTER(Config)], SZ)
_sig('zc_comm_init', [ctypes.POINTER(Config), P, SZ, ctypes.POINTER(P)])
_sig('zc_init_error_text', [], ctypes.c_char_p)
_sig('zc_comm_abort', [P])
_sig('zc_comm_fini', [P])
_sig('zc_comm_rank', [P], U32)
_sig('zc_comm_size', [P], U32)
_sig('zc_comm_error_text', [P], ctypes.c_char_p)
_sig('zc_progress', [P])
_sig('zc_test', [P, REQ])
_sig('zc_wait', [P, REQ])
_sig('zc_mem_register', [P, P, SZ, I, ctypes.POINTER(P)])
_sig('zc_mem_deregister', [P, P])
_sig('zc_allreduce', [P, P, P, SZ, I, I, REQ])
_sig('zc_reduce', [P, P, P, SZ, I, I, U32, REQ])
_sig('zc_broadcast', [P, P, P, SZ, I, U32, REQ])
_sig('zc_reduce_scatter', [P, P, P, SZ, I, I, REQ])
_sig('zc_allgather', [P, P, P, SZ, I, REQ])
_sig('zc_gather', [P, P, P, SZ, I, U32, REQ])
_sig('zc_scatter', [P, P, P, SZ, I, U32, REQ])
_sig('zc_alltoall', [P, P, P, SZ, I, REQ])
_sig('zc_send', [P, P, SZ, I, U32, REQ])
_sig('zc_recv', [P, P, SZ, I, U32, REQ])
_sig('zc_send_tagged', [P, P, SZ, I, U32, U32, REQ])
_sig('zc_recv_tagged', [P, P, SZ, I, U32, U32, ctypes.POINTER(U32), REQ])
_sig('zc_barrier', [P, REQ])

# Stream-ordered forms exist only in CUDA builds of the library (None elsewhere).
STREAM = {}
for _name, _args in [('allreduce', [P, P, P, SZ, I, I, P]), ('reduce', [P, P, P, SZ, I, I, U32, P]),
                     ('broadcast', [P, P, P, SZ, I, U32, P]),
                     ('reduce_scatter', [P, P, P, SZ, I, I, P]),
                     ('allgather', [P, P, P, SZ, I, P]), ('gather', [P, P, P, SZ, I, U32, P]),
                     ('scatter', [P, P, P, SZ, I, U32, P]), ('alltoall', [P, P, P, SZ, I, P]),
                     ('barrier', [P, P])]:
    STREAM[_name] = _sig('zc_%s_stream' % _name, _args) if hasattr(lib, 'zc_%s_stream' % _name) \
        else None


def status_name(st):
    return lib.zc_status_name(st).decode()
