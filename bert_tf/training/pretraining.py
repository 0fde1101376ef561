"""The pretraining task: masked LM + next sentence, losses and eval metrics as the original.

Shape legend: B = batch, P = masked positions per sequence, V = vocab.

  masked_lm_loss      = sum(w * nll) / (sum(w) + 1e-5), w = masked_lm_weights
  next_sentence_loss  = mean nll over the batch
  loss                = masked_lm_loss + next_sentence_loss
Eval (run_pretraining.py's metric_fn): masked_lm_accuracy (weighted by w), masked_lm_loss
(w-weighted mean), next_sentence_accuracy, next_sentence_loss (means), plus ``loss``, the
mean over eval batches of the batch's total loss.
"""

import tensorflow as tf

from bert_tf import run_lock
from bert_tf.modeling import BertPretrainer
from bert_tf.modeling.placement import in_xla_computation
from bert_tf.training import frees_its_memory

MASKED_LM_EPSILON = 1e-5


def _masked_lm_nll(outputs, features):
  log_probs = tf.nn.log_softmax(outputs["masked_lm_logits"], axis=-1)  # [B,P,V] float32
  ids = tf.cast(features["masked_lm_ids"], tf.int32)
  if in_xla_computation():
    # The original's form: the log-probabilities times the labels' one-hot rows, summed. XLA
    # fuses the one-hot into the sum and, in the backward pass, into the softmax's gradient;
    # a gather's gradient would be a scatter into a zeroed float32 [B,P,V] tensor instead
    # (BERT-Large on an H100's compile: 1.56 GB more traffic per update, 475 MiB more
    # memory; BENCHMARKS.md, "The masked LM's label log-probability"). The same numbers:
    # one term of each row is the log-probability, the others are zeros.
    one_hot = tf.one_hot(ids, log_probs.shape[-1], dtype=log_probs.dtype)
    return log_probs, -tf.reduce_sum(log_probs * one_hot, axis=-1)  # [B,P]
  # Outside XLA, where each op is a kernel of its own, the gather reads B*P values only.
  return log_probs, -tf.gather(log_probs, ids, batch_dims=2)  # [B,P]


def _next_sentence_nll(outputs, features):
  log_probs = tf.nn.log_softmax(outputs["next_sentence_logits"], axis=-1)  # [B,2]
  labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])  # [B]
  return log_probs, labels, -tf.gather(log_probs, labels, batch_dims=1)


class PretrainingTask:
  """Masked LM (+ next sentence unless ``use_next_sentence=False``)."""

  denominator_offsets = {"masked_lm": MASKED_LM_EPSILON}

  def __init__(self, config, use_next_sentence=True):
    self.config = config
    self.use_next_sentence = use_next_sentence

  def build_model(self, dtype=None):
    return BertPretrainer(self.config, dtype=dtype)

  def loss_denominators(self, features):
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    denominators = {"masked_lm": tf.reduce_sum(weights)}
    if self.use_next_sentence:
      batch = tf.shape(features["masked_lm_weights"])[0]
      denominators["next_sentence"] = tf.cast(batch, tf.float32)
    return denominators

  def loss_numerators(self, outputs, features):
    _, nll = _masked_lm_nll(outputs, features)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    numerators = {"masked_lm": tf.reduce_sum(weights * nll)}
    if self.use_next_sentence:
      _, _, nsp_nll = _next_sentence_nll(outputs, features)
      numerators["next_sentence"] = tf.reduce_sum(nsp_nll)
    return numerators

  def eval_metrics(self, outputs, features):
    """{name: (sum, weight)} of one batch on one replica (see ``training.loop.evaluate``)."""
    log_probs, nll = _masked_lm_nll(outputs, features)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    ids = tf.cast(features["masked_lm_ids"], tf.int32)
    correct = tf.cast(tf.equal(tf.argmax(log_probs, axis=-1, output_type=tf.int32), ids),
                      tf.float32)
    weight_sum = tf.reduce_sum(weights)
    mlm_loss = tf.reduce_sum(weights * nll) / (weight_sum + MASKED_LM_EPSILON)
    metrics = {
        "masked_lm_accuracy": (tf.reduce_sum(weights * correct), weight_sum),
        "masked_lm_loss": (tf.reduce_sum(weights * nll), weight_sum),
    }
    batch_loss = mlm_loss
    if self.use_next_sentence:
      nsp_log_probs, labels, nsp_nll = _next_sentence_nll(outputs, features)
      count = tf.cast(tf.shape(labels)[0], tf.float32)
      nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_log_probs, axis=-1, output_type=tf.int32),
                                     labels), tf.float32)
      metrics["next_sentence_accuracy"] = (tf.reduce_sum(nsp_correct), count)
      metrics["next_sentence_loss"] = (tf.reduce_sum(nsp_nll), count)
      batch_loss += tf.reduce_mean(nsp_nll)
    # The estimator's "loss": the mean over batches of each batch's total loss.
    replicas = float(tf.distribute.get_replica_context().num_replicas_in_sync)
    metrics["loss"] = (batch_loss / replicas, tf.constant(1.0 / replicas))
    return metrics


def written_files(do_train, do_eval, export_google_checkpoint, eval_during_training=False):
  """What ``run_pretraining`` writes over in ``output_dir`` (``fnmatch`` patterns; see
  ``bert_tf.paths``). (bert_config.json and vocab.txt are rewritten with the same content.)"""
  from bert_tf.training import (  # pylint: disable=import-outside-toplevel
      eval_during_training as eval_during)
  written = []
  if do_train:
    written += ["checkpoint", "ckpt-*", "summaries/*"]
    if export_google_checkpoint:
      written += ["google/bert_model.ckpt*", "google/checkpoint"]
  if do_eval:
    written += ["eval_results.txt", "summaries/eval/*"]
  if eval_during_training:
    written += [eval_during.HISTORY_FILE, eval_during.BEST_DIR + "/*"]
  return written


def eval_result_keys(use_next_sentence=True):
  """The keys of eval_results.txt (``PretrainingTask.eval_metrics``), global_step aside."""
  keys = ["loss", "masked_lm_accuracy", "masked_lm_loss"]
  if use_next_sentence:
    keys += ["next_sentence_accuracy", "next_sentence_loss"]
  return keys


def _input_file_rows(files):
  """The training data's record of the pretraining ``files`` (``run_lock.check_training_data``):
  each one's base name and size, in order, and a hash of the first one's first MB (files made
  anew, another seed or corpus, differ there even where their sizes agree): a stat per file,
  in threads (a large gs:// glob), not a read of the data. The same files moved to another
  folder or bucket are the same."""
  from concurrent import futures  # pylint: disable=import-outside-toplevel
  from bert_tf.training.eval_during_training import (  # pylint: disable=import-outside-toplevel
      file_fingerprint)
  with futures.ThreadPoolExecutor(max(1, min(16, len(files)))) as pool:
    yield from pool.map(
        lambda i: file_fingerprint(files[i], head_bytes=0 if i else 1 << 20),
        range(len(files)))


@frees_its_memory
@run_lock.one_run_per_output_dir(trajectory=(
    "bert_config", "init_checkpoint", "max_seq_length", "max_predictions_per_seq",
    "train_batch_size", "learning_rate", "num_warmup_steps", "optimizer_kwargs",
    "use_next_sentence", "dynamic_masking", "seed"))
def run_pretraining(bert_config, input_file, output_dir, strategy, *, init_checkpoint=None,
                    eval_input_file=None, max_seq_length=128, max_predictions_per_seq=20,
                    do_train=True, do_eval=False, train_batch_size=32, eval_batch_size=8,
                    learning_rate=5e-5, num_train_steps=100000, num_warmup_steps=10000,
                    save_checkpoints_steps=1000, keep_checkpoint_max=5, max_eval_steps=100,
                    steps_per_loop=1000, gradient_accumulation_steps=1, dtype="float32",
                    jit_compile=None, device_loop=None, prefetch_to_device=None,
                    optimizer_kwargs=None, use_next_sentence=True,
                    dynamic_masking=None, seed=None, export_google_checkpoint=True,
                    peak_flops=None, vocab_file=None, check_input_files=False,
                    eval_during_training=False, best_metric=None, early_stopping_patience=0,
                    use_best_checkpoint=False, progress=None):
  """Pretrains (and/or evaluates) a BERT on pretraining TFRecords: ``run_pretraining.py``.

  Args mirror the script's flags. ``input_file``: comma-separated files or globs of TFRecords
  made by Google's ``create_pretraining_data.py`` or bert_tf's. ``dynamic_masking``: None, or
  a dict of ``bert_tf.data.pipeline`` masking options (re-mask on every read). ``vocab_file``:
  the vocab.txt the data was made with, copied beside the checkpoints (optional).
  The input files are checked before the model is built (``input_checks``: shapes, ids within
  the config's vocab; with ``check_input_files`` every record's CRCs and ids), and a damaged
  record met while training or evaluating is a one-line error naming its file and offset.
  Returns {"train": {...}, "eval": {...}} for the phases run. Writes checkpoints,
  TensorBoard summaries, ``eval_results.txt`` and (``export_google_checkpoint``) a Google-format
  ``bert_model.ckpt`` + ``bert_config.json`` (+ ``vocab.txt``) under ``output_dir/google``;
  ``bert_config.json`` (+ ``vocab.txt``) in ``output_dir`` itself.

  ``eval_during_training``: the eval input (``max_eval_steps`` batches of ``eval_input_file``,
  else ``input_file``, as ``do_eval``) is evaluated at every checkpoint training saves, the
  checkpoint with the best ``best_metric`` (default ``masked_lm_loss``) kept in ``best/``,
  ``early_stopping_patience`` and ``use_best_checkpoint`` as ``run_classifier``'s
  (``training.eval_during_training``).
  """
  import os  # pylint: disable=import-outside-toplevel

  from bert_tf.progress import log_line  # pylint: disable=import-outside-toplevel
  progress = progress or log_line

  import keras  # pylint: disable=import-outside-toplevel

  from bert_tf import flops  # pylint: disable=import-outside-toplevel
  from bert_tf.data import input_checks  # pylint: disable=import-outside-toplevel
  from bert_tf.data import pipeline  # pylint: disable=import-outside-toplevel
  from bert_tf import fileio  # pylint: disable=import-outside-toplevel
  from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  from bert_tf.training import DTYPE_POLICIES, loop  # pylint: disable=import-outside-toplevel
  from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
  from bert_tf.training import preflight  # pylint: disable=import-outside-toplevel
  from bert_tf import paths  # pylint: disable=import-outside-toplevel
  from bert_tf import tokenization  # pylint: disable=import-outside-toplevel

  from bert_tf.training import (  # pylint: disable=import-outside-toplevel
      eval_during_training as eval_during)

  if not do_train and not do_eval:
    raise BertTfError("at least one of --do_train or --do_eval must be True")
  best_dir = os.path.join(output_dir, eval_during.BEST_DIR)
  eval_during.check_flags(do_train, eval_during_training, best_metric, early_stopping_patience,
                          use_best_checkpoint, best_dir)
  if eval_during_training:
    best_metric = eval_during.resolve_best_metric(
        best_metric, "masked_lm_loss", eval_result_keys(use_next_sentence), "pretraining")
  evaluates = do_eval or eval_during_training
  preflight.check_at_least({
      **({"--train_batch_size": (train_batch_size, 1),
          "--save_checkpoints_steps": (save_checkpoints_steps, 0)} if do_train else {}),
      **({"--eval_batch_size": (eval_batch_size, 1),
          "--max_eval_steps": (max_eval_steps, 1)} if evaluates else {})})
  preflight.keep_checkpoint_max(keep_checkpoint_max)
  if vocab_file:
    fileio.require_file(vocab_file, "vocab file", "vocab_file")
    # Copied beside the checkpoints: a vocab of another size makes a folder nothing loads.
    vocab = tokenization.load_vocab(vocab_file)
    tokenization.check_vocab_size(vocab_file, tokenization.vocab_size(vocab),
                                  bert_config.vocab_size)
  if max_seq_length > bert_config.max_position_embeddings:
    raise BertTfError(f"--max_seq_length {max_seq_length} exceeds max_position_embeddings "
                      f"{bert_config.max_position_embeddings} of the BERT config")
  if init_checkpoint:
    checkpoints.check_config_fits(bert_config, init_checkpoint)
  if train_batch_size % (strategy.num_replicas_in_sync * gradient_accumulation_steps):
    raise BertTfError(
        f"--train_batch_size {train_batch_size} must divide evenly over "
        f"{strategy.num_replicas_in_sync} replica(s) x {gradient_accumulation_steps} "
        "accumulation step(s)")
  paths.check_paths(
      inputs={"--input_file": input_file, "--eval_input_file": eval_input_file,
              "--init_checkpoint": init_checkpoint, "--vocab_file": vocab_file},
      outputs={"--output_dir": paths.Folder(output_dir, written_files(
          do_train, do_eval, export_google_checkpoint, eval_during_training))})
  if not do_train and use_best_checkpoint:
    eval_during.require_best(best_dir)
  elif not do_train:
    preflight.require_weights("--do_eval", loop.has_checkpoint(output_dir),
                              init_checkpoint, output_dir)
  eval_files = (pipeline.expand_file_patterns(
      eval_input_file or input_file,
      "--eval_input_file" if eval_input_file else "--input_file") if evaluates else [])
  train_files = pipeline.expand_file_patterns(input_file) if do_train else []
  for flag, files in (("--input_file", train_files),
                      ("--eval_input_file" if eval_input_file else "--input_file (eval)",
                       eval_files if eval_files != train_files else [])):
    if files and progress:  # what a glob took (an earlier data prep's extra shards, too)
      shown = (", ".join(files) if len(files) <= 3 else
               f"{files[0]}, {files[1]}, ..., {files[-1]}")
      progress(f"{flag}: {len(files)} file(s): {shown}")
    if files:
      input_checks.check_pretraining_inputs(
          files, bert_config, max_seq_length, max_predictions_per_seq,
          full=check_input_files, progress=progress)
  if do_train and num_warmup_steps > num_train_steps:  # (the original took it without a word)
    progress(f"warning: --num_warmup_steps {num_warmup_steps} is more than --num_train_steps "
             f"{num_train_steps}: the learning rate rises through the whole run, to about "
             f"{learning_rate * num_train_steps / num_warmup_steps:.3g} at its end, and never "
             f"reaches --learning_rate {learning_rate:g}")
  if do_train:  # Resumed checkpoints go on through the files they were trained on.
    given = input_file if isinstance(input_file, str) else ",".join(input_file)
    run_lock.check_training_data(
        "pretraining-train", _input_file_rows(train_files), given,
        other=f"other input files than --input_file {given!r} gives "
              f"({len(train_files)} file(s): one added, left out or made anew)")
  # The config (and vocab, when given) beside the checkpoints: the folder loads alone.
  # Written now only into a folder without checkpoints; at the end of the run otherwise.
  # (A run without training writes them at its end: a refused one writes nothing.)
  if do_train and distribution.is_chief(strategy):
    loop.write_model_files_if_fresh(bert_config, output_dir, vocab_file)
  if seed is not None:
    keras.utils.set_random_seed(seed)
  task = PretrainingTask(bert_config, use_next_sentence=use_next_sentence)
  with strategy.scope():
    model = task.build_model(dtype=DTYPE_POLICIES[dtype])
  results = {}
  # Multi-worker: only the chief writes summaries, the export and eval_results.txt.
  chief = distribution.is_chief(strategy)

  def dataset_fn(files, batch_size, is_training):
    def fn(ctx, skip_batches=0):
      return pipeline.pretraining_dataset(
          files, ctx.get_per_replica_batch_size(batch_size) if ctx else batch_size,
          max_seq_length, max_predictions_per_seq, is_training=is_training,
          input_context=ctx, seed=seed, dynamic_masking=dynamic_masking,
          use_next_sentence=use_next_sentence,
          # Eval: max_eval_steps batches exactly, as the original's repeated eval input (an
          # eval set smaller than that wraps around; without a limit, read once).
          repeat=is_training or max_eval_steps is not None,
          # A resumed run's batches read before its checkpoint, skipped unparsed (Trainer).
          skip_batches=skip_batches)
    return fn

  eval_cache = {}  # loop.evaluate's step, traced once a run

  def evaluate():
    """eval_results.txt's entries (global_step aside) of the model's weights."""
    with input_checks.naming_bad_records(eval_files, bert_config, max_seq_length,
                                         max_predictions_per_seq):
      return loop.evaluate(strategy, model, task,
                           dataset_fn(eval_input_file or input_file, eval_batch_size, False),
                           max_steps=max_eval_steps, cache=eval_cache)

  hook = None  # evaluation during training
  if do_train:
    optimizer = loop.make_optimizer(strategy, learning_rate, num_train_steps,
                                    num_warmup_steps, dtype, optimizer_kwargs)
    peak = peak_flops or flops.detect_peak_flops(strategy)
    trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
        model_dir=output_dir, num_train_steps=num_train_steps, steps_per_loop=steps_per_loop,
        save_checkpoints_steps=save_checkpoints_steps, keep_checkpoint_max=keep_checkpoint_max,
        gradient_accumulation_steps=gradient_accumulation_steps, jit_compile=jit_compile,
        device_loop=device_loop, prefetch_to_device=prefetch_to_device,
        global_batch_size=train_batch_size, seq_length=max_seq_length,
        train_flops_per_example=flops.train_flops_per_sequence(
            bert_config, max_seq_length, max_predictions_per_seq, use_next_sentence),
        peak_flops=peak))
    init_fn = None
    if init_checkpoint:
      init_fn = lambda m: checkpoints.load_weights(m, init_checkpoint)  # noqa: E731
    if eval_during_training:
      hook = eval_during.EvalDuringTraining(
          strategy, model, evaluate, output_dir, best_metric,
          patience=early_stopping_patience,
          write_files=lambda folder: loop.write_model_files(bert_config, folder, vocab_file),
          progress=progress,
          eval_data=eval_during.data_fingerprint(
              # Eval reads its files in order: the first one's records are those scored
              # (hashing the head of every shard of a large glob would read gigabytes).
              "pretraining", [eval_during.file_fingerprint(f, head_bytes=0 if i else 1 << 20)
                              for i, f in enumerate(eval_files)],
              max_seq_length, max_predictions_per_seq, max_eval_steps, eval_batch_size,
              use_next_sentence, dynamic_masking, seed if dynamic_masking else None))
    else:
      eval_during.note_kept_best(best_dir, progress)
    with input_checks.naming_bad_records(train_files, bert_config, max_seq_length,
                                         max_predictions_per_seq):
      results["train"] = trainer.train(dataset_fn(input_file, train_batch_size, True),
                                       init_fn=init_fn,
                                       summary_writer=(loop.summary_writer(output_dir)
                                                       if chief else None),
                                       progress=progress, checkpoint_hook=hook)
    global_step = results["train"]["global_step"]
    if use_best_checkpoint:
      global_step = eval_during.restore_best(model, best_dir, progress)
    if export_google_checkpoint and chief:
      loop.export_google_folder(model, bert_config, output_dir, global_step, vocab_file)
  else:
    global_step = eval_during.restore_without_training(
        model, output_dir, init_checkpoint, "--do_eval", use_best_checkpoint, progress)

  if do_eval:
    # The weights were evaluated during training: their entry of the history is the result.
    done = hook.evaluated(global_step) if hook else None
    metrics = done if done is not None else evaluate()
    metrics["global_step"] = global_step
    if chief:
      loop.write_eval_results(os.path.join(output_dir, "eval_results.txt"), metrics)
      if done is None:  # (during training, its scalars were written then)
        loop.write_eval_summaries(output_dir, metrics, global_step)
    results["eval"] = metrics
  if distribution.is_chief(strategy):  # the run went through: its checkpoints fit this config
    loop.write_model_files(bert_config, output_dir, vocab_file)
  return results
