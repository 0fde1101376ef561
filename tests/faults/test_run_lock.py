"""The output-folder lock and the recorded training flags (bert_tf.run_lock), in one process.

The lock is an ``fcntl.flock`` on ``.bert_tf.lock``: flock belongs to an open file, so a second
``OutputDirLock`` on the same folder in this process conflicts exactly as a second process
does (tests/faults/test_output_dir_runs.py runs real processes). Each case checks the one
line and that the folder is unchanged (sha256 of every file).
"""

import errno
import json
import os
import socket
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf import run_lock
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig
from tests.faults.support_export import digests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _in_use(folder, record):
  """The one line a second run gets for ``folder`` held by this process (``record``)."""
  return (f"--output_dir '{folder}' is in use by another run: pid {os.getpid()} on "
          f"{socket.gethostname()}, started {record['started']} ({_shown(record['command'])}); "
          "wait for it to end, or use another --output_dir")

def _dead_pid():
  """A pid no process has: a child that has exited and been reaped."""
  pid = os.fork()
  if pid == 0:
    os._exit(0)  # pylint: disable=protected-access
  os.waitpid(pid, 0)
  return pid


def _shown(command):
  """The command as the messages show it: at most 160 characters."""
  return command if len(command) <= 160 else command[:157] + "..."


def test_a_second_lock_on_a_held_folder_is_one_line_and_touches_nothing(tmp_path):
  (tmp_path / "ckpt-1.index").write_text("x")
  lines = []
  first = run_lock.OutputDirLock(str(tmp_path), lines.append)
  record = json.loads((tmp_path / ".bert_tf.lock").read_text())
  assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
  before = digests(tmp_path)
  with pytest.raises(BertTfError) as error:
    run_lock.OutputDirLock(str(tmp_path), lines.append)
  assert str(error.value) == _in_use(tmp_path, record)
  assert digests(tmp_path) == before and not lines
  first.release()
  assert sorted(os.listdir(tmp_path)) == ["ckpt-1.index"]
  with run_lock.OutputDirLock(str(tmp_path), lines.append):  # free again
    assert (tmp_path / ".bert_tf.lock").exists()
  assert not (tmp_path / ".bert_tf.lock").exists() and not lines
  # A folder the lock made is removed with it when nothing else was written there.
  run_lock.OutputDirLock(str(tmp_path / "new")).release()
  assert not (tmp_path / "new").exists()
  with run_lock.OutputDirLock(str(tmp_path / "new")):
    (tmp_path / "new" / "ckpt-1.index").write_text("x")
  assert os.listdir(tmp_path / "new") == ["ckpt-1.index"]


def test_a_dead_runs_lock_is_taken_over_with_one_line(tmp_path):
  stale = {"pid": _dead_pid(), "host": socket.gethostname(), "started": "2026-01-02 03:04:05 UTC",
           "command": "run_pretraining.py --seed=1"}
  (tmp_path / ".bert_tf.lock").write_text(json.dumps(stale))  # not flocked: its holder is gone
  lines = []
  lock = run_lock.OutputDirLock(str(tmp_path), lines.append)
  assert lines == [f"taking over {tmp_path}/.bert_tf.lock, left by pid {stale['pid']} on "
                   f"{stale['host']}, started 2026-01-02 03:04:05 UTC (run_pretraining.py "
                   "--seed=1), which is no longer running"]
  assert json.loads((tmp_path / ".bert_tf.lock").read_text())["pid"] == os.getpid()
  with pytest.raises(BertTfError, match="is in use by another run: pid "):
    run_lock.OutputDirLock(str(tmp_path))  # and it is really held now
  lock.release()
  assert os.listdir(tmp_path) == []


def test_a_lock_released_while_a_second_run_looks_at_it(tmp_path):
  """The holder removes the file and drops the flock between the second run's open and its
  flock: the second run flocks a removed file, sees it is no longer the lock, and retries."""
  first = run_lock.OutputDirLock(str(tmp_path))
  second = run_lock.OutputDirLock.__new__(run_lock.OutputDirLock)
  second.output_dir, second.path = str(tmp_path), str(tmp_path / ".bert_tf.lock")
  second._progress, second._created = print, False  # pylint: disable=protected-access
  real_open = os.open

  def open_then_release(path, *args, **kwargs):
    fd = real_open(path, *args, **kwargs)
    if path == second.path and first._fd is not None:  # pylint: disable=protected-access
      first.release()
    return fd

  os.open = open_then_release
  try:
    fd = second._acquire_local()  # pylint: disable=protected-access
  finally:
    os.open = real_open
  second._fd = fd  # pylint: disable=protected-access
  assert json.loads((tmp_path / ".bert_tf.lock").read_text())["pid"] == os.getpid()
  with pytest.raises(BertTfError, match="in use by another run"):
    run_lock.OutputDirLock(str(tmp_path))
  second.release()
  assert os.listdir(tmp_path) == []


def _no_hard_links(path, target):
  raise OSError(errno.EPERM, "Operation not permitted", path)


def test_a_file_system_without_hard_links_still_gets_a_lock(tmp_path, monkeypatch):
  """os.link fails as on gcsfuse or SMB (EPERM, not EEXIST): the lock is made in place,
  held, refused to a second run, taken over when stale, removed on release; no temp left."""
  monkeypatch.setattr(os, "link", _no_hard_links)
  lines = []
  first = run_lock.OutputDirLock(str(tmp_path), lines.append)
  record = json.loads((tmp_path / ".bert_tf.lock").read_text())
  assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
  assert os.listdir(tmp_path) == [".bert_tf.lock"]
  with pytest.raises(BertTfError) as error:
    run_lock.OutputDirLock(str(tmp_path), lines.append)
  assert str(error.value) == _in_use(tmp_path, record)
  first.release()
  assert os.listdir(tmp_path) == [] and not lines
  stale = {"pid": _dead_pid(), "host": "elsewhere", "started": "2026-01-02 03:04:05 UTC",
           "command": "run_squad.py"}
  (tmp_path / ".bert_tf.lock").write_text(json.dumps(stale))
  with run_lock.OutputDirLock(str(tmp_path), lines.append):
    assert json.loads((tmp_path / ".bert_tf.lock").read_text())["pid"] == os.getpid()
    assert os.listdir(tmp_path) == [".bert_tf.lock"]
    with pytest.raises(BertTfError, match="is in use by another run: pid "):
      run_lock.OutputDirLock(str(tmp_path))
  assert lines == [f"taking over {tmp_path}/.bert_tf.lock, left by pid {stale['pid']} on "
                   "elsewhere, started 2026-01-02 03:04:05 UTC (run_squad.py), which is no "
                   "longer running"]
  assert os.listdir(tmp_path) == []


def test_a_lock_made_in_place_taken_over_before_its_flock(tmp_path, monkeypatch):
  """Without hard links, a second run takes over the new lock file between its creation and
  the first run's flock (it looks stale then): the first run sees the file is no longer the
  lock and stops with the one line naming the second run; one holder, never two."""
  monkeypatch.setattr(os, "link", _no_hard_links)
  import fcntl  # pylint: disable=import-outside-toplevel
  real_flock, taken = fcntl.flock, []

  def flock_after_a_take_over(fd, how):
    lock = tmp_path / ".bert_tf.lock"
    if not taken and lock.exists() and run_lock._same_file(fd, str(lock)):  # pylint: disable=protected-access
      monkeypatch.setattr(fcntl, "flock", real_flock)
      taken.append(run_lock.OutputDirLock(str(tmp_path), lambda line: None))
    return real_flock(fd, how)

  monkeypatch.setattr(fcntl, "flock", flock_after_a_take_over)
  with pytest.raises(BertTfError, match=r"is in use by another run: pid \d+ on "):
    run_lock.OutputDirLock(str(tmp_path))
  assert len(taken) == 1
  assert run_lock._same_file(taken[0]._fd, str(tmp_path / ".bert_tf.lock"))  # pylint: disable=protected-access
  taken[0].release()
  assert os.listdir(tmp_path) == []


def test_a_file_system_without_flock_is_one_line(tmp_path, monkeypatch):
  import fcntl  # pylint: disable=import-outside-toplevel

  def no_locks(fd, how):
    raise OSError(errno.ENOLCK, "No locks available")

  monkeypatch.setattr(fcntl, "flock", no_locks)
  with pytest.raises(BertTfError) as error:
    run_lock.OutputDirLock(str(tmp_path / "out"))
  assert str(error.value) == (
      f"--output_dir '{tmp_path}/out': its file system does not support file locks (No locks "
      "available), so two runs in this folder could not be kept apart; use a folder on a "
      "local disk")
  assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []


def test_remote_folders_get_an_advisory_lock_and_a_warning():
  folder = "ram://run_lock_test/out"
  lines = []
  first = run_lock.OutputDirLock(folder, lines.append)
  assert not lines
  written = json.loads(tf.io.gfile.GFile(folder + "/.bert_tf.lock").read())
  second = run_lock.OutputDirLock(folder, lines.append)  # no lock primitive: a warning
  assert lines == [
      f"warning: {folder}/.bert_tf.lock exists, written by pid {written['pid']} on "
      f"{written['host']}, started {written['started']} ({_shown(written['command'])}): a ram:// "
      "folder cannot be locked, so make sure no other run writes this --output_dir (a run "
      "that was killed leaves this file too)"]
  first.release()  # the file is the second's now: left alone
  assert tf.io.gfile.exists(folder + "/.bert_tf.lock")
  second.release()
  assert not tf.io.gfile.exists(folder + "/.bert_tf.lock")


def _settings(**changes):
  config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=37)
  arguments = {"bert_config": config, "learning_rate": 2e-3, "seed": 1,
               "init_checkpoint": None, "optimizer_kwargs": None, **changes}
  if "hidden_dropout_prob" in changes:
    arguments["bert_config"] = BertConfig(**{**config.to_dict(),
                                             "hidden_dropout_prob": changes["hidden_dropout_prob"]})
  return run_lock.trajectory_settings(
      arguments, ("bert_config", "learning_rate", "seed", "init_checkpoint", "optimizer_kwargs"))


def test_changed_training_flags_are_refused_naming_old_and_new(tmp_path):
  out = str(tmp_path)
  run_lock.check_settings(out, _settings())  # no checkpoint: recorded
  recorded = json.loads((tmp_path / "run_settings.json").read_text())
  assert recorded["learning_rate"] == 2e-3 and recorded["adam_beta2"] == 0.999
  assert recorded["bert_config_file.hidden_size"] == 32
  (tmp_path / "ckpt-3.index").write_text("x")
  run_lock.check_settings(out, _settings())  # the same flags: resumes
  before = digests(tmp_path)
  with pytest.raises(BertTfError) as error:
    run_lock.check_settings(out, _settings(seed=2, learning_rate=1e-3, hidden_dropout_prob=0.2,
                                           optimizer_kwargs={"beta_2": 0.98}))
  assert str(error.value) == (
      f"--output_dir '{out}' holds checkpoints made with other flags: --adam_beta2 0.999 (now "
      "0.98); --bert_config_file's hidden_dropout_prob 0.1 (now 0.2); --learning_rate 0.002 "
      "(now 0.001); --seed 1 (now 2); pass --resume_with_changed_flags to resume them anyway, "
      "or use another --output_dir")
  assert digests(tmp_path) == before
  lines = []
  changed = run_lock.check_settings(out, _settings(seed=2), resume_with_changed_flags=True,
                                    progress=lines.append)
  assert lines == [f"warning: resuming the checkpoints of {out} with changed flags "
                   "(--resume_with_changed_flags): --seed 1 (now 2)"]
  assert digests(tmp_path) == before  # recorded only once the run went through:
  run_lock.record_settings(out, changed)
  assert json.loads((tmp_path / "run_settings.json").read_text())["seed"] == 2
  run_lock.check_settings(out, _settings(seed=2))  # the record follows the resumed run


def test_init_checkpoint_given_as_its_folder_is_the_same_checkpoint(tmp_path):
  """The checkpoint a run started from, given on the resume as its folder, its .index or a
  relative path, is the same --init_checkpoint (helper-50: refused as changed); another one in
  the same folder is not."""
  pretrained = tmp_path / "pretrained"
  pretrained.mkdir()
  for name in ("bert_model.ckpt.index", "other.ckpt.index"):
    (pretrained / name).write_text("x")
  (pretrained / "checkpoint").write_text('model_checkpoint_path: "bert_model.ckpt"\n')
  out = tmp_path / "out"
  out.mkdir()
  prefix = str(pretrained / "bert_model.ckpt")
  run_lock.check_settings(str(out), _settings(init_checkpoint=prefix))
  (out / "ckpt-3.index").write_text("x")
  for same in (str(pretrained), prefix + ".index",
               os.path.relpath(prefix, os.getcwd())):
    assert run_lock.check_settings(str(out), _settings(init_checkpoint=same)) is None, same
  with pytest.raises(BertTfError, match=r"--init_checkpoint .*bert_model.ckpt \(now "
                                        r".*other.ckpt\)"):
    run_lock.check_settings(str(out), _settings(init_checkpoint=str(pretrained / "other.ckpt")))


def test_a_relative_init_checkpoint_is_recorded_as_the_checkpoint_it_named(tmp_path,
                                                                            monkeypatch):
  """--init_checkpoint=pretrained/bert_model.ckpt given in one folder names that folder's
  checkpoint: resumed from another folder, where the same text names another checkpoint, it is
  refused; that checkpoint's absolute path is accepted (mutation audit: the text recorded as
  given went unnoticed: every test resumed from the folder it started in)."""
  for where in ("a", "b"):
    (tmp_path / where / "pretrained").mkdir(parents=True)
    (tmp_path / where / "pretrained" / "bert_model.ckpt.index").write_text(where)
  out = tmp_path / "out"
  out.mkdir()
  monkeypatch.chdir(tmp_path / "a")
  run_lock.check_settings(str(out), _settings(init_checkpoint="pretrained/bert_model.ckpt"))
  (out / "ckpt-3.index").write_text("x")
  monkeypatch.chdir(tmp_path / "b")
  with pytest.raises(BertTfError, match=r"--init_checkpoint .*/a/pretrained/bert_model.ckpt "
                                        r"\(now .*/b/pretrained/bert_model.ckpt\)"):
    run_lock.check_settings(str(out), _settings(init_checkpoint="pretrained/bert_model.ckpt"))
  assert run_lock.check_settings(str(out), _settings(
      init_checkpoint=str(tmp_path / "a" / "pretrained" / "bert_model.ckpt"))) is None


def test_a_folder_without_a_record_gets_one(tmp_path):
  (tmp_path / "ckpt-3.index").write_text("x")
  lines = []
  before = digests(tmp_path)
  pending = run_lock.check_settings(str(tmp_path), _settings(), progress=lines.append)
  assert lines == [f"note: {tmp_path}/run_settings.json is missing or unreadable (a folder of "
                   "an older bert_tf?): the flags of its checkpoints are unknown; this run's "
                   "are recorded when it ends"]
  assert digests(tmp_path) == before
  run_lock.record_settings(str(tmp_path), pending)
  with pytest.raises(BertTfError, match=r"--seed 1 \(now 5\)"):
    run_lock.check_settings(str(tmp_path), _settings(seed=5))


def test_multi_worker_mirrored_without_tf_config_is_one_line(monkeypatch):
  from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with pytest.raises(BertTfError) as error:
    distribution.get_strategy("multi_worker_mirrored")
  assert str(error.value) == (
      "--distribution_strategy=multi_worker_mirrored needs TF_CONFIG in the environment (the "
      "cluster's workers and this task's index); without it this would train as one worker: "
      "set TF_CONFIG on every worker, or use --distribution_strategy=mirrored on one machine")


def test_an_output_dir_that_cannot_be_created_or_written_is_one_line(tmp_path):
  (tmp_path / "file").write_text("x")
  with pytest.raises(BertTfError) as error:
    run_lock.OutputDirLock(str(tmp_path / "file"))
  assert str(error.value) == f"--output_dir {tmp_path}/file is a file, not a folder"
  if os.geteuid() == 0:
    pytest.skip("root writes in read-only folders")
  (tmp_path / "ro").mkdir(mode=0o555)
  with pytest.raises(BertTfError) as error:
    run_lock.OutputDirLock(str(tmp_path / "ro"))
  assert str(error.value) == f"--output_dir {tmp_path}/ro: cannot write there: Permission denied"


def test_a_fresh_run_that_fails_before_a_checkpoint_leaves_no_record(tmp_path):
  """The decorated function: a fresh training run records its flags first; failing before its
  first checkpoint, it leaves the folder as it was (here: not even made)."""
  calls = []

  @run_lock.one_run_per_output_dir(trajectory=("seed",))
  def run(output_dir, strategy, *, do_train=False, seed=None, progress=None, fail=False):
    calls.append(json.loads((tmp_path / "out" / "run_settings.json").read_text()))
    if fail:
      raise BertTfError("bad input")
    (tmp_path / "out" / "ckpt-1.index").write_text("x")
    return "done"

  strategy = tf.distribute.get_strategy()
  with pytest.raises(BertTfError, match="bad input"):
    run(str(tmp_path / "out"), strategy, do_train=True, seed=1, fail=True)
  assert calls == [{"seed": 1}] and not (tmp_path / "out").exists()
  assert run(str(tmp_path / "out"), strategy, do_train=True, seed=1) == "done"
  with pytest.raises(BertTfError, match=r"--seed 1 \(now 2\)"):
    run(str(tmp_path / "out"), strategy, do_train=True, seed=2)
  assert run(str(tmp_path / "out"), strategy, do_train=True, seed=2,
             resume_with_changed_flags=True) == "done"
  assert json.loads((tmp_path / "out" / "run_settings.json").read_text()) == {"seed": 2}
  assert sorted(os.listdir(tmp_path / "out")) == ["ckpt-1.index", "run_settings.json"]


def test_a_resume_with_changed_flags_keeps_the_training_data_record(tmp_path):
  """Resumed with --resume_with_changed_flags on the same examples, the record takes the new
  flags and keeps the examples' fingerprint: a later resume on other examples is still refused
  (mutation audit: record_settings dropping ``training_data`` went unnoticed; the folder then
  took any examples as an older folder without the record does)."""

  @run_lock.one_run_per_output_dir(trajectory=("seed",))
  def run(output_dir, strategy, *, do_train=False, seed=None, progress=None, rows=()):
    run_lock.check_training_data("classifier", rows, "train.tsv")
    (tmp_path / "out" / "ckpt-1.index").write_text("x")

  strategy, out = tf.distribute.get_strategy(), str(tmp_path / "out")
  rows = [["a", "b", "1"], ["c", None, "0"]]
  run(out, strategy, do_train=True, seed=1, rows=rows)
  fingerprint = json.loads((tmp_path / "out" / "run_settings.json").read_text())[
      run_lock.TRAINING_DATA]
  lines = []
  run(out, strategy, do_train=True, seed=2, rows=rows, resume_with_changed_flags=True,
      progress=lines.append)
  assert lines == [f"warning: resuming the checkpoints of {out} with changed flags "
                   "(--resume_with_changed_flags): --seed 1 (now 2)"]
  assert json.loads((tmp_path / "out" / "run_settings.json").read_text()) == {
      "seed": 2, run_lock.TRAINING_DATA: fingerprint}
  with pytest.raises(BertTfError, match=r"holds checkpoints trained on other examples than "
                                        r"train.tsv's: resumed, the model would go on"):
    run(out, strategy, do_train=True, seed=2, rows=rows[:1])


def test_a_dead_runs_lock_taken_over_by_another_run_while_this_one_looks_at_it(tmp_path):
  """A lock left by a dead run: this run opens it, then (before its flock) another run takes
  it over; this run's flock of the old file then succeeds, but the file is no longer the lock:
  this run must see that and find the other run holding the new one, not rename its own over
  it (mutation audit: without that look, both runs held the folder)."""
  lock = tmp_path / ".bert_tf.lock"
  lock.write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname(),
                              "started": "2026-01-02 03:04:05 UTC", "command": "x"}))
  real_open, other = os.open, []

  def open_then_taken_over(path, *args, **kwargs):
    fd = real_open(path, *args, **kwargs)
    if path == str(lock) and not other:  # this run has the dead run's file open
      other.append(None)
      other[0] = run_lock.OutputDirLock(str(tmp_path), lambda line: None)
    return fd

  os.open = open_then_taken_over
  try:
    with pytest.raises(BertTfError) as error:
      run_lock.OutputDirLock(str(tmp_path), lambda line: None)
  finally:
    os.open = real_open
  record = json.loads(lock.read_text())
  assert str(error.value) == _in_use(tmp_path, record)
  assert run_lock._same_file(other[0]._fd, str(lock))  # pylint: disable=protected-access
  other[0].release()
  assert os.listdir(tmp_path) == []



_TWICE_STOPPED = """
import os, signal, sys
import tensorflow as tf
from bert_tf import run_lock
out = sys.argv[1]

@run_lock.one_run_per_output_dir(trajectory=("seed",))
def run(output_dir, strategy, *, do_train=False, seed=None, progress=None):
  for name in run_lock.FRESH_RUN_FILES:
    with open(os.path.join(out, name), "w") as f:
      f.write("written by the run")
  raise KeyboardInterrupt  # the first Stop

put_back, sent = run_lock._put_back, []

def put_back_interrupted(path, text):
  if not sent:
    sent.append(True)
    os.kill(os.getpid(), signal.SIGINT)  # the second Stop, handled before the next line
  put_back(path, text)

run_lock._put_back = put_back_interrupted
try:
  run(out, tf.distribute.get_strategy(), do_train=True, seed=1)
except KeyboardInterrupt:
  print("stopped", bool(sent), os.path.exists(out),
        signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


def test_ctrl_c_again_during_a_failed_runs_rollback_is_let_go(tmp_path):
  """A notebook's Stop button pressed twice (Ctrl-C as Python's KeyboardInterrupt): the first
  stops the run before its first checkpoint, the second (SIGINT sent while the rollback puts
  the first file back) used to stop the rollback half done, leaving the files of a run that
  never trained (3 of 16 double Stops 0-10 ms apart). In a process of its own: signals reach
  the main thread only (pytest-xdist runs tests in another)."""
  env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
  result = subprocess.run([sys.executable, "-c", _TWICE_STOPPED, str(tmp_path / "out")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  # Every file put back, the lock released and the folder (made by the run) gone; Ctrl-C is
  # Python's again.
  assert result.stdout == "stopped True False True\n", result.stderr[-3000:]
