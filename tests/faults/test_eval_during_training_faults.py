"""run_classifier.py with --eval_during_training killed (SIGKILL) where its work can be cut in
two: after a checkpoint is saved, before its evaluation (``eval_start``), and after the best
checkpoint is saved, before best.json says so (``best_saved``); then Ctrl-C before a later
evaluation (one line, exit 130); then the same command. The folder must end as an
uninterrupted run's: the same history, best/ and results, byte for byte (features aside,
whose bytes may differ between processes)."""

import json
import os
import signal
import subprocess

import numpy as np
import pytest

from bert_tf.modeling import checkpoints
from tests import warm
from tests.conftest import FIXTURES
from tests.faults import hook
from tests.faults.test_training_classifier import _env, _examples
from tests.faults.test_training_pretraining import _digests, _state
from tests.reference import google_models
from tests.training.test_classifier_script import ROOT, _command

MRPC = FIXTURES / "glue" / "MRPC"
STEPS = 6  # 6 training rows / batch 2 x 2 epochs, a checkpoint and an evaluation each


@pytest.fixture(scope="module")
def command(tmp_path_factory, uncased_vocab):
  config = tmp_path_factory.mktemp("config") / "bert_config.json"
  config.write_text(json.dumps(google_models.tiny_config_dict(vocab_size=30522)))

  def make(out):
    return _command(
        "--task_name=MRPC", f"--data_dir={MRPC}", f"--vocab_file={uncased_vocab}",
        f"--bert_config_file={config}", f"--output_dir={out}", "--do_train=True",
        "--do_eval=True", "--max_seq_length=32", "--train_batch_size=2", "--eval_batch_size=4",
        "--learning_rate=1e-3", "--num_train_epochs=2", "--seed=5", "--steps_per_loop=1",
        "--save_checkpoints_steps=1", "--keep_checkpoint_max=3", "--eval_during_training",
        "--best_metric=loss", "--use_best_checkpoint")
  return make


def _run(command, out, env=None):
  return warm.run(command(out), capture_output=True, text=True, cwd=ROOT, timeout=600,
                  env=env or _env())


def _history(out):
  return [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]


def test_killed_between_save_and_eval_and_inside_the_best_save_resumes_exactly(
    command, tmp_path):
  straight = tmp_path / "straight"
  result = _run(command, straight)
  assert result.returncode == 0, result.stderr[-3000:]
  history = _history(straight)
  assert [e["global_step"] for e in history] == list(range(1, STEPS + 1))
  # The steps whose evaluation made a new best (by the Estimator's loss), after step 2.
  best, improved = None, []
  for entry in history:
    if best is None or entry["loss"] < best:
      best = entry["loss"]
      improved.append(entry["global_step"])
  later = [step for step in improved if step > 2]
  assert later, f"no new best after step 2: {history}"
  # --use_best_checkpoint: the final eval is the best step's.
  results = dict(line.split(" = ") for line in
                 (straight / "eval_results.txt").read_text().splitlines())
  assert results["global_step"] == str(improved[-1])
  assert results["loss"] == str(np.float32(history[improved[-1] - 1]["loss"]))

  out = tmp_path / "out"
  result = _run(command, out, env=hook.env(_env(), "eval_start", 2, action="kill"))
  assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
  assert _state(out)[0] == "ckpt-2"                       # saved, not evaluated
  assert [e["global_step"] for e in _history(out)] == [1]
  result = _run(command, out, env=hook.env(_env(), "best_saved", later[0], action="kill"))
  assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
  assert "evaluation of step 2 already done" not in result.stdout  # it was evaluated now
  assert "eval at step 2: loss" in result.stdout
  kept = json.loads((out / "best" / "best.json").read_text())["global_step"]
  assert kept < later[0] and os.path.exists(out / "best" / f"ckpt-{later[0]}.index")
  # Ctrl-C while a later evaluation is about to start (the run waits there for it).
  ready = tmp_path / "ready"
  process = hook.start_at_point(command(out), _env(), "eval_start", STEPS - 1, ready, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  process.send_signal(signal.SIGINT)
  stdout, stderr = process.communicate(timeout=600)
  assert process.returncode == 130, stderr[-3000:]
  assert stderr.strip().splitlines()[-1] == "run_classifier.py: interrupted"
  assert "Traceback" not in stderr
  assert f"evaluation of step {later[0]} already done" in stdout
  assert [e["global_step"] for e in _history(out)] == list(range(1, STEPS - 1))
  result = _run(command, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  assert f"eval at step {STEPS - 1}: loss" in result.stdout

  records = ["eval.tf_record", "train.tf_record"]
  for name in records:
    assert _examples(out / name) == _examples(straight / name), name
  # best/checkpoint, like checkpoint, carries timestamps: compared as states. best/ckpt-N
  # also holds the count of best saves this process made: its weights are compared.
  skipped = records + [os.path.join("best", "checkpoint")]
  without = lambda digests: {k: v for k, v in digests.items()  # noqa: E731
                             if k not in skipped and not k.startswith("best/ckpt-")}
  assert without(_digests(out)) == without(_digests(straight))
  assert {"eval_history.jsonl", "best/best.json", "eval_results.txt"} <= set(
      without(_digests(out)))
  assert sorted(_digests(out)) == sorted(_digests(straight))
  assert _state(out) == _state(straight)
  assert _state(out / "best") == _state(straight / "best")
  prefix = f"best/ckpt-{improved[-1]}"
  kept, made = (checkpoints.read_bert_tf_checkpoint(str(folder / prefix))
                for folder in (out, straight))
  assert sorted(kept) == sorted(made)
  for name, value in made.items():
    np.testing.assert_array_equal(kept[name], value, err_msg=name)
