"""Evaluation during training (run_classifier's --eval_during_training, --best_metric,
--early_stopping_patience, --use_best_checkpoint).

Checked against independent computations: each evaluation in eval_history.jsonl equals a
separate eval-only run of the checkpoint of that step; the training it rides on is the same
as without it (eval_results.txt and the Google export byte-equal); best/ holds the weights of
the history's best step (equal to that step's checkpoint); early stopping stops where a
hand-counted patience says; the hook keeps the best and stops on a hand-made sequence.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import glue
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig, checkpoints
from bert_tf.training import classifier, eval_during_training as eval_during, loop, pretraining
from tests.conftest import FIXTURES
from tests.reference import google_models
from tests.training.test_run_pretraining import PRED, SEQ, workdir  # noqa: F401  (fixture)

MRPC = FIXTURES / "glue" / "MRPC"
STEPS = 12  # 6 training rows / batch 2 x 4 epochs


def _config():
  return BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))


def _run(out, vocab, **kwargs):
  args = dict(data_dir=str(MRPC), max_seq_length=16, do_train=True, do_eval=True,
              train_batch_size=2, eval_batch_size=2, num_train_epochs=4, seed=3,
              steps_per_loop=1, save_checkpoints_steps=2, keep_checkpoint_max=0,
              learning_rate=1e-3)
  args.update(kwargs)
  lines = []
  results = classifier.run_classifier(_config(), "MRPC", str(vocab), str(out),
                                      tf.distribute.get_strategy(), progress=lines.append,
                                      **args)
  return results, lines


def _weights(prefix):
  return checkpoints.read_bert_tf_checkpoint(str(prefix))


def _history(out):
  return eval_during.read_history(str(out))


# === The paper's metric, the keys, better ===

def test_default_best_metric_is_the_papers():
  # Devlin et al. 2019, Table 1 and its caption, by hand.
  paper = {"CoLA": "eval_mcc", "SST-2": "eval_accuracy", "MRPC": "eval_f1",
           "STS-B": "eval_spearman", "QQP": "eval_f1", "MNLI": "eval_accuracy",
           "QNLI": "eval_accuracy", "RTE": "eval_accuracy", "WNLI": "eval_accuracy",
           "XNLI": "eval_accuracy"}
  for name, metric in paper.items():
    assert classifier.default_best_metric(glue.get_task(name)) == metric, name


@pytest.mark.parametrize("name", ["MRPC", "STS-B", "MNLI", "CoLA"])
def test_eval_result_keys_are_those_of_an_evaluation(name):
  """The keys --best_metric may name are those eval_results_for_split gives (global_step
  aside)."""
  task = glue.get_task(name)
  keys = set()
  for split in task.eval_splits:
    streaming = {"eval_loss": 0.5, "loss": 0.5}
    if not task.is_regression:
      streaming["eval_accuracy"] = 0.5
    outputs = {"logits": np.array([[0.1, 0.9, 0.0][:task.num_labels], [0.9, 0.1, 0.0][
        :task.num_labels]], np.float32), "label_ids": np.array([1, 0]),
               "is_real_example": np.array([1, 1])}
    keys |= set(classifier.eval_results_for_split(task, split, streaming, outputs))
  assert classifier.eval_result_keys(task) == sorted(keys)


def test_better_is_lower_for_a_loss_higher_else_and_never_nan():
  assert eval_during.is_better(0.4, 0.5, "eval_loss")
  assert not eval_during.is_better(0.5, 0.5, "eval_loss")           # strictly
  assert eval_during.is_better(0.6, 0.5, "eval_mm_accuracy")
  assert not eval_during.is_better(0.4, 0.5, "eval_f1")
  assert eval_during.is_better(0.0, None, "eval_f1")                 # the first
  assert not eval_during.is_better(float("nan"), None, "eval_mcc")
  assert eval_during.is_better(-0.5, float("nan"), "eval_pearson")    # nan is no best
  assert eval_during.lower_is_better("mm_loss") and not eval_during.lower_is_better("eval_mcc")


# === The hook on a hand-made sequence ===

def test_hook_keeps_the_best_weights_and_stops_after_patience(tmp_path):
  """Values 0.5, 0.7, 0.6, 0.7, 0.65 of a higher-is-better metric, patience 3: the best is
  the second (0.7; the fourth's 0.7 is not better), and the fifth evaluation is the third
  without a better one: stop there, not before. The model's weights differ at each step; best/
  must hold the second's. A new hook resuming the folder reads it all back."""
  task = classifier.ClassifierTask(_config(), num_labels=2)
  model = task.build_model()
  model({"input_ids": tf.zeros([1, 4], tf.int32), "input_mask": tf.ones([1, 4], tf.int32),
         "segment_ids": tf.zeros([1, 4], tf.int32)})
  values = iter([0.5, 0.7, 0.6, 0.7, 0.65, 0.9])
  lines = []

  def hook():
    return eval_during.EvalDuringTraining(
        tf.distribute.get_strategy(), model, lambda: {"eval_f1": next(values), "loss": 1.0},
        str(tmp_path), "eval_f1", patience=3, progress=lines.append,
        write_files=lambda folder: open(os.path.join(folder, "marker"), "w").close())

  first = hook()
  assert first.begin(0, resumed=False) is False
  pooler = checkpoints.google_variable_map(model)["bert/pooler/dense/bias"]
  stops = []
  for step in (10, 20, 30, 40, 50):
    pooler.assign(tf.fill(pooler.shape, float(step)))
    stops.append(first.saved(step))
  assert stops == [False, False, False, False, True]
  assert any("early stopping: 3 evaluations without a better eval_f1" in line
             for line in lines)
  assert [e["global_step"] for e in _history(tmp_path)] == [10, 20, 30, 40, 50]
  assert [e["eval_f1"] for e in _history(tmp_path)] == [0.5, 0.7, 0.6, 0.7, 0.65]
  assert json.loads((tmp_path / "best" / "best.json").read_text()) == {
      "global_step": 20, "metric": "eval_f1", "value": 0.7, "checkpoint": "ckpt-20"}
  assert tf.train.latest_checkpoint(str(tmp_path / "best")).endswith("ckpt-20")
  assert os.path.exists(tmp_path / "best" / "marker")
  # The run's own evaluations come from memory, not the file (which a multi-worker run's
  # chief may not have written yet when another worker asks).
  (tmp_path / "eval_history.jsonl").rename(tmp_path / "history.moved")
  assert first.evaluated(40)["eval_f1"] == 0.7 and first.evaluated(45) is None
  (tmp_path / "history.moved").rename(tmp_path / "eval_history.jsonl")
  np.testing.assert_array_equal(
      _weights(tmp_path / "best" / "ckpt-20")["bert/pooler/dense/bias"], 20.0)
  assert not (tmp_path / "best" / "ckpt-10.index").exists()          # one best kept
  # Resumed at step 50 (evaluated): nothing evaluated again, and it stops at once.
  again = hook()
  assert again.begin(50, resumed=True) is True
  assert again.best == (20, 0.7) and len(again.history) == 5
  assert next(values) == 0.9  # The sequence was not consumed by the resumed hook.
  # Resumed from step 30 (the later checkpoints lost): 40 and 50 are made again.
  later = hook()
  assert later.begin(30, resumed=True) is False
  assert [e["global_step"] for e in later.history] == [10, 20, 30]


def test_hook_a_nan_metric_is_never_the_best(tmp_path):
  """Spearman's rho of constant predictions is nan: nan, nan, then 0.2 keeps step 3 as the
  best; with patience 2, two nan evaluations stop training (none scored)."""
  task = classifier.ClassifierTask(_config(), num_labels=2)
  model = task.build_model()
  model({"input_ids": tf.zeros([1, 4], tf.int32), "input_mask": tf.ones([1, 4], tf.int32),
         "segment_ids": tf.zeros([1, 4], tf.int32)})
  nan = float("nan")
  for patience, values, stops in ((3, [nan, nan, 0.2], [False, False, False]),
                                  (2, [nan, nan], [False, True])):
    out = tmp_path / str(patience)
    lines = []
    values_left = iter(values)
    hook = eval_during.EvalDuringTraining(
        tf.distribute.get_strategy(), model, lambda: {"eval_spearman": next(values_left)},
        str(out), "eval_spearman", patience=patience, progress=lines.append)
    hook.begin(0, resumed=False)
    assert [hook.saved(step) for step in range(1, len(values) + 1)] == stops
    if patience == 3:
      assert hook.best == (3, 0.2)
      assert json.loads((out / "best" / "best.json").read_text())["global_step"] == 3
    else:
      assert "early stopping: 2 evaluations without a better eval_spearman " \
             "(--early_stopping_patience=2); none scored" in lines


def test_repeated_evaluations_trace_their_step_once(tmp_path):
  """Evaluation during training runs the same model over the dev set again and again: with the
  run's cache the step is traced once (a new tf.function would trace every time), and gives
  the same numbers."""
  from tests.training.test_classifier import _write_eval_file  # pylint: disable=import-outside-toplevel
  path = str(tmp_path / "eval.tf_record")
  _write_eval_file(path, n_real=6, batch_size=4, num_labels=2)
  task = classifier.ClassifierTask(BertConfig.from_dict(google_models.tiny_config_dict()), 2)
  model = task.build_model()
  strategy = tf.distribute.get_strategy()
  cache = {}
  runs = [classifier.run_inference(strategy, model, task,
                                   classifier.eval_dataset_fn(path, 10, 4), cache=cache)
          for _ in range(3)]
  assert cache["run_inference"].experimental_get_tracing_count() == 1
  for metrics, outputs in runs[1:]:
    assert metrics == runs[0][0]
    np.testing.assert_array_equal(outputs["logits"], runs[0][1]["logits"])
  sums = [loop.evaluate(strategy, model, task, classifier.eval_dataset_fn(path, 10, 4),
                        cache=cache) for _ in range(3)]
  assert cache["evaluate"].experimental_get_tracing_count() == 1
  assert sums[0] == sums[1] == sums[2] and sums[0]["eval_loss"] == runs[0][0]["eval_loss"]


def test_another_best_metric_over_a_kept_best_is_a_one_line_error(tmp_path):
  best = tmp_path / "best"
  best.mkdir()
  (best / "best.json").write_text(json.dumps({"metric": "eval_f1", "global_step": 2}))
  hook = eval_during.EvalDuringTraining(tf.distribute.get_strategy(), None, dict,
                                        str(tmp_path), "eval_loss")
  with pytest.raises(BertTfError, match=r"holds the best checkpoint by eval_f1, this run asks "
                                        r"for --best_metric=eval_loss") as error:
    hook.begin(2, resumed=True)
  assert "\n" not in str(error.value)
  assert hook.begin(0, resumed=False) is False  # a fresh run replaces it


# === run_classifier end to end (in process) ===

@pytest.fixture(scope="module")
def runs(tmp_path_factory, uncased_vocab):
  """The same fine-tuning with and without evaluation during training."""
  tmp = tmp_path_factory.mktemp("eval_during")
  with_eval, lines = _run(tmp / "with", uncased_vocab, eval_during_training=True,
                          best_metric="eval_loss")
  without, _ = _run(tmp / "without", uncased_vocab)
  return {"tmp": tmp, "with": tmp / "with", "without": tmp / "without", "lines": lines,
          "results": with_eval, "results_without": without, "vocab": uncased_vocab}


def test_training_is_the_same_with_evaluation_during_it(runs):
  assert runs["results"]["train"] == runs["results_without"]["train"]
  for name in ("eval_results.txt", "google/bert_model.ckpt.index",
               "google/bert_model.ckpt.data-00000-of-00001"):
    assert (runs["with"] / name).read_bytes() == (runs["without"] / name).read_bytes(), name


def test_each_evaluation_equals_an_eval_only_run_of_its_checkpoint(runs):
  history = _history(runs["with"])
  assert [e["global_step"] for e in history] == list(range(2, STEPS + 1, 2))
  for entry in (history[0], history[3]):
    step = entry["global_step"]
    results = classifier.run_classifier(
        _config(), "MRPC", str(runs["vocab"]), str(runs["tmp"] / f"eval{step}"),
        tf.distribute.get_strategy(), data_dir=str(MRPC), max_seq_length=16, do_eval=True,
        eval_batch_size=2, init_checkpoint=str(runs["with"] / f"ckpt-{step}"))["eval"]
    assert {k: v for k, v in results.items() if k != "global_step"} == {
        k: v for k, v in entry.items() if k != "global_step"}, step
  # The losses moved: the best by eval_loss is a real choice, not the first.
  losses = [e["eval_loss"] for e in history]
  assert len(set(losses)) == len(losses)


def test_best_holds_the_best_steps_weights_and_loads_alone(runs):
  history = _history(runs["with"])
  best = min(history, key=lambda e: e["eval_loss"])
  step = best["global_step"]
  info = json.loads((runs["with"] / "best" / "best.json").read_text())
  assert info == {"global_step": step, "metric": "eval_loss", "value": best["eval_loss"],
                  "checkpoint": f"ckpt-{step}"}
  kept = _weights(runs["with"] / "best" / f"ckpt-{step}")
  made = _weights(runs["with"] / f"ckpt-{step}")
  assert sorted(kept) == sorted(made)
  for name, value in made.items():
    np.testing.assert_array_equal(kept[name], value, err_msg=name)
  assert sorted(os.listdir(runs["with"] / "best")) == sorted([
      "best.json", "bert_config.json", "checkpoint", "classifier.json", "vocab.txt",
      f"ckpt-{step}.index", f"ckpt-{step}.data-00000-of-00001"])
  import bert_tf  # pylint: disable=import-outside-toplevel
  model = bert_tf.load(str(runs["with"] / "best"))
  assert model.classifier_info["labels"] == ["0", "1"]
  assert any(f"eval at step {step}: eval_loss" in line for line in runs["lines"])
  assert (runs["with"] / "summaries" / "eval").is_dir()


def test_use_best_checkpoint_evaluates_and_exports_the_best(runs, tmp_path):
  history = _history(runs["with"])
  best = min(history, key=lambda e: e["eval_loss"])
  results = classifier.run_classifier(
      _config(), "MRPC", str(runs["vocab"]), str(runs["with"]),
      tf.distribute.get_strategy(), data_dir=str(MRPC), max_seq_length=16, do_eval=True,
      eval_batch_size=2, use_best_checkpoint=True, export_dir=str(tmp_path / "export"))
  assert results["eval"] == best
  text = (runs["with"] / "eval_results.txt").read_text()
  assert f"global_step = {best['global_step']}\n" in text


def test_early_stopping_stops_where_patience_says_and_stays_stopped(tmp_path, uncased_vocab):
  """Learning rate 0: the weights never change, so no evaluation is better than the first
  (step 2); patience 2 stops training at the second after it, step 6 of 12. The same command
  again trains no further."""
  out = tmp_path / "out"
  kwargs = dict(learning_rate=0.0, eval_during_training=True, early_stopping_patience=2,
                do_eval=False)
  results, lines = _run(out, uncased_vocab, **kwargs)
  assert results["train"]["global_step"] == 6 and results["train"]["stopped_early"]
  assert [e["global_step"] for e in _history(out)] == [2, 4, 6]
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-6")
  assert json.loads((out / "best" / "best.json").read_text())["global_step"] == 2
  assert any("early stopping: 2 evaluations without a better eval_f1" in line
             for line in lines)
  again, lines = _run(out, uncased_vocab, **kwargs)
  assert again["train"]["global_step"] == 6 and again["train"]["stopped_early"]
  assert not any(line.startswith("step ") for line in lines)
  assert [e["global_step"] for e in _history(out)] == [2, 4, 6]


@pytest.mark.parametrize("kwargs,needle", [
    ({"eval_during_training": True, "do_train": False}, "--eval_during_training evaluates "
                                                        "while training"),
    ({"early_stopping_patience": 2}, "--early_stopping_patience needs --eval_during_training"),
    ({"best_metric": "eval_f1"}, "--best_metric needs --eval_during_training"),
    ({"eval_during_training": True, "best_metric": "eval_pearson"},
     "--best_metric eval_pearson: task mrpc has eval_accuracy, eval_f1, eval_loss, loss"),
    ({"use_best_checkpoint": True}, "--use_best_checkpoint with --do_train needs "
                                    "--eval_during_training"),
    ({"use_best_checkpoint": True, "do_train": False}, "--use_best_checkpoint: no best "
                                                       "checkpoint in"),
    ({"eval_during_training": True, "early_stopping_patience": -1},
     "--early_stopping_patience -1 must be 0 (off) or more"),
])
def test_flags_that_do_not_fit_are_one_line_errors(tmp_path, uncased_vocab, kwargs, needle):
  with pytest.raises(BertTfError) as error:
    _run(tmp_path / "o", uncased_vocab, **kwargs)
  assert needle in str(error.value) and "\n" not in str(error.value)
  assert not (tmp_path / "o" / "ckpt-2.index").exists()


# === run_pretraining ===

def test_pretraining_evaluates_during_training_without_changing_it(tmp_path, workdir):  # noqa: F811
  """8 steps, a checkpoint and an evaluation (2 batches) every 2: the history's steps, the
  last entry equal to eval_results.txt, best/ = the history's lowest masked_lm_loss, and the
  trained weights and eval_results.txt byte-equal to a run without evaluation during it."""
  config = BertConfig.from_json_file(str(workdir / "bert_config.json"))
  files = str(workdir / "data-*.tfrecord")

  def run(out, **kwargs):
    lines = []
    results = pretraining.run_pretraining(
        config, files, str(out), tf.distribute.get_strategy(), max_seq_length=SEQ,
        max_predictions_per_seq=PRED, do_eval=True, train_batch_size=8, eval_batch_size=8,
        learning_rate=2e-3, num_train_steps=8, num_warmup_steps=2, save_checkpoints_steps=2,
        keep_checkpoint_max=0, max_eval_steps=2, steps_per_loop=2, seed=1,
        progress=lines.append, **kwargs)
    return results, lines

  with_eval, _ = run(tmp_path / "with", eval_during_training=True)
  without, _ = run(tmp_path / "without")
  assert with_eval["train"] == without["train"]
  for name in ("eval_results.txt", "google/bert_model.ckpt.data-00000-of-00001"):
    assert ((tmp_path / "with" / name).read_bytes() ==
            (tmp_path / "without" / name).read_bytes()), name
  history = _history(tmp_path / "with")
  assert [e["global_step"] for e in history] == [2, 4, 6, 8]
  assert sorted(history[-1]) == sorted(with_eval["eval"])
  best = min(history, key=lambda e: e["masked_lm_loss"])
  info = json.loads((tmp_path / "with" / "best" / "best.json").read_text())
  assert (info["global_step"], info["metric"]) == (best["global_step"], "masked_lm_loss")
  kept = _weights(tmp_path / "with" / "best" / f"ckpt-{best['global_step']}")
  made = _weights(tmp_path / "with" / f"ckpt-{best['global_step']}")
  assert sorted(kept) == sorted(made) and "cls/predictions/output_bias" in kept
  for name, value in made.items():
    np.testing.assert_array_equal(kept[name], value, err_msg=name)
  # The best, evaluated again without training: its history entry.
  again, _ = run(tmp_path / "with", do_train=False, use_best_checkpoint=True)
  assert again["eval"] == dict(best)
  with pytest.raises(BertTfError, match="--best_metric eval_accuracy: pretraining has loss, "
                                        "masked_lm_accuracy, masked_lm_loss, "
                                        "next_sentence_accuracy, next_sentence_loss"):
    run(tmp_path / "bad", eval_during_training=True, best_metric="eval_accuracy")
