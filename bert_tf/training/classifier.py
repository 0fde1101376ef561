"""Sequence (pair) classification and regression: the task, its metrics, ``run_classifier``.

Shape legend: B = batch (per replica inside ``strategy.run``), S = max_seq_length,
C = num_labels (1 for regression), N = examples in an eval/predict set (padding included).

Loss, as the original's ``create_model`` (``run_classifier.py``):
  classification  per_example_loss = -log softmax(logits)[label]; loss = mean over the batch
  regression      per_example_loss = (logits[:, 0] - label)^2;    loss = mean over the batch
  multi-label     per_example_loss = mean over the C labels of the sigmoid cross-entropy of
                  each logit with its 0/1 label; loss = mean over the batch (= transformers'
                  BCEWithLogitsLoss, ``problem_type="multi_label_classification"``)
The mean is over the GLOBAL batch (``training.loop``), every example counted: in training
``is_real_example`` is always 1, as in the original, which did not use it in the loss.
Regression (STS-B, user tasks with --is_regression) and multi-label classification (user
tasks with --multi_label: any number of labels per example, a label predicted where its logit
is positive, i.e. its sigmoid probability > 0.5) are bert_tf's additions: the original's
run_classifier had one label per example only (and no STS-B processor).

Eval, as the original's ``metric_fn`` plus each task's own metrics:
  eval_accuracy   accuracy weighted by is_real_example (classification only; multi-label:
                  the task metric's subset accuracy)
  eval_loss       per_example_loss weighted by is_real_example
  loss            the Estimator's ``loss``: the mean over eval batches of each batch's mean
                  per_example_loss, the padding examples included (as on the original's TPU)
  eval_<metric>   the task table's metrics (``bert_tf.metrics``: f1, mcc, pearson, ...) on the
                  predictions of the whole eval set gathered from every replica, padding
                  examples left out
  global_step     the training step of the evaluated weights
Other eval splits (MNLI's dev_mismatched) get the task table's prefix: eval_mm_accuracy,
eval_mm_loss, mm_loss, ...
"""

import functools
import os

import keras
import numpy as np
import tensorflow as tf

from bert_tf import classifier_labels, fileio, metrics, paths, progress, quiet, run_lock
from bert_tf import tokenization
from bert_tf.data import classifier_features, glue, record_check
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertClassifier, checkpoints
from bert_tf.progress import log_line
from bert_tf.training import DTYPE_POLICIES, distribution, frees_its_memory, loop, preflight
from bert_tf.training import eval_during_training as eval_during

# The feature eval/predict datasets carry beside the TFRecord's: each example's position in
# its file, so that predictions gathered from every replica go back into file order.
EXAMPLE_INDEX = "example_index"


class ClassifierTask:
  """Classification (softmax cross-entropy), regression (squared error) or multi-label
  classification (sigmoid cross-entropy) on the pooled output.

  Implements the ``training.loop`` task interface. Features: ``input_ids``, ``input_mask``,
  ``segment_ids`` [B,S] int32, ``label_ids`` [B] (int32; float32 for regression; [B,C] 0/1
  float32 multi-label), ``is_real_example`` [B] int32 (eval only).
  """

  def __init__(self, config, num_labels, is_regression=False, classifier_dropout=0.1,
               multi_label=False):
    if is_regression and multi_label:
      raise ValueError("a head is a regression or multi-label, not both")
    if is_regression and num_labels != 1:
      raise ValueError(f"a regression head has 1 output, got num_labels={num_labels}")
    if not is_regression and num_labels < 2:
      raise BertTfError(f"a classifier needs at least 2 labels, got {num_labels}")
    self.config = config
    self.num_labels = num_labels
    self.is_regression = is_regression
    self.multi_label = multi_label
    self.classifier_dropout = classifier_dropout

  def build_model(self, dtype=None):
    return BertClassifier(self.config, self.num_labels,
                          classifier_dropout=self.classifier_dropout, dtype=dtype)

  def per_example_loss(self, logits, label_ids):
    """logits [B,C] float32, label_ids [B] ([B,C] multi-label) -> [B] float32 (nll, squared
    error, or the mean sigmoid cross-entropy of the labels)."""
    logits = tf.cast(logits, tf.float32)
    if self.multi_label:
      return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.cast(label_ids, tf.float32), logits=logits), axis=-1)   # [B]
    if self.is_regression:
      return tf.square(logits[:, 0] - tf.cast(tf.reshape(label_ids, [-1]), tf.float32))
    log_probs = tf.nn.log_softmax(logits, axis=-1)                          # [B,C]
    labels = tf.cast(tf.reshape(label_ids, [-1]), tf.int32)                 # [B]
    return -tf.gather(log_probs, labels, batch_dims=1)

  def loss_denominators(self, features):
    batch = tf.shape(features["label_ids"])[0]
    return {"classifier": tf.cast(batch, tf.float32)}

  def loss_numerators(self, outputs, features):
    return {"classifier": tf.reduce_sum(self.per_example_loss(outputs, features["label_ids"]))}

  def eval_metrics(self, outputs, features):
    """{name: (sum, weight)} of one batch on one replica (see ``training.loop.evaluate``)."""
    per_example_loss = self.per_example_loss(outputs, features["label_ids"])  # [B]
    if "is_real_example" in features:
      weights = tf.cast(tf.reshape(features["is_real_example"], [-1]), tf.float32)
    else:
      weights = tf.ones_like(per_example_loss)
    weight_sum = tf.reduce_sum(weights)
    results = {"eval_loss": (tf.reduce_sum(weights * per_example_loss), weight_sum)}
    if not (self.is_regression or self.multi_label):
      predictions = tf.argmax(outputs, axis=-1, output_type=tf.int32)
      labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)
      correct = tf.cast(tf.equal(predictions, labels), tf.float32)
      results["eval_accuracy"] = (tf.reduce_sum(weights * correct), weight_sum)
    # The Estimator's "loss": mean over batches of the batch's loss (global batch = the sum
    # of the replicas' shares).
    replicas = float(tf.distribute.get_replica_context().num_replicas_in_sync)
    results["loss"] = (tf.reduce_mean(per_example_loss) / replicas,
                       tf.constant(1.0 / replicas))
    return results


# === Running a model over a whole eval / predict set ===

def eval_dataset_fn(input_file, max_seq_length, batch_size,
                    make_dataset=classifier_features.make_dataset):
  """``input_context -> dataset`` of a padded eval/predict TFRecord, with ``example_index``.

  The file must hold a multiple of ``batch_size`` (global) records (``pad_to_batch``). Each
  replica reads whole per-replica batches; with several input pipelines (multi-host) the
  batches are dealt out round-robin. ``example_index`` [B] int32 is each record's position
  in the file, so gathered results can be put back in file order whatever the
  sharding. ``make_dataset``: the record format's reader (default: a classification task's;
  a regression or multi-label task's is ``classifier_features.make_dataset`` with its
  ``spec``, token classification's ``bert_tf.data.conll.make_dataset``).
  """
  def dataset_fn(ctx):
    per_replica = ctx.get_per_replica_batch_size(batch_size) if ctx else batch_size
    dataset = make_dataset(
        input_file, max_seq_length, per_replica, is_training=False, drop_remainder=True)

    def add_index(batch_number, features):
      start = tf.cast(batch_number, tf.int32) * per_replica  # int32: TPUs gather no int64.
      return dict(features, **{EXAMPLE_INDEX: tf.range(start, start + per_replica)})

    dataset = dataset.enumerate().map(add_index)
    if ctx is not None and ctx.num_input_pipelines > 1:
      dataset = dataset.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    return dataset
  return dataset_fn


# Each run (or model) compiles its own inference step (bert_tf.quiet).
quiet.per_run_functions("run_inference.<locals>.bert_tf_inference_step ")


def run_inference(strategy, model, task, dataset_fn, cache=None):
  """One pass of ``model`` over a dataset: streaming metrics and every example's output.

  Args:
    strategy: the tf.distribute strategy the model was built under.
    model: logits [B,C] from the features.
    task: a ``ClassifierTask`` (its ``eval_metrics`` are summed over the whole set).
    dataset_fn: e.g. ``eval_dataset_fn(...)``; its batches carry ``example_index``.
    cache: optional dict kept by a caller that runs the same model again (evaluation
      during training): the step function is made once, traced once (a new one traces, and
      on a TPU compiles, again: 0.6 s a call for a 6-layer model on CPU).

  Returns:
    (metrics, outputs): metrics {name: sum / weight} over the set; outputs numpy arrays in
    file order: ``logits`` [N,C] float32, ``label_ids`` [N] ([N,C] multi-label),
    ``is_real_example`` [N] int32.
  """
  dataset = strategy.distribute_datasets_from_function(dataset_fn)
  gathered_keys = ("label_ids", "is_real_example", EXAMPLE_INDEX)

  def replica_fn(features):
    logits = model(features, training=False)                              # [B,C]
    sums = task.eval_metrics(logits, features)
    # Replica-context all_gather: every replica's batch, in replica order ([R*B, ...]).
    # tf.identity puts every tensor on this replica's device: MultiWorkerMirroredStrategy's
    # all_gather needs a device on each, and input tensors have none ("destinations can not
    # be empty").
    gathered = tf.distribute.get_replica_context().all_gather(tf.nest.map_structure(
        tf.identity, dict({"logits": logits}, **{k: features[k] for k in gathered_keys})),
        axis=0)
    return sums, gathered

  def bert_tf_inference_step(batch):
    sums, gathered = strategy.run(replica_fn, args=(batch,))
    sums = tf.nest.map_structure(
        lambda x: strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None), sums)
    return sums, strategy.experimental_local_results(gathered)[0]

  step_fn = loop.cached_function(cache, "run_inference", bert_tf_inference_step)

  totals, pieces = None, []
  for batch in progress.track(dataset, None, "eval batches"):
    sums, gathered = step_fn(batch)
    sums = {k: (float(s.numpy()), float(w.numpy())) for k, (s, w) in sums.items()}
    totals = sums if totals is None else {
        k: (totals[k][0] + s, totals[k][1] + w) for k, (s, w) in sums.items()}
    pieces.append({k: v.numpy() for k, v in gathered.items()})
  if totals is None:
    raise BertTfError("evaluation dataset is empty (fewer examples than one batch?)")
  outputs = {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}
  order = np.argsort(outputs.pop(EXAMPLE_INDEX), kind="stable")
  outputs = {k: v[order] for k, v in outputs.items()}
  results = {k: s / w if w else float("nan") for k, (s, w) in totals.items()}
  return results, outputs


def probabilities(logits, is_regression=False, multi_label=False):
  """logits [N,C] -> softmax probabilities [N,C] float32, the scores [N] (regression), or each
  label's sigmoid probability [N,C] (multi-label)."""
  logits = np.asarray(logits, np.float32)
  if is_regression:
    return logits[:, 0]
  if multi_label:
    return tf.math.sigmoid(logits).numpy()
  return tf.nn.softmax(logits, axis=-1).numpy()


def eval_results_for_split(glue_task, split, streaming, outputs):
  """The eval_results.txt entries of one eval split (see the module docstring).

  Args:
    glue_task: the task's `GlueTask` (metrics, key prefix of each eval split).
    split: the eval split ("dev", "dev_mismatched", ...).
    streaming: ``run_inference``'s metrics (eval_accuracy, eval_loss, loss).
    outputs: ``run_inference``'s gathered logits, label_ids, is_real_example.
  """
  prefix = glue_task.eval_splits.get(split, "eval_")
  results = {}
  for key, value in streaming.items():
    if key == "loss":  # "loss", "mm_loss"
      results[prefix[len("eval_"):] + key] = value
    else:  # "eval_loss" -> "eval_mm_loss"
      results[prefix + key[len("eval_"):]] = value
  task_values = metrics.task_metrics(glue_task, outputs["label_ids"], outputs["logits"],
                                     weights=outputs["is_real_example"], prefix=prefix)
  for key, value in task_values.items():
    results.setdefault(key, value)  # eval_accuracy: the original's (equal) streaming value.
  return results


# === Evaluation during training ===

# The metric the BERT paper reports for each GLUE task (Devlin et al. 2019, Table 1: "F1
# scores are reported for QQP and MRPC, Spearman correlations are reported for STS-B, and
# accuracy scores are reported for the other tasks"; CoLA: Matthews correlation): the default
# of --best_metric.
PAPER_METRICS = {"cola": "mcc", "mrpc": "f1", "qqp": "f1", "sts-b": "spearman"}


def default_best_metric(glue_task):
  """``eval_<metric>`` of the BERT paper for a GLUE task; for a user task accuracy
  (classification), Spearman's rho (regression) or micro F1 (multi-label)."""
  if glue_task.name in PAPER_METRICS:
    return "eval_" + PAPER_METRICS[glue_task.name]
  if glue_task.multi_label:
    return "eval_f1"
  return "eval_spearman" if glue_task.is_regression else "eval_accuracy"


def eval_result_keys(glue_task):
  """The keys of eval_results.txt (``eval_results_for_split``) over the task's eval splits,
  global_step aside."""
  keys = set()
  for prefix in glue_task.eval_splits.values():
    keys |= {prefix + "loss", prefix[len("eval_"):] + "loss"}
    keys |= {prefix + name for name in glue_task.metrics}
    if glue_task.multi_label:
      keys |= {f"{prefix}f1_{label}" for label in glue_task.labels}
    if not glue_task.is_regression:
      keys.add(prefix + "accuracy")
  return sorted(keys)


# === run_classifier ===

def written_files(glue_task, do_train, do_eval, do_predict, export_google_checkpoint,
                  eval_during_training=False):
  """What ``run_classifier`` writes over in ``output_dir`` (``fnmatch`` patterns; see
  ``bert_tf.paths``): the feature TFRecords, checkpoints, summaries and the Google export of
  training, eval_results.txt, the evaluations during training and the best checkpoint, the
  predictions and GLUE-submission files. (bert_config.json and vocab.txt are rewritten with
  the same content.)"""
  written = []
  if do_train:
    written += ["train.tf_record*", "checkpoint", "ckpt-*", "summaries/*"]
    if export_google_checkpoint:
      written += ["google/bert_model.ckpt*", "google/checkpoint"]
  if do_eval or eval_during_training:
    written += ["eval*.tf_record*"]
  if do_eval:
    written += ["eval_results.txt", "summaries/eval/*"]
  if eval_during_training:
    written += [eval_during.HISTORY_FILE, eval_during.BEST_DIR + "/*"]
  if do_predict:
    written += ["predict*.tf_record*", "test_results*.tsv"]
    written += [name for name in glue_task.predict_splits.values() if name]
  return written


def _record_file(output_dir, kind, split, first):
  """The original's train/eval/predict.tf_record; further splits add their name."""
  return os.path.join(output_dir, f"{kind}.tf_record" if first else f"{kind}_{split}.tf_record")


@frees_its_memory
@run_lock.one_run_per_output_dir(trajectory=(
    "bert_config", "task_name", "init_checkpoint", "do_lower_case", "max_seq_length",
    "train_batch_size", "learning_rate", "warmup_proportion", "optimizer_kwargs", "labels",
    "is_regression", "multi_label", "language", "classifier_dropout", "seed"))
def run_classifier(bert_config, task_name, vocab_file, output_dir, strategy, *, data_dir=None,
                   use_tfds=False, init_checkpoint=None, do_lower_case=True,
                   preserve_unused_tokens=False, max_seq_length=128, do_train=False,
                   do_eval=False, do_predict=False,
                   train_batch_size=32, eval_batch_size=8, predict_batch_size=8,
                   learning_rate=5e-5, num_train_epochs=3.0, warmup_proportion=0.1,
                   save_checkpoints_steps=1000, keep_checkpoint_max=5, steps_per_loop=1000,
                   gradient_accumulation_steps=1, dtype="float32", jit_compile=None,
                   device_loop=None, prefetch_to_device=None,
                   optimizer_kwargs=None, labels=None, is_regression=False, language="zh",
                   allow_empty_text=False, multi_label=False, label_separator=",",
                   seed=None, export_google_checkpoint=True,
                   export_dir=None, overwrite_export=False, classifier_dropout=0.1,
                   eval_during_training=False, best_metric=None, early_stopping_patience=0,
                   use_best_checkpoint=False, progress=None):
  """Fine-tunes, evaluates and/or predicts a classifier: ``run_classifier.py``.

  Args mirror the script's flags. ``bert_config``: a ``BertConfig``. ``task_name``: a GLUE /
  XNLI task of ``bert_tf.data.glue.TASKS`` or "user" (then ``labels``, ``is_regression``, or
  ``multi_label`` with ``label_separator``: ``bert_tf.data.glue.UserTaskProcessor``).
  ``use_tfds``: read the task from tensorflow-datasets (prepared under ``data_dir``, or TFDS's
  default directory) instead of the GLUE files in ``data_dir``. ``init_checkpoint``: Google,
  bert_tf or Hugging Face weights (``checkpoints.load_weights``).

  Writes to ``output_dir``: the feature TFRecords (cached), training checkpoints and
  summaries; ``eval_results.txt`` (do_eval); ``test_results.tsv`` (first predict split;
  ``test_results_<split>.tsv`` for others; multi-label: each label's sigmoid probability)
  and the GLUE submission files (do_predict);
  after training, ``google/bert_model.ckpt`` (Google's names, ``output_weights``/
  ``output_bias`` for the head) with ``bert_config.json`` and ``vocab.txt``;
  ``classifier.json`` (the label names, ``bert_tf.classifier_labels``) in both. With
  ``export_dir``: SavedModels (``bert_tf.export.export_all``); a previous export there is
  replaced only with ``overwrite_export``, any other existing content is refused before the
  run starts (``bert_tf.export.check_export_dir``).

  ``eval_during_training``: the dev set(s) are evaluated at every checkpoint training saves;
  ``eval_history.jsonl``, TensorBoard's ``summaries/eval`` and ``best/``, the checkpoint with
  the best ``best_metric`` (a key of eval_results.txt; default ``default_best_metric``), with
  its config, vocab and labels (``training.eval_during_training``). ``early_stopping_patience``
  N > 0: training stops after N evaluations in a row without a better one.
  ``use_best_checkpoint``: eval, predict, the exports and ``google/`` use ``best/``'s weights
  instead of the last ones (with or without training).

  Refused before the model is built, as one-line ``BertTfError``s: an output over one of its
  inputs or an output folder that cannot be written (``bert_tf.paths``), a split the run
  needs with no examples, a vocab without [UNK]/[CLS]/[SEP], and a run without training that
  has no trained weights to use (``training.preflight``).

  Returns:
    {"train": {...}, "eval": {...}, "predict": {split: test_results path}, "export": dir}
    for the phases run.
  """
  progress = progress or log_line
  reads_data = do_train or do_eval or do_predict
  if not (reads_data or export_dir):
    raise BertTfError("at least one of --do_train, --do_eval or --do_predict must be True "
                      "(or --export_dir to export a fine-tuned checkpoint)")
  if export_dir:
    from bert_tf import export  # pylint: disable=import-outside-toplevel
    export.check_export_dir(export_dir, overwrite=overwrite_export, output_dir=output_dir)
  if max_seq_length > bert_config.max_position_embeddings:
    raise BertTfError(
        f"--max_seq_length {max_seq_length} exceeds max_position_embeddings "
        f"{bert_config.max_position_embeddings} of the BERT config (the model was only "
        "trained up to that length)")
  preflight.check_at_least({"--save_checkpoints_steps": (save_checkpoints_steps, 0)})
  preflight.keep_checkpoint_max(keep_checkpoint_max)
  replicas = strategy.num_replicas_in_sync
  for flag, size, parts in (("train_batch_size", train_batch_size,
                             replicas * gradient_accumulation_steps),
                            ("eval_batch_size", eval_batch_size, replicas),
                            ("predict_batch_size", predict_batch_size, replicas)):
    if size < 1 or size % parts:
      raise BertTfError(f"--{flag} {size} must be a positive multiple of {parts} "
                        f"({replicas} replica(s)"
                        f"{' x gradient_accumulation_steps' if flag == 'train_batch_size' else ''})")
  best_dir = os.path.join(output_dir, eval_during.BEST_DIR)
  eval_during.check_flags(do_train, eval_during_training, best_metric,
                          early_stopping_patience, use_best_checkpoint, best_dir)
  fileio.require_file(vocab_file, "vocab file", "vocab_file")
  tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
  if init_checkpoint is not None and not (tf.io.gfile.exists(init_checkpoint) or
                                          tf.io.gfile.exists(init_checkpoint + ".index")):
    raise BertTfError(f"checkpoint not found (--init_checkpoint): {init_checkpoint!r}")
  if use_tfds and (task_name or "").strip().lower() == glue.USER_TASK:
    raise BertTfError("--tfds reads GLUE tasks only; a user task reads --data_dir")
  if reads_data and not use_tfds and not data_dir:
    raise BertTfError("no --data_dir given (or --tfds to read the task from "
                      "tensorflow-datasets)")
  if reads_data and not use_tfds and not tf.io.gfile.isdir(data_dir):
    # (Said before the labels are looked for in it: "no train.tsv in 'nodir'" hid the typo.)
    raise BertTfError(f"--data_dir {data_dir!r}: "
                      f"{'not a folder' if tf.io.gfile.exists(data_dir) else 'no such folder'}")

  processor = glue.get_processor(task_name, data_dir=data_dir, labels=labels,
                                 is_regression=is_regression, language=language,
                                 allow_empty_text=allow_empty_text, multi_label=multi_label,
                                 label_separator=label_separator)
  label_list = processor.get_labels()
  glue_task = processor.task  # The user task's table entry exists once labels are known.
  fine_tuned_with = {
      "task_name": glue_task.name,
      "labels": [] if glue_task.is_regression else [str(x) for x in label_list],
      "is_regression": bool(glue_task.is_regression),
      "multi_label": bool(glue_task.multi_label), "do_lower_case": bool(do_lower_case)}
  if loop.latest_checkpoint(output_dir):
    classifier_labels.check_unchanged(output_dir, classifier_labels.read(output_dir),
                                      fine_tuned_with, classifier_labels.FILE_NAME)
  elif not do_train and not use_best_checkpoint:  # the head is --init_checkpoint's
    classifier_labels.check_init_checkpoint(init_checkpoint, fine_tuned_with,
                                            classifier_labels.FILE_NAME)
  spec = classifier_features.feature_spec(
      max_seq_length, glue_task.is_regression,
      multi_labels=glue_task.num_labels if glue_task.multi_label else 0)
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case,
                                         preserve_unused_tokens=preserve_unused_tokens)
  preflight.check_tokenizer(tokenizer, vocab_file, bert_config, do_lower_case,
                            init_checkpoint, progress)

  def source(split):
    return (f"tensorflow-datasets glue {glue_task.name} {split}" if use_tfds else
            processor.split_file(data_dir, split))

  def read(split, phase):
    if use_tfds:
      examples = processor.get_tfds_examples(split, data_dir)
    else:
      examples = processor.get_examples(data_dir, split)
    where = source(split)
    if not examples:
      raise BertTfError(f"{where}: no examples (empty, or a header only); {phase} needs some")
    return examples

  def features(examples, kind, split, first, batch_size=None):
    if batch_size:
      examples = classifier_features.pad_to_batch(examples, batch_size)
    path = _record_file(output_dir, kind, split, first)
    classifier_features.cached_convert_examples_to_features(
        examples, label_list, max_seq_length, tokenizer, path,
        is_regression=glue_task.is_regression, multi_label=glue_task.multi_label)
    return path

  for phase, wanted, splits in (("--do_train", do_train, [glue_task.train_split]),
                                ("--do_eval", do_eval, list(glue_task.eval_splits)),
                                ("--eval_during_training", eval_during_training,
                                 list(glue_task.eval_splits)),
                                ("--do_predict", do_predict, list(glue_task.predict_splits))):
    if wanted and not [s for s in splits if s]:
      raise BertTfError(f"{phase}: task {glue_task.name} has no data for it")
  if eval_during_training:
    best_metric = eval_during.resolve_best_metric(
        best_metric, default_best_metric(glue_task), eval_result_keys(glue_task),
        f"task {glue_task.name}")
  paths.check_paths(
      inputs={"--vocab_file": vocab_file, "--init_checkpoint": init_checkpoint,
              "--data_dir": None if use_tfds else data_dir},
      outputs={"--output_dir": paths.Folder(output_dir, written_files(
          glue_task, do_train, do_eval, do_predict, export_google_checkpoint,
          eval_during_training)),
               "--export_dir": export_dir and paths.Folder(export_dir)})
  # Every split the run will need is read now: a missing or empty dev.tsv is found before
  # training, not after it.
  train_examples = read(glue_task.train_split, "--do_train") if do_train else None
  if do_train:  # Resumed checkpoints go on through the examples they were trained on.
    run_lock.check_training_data(
        "classifier-train", ([e.text_a, e.text_b, e.label] for e in train_examples),
        source(glue_task.train_split))
  eval_phase = "--do_eval" if do_eval else "--eval_during_training"
  eval_examples = ({split: read(split, eval_phase) for split in glue_task.eval_splits}
                   if do_eval or eval_during_training else {})
  predict_examples = ({split: read(split, "--do_predict") for split in glue_task.predict_splits}
                      if do_predict else {})
  phase = next(p for p, wanted in (("--do_eval", do_eval), ("--do_predict", do_predict),
                                   ("--export_dir", True)) if wanted)
  if not do_train and use_best_checkpoint:
    eval_during.require_best(best_dir)
  elif not do_train:
    preflight.require_weights(phase, loop.has_checkpoint(output_dir),
                              init_checkpoint, output_dir)

  # The config and vocab beside the checkpoints: the folder loads alone (bert_tf.load).
  # (A run without training writes them at its end: a refused one writes nothing.)
  if do_train and distribution.is_chief(strategy):
    loop.write_model_files_if_fresh(bert_config, output_dir, vocab_file)
  write_labels = lambda folder: classifier_labels.write(  # noqa: E731
      folder, label_list, is_regression=glue_task.is_regression,
      multi_label=glue_task.multi_label, task_name=glue_task.name,
      do_lower_case=do_lower_case, max_seq_length=max_seq_length)
  if do_train and distribution.is_chief(strategy) and not loop.latest_checkpoint(output_dir):
    write_labels(output_dir)  # The label names: bert_tf.load(output_dir).classify(...)
  if seed is not None:
    keras.utils.set_random_seed(seed)
  task = ClassifierTask(bert_config, glue_task.num_labels, is_regression=glue_task.is_regression,
                        classifier_dropout=classifier_dropout,
                        multi_label=glue_task.multi_label)
  dataset_for = functools.partial(classifier_features.make_dataset, spec=spec)
  with strategy.scope():
    model = task.build_model(dtype=DTYPE_POLICIES[dtype])
  results = {}
  # Multi-worker: only the chief writes summaries, the export, eval and predict results.
  chief = distribution.is_chief(strategy)
  eval_files = {}
  hook = None  # evaluation during training
  inference_cache = {}  # run_inference's step, traced once a run

  def evaluate_dev():
    """eval_results.txt's entries (global_step aside) of the model's weights, every split."""
    values = {}
    for i, split in enumerate(glue_task.eval_splits):
      examples = eval_examples[split]
      if split not in eval_files:  # Converted once a run.
        eval_files[split] = features(examples, "eval", split, i == 0, eval_batch_size)
      progress(f"***** Running evaluation: {split} *****  examples {len(examples)}, "
               f"batch size {eval_batch_size}")
      with record_check.naming_damaged_records([eval_files[split]], record_check.CACHE_ADVICE):
        streaming, outputs = run_inference(
            strategy, model, task, eval_dataset_fn(eval_files[split], max_seq_length,
                                                   eval_batch_size, make_dataset=dataset_for),
            cache=inference_cache)
      values.update(eval_results_for_split(glue_task, split, streaming, outputs))
    return values

  if do_train:
    num_train_steps = int(len(train_examples) / train_batch_size * num_train_epochs)
    num_warmup_steps = int(num_train_steps * warmup_proportion)
    if num_train_steps < 1:
      raise BertTfError(
          f"{len(train_examples)} training examples / --train_batch_size {train_batch_size} "
          f"x --num_train_epochs {num_train_epochs} gives no training step")
    train_file = features(train_examples, "train", glue_task.train_split, True)
    progress(f"***** Running training *****  examples {len(train_examples)}, batch size "
             f"{train_batch_size}, steps {num_train_steps} (warmup {num_warmup_steps})")
    optimizer = loop.make_optimizer(strategy, learning_rate, num_train_steps,
                                    num_warmup_steps, dtype, optimizer_kwargs)
    trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
        model_dir=output_dir, num_train_steps=num_train_steps, steps_per_loop=steps_per_loop,
        save_checkpoints_steps=save_checkpoints_steps, keep_checkpoint_max=keep_checkpoint_max,
        gradient_accumulation_steps=gradient_accumulation_steps, jit_compile=jit_compile,
        device_loop=device_loop, prefetch_to_device=prefetch_to_device,
        global_batch_size=train_batch_size, seq_length=max_seq_length))

    def train_dataset_fn(ctx):
      return dataset_for(
          train_file, max_seq_length, train_batch_size, is_training=True, drop_remainder=True,
          input_context=ctx, seed=seed)

    init_fn = None
    if init_checkpoint:
      init_fn = lambda m: progress(str(checkpoints.load_weights(m, init_checkpoint)))  # noqa: E731
    if eval_during_training:
      def write_best_files(folder):
        loop.write_model_files(bert_config, folder, vocab_file)
        write_labels(folder)
      hook = eval_during.EvalDuringTraining(
          strategy, model, evaluate_dev, output_dir, best_metric,
          patience=early_stopping_patience, write_files=write_best_files, progress=progress,
          eval_data=eval_during.data_fingerprint(
              # Each dev split's features (the feature cache's key: examples, labels, length,
              # tokenizer), and eval_batch_size (`loss` counts the last batch's padding).
              "classifier", eval_batch_size,
              {split: classifier_features.features_fingerprint(
                  examples, label_list, max_seq_length, tokenizer,
                  is_regression=glue_task.is_regression, multi_label=glue_task.multi_label)
               for split, examples in eval_examples.items()}))
    else:
      eval_during.note_kept_best(best_dir, progress)
    with record_check.naming_damaged_records([train_file], record_check.CACHE_ADVICE):
      results["train"] = trainer.train(train_dataset_fn, init_fn=init_fn,
                                       summary_writer=(loop.summary_writer(output_dir)
                                                       if chief else None),
                                       progress=progress, checkpoint_hook=hook)
    global_step = results["train"]["global_step"]
    if use_best_checkpoint:
      global_step = eval_during.restore_best(model, best_dir, progress)
    if export_google_checkpoint and chief:
      write_labels(loop.export_google_folder(model, bert_config, output_dir, global_step,
                                             vocab_file))
  else:
    global_step = eval_during.restore_without_training(
        model, output_dir, init_checkpoint, phase, use_best_checkpoint, progress)

  if do_eval:
    # The weights were evaluated during training: their entry of the history is the result.
    done = hook.evaluated(global_step) if hook else None
    if done is not None:
      progress(f"evaluation of step {global_step}: done during training")
      eval_results = done
    else:
      eval_results = evaluate_dev()
    eval_results["global_step"] = global_step
    if chief:
      loop.write_eval_results(os.path.join(output_dir, "eval_results.txt"), eval_results)
      if done is None:  # (during training, its scalars were written then)
        loop.write_eval_summaries(output_dir, eval_results, global_step)
    results["eval"] = eval_results

  if do_predict:
    results["predict"] = {}
    # Every predict split's files at once, when all are made (fileio.write_together): a run
    # stopped during MNLI's second split left the first's new files beside the second's old.
    outputs_of_run = {}
    for i, split in enumerate(glue_task.predict_splits):
      examples = predict_examples[split]
      predict_file = features(examples, "predict", split, i == 0, predict_batch_size)
      progress(f"***** Running prediction: {split} *****  examples {len(examples)}, "
               f"batch size {predict_batch_size}")
      with record_check.naming_damaged_records([predict_file], record_check.CACHE_ADVICE):
        _, outputs = run_inference(
            strategy, model, task, eval_dataset_fn(predict_file, max_seq_length,
                                                   predict_batch_size, make_dataset=dataset_for))
      values = probabilities(outputs["logits"], glue_task.is_regression, glue_task.multi_label)
      path = os.path.join(output_dir,
                          "test_results.tsv" if i == 0 else f"test_results_{split}.tsv")
      results["predict"][split] = path
      if not chief:
        continue
      glue.write_test_results(path, values, num_actual_examples=len(examples),
                              into=outputs_of_run)
      results["predict"][split] = path
      if glue_task.predict_splits[split]:
        glue.write_glue_submission(output_dir, glue_task, split, values,
                                   num_actual_examples=len(examples), into=outputs_of_run)
    if chief:
      fileio.write_together(outputs_of_run)

  if export_dir and chief:
    from bert_tf import export  # pylint: disable=import-outside-toplevel
    preflight.note_unused_tokens_in_export(preserve_unused_tokens, progress)
    results["export"] = export.export_all(
        model, export_dir, vocab_file=vocab_file, do_lower_case=do_lower_case,
        max_seq_length=max_seq_length, labels=label_list, overwrite=overwrite_export,
        multi_label=glue_task.multi_label)
    progress(f"exported SavedModels to {export_dir}")
  # The run went through: its checkpoints fit this config. Not into a folder without any (an
  # eval, predict or export of --init_checkpoint): a config without weights loads as nothing.
  if distribution.is_chief(strategy) and loop.latest_checkpoint(output_dir):
    loop.write_model_files(bert_config, output_dir, vocab_file)
    write_labels(output_dir)
  return results
