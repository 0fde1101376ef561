"""run_ner.py killed with SIGKILL at seeded named points (after a save's files are whole,
after a step; ``bert_tf/faults``), each time followed by the same
command: the final outputs (checkpoints, Google export, eval_results.txt, the predictions)
equal an uninterrupted run's byte for byte, with no stray file."""

import json
import os
import random
import signal
import sys

import pytest

from tests import warm
from tests.conftest import FIXTURES
from tests.faults import hook
from tests.faults.test_training_pretraining import _digests, _state
from tests.reference import google_models

ROOT = FIXTURES.parents[1]
STEPS = 6  # 2 sentences / batch 2 x 6 epochs


def _env():
  return {**os.environ, "TF_DETERMINISTIC_OPS": "1", "TF_CPP_MIN_LOG_LEVEL": "3",
          "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def command(tmp_path_factory, uncased_vocab):
  base = tmp_path_factory.mktemp("ner")
  config = base / "bert_config.json"
  config.write_text(json.dumps(google_models.tiny_config_dict(vocab_size=30522)))
  data = base / "conll"
  data.mkdir()
  sample = (FIXTURES / "ner" / "conll2003_sample" / "train.txt").read_text(encoding="utf-8")
  for name in ("train.txt", "dev.txt", "test.txt"):
    (data / name).write_text(sample, encoding="utf-8")

  def make(out):
    return [sys.executable, str(ROOT / "run_ner.py"), f"--data_dir={data}",
            f"--vocab_file={uncased_vocab}", f"--bert_config_file={config}",
            f"--output_dir={out}", "--do_train", "--do_eval", "--do_predict",
            "--max_seq_length=16", "--train_batch_size=2", "--learning_rate=1e-3",
            "--num_train_epochs=6", "--seed=5", "--steps_per_loop=1",
            "--save_checkpoints_steps=1", "--keep_checkpoint_max=3"]
  return make


def _run(command, out, env=None):
  return warm.run(command(out), capture_output=True, text=True, cwd=ROOT, timeout=600,
                  env=env or _env(), check=False)


def test_sigkill_at_seeded_points_then_the_same_command_gives_the_uninterrupted_outputs(
    command, tmp_path):
  straight = tmp_path / "straight"
  result = _run(command, straight)
  assert result.returncode == 0, result.stderr[-3000:]
  expected = _digests(straight)
  assert {"eval_results.txt", "eval_predictions.txt", "test_predictions.txt",
          "test_results.txt", "token_classifier.json", f"ckpt-{STEPS}.index",
          "google/bert_model.ckpt.index", "google/token_classifier.json"} <= set(expected)

  # (A kill inside a save before any file, run_classifier's and run_pretraining's fault tests
  # cover: the same training loop.)
  rng = random.Random(29)
  written = rng.randint(1, 4)
  step = rng.randint(written + 1, 5)
  out = tmp_path / "out"
  for point, n in (("save_written", written), ("step", step)):
    result = _run(command, out, env=hook.env(_env(), point, n, action="kill"))
    assert result.returncode == -signal.SIGKILL, (point, n, result.stderr[-3000:])
  assert _state(out)[0] == f"ckpt-{step - 1}"
  result = _run(command, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert _digests(out) == expected
  assert _state(out) == _state(straight)
