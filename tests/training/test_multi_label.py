"""Multi-label classification (run_classifier.py --multi_label): the metrics against
scikit-learn, the model and its loss against transformers' BertForSequenceClassification with
problem_type="multi_label_classification" on the real MiniLM weights, both file layouts of the
labels, bad input, and run_classifier.py end to end.

The references (tests/fixtures/multilabel/reference.json, logits.npz) were made by
tests/fixtures/make_multilabel_reference.py (scikit-learn, transformers).
"""

import io
import json
import random
import shutil
import sys

import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

import bert_tf
from bert_tf import classifier_labels, metrics, tokenization
from bert_tf.__main__ import main as cli_main
from bert_tf.data import classifier_features, glue
from bert_tf.errors import BertTfError
from bert_tf.export import saved_models
from bert_tf.modeling import BertClassifier, checkpoints
from bert_tf.training import classifier
from tests import warm
from tests.conftest import FIXTURES

HERE = FIXTURES / "multilabel"
REPO = FIXTURES.parents[1]
REFERENCE = json.loads((HERE / "reference.json").read_text(encoding="utf-8"))
LABELS = REFERENCE["labels"]


# === Metrics ===

@pytest.mark.parametrize("case", REFERENCE["metrics"], ids=lambda c: c["name"])
def test_metrics_equal_scikit_learn(case):
  task = glue.get_processor("user", labels=[f"l{i}" for i in range(len(case["gold"][0]))],
                            multi_label=True).task
  values = metrics.task_metrics(task, case["gold"], case["predicted"], weights=case["weights"])
  for name in glue.MULTI_LABEL_METRICS:
    assert values["eval_" + name] == pytest.approx(case[name], abs=1e-12), name
  assert [values[f"eval_f1_{name}"] for name in task.labels] == pytest.approx(case["label_f1"])
  # Logits: a positive logit (a probability above 0.5) is a predicted label.
  logits = np.where(np.asarray(case["predicted"]) == 1, 0.3, -0.4).astype(np.float32)
  assert metrics.task_metrics(task, case["gold"], logits, weights=case["weights"]) == values


def test_metrics_by_hand():
  gold = [[1, 1, 0], [0, 0, 0]]
  predicted = [[1, 0, 1], [0, 0, 0]]
  # TP 1, FP 1, FN 1: micro F1 2/4; one of two label sets exactly right; 4 of 6 cells right.
  assert metrics.micro_f1(gold, predicted) == 0.5
  assert metrics.subset_accuracy(gold, predicted) == 0.5
  assert metrics.label_accuracy(gold, predicted) == pytest.approx(4 / 6)
  assert metrics.label_f1(gold, predicted) == [1.0, 0.0, 0.0]
  assert metrics.micro_f1(gold, predicted, weights=[0, 1]) == 0.0  # nothing left to find


# === Reading the labels ===

def _write(path, rows, delimiter="\t"):
  path.write_text("".join(delimiter.join(row) + "\n" for row in rows), encoding="utf-8")


def test_label_column_and_label_discovery(tmp_path):
  _write(tmp_path / "train.tsv", [["text_a", "label"], ["a b", "threat,toxic"], ["c", ""],
                                  ["d", " insult "]])
  processor = glue.get_processor("user", data_dir=str(tmp_path), multi_label=True)
  assert processor.get_labels() == ["insult", "threat", "toxic"]  # sorted, as single-label
  examples = processor.get_examples(str(tmp_path), "train")
  assert [e.label for e in examples] == [("threat", "toxic"), (), ("insult",)]
  # CSV quoting keeps the separator inside the field; another separator.
  (tmp_path / "train.tsv").unlink()
  (tmp_path / "train.csv").write_text('text_a,label\n"x, y",insult|toxic\nz,\n',
                                      encoding="utf-8")
  processor = glue.get_processor("user", data_dir=str(tmp_path), labels=LABELS,
                                 multi_label=True, label_separator="|")
  assert [(e.text_a, e.label) for e in processor.get_examples(str(tmp_path), "train")] == [
      ("x, y", ("toxic", "insult")), ("z", ())]  # in label order


def test_label_columns_layout(tmp_path):
  """Kaggle's Jigsaw layout: a 0/1 column per label, other columns ignored."""
  _write(tmp_path / "dev.csv", [["id", "text_a", "threat", "toxic", "insult"],
                                ["7", "hello", "0", "1", "1"], ["8", "bye", "0", "0", "0"]],
         delimiter=",")
  (tmp_path / "labels.txt").write_text("toxic\ninsult\nthreat\n")
  processor = glue.get_processor("user", data_dir=str(tmp_path), multi_label=True)
  assert [e.label for e in processor.get_examples(str(tmp_path), "dev")] == [
      ("toxic", "insult"), ()]


@pytest.mark.parametrize("rows, labels, message", [
    ([["text_a", "label"], ["a", "toxic,rude"]], LABELS,
     r"train\.tsv:2: unknown label 'rude' for task user"),
    ([["text_a", "toxic", "insult", "threat"], ["a", "1", "2", "0"]], LABELS,
     r"train\.tsv:2: column 'insult' holds '2'; a label column holds 0 or 1"),
    ([["text_a", "toxic", "insult"], ["a", "1", "0"]], LABELS,
     r"train\.tsv:1: .* lacks the 0/1 column\(s\) of label\(s\) \['threat'\]"),
    ([["text_a", "toxic", "insult", "threat"], ["a", "1", "0", "0"]], None,
     r"train\.tsv:1: .* lacks column\(s\) \['label'\] .*0/1 column per label named by "
     r"--labels or labels\.txt"),
])
def test_bad_labels_name_file_and_line(tmp_path, rows, labels, message):
  _write(tmp_path / "train.tsv", rows)
  processor = glue.get_processor("user", data_dir=str(tmp_path), labels=labels,
                                 multi_label=True)
  with pytest.raises(BertTfError, match=message):
    processor.get_examples(str(tmp_path), "train")


def test_refusals():
  with pytest.raises(BertTfError, match="--multi_label is for a user task"):
    glue.get_processor("mrpc", multi_label=True)
  with pytest.raises(BertTfError, match="regression .* or multi-label"):
    glue.get_processor("user", labels=LABELS, multi_label=True, is_regression=True)


def test_features_are_multi_hot(uncased_vocab, tmp_path):
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  examples = [glue.InputExample("t-0", "hi", label=("toxic", "threat")),
              glue.InputExample("t-1", "ho", label=()), glue.InputExample("t-2", "hu")]
  path = str(tmp_path / "eval.tf_record")
  classifier_features.cached_convert_examples_to_features(
      classifier_features.pad_to_batch(examples, 2), LABELS, 8, tokenizer, path,
      multi_label=True)
  spec = classifier_features.feature_spec(8, multi_labels=3)
  batches = list(classifier_features.make_dataset(path, 8, 2, False, True, spec=spec))
  labels = np.concatenate([b["label_ids"].numpy() for b in batches])
  np.testing.assert_array_equal(labels, [[1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
  assert labels.dtype == np.float32
  real = np.concatenate([b["is_real_example"].numpy() for b in batches])
  np.testing.assert_array_equal(real, [1, 1, 1, 0])
  # The single-label cache of the same examples is another file's worth.
  assert (classifier_features.features_fingerprint(examples, LABELS, 8, tokenizer,
                                                   multi_label=True) !=
          classifier_features.features_fingerprint(examples, LABELS, 8, tokenizer))


# === The model and its loss ===

def test_logits_and_loss_equal_transformers(minilm_path, uncased_vocab, tmp_path):
  """A transformers multi-label BertForSequenceClassification folder loads (head included)
  and gives its logits; the task's loss is its BCEWithLogitsLoss."""
  folder = tmp_path / "hf"
  folder.mkdir()
  shutil.copy(minilm_path / "config.json", folder / "config.json")
  tensors = safetensors.numpy.load_file(str(minilm_path / "model.safetensors"))
  reference = np.load(HERE / "logits.npz")
  tensors["classifier.weight"], tensors["classifier.bias"] = reference["weight"], reference["bias"]
  safetensors.numpy.save_file(tensors, str(folder / "model.safetensors"))

  config = checkpoints.load_config(str(minilm_path / "config.json"))
  model = BertClassifier(config, len(LABELS))
  report = checkpoints.load_weights(model, str(folder))
  assert "output_weights" not in str(report).split("missing")[-1]
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  features = [classifier_features.convert_single_example(
      glue.InputExample(f"t-{i}", t["text"], label=tuple(t["labels"])), LABELS,
      REFERENCE["max_seq_length"], tokenizer, multi_label=True)
      for i, t in enumerate(REFERENCE["texts"])]
  assert [f.input_ids for f in features] == REFERENCE["input_ids"]
  batch = {name: tf.constant([getattr(f, name) for f in features])
           for name in ("input_ids", "input_mask", "segment_ids")}
  batch["label_ids"] = tf.constant([f.label_id for f in features], tf.float32)
  np.testing.assert_array_equal(batch["label_ids"].numpy(), reference["labels"])
  logits = model(batch, training=False).numpy()
  np.testing.assert_allclose(logits, reference["logits"], atol=2e-4)
  task = classifier.ClassifierTask(config, len(LABELS), multi_label=True)
  loss = (task.loss_numerators(logits, batch)["classifier"] /
          task.loss_denominators(batch)["classifier"]).numpy()
  assert loss == pytest.approx(float(reference["loss"]), abs=1e-5)


# === run_classifier.py ===

COLOURS = ["red", "green", "blue"]
FILLER = "the a of house car tree river city dog cat book road".split()


def _colour_rows(count, seed):
  """Sentences of filler words and some colour words; their labels: the colours in them."""
  rng = random.Random(seed)
  rows = []
  for _ in range(count):
    colours = [c for c in COLOURS if rng.random() < 0.5]
    words = rng.sample(FILLER, 2) + colours
    rng.shuffle(words)
    rows.append((" ".join(words), colours))
  return rows


def _data_dir(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  train = "text_a,label\n" + "".join(
      f'{text},"{",".join(colours)}"\n' for text, colours in _colour_rows(48, 1))
  (data / "train.csv").write_text(train, encoding="utf-8")
  dev = _colour_rows(20, 2)
  _write(data / "dev.tsv", [["text_a", "id", *COLOURS]] + [
      [text, str(i), *("1" if c in colours else "0" for c in COLOURS)]
      for i, (text, colours) in enumerate(dev)])
  _write(data / "test.tsv", [["text_a"]] + [[text] for text, _ in dev])
  return data, dev


def test_run_classifier_multi_label(minilm_path, tmp_path):
  """The real MiniLM learns which colour words a sentence holds (18 steps: micro F1 1.0 on
  dev; a tiny BERT from scratch needs far more); test_results.tsv holds each label's sigmoid
  probability; the folder classifies with label sets, exports to transformers as a
  multi-label classifier, and its SavedModel serves the same probabilities."""
  data, dev = _data_dir(tmp_path)
  out = tmp_path / "out"
  command = [sys.executable, str(REPO / "run_classifier.py"), "--task_name=user",
             f"--data_dir={data}", f"--bert_config_file={minilm_path / 'config.json'}",
             f"--init_checkpoint={minilm_path}",
             f"--vocab_file={minilm_path / 'vocab.txt'}", f"--output_dir={out}",
             "--multi_label", "--labels=red,green,blue", "--max_seq_length=16", "--seed=1",
             "--do_train", "--do_eval", "--do_predict", "--train_batch_size=8",
             "--num_train_epochs=3", "--learning_rate=2e-4", "--save_checkpoints_steps=18",
             "--eval_during_training"]
  done = warm.run(command, capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "Traceback" not in done.stderr
  results = {k: float(v) for k, v in (line.split(" = ") for line in
                                      (out / "eval_results.txt").read_text().splitlines())}
  task = glue.get_processor("user", labels=COLOURS, multi_label=True).task
  assert set(results) == set(classifier.eval_result_keys(task)) | {"global_step"}
  assert results["eval_f1"] == 1.0 and results["eval_accuracy"] == 1.0, results
  history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
  assert [h["global_step"] for h in history] == [18]  # one save: the suite's time
  assert history[0]["eval_f1"] == results["eval_f1"]
  assert json.loads((out / "best" / "best.json").read_text())["metric"] == "eval_f1"
  assert json.loads((out / "classifier.json").read_text())["multi_label"] is True

  # test_results.tsv: each label's sigmoid probability; the test set is dev without labels.
  probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t", ndmin=2)
  gold = np.array([[c in colours for c in COLOURS] for _, colours in dev])
  np.testing.assert_array_equal(probabilities > 0.5, gold)
  assert metrics.micro_f1(gold, probabilities > 0.5) == 1.0

  bert = bert_tf.load(str(out / "google"))
  answers = bert.classify([text for text, _ in dev])
  assert [a["labels"] for a in answers] == [colours for _, colours in dev]
  np.testing.assert_allclose([[a["probabilities"][c] for c in COLOURS] for a in answers],
                             probabilities, atol=1e-5)
  printed = io.StringIO()
  assert cli_main(["classify", f"--model={out}", dev[0][0]], out=printed) == 0
  assert printed.getvalue().split()[0].split(",")[0].split(":")[0] == (dev[0][1] or ["-"])[0]

  bert_tf.export_hugging_face(str(out), str(tmp_path / "hf"))
  exported = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert exported["problem_type"] == "multi_label_classification"
  assert exported["id2label"] == {"0": "red", "1": "green", "2": "blue"}

  model = bert._classifier[0]  # pylint: disable=protected-access
  module = saved_models.ClassifierModule(model, str(minilm_path / "vocab.txt"), True, 16,
                                         labels=COLOURS, multi_label=True)
  served = module.serve_text(tf.constant([text for text, _ in dev]))
  np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
  np.testing.assert_array_equal(served["predictions"].numpy(), gold.astype(np.int32))
  assert classifier_labels.read(str(out / "best"))["multi_label"] is True


def test_classify_says_the_labels_whose_own_probability_is_above_one_half():
  """A multi-label classifier's answer: each label whose own sigmoid probability is above
  0.5, its probabilities the sigmoids (math.exp's); logits near 0, where a rule on another
  scale (x > 0.5 taken for a probability) answers otherwise (mutation audit round 2: a trained
  model's logits were far from 0 and hid it)."""
  import math  # pylint: disable=import-outside-toplevel
  from bert_tf.inference_heads import classification_result  # pylint: disable=import-outside-toplevel
  names = ["red", "green", "blue", "grey"]
  row = np.array([0.3, -0.3, 2.0, -1e-4], np.float32)
  got = classification_result(row, {"labels": names, "multi_label": True})
  sigmoid = [1.0 / (1.0 + math.exp(-float(x))) for x in row]
  assert got["labels"] == [n for n, p in zip(names, sigmoid) if p > 0.5] == ["red", "blue"]
  for name, p in zip(names, sigmoid):
    assert abs(got["probabilities"][name] - p) < 1e-12
  single = classification_result(row, {"labels": names})
  exps = [math.exp(float(x)) for x in row]
  assert single["label"] == "blue"
  assert abs(single["probability"] - exps[2] / sum(exps)) < 1e-6
