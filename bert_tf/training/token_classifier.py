"""Token classification (named entities, chunking, tagging): the task and ``run_token_classifier``.

The original BERT had no token classification script, though NER was the task its users asked
for most (google-research/bert issues 33, 569, 582 ...); the BERT paper's CoNLL-2003 result
used it. This is Hugging Face's recipe (``BertForTokenClassification``, ``run_ner``), in the
original's run_classifier shape: a data_dir of CoNLL files, the same training loop, flags,
checkpoints, resumption and outputs.

Shape legend: B = batch (per replica inside ``strategy.run``), S = max_seq_length,
C = number of labels, N = features in an eval/predict set (padding included).

Loss: softmax cross-entropy at each word's first word piece (``label_mask``, see
``bert_tf.data.conll``), averaged over those positions of the GLOBAL batch
(``training.loop``'s numerator/denominator split), as Hugging Face averages over its labelled
(not -100) positions.

Eval (``eval_results.txt``), from one tag per word (``conll.word_predictions``):
  eval_precision, eval_recall, eval_f1   conlleval's chunk (entity) scores, micro over types
  eval_<TYPE>_f1                         the F1 of one chunk type (eval_PER_f1, ...)
  eval_accuracy                          tag accuracy over words
  eval_loss                              the mean loss over labelled positions
  global_step                            the training step of the evaluated weights
Tag sets that are not chunk tags (``O``/``B-``/``I-``/``E-``/``S-``; e.g. part-of-speech
tags) get eval_accuracy and eval_loss only.
"""

import os

import keras
import numpy as np
import tensorflow as tf

from bert_tf import classifier_labels, conlleval, fileio, paths, run_lock, tokenization
from bert_tf.data import conll, record_check
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertTokenClassifier, checkpoints, models
from bert_tf.progress import log_line
from bert_tf.training import DTYPE_POLICIES, classifier, distribution, frees_its_memory, loop
from bert_tf.training import preflight
from bert_tf.training import eval_during_training as eval_during

LABELS_FILE = classifier_labels.TOKEN_FILE_NAME  # the tag names (bert_tf.load(folder).tag)
SPLIT_FILES = {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"}


class TokenClassifierTask:
  """Softmax cross-entropy at the labelled positions of every sequence.

  Implements the ``training.loop`` task interface. Features: ``input_ids``, ``input_mask``,
  ``segment_ids``, ``label_ids``, ``label_mask`` [B,S] int32, ``is_real_example`` [B].
  """

  def __init__(self, config, num_labels, classifier_dropout=0.1):
    if num_labels < 2:
      raise BertTfError(f"token classification needs at least 2 labels, got {num_labels}")
    self.config = config
    self.num_labels = num_labels
    self.classifier_dropout = classifier_dropout

  def build_model(self, dtype=None):
    return BertTokenClassifier(self.config, self.num_labels,
                               classifier_dropout=self.classifier_dropout, dtype=dtype)

  @staticmethod
  def per_position_loss(logits, label_ids):
    """logits [B,S,C], label_ids [B,S] -> nll [B,S] float32."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    return -tf.gather(log_probs, tf.cast(label_ids, tf.int32), batch_dims=2)

  def loss_denominators(self, features):
    return {"tokens": tf.reduce_sum(tf.cast(features["label_mask"], tf.float32))}

  def loss_numerators(self, outputs, features):
    mask = tf.cast(features["label_mask"], tf.float32)
    return {"tokens": tf.reduce_sum(mask * self.per_position_loss(outputs, features["label_ids"]))}

  def eval_metrics(self, outputs, features):
    """{name: (sum, weight)} of one batch on one replica (``training.loop.evaluate``)."""
    mask = tf.cast(features["label_mask"], tf.float32)
    if "is_real_example" in features:
      mask *= tf.cast(features["is_real_example"], tf.float32)[:, None]
    nll = self.per_position_loss(outputs, features["label_ids"])
    return {"eval_loss": (tf.reduce_sum(mask * nll), tf.reduce_sum(mask))}


def scores(gold_tags, predicted_tags, label_list, prefix="eval_"):
  """eval_results entries (see the module docstring) of predicted against gold tags."""
  chunked = all(conlleval.is_chunk_tag(label) for label in label_list)
  if not chunked:
    words = sum(len(s) for s in gold_tags)
    right = sum(g == p for gs, ps in zip(gold_tags, predicted_tags) for g, p in zip(gs, ps))
    return {prefix + "accuracy": right / words if words else float("nan")}
  result = conlleval.evaluate(gold_tags, predicted_tags)
  values = {prefix + key: result[key] for key in ("precision", "recall", "f1", "accuracy")}
  for kind in conlleval.chunk_types(label_list):
    values[f"{prefix}{kind}_f1"] = result["types"].get(kind, {"f1": 0.0})["f1"]
  return values


def eval_result_keys(label_list):
  """The keys of eval_results.txt for a tag set, global_step aside."""
  keys = ["eval_loss", "eval_accuracy"]
  if all(conlleval.is_chunk_tag(label) for label in label_list):
    keys += ["eval_precision", "eval_recall", "eval_f1"]
    keys += [f"eval_{kind}_f1" for kind in conlleval.chunk_types(label_list)]
  return sorted(keys)


def default_best_metric(label_list):
  """eval_f1 for chunk tags (NER, chunking), else eval_accuracy."""
  return "eval_f1" if "eval_f1" in eval_result_keys(label_list) else "eval_accuracy"


def write_tagged(path, sentences, predicted_tags):
  """A CoNLL file of the predictions: ``word [gold] predicted`` per line, a blank line after
  each sentence (conlleval's input when the gold tags are there)."""
  with fileio.atomic_write(path) as f:
    for sentence, predicted in zip(sentences, predicted_tags):
      for i, (word, tag) in enumerate(zip(sentence.words, predicted)):
        gold = f" {sentence.tags[i]}" if sentence.tags is not None else ""
        f.write(f"{word}{gold} {tag}\n")
      f.write("\n")


def write_labels(folder, label_list, do_lower_case, max_seq_length):
  """``folder/token_classifier.json``: the tag names in output order, and the preprocessing."""
  classifier_labels.write_tokens(folder, label_list, do_lower_case=do_lower_case,
                                 max_seq_length=max_seq_length)


def resolve_labels(labels, data_dir, output_dir, train_sentences, init_checkpoint=None):
  """The tag list: ``labels`` (--labels), else ``data_dir/labels.txt``, else what a previous
  run saved in ``output_dir``, else the training file's tags (``conll.labels_of``), else (a
  run without training) those beside ``init_checkpoint``, a folder run_ner.py fine-tuned."""
  if labels:
    return list(labels)
  listed = os.path.join(data_dir, "labels.txt") if data_dir else None
  if listed and tf.io.gfile.exists(listed):
    names = [line.strip() for line in fileio.read_utf8(listed).split("\n") if line.strip()]
    if len(names) < 2:
      raise BertTfError(f"{listed}: at least 2 tag names, one a line")
    return names
  saved = classifier_labels.read_tokens(output_dir)
  if saved:
    return saved["labels"]
  if train_sentences is None and init_checkpoint:
    beside = classifier_labels.read_tokens(fileio.checkpoint_folder(init_checkpoint))
    if beside:
      return beside["labels"]
  if train_sentences is None:
    raise BertTfError("no tag list: give --labels, a labels.txt in --data_dir, or train "
                      "(--do_train) first")
  return conll.labels_of(train_sentences)


def written_files(do_train, do_eval, do_predict, export_google_checkpoint,
                  eval_during_training=False):
  """What ``run_token_classifier`` writes in ``output_dir`` (``fnmatch`` patterns)."""
  written = [LABELS_FILE]
  if do_train:
    written += ["train.tf_record*", "checkpoint", "ckpt-*", "summaries/*"]
    if export_google_checkpoint:
      written += ["google/bert_model.ckpt*", "google/checkpoint"]
  if do_eval or eval_during_training:
    written += ["eval.tf_record*"]
  if do_eval:
    written += ["eval_results.txt", "eval_predictions.txt", "summaries/eval/*"]
  if eval_during_training:
    written += [eval_during.HISTORY_FILE, eval_during.BEST_DIR + "/*"]
  if do_predict:
    written += ["predict.tf_record*", "test_predictions.txt", "test_results.txt"]
  return written


@frees_its_memory
@run_lock.one_run_per_output_dir(trajectory=(
    "bert_config", "init_checkpoint", "do_lower_case", "max_seq_length", "train_batch_size",
    "learning_rate", "warmup_proportion", "optimizer_kwargs", "labels", "label_column",
    "classifier_dropout", "seed"))
def run_token_classifier(bert_config, data_dir, vocab_file, output_dir, strategy, *,
                         init_checkpoint=None, do_lower_case=True,
                         preserve_unused_tokens=False, max_seq_length=128,
                         do_train=False, do_eval=False, do_predict=False, train_batch_size=32,
                         eval_batch_size=8, predict_batch_size=8, learning_rate=5e-5,
                         num_train_epochs=3.0, warmup_proportion=0.1,
                         save_checkpoints_steps=1000, keep_checkpoint_max=5,
                         steps_per_loop=1000, gradient_accumulation_steps=1, dtype="float32",
                         jit_compile=None, device_loop=None, prefetch_to_device=None,
                         optimizer_kwargs=None, labels=None, label_column=-1, seed=None,
                         classifier_dropout=0.1, export_google_checkpoint=True,
                         eval_during_training=False, best_metric=None,
                         early_stopping_patience=0, use_best_checkpoint=False, progress=None):
  """Fine-tunes, evaluates and/or predicts a token classifier: ``run_ner.py``.

  Args mirror the script's flags. ``data_dir`` holds ``train.txt``, ``dev.txt`` and
  ``test.txt`` in the CoNLL format (``bert_tf.data.conll``; the tag in ``label_column``).

  Writes to ``output_dir``: the feature TFRecords, checkpoints and summaries (training);
  ``eval_results.txt`` and ``eval_predictions.txt`` (do_eval; ``word gold predicted`` lines,
  conlleval's input); ``test_predictions.txt`` (do_predict; ``word [gold] predicted``) and,
  when test.txt has tags, ``test_results.txt`` (the same scores, ``test_`` keys);
  ``token_classifier.json`` (the tag names); after training ``google/bert_model.ckpt``.
  Evaluation during training, the best checkpoint and early stopping work as in
  ``training.classifier.run_classifier`` (default ``best_metric``: ``default_best_metric``).

  Returns:
    {"train": {...}, "eval": {...}, "predict": {...}} for the phases run.
  """
  progress = progress or log_line
  if not (do_train or do_eval or do_predict):
    raise BertTfError("at least one of --do_train, --do_eval or --do_predict must be True")
  if not data_dir:
    raise BertTfError("--data_dir is required (train.txt, dev.txt, test.txt in CoNLL format)")
  if labels is not None:
    classifier_labels.check_names(labels)
  if max_seq_length > bert_config.max_position_embeddings:
    raise BertTfError(f"--max_seq_length {max_seq_length} exceeds max_position_embeddings "
                      f"{bert_config.max_position_embeddings} of the BERT config")
  preflight.check_at_least({"--save_checkpoints_steps": (save_checkpoints_steps, 0)})
  preflight.keep_checkpoint_max(keep_checkpoint_max)
  replicas = strategy.num_replicas_in_sync
  for flag, size, parts in (("train_batch_size", train_batch_size,
                             replicas * gradient_accumulation_steps),
                            ("eval_batch_size", eval_batch_size, replicas),
                            ("predict_batch_size", predict_batch_size, replicas)):
    if size < 1 or size % parts:
      raise BertTfError(f"--{flag} {size} must be a positive multiple of {parts}")
  best_dir = os.path.join(output_dir, eval_during.BEST_DIR)
  eval_during.check_flags(do_train, eval_during_training, best_metric,
                          early_stopping_patience, use_best_checkpoint, best_dir)
  fileio.require_file(vocab_file, "vocab file", "vocab_file")
  tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
  if init_checkpoint is not None and not (tf.io.gfile.exists(init_checkpoint) or
                                          tf.io.gfile.exists(init_checkpoint + ".index")):
    raise BertTfError(f"checkpoint not found (--init_checkpoint): {init_checkpoint!r}")
  paths.check_paths(
      inputs={"--vocab_file": vocab_file, "--init_checkpoint": init_checkpoint,
              "--data_dir": data_dir},
      outputs={"--output_dir": paths.Folder(output_dir, written_files(
          do_train, do_eval, do_predict, export_google_checkpoint, eval_during_training))})

  def read(split, phase, labelled=True):
    path = os.path.join(data_dir, SPLIT_FILES[split])
    if not tf.io.gfile.exists(path):
      raise BertTfError(f"{path}: no such file ({phase} reads it)")
    sentences = conll.read_conll(path, label_column=label_column, labelled=labelled)
    if not sentences:
      raise BertTfError(f"{path}: no sentences; {phase} needs some")
    return sentences

  train_sentences = read("train", "--do_train") if do_train else None
  if do_train:  # Resumed checkpoints go on through the sentences they were trained on.
    run_lock.check_training_data(
        "token-classifier-train", ([s.words, s.tags] for s in train_sentences),
        os.path.join(data_dir, SPLIT_FILES["train"]))
  eval_sentences = (read("dev", "--do_eval" if do_eval else "--eval_during_training")
                    if do_eval or eval_during_training else None)
  predict_sentences = read("test", "--do_predict", labelled=False) if do_predict else None
  label_list = resolve_labels(labels, data_dir, output_dir, train_sentences, init_checkpoint)
  fine_tuned_with = {"labels": [str(x) for x in label_list],
                     "do_lower_case": bool(do_lower_case)}
  if loop.latest_checkpoint(output_dir):
    classifier_labels.check_unchanged(output_dir, classifier_labels.read_tokens(output_dir),
                                      fine_tuned_with, classifier_labels.TOKEN_FILE_NAME)
  elif not do_train and not use_best_checkpoint:  # the head is --init_checkpoint's
    classifier_labels.check_init_checkpoint(init_checkpoint, fine_tuned_with,
                                            classifier_labels.TOKEN_FILE_NAME)
  if eval_during_training:
    best_metric = eval_during.resolve_best_metric(
        best_metric, default_best_metric(label_list), eval_result_keys(label_list),
        "token classification")
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case,
                                         preserve_unused_tokens=preserve_unused_tokens)
  preflight.check_tokenizer(tokenizer, vocab_file, bert_config, do_lower_case,
                            init_checkpoint, progress)
  # Every tag is checked against the tag list now, before any training.
  converted = {}
  for kind, sentences in (("train", train_sentences), ("eval", eval_sentences),
                          ("predict", predict_sentences)):
    if sentences is not None:
      converted[kind] = conll.convert_sentences(sentences, label_list, max_seq_length,
                                                tokenizer)
  phase = "--do_eval" if do_eval else "--do_predict"
  if not do_train and use_best_checkpoint:
    eval_during.require_best(best_dir)
  elif not do_train:
    preflight.require_weights(phase, loop.has_checkpoint(output_dir),
                              init_checkpoint, output_dir)

  chief = distribution.is_chief(strategy)
  if do_train and chief:
    loop.write_model_files_if_fresh(bert_config, output_dir, vocab_file)
    if not loop.latest_checkpoint(output_dir):
      write_labels(output_dir, label_list, do_lower_case, max_seq_length)
  if seed is not None:
    keras.utils.set_random_seed(seed)
  task = TokenClassifierTask(bert_config, len(label_list), classifier_dropout=classifier_dropout)
  with strategy.scope():
    model = task.build_model(dtype=DTYPE_POLICIES[dtype])
  results = {}
  record_files = {}
  inference_cache = {}

  def infer(kind, sentences, batch_size, cache=None):
    """One tag per word of ``sentences`` from the model, and the streaming eval_loss."""
    features = converted[kind]
    path = os.path.join(output_dir, f"{kind}.tf_record")
    if kind not in record_files:  # Written once a run.
      record_files[kind] = conll.write_features(conll.pad_to_batch(features, batch_size), path)
    progress(f"***** Running {kind} *****  sentences {len(sentences)}, features "
             f"{len(features)}, batch size {batch_size}")
    with record_check.naming_damaged_records([path], record_check.CACHE_ADVICE):
      streaming, outputs = classifier.run_inference(
          strategy, model, task, classifier.eval_dataset_fn(
              path, max_seq_length, batch_size, make_dataset=conll.make_dataset),
          cache=cache)
    predicted_ids = np.argmax(outputs["logits"], axis=-1)  # [N,S]
    return streaming, conll.word_predictions(sentences, features, predicted_ids, label_list)

  last_eval = {}

  def evaluate_dev():
    streaming, predicted = infer("eval", eval_sentences, eval_batch_size, inference_cache)
    last_eval["predicted"] = predicted
    values = scores([s.tags for s in eval_sentences], predicted, label_list)
    values["eval_loss"] = streaming["eval_loss"]
    return values

  hook = None
  if do_train:
    num_train_steps = int(len(converted["train"]) / train_batch_size * num_train_epochs)
    num_warmup_steps = int(num_train_steps * warmup_proportion)
    if num_train_steps < 1:
      raise BertTfError(
          f"{len(converted['train'])} training features / --train_batch_size "
          f"{train_batch_size} x --num_train_epochs {num_train_epochs} gives no training step")
    train_file = os.path.join(output_dir, "train.tf_record")
    conll.write_features(converted["train"], train_file)
    progress(f"***** Running training *****  sentences {len(train_sentences)}, features "
             f"{len(converted['train'])}, batch size {train_batch_size}, steps "
             f"{num_train_steps} (warmup {num_warmup_steps})")
    optimizer = loop.make_optimizer(strategy, learning_rate, num_train_steps,
                                    num_warmup_steps, dtype, optimizer_kwargs)
    trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
        model_dir=output_dir, num_train_steps=num_train_steps, steps_per_loop=steps_per_loop,
        save_checkpoints_steps=save_checkpoints_steps, keep_checkpoint_max=keep_checkpoint_max,
        gradient_accumulation_steps=gradient_accumulation_steps, jit_compile=jit_compile,
        device_loop=device_loop, prefetch_to_device=prefetch_to_device,
        global_batch_size=train_batch_size, seq_length=max_seq_length))

    def train_dataset_fn(ctx):
      return conll.make_dataset(train_file, max_seq_length, train_batch_size,
                                is_training=True, drop_remainder=True, input_context=ctx,
                                seed=seed)

    init_fn = None
    if init_checkpoint:
      init_fn = lambda m: progress(str(checkpoints.load_weights(m, init_checkpoint)))  # noqa: E731
    if eval_during_training:
      def write_best_files(folder):
        loop.write_model_files(bert_config, folder, vocab_file)
        write_labels(folder, label_list, do_lower_case, max_seq_length)
      from bert_tf.data.classifier_features import (  # pylint: disable=import-outside-toplevel
          tokenizer_fingerprint)
      hook = eval_during.EvalDuringTraining(
          strategy, model, evaluate_dev, output_dir, best_metric,
          patience=early_stopping_patience, write_files=write_best_files, progress=progress,
          eval_data=eval_during.data_fingerprint(
              "token_classifier", max_seq_length, list(label_list),
              tokenizer_fingerprint(tokenizer),
              [[s.words, s.tags] for s in eval_sentences]))
    else:
      eval_during.note_kept_best(best_dir, progress)
    # The token head does not use the pooler: no gradient there (as run_squad's).
    with models.unused_pooler_quiet(), record_check.naming_damaged_records(
        [train_file], record_check.CACHE_ADVICE):
      results["train"] = trainer.train(train_dataset_fn, init_fn=init_fn,
                                       summary_writer=(loop.summary_writer(output_dir)
                                                       if chief else None),
                                       progress=progress, checkpoint_hook=hook)
    global_step = results["train"]["global_step"]
    if use_best_checkpoint:
      global_step = eval_during.restore_best(model, best_dir, progress)
    if export_google_checkpoint and chief:
      google_dir = loop.export_google_folder(model, bert_config, output_dir, global_step,
                                             vocab_file)
      write_labels(google_dir, label_list, do_lower_case, max_seq_length)
  else:
    global_step = eval_during.restore_without_training(
        model, output_dir, init_checkpoint, phase, use_best_checkpoint, progress)

  if do_eval:
    # The last evaluation during training was of these weights (not so with
    # use_best_checkpoint, or a run that only resumed a finished training): reuse it.
    done = hook.evaluated(global_step) if hook and not use_best_checkpoint else None
    if done is not None and "predicted" in last_eval:
      progress(f"evaluation of step {global_step}: done during training")
      eval_results = dict(done)
    else:
      eval_results = evaluate_dev()
    eval_results["global_step"] = global_step
    if chief:
      loop.write_eval_results(os.path.join(output_dir, "eval_results.txt"), eval_results,
                              float32=False)
      if done is None:  # (else written during training)
        loop.write_eval_summaries(output_dir, eval_results, global_step)
      write_tagged(os.path.join(output_dir, "eval_predictions.txt"), eval_sentences,
                   last_eval["predicted"])
    results["eval"] = eval_results

  if do_predict:
    _, predicted = infer("predict", predict_sentences, predict_batch_size)
    results["predict"] = {"predictions": os.path.join(output_dir, "test_predictions.txt")}
    labelled = predict_sentences[0].tags is not None
    if labelled:
      test_results = scores([s.tags for s in predict_sentences], predicted, label_list,
                            prefix="test_")
      test_results["global_step"] = global_step
      results["predict"]["results"] = test_results
    if chief:
      write_tagged(results["predict"]["predictions"], predict_sentences, predicted)
      if labelled:
        loop.write_eval_results(os.path.join(output_dir, "test_results.txt"), test_results,
                                float32=False)
      elif fileio.remove_stale_outputs([os.path.join(output_dir, "test_results.txt")]):
        progress("removed test_results.txt of an earlier run (test.txt has no tags now)")
  # The run went through: its checkpoints fit this config. Not into a folder without any (an
  # eval, predict or export of --init_checkpoint): a config without weights loads as nothing.
  if chief and loop.latest_checkpoint(output_dir):
    loop.write_model_files(bert_config, output_dir, vocab_file)
    write_labels(output_dir, label_list, do_lower_case, max_seq_length)
  return results
