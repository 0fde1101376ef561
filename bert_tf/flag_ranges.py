"""The one range check of every script's number flags: nan, inf, negative rates and the like.

absl checks that ``--learning_rate=nan`` is a float; it is, and a run with it trains a NaN
model, exports it and exits 0. ``RULES`` says, once for every script, which values each number
flag may take; ``check`` (called by ``cli.run`` before a script's ``main``) raises a one-line
``BertTfError`` naming the first flag out of range. A flag a script does not define, or left
at None (unset), is not checked.
"""

import math
import numbers

from bert_tf.errors import BertTfError


def _finite(value):
  return isinstance(value, numbers.Real) and math.isfinite(value)


# name -> (test, what the value must be). Probabilities of dropping or masking are fractions.
_POSITIVE = (lambda v: _finite(v) and v > 0, "a finite number > 0")
_NON_NEGATIVE = (lambda v: _finite(v) and v >= 0, "a finite number >= 0")
_FRACTION = (lambda v: _finite(v) and 0 <= v <= 1, "in [0, 1]")
_DROP = (lambda v: _finite(v) and 0 <= v < 1, "in [0, 1)")
_AT_LEAST_1 = (lambda v: v >= 1, ">= 1")
_AT_LEAST_0 = (lambda v: v >= 0, ">= 0")

RULES = {
    # Optimizer and schedule (training/flags.py and the scripts).
    "learning_rate": _POSITIVE,
    "end_learning_rate": _NON_NEGATIVE,
    "lr_decay_power": _NON_NEGATIVE,
    "weight_decay_rate": _NON_NEGATIVE,
    "adam_beta1": _DROP,
    "adam_beta2": _DROP,
    "adam_epsilon": _NON_NEGATIVE,
    "clip_norm": _NON_NEGATIVE,
    "warmup_proportion": _FRACTION,
    "num_train_epochs": _POSITIVE,
    "num_train_steps": _AT_LEAST_1,
    "num_warmup_steps": _AT_LEAST_0,
    "save_checkpoints_steps": _AT_LEAST_0,
    "steps_per_loop": _AT_LEAST_1,
    "iterations_per_loop": _AT_LEAST_1,
    "max_eval_steps": _AT_LEAST_1,
    "train_batch_size": _AT_LEAST_1,
    "eval_batch_size": _AT_LEAST_1,
    "predict_batch_size": _AT_LEAST_1,
    "classifier_dropout": _DROP,
    "masked_lm_prob": (lambda v: _finite(v) and 0 < v <= 1, "in (0, 1]"),
    "peak_tflops": _POSITIVE,
    "null_score_diff_threshold": (_finite, "a finite number"),
    "worker_start_timeout_s": _POSITIVE,
    # keras.utils.set_random_seed's range (create_pretraining_data's --random_seed, Python's
    # random.Random as the original, takes any integer).
    "seed": (lambda v: 0 <= v < 2**32, "in [0, 2**32 - 1]"),
    "shard_size_mb": _POSITIVE,
    # [CLS], a word piece and [SEP] (a pair: both texts may be cut to nothing); scripts that
    # need more say so themselves.
    "max_seq_length": (lambda v: v >= 3, ">= 3"),
    "num_unused_tokens": _AT_LEAST_0,  # build_vocab.py
    "min_pair_count": _AT_LEAST_1,
    "min_sentence_chars": _AT_LEAST_1,  # sample_corpus.py (0 kept empty "sentences")
}

# Path flags given empty (``--output_file=``): no path (a write to "" was a traceback, a glob
# of "" matched the working folder).
PATH_FLAGS = ("input_file", "output_file", "output_dir", "vocab_file", "bert_config_file",
              "init_checkpoint", "data_dir", "export_dir", "train_file", "predict_file",
              "eval_input_file")


# ``optimization.create_optimizer``'s names of the optimizer flags (``optimizer_kwargs``).
_OPTIMIZER_NAMES = {"beta_1": "adam_beta1", "beta_2": "adam_beta2", "epsilon": "adam_epsilon",
                    "power": "lr_decay_power"}


# What ``check_arguments`` checks: the numbers only the scripts checked (the library's own
# checks name batch sizes, lengths and step counts in its words). From Python a learning rate
# of 0 is a frozen run (the tests' early stopping), not an error.
_LIBRARY_RULES = {
    "learning_rate": (lambda v: _finite(v) and v >= 0, "a finite number >= 0"),
    **{name: RULES[name] for name in (
        "warmup_proportion", "num_train_epochs", "end_learning_rate", "lr_decay_power",
        "weight_decay_rate", "adam_beta1", "adam_beta2", "adam_epsilon", "clip_norm",
        "classifier_dropout", "masked_lm_prob", "null_score_diff_threshold")},
}


def check_arguments(arguments):
  """``check`` for a library function's keyword arguments (``run_classifier(...,
  learning_rate=-1.0)`` in a notebook trained with a negative rate: the range checks were the
  scripts' only), ``optimizer_kwargs``' entries included: a one-line ``BertTfError``,
  ``learning_rate=-1.0: must be ...``, for the first argument that ``_LIBRARY_RULES`` rejects
  or that is not a number. None is not checked."""
  given = dict(arguments)
  given.update(arguments.get("optimizer_kwargs") or {})
  for name, value in given.items():
    rule = _LIBRARY_RULES.get(_OPTIMIZER_NAMES.get(name, name))
    if rule is None or value is None:
      continue
    ok, what = rule
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not ok(value):
      raise BertTfError(f"{name}={value!r}: must be {what}")


def check(flag_values):
  """Raises ``BertTfError`` (``--name=value: must be ...``) for the first flag of
  ``flag_values`` (parsed ``absl.flags.FlagValues``) that ``RULES`` rejects."""
  for name, (ok, what) in RULES.items():
    if name not in flag_values:
      continue
    value = flag_values[name].value
    if value is not None and not ok(value):
      raise BertTfError(f"--{name}={value}: must be {what}")
  for name in PATH_FLAGS:
    if name not in flag_values:
      continue
    value = flag_values[name].value
    empty = (not any(str(v).strip() for v in value) if isinstance(value, list)
             else value is not None and not str(value).strip())
    if empty:
      raise BertTfError(f"--{name} is empty: give a path")
