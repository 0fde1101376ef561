"""run_squad: the loss vs the original's model, an end-to-end run vs the original's prediction
pipeline and the official evaluation, v2.0 on messy input, prediction on 2 replicas, the
train-feature cache, and bad input.

The end-to-end runs use a tiny random BERT with the real bert-base-uncased vocab on the real
SQuAD v1.1 sample (allennlp 0.9.0) and the hand-made v2.0 file (Unicode, impossible
questions); the references are Google's run_squad.py code (features, create_model,
write_predictions, given our Google-format checkpoint) and the official evaluate-v1.1.py.
"""

import importlib.util
import json
import os
import pathlib
import random
import shutil
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig, checkpoints
from bert_tf.squad import examples as squad_examples
from bert_tf.squad import features as squad_features
from bert_tf.squad import postprocess
from bert_tf.training import distribution, squad
from tests import warm
from tests.reference import fine_tuning_schedule, google_models
from tests.reference.google_bert import google
from tests.squad.conftest import (SQUAD_FIXTURES, V1_SAMPLE, V2_HANDMADE, original_flags,
                                  training_copy)

tf1 = tf.compat.v1
REPO = pathlib.Path(__file__).resolve().parents[2]
# A tiny encoder over the real uncased vocab; lengths small enough that the sample's
# paragraphs need several doc spans.
CONFIG = google_models.tiny_config_dict(vocab_size=30522, max_position_embeddings=128)
LENGTHS = {"max_seq_length": 96, "doc_stride": 48, "max_query_length": 24}


def _config():
  return BertConfig.from_dict(CONFIG)


def _read_records(path, is_training, seq_length):
  spec = squad_features.name_to_features(seq_length, is_training)
  return [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
          for r in tf.data.TFRecordDataset(str(path))]


def _google_logits(run_squad, config_dict, checkpoint, input_ids, input_mask, segment_ids):
  """The original's ``create_model`` (is_training=False) restored from a Google checkpoint:
  start and end logits [B,S] for the [B,S] inputs."""
  modeling = google("modeling")
  graph = tf.Graph()
  with graph.as_default():
    inputs = [tf1.constant(np.asarray(x, np.int32)) for x in (input_ids, input_mask,
                                                              segment_ids)]
    start, end = run_squad.create_model(modeling.BertConfig.from_dict(config_dict), False,
                                        *inputs, use_one_hot_embeddings=False)
    saver = tf1.train.Saver(tf1.global_variables())
    with tf1.Session(graph=graph) as sess:
      saver.restore(sess, checkpoint)
      return sess.run([start, end])


@pytest.fixture(scope="module")
def official_v1():
  spec = importlib.util.spec_from_file_location(
      "official_evaluate_v1_1", SQUAD_FIXTURES / "official_evaluate_v1_1.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


# === The loss ===

def test_loss_is_the_originals(run_squad, tmp_path):
  """Logits equal the original's create_model (given our Google-format checkpoint); the loss
  is its formula, (mean start nll + mean end nll) / 2, computed here by hand from them."""
  config_dict = google_models.tiny_config_dict(hidden_dropout_prob=0.0,
                                               attention_probs_dropout_prob=0.0)
  keras.utils.set_random_seed(0)
  task = squad.SquadTask(BertConfig.from_dict(config_dict))
  model = task.build_model()
  rng = np.random.RandomState(0)
  batch, seq_length = 5, 12
  features = google_models.random_pretraining_features(config_dict, batch, seq_length)
  features = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  features["start_positions"] = rng.randint(0, seq_length, size=batch).astype(np.int32)
  features["end_positions"] = rng.randint(0, seq_length, size=batch).astype(np.int32)
  # Non-zero head weights: the default bias is 0 and would hide a transposition.
  model.span.set_weights([w + 0.1 * rng.randn(*w.shape) for w in model.span.get_weights()])
  outputs = model(features, training=False)
  ckpt = checkpoints.save_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))

  start, end = _google_logits(run_squad, config_dict, ckpt, features["input_ids"],
                              features["input_mask"], features["segment_ids"])
  np.testing.assert_allclose(outputs["start_logits"], start, atol=1e-5)
  np.testing.assert_allclose(outputs["end_logits"], end, atol=1e-5)

  def mean_nll(logits, positions):
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - logits.max(-1, keepdims=True)
    return -log_probs[np.arange(batch), positions].mean()
  expected = (mean_nll(start.astype(np.float64), features["start_positions"]) +
              mean_nll(end.astype(np.float64), features["end_positions"])) / 2
  numerators = task.loss_numerators(outputs, features)
  denominators = task.loss_denominators(features)
  loss = sum(float(numerators[k] / denominators[k]) for k in numerators)
  np.testing.assert_allclose(loss, expected, rtol=1e-5)
  metrics = task.eval_metrics(outputs, features)
  np.testing.assert_allclose(float(metrics["loss"][0] / metrics["loss"][1]), expected,
                             rtol=1e-5)
  for name, logits in (("start", start), ("end", end)):
    correct = (logits.argmax(-1) == features[f"{name}_positions"]).sum()
    assert float(metrics[f"{name}_accuracy"][0]) == correct
    assert float(metrics[f"{name}_accuracy"][1]) == batch


# === End to end, SQuAD v1.1 ===

# int(5 steps * 0.9) = 4 warmup steps (the default 0.1 gives int(0.5) = 0: no warmup to see).
WARMUP_PROPORTION = 0.9


@pytest.fixture(scope="module")
def v1_run(tmp_path_factory, uncased_vocab):
  """Train 5 steps on the real sample, predict it, score it."""
  tmp = tmp_path_factory.mktemp("v1")
  train_file = training_copy(V1_SAMPLE, tmp / "train.json")
  lines = []
  with fine_tuning_schedule.optimizers_made() as optimizers:
    results = squad.run_squad(
        _config(), str(uncased_vocab), str(tmp / "out"), tf.distribute.get_strategy(),
        train_file=str(train_file), predict_file=str(V1_SAMPLE), do_train=True,
        do_predict=True, do_eval=True, train_batch_size=2, num_train_epochs=2.0,
        predict_batch_size=4, learning_rate=1e-3, warmup_proportion=WARMUP_PROPORTION,
        steps_per_loop=2, save_checkpoints_steps=2, seed=1, n_best_size=10,
        max_answer_length=20, progress=lines.append, **LENGTHS)
  results["optimizers"] = optimizers
  return tmp, results, lines


def test_v1_steps_and_train_features_as_the_original(v1_run, run_squad, google_tokenizer):
  tmp, results, lines = v1_run
  # 5 questions / batch 2 x 2 epochs: int(5.0) = 5 steps, as the original computes them.
  assert results["train"]["global_step"] == 5
  assert tf.train.latest_checkpoint(str(tmp / "out")).endswith("ckpt-5")
  assert "examples 5 (0 skipped)" in lines[0] and "steps 5 (warmup 4)" in lines[0]
  # The learning rates of the original's formulas: its schedule at every step, and what the
  # optimizer read after steps 2 and 4 (the progress lines).
  num_train_steps, num_warmup_steps = fine_tuning_schedule.steps(5, 2, 2.0, WARMUP_PROPORTION)
  assert (num_train_steps, num_warmup_steps) == (5, 4)
  expected = [fine_tuning_schedule.learning_rate(step, 1e-3, 5, 4) for step in range(6)]
  (optimizer,) = results["optimizers"]
  schedule = fine_tuning_schedule.schedule_of(optimizer)
  np.testing.assert_allclose([float(schedule(step)) for step in range(6)], expected,
                             rtol=1e-6, atol=1e-12)
  assert fine_tuning_schedule.progress_learning_rates(lines) == {
      step: pytest.approx(expected[step], rel=1e-3) for step in (2, 4, 5)}
  # The original: read, shuffle with random.Random(12345), convert. Same records, same order.
  with original_flags(version_2_with_negative=False):
    examples = run_squad.read_squad_examples(str(tmp / "train.json"), is_training=True)
  random.Random(12345).shuffle(examples)
  expected = []
  run_squad.convert_examples_to_features(examples, google_tokenizer, is_training=True,
                                         output_fn=expected.append, **LENGTHS)
  got = _read_records(tmp / "out" / "train.tf_record", True, LENGTHS["max_seq_length"])
  assert len(got) == len(expected) > 5  # some questions need several doc spans
  for record, feature in zip(got, expected):
    assert record["unique_ids"] == feature.unique_id
    assert list(record["input_ids"]) == feature.input_ids
    assert list(record["segment_ids"]) == feature.segment_ids
    assert (record["start_positions"], record["end_positions"]) == (
        feature.start_position, feature.end_position)


def test_v1_predictions_are_the_originals_for_the_fine_tuned_checkpoint(
    v1_run, run_squad, google_tokenizer):
  """The Google-format checkpoint written after training, run through the original's
  create_model, features and write_predictions, gives our predictions.json."""
  tmp, _, _ = v1_run
  out = tmp / "out"
  google_dir = out / "google"
  for name in ("bert_config.json", "vocab.txt", "bert_model.ckpt.index", "checkpoint"):
    assert (google_dir / name).exists()
  assert json.loads((google_dir / "bert_config.json").read_text())["vocab_size"] == 30522
  with original_flags(version_2_with_negative=False, null_score_diff_threshold=0.0,
                      verbose_logging=False):
    examples = run_squad.read_squad_examples(str(V1_SAMPLE), is_training=False)
    features = []
    run_squad.convert_examples_to_features(examples, google_tokenizer, is_training=False,
                                           output_fn=features.append, **LENGTHS)
    start, end = _google_logits(run_squad, CONFIG, str(google_dir / "bert_model.ckpt"),
                                *([getattr(f, name) for f in features]
                                  for name in ("input_ids", "input_mask", "segment_ids")))
    results = [run_squad.RawResult(f.unique_id, list(map(float, s)), list(map(float, e)))
               for f, s, e in zip(features, start, end)]
    ref = tmp / "original"
    ref.mkdir()
    run_squad.write_predictions(examples, features, results, 10, 20, True,
                                str(ref / "predictions.json"), str(ref / "nbest.json"),
                                str(ref / "null_odds.json"))
  ours = json.loads((out / "predictions.json").read_text())
  assert ours == json.loads((ref / "predictions.json").read_text())
  assert list(ours) == [qa["id"] for p in json.loads(V1_SAMPLE.read_text())["data"][0][
      "paragraphs"] for qa in p["qas"]]
  nbest, ref_nbest = (json.loads((out / "nbest_predictions.json").read_text()),
                      json.loads((ref / "nbest.json").read_text()))
  assert list(nbest) == list(ref_nbest)
  for qid in nbest:
    assert [e["text"] for e in nbest[qid]] == [e["text"] for e in ref_nbest[qid]]
    for ours_entry, ref_entry in zip(nbest[qid], ref_nbest[qid]):
      assert sorted(ours_entry) == ["end_logit", "probability", "start_logit", "text"]
      for key in ("probability", "start_logit", "end_logit"):
        np.testing.assert_allclose(ours_entry[key], ref_entry[key], atol=1e-5)
  assert not (out / "null_odds.json").exists()


def test_v1_scores_are_the_official_scripts(v1_run, official_v1):
  tmp, results, _ = v1_run
  out = tmp / "out"
  dataset = json.loads(V1_SAMPLE.read_text())["data"]
  expected = official_v1.evaluate(dataset, json.loads((out / "predictions.json").read_text()))
  scores = json.loads((out / "eval_results.json").read_text())
  assert scores == pytest.approx(expected) and set(scores) == set(expected)
  assert results["eval"] == scores
  lines = (out / "eval_results.txt").read_text().splitlines()
  # Not the original's float32 text: the official evaluation's numbers, whole.
  assert lines == [f"exact_match = {scores['exact_match']!r}", f"f1 = {scores['f1']!r}",
                   "global_step = 5"]


def test_v1_predict_only_from_the_google_checkpoint(v1_run, uncased_vocab):
  """Predicting again from the exported Google-format checkpoint (no training) gives the
  same predictions.json, byte for byte."""
  tmp, _, _ = v1_run
  lines = []
  results = squad.run_squad(
      _config(), str(uncased_vocab), str(tmp / "again"), tf.distribute.get_strategy(),
      predict_file=str(V1_SAMPLE), do_predict=True,
      init_checkpoint=str(tmp / "out" / "google" / "bert_model.ckpt"), predict_batch_size=8,
      n_best_size=10, max_answer_length=20, progress=lines.append, **LENGTHS)
  assert "train" not in results and lines[0].startswith("loaded ")
  assert ((tmp / "again" / "predictions.json").read_bytes() ==
          (tmp / "out" / "predictions.json").read_bytes())


def test_training_on_from_other_examples_is_refused(v1_run, uncased_vocab):
  """A copy of the trained folder, trained on (more epochs) from a --train_file with one
  question changed: refused with one line (the checkpoints would go on through other
  examples than theirs); the same questions from another path train on."""
  tmp, _, _ = v1_run
  folder = tmp / "on"
  shutil.copytree(tmp / "out", folder)
  squad_json = json.loads((tmp / "train.json").read_text(encoding="utf-8"))
  squad_json["data"][0]["paragraphs"][0]["qas"][0]["question"] += " again"
  changed = tmp / "changed.json"
  changed.write_text(json.dumps(squad_json, ensure_ascii=False), encoding="utf-8")
  moved = tmp / "moved.json"
  shutil.copy(tmp / "train.json", moved)
  train_on = dict(do_train=True, train_batch_size=2, num_train_epochs=4.0, learning_rate=1e-3,
                  warmup_proportion=WARMUP_PROPORTION, steps_per_loop=2,
                  save_checkpoints_steps=2, seed=1, **LENGTHS)
  with pytest.raises(BertTfError) as error:
    squad.run_squad(_config(), str(uncased_vocab), str(folder), tf.distribute.get_strategy(),
                    train_file=str(changed), **train_on)
  assert str(error.value).startswith(
      f"--output_dir {str(folder)!r} holds checkpoints trained on other examples than "
      f"{changed}'s: resumed")
  assert tf.train.latest_checkpoint(str(folder)).endswith("ckpt-5")
  results = squad.run_squad(_config(), str(uncased_vocab), str(folder),
                            tf.distribute.get_strategy(), train_file=str(moved), **train_on)
  assert results["train"]["global_step"] == 10


def test_predict_only_rerun_removes_the_earlier_runs_other_files(v1_run, uncased_vocab):
  """A predict-only v1.1 run over a folder whose earlier runs left scores (--do_eval) and
  null odds (a v2.0 run): those are not of the new predictions, and go, with a line."""
  tmp, _, _ = v1_run
  again = tmp / "rerun"
  shutil.copytree(tmp / "out", again)
  (again / "null_odds.json").write_text('{"q": 1.0}')
  assert (again / "eval_results.json").exists() and (again / "eval_results.txt").exists()
  lines = []
  squad.run_squad(
      _config(), str(uncased_vocab), str(again), tf.distribute.get_strategy(),
      predict_file=str(V1_SAMPLE), do_predict=True, predict_batch_size=8, n_best_size=10,
      max_answer_length=20, progress=lines.append, **LENGTHS)
  assert ((again / "predictions.json").read_bytes() ==
          (tmp / "out" / "predictions.json").read_bytes())
  for name in ("null_odds.json", "eval_results.json", "eval_results.txt"):
    assert not (again / name).exists(), name
  assert ("removed null_odds.json, eval_results.json, eval_results.txt of an earlier run "
          "(not of these predictions)") in lines


def test_v1_evaluation_during_training(v1_run, uncased_vocab):
  """The same run with --eval_during_training: the same training (predictions.json byte-equal),
  the official scores at steps 2, 4 and 5, the last equal to --do_eval's of the same weights,
  best/ = the first step with the highest f1, and --best_metric a one-line error when the
  evaluation has no such score."""
  from bert_tf.training import eval_during_training  # pylint: disable=import-outside-toplevel
  tmp, results, _ = v1_run
  out = tmp / "during"
  args = dict(train_file=str(tmp / "train.json"), predict_file=str(V1_SAMPLE), do_train=True,
              do_predict=True, do_eval=True, train_batch_size=2, num_train_epochs=2.0,
              predict_batch_size=4, learning_rate=1e-3, warmup_proportion=WARMUP_PROPORTION,
              steps_per_loop=2, save_checkpoints_steps=2, seed=1, n_best_size=10,
              max_answer_length=20, eval_during_training=True, **LENGTHS)
  during = squad.run_squad(_config(), str(uncased_vocab), str(out),
                           tf.distribute.get_strategy(), **args)
  assert during["train"] == results["train"]
  assert (out / "predictions.json").read_bytes() == (tmp / "out" / "predictions.json").read_bytes()
  history = eval_during_training.read_history(str(out))
  assert [e["global_step"] for e in history] == [2, 4, 5]
  assert dict(history[-1], global_step=None) == dict(during["eval"], global_step=None,
                                                     eval_data=history[0]["eval_data"])
  best = max(history, key=lambda e: e["f1"])  # the first of equals, as "strictly better"
  assert eval_during_training.best_step(str(out / "best")) == best["global_step"]
  assert not list(out.glob("**/bert_tf-squad-eval-*"))
  with pytest.raises(BertTfError, match="--best_metric exact: the SQuAD v1.1 evaluation has "
                                        "exact_match, f1"):
    squad.run_squad(_config(), str(uncased_vocab), str(tmp / "bad"),
                    tf.distribute.get_strategy(), **dict(args, best_metric="exact"))
  with pytest.raises(BertTfError, match="--eval_during_training scores predictions of "
                                        "--predict_file"):
    squad.run_squad(_config(), str(uncased_vocab), str(tmp / "bad"),
                    tf.distribute.get_strategy(),
                    **dict(args, predict_file=None, do_predict=False, do_eval=False))


# === SQuAD v2.0, messy input ===

def _messy_v2_train_file(path):
  """The hand-made v2.0 file plus: a wrong answer_start, an empty paragraph, a question far
  longer than max_seq_length."""
  squad_json = json.loads(V2_HANDMADE.read_text(encoding="utf-8"))
  paragraphs = squad_json["data"][0]["paragraphs"]
  context = paragraphs[0]["context"]
  paragraphs.append({"context": context, "qas": [
      {"id": "bad_offset", "question": "Who?", "is_impossible": False,
       "answers": [{"text": "Robert Stevenson", "answer_start": 3}]},
      {"id": "long_question", "question": "why " * 300, "is_impossible": False,
       "answers": [{"text": "Robert Stevenson", "answer_start": 150}]}]})
  paragraphs.append({"context": "", "qas": [
      {"id": "empty_context", "question": "What?", "is_impossible": True, "answers": []}]})
  path.write_text(json.dumps(squad_json, ensure_ascii=False), encoding="utf-8")
  return path


def test_v2_messy_input_end_to_end(tmp_path, uncased_vocab):
  train_file = _messy_v2_train_file(tmp_path / "train.json")
  predict_file = tmp_path / "predict.json"
  predict_json = json.loads(train_file.read_text(encoding="utf-8"))
  predict_file.write_text(json.dumps(predict_json, ensure_ascii=False), encoding="utf-8")
  lines = []
  results = squad.run_squad(
      _config(), str(uncased_vocab), str(tmp_path / "out"), tf.distribute.get_strategy(),
      train_file=str(train_file), predict_file=str(predict_file), do_train=True,
      do_predict=True, do_eval=True, version_2_with_negative=True, train_batch_size=8,
      num_train_epochs=1.0, predict_batch_size=8, seed=2, progress=lines.append,
      steps_per_loop=5, export_dir=str(tmp_path / "qa"), **LENGTHS)
  qids = [qa["id"] for a in predict_json["data"] for p in a["paragraphs"] for qa in p["qas"]]
  # 25 + 3 questions, "bad_offset" skipped (its text is not at answer_start): int(27/8) = 3.
  assert "examples 27 (1 skipped)" in lines[0]
  assert results["train"]["global_step"] == 3
  out = tmp_path / "out"
  predictions = json.loads((out / "predictions.json").read_text(encoding="utf-8"))
  null_odds = json.loads((out / "null_odds.json").read_text())
  assert list(predictions) == list(null_odds) == qids
  # The v2.0 rule: no answer exactly where null - best non-null > threshold (0.0).
  for qid in qids:
    assert (predictions[qid] == "") == (null_odds[qid] > 0.0), qid
  assert predictions["empty_context"] == ""
  assert null_odds["empty_context"] == postprocess.NO_NON_NULL_SCORE_DIFF
  scores = json.loads((out / "eval_results.json").read_text())
  has_answer = [q for q in qids if q not in ("h04", "h05", "h10", "u03", "u08", "u13",
                                             "empty_context")]
  assert scores["total"] == len(qids)
  assert scores["HasAns_total"] == len(has_answer)
  assert scores["NoAns_total"] == len(qids) - len(has_answer)
  # Unanswerable questions score 1 exactly when predicted "", answerable ones never then.
  no_ans_right = sum(predictions[q] == "" for q in qids if q not in has_answer)
  assert scores["NoAns_exact"] == pytest.approx(
      100.0 * no_ans_right / scores["NoAns_total"])
  for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
    assert key in scores
  # The exported question answerer has the run's settings: it answers as predictions.json
  # (the English questions, where the text mapping is exact).
  assert results["export"] == str(tmp_path / "qa")
  answerer = tf.saved_model.load(results["export"])
  english = [(qa["id"], qa["question"], p["context"])
             for p in predict_json["data"][0]["paragraphs"][:2] for qa in p["qas"]]
  served = answerer(tf.constant([q for _, q, _ in english]),
                    tf.constant([c for _, _, c in english]))
  for (qid, _, _), text in zip(english, served["answer_text"].numpy()):
    assert " ".join(text.decode("utf-8").split()) == predictions[qid], qid


# === Prediction on two replicas ===

def test_predict_two_replicas_equal_one_device(tmp_path, uncased_vocab):
  cpus = tf.config.list_logical_devices("CPU")
  if len(cpus) < 2:
    pytest.skip("needs 2 logical CPUs (tests/conftest.py configures them)")
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  examples = squad_examples.read_squad_examples(str(V1_SAMPLE), False).examples
  record = str(tmp_path / "eval.tf_record")
  features = squad.write_predict_features(examples, tokenizer, record, batch_size=4,
                                          **LENGTHS)
  num_records = len(_read_records(record, False, LENGTHS["max_seq_length"]))
  assert num_records % 4 == 0 and num_records - len(features) < 4
  task = squad.SquadTask(_config())
  keras.utils.set_random_seed(3)
  model = task.build_model()
  one = squad.predict(tf.distribute.get_strategy(), model, record, 96, batch_size=4)
  mirrored = distribution.mirrored_strategy(
      [d.name for d in cpus[:2]], cross_device_ops=tf.distribute.ReductionToOneDevice())
  with mirrored.scope():
    model_2 = task.build_model()
  model_2.set_weights(model.get_weights())
  two = squad.predict(mirrored, model_2, record, 96, batch_size=4)
  assert sorted(r.unique_id for r in one) == [f.unique_id for f in features]
  by_id = {r.unique_id: r for r in two}
  assert sorted(by_id) == [f.unique_id for f in features]
  for result in one:
    np.testing.assert_allclose(by_id[result.unique_id].start_logits, result.start_logits,
                               atol=1e-5)
    np.testing.assert_allclose(by_id[result.unique_id].end_logits, result.end_logits,
                               atol=1e-5)


# === The training-feature cache ===

def test_train_features_cached_until_something_changes(tmp_path, uncased_vocab):
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  examples = squad_examples.read_squad_examples(
      str(training_copy(V1_SAMPLE, tmp_path / "train.json")), True).examples
  path = str(tmp_path / "train.tf_record")
  first = squad.cached_train_features(examples, tokenizer, path, **LENGTHS)
  assert not first["cached"] and first["num_features"] == len(
      _read_records(path, True, LENGTHS["max_seq_length"]))
  os.utime(path, (1, 1))
  again = squad.cached_train_features(examples, tokenizer, path, **LENGTHS)
  assert again["cached"] and os.stat(path).st_mtime == 1
  # Damaged cached records (a changed byte) are written again, not reused to fail every run.
  sound = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(sound[:100] + bytes([sound[100] ^ 1]) + sound[101:])
  redone = squad.cached_train_features(examples, tokenizer, path, **LENGTHS)
  assert not redone["cached"] and open(path, "rb").read() == sound
  os.utime(path, (1, 1))
  for changed_examples, lengths in ((examples[::-1], LENGTHS),
                                    (examples, dict(LENGTHS, doc_stride=40))):
    redone = squad.cached_train_features(changed_examples, tokenizer, path, **lengths)
    assert not redone["cached"] and os.stat(path).st_mtime != 1
    os.utime(path, (1, 1))
  assert sorted(os.listdir(tmp_path)) == ["train.json", "train.tf_record",
                                          "train.tf_record.meta.json"]


# === Bad input ===

@pytest.mark.parametrize("overrides, message", [
    ({"do_train": False, "do_predict": False}, "at least one of --do_train or --do_predict"),
    ({"do_train": False, "do_predict": False, "export_dir": "x", "n_best_size": 0},
     "--n_best_size must be at least 1"),
    ({"do_predict": False, "do_eval": True}, "--do_eval scores the predictions of --do_predict"),
    ({"train_file": None}, "--do_train needs --train_file"),
    ({"train_file": "missing.json"}, "SQuAD file not found (--train_file): "),
    ({"max_seq_length": 256}, "--max_seq_length 256 exceeds max_position_embeddings 128"),
    ({"max_seq_length": 27}, "max_seq_length (27) must be greater than max_query_length (24)"),
    ({"doc_stride": 0}, "doc_stride (0) must be at least 1"),
    ({"train_batch_size": 0}, "--train_batch_size 0 must be a positive multiple of 1"),
    ({"init_checkpoint": "nowhere/bert_model.ckpt"}, "checkpoint not found"),
    ({"init_checkpoint": "x/cased_L-12_H-768_A-12/bert_model.ckpt"},
     "--do_lower_case=True does not match"),
    ({"num_train_epochs": 0.1}, "gives no training step"),
    ({"train_file": "bad_json"}, "not valid JSON"),
    ({"train_file": "bad_shape"}, "data[0] has no 'paragraphs'"),
])
def test_bad_input_one_line_errors(tmp_path, uncased_vocab, overrides, message):
  (tmp_path / "bad_json").write_text('{"data": [')
  (tmp_path / "bad_shape").write_text('{"data": [{"title": "x"}]}')
  kwargs = dict(train_file=str(training_copy(V1_SAMPLE, tmp_path / "train.json")),
                predict_file=str(V1_SAMPLE), do_train=True, do_predict=True,
                train_batch_size=2, **LENGTHS)
  kwargs.update(overrides)
  if kwargs["train_file"] in ("bad_json", "bad_shape", "missing.json"):
    kwargs["train_file"] = str(tmp_path / kwargs["train_file"])
  with pytest.raises(BertTfError) as error:
    squad.run_squad(_config(), str(uncased_vocab), str(tmp_path / "out"),
                    tf.distribute.get_strategy(), **kwargs)
  assert message in str(error.value) and "\n" not in str(error.value)


def test_script_bad_input_exits_1_with_one_line(tmp_path, uncased_vocab):
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps(CONFIG))
  process = warm.run(
      [sys.executable, str(REPO / "run_squad.py"), f"--vocab_file={uncased_vocab}",
       f"--bert_config_file={config}", f"--output_dir={tmp_path / 'out'}", "--do_train",
       f"--train_file={tmp_path / 'nope.json'}"],
      capture_output=True, text=True, cwd=str(REPO), timeout=600)
  assert process.returncode == 1
  assert "Traceback" not in process.stderr
  assert process.stderr.strip().splitlines()[-1] == (
      f"run_squad.py: error: SQuAD file not found (--train_file): "
      f"'{tmp_path / 'nope.json'}'")


def test_output_folders_load_alone(v1_run, capsys):
  """The output folder and its google/ export open with bert_tf.load / --model alone (config
  and vocab written beside the weights); no masked-LM head, and fill-mask says so."""
  from tests.reference import loadable  # pylint: disable=import-outside-toplevel
  out = v1_run[0] / "out"
  loadable.assert_folder_loads_alone(out, out / "google", has_masked_lm=False)
  loadable.assert_fill_mask_names_missing_head(str(out / "google"), capsys)
