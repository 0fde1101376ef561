"""run_classifier.py end to end (subprocess), checked against Google's original run_classifier.

A tiny BERT is fine-tuned on the MRPC-layout fixture by the script; then Google's own
``create_model`` (bert-tensorflow 1.0.4, graph mode), restored from the Google-format
checkpoint the script wrote and fed by Google's own processor, tokenizer and
``convert_single_example``, must give the script's predictions (test_results.tsv), eval numbers
(eval_results.txt) and the exported SavedModel's logits.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import warm
from tests.conftest import FIXTURES
from tests.reference import google_models
from tests.reference.google_bert import google

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MRPC = FIXTURES / "glue" / "MRPC"
SEQ_LENGTH = 32
tf1 = tf.compat.v1


def _command(*args):
  return [sys.executable, os.path.join(ROOT, "run_classifier.py"), *args]


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture(scope="module")
def run(tmp_path_factory, uncased_vocab):
  tmp = tmp_path_factory.mktemp("mrpc")
  config_file = tmp / "bert_config.json"
  import json  # pylint: disable=import-outside-toplevel
  config_file.write_text(json.dumps(google_models.tiny_config_dict(vocab_size=30522)))
  # A Google-format init checkpoint with weights far from their initial values (the encoder
  # only, as Google's pretrained ones): fine-tuned predictions then differ between examples.
  from bert_tf.modeling import BertConfig, BertModel, checkpoints  # pylint: disable=import-outside-toplevel
  encoder = BertModel(BertConfig.from_json_file(str(config_file)))
  rng = np.random.RandomState(0)
  for variable in encoder.trainable_variables:
    base = 1.0 if variable.path.endswith("gamma") else 0.0
    variable.assign(base + rng.normal(0.0, 0.2, variable.shape).astype(np.float32))
  init_checkpoint = checkpoints.save_google_checkpoint(encoder, str(tmp / "init" /
                                                                   "bert_model.ckpt"))
  out = tmp / "out"
  result = warm.run(_command(
      f"--init_checkpoint={init_checkpoint}",
      "--task_name=MRPC", f"--data_dir={MRPC}", f"--vocab_file={uncased_vocab}",
      f"--bert_config_file={config_file}", f"--output_dir={out}", "--do_train=True",
      "--do_eval=True", "--do_predict=True", f"--max_seq_length={SEQ_LENGTH}",
      "--train_batch_size=2", "--eval_batch_size=4", "--predict_batch_size=4",
      "--learning_rate=1e-4", "--num_train_epochs=2", "--seed=5", "--iterations_per_loop=2",
      f"--export_dir={tmp / 'export'}"),
      capture_output=True, text=True, cwd=ROOT, timeout=600, env=_env())
  assert result.returncode == 0, result.stderr[-3000:]
  return {"out": out, "export": tmp / "export", "stdout": result.stdout,
          "vocab": str(uncased_vocab)}


def _google_outputs(run, split, batch_size=None, examples=None):
  """Google's processor -> tokenizer -> features -> create_model, restored from the script's
  Google-format checkpoint. Returns logits, probabilities, per_example_loss, label ids, ids.
  With batch_size, the examples are padded with the original's PaddingInputExample. With
  ``examples`` (the original's InputExamples), those rather than the split's."""
  run_classifier = google("run_classifier")
  modeling = google("modeling")
  tokenization = google("tokenization")
  processor = run_classifier.MrpcProcessor()
  if examples is None:
    examples = (processor.get_dev_examples(str(MRPC)) if split == "dev" else
                processor.get_test_examples(str(MRPC)))
  if batch_size:
    examples += [run_classifier.PaddingInputExample()] * (-len(examples) % batch_size)
  tokenizer = tokenization.FullTokenizer(run["vocab"], do_lower_case=True)
  features = [run_classifier.convert_single_example(i, e, processor.get_labels(), SEQ_LENGTH,
                                                    tokenizer)
              for i, e in enumerate(examples)]
  arrays = {name: np.array([getattr(f, name) for f in features], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids", "label_id",
                         "is_real_example")}
  google_dir = run["out"] / "google"
  graph = tf.Graph()
  with graph.as_default():
    config = modeling.BertConfig.from_json_file(str(google_dir / "bert_config.json"))
    # create_model reads `shape[-1].value` (TF1 Dimensions): TF1 shapes while it builds.
    tf1.disable_v2_tensorshape()
    try:
      loss, per_example_loss, logits, probabilities = run_classifier.create_model(
          config, False, tf1.constant(arrays["input_ids"]),
          tf1.constant(arrays["input_mask"]), tf1.constant(arrays["segment_ids"]),
          tf1.constant(arrays["label_id"]), 2, False)
    finally:
      tf1.enable_v2_tensorshape()
    with tf1.Session(graph=graph) as sess:
      tf1.train.Saver().restore(sess, str(google_dir / "bert_model.ckpt"))
      fetched = sess.run({"logits": logits, "probabilities": probabilities,
                          "per_example_loss": per_example_loss, "loss": loss})
  fetched.update(arrays)
  return fetched


def test_google_original_model_gives_the_same_predictions(run):
  google_test = _google_outputs(run, "test")
  rows = [[float(x) for x in line.split("\t")]
          for line in (run["out"] / "test_results.tsv").read_text().splitlines()]
  np.testing.assert_allclose(np.array(rows), google_test["probabilities"], atol=1e-6)
  submission = (run["out"] / "MRPC.tsv").read_text().splitlines()
  assert submission == ["index\tprediction"] + [
      f"{i}\t{label}" for i, label in enumerate(google_test["logits"].argmax(-1))]
  # The predictions are not all one class, and not uniform: training moved the model.
  assert np.ptp(google_test["probabilities"][:, 1]) > 1e-3

  # The exported SavedModel: ids in -> Google's logits; raw text pairs in -> the same.
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  exported = tf.saved_model.load(str(run["export"] / "classifier"))
  by_ids = exported.signatures["serve_ids"](
      input_word_ids=tf.constant(google_test["input_ids"]),
      input_mask=tf.constant(google_test["input_mask"]),
      input_type_ids=tf.constant(google_test["segment_ids"]))
  np.testing.assert_allclose(by_ids["logits"].numpy(), google_test["logits"], atol=1e-5)
  processor = google("run_classifier").MrpcProcessor()
  examples = processor.get_test_examples(str(MRPC))
  by_text = exported.signatures["serve_text_pair"](
      text_a=tf.constant([e.text_a for e in examples]),
      text_b=tf.constant([e.text_b for e in examples]))
  np.testing.assert_allclose(by_text["logits"].numpy(), google_test["logits"], atol=1e-5)
  assert [x.decode() for x in by_text["labels"].numpy()] == [
      processor.get_labels()[i] for i in google_test["logits"].argmax(-1)]
  assert sorted(os.listdir(run["export"])) == ["classifier", "encoder", "preprocessor"]


def test_eval_results_equal_the_originals_metric_fn(run):
  google_dev = _google_outputs(run, "dev", batch_size=4)
  results = dict(line.split(" = ")
                 for line in (run["out"] / "eval_results.txt").read_text().splitlines())
  assert list(results) == ["eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"]
  real = google_dev["is_real_example"] == 1
  assert real.sum() == 5 and len(real) == 8
  labels, predictions = google_dev["label_id"][real], google_dev["logits"][real].argmax(-1)
  assert float(results["eval_accuracy"]) == pytest.approx(np.mean(predictions == labels))
  # Written as the original wrote its float32 metrics: str() of the float32 (3 of 5: "0.6").
  assert results["eval_accuracy"] == str(np.mean(predictions == labels, dtype=np.float32))
  np.testing.assert_allclose(float(results["eval_loss"]),
                             google_dev["per_example_loss"][real].mean(), rtol=1e-5)
  tp = np.sum((labels == 1) & (predictions == 1))
  fp_fn = np.sum(labels != predictions)
  assert float(results["eval_f1"]) == pytest.approx(2 * tp / (2 * tp + fp_fn))
  # 5 dev rows in batches of 4: the Estimator's loss is the mean of the 2 batch losses
  # (create_model's mean), the 3 padding examples of the last batch included (original TPU).
  batch_losses = google_dev["per_example_loss"].reshape(2, 4).mean(-1)
  np.testing.assert_allclose(float(results["loss"]), batch_losses.mean(), rtol=1e-5)
  train_rows = len((MRPC / "train.tsv").read_text().splitlines()) - 1
  assert int(results["global_step"]) == int(train_rows / 2 * 2)
  assert "***** Eval results *****" in run["stdout"]


def test_google_checkpoint_has_the_originals_names(run):
  google_dir = run["out"] / "google"
  names = dict(tf.train.list_variables(str(google_dir / "bert_model.ckpt")))
  assert names["output_weights"] == [2, 32] and names["output_bias"] == [2]
  assert names["bert/encoder/layer_1/output/LayerNorm/gamma"] == [32]
  assert not [n for n in names if n.startswith(("loss", "classifier", "model/"))]
  modeling = google("modeling")
  config = modeling.BertConfig.from_json_file(str(google_dir / "bert_config.json"))
  assert config.vocab_size == 30522 and config.hidden_size == 32
  assert os.path.exists(google_dir / "vocab.txt")


def test_bad_input_is_one_line_error(tmp_path, uncased_vocab):
  bad = tmp_path / "MRPC"
  bad.mkdir()
  (bad / "train.tsv").write_text(
      "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA cat .\tA dog .\n"
      "0\t3\t4\tonly four columns\n")
  config = tmp_path / "bert_config.json"
  config.write_text('{"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, '
                    '"num_attention_heads": 4, "intermediate_size": 37, "hidden_act": "gelu", '
                    '"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, '
                    '"max_position_embeddings": 64, "type_vocab_size": 2, '
                    '"initializer_range": 0.02}')
  common = [f"--vocab_file={uncased_vocab}", f"--bert_config_file={config}",
            f"--data_dir={bad}", "--max_seq_length=32"]
  cases = [
      (["--task_name=MRPC", "--do_train=True"],
       f"{bad / 'train.tsv'}:3: expected 5 tab-separated columns as in the header, found 4"),
      (["--task_name=MRPC"], "at least one of --do_train, --do_eval or --do_predict must be "
                             "True (or --export_dir to export a fine-tuned checkpoint)"),
  ]
  # Each has an output folder of its own (tests/warm.py runs them forked, one after the
  # other, without TensorFlow's start-up).
  for i, (args, needle) in enumerate(cases):
    result = warm.run(_command(*common, f"--output_dir={tmp_path / f'out{i}'}", *args),
                      cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert f"run_classifier.py: error: {needle}" in result.stderr.splitlines()


def test_output_folders_load_alone(run, capsys):
  """The output folder and its google/ export open with bert_tf.load / --model alone (config
  and vocab written beside the weights); no masked-LM head, and fill-mask says so."""
  from tests.reference import loadable  # pylint: disable=import-outside-toplevel
  loadable.assert_folder_loads_alone(run["out"], run["out"] / "google", has_masked_lm=False)
  loadable.assert_fill_mask_names_missing_head(str(run["out"] / "google"), capsys)


def test_classify_by_label_name(run, tmp_path):
  """run_classifier.py saves the label names (classifier.json, beside bert_config.json in the
  output folder and google/); bert_tf.load(folder).classify and `python -m bert_tf classify`
  then give Google's original model's probabilities with the processor's label names."""
  import json  # pylint: disable=import-outside-toplevel
  import bert_tf  # pylint: disable=import-outside-toplevel
  processor = google("run_classifier").MrpcProcessor()
  labels = processor.get_labels()
  examples = processor.get_test_examples(str(MRPC))
  google_test = _google_outputs(run, "test")
  for folder in (run["out"], run["out"] / "google"):
    info = json.loads((folder / "classifier.json").read_text())
    assert info == {"task_name": "mrpc", "labels": labels, "is_regression": False,
                    "do_lower_case": True, "max_seq_length": SEQ_LENGTH}
    results = bert_tf.load(str(folder)).classify([(e.text_a, e.text_b) for e in examples])
    np.testing.assert_allclose([[r["probabilities"][name] for name in labels] for r in results],
                               google_test["probabilities"], atol=1e-5)
    np.testing.assert_allclose([r["logits"] for r in results], google_test["logits"], atol=1e-5)
    assert [r["label"] for r in results] == [labels[i] for i in google_test["logits"].argmax(-1)]
    assert [r["probability"] for r in results] == pytest.approx(
        google_test["probabilities"].max(-1), abs=1e-5)
  one = bert_tf.load(str(run["out"])).classify(examples[0].text_a, examples[0].text_b)
  assert one["label"] == results[0]["label"]  # One pair in, one dict out.

  lines = tmp_path / "pairs.txt"
  lines.write_text("".join(f"{e.text_a} ||| {e.text_b}\n" for e in examples))
  cli = subprocess.run([sys.executable, "-m", "bert_tf", "classify",
                        f"--model={run['out'] / 'google'}", f"--input_file={lines}", "--json"],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
  assert cli.returncode == 0 and cli.stderr == "", cli.stderr[-3000:]
  rows = [json.loads(line) for line in cli.stdout.splitlines()]
  assert [row["label"] for row in rows] == [r["label"] for r in results]
  np.testing.assert_allclose([row["logits"] for row in rows], google_test["logits"], atol=1e-5)
  assert rows[0]["text"] == examples[0].text_a and rows[0]["text_b"] == examples[0].text_b


def test_classify_cuts_texts_where_the_fine_tuning_did(run):
  """classify truncates at the fine-tuning's --max_seq_length (classifier.json's 32, not the
  model's 64 positions): texts of 40 to 90 word pieces give Google's model's logits on the
  original's convert_single_example at 32 (mutation audit round 3: the fixture's texts all
  fit in 32, and classify at the position limit went unnoticed)."""
  import bert_tf  # pylint: disable=import-outside-toplevel
  run_classifier = google("run_classifier")
  test = run_classifier.MrpcProcessor().get_test_examples(str(MRPC))
  examples = [run_classifier.InputExample(guid=f"long-{i}", text_a=" ".join([e.text_a] * 8),
                                          text_b=(" ".join([e.text_b] * 3) if i % 2 else None),
                                          label="0")
              for i, e in enumerate(test)]
  google_long = _google_outputs(run, "test", examples=examples)
  assert (google_long["input_mask"].sum(-1) == SEQ_LENGTH).all()  # every one was cut
  results = bert_tf.load(str(run["out"])).classify([
      e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in examples])
  np.testing.assert_allclose([r["logits"] for r in results], google_long["logits"], atol=1e-5)


def test_classify_without_label_names_is_one_line_error(run, tmp_path):
  """A folder without classifier.json (e.g. a pretrained model): one line naming the file."""
  import shutil  # pylint: disable=import-outside-toplevel
  import bert_tf  # pylint: disable=import-outside-toplevel
  from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
  folder = tmp_path / "google"
  shutil.copytree(run["out"] / "google", folder)
  (folder / "classifier.json").unlink()
  with pytest.raises(BertTfError, match=r"^classify: .* has no classifier\.json \(the label "
                     r"names run_classifier\.py writes beside a fine-tuned model\)$"):
    bert_tf.load(str(folder)).classify("a text")
