"""ClassifierTask losses and eval metrics, by hand; one-pass inference over padded eval sets on
1 and 2 replicas; eval_results wiring per task; a regression (STS-B) run end to end."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import classifier_features, glue
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig, checkpoints
from bert_tf.training import classifier, distribution, loop
from tests.conftest import FIXTURES
from tests.reference import fine_tuning_schedule, google_models

CONFIG = BertConfig.from_dict(google_models.tiny_config_dict())


def _log_softmax(x):
  x = np.asarray(x, np.float64)
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _call_eval_metrics(task, logits, labels, is_real):
  features = {"label_ids": tf.constant(labels), "is_real_example": tf.constant(is_real)}
  sums = task.eval_metrics(tf.constant(logits, tf.float32), features)
  return {k: float(s) / float(w) for k, (s, w) in sums.items()}


def test_classification_loss_and_eval_metrics_by_hand():
  task = classifier.ClassifierTask(CONFIG, num_labels=3)
  logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 1.0, 5.0], [0.5, 0.2, 0.1]])
  labels = np.array([0, 2, 2, 1], np.int32)
  is_real = np.array([1, 1, 1, 0], np.int32)
  nll = -_log_softmax(logits)[np.arange(4), labels]
  # Training loss: mean over the whole batch, is_real_example not used (as the original).
  features = {"label_ids": tf.constant(labels), "is_real_example": tf.constant(is_real)}
  denominators = task.loss_denominators(features)
  loss = loop.total_loss(task, tf.constant(logits, tf.float32), features, denominators)
  np.testing.assert_allclose(float(loss), nll.mean(), rtol=1e-6)
  got = _call_eval_metrics(task, logits, labels, is_real)
  assert set(got) == {"eval_accuracy", "eval_loss", "loss"}
  assert got["eval_accuracy"] == pytest.approx(2 / 3)          # rows 0 and 2 right; 3 is padding
  np.testing.assert_allclose(got["eval_loss"], nll[:3].mean(), rtol=1e-6)
  np.testing.assert_allclose(got["loss"], nll.mean(), rtol=1e-6)  # the Estimator's batch loss


def test_regression_loss_is_mean_squared_error():
  task = classifier.ClassifierTask(CONFIG, num_labels=1, is_regression=True)
  logits = np.array([[1.5], [2.0], [0.0]], np.float32)
  labels = np.array([1.0, 3.0, 0.5], np.float32)
  features = {"label_ids": tf.constant(labels), "is_real_example": tf.constant([1, 1, 0])}
  loss = loop.total_loss(task, tf.constant(logits), features, task.loss_denominators(features))
  np.testing.assert_allclose(float(loss), (0.25 + 1.0 + 0.25) / 3, rtol=1e-6)
  got = _call_eval_metrics(task, logits, labels, np.array([1, 1, 0], np.int32))
  assert set(got) == {"eval_loss", "loss"}  # No accuracy for scores.
  np.testing.assert_allclose(got["eval_loss"], (0.25 + 1.0) / 2, rtol=1e-6)
  np.testing.assert_allclose(got["loss"], 0.5, rtol=1e-6)


def test_task_rejects_impossible_heads():
  with pytest.raises(BertTfError, match="at least 2 labels"):
    classifier.ClassifierTask(CONFIG, num_labels=1)


def test_a_labels_file_of_one_name_is_refused_as_that_head_is(tmp_path):
  """classifier.json / token_classifier.json name one label per output: one name (a file
  edited by hand) is a one-line error naming the file, as a head of one label is above; a
  regression's [] is not (mutation audit: the count left unchecked went unnoticed)."""
  from bert_tf import classifier_labels  # pylint: disable=import-outside-toplevel
  for write, read, name in ((classifier_labels.write, classifier_labels.read,
                             classifier_labels.FILE_NAME),
                            (classifier_labels.write_tokens, classifier_labels.read_tokens,
                             classifier_labels.TOKEN_FILE_NAME)):
    write(str(tmp_path), ["neg", "pos"])
    assert read(str(tmp_path))["labels"] == ["neg", "pos"]
    write(str(tmp_path), ["pos"])
    with pytest.raises(BertTfError) as error:
      read(str(tmp_path))
    assert str(error.value).startswith(f"{tmp_path / name}: 'labels' must be a list of at "
                                       "least 2 ")
  classifier_labels.write(str(tmp_path), [], is_regression=True)
  assert classifier_labels.read(str(tmp_path))["labels"] == []


def test_a_hugging_face_folder_gives_its_fine_tuning_length_only_below_the_position_limit(
    tmp_path):
  """tokenizer_config.json's model_max_length is a fine-tuning length (what bert_tf's export
  writes) only below max_position_embeddings; at the limit (bert-base's 512, every Hugging Face
  BERT's) it says nothing, so that ``load(..., max_seq_length=64)`` keeps its 64 (mutation
  audit: ``<=`` there went unnoticed)."""
  import json  # pylint: disable=import-outside-toplevel
  from bert_tf import classifier_labels  # pylint: disable=import-outside-toplevel
  (tmp_path / "config.json").write_text(json.dumps({
      "architectures": ["BertForSequenceClassification"], "max_position_embeddings": 512,
      "id2label": {"0": "neg", "1": "pos"}}))
  for limit, length in ((512, None), (511, 511), (128, 128), (1000000000000000019884624838656,
                                                               None)):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": limit}))
    info, tokens = classifier_labels.from_hugging_face(str(tmp_path))
    assert tokens is None and info["labels"] == ["neg", "pos"]
    assert info["max_seq_length"] == length, limit


# === run_inference over a padded file ===

def _write_eval_file(path, n_real, batch_size, num_labels=3, seq_length=10, seed=0):
  rng = np.random.RandomState(seed)
  examples = []
  for _ in range(n_real):
    length = rng.randint(3, seq_length + 1)
    ids = [int(i) for i in rng.randint(5, CONFIG.vocab_size, length)] + [0] * (seq_length - length)
    mask = [1] * length + [0] * (seq_length - length)
    segments = [0] * (length // 2) + [1] * (length - length // 2) + [0] * (seq_length - length)
    examples.append(classifier_features.InputFeatures(ids, mask, segments,
                                                      int(rng.randint(num_labels))))
  padding = classifier_features.convert_single_example(
      classifier_features.PaddingInputExample(), [], seq_length, tokenizer=None)
  examples += [padding] * (-n_real % batch_size)
  with tf.io.TFRecordWriter(str(path)) as writer:
    for feature in examples:
      writer.write(classifier_features.to_tf_example(feature).SerializeToString())
  return {"input_ids": np.array([f.input_ids for f in examples], np.int32),
          "input_mask": np.array([f.input_mask for f in examples], np.int32),
          "segment_ids": np.array([f.segment_ids for f in examples], np.int32),
          "label_ids": np.array([f.label_id for f in examples], np.int32),
          "is_real_example": np.array([f.is_real_example for f in examples], np.int32)}


def _check_inference(strategy, model, task, path, records, batch_size):
  results, outputs = classifier.run_inference(
      strategy, model, task, classifier.eval_dataset_fn(str(path), 10, batch_size))
  expected_logits = model(records, training=False).numpy()       # file order, one batch
  np.testing.assert_allclose(outputs["logits"], expected_logits, atol=1e-5)
  np.testing.assert_array_equal(outputs["label_ids"], records["label_ids"])
  np.testing.assert_array_equal(outputs["is_real_example"], records["is_real_example"])
  real = records["is_real_example"] == 1
  nll = -_log_softmax(expected_logits)[np.arange(len(real)), records["label_ids"]]
  accuracy = (expected_logits.argmax(-1) == records["label_ids"])[real].mean()
  assert results["eval_accuracy"] == pytest.approx(accuracy)
  np.testing.assert_allclose(results["eval_loss"], nll[real].mean(), rtol=1e-5)
  batch_means = nll.reshape(-1, batch_size).mean(-1)
  np.testing.assert_allclose(results["loss"], batch_means.mean(), rtol=1e-5)


def test_run_inference_one_device_and_two_replicas(tmp_path):
  path = tmp_path / "eval.tf_record"
  records = _write_eval_file(path, n_real=10, batch_size=4)        # 12 records, 2 padding
  task = classifier.ClassifierTask(CONFIG, num_labels=3)
  model = task.build_model()
  _check_inference(tf.distribute.get_strategy(), model, task, path, records, batch_size=4)
  cpus = tf.config.list_logical_devices("CPU")
  if len(cpus) < 2:
    pytest.skip("needs 2 logical CPUs (tests/conftest.py configures them)")
  mirrored = distribution.mirrored_strategy([d.name for d in cpus[:2]])
  with mirrored.scope():
    model_2 = task.build_model()
  model_2.set_weights(model.get_weights())
  # Each replica runs 2 of the 4 examples of a step; results come back in file order.
  _check_inference(mirrored, model_2, task, path, records, batch_size=4)


def test_eval_dataset_deals_whole_batches_to_input_pipelines(tmp_path):
  path = tmp_path / "eval.tf_record"
  records = _write_eval_file(path, n_real=13, batch_size=8)        # 16 records
  fn = classifier.eval_dataset_fn(str(path), 10, batch_size=8)
  seen = []
  for pipeline in range(2):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                     num_replicas_in_sync=4)
    for batch in fn(ctx):
      index = batch[classifier.EXAMPLE_INDEX].numpy()
      assert len(index) == 2                                      # per-replica batch
      np.testing.assert_array_equal(batch["input_ids"].numpy(), records["input_ids"][index])
      seen.extend(index.tolist())
  assert sorted(seen) == list(range(16))


# === eval_results.txt entries per task ===

def _outputs(labels, predictions, is_real, num_labels=2):
  logits = np.eye(num_labels, dtype=np.float32)[predictions]
  return {"logits": logits, "label_ids": np.array(labels), "is_real_example": np.array(is_real)}


def test_task_metrics_leave_padding_out():
  streaming = {"eval_accuracy": 0.5, "eval_loss": 0.7, "loss": 0.8}
  # MRPC: real rows TP=1 FP=1 FN=1 -> F1 = 2/(2+1+1); the padding row (label 0, predicted
  # 1) would make it 2/5 if it were counted.
  outputs = _outputs([1, 1, 0, 0, 0], [1, 0, 0, 1, 1], [1, 1, 1, 1, 0])
  got = classifier.eval_results_for_split(glue.get_task("MRPC"), "dev", streaming,
                                          outputs)
  assert got == {"eval_accuracy": 0.5, "eval_loss": 0.7, "loss": 0.8, "eval_f1": 0.5}
  # CoLA: Matthews on the real rows: TP=1 TN=1 FP=1 FN=1 -> 0.
  got = classifier.eval_results_for_split(glue.get_task("CoLA"), "dev", streaming,
                                          outputs)
  assert got["eval_mcc"] == 0.0 and set(got) == {"eval_accuracy", "eval_loss", "loss",
                                                 "eval_mcc"}


def test_mnli_mismatched_keys():
  streaming = {"eval_accuracy": 1.0, "eval_loss": 0.1, "loss": 0.2}
  got = classifier.eval_results_for_split(glue.get_task("MNLI"), "dev_mismatched",
                                          streaming, _outputs([2, 0], [2, 0], [1, 1], 3))
  assert got == {"eval_mm_accuracy": 1.0, "eval_mm_loss": 0.1, "mm_loss": 0.2}


def test_sts_b_correlations_on_real_rows():
  labels = np.array([0.0, 1.0, 2.0, 3.0, 0.0], np.float32)
  scores = np.array([0.0, 1.0, 4.0, 9.0, 100.0], np.float32)    # last row: padding
  outputs = {"logits": scores[:, None], "label_ids": labels,
             "is_real_example": np.array([1, 1, 1, 1, 0])}
  got = classifier.eval_results_for_split(glue.get_task("STS-B"), "dev",
                                          {"eval_loss": 1.0, "loss": 1.0}, outputs)
  assert set(got) == {"eval_loss", "loss", "eval_pearson", "eval_spearman"}
  assert got["eval_spearman"] == pytest.approx(1.0)              # monotonic on real rows
  # Pearson's r of (0,1,2,3) and (0,1,4,9) by hand: 15 / sqrt(5 * 49).
  x, y = labels[:4] - labels[:4].mean(), scores[:4] - scores[:4].mean()
  r = float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))
  assert got["eval_pearson"] == pytest.approx(r) and r == pytest.approx(0.9583148)


# === A regression task end to end (in process) ===

def test_sts_b_run_end_to_end(tmp_path, uncased_vocab):
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))
  out = tmp_path / "out"
  lines = []
  with fine_tuning_schedule.optimizers_made() as optimizers:
    results = classifier.run_classifier(
        config, "STS-B", str(uncased_vocab), str(out), tf.distribute.get_strategy(),
        data_dir=str(FIXTURES / "glue" / "STS-B"), max_seq_length=16, do_train=True,
        do_eval=True, do_predict=True, train_batch_size=2, eval_batch_size=2,
        predict_batch_size=4, num_train_epochs=1.0, warmup_proportion=0.7, seed=3,
        steps_per_loop=2, progress=lines.append)
  num_examples = len(glue.get_processor("STS-B").get_examples(
      str(FIXTURES / "glue" / "STS-B"), "train"))
  # The original's steps and warmup: int(6 / 2 * 1.0) = 3, int(3 * 0.7) = 2.
  num_train_steps, num_warmup_steps = fine_tuning_schedule.steps(num_examples, 2, 1.0, 0.7)
  assert (num_train_steps, num_warmup_steps) == (3, 2)
  assert results["train"]["global_step"] == num_train_steps
  assert f"steps {num_train_steps} (warmup {num_warmup_steps})" in "\n".join(lines)
  # The optimizer's schedule is the original's learning rate at every step (5e-5 the default).
  expected = [fine_tuning_schedule.learning_rate(step, 5e-5, num_train_steps, num_warmup_steps)
              for step in range(num_train_steps + 1)]
  (optimizer,) = optimizers
  schedule = fine_tuning_schedule.schedule_of(optimizer)
  np.testing.assert_allclose([float(schedule(step)) for step in range(num_train_steps + 1)],
                             expected, rtol=1e-6, atol=1e-12)
  assert fine_tuning_schedule.progress_learning_rates(lines) == {
      step: pytest.approx(expected[step], rel=1e-3) for step in (2, 3)}
  lines = (out / "eval_results.txt").read_text().splitlines()
  assert [line.split(" = ")[0] for line in lines] == [
      "eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"]
  # test_results.tsv: one score per test row; STS-B.tsv: the same scores, 3 decimals.
  test_rows = len((FIXTURES / "glue" / "STS-B" / "test.tsv").read_text().splitlines()) - 1
  scores = [float(line) for line in (out / "test_results.tsv").read_text().splitlines()]
  submission = (out / "STS-B.tsv").read_text().splitlines()
  assert len(scores) == test_rows and submission[0] == "index\tprediction"
  assert submission[1:] == [f"{i}\t{s:.3f}" for i, s in enumerate(scores)]
  # The Google-format export holds the regression head under the original's names.
  names = dict(tf.train.list_variables(str(out / "google" / "bert_model.ckpt")))
  assert names["output_weights"] == [1, 32] and names["output_bias"] == [1]
  assert os.path.exists(out / "google" / "bert_config.json")
  assert (out / "google" / "vocab.txt").read_bytes() == uncased_vocab.read_bytes()
  # Eval again from the training checkpoint (no training): same numbers.
  again = classifier.run_classifier(
      config, "STS-B", str(uncased_vocab), str(out), tf.distribute.get_strategy(),
      data_dir=str(FIXTURES / "glue" / "STS-B"), max_seq_length=16, do_eval=True,
      eval_batch_size=2)
  for key, value in results["eval"].items():
    assert again["eval"][key] == pytest.approx(value, rel=1e-5), key


@pytest.mark.parametrize("kwargs,needle", [
    ({}, "at least one of --do_train, --do_eval or --do_predict must be True (or "
         "--export_dir to export a fine-tuned checkpoint)"),
    ({"do_eval": True, "max_seq_length": 65}, "--max_seq_length 65 exceeds "
                                              "max_position_embeddings 64"),
    ({"do_train": True, "num_train_epochs": 0.1}, "gives no training step"),
    ({"do_eval": True, "task_name": "nope"}, "unknown task_name 'nope'"),
    ({"do_eval": True, "data_dir": None}, "no --data_dir given"),
    ({"do_eval": True, "data_dir": "no/such/dir", "task_name": "user"},
     "--data_dir 'no/such/dir': no such folder"),
    ({"do_eval": True, "data_dir": str(FIXTURES / "glue" / "MRPC" / "dev.tsv")},
     "dev.tsv': not a folder"),
    ({"do_predict": True, "task_name": "AX", "do_train": True}, "--do_train: task ax has no "
                                                                 "data for it"),
    # The scripts' range checks, for a call from Python (a negative rate trained: loss 0.69 to
    # 1547 in 18 steps; a warmup 5x the run; nan said "lower --learning_rate" 2 steps on).
    ({"do_train": True, "learning_rate": -1.0}, "learning_rate=-1.0: must be a finite number"),
    ({"do_train": True, "learning_rate": float("nan")}, "learning_rate=nan: must be a finite"),
    ({"do_train": True, "warmup_proportion": 5.0}, "warmup_proportion=5.0: must be in [0, 1]"),
    ({"do_train": True, "optimizer_kwargs": {"beta_1": 1.0}}, "beta_1=1.0: must be in [0, 1)"),
    ({"do_train": True, "num_train_epochs": "3"}, "num_train_epochs='3': must be a finite"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, uncased_vocab, kwargs, needle):
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))
  args = dict(task_name="MRPC", data_dir=str(FIXTURES / "glue" / "MRPC"), max_seq_length=16,
              train_batch_size=4)
  args.update(kwargs)
  task_name = args.pop("task_name")
  with pytest.raises(BertTfError) as error:
    classifier.run_classifier(config, task_name, str(uncased_vocab), str(tmp_path / "o"),
                              tf.distribute.get_strategy(), **args)
  assert needle in str(error.value) and "\n" not in str(error.value)


def test_vocab_larger_than_the_model_is_an_error(tmp_path, uncased_vocab):
  with pytest.raises(BertTfError, match="has 30522 tokens but the BERT config says "
                                        "vocab_size 99"):
    classifier.run_classifier(CONFIG, "MRPC", str(uncased_vocab), str(tmp_path),
                              tf.distribute.get_strategy(), do_eval=True,
                              data_dir=str(FIXTURES / "glue" / "MRPC"), max_seq_length=16)


def test_tfds_gives_the_same_eval_as_the_tsv_files(tmp_path, uncased_vocab):
  """--tfds reads glue/rte from tensorflow-datasets: served here by TFDS's own mock from the
  fixture's rows (in TFDS's layout and label ids), it must give the TSV run's eval_results."""
  tfds = pytest.importorskip("tensorflow_datasets")
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))
  task = glue.get_task("RTE")
  data_dir = str(FIXTURES / "glue" / "RTE")
  examples = glue.get_processor("RTE").get_examples(data_dir, "dev")
  names = tfds.builder(task.tfds.name).info.features["label"].names
  records = [{"idx": i, task.tfds.text_a: e.text_a, task.tfds.text_b: e.text_b,
              "label": names.index(e.label)} for i, e in enumerate(examples)]

  def as_dataset(self, split, *args, **kwargs):
    assert str(split) == "validation"
    return tf.data.Dataset.from_generator(
        lambda: iter(records), output_signature=self.info.features.get_tensor_spec())

  # The weights evaluated: a seeded classifier's, head included (an eval of random weights
  # is refused).
  keras.utils.set_random_seed(4)
  model = classifier.ClassifierTask(config, task.num_labels).build_model()
  model({"input_ids": tf.zeros([1, 4], tf.int32), "input_mask": tf.ones([1, 4], tf.int32),
         "segment_ids": tf.zeros([1, 4], tf.int32)})
  init = str(tmp_path / "init" / "bert_model.ckpt")
  checkpoints.save_google_checkpoint(model, init)

  def run(out, **kwargs):
    return classifier.run_classifier(
        config, "RTE", str(uncased_vocab), str(tmp_path / out), tf.distribute.get_strategy(),
        max_seq_length=24, do_eval=True, eval_batch_size=2, init_checkpoint=init,
        **kwargs)["eval"]

  from_files = run("files", data_dir=data_dir)
  with tfds.testing.mock_data(as_dataset_fn=as_dataset):
    from_tfds = run("tfds", use_tfds=True, data_dir=str(tmp_path / "no_tfds_data"))
  assert from_tfds == from_files and set(from_files) == {"eval_accuracy", "eval_loss", "loss",
                                                         "global_step"}


def test_mnlis_predict_files_are_written_together(tmp_path, uncased_vocab, monkeypatch):
  """MNLI predicts two test splits; their four files (test_results.tsv, MNLI-m.tsv and the
  mismatched pair) are one output: a run failing during the second split's inference leaves
  every earlier file as it was (the first split's were already replaced); a whole run writes
  all four."""
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))
  out = tmp_path / "out"
  out.mkdir()
  names = ["MNLI-m.tsv", "MNLI-mm.tsv", "test_results.tsv", "test_results_test_mismatched.tsv"]
  for name in names:
    (out / name).write_text("earlier\n")
  calls = []
  real = classifier.run_inference

  def failing_second(*args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
      raise RuntimeError("stopped in the second split")
    return real(*args, **kwargs)
  args = dict(data_dir=str(FIXTURES / "glue" / "MNLI"), max_seq_length=16, do_predict=True,
              predict_batch_size=4, init_checkpoint=None)
  monkeypatch.setattr(classifier, "run_inference", failing_second)
  google_dir = tmp_path / "google"
  checkpoints.save_google_checkpoint(classifier.ClassifierTask(config, 3).build_model(),
                                     str(google_dir / "bert_model.ckpt"))
  args["init_checkpoint"] = str(google_dir / "bert_model.ckpt")
  with pytest.raises(RuntimeError, match="second split"):
    classifier.run_classifier(config, "MNLI", str(uncased_vocab), str(out),
                              tf.distribute.get_strategy(), **args)
  assert {n: (out / n).read_text() for n in names} == {n: "earlier\n" for n in names}
  monkeypatch.setattr(classifier, "run_inference", real)
  classifier.run_classifier(config, "MNLI", str(uncased_vocab), str(out),
                            tf.distribute.get_strategy(), **args)
  assert all((out / n).read_text() != "earlier\n" for n in names)
  assert (out / "MNLI-mm.tsv").read_text().startswith("index\tprediction\n")


_RUNS = """
import json, sys
import tensorflow as tf
from bert_tf.modeling import BertConfig
from bert_tf.training import classifier
config = BertConfig.from_dict(json.loads(open(sys.argv[2]).read()))
for n in range(7):  # a model evaluated per run, in one process (a notebook, a sweep)
  task = classifier.ClassifierTask(config, num_labels=3)
  classifier.run_inference(tf.distribute.get_strategy(), task.build_model(), task,
                           classifier.eval_dataset_fn(sys.argv[1], 10, 4))
for n in range(7):  # the user's own function created in a loop: still warned
  user_function = tf.function(lambda x: x + 1)
  user_function(tf.constant(n))
"""


def test_runs_one_after_another_do_not_warn_of_retracing_their_inference_step(tmp_path):
  """Each run compiles its own inference step and traces it once; TensorFlow counts traces by
  the code and, from the fifth run in a process, warned that tf.functions were created in a
  loop (bert_tf.quiet.per_run_functions). That warning stays for the user's functions."""
  import json  # pylint: disable=import-outside-toplevel
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  path = tmp_path / "eval.tf_record"
  _write_eval_file(path, n_real=8, batch_size=4)
  (tmp_path / "config.json").write_text(json.dumps(google_models.tiny_config_dict()))
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  result = subprocess.run([sys.executable, "-c", _RUNS, str(path), str(tmp_path / "config.json")],
                          capture_output=True, text=True, timeout=600, check=False,
                          cwd=root)  # this tree's bert_tf
  assert result.returncode == 0, result.stderr[-3000:]
  warned = [line for line in result.stderr.splitlines()
            if "triggered tf.function retracing" in line]
  assert warned and all("<lambda>" in line for line in warned), warned
