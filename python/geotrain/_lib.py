"""_lib.py — libgeotrain.so through ctypes: the structs and functions of gt_diloco.h.

No compiler runs at import time: the structs are laid out here field by field as the header
declares them, and their sizes are checked against the library's own (gt_diloco_params_size,
gt_diloco_status_size), so a package and a library from different versions fail with a clear
message instead of passing garbage.

The library is found, in order: $GT_LIBRARY (`geotrain launch -- CMD` sets it to the library
next to the geotrain binary it runs); the install tree (`cmake --install` writes _paths.py
beside the package with the library's place relative to it); the source tree's build/ (after
./quickstart.sh); pkg-config's libdir of geotrain (a copy installed by `pip install ./python`
against an installed libgeotrain); the system's library path.
"""
import ctypes
import ctypes.util
import os
import subprocess

GT_OK = 0
GT_ERR_CLOSED = -14

_STATUS_NAMES = {
    0: "ok", -1: "invalid argument", -2: "out of memory", -3: "I/O error",
    -4: "invalid configuration", -5: "not found", -6: "exists", -7: "timed out",
    -8: "try again", -9: "corrupt data", -10: "authentication failed", -11: "peer lost",
    -12: "unsupported", -13: "overflow", -14: "closed", -15: "internal error",
    -16: "retired from the run",
}

STATES = ("starting", "joining", "training", "waiting", "done", "stopped", "failed")

ALLREDUCE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                             ctypes.c_size_t, ctypes.c_int)
ALLGATHERV = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float),
                              ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class Comm(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("rank", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("allreduce_u64", ALLREDUCE), ("allgatherv", ALLGATHERV)]


class Params(ctypes.Structure):
    _fields_ = [
        ("cfg", ctypes.c_void_p),
        ("config_path", ctypes.c_char_p),
        ("sets", ctypes.POINTER(ctypes.c_char_p)),
        ("n_sets", ctypes.c_size_t),
        ("site", ctypes.c_char_p),
        ("run_dir", ctypes.c_char_p),
        ("run_id", ctypes.c_char_p),
        ("params", ctypes.POINTER(ctypes.c_float)),
        ("n_params", ctypes.c_size_t),
        ("comm", Comm),
        ("before_read", HOOK),
        ("after_write", HOOK),
        ("hook_ctx", ctypes.c_void_p),
        ("stop", ctypes.POINTER(ctypes.c_int)),
        ("metrics", ctypes.c_int),
        ("env", ctypes.c_int),
        ("expect_sites", ctypes.c_uint32),
        ("resume_dir", ctypes.c_char_p),
        ("resume_steps", ctypes.POINTER(ctypes.c_uint64)),
        ("n_resume_steps", ctypes.c_size_t),
        ("layout", ctypes.c_char_p),
    ]


class Status(ctypes.Structure):
    _fields_ = [
        ("state", ctypes.c_int),
        ("site_index", ctypes.c_uint32),
        ("n_sites", ctypes.c_uint32),
        ("step", ctypes.c_uint64),
        ("first_step", ctypes.c_uint64),
        ("total_steps", ctypes.c_uint64),
        ("inner_steps", ctypes.c_uint64),
        ("round", ctypes.c_uint64),
        ("rounds_applied", ctypes.c_uint64),
        ("joined_round", ctypes.c_uint64),
        ("steps_trained", ctypes.c_uint64),
        ("tokens", ctypes.c_uint64),
        ("loss", ctypes.c_double),
        ("compute_s", ctypes.c_double),
        ("wait_s", ctypes.c_double),
        ("wan_bytes_sent", ctypes.c_uint64),
        ("wan_bytes_received", ctypes.c_uint64),
        ("view_epoch", ctypes.c_uint64),
        ("live_sites", ctypes.c_uint32),
        ("hash_checks", ctypes.c_uint64),
        ("hash_mismatches", ctypes.c_uint64),
        ("anchor_refetches", ctypes.c_uint64),
        ("param_passes", ctypes.c_double),
        ("resumed_step", ctypes.c_int64),
        ("steps_skipped", ctypes.c_uint64),
        ("rounds_cut", ctypes.c_uint64),
    ]


def status_str(code):
    return _STATUS_NAMES.get(code, "error %d" % code)


def _candidates():
    env = os.environ.get("GT_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _paths  # written by cmake --install
        yield os.path.normpath(os.path.join(here, _paths.LIBRARY_FROM_PACKAGE))
    except ImportError:
        pass
    yield os.path.normpath(os.path.join(here, "..", "..", "build", "libgeotrain.so"))
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "geotrain"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        if libdir:
            yield os.path.join(libdir, "libgeotrain.so")
    except (OSError, subprocess.SubprocessError):
        pass
    found = ctypes.util.find_library("geotrain")
    if found:
        yield found


def load():
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried[-1] += " (%s)" % e
            continue
        _declare(lib)
        if lib.gt_diloco_params_size() != ctypes.sizeof(Params) or \
                lib.gt_diloco_status_size() != ctypes.sizeof(Status):
            raise ImportError("geotrain: %s does not match this Python package (struct sizes "
                              "%d/%d there, %d/%d here): use the package from the same build"
                              % (path, lib.gt_diloco_params_size(), lib.gt_diloco_status_size(),
                                 ctypes.sizeof(Params), ctypes.sizeof(Status)))
        return lib
    raise ImportError("geotrain: cannot find libgeotrain.so (tried: %s); build geotrain "
                      "(./quickstart.sh) or set GT_LIBRARY to the library's path"
                      % ", ".join(tried))


def _declare(lib):
    P = ctypes.POINTER
    lib.gt_diloco_params_init.argtypes = [P(Params)]
    lib.gt_diloco_params_init.restype = None
    lib.gt_diloco_params_size.restype = ctypes.c_size_t
    lib.gt_diloco_status_size.restype = ctypes.c_size_t
    lib.gt_diloco_create.argtypes = [P(Params), P(ctypes.c_void_p)]
    lib.gt_diloco_create.restype = ctypes.c_int
    lib.gt_diloco_step_timed.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_double,
                                         ctypes.c_double]
    lib.gt_diloco_step_timed.restype = ctypes.c_int
    lib.gt_diloco_status.argtypes = [ctypes.c_void_p, P(Status)]
    lib.gt_diloco_status.restype = None
    lib.gt_diloco_summary.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                      P(ctypes.c_size_t)]
    lib.gt_diloco_summary.restype = ctypes.c_int
    lib.gt_diloco_set_result.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double]
    lib.gt_diloco_set_result.restype = ctypes.c_int
    lib.gt_diloco_save.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint]
    lib.gt_diloco_save.restype = ctypes.c_int
    lib.gt_diloco_close.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.gt_diloco_close.restype = None
    lib.gt_diloco_error_message.argtypes = []
    lib.gt_diloco_error_message.restype = ctypes.c_char_p
