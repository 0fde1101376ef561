"""run_classifier.py killed with SIGKILL at seeded points (inside a checkpoint save, after a
save's files are whole, after a step), each time followed by the same command: the final
outputs (checkpoints, Google export, eval_results.txt, test_results.tsv) equal an
uninterrupted run's byte for byte and no stray file remains. Ctrl-C at seeded points: one
line, exit 130, and the same command again gives the same outputs."""

import json
import os
import random
import signal
import subprocess
import time

import pytest

from tests.conftest import FIXTURES
from tests.faults.test_training_pretraining import _digests, _kill_at_line, _state
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
  return subprocess.run(command(out), capture_output=True, text=True, cwd=ROOT, timeout=600,
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
  line = rng.randint(written + 1, 5)
  out = tmp_path / "out"
  for fault in (f"save_start:{start}", f"save_written:{written}"):
    result = _run(command, out, env={**_env(), "BERT_TF_FAULT": fault})
    assert result.returncode == -signal.SIGKILL, (fault, result.stderr[-3000:])
  assert _state(out)[0] == f"ckpt-{written - 1}"
  assert os.path.exists(out / f"ckpt-{written}.index")
  assert _kill_at_line(command(out), f"step {line}/") == -signal.SIGKILL
  result = _run(command, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  _assert_same_outputs(out, straight)


@pytest.mark.parametrize("seed", [1, 2])
def test_ctrl_c_stops_at_once_and_the_same_command_gives_the_uninterrupted_outputs(
    command, straight, tmp_path, seed):
  out = tmp_path / "out"
  process = subprocess.Popen(command(out), cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
  for line in process.stdout:
    if line.startswith("step 2/"):
      break
  time.sleep(random.Random(seed).uniform(0.0, 0.5))  # in a step, a save or between them
  process.send_signal(signal.SIGINT)
  _, stderr = process.communicate(timeout=300)
  assert process.returncode == 130, stderr[-3000:]
  assert stderr.strip().splitlines()[-1] == "run_classifier.py: interrupted"
  assert "Traceback" not in stderr
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
