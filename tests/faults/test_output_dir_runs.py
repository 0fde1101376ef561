"""Two runs on one --output_dir (issue 27, item 1): real run_pretraining processes.

The first run stops at a named point once it holds the folder's lock (``BERT_TF_FAULT=
pause:output_dir_locked``, ``tests/faults/hook.py``: it waits there until killed), so the
second starts while the first certainly holds it; no timing. Each case
checks the exit status, the one line, and the folder's files byte for byte (sha256).
"""

import json
import os
import shutil
import signal
import socket
import subprocess

import pytest
import tensorflow as tf

from tests import warm
from tests.faults import hook
from tests.faults.test_training_pretraining import _digests
from tests.training.test_run_pretraining import ROOT, _command, _env, workdir  # noqa: F401

PROG = "run_pretraining.py"
FLAGS = ["--steps_per_loop=1", "--save_checkpoints_steps=1", "--keep_checkpoint_max=3",
         "--export_google_checkpoint=False"]


def _run(command, env=None):
  return warm.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600,
                  env=env or _env())


def _resume_command(work, out, extra=()):
  """Resumes ``base``'s 3 steps to 6: --num_train_steps grown is a legitimate resume."""
  return _command(work, out, 6, [*FLAGS, *extra])


@pytest.fixture(scope="module")
def base(workdir, tmp_path_factory):  # noqa: F811
  out = tmp_path_factory.mktemp("base") / "out"
  result = _run(_command(workdir, out, 3, FLAGS))
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads((out / "run_settings.json").read_text())["seed"] == 1
  assert not (out / ".bert_tf.lock").exists()
  return out


def _start_paused(command, ready):
  return hook.start_at_point(command, _env(), "output_dir_locked", 1, ready, cwd=ROOT,
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _latest(out):
  return os.path.basename(tf.train.latest_checkpoint(str(out)))


def test_two_runs_a_killed_holder_and_changed_flags(workdir, base, tmp_path):  # noqa: F811
  """A holds the folder; B (another seed) is refused by the lock. A is killed while it holds
  it; C (other flags) takes the stale lock over, then is refused by the recorded flags; D
  (the same, --resume_with_changed_flags) resumes to the end."""
  out = tmp_path / "out"
  shutil.copytree(base, out)
  before = _digests(out)
  first = _start_paused(_resume_command(workdir, out), tmp_path / "ready")
  try:
    record = json.loads((out / ".bert_tf.lock").read_text())
    holding = _digests(out)
    second = _run(_resume_command(workdir, out, ["--seed=7"]))
    assert second.returncode == 1, second.stderr[-3000:]
    assert "Traceback" not in second.stderr
    assert record["pid"] == first.pid and record["command"].startswith(
        f"{PROG} --input_file={workdir}/data-*.tfrecord --output_dir={out} ")
    assert second.stderr.strip().splitlines()[-1] == (
        f"{PROG}: error: --output_dir '{out}' is in use by another run: pid {first.pid} on "
        f"{socket.gethostname()}, started {record['started']} ({record['command'][:157]}...); "
        "wait for it to end, or use another --output_dir")
    assert _digests(out) == holding
  finally:
    os.kill(first.pid, signal.SIGKILL)  # while it waits at the named point, holding the lock
    first.communicate(timeout=600)
  assert first.returncode == -signal.SIGKILL
  assert json.loads((out / ".bert_tf.lock").read_text()) == record  # left behind

  third = _run(_resume_command(workdir, out, ["--seed=2", "--learning_rate=1e-3"]))
  assert third.returncode == 1, third.stderr[-3000:]
  assert "Traceback" not in third.stderr
  assert (f"taking over {out}/.bert_tf.lock, left by pid {first.pid} on {socket.gethostname()}, "
          f"started {record['started']} ({record['command'][:157]}...), which is no longer "
          "running") in third.stdout.splitlines()
  assert third.stderr.strip().splitlines()[-1] == (
      f"{PROG}: error: --output_dir '{out}' holds checkpoints made with other flags: "
      "--learning_rate 0.002 (now 0.001); --seed 1 (now 2); pass --resume_with_changed_flags "
      "to resume them anyway, or use another --output_dir")
  assert _digests(out) == before  # the stale lock gone with the run that took it over

  fourth = _run(_resume_command(workdir, out, ["--seed=2", "--resume_with_changed_flags"]))
  assert fourth.returncode == 0, fourth.stderr[-3000:]
  assert (f"warning: resuming the checkpoints of {out} with changed flags "
          "(--resume_with_changed_flags): --seed 1 (now 2)") in fourth.stdout.splitlines()
  assert "step 6/6" in fourth.stdout and _latest(out) == "ckpt-6"
  assert json.loads((out / "run_settings.json").read_text())["seed"] == 2
  assert not (out / ".bert_tf.lock").exists()


def test_another_vocab_or_config_over_trained_checkpoints_is_refused(  # noqa: F811
    workdir, tmp_path, uncased_vocab):
  """An eval-only run with another BERT config (hidden_act gelu -> relu: the same shapes, so
  the checkpoints restore), or any run with another vocab of the same size (two tokens
  swapped), was evaluated or resumed without a word, and then wrote its config and vocab over
  the folder's own. Each is one line now, the folder byte for byte as it was; with
  --resume_with_changed_flags a warning, and the run goes on."""
  out = tmp_path / "out"
  vocab_flag = [f"--vocab_file={uncased_vocab}"]
  assert _run(_command(workdir, out, 2, [*FLAGS, *vocab_flag])).returncode == 0
  lines = uncased_vocab.read_text().splitlines()
  lines[2000], lines[2001] = lines[2001], lines[2000]
  other_vocab = tmp_path / "other_vocab.txt"
  other_vocab.write_text("\n".join(lines) + "\n")
  relu = tmp_path / "relu_config.json"
  relu.write_text((workdir / "bert_config.json").read_text().replace('"gelu"', '"relu"'))
  eval_only = ["--do_train=False", "--do_eval=True", "--max_eval_steps=1"]
  before = _digests(out)
  vocab_message = (f"{PROG}: error: --vocab_file '{other_vocab}' is not the vocab of the "
                   f"checkpoints in --output_dir '{out}' ({out}/vocab.txt; 30522 tokens each, "
                   "the first difference at line 2001); give that vocab (pass "
                   "--resume_with_changed_flags to use the checkpoints anyway, or use another "
                   "--output_dir)")
  for extra, message in (
      ([*eval_only, f"--bert_config_file={relu}", *vocab_flag],
       f"{PROG}: error: --output_dir '{out}' holds checkpoints of another BERT config: "
       "--bert_config_file's hidden_act gelu (now relu); give the config they were trained "
       "with (pass --resume_with_changed_flags to use them anyway)"),
      ([*eval_only, f"--vocab_file={other_vocab}"], vocab_message),
      ([f"--vocab_file={other_vocab}"], vocab_message)):  # a training resume
    result = _run(_command(workdir, out, 4, [*FLAGS, *extra]))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == message
    assert _digests(out) == before
  # The folder's own vocab and config: evaluated as before.
  result = _run(_command(workdir, out, 4, [*FLAGS, *eval_only, *vocab_flag]))
  assert result.returncode == 0, result.stderr[-3000:]
  result = _run(_command(workdir, out, 4, [*FLAGS, *eval_only, f"--vocab_file={other_vocab}",
                                           "--resume_with_changed_flags"]))
  assert result.returncode == 0, result.stderr[-3000:]
  assert (f"warning: {vocab_message.split('error: ', 1)[1].split('; give')[0]}: going on "
          "(--resume_with_changed_flags)") in result.stdout.splitlines()
