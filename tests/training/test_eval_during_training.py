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


def test_a_resume_on_other_dev_data_compares_nothing_with_the_old_scores(tmp_path):
  """Steps 10, 20 scored 0.5, 0.9 on dev data A (best: 20). Resumed at step 20 on dev data B:
  step 20 is evaluated again (0.3 on B), and it, not A's 0.9, is the best to beat: B's step 30
  at 0.4 becomes the best (compared with A's 0.9 it would not); patience counts B's
  evaluations only; A's entries stay in the file, marked; --do_eval's "already evaluated"
  answers with B's. A history written before fingerprints (no ``eval_data``) compares."""
  task = classifier.ClassifierTask(_config(), num_labels=2)
  model = task.build_model()
  model({"input_ids": tf.zeros([1, 4], tf.int32), "input_mask": tf.ones([1, 4], tf.int32),
         "segment_ids": tf.zeros([1, 4], tf.int32)})
  values = iter([0.5, 0.9, 0.3, 0.4, 0.35])
  lines = []

  def hook(data):
    return eval_during.EvalDuringTraining(
        tf.distribute.get_strategy(), model, lambda: {"eval_f1": next(values)},
        str(tmp_path), "eval_f1", patience=2, progress=lines.append, eval_data=data)

  first = hook("A")
  first.begin(0, resumed=False)
  first.saved(10)
  first.saved(20)
  assert json.loads((tmp_path / "best" / "best.json").read_text())["eval_data"] == "A"
  second = hook("B")
  assert second.begin(20, resumed=True) is False
  assert "note: eval_history.jsonl's evaluations of step(s) 10, 20 scored other dev data " \
         "than this run's: kept in the file, compared with nothing of this run's" in lines
  assert any("holds step 20, chosen on other dev data than this run's: the next evaluation "
             "replaces it" in line for line in lines)
  assert second.best == (20, 0.3)                     # step 20 scored again, on B
  assert second.saved(30) is False and second.best == (30, 0.4)
  assert second.saved(40) is False                    # one of B's without a better: 1 < 2
  assert second.evaluated(20) == {"eval_f1": 0.3, "global_step": 20}
  assert [(e["global_step"], e["eval_data"], e["eval_f1"]) for e in _history(tmp_path)] == [
      (10, "A", 0.5), (20, "A", 0.9), (20, "B", 0.3), (30, "B", 0.4), (40, "B", 0.35)]
  assert json.loads((tmp_path / "best" / "best.json").read_text()) == {
      "global_step": 30, "metric": "eval_f1", "value": 0.4, "checkpoint": "ckpt-30",
      "eval_data": "B"}
  # Entries without a fingerprint (an older bert_tf's) compare with any data.
  old = tmp_path / "old"
  old.mkdir()
  (old / "eval_history.jsonl").write_text(json.dumps({"global_step": 5, "eval_f1": 0.8}) + "\n")
  unmarked = eval_during.EvalDuringTraining(
      tf.distribute.get_strategy(), model, dict, str(old), "eval_f1", eval_data="C")
  assert unmarked.begin(5, resumed=True) is False     # step 5 already evaluated
  assert unmarked.evaluated(5) == {"global_step": 5, "eval_f1": 0.8}


def test_a_kill_before_best_json_after_a_dev_data_change_keeps_this_runs_best(tmp_path):
  """Run A scores step 10 (0.5, best); run B, on other dev data, resumes and scores step 20
  at 0.3 (its best) and is killed between best/ckpt-20 and best.json (which still says step
  10, data A). Resumed again on B: best/ is B's own step 20 at 0.3 (not "chosen on other dev
  data"), best.json is mended, and a worse step 30 does not replace it."""
  task = classifier.ClassifierTask(_config(), num_labels=2)
  model = task.build_model()
  model({"input_ids": tf.zeros([1, 4], tf.int32), "input_mask": tf.ones([1, 4], tf.int32),
         "segment_ids": tf.zeros([1, 4], tf.int32)})
  values = iter([0.5, 0.25, 0.3, 0.2])
  lines = []

  def hook(data):
    return eval_during.EvalDuringTraining(
        tf.distribute.get_strategy(), model, lambda: {"eval_f1": next(values)},
        str(tmp_path), "eval_f1", progress=lines.append, eval_data=data)

  first = hook("A")
  first.begin(0, resumed=False)
  first.saved(10)
  stale = (tmp_path / "best" / "best.json").read_text()
  second = hook("B")
  second.begin(10, resumed=True)                       # step 10 again on B: 0.25
  second.saved(20)                                     # 0.3: B's best
  (tmp_path / "best" / "best.json").write_text(stale)  # as a kill before best.json leaves it
  lines.clear()
  third = hook("B")
  assert third.begin(20, resumed=True) is False
  assert third.best == (20, 0.3) and not any("other dev data than this run's: the next"
                                             in line for line in lines)
  assert json.loads((tmp_path / "best" / "best.json").read_text())["global_step"] == 20
  third.saved(30)                                      # 0.2: worse
  assert third.best == (20, 0.3) and eval_during.best_step(str(tmp_path / "best")) == 20


def test_the_note_of_other_dev_datas_steps_stays_one_short_line(tmp_path):
  """Six evaluations of other dev data: the note names the first two, the last and how many
  (it listed every step on every resume)."""
  (tmp_path / "eval_history.jsonl").write_text("".join(
      json.dumps({"global_step": step, "eval_f1": 0.5, "eval_data": "A"}) + "\n"
      for step in range(1, 7)))
  lines = []
  hook = eval_during.EvalDuringTraining(
      tf.distribute.get_strategy(), None, lambda: {"eval_f1": 0.1}, str(tmp_path), "eval_f1",
      progress=lines.append, eval_data="B")
  hook._save_best = lambda step, value: None  # pylint: disable=protected-access  # no model
  hook.begin(6, resumed=True)
  assert lines[0] == ("note: eval_history.jsonl's evaluations of step(s) 1, 2, ..., 6 (6 of "
                      "them) scored other dev data than this run's: kept in the file, compared "
                      "with nothing of this run's")


def test_data_fingerprints_tell_dev_data_apart(tmp_path):
  """The fingerprint changes with any part (examples, a length) and a file's size or first
  bytes; it stays for equal parts and for a file copied elsewhere (name, size, bytes)."""
  fp = eval_during.data_fingerprint
  assert fp("c", 128, [["a", "x", None, "1"]]) == fp("c", 128, [["a", "x", None, "1"]])
  assert fp("c", 128, [["a", "x", None, "1"]]) != fp("c", 128, [["a", "x", None, "0"]])
  assert fp("c", 128, [["a", "x", None, "1"]]) != fp("c", 64, [["a", "x", None, "1"]])
  (tmp_path / "a").mkdir()
  (tmp_path / "b").mkdir()
  for folder, data in (("a", b"\x01" * 100), ("b", b"\x01" * 100)):
    (tmp_path / folder / "dev.tf_record").write_bytes(data)
  ff = eval_during.file_fingerprint
  a, b = str(tmp_path / "a" / "dev.tf_record"), str(tmp_path / "b" / "dev.tf_record")
  assert ff(a) == ff(b)
  (tmp_path / "b" / "dev.tf_record").write_bytes(b"\x02" + b"\x01" * 99)  # same size
  assert ff(a) != ff(b)
  assert ff(a, head_bytes=0) == ff(b, head_bytes=0)     # name and size only
  assert ff(a, head_bytes=None) != ff(b, head_bytes=None)


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
        k: v for k, v in entry.items() if k not in ("global_step", "eval_data")}, step
  # The losses moved: the best by eval_loss is a real choice, not the first.
  losses = [e["eval_loss"] for e in history]
  assert len(set(losses)) == len(losses)


def test_best_holds_the_best_steps_weights_and_loads_alone(runs):
  history = _history(runs["with"])
  best = min(history, key=lambda e: e["eval_loss"])
  step = best["global_step"]
  info = json.loads((runs["with"] / "best" / "best.json").read_text())
  assert info == {"global_step": step, "metric": "eval_loss", "value": best["eval_loss"],
                  "checkpoint": f"ckpt-{step}", "eval_data": best["eval_data"]}
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
  assert results["eval"] == {k: v for k, v in best.items() if k != "eval_data"}
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


def test_a_resume_on_another_dev_set_chooses_its_best_on_that_set(tmp_path, uncased_vocab):
  """Trained to step 6 on the fixture's dev set, resumed to 12 with --data_dir at a copy whose
  dev set lost two rows: steps 6..12 are scored on the new dev set (step 6 again), best/ is the
  lowest eval_loss among those (the old set's losses are not comparable), and eval_results.txt
  is the new set's evaluation of step 12, equal to an eval-only run of its checkpoint."""
  out = tmp_path / "out"
  _run(out, uncased_vocab, num_train_epochs=2, eval_during_training=True,
       best_metric="eval_loss", do_eval=False)
  other = tmp_path / "MRPC"
  other.mkdir()
  for name in ("train.tsv", "test.tsv"):
    (other / name).write_bytes((MRPC / name).read_bytes())
  (other / "dev.tsv").write_text("".join((MRPC / "dev.tsv").read_text().splitlines(True)[:-2]))
  _, lines = _run(out, uncased_vocab, data_dir=str(other), eval_during_training=True,
                  best_metric="eval_loss")
  assert any("evaluations of step(s) 2, 4, 6 scored other dev data" in line for line in lines)
  history = _history(out)
  new = [e for e in history if e["eval_data"] != history[0]["eval_data"]]
  assert [e["global_step"] for e in history if e not in new] == [2, 4, 6]
  assert [e["global_step"] for e in new] == [6, 8, 10, 12]
  best = min(new, key=lambda e: e["eval_loss"])
  assert json.loads((out / "best" / "best.json").read_text())["global_step"] == \
      best["global_step"]
  alone = classifier.run_classifier(
      _config(), "MRPC", str(uncased_vocab), str(tmp_path / "eval12"),
      tf.distribute.get_strategy(), data_dir=str(other), max_seq_length=16, do_eval=True,
      eval_batch_size=2, init_checkpoint=str(out / "ckpt-12"))["eval"]
  text = (out / "eval_results.txt").read_text()
  assert f"eval_loss = {np.float32(alone['eval_loss'])!s}\n" in text
  assert new[-1]["eval_loss"] == alone["eval_loss"]
  # Trained on without evaluating: best/ stays, and the run says so.
  kept = (out / "best" / "best.json").read_text()
  _, lines = _run(out, uncased_vocab, data_dir=str(other), num_train_epochs=5, do_eval=False)
  assert (out / "best" / "best.json").read_text() == kept
  assert any(f"best holds step {best['global_step']}, chosen by an earlier run's "
             "--eval_during_training; this run does not evaluate" in line for line in lines)


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
  assert sorted(history[-1]) == sorted(list(with_eval["eval"]) + ["eval_data"])
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
  assert dict(again["eval"], eval_data=best["eval_data"]) == dict(best)
  with pytest.raises(BertTfError, match="--best_metric eval_accuracy: pretraining has loss, "
                                        "masked_lm_accuracy, masked_lm_loss, "
                                        "next_sentence_accuracy, next_sentence_loss"):
    run(tmp_path / "bad", eval_during_training=True, best_metric="eval_accuracy")


def test_pretraining_eval_reads_max_eval_steps_batches_wrapping_as_the_original(  # noqa: F811
    tmp_path, workdir):
  """The original's eval input repeats: --max_eval_steps batches exactly, an eval set smaller
  than that wrapping around. Evaluated so over the fixture's records, the results equal those
  of the same number of batches read once from the records written out twice in a row."""
  import shutil  # pylint: disable=import-outside-toplevel
  config = BertConfig.from_json_file(str(workdir / "bert_config.json"))
  files = sorted(str(p) for p in workdir.glob("data-*.tfrecord"))
  records = sum(1 for f in files for _ in tf.data.TFRecordDataset(f))
  steps = records // 8 + 3                            # past the end: wraps around
  twice = []
  for copy in range(2):
    for i, f in enumerate(files):
      twice.append(str(tmp_path / f"twice-{copy}-{i}.tfrecord"))
      shutil.copyfile(f, twice[-1])
  assert records < steps * 8 <= 2 * records          # wraps once; the copies suffice

  def run(**kwargs):
    return pretraining.run_pretraining(
        config, ",".join(files), str(tmp_path / "out"), tf.distribute.get_strategy(),
        max_seq_length=SEQ, max_predictions_per_seq=PRED, eval_batch_size=8,
        max_eval_steps=steps, seed=1, **kwargs)["eval"]

  wrapped = run(do_train=True, do_eval=True, train_batch_size=8, num_train_steps=2,
                num_warmup_steps=1, steps_per_loop=1)
  read_once = run(do_train=False, do_eval=True, eval_input_file=",".join(twice))
  assert wrapped == read_once

