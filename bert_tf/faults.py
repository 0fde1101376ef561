"""Fault injection for tests: named points where a process under test pauses (so that a test
sends it a signal exactly there) or kills itself, and a disk that fills up. Off unless the
environment variable ``BERT_TF_FAULT`` is set; then ``point`` costs one dictionary lookup.

  BERT_TF_FAULT=pause:<point>[:<n>]     at the n-th pass of <point> (default 1), write the file
                                        named by BERT_TF_FAULT_READY (this process's pid) and
                                        wait there until a signal ends the process
  BERT_TF_FAULT=announce:<point>[:<n>]  write that file and go on (for a wait that follows
                                        the point anyway: the signal lands in the real wait)
  BERT_TF_FAULT=hold:<point>[:<n>]      write that file and wait there until the test removes
                                        it (after changing what the process reads next), then
                                        go on
  BERT_TF_FAULT=kill:<point>[:<n>]      SIGKILL this process there
  BERT_TF_FAULT=kill_parent:<point>[:<n>]  SIGKILL the parent process there, then go on (a
                                        data-prep worker whose parent was killed); only a
                                        parent that leads this process group (the test starts
                                        it in a session of its own), never the process a child
                                        is reparented to
  BERT_TF_FAULT=enospc:<bytes>          TFRecord files (``data.tfrecord.TFRecordWriter``) see
                                        a disk that is full after <bytes> bytes

A point passed with a number (``point("step", step)``) fires when that number is n, not at the
n-th pass: a training step or checkpoint keeps its number across a resumed run. The points:

  records_written   create_pretraining_data (the parent process): one output file's share
                    of the records, or one shard's records, was written (n-th time)
  step              training loop: step n's progress line is out, before its checkpoint save
  save_start        training loop, inside the save of ckpt-<n>, before any file is written
  save_written      training loop: ckpt-<n>.* are whole, the ``checkpoint`` state does not
                    name them yet
  eval_start        evaluation during training: ckpt-<n> is saved, its evaluation starts
  best_saved        evaluation during training: best/ckpt-<n> is whole and named in
                    best/checkpoint, best.json not yet rewritten
  atomic_write      ``fileio.atomic_write``: the temporary file is whole and closed, before
                    the rename onto the target (n-th write of the process)
  write_together    ``fileio.write_together``: every file of the output is whole under its
                    temporary name, none renamed yet (n-th such output of the process)
  workers_register  multi_worker_mirrored: this task waits for the cluster's other tasks to
                    register, its SIGTERM handler the script's again (TensorFlow set its
                    own; ``training/registration.py``): use ``announce``, the wait goes on
  output_dir_locked a training run holds its --output_dir's lock (``run_lock``)
  export_swap       an export (SavedModel, Hugging Face) replacing a previous one: that is set
                    aside, the new one not yet renamed into place
  google_export_data  Google-format checkpoint: the new data file is in place, the index not
  shard_start       create_pretraining_data, sharded mode: a worker starts a shard
  records_read      a training script starts reading TFRecords it checked or wrote (train,
                    eval or predict: ``record_check.naming_damaged_records``), n-th time

A test starts the command with this environment, waits for the ready file (the process is
then at the point: no race with the work), sends SIGINT, SIGTERM or SIGKILL, and checks what
is left (``tests/faults/hook.py``).
"""

import errno
import os
import signal
import time

FAULT_ENV = "BERT_TF_FAULT"
READY_ENV = "BERT_TF_FAULT_READY"

_passes = {}


def _spec():
  """``(action, point, n)`` of ``BERT_TF_FAULT`` for a point action, else None."""
  spec = os.environ.get(FAULT_ENV)
  if not spec:
    return None
  action, _, rest = spec.partition(":")
  target, _, n = rest.partition(":")
  if action not in ("pause", "announce", "hold", "kill", "kill_parent"):
    return None
  return action, target, int(n or 1)


def armed(name, number):
  """Whether ``point(name, number)`` would act (for points that need setting up)."""
  spec = _spec()
  return spec is not None and spec[1:] == (name, number)


def point(name, number=None):
  """A named point: does what ``BERT_TF_FAULT`` asks here, or nothing (the default)."""
  spec = _spec()
  if spec is None or spec[1] != name:
    return
  action, _, n = spec
  if number is None:
    number = _passes[name] = _passes.get(name, 0) + 1
  if number != n:
    return
  if action == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
  if action == "kill_parent":
    if os.getppid() == os.getpgid(0):
      os.kill(os.getppid(), signal.SIGKILL)
    return
  _announce()
  if action == "pause":
    # A signal's handler ends the process (or raises out of the sleep). Short sleeps: a
    # process with other threads (TensorFlow's) may get the signal on one of them, which
    # does not interrupt this thread's sleep, and Python runs the handler only when this
    # (the main) thread next runs bytecode: with sleep(3600), up to an hour later (CI saw
    # a SIGTERM at a pause go unanswered for 600 s).
    while True:
      time.sleep(0.05)
  if action == "hold":
    ready = os.environ.get(READY_ENV)
    while ready and os.path.exists(ready):  # the test removes it when it is done
      time.sleep(0.01)


def _announce():
  ready = os.environ.get(READY_ENV)
  if ready:
    tmp = f"{ready}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(f"{os.getpid()}\n")
    os.replace(tmp, ready)


def full_disk_after():
  """The byte count of ``BERT_TF_FAULT=enospc:<bytes>``, or None (the default)."""
  action, _, limit = os.environ.get(FAULT_ENV, "").partition(":")
  return int(limit) if action == "enospc" else None


class FullDisk:
  """``file`` on a disk that is full after ``limit`` bytes: writes past it raise
  ``OSError(ENOSPC)`` as the kernel would. No ``fileno``, so appends go through ``write``."""

  def __init__(self, file, path, limit):
    self._file, self._path, self._left = file, path, limit

  def write(self, data):
    if len(data) > self._left:  # as write() raises it: no file name
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    self._left -= len(data)
    return self._file.write(data)

  def flush(self):
    self._file.flush()

  def close(self):
    self._file.close()
