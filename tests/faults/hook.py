"""Running a process to a named fault point (``bert_tf/faults.py``) before signalling it.

A test starts the command with ``env(...)`` and waits with ``wait_at_point`` until the process
announced that it is at the point (it then waits there, with ``pause``): the signal lands
there, whatever the speed or the load of the machine. With ``hold`` the process waits there
until the test removes the ready file (having changed, say, a file the process reads next).
"""

import os
import signal
import struct
import time

from bert_tf import faults
from tests import warm

WAIT_S = 600  # Start-up of a TensorFlow script on a loaded 2-core machine, and the work before.


def env(base, point, n=1, ready=None, action="pause"):
  """``base`` with ``BERT_TF_FAULT=<action>:<point>:<n>`` (and the ready file, for ``pause``,
  ``announce`` and ``hold``)."""
  extra = {faults.FAULT_ENV: f"{action}:{point}:{n}"}
  if ready is not None:
    extra[faults.READY_ENV] = str(ready)
  return {**base, **extra}


def wait_at_point(process, ready, timeout=WAIT_S):
  """Waits until ``process`` wrote ``ready`` (it is at the fault point); fails if it ends
  first or takes more than ``timeout`` s."""
  deadline = time.monotonic() + timeout
  while not os.path.exists(ready):
    if process.poll() is not None:
      output = process.communicate() if process.stdout or process.stderr else ""
      raise AssertionError(f"exit {process.returncode} before the fault point: {output}")
    assert time.monotonic() < deadline, f"not at the fault point after {timeout} s"
    time.sleep(0.01)
  return int(open(ready, encoding="utf-8").read())


def start_at_point(command, base_env, point, n, ready, action="pause", **popen):
  """Starts ``command`` with ``pause`` (or ``hold``: it goes on once ``ready`` is removed) at
  ``point`` (n-th pass or number ``n``); returns the process once it waits there."""
  process = warm.Popen(command, env=env(base_env, point, n, ready, action), **popen)
  try:
    wait_at_point(process, ready)
  except BaseException:
    if popen.get("start_new_session"):
      os.killpg(process.pid, signal.SIGKILL)
    else:
      process.kill()
    process.communicate()
    raise
  return process


def flip_in_record(path, k):
  """Changes one byte inside the data of record ``k`` of the TFRecord file ``path`` (the file
  is replaced whole, as a new file); returns the byte offset where record k's frame starts,
  summed here from the frames' length fields (uint64 length, 4 + length + 4 bytes more)."""
  data = bytearray(open(path, "rb").read())
  offset = 0
  for _ in range(k):
    offset += 16 + struct.unpack_from("<Q", data, offset)[0]
  assert struct.unpack_from("<Q", data, offset)[0] > 2, "record k has no data to change"
  data[offset + 12 + 1] ^= 0x10
  with open(f"{path}.damaged", "wb") as f:
    f.write(data)
  os.replace(f"{path}.damaged", path)
  return offset
