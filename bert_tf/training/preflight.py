"""Checks a training run makes before its first step (before the model is built, where it can):
counts that must be positive, the special tokens of the vocab, the ``keep_checkpoint_max``
convention, a weights source for an eval- or predict-only run, and TF_CONFIG.

Each refusal is a one-line ``BertTfError`` naming the flag or file, so that a mistake costs
seconds rather than a whole training followed by a traceback. (Range checks of the float
flags, learning rate and dropout, live with the flags themselves.)
"""

import json
import os

from bert_tf.errors import BertTfError

# What every task's features need: [CLS] A [SEP] (B [SEP]), and [UNK] for unknown words.
FEATURE_TOKENS = ("[UNK]", "[CLS]", "[SEP]")


def check_at_least(minimums):
  """``{flag: (value, minimum)}``: each value an integer >= its minimum.

  Example: ``check_at_least({"--eval_batch_size": (eval_batch_size, 1)})``.
  """
  for flag, (value, minimum) in minimums.items():
    if value is None or value < minimum:
      raise BertTfError(f"{flag} must be at least {minimum}, got {value}")


def keep_checkpoint_max(value):
  """The original's convention (``tf.estimator.RunConfig``): 0 (or None) keeps every
  checkpoint. Returns ``tf.train.CheckpointManager``'s ``max_to_keep`` (None: keep all)."""
  if value is None or value == 0:
    return None
  if value < 0:
    raise BertTfError(f"--keep_checkpoint_max must be 0 (keep every checkpoint) or more, "
                      f"got {value}")
  return value


def check_special_tokens(vocab, vocab_file, tokens=FEATURE_TOKENS):
  """Refuses a vocab (``{token: id}``) that lacks one of ``tokens``, naming the file."""
  missing = [t for t in tokens if t not in vocab]
  if missing:
    raise BertTfError(f"vocab file {vocab_file}: no {', '.join(missing)} token (a BERT vocab "
                      f"needs {', '.join(tokens)})")


def check_tokenizer(tokenizer, vocab_file, bert_config, do_lower_case, init_checkpoint,
                    progress, config_file=None):
  """The fine-tuning scripts' vocab checks: its size against the config's (``config_file``
  named when given), BERT's special tokens, and ``--do_lower_case`` against the model
  (``casing.check_flag``: an error, or a warning line given to ``progress``); and the config
  against ``init_checkpoint``'s sizes (``checkpoints.check_config_fits``), before any model
  is built."""
  from bert_tf import casing, tokenization  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  if init_checkpoint:
    checkpoints.check_config_fits(bert_config, init_checkpoint)
  tokenization.check_vocab_size(vocab_file, tokenization.vocab_size(tokenizer.vocab),
                                bert_config.vocab_size, config_file)
  check_special_tokens(tokenizer.vocab, vocab_file)
  warning = casing.check_flag(do_lower_case, tokenizer.vocab, vocab_file, init_checkpoint)
  if warning:
    progress(warning)


def note_unused_tokens_in_export(preserve_unused_tokens, progress):
  """A warning line when a run that kept ``[unusedN]`` words whole exports SavedModels: their
  in-graph tokenizer splits such words as the default does."""
  if preserve_unused_tokens and progress:
    progress("warning: --preserve_unused_tokens: the SavedModels' in-graph tokenizer splits "
             "[unusedN] words into pieces, unlike this run's; raw-text requests holding them "
             "are tokenized otherwise than the training data")


def require_weights(phase, has_checkpoint, init_checkpoint, output_dir):
  """Refuses an eval / predict run without training whose model would keep random weights:
  no training checkpoint in ``output_dir`` and no ``init_checkpoint``.

  (The original's Estimator evaluates a freshly initialised model then, and exits 0: never
  what anyone wants.) Call it before building the model; ``check_loaded`` covers an
  ``init_checkpoint`` that lacks part of the model (a pre-trained BERT has no task head).
  """
  if not has_checkpoint and not init_checkpoint:
    raise BertTfError(f"{phase} without --do_train needs trained weights: no training "
                      f"checkpoint in --output_dir {output_dir} and no --init_checkpoint "
                      "(the model would be random)")


def check_loaded(phase, report):
  """After loading ``--init_checkpoint`` for an eval / predict run without training: refuses
  when variables were missing from it (``checkpoints.LoadReport.missing``), since they would
  stay random: a pre-trained BERT's checkpoint has no fine-tuned head."""
  if report.missing:
    shown = ", ".join(report.missing[:3]) + (", ..." if len(report.missing) > 3 else "")
    raise BertTfError(f"{phase} without --do_train: --init_checkpoint {report.source} lacks "
                      f"{shown} (they would be random); train first (--do_train) or give a "
                      "checkpoint that holds them")


def check_tf_config(environ=None):
  """Refuses a set TF_CONFIG that MultiWorkerMirroredStrategy cannot use: not JSON, no
  ``cluster`` of jobs listing ``host:port`` addresses, no ``task`` with a ``type`` of the
  cluster and an ``index`` in range. An unset or empty TF_CONFIG is left to the caller."""
  text = (os.environ if environ is None else environ).get("TF_CONFIG", "")
  if not text.strip():
    return None
  try:
    config = json.loads(text)
  except ValueError as e:
    raise BertTfError(f"TF_CONFIG is not valid JSON: {e}") from None
  if not isinstance(config, dict):
    raise BertTfError("TF_CONFIG must be a JSON object with 'cluster' and 'task'")
  cluster = config.get("cluster")
  if not isinstance(cluster, dict) or not cluster:
    raise BertTfError("TF_CONFIG has no 'cluster' (e.g. {\"worker\": [\"host1:port\", "
                      "\"host2:port\"]})")
  for job, addresses in cluster.items():
    # A job lists its tasks' addresses; a sparse job maps task indexes to them.
    listed = list(addresses.values()) if isinstance(addresses, dict) else addresses
    if (not isinstance(listed, list) or not listed or
        not all(isinstance(a, str) and ":" in a for a in listed)):
      raise BertTfError(f"TF_CONFIG cluster job {job!r} must be a list of 'host:port' "
                        f"addresses, got {addresses!r}")
  task = config.get("task")
  if not isinstance(task, dict) or "type" not in task or "index" not in task:
    raise BertTfError("TF_CONFIG has no 'task' with 'type' and 'index' (e.g. {\"type\": "
                      "\"worker\", \"index\": 0})")
  if task["type"] not in cluster:
    raise BertTfError(f"TF_CONFIG task type {task['type']!r} is not a job of its cluster "
                      f"({', '.join(cluster)})")
  index, job = task["index"], cluster[task["type"]]
  indexes = (sorted(int(i) for i in job if str(i).isdigit()) if isinstance(job, dict)
             else list(range(len(job))))
  if isinstance(index, bool) or not isinstance(index, int) or index not in indexes:
    raise BertTfError(f"TF_CONFIG task index {index!r} is out of range: job "
                      f"{task['type']!r} has task(s) {', '.join(map(str, indexes))}")
  return config
