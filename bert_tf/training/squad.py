"""SQuAD fine-tuning: the span task, prediction over a TFRecord, and ``run_squad``.

Shape legend: B = batch (per replica inside ``strategy.run``), S = max_seq_length.

Loss, as the original's ``model_fn`` (``run_squad.py``):
  start_loss = mean over the batch of -log softmax(start_logits)[start_positions]
  end_loss   = the same for the end
  loss       = (start_loss + end_loss) / 2
The mean is over the GLOBAL batch (``training.loop``): numerator sum(nll_start + nll_end),
denominator 2 B summed over replicas.

Prediction runs the model over the whole predict TFRecord (padded with rows of unique_id
``PADDING_UNIQUE_ID`` to a whole number of global batches, so every replica gets full,
static-shape batches, as a TPU needs) and returns one ``postprocess.RawResult`` per real
feature; the padding rows are dropped.
"""

import dataclasses
import hashlib
import json
import os
import random
import tempfile

import keras
import numpy as np
import tensorflow as tf

from bert_tf import fileio, progress, quiet, run_lock, tokenization
from bert_tf import paths as path_checks  # (run_squad has a local "paths")
from bert_tf.data import record_check
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertSpanLabeler, checkpoints, models
from bert_tf.progress import log_line
from bert_tf.squad import evaluate as squad_evaluate
from bert_tf.squad import examples as squad_examples
from bert_tf.squad import features as squad_features
from bert_tf.squad import postprocess
from bert_tf.training import DTYPE_POLICIES, distribution, frees_its_memory, loop, preflight
from bert_tf.training import eval_during_training as eval_during

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"
EVAL_SCORES_FILE = "eval_results.json"
EVAL_RESULTS_FILE = "eval_results.txt"
TRAIN_RECORD_FILE = "train.tf_record"
PREDICT_RECORD_FILE = "eval.tf_record"  # The original's name for the predict features.


def _span_nll(logits, positions):
  """logits [B,S], positions [B] -> [B] float32, -log softmax(logits)[position]."""
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)        # [B,S]
  positions = tf.cast(tf.reshape(positions, [-1]), tf.int32)                 # [B]
  return -tf.gather(log_probs, positions, batch_dims=1)


class SquadTask:
  """Start/end span labelling on every token (``BertSpanLabeler``).

  Implements the ``training.loop`` task interface. Features: ``input_ids``, ``input_mask``,
  ``segment_ids`` [B,S] int32, ``start_positions``, ``end_positions`` [B] int32.
  """

  def __init__(self, config):
    self.config = config

  def build_model(self, dtype=None):
    return BertSpanLabeler(self.config, dtype=dtype)

  def loss_denominators(self, features):
    batch = tf.shape(features["start_positions"])[0]
    return {"squad": 2.0 * tf.cast(batch, tf.float32)}

  def loss_numerators(self, outputs, features):
    start_nll = _span_nll(outputs["start_logits"], features["start_positions"])
    end_nll = _span_nll(outputs["end_logits"], features["end_positions"])
    return {"squad": tf.reduce_sum(start_nll + end_nll)}

  def eval_metrics(self, outputs, features):
    """{name: (sum, weight)} of one batch on one replica (``training.loop.evaluate``).

    On training-format records: ``loss`` ((start + end nll) / 2 per feature, mean over all
    features), ``start_accuracy``, ``end_accuracy`` (argmax equals the label).
    """
    metrics = {}
    total = None
    for name in ("start", "end"):
      logits = outputs[f"{name}_logits"]
      positions = tf.cast(tf.reshape(features[f"{name}_positions"], [-1]), tf.int32)
      nll = _span_nll(logits, positions)
      total = nll if total is None else total + nll
      correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), positions),
                        tf.float32)
      count = tf.cast(tf.size(positions), tf.float32)
      metrics[f"{name}_accuracy"] = (tf.reduce_sum(correct), count)
    metrics["loss"] = (tf.reduce_sum(total) / 2.0, count)
    return metrics


# === Prediction ===

def _padding_feature(max_seq_length):
  zeros = [0] * max_seq_length
  return squad_features.InputFeatures(
      unique_id=squad_features.PADDING_UNIQUE_ID, example_index=-1, doc_span_index=0,
      tokens=[], token_to_orig_map={}, token_is_max_context={}, input_ids=zeros,
      input_mask=zeros, segment_ids=zeros)


def write_predict_features(examples, tokenizer, path, max_seq_length, doc_stride,
                           max_query_length, batch_size):
  """Converts prediction examples, writes them to ``path`` (atomically) and returns them.

  The file is padded with ``PADDING_UNIQUE_ID`` rows to a multiple of ``batch_size``.
  Returns the list of real ``InputFeatures`` (post-processing needs their token maps).
  """
  features = []
  with squad_features.FeatureWriter(path, is_training=False) as writer:
    for feature in squad_features.convert_examples_to_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training=False):
      features.append(feature)
      writer.write(feature)
    for _ in range(-len(features) % batch_size):
      writer.write(_padding_feature(max_seq_length))
  return features


# Each run (or model) compiles its own prediction step (bert_tf.quiet).
quiet.per_run_functions("predict.<locals>.bert_tf_predict_step ")


def predict(strategy, model, input_file, max_seq_length, batch_size, cache=None):
  """Start/end logits of every feature in a predict TFRecord (``write_predict_features``).

  Args:
    strategy: the tf.distribute strategy the model was built under.
    model: a ``BertSpanLabeler``-like model (features -> start_logits, end_logits [B,S]).
    input_file: the TFRecord, padded to a multiple of ``batch_size`` records.
    max_seq_length: S.
    batch_size: the global batch size (a multiple of the number of replicas).
    cache: as ``loop.cached_function``'s (evaluation during training predicts again).
  Returns:
    list of ``postprocess.RawResult`` (unique_id, start_logits [S], end_logits [S] float32
    numpy), one per real feature, in no particular order; padding rows are dropped.
  """
  def dataset_fn(ctx):
    return squad_features.input_dataset(input_file, max_seq_length, is_training=False,
                                        batch_size=batch_size, drop_remainder=True,
                                        input_context=ctx)

  def replica_fn(features):
    outputs = model(features, training=False)
    return {"unique_ids": features["unique_ids"],
            "start_logits": tf.cast(outputs["start_logits"], tf.float32),
            "end_logits": tf.cast(outputs["end_logits"], tf.float32)}

  def bert_tf_predict_step(batch):
    return strategy.run(replica_fn, args=(batch,))

  step_fn = loop.cached_function(cache, "predict", bert_tf_predict_step)

  results = []
  batches = strategy.distribute_datasets_from_function(dataset_fn)
  for batch in progress.track(batches, None, "predict batches"):
    outputs = step_fn(batch)
    local = {k: np.concatenate([x.numpy() for x in strategy.experimental_local_results(v)])
             for k, v in outputs.items()}
    for unique_id, start, end in zip(local["unique_ids"], local["start_logits"],
                                     local["end_logits"]):
      if int(unique_id) != squad_features.PADDING_UNIQUE_ID:
        results.append(postprocess.RawResult(int(unique_id), start, end))
  return results


# === Training features (cached) ===

def _train_fingerprint(examples, tokenizer, max_seq_length, doc_stride, max_query_length):
  """A hash of everything train.tf_record depends on (examples in order, lengths, tokenizer)."""
  # pylint: disable-next=import-outside-toplevel
  from bert_tf.data.classifier_features import tokenizer_fingerprint
  h = hashlib.sha256()
  h.update(json.dumps({"format": "squad-train-1", "max_seq_length": max_seq_length,
                       "doc_stride": doc_stride, "max_query_length": max_query_length,
                       "tokenizer": tokenizer_fingerprint(tokenizer)}).encode())
  for example in examples:
    h.update(json.dumps(dataclasses.astuple(example)).encode("utf-8", "surrogatepass"))
    h.update(b"\n")
  return h.hexdigest()


def cached_train_features(examples, tokenizer, path, max_seq_length, doc_stride,
                          max_query_length):
  """Writes the training TFRecord unless ``path`` already holds the same features.

  A sidecar ``<path>.meta.json`` records the fingerprint of the examples (in order), the
  lengths and the tokenizer, and the feature count; both files are written atomically, the
  sidecar last. Returns {"num_features", "fingerprint", "cached"}.
  """
  fingerprint = _train_fingerprint(examples, tokenizer, max_seq_length, doc_stride,
                                   max_query_length)
  meta_file = path + ".meta.json"
  if tf.io.gfile.exists(path) and tf.io.gfile.exists(meta_file):
    try:
      with tf.io.gfile.GFile(meta_file, "r") as f:
        meta = json.load(f)
    except (ValueError, tf.errors.OpError):
      meta = {}
    if meta.get("fingerprint") == fingerprint and record_check.reusable(path):
      return dict(meta, cached=True)
  if tf.io.gfile.exists(meta_file):
    tf.io.gfile.remove(meta_file)  # The TFRecord is about to change.
  with squad_features.FeatureWriter(path, is_training=True) as writer:
    for feature in squad_features.convert_examples_to_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training=True):
      writer.write(feature)
  meta = {"fingerprint": fingerprint, "num_features": writer.num_features,
          "num_examples": len(examples)}
  with fileio.atomic_write(meta_file, "w") as f:
    json.dump(meta, f, indent=2, sort_keys=True)
  return dict(meta, cached=False)


# === run_squad ===

# The official evaluation's scores --best_metric may name (v2.0: "HasAns_"/"NoAns_" ones only
# where the predict_file has such questions).
EVAL_KEYS_V1 = ("exact_match", "f1")
EVAL_KEYS_V2 = ("exact", "f1", "best_exact", "best_f1", "HasAns_exact", "HasAns_f1",
                "NoAns_exact", "NoAns_f1")


def written_files(do_train, do_predict, do_eval, export_google_checkpoint,
                  eval_during_training=False):
  """What ``run_squad`` writes over in ``output_dir`` (``fnmatch`` patterns; see
  ``bert_tf.paths``). (bert_config.json and vocab.txt are rewritten with the same content.)"""
  written = []
  if eval_during_training:
    written += [PREDICT_RECORD_FILE + "*", eval_during.HISTORY_FILE, eval_during.BEST_DIR + "/*"]
  if do_train:
    written += [TRAIN_RECORD_FILE + "*", "checkpoint", "ckpt-*", "summaries/*"]
    if export_google_checkpoint:
      written += ["google/bert_model.ckpt*", "google/checkpoint"]
  if do_predict:
    # A predict run also removes the earlier run's null odds and scores that would lie
    # beside its predictions without being theirs (see run_squad).
    written += [PREDICT_RECORD_FILE + "*", PREDICTIONS_FILE, NBEST_FILE, NULL_ODDS_FILE,
                EVAL_SCORES_FILE, EVAL_RESULTS_FILE]
  if do_eval:
    written += [EVAL_SCORES_FILE, EVAL_RESULTS_FILE, "summaries/eval/*"]
  return written


def _check_flags(bert_config, strategy, *, vocab_file, init_checkpoint, do_lower_case,
                 train_file, predict_file, do_train, do_predict, do_eval, export_dir,
                 max_seq_length,
                 doc_stride, max_query_length, train_batch_size, predict_batch_size,
                 gradient_accumulation_steps, n_best_size, max_answer_length,
                 save_checkpoints_steps, keep_checkpoint_max, eval_during_training=False):
  """The original's ``validate_flags_or_throw`` and more, as one-line ``BertTfError``s."""
  if not (do_train or do_predict or export_dir):
    raise BertTfError("at least one of --do_train or --do_predict must be True (or an "
                      "--export_dir to export a fine-tuned checkpoint)")
  if eval_during_training and not predict_file:
    raise BertTfError("--eval_during_training scores predictions of --predict_file (a SQuAD "
                      "file with answers, e.g. dev-v1.1.json): give one")
  if do_eval and not do_predict:
    raise BertTfError("--do_eval scores the predictions of --do_predict: set --do_predict=True")
  if do_train and not train_file:
    raise BertTfError("--do_train needs --train_file")
  if do_predict and not predict_file:
    raise BertTfError("--do_predict needs --predict_file")
  fileio.require_file(vocab_file, "vocab file", "vocab_file")
  if do_train:
    fileio.require_file(train_file, "SQuAD file", "train_file")
  if do_predict or eval_during_training:
    fileio.require_file(predict_file, "SQuAD file", "predict_file")
  tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
  if init_checkpoint and not (tf.io.gfile.exists(init_checkpoint) or
                              tf.io.gfile.exists(init_checkpoint + ".index")):
    raise BertTfError(f"checkpoint not found (--init_checkpoint): {init_checkpoint!r}")
  if max_seq_length > bert_config.max_position_embeddings:
    raise BertTfError(
        f"--max_seq_length {max_seq_length} exceeds max_position_embeddings "
        f"{bert_config.max_position_embeddings} of the BERT config (the model was only "
        "trained up to that length)")
  squad_features.check_lengths(max_seq_length, doc_stride, max_query_length)
  if n_best_size < 1:
    raise BertTfError(f"--n_best_size must be at least 1, got {n_best_size}")
  if max_answer_length < 1:
    raise BertTfError(f"--max_answer_length must be at least 1, got {max_answer_length}")
  preflight.check_at_least({"--save_checkpoints_steps": (save_checkpoints_steps, 0)})
  preflight.keep_checkpoint_max(keep_checkpoint_max)
  replicas = strategy.num_replicas_in_sync
  for flag, size, parts, why in (
      ("train_batch_size", train_batch_size, replicas * gradient_accumulation_steps,
       " x gradient_accumulation_steps"),
      ("predict_batch_size", predict_batch_size, replicas, "")):
    if size < 1 or size % parts:
      raise BertTfError(f"--{flag} {size} must be a positive multiple of {parts} "
                        f"({replicas} replica(s){why})")


@frees_its_memory
@run_lock.one_run_per_output_dir(trajectory=(
    "bert_config", "init_checkpoint", "do_lower_case", "max_seq_length", "doc_stride",
    "max_query_length", "train_batch_size", "learning_rate", "warmup_proportion",
    "optimizer_kwargs", "version_2_with_negative", "seed"))
def run_squad(bert_config, vocab_file, output_dir, strategy, *, train_file=None,
              predict_file=None, init_checkpoint=None, do_lower_case=True,
              preserve_unused_tokens=False, max_seq_length=384,
              doc_stride=128, max_query_length=64, do_train=False, do_predict=False,
              do_eval=False, train_batch_size=32, predict_batch_size=8, learning_rate=5e-5,
              num_train_epochs=3.0, warmup_proportion=0.1, save_checkpoints_steps=1000,
              keep_checkpoint_max=5, steps_per_loop=1000, gradient_accumulation_steps=1,
              dtype="float32", jit_compile=None, device_loop=None, prefetch_to_device=None,
              optimizer_kwargs=None, n_best_size=20,
              max_answer_length=30, verbose_logging=False, version_2_with_negative=False,
              null_score_diff_threshold=0.0, seed=None, export_google_checkpoint=True,
              export_dir=None, overwrite_export=False, eval_during_training=False,
              best_metric=None, early_stopping_patience=0, use_best_checkpoint=False,
              progress=None):
  """Fine-tunes on SQuAD and/or predicts (and scores) answers: ``run_squad.py``.

  Args mirror the script's flags. ``bert_config``: a ``BertConfig``. ``init_checkpoint``:
  Google, bert_tf or Hugging Face weights (``checkpoints.load_weights``).

  As the original: the training examples are read (questions whose answer is not at its
  ``answer_start`` are skipped), num_train_steps = int(examples / train_batch_size *
  num_train_epochs), warmup int(num_train_steps * warmup_proportion), and the examples are
  shuffled with ``random.Random(12345)`` before the features are made.

  Writes to ``output_dir``: ``train.tf_record`` (cached, with ``.meta.json``) and
  ``eval.tf_record`` (the predict features), training checkpoints and summaries; after
  training ``google/bert_model.ckpt`` (Google's names, ``cls/squad/output_weights``/
  ``output_bias`` for the head) with ``bert_config.json`` and ``vocab.txt``; with
  ``do_predict`` ``predictions.json``, ``nbest_predictions.json`` and (v2.0)
  ``null_odds.json``; with ``do_eval`` the official evaluation's scores of those predictions
  against ``predict_file`` in ``eval_results.json`` (the scripts' JSON) and
  ``eval_results.txt`` (``key = value``, with global_step); a predict run removes an earlier
  run's files that are not of its predictions (``null_odds.json`` under v1.1,
  ``eval_results.*`` without ``do_eval``). With ``export_dir``: the
  question-answering SavedModel (``bert_tf.squad.export``); a previous export there is
  replaced only with ``overwrite_export``, any other existing content is refused before the
  run starts (``bert_tf.export.check_export_dir``).

  ``eval_during_training``: at every checkpoint training saves, the answers to
  ``predict_file`` are predicted and scored by the official evaluation (``f1``,
  ``exact_match``; v2.0 ``exact``, ``best_f1``, ...), the checkpoint with the best
  ``best_metric`` (default ``f1``) kept in ``best/``; ``early_stopping_patience`` and
  ``use_best_checkpoint`` as ``run_classifier``'s (``training.eval_during_training``).

  Refused before the model is built, as one-line ``BertTfError``s: an output over one of its
  inputs or an output folder that cannot be written (``bert_tf.paths``), a split the run
  needs with no examples, a vocab without [UNK]/[CLS]/[SEP], and a run without training that
  has no trained weights to use (``training.preflight``).

  Returns:
    {"train": {...}, "predict": {...}, "eval": {...}, "export": dir} for the phases run.
  """
  progress = progress or log_line
  _check_flags(bert_config, strategy, vocab_file=vocab_file, init_checkpoint=init_checkpoint,
               do_lower_case=do_lower_case, train_file=train_file, predict_file=predict_file,
               do_train=do_train, do_predict=do_predict, do_eval=do_eval,
               export_dir=export_dir, max_seq_length=max_seq_length, doc_stride=doc_stride,
               max_query_length=max_query_length, train_batch_size=train_batch_size,
               predict_batch_size=predict_batch_size,
               gradient_accumulation_steps=gradient_accumulation_steps,
               n_best_size=n_best_size, max_answer_length=max_answer_length,
               save_checkpoints_steps=save_checkpoints_steps,
               keep_checkpoint_max=keep_checkpoint_max,
               eval_during_training=eval_during_training)
  best_dir = os.path.join(output_dir, eval_during.BEST_DIR)
  eval_during.check_flags(do_train, eval_during_training, best_metric, early_stopping_patience,
                          use_best_checkpoint, best_dir)
  if eval_during_training:
    best_metric = eval_during.resolve_best_metric(
        best_metric, "f1", EVAL_KEYS_V2 if version_2_with_negative else EVAL_KEYS_V1,
        f"the SQuAD {'v2.0' if version_2_with_negative else 'v1.1'} evaluation")
  if export_dir:
    from bert_tf import export  # pylint: disable=import-outside-toplevel
    export.check_export_dir(export_dir, overwrite=overwrite_export, output_dir=output_dir)
  path_checks.check_paths(
      inputs={"--vocab_file": vocab_file, "--init_checkpoint": init_checkpoint,
              "--train_file": train_file if do_train else None,
              "--predict_file": predict_file if do_predict or eval_during_training else None},
      outputs={"--output_dir": path_checks.Folder(output_dir, written_files(
          do_train, do_predict, do_eval, export_google_checkpoint, eval_during_training)),
               "--export_dir": export_dir and path_checks.Folder(export_dir)})
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case,
                                         preserve_unused_tokens=preserve_unused_tokens)
  preflight.check_tokenizer(tokenizer, vocab_file, bert_config, do_lower_case,
                            init_checkpoint, progress)
  # Read now, so that a predict_file without questions is found before training.
  predict_examples = None
  if do_predict or eval_during_training:
    predict_examples = squad_examples.read_squad_examples(
        predict_file, is_training=False,
        version_2_with_negative=version_2_with_negative).examples
    if not predict_examples:
      raise BertTfError(f"{predict_file}: no questions; "
                        f"{'--do_predict' if do_predict else '--eval_during_training'} needs "
                        "some")
  phase = "--do_predict" if do_predict else "--export_dir"
  if not do_train and use_best_checkpoint:
    eval_during.require_best(best_dir)
  elif not do_train:
    preflight.require_weights(phase, loop.has_checkpoint(output_dir),
                              init_checkpoint, output_dir)
  # The config and vocab beside the checkpoints: the folder loads alone (bert_tf.load).
  # (A run without training writes them at its end: a refused one writes nothing.)
  if do_train and distribution.is_chief(strategy):
    loop.write_model_files_if_fresh(bert_config, output_dir, vocab_file)
  if seed is not None:
    keras.utils.set_random_seed(seed)
  task = SquadTask(bert_config)
  with strategy.scope():
    model = task.build_model(dtype=DTYPE_POLICIES[dtype])
  results = {}
  predicted = {}  # The predict features, made once a run.
  predict_cache = {}  # predict's step, traced once a run

  def predict_answers(folder):
    """The model's answers to predict_file in ``folder``: the files of PREDICTIONS_FILE,
    NBEST_FILE and (v2.0) NULL_ODDS_FILE, by name."""
    record = os.path.join(output_dir, PREDICT_RECORD_FILE)
    if "features" not in predicted:
      predicted["features"] = write_predict_features(
          predict_examples, tokenizer, record, max_seq_length, doc_stride, max_query_length,
          predict_batch_size)
    predict_features = predicted["features"]
    progress(f"***** Running predictions *****  examples {len(predict_examples)}, "
             f"features {len(predict_features)}, batch size {predict_batch_size}")
    with record_check.naming_damaged_records([record], record_check.CACHE_ADVICE):
      raw_results = predict(strategy, model, record, max_seq_length, predict_batch_size,
                            cache=predict_cache)
    paths = {name: os.path.join(folder, name)
             for name in (PREDICTIONS_FILE, NBEST_FILE, NULL_ODDS_FILE)}
    postprocess.write_predictions(
        predict_examples, predict_features, raw_results, n_best_size, max_answer_length,
        do_lower_case, paths[PREDICTIONS_FILE], paths[NBEST_FILE], paths[NULL_ODDS_FILE],
        version_2_with_negative=version_2_with_negative,
        null_score_diff_threshold=null_score_diff_threshold, verbose_logging=verbose_logging)
    if not version_2_with_negative:
      del paths[NULL_ODDS_FILE]
    return paths

  def score(paths):
    return squad_evaluate.evaluate_files(
        predict_file, paths[PREDICTIONS_FILE], null_odds_file=paths.get(NULL_ODDS_FILE),
        version_2_with_negative=version_2_with_negative)

  def evaluate_dev():
    """The official evaluation's scores of the model's answers (files in a temporary
    folder)."""
    with tempfile.TemporaryDirectory(prefix="bert_tf-squad-eval-") as folder:
      return score(predict_answers(folder))

  hook = None  # EvalDuringTraining, when training evaluates
  if do_train:
    read = squad_examples.read_squad_examples(train_file, is_training=True,
                                              version_2_with_negative=version_2_with_negative)
    train_examples = list(read.examples)
    # Resumed checkpoints go on through the examples they were trained on.
    # (The question ids aside, as the classifier's guids.)
    run_lock.check_training_data(
        "squad-train", ([e.question_text, e.doc_tokens, e.orig_answer_text, e.start_position,
                         e.end_position, e.is_impossible] for e in train_examples), train_file)
    num_train_steps = int(len(train_examples) / train_batch_size * num_train_epochs)
    num_warmup_steps = int(num_train_steps * warmup_proportion)
    if num_train_steps < 1:
      raise BertTfError(
          f"{len(train_examples)} training examples in {train_file} / --train_batch_size "
          f"{train_batch_size} x --num_train_epochs {num_train_epochs} gives no training step")
    # The original pre-shuffles, so the input's 100-record shuffle buffer is enough.
    random.Random(12345).shuffle(train_examples)
    record = os.path.join(output_dir, TRAIN_RECORD_FILE)
    meta = cached_train_features(train_examples, tokenizer, record, max_seq_length,
                                 doc_stride, max_query_length)
    progress(f"***** Running training *****  examples {len(train_examples)} "
             f"({len(read.skipped)} skipped), features {meta['num_features']}"
             f"{' (cached)' if meta['cached'] else ''}, batch size {train_batch_size}, "
             f"steps {num_train_steps} (warmup {num_warmup_steps})")
    optimizer = loop.make_optimizer(strategy, learning_rate, num_train_steps,
                                    num_warmup_steps, dtype, optimizer_kwargs)
    trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
        model_dir=output_dir, num_train_steps=num_train_steps, steps_per_loop=steps_per_loop,
        save_checkpoints_steps=save_checkpoints_steps, keep_checkpoint_max=keep_checkpoint_max,
        gradient_accumulation_steps=gradient_accumulation_steps, jit_compile=jit_compile,
        device_loop=device_loop, prefetch_to_device=prefetch_to_device,
        global_batch_size=train_batch_size, seq_length=max_seq_length))

    def train_dataset_fn(ctx):
      return squad_features.input_dataset(record, max_seq_length, is_training=True,
                                          batch_size=train_batch_size, seed=seed,
                                          input_context=ctx)

    init_fn = None
    if init_checkpoint:
      init_fn = lambda m: progress(str(checkpoints.load_weights(m, init_checkpoint)))  # noqa: E731
    if eval_during_training:
      from bert_tf.data.classifier_features import (  # pylint: disable=import-outside-toplevel
          tokenizer_fingerprint)
      hook = eval_during.EvalDuringTraining(
          strategy, model, evaluate_dev, output_dir, best_metric,
          patience=early_stopping_patience,
          write_files=lambda folder: loop.write_model_files(bert_config, folder, vocab_file),
          progress=progress,
          eval_data=eval_during.data_fingerprint(
              "squad", eval_during.file_fingerprint(predict_file, head_bytes=None, named=False),
              tokenizer_fingerprint(tokenizer),
              max_seq_length, doc_stride, max_query_length, n_best_size, max_answer_length,
              version_2_with_negative, null_score_diff_threshold))
    else:
      eval_during.note_kept_best(best_dir, progress)
    # The span head does not use the pooler (nor did the original's): no gradient there.
    with models.unused_pooler_quiet(), record_check.naming_damaged_records(
        [record], record_check.CACHE_ADVICE):
      results["train"] = trainer.train(train_dataset_fn, init_fn=init_fn,
                                       summary_writer=loop.summary_writer(output_dir),
                                       progress=progress, checkpoint_hook=hook)
    global_step = results["train"]["global_step"]
    if use_best_checkpoint:
      global_step = eval_during.restore_best(model, best_dir, progress)
    if export_google_checkpoint:
      loop.export_google_folder(model, bert_config, output_dir, global_step, vocab_file)
  else:
    global_step = eval_during.restore_without_training(
        model, output_dir, init_checkpoint, phase, use_best_checkpoint, progress)

  if do_predict:
    paths = predict_answers(output_dir)
    results["predict"] = {"num_examples": len(predict_examples),
                          "num_features": len(predicted["features"]), "files": paths}
    # An earlier run's files that are not of these predictions go: its null_odds.json (a
    # v1.1 run writes none) and its scores (a run without --do_eval writes none).
    stale = ([] if version_2_with_negative else [NULL_ODDS_FILE]) + (
        [] if do_eval else [EVAL_SCORES_FILE, EVAL_RESULTS_FILE])
    removed = fileio.remove_stale_outputs([os.path.join(output_dir, n) for n in stale])
    if removed:
      progress(f"removed {', '.join(removed)} of an earlier run (not of these predictions)")

  if do_eval:
    scores = score(results["predict"]["files"])
    squad_evaluate.write_scores(os.path.join(output_dir, EVAL_SCORES_FILE), scores)
    loop.write_eval_results(os.path.join(output_dir, EVAL_RESULTS_FILE),
                            dict(scores, global_step=global_step), float32=False)
    if distribution.is_chief(strategy) and not (
        hook and hook.evaluated(global_step) is not None):  # (else written then)
      loop.write_eval_summaries(output_dir, scores, global_step)
    results["eval"] = scores

  if export_dir:
    from bert_tf.squad import export  # pylint: disable=import-outside-toplevel
    preflight.note_unused_tokens_in_export(preserve_unused_tokens, progress)
    results["export"] = export.export_question_answerer(
        model, vocab_file, export_dir, do_lower_case=do_lower_case,
        max_seq_length=max_seq_length, doc_stride=doc_stride,
        max_query_length=max_query_length, n_best_size=n_best_size,
        max_answer_length=max_answer_length, version_2_with_negative=version_2_with_negative,
        null_score_diff_threshold=null_score_diff_threshold, overwrite=overwrite_export)
    progress(f"exported the question-answering SavedModel to {export_dir}")
  # The run went through: its checkpoints fit this config. Not into a folder without any (an
  # eval, predict or export of --init_checkpoint): a config without weights loads as nothing.
  if distribution.is_chief(strategy) and loop.latest_checkpoint(output_dir):
    loop.write_model_files(bert_config, output_dir, vocab_file)
  return results
