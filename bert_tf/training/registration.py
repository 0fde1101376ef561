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
    helper.start()
    faults.point("workers_register")
    # Short joins: a signal's handler runs between two of them, wherever the kernel delivered
    # the signal (a thread of TensorFlow's) and whenever (a join only checks for handlers
    # when it starts and when a signal interrupts it in this thread). A KeyboardInterrupt
    # leaves the helper waiting, and its status, alone.
    while helper.is_alive():
      helper.join(0.1)
      _restore(handlers)
    code = lib.TF_GetCode(status)
    message = (lib.TF_Message(status) or b"").decode("utf-8", "replace")
    lib.TF_DeleteStatus(status)
    if code:
      raise errors_impl.exception_type_from_error_code(code)(None, None, message)

  # TensorFlow's coordination agent sets a SIGTERM handler of its own as it connects (a flag
  # for its preemption watcher: the process then goes on), over the script's; the script's
  # handlers are put back while it waits and once the strategy has started.
  handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
  original = pywrap_tfe.TFE_EnableCollectiveOps
  pywrap_tfe.TFE_EnableCollectiveOps = enable_collective_ops
  try:
    yield
  finally:
    pywrap_tfe.TFE_EnableCollectiveOps = original
    _restore(handlers)


def _restore(handlers):
  for signum, handler in handlers.items():
    if handler is not None:
      signal.signal(signum, handler)
