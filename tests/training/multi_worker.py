"""Helpers for tests that run several worker processes on 127.0.0.1 (MultiWorkerMirrored).

Every worker gets the same command and its own TF_CONFIG; every process is bounded by a
deadline and killed in ``finally`` whatever happens. The processes are forked from warm
interpreters (tests/warm.py), one per process running at once, kept for the next job.
"""

import contextlib
import errno
import json
import os
import random
import re
import signal
import socket
import subprocess
import time

import numpy as np
import tensorflow as tf

from tests import warm
from tests.reference.google_bert import google


_PORTS = random.Random()  # this process's own sequence, whatever the tests seed
_RESERVED = []  # the reservations of this process's ports, held until it exits


def _unreserved_range():
  """Ports below the kernel's ephemeral range: neither a bind to port 0 nor an outgoing
  connection's source port is ever one of them, so only a process that names one takes it."""
  try:
    with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
      low = int(f.read().split()[0])
  except (OSError, ValueError, IndexError):
    low = 32768
  return (15000, low) if low > 16000 else (15000, 32768)


def _reserve(port):
  """Whether ``port`` is now this process's for good: an abstract Unix socket named after it
  (Linux; released by the kernel when the process ends, however it ends) tells another copy of
  the suite running beside this one to pick another."""
  lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  try:
    lock.bind(f"\0bert_tf-tests-port-{port}")
  except OSError as e:
    lock.close()
    if e.errno == errno.EADDRINUSE:
      return False
    return True  # No abstract sockets (not Linux): no reservation, the bind check alone.
  _RESERVED.append(lock)
  return True


def free_ports(n):
  """``n`` distinct TCP ports free on 127.0.0.1 that no other process picks until the workers
  bind them: taken outside the ephemeral range, reserved for this process (so a concurrent
  copy of the suite, or a later test of this one, never gets them) and checked free.
  TensorFlow's gRPC server refuses SO_REUSEPORT, so the port itself cannot stay bound here."""
  low, high = _unreserved_range()
  ports = []
  while len(ports) < n:
    port = _PORTS.randrange(low, high)
    if port in ports or not _reserve(port):
      continue
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
      try:
        s.bind(("127.0.0.1", port))
      except OSError:
        continue  # Some other program's; reserved now, so not tried again.
    ports.append(port)
  return ports


def tf_config(ports, index):
  return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                     "task": {"type": "worker", "index": index}})


def env(extra=None):
  base = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
  return {**base, "TF_DETERMINISTIC_OPS": "1", "TF_CPP_MIN_LOG_LEVEL": "3",
          "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "", **(extra or {})}


def kill_group(proc):
  """Kills ``proc``'s process group (its own session) and waits for it. One that has just
  ended is no error (a forked child's warm interpreter reaps it at once)."""
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  proc.wait(timeout=30)


class Workers:
  """``len(commands)`` worker processes sharing one cluster; ``with`` kills them on exit.
  ``worker_env``: {index: environment variables of that worker alone} (a fault point)."""

  def __init__(self, commands, cwd, log_dir, extra_env=None, worker_env=None):
    self.ports = free_ports(len(commands))
    self.procs, self.logs = [], []
    for i, command in enumerate(commands):
      log = open(os.path.join(log_dir, f"worker-{i}.log"), "w+")  # pylint: disable=consider-using-with
      self.logs.append(log)
      self.procs.append(warm.Popen(
          command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
          env=env({"TF_CONFIG": tf_config(self.ports, i), **(extra_env or {}),
                   **(worker_env or {}).get(i, {})})))

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.kill()
    for log in self.logs:
      log.close()

  def kill(self, index=None):
    for i, proc in enumerate(self.procs):
      if (index is None or i == index) and proc.poll() is None:
        kill_group(proc)

  def wait(self, timeout):
    """Waits for every worker (at most ``timeout`` s in all); returns their exit codes."""
    deadline = time.time() + timeout
    for proc in self.procs:
      try:
        proc.wait(timeout=max(1.0, deadline - time.time()))
      except subprocess.TimeoutExpired:
        pass
    return [proc.poll() for proc in self.procs]

  def output(self, index):
    self.logs[index].flush()
    with open(self.logs[index].name, encoding="utf-8") as f:
      return f.read()

  def wait_for(self, pattern, timeout, index=0):
    """Waits until worker ``index``'s output matches ``pattern``; False on timeout/exit."""
    deadline = time.time() + timeout
    while time.time() < deadline:
      if re.search(pattern, self.output(index), re.M):
        return True
      if self.procs[index].poll() is not None:
        return False
      time.sleep(0.2)
    return False


def pretraining_data(work, vocab, seq, pred, num_files):
  """Pretraining TFRecords made by Google's create_pretraining_data.py from real prose."""
  import re as re_  # pylint: disable=import-outside-toplevel
  from pydoc_data import topics  # pylint: disable=import-outside-toplevel
  lines = []
  for text in list(topics.topics.values())[:30]:
    sentences = [s.strip() for s in re_.split(r"(?<=[.!?])\s+", " ".join(text.split()))]
    lines.extend(s for s in sentences if len(s) > 20)
    lines.append("")
  (work / "corpus.txt").write_text("\n".join(lines) + "\n")
  original = google("create_pretraining_data")
  tokenization = google("tokenization")
  tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
  instances = original.create_training_instances(
      [str(work / "corpus.txt")], tokenizer, seq, 1, 0.15, pred, 0.1, random.Random(12345))
  files = [str(work / f"data-{i}.tfrecord") for i in range(num_files)]
  original.write_instance_to_example_files(instances, tokenizer, seq, pred, files)
  return files


def checkpoint_weights(path):
  """{name: array} of a checkpoint's model variables (optimizer slots left out)."""
  reader = tf.train.load_checkpoint(path)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if name.startswith("model/") and "OPTIMIZER_SLOT" not in name}


def assert_weights_close(a, b, atol=1e-5):
  assert sorted(a) == sorted(b)
  assert a, "no weights"
  for name in a:
    np.testing.assert_allclose(a[name], b[name], rtol=0, atol=atol, err_msg=name)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ, PRED = 32, 5
# Dropout off: N replicas draw other masks than one process, everything else is the same.
CONFIG = ('{"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, '
          '"num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu", '
          '"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, '
          '"max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}')
STEPS = 12
# A bound against hangs only: a single-process run took over 240 s on a 2-core machine at load 18.
RUN_TIMEOUT_S = 600


def pretraining_workdir(work, vocab, num_files=2):
  pretraining_data(work, vocab, SEQ, PRED, num_files)
  (work / "bert_config.json").write_text(CONFIG)
  return work


def pretraining_command(work, output_dir, strategy="multi_worker_mirrored", steps=STEPS,
                        extra=()):
  """run_pretraining.py: global batch 12 (divides over 1, 2, 3 workers), a save every 2."""
  import sys  # pylint: disable=import-outside-toplevel
  return [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
          f"--input_file={work}/data-*.tfrecord", f"--output_dir={output_dir}",
          f"--bert_config_file={work}/bert_config.json", "--do_train=True",
          f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
          "--train_batch_size=12", "--learning_rate=1e-3", f"--num_train_steps={steps}",
          "--num_warmup_steps=2", "--seed=1", "--steps_per_loop=1",
          "--save_checkpoints_steps=2", "--keep_checkpoint_max=10",
          f"--distribution_strategy={strategy}", *extra]


@contextlib.contextmanager
def single_beside(command, log_dir, timeout=RUN_TIMEOUT_S):
  """Runs ``command`` (one process, no TF_CONFIG: the reference run) beside what the block runs
  (the worker processes: they share nothing with it, and the two overlap in time instead of
  adding up); at the block's end waits for it and asserts exit 0. Killed if the block fails."""
  log = open(os.path.join(log_dir, "single.log"), "w+")  # pylint: disable=consider-using-with
  proc = warm.Popen(command, cwd=ROOT, env=env(), stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
  try:
    yield proc
    proc.wait(timeout=timeout)
    log.seek(0)
    assert proc.returncode == 0, log.read()[-3000:]
  finally:
    if proc.poll() is None:
      kill_group(proc)
    log.close()


def run_workers(commands, log_dir, tmp_dir, timeout=RUN_TIMEOUT_S):
  """Runs the workers to the end; asserts every one exits 0. Returns their outputs."""
  with Workers(commands, ROOT, log_dir, {"TMPDIR": str(tmp_dir)}) as workers:
    codes = workers.wait(timeout)
    outputs = [workers.output(i) for i in range(len(commands))]
  assert codes == [0] * len(commands), "\n".join(o[-2000:] for o in outputs)
  return outputs


def written_files(directory):
  """Every file under ``directory``, relative, the TensorBoard event files' host-specific
  names replaced by their folder."""
  found = []
  for folder, _, files in os.walk(directory):
    for name in files:
      rel = os.path.relpath(os.path.join(folder, name), directory)
      found.append(os.path.dirname(rel) + "/<events>" if "tfevents" in name else rel)
  return sorted(found)
