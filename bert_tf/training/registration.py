"""A multi-worker task's wait for the others, made interruptible.

When ``MultiWorkerMirroredStrategy`` starts, TensorFlow registers this task with the cluster's
coordination service and waits until every task has (``distribution`` bounds that wait by
``--worker_start_timeout_s``). The wait happens inside ``pywrap_tfe.TFE_EnableCollectiveOps``,
a C++ call that holds the GIL: no Python code runs meanwhile, so a signal's handler (Ctrl-C,
the SIGTERM of a preemption) would run only when the wait ends, up to the timeout later.

``interruptible()`` replaces that call, while the strategy starts, by the same C function
called through ``ctypes`` (which releases the GIL) in a helper thread; this thread waits for
the helper in short ``Thread.join``s, between which handlers run. The result is the same: the same C
call, and its error raised as the same ``tf.errors`` class. Where the library or the symbol
is not found (another TensorFlow build), TensorFlow's own call runs, as before.

SIGTERM: early in that call, before it waits, TensorFlow (``EagerContextDistributedManager::
EnableCollectiveOps``) creates its preemption notifier, which sets a SIGTERM handler of its own
with ``std::signal``, over the script's, for the whole process: the handler only sets a flag
(``tsl::SigtermNotifier``), so a SIGTERM that lands after it is swallowed and the task waits on
(until ``--worker_start_timeout_s``, and trains on if the cluster starts). Its moment, in the
helper thread, is unknown to this thread; putting the script's handler back every so often
left a window between the two, in which a SIGTERM was lost (the SIGTERM-while-waiting test
failed 1 run in 2). So this thread watches the process's SIGTERM disposition (``sigaction``)
and waits, before it announces the wait (fault point ``workers_register``), until TensorFlow
has set its handler, then puts the script's back at once; from then on SIGTERM is the script's.
A SIGTERM in the instant between the two settings is still TensorFlow's (no thread can stop
another's ``std::signal``); from the fault point on, none is.

What TensorFlow's handler fed: its notifier writes the key ``TF_DEFAULT_PREEMPTION_NOTICE_KEY``
in the coordination service, which only ``PreemptionCheckpointHandler`` on Google's internal
TPUs reads (``check_preemption``); on GPUs and CPUs that handler sets a Python SIGTERM handler
of its own when it is made, after the strategy, over whatever is there. So putting the
script's handler back disables nothing that bert_tf or a ``PreemptionCheckpointHandler`` uses.
"""

import contextlib
import ctypes
import glob
import os
import signal
import threading

from bert_tf import faults


def _library():
  """TensorFlow's C API library (``libtensorflow_cc``), or None."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  folder = os.path.dirname(tf.__file__)
  for path in sorted(glob.glob(os.path.join(folder, "libtensorflow_cc.so*")) +
                     glob.glob(os.path.join(folder, "libtensorflow_cc*.dylib"))):
    try:
      lib = ctypes.CDLL(path)
      lib.TFE_EnableCollectiveOps.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                              ctypes.c_size_t, ctypes.c_void_p]
      lib.TFE_EnableCollectiveOps.restype = None
      lib.TF_NewStatus.restype = ctypes.c_void_p
      lib.TF_DeleteStatus.argtypes = [ctypes.c_void_p]
      lib.TF_GetCode.argtypes = [ctypes.c_void_p]
      lib.TF_GetCode.restype = ctypes.c_int
      lib.TF_Message.argtypes = [ctypes.c_void_p]
      lib.TF_Message.restype = ctypes.c_char_p
      return lib
    except (OSError, AttributeError):
      continue
  return None


def _capsule_pointer(capsule):
  get = ctypes.pythonapi.PyCapsule_GetPointer
  get.argtypes = [ctypes.py_object, ctypes.c_char_p]
  get.restype = ctypes.c_void_p
  return get(capsule, None)


@contextlib.contextmanager
def interruptible():
  """Inside: TensorFlow's registration with the cluster waits where signals are handled."""
  # pylint: disable=import-outside-toplevel
  from tensorflow.python import pywrap_tfe
  from tensorflow.python.framework import errors_impl
  lib = _library()
  if lib is None:
    yield
    return

  def enable_collective_ops(context_handle, server_def):
    status = lib.TF_NewStatus()
    helper = threading.Thread(
        target=lib.TFE_EnableCollectiveOps, name="register-with-cluster", daemon=True,
        args=(_capsule_pointer(context_handle), server_def, len(server_def), status))
    script_sigterm = _disposition(signal.SIGTERM)
    watch = script_sigterm is not None and _coordinated(server_def)
    helper.start()
    # Until TensorFlow has set its SIGTERM handler (see the module docstring); signals meanwhile
    # go to the script's handlers, which run between the short joins.
    while watch and helper.is_alive() and _disposition(signal.SIGTERM) == script_sigterm:
      helper.join(0.001)
    _restore(handlers)
    faults.point("workers_register")
    # Short joins: a signal's handler runs between two of them, wherever the kernel delivered
    # the signal (a thread of TensorFlow's) and whenever (a join only checks for handlers
    # when it starts and when a signal interrupts it in this thread). A KeyboardInterrupt
    # leaves the helper waiting, and its status, alone.
    while helper.is_alive():
      helper.join(0.1)
      if watch and _disposition(signal.SIGTERM) != script_sigterm:
        _restore(handlers)  # set again (not seen in TensorFlow 2.21)
    code = lib.TF_GetCode(status)
    message = (lib.TF_Message(status) or b"").decode("utf-8", "replace")
    lib.TF_DeleteStatus(status)
    if code:
      raise errors_impl.exception_type_from_error_code(code)(None, None, message)

  # The script's handlers, put back over TensorFlow's (see the module docstring).
  handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
  original = pywrap_tfe.TFE_EnableCollectiveOps
  pywrap_tfe.TFE_EnableCollectiveOps = enable_collective_ops
  try:
    yield
  finally:
    pywrap_tfe.TFE_EnableCollectiveOps = original
    _restore(handlers)


def _coordinated(server_def):
  """Whether TensorFlow's call starts a coordination service agent for ``server_def`` (and
  with it the preemption notifier that sets the SIGTERM handler)."""
  try:
    from tensorflow.core.protobuf import tensorflow_server_pb2  # pylint: disable=import-outside-toplevel
    config = tensorflow_server_pb2.ServerDef.FromString(server_def).default_session_config
    return bool(config.experimental.coordination_config.service_type)
  except Exception:  # pylint: disable=broad-except  # moved or unreadable: do not wait for it
    return False


_libc = None


def _disposition(signum):
  """The address of the handler the process runs for ``signum`` now (whoever set it, Python or
  C++), from ``sigaction``; None where it cannot be read."""
  global _libc  # pylint: disable=global-statement
  try:
    if _libc is None:
      _libc = ctypes.CDLL(None, use_errno=True)
      _libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
      _libc.sigaction.restype = ctypes.c_int
    action = (ctypes.c_char * 512)()  # a struct sigaction (152 bytes on Linux); the handler first
    if _libc.sigaction(signum, None, action) != 0:
      return None
    return ctypes.c_void_p.from_buffer(action).value or 0
  except (OSError, AttributeError):
    return None


def _restore(handlers):
  for signum, handler in handlers.items():
    if handler is not None:
      signal.signal(signum, handler)
