"""run_classifier.py with --distribution_strategy=multi_worker_mirrored: 2 worker processes on
127.0.0.1 fine-tune, evaluate and predict (MRPC-layout fixture, dropout off) to the weights,
eval_results.txt and test_results.tsv of one process over the same global batches, with
evaluation during training (the history and best/ of one process); only the chief writes
results."""

import json
import sys

import numpy as np
import pytest

from tests.conftest import FIXTURES
from tests.reference import google_models
from tests.training import multi_worker as mw


def _command(tmp, vocab, out, strategy):
  return [sys.executable, f"{mw.ROOT}/run_classifier.py", "--task_name=MRPC",
          f"--data_dir={FIXTURES / 'glue' / 'MRPC'}", f"--vocab_file={vocab}",
          f"--bert_config_file={tmp / 'bert_config.json'}", f"--output_dir={out}",
          "--do_train=True", "--do_eval=True", "--do_predict=True", "--max_seq_length=32",
          "--train_batch_size=6", "--eval_batch_size=4", "--predict_batch_size=4",
          "--learning_rate=1e-3", "--num_train_epochs=4", "--seed=5", "--steps_per_loop=2",
          "--save_checkpoints_steps=2", "--classifier_dropout=0", "--eval_during_training",
          "--best_metric=eval_loss",
          f"--distribution_strategy={strategy}"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, uncased_vocab):
  tmp = tmp_path_factory.mktemp("mw_classifier")
  (tmp / "bert_config.json").write_text(json.dumps(google_models.tiny_config_dict(
      vocab_size=30522, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)))
  (tmp / "tmp").mkdir()
  with mw.single_beside(_command(tmp, uncased_vocab, tmp / "single", "default"), tmp):
    mw.run_workers([_command(tmp, uncased_vocab, tmp / "two", "multi_worker_mirrored")] * 2,
                   tmp, tmp / "tmp")
  return tmp


def _eval_results(path):
  return {key: float(value) for key, value in
          (line.split(" = ") for line in path.read_text().splitlines())}


def test_two_workers_fine_tune_evaluate_and_predict_as_one_process(runs):
  single, two = runs / "single", runs / "two"
  # 6 examples, batch 6, 4 epochs: 4 updates.
  mw.assert_weights_close(mw.checkpoint_weights(str(two / "ckpt-4")),
                          mw.checkpoint_weights(str(single / "ckpt-4")), atol=1e-5)
  first = mw.checkpoint_weights(str(single / "ckpt-2"))
  last = mw.checkpoint_weights(str(single / "ckpt-4"))
  assert max(abs(first[k] - last[k]).max() for k in first) > 1e-3
  expected, got = _eval_results(single / "eval_results.txt"), _eval_results(
      two / "eval_results.txt")
  assert sorted(got) == sorted(expected)
  for key in expected:
    assert got[key] == pytest.approx(expected[key], abs=1e-5), key
  np.testing.assert_allclose(np.loadtxt(two / "test_results.tsv", ndmin=2),
                             np.loadtxt(single / "test_results.tsv", ndmin=2), atol=1e-5)
  # Evaluation during training: at steps 2 and 4, as one process; the best kept alike.
  history = [[json.loads(line) for line in (folder / "eval_history.jsonl").read_text()
              .splitlines()] for folder in (single, two)]
  assert [e["global_step"] for e in history[1]] == [e["global_step"] for e in history[0]] == [
      2, 4]
  for one, other in zip(*history):
    assert sorted(one) == sorted(other)
    for key in one:
      assert other[key] == pytest.approx(one[key], abs=1e-5), key
  best = [json.loads((folder / "best" / "best.json").read_text()) for folder in (single, two)]
  assert best[1]["global_step"] == best[0]["global_step"]
  mw.assert_weights_close(
      mw.checkpoint_weights(str(two / "best" / f"ckpt-{best[1]['global_step']}")),
      mw.checkpoint_weights(str(single / "best" / f"ckpt-{best[0]['global_step']}")),
      atol=1e-5)


def test_only_the_chief_writes(runs):
  assert mw.written_files(runs / "two") == mw.written_files(runs / "single")
  assert list((runs / "tmp").glob("bert_tf-*")) == []
