"""run_classifier.py killed with SIGKILL at seeded points (inside a checkpoint save, after a
save's files are whole, after a step; named points of ``bert_tf/faults``), each time followed
by the same command: the final outputs (checkpoints, Google export, eval_results.txt,
test_results.tsv) equal an uninterrupted run's byte for byte and no stray file remains. Ctrl-C
and SIGTERM at seeded points (the run waits there for the signal): one line, exit 130 or 143,
and the same command again gives the same outputs. Its feature file damaged while the run
holds before reading it: one line naming the file and offset, and the same command again
writes it anew and gives the same outputs."""

import json
import os
import random
import signal
import subprocess

import pytest

from tests import warm
from tests.conftest import FIXTURES
from tests.faults import hook
from tests.faults.test_training_pretraining import SIGNALS, _digests, _state, seeded_points
from tests.reference import google_models
from tests.training.test_classifier_script import ROOT, _command

MRPC = FIXTURES / "glue" / "MRPC"
STEPS = 6  # 6 training rows / batch 2 x 2 epochs


def _env():
  return {**os.environ, "TF_DETERMINISTIC_OPS": "1", "TF_CPP_MIN_LOG_LEVEL": "3",
          "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def command(tmp_path_factory, uncased_vocab):
  def make(out):
    return _command(
        "--task_name=MRPC", f"--data_dir={MRPC}", f"--vocab_file={uncased_vocab}",
        f"--bert_config_file={config}", f"--output_dir={out}", "--do_train=True",
        "--do_eval=True", "--do_predict=True", "--max_seq_length=32", "--train_batch_size=2",
        "--eval_batch_size=4", "--predict_batch_size=4", "--learning_rate=1e-3",
        "--num_train_epochs=2", "--seed=5", "--steps_per_loop=1",
        "--save_checkpoints_steps=1", "--keep_checkpoint_max=3")
  config = tmp_path_factory.mktemp("config") / "bert_config.json"
  config.write_text(json.dumps(google_models.tiny_config_dict(vocab_size=30522)))
  return make


def _run(command, out, env=None):
  return warm.run(command(out), capture_output=True, text=True, cwd=ROOT, timeout=600,
                  env=env or _env())


@pytest.fixture(name="straight", scope="module")
def _straight(command, tmp_path_factory):
  """An uninterrupted run's output folder."""
  straight = tmp_path_factory.mktemp("classifier") / "straight"
  result = _run(command, straight)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"step {STEPS}/{STEPS}" in result.stdout
  assert {"eval_results.txt", "test_results.tsv", "MRPC.tsv", "ckpt-6.index",
          "google/bert_model.ckpt.index"} <= set(_digests(straight))
  return straight


def test_sigkill_at_seeded_points_then_the_same_command_gives_the_uninterrupted_outputs(
    command, straight, tmp_path):
  rng = random.Random(17)
  start = rng.randint(1, 3)
  written = rng.randint(start + 1, 4)
  step = rng.randint(written + 1, 5)
  out = tmp_path / "out"
  for point, n in (("save_start", start), ("save_written", written), ("step", step)):
    result = _run(command, out, env=hook.env(_env(), point, n, action="kill"))
    assert result.returncode == -signal.SIGKILL, (point, n, result.stderr[-3000:])
    if point == "save_written":
      assert _state(out)[0] == f"ckpt-{written - 1}"
      assert os.path.exists(out / f"ckpt-{written}.index")
  assert _state(out)[0] == f"ckpt-{step - 1}"
  result = _run(command, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  _assert_same_outputs(out, straight)


def test_damaged_features_then_ctrl_c_then_sigterm_and_the_same_command_gives_the_outputs(
    command, straight, tmp_path):
  """Three stopped runs on one folder, then the same command: the uninterrupted run's outputs.
  (One final run for the three: each stopped run must leave a folder that resumes exactly.)

  1. train.tf_record, written by the run, is damaged before training reads it (the run holds
     at the fault point ``records_read``): one line naming the file, the record's offset and
     what to do, exit 1.
  2. The next run finds the damage, says so and writes the file again; Ctrl-C at a seeded
     point (the run waits there for it): one line, exit 130.
  3. SIGTERM at a later seeded point of the resumed run: one line, exit 143.
  """
  out = tmp_path / "out"
  ready = tmp_path / "ready"
  process = hook.start_at_point(command(out), _env(), "records_read", 1, ready, action="hold",
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
  record = out / "train.tf_record"
  offset = hook.flip_in_record(record, 3)
  damage = (f"{record}: damaged TFRecord at byte {offset} (record 3): the data's CRC-32C does "
            "not match (a changed byte)")
  ready.unlink()  # goes on: training reads the damaged file
  _, stderr = process.communicate(timeout=600)
  assert process.returncode == 1, stderr[-3000:]
  assert "Traceback" not in stderr
  assert stderr.strip().splitlines()[-1] == (
      f"run_classifier.py: error: {damage}; the next run writes it again")
  assert not list(out.glob("ckpt-*"))

  order = ("step", "save_start", "save_written")  # within a step, as a run passes them
  points = sorted(seeded_points(24, STEPS, 2), key=lambda p: (p[1], order.index(p[0])))
  for signum, (point, n) in zip((signal.SIGINT, signal.SIGTERM), points):
    ready = tmp_path / f"ready-{signum}"
    process = hook.start_at_point(command(out), _env(), point, n, ready, cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=600)
    code, word = SIGNALS[signum]
    assert process.returncode == code, (point, n, stderr[-3000:])
    assert stderr.strip().splitlines()[-1] == f"run_classifier.py: {word}"
    assert "Traceback" not in stderr
    assert (f"{damage}: writing it again" in stderr) == (signum == signal.SIGINT)
  result = _run(command, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  _assert_same_outputs(out, straight)


def _assert_same_outputs(out, straight):
  # The feature TFRecords hold the same examples; their bytes may differ between processes
  # (protobuf writes a map's entries in hash order), everything else is byte for byte.
  records = [name for name in _digests(straight) if name.endswith(".tf_record")]
  assert sorted(records) == ["eval.tf_record", "predict.tf_record", "train.tf_record"]
  for name in records:
    assert _examples(out / name) == _examples(straight / name), name
  without = lambda digests: {k: v for k, v in digests.items() if k not in records}  # noqa: E731
  assert without(_digests(out)) == without(_digests(straight))
  assert sorted(_digests(out)) == sorted(_digests(straight))
  assert _state(out) == _state(straight)


def _examples(path):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]
