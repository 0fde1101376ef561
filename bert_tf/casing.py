"""The casing of a model (``do_lower_case``): from the caller, a Hugging Face
``tokenizer_config.json``, Google's released checkpoint names, or the vocab itself."""

import os

from absl import logging

from bert_tf import fileio, tokenization
from bert_tf.errors import BertTfError


def _read_json_field(path, field):
  values = fileio.read_json(path)
  return values.get(field) if isinstance(values, dict) else None


def _tokenizer_config_casing(path):
  """``do_lower_case`` of a Hugging Face ``tokenizer_config.json`` (None when absent)."""
  value = _read_json_field(path, "do_lower_case")
  if value is not None and not isinstance(value, bool):
    raise BertTfError(f"{path}: do_lower_case must be true or false, got {value!r}")
  return value


def _casing_of_google_name(folder):
  """True/False for Google's released uncased/cased checkpoints (by folder name), else None."""
  probe = os.path.join(folder, "bert_model.ckpt")
  for guess in (True, False):
    try:
      tokenization.validate_case_matches_checkpoint(guess, probe)
    except BertTfError:
      return not guess
  return None


def _capital_token(vocab):
  """The first token with capital letters (``[...]`` tokens aside), or None."""
  return next((token for token in vocab if token != token.lower() and
               not (token.startswith("[") and token.endswith("]"))), None)


def _casing_of_vocab(vocab):
  """A vocab with capital letters (outside ``[...]`` tokens) belongs to a cased model."""
  return _capital_token(vocab) is None


def resolve_do_lower_case(folder, vocab, do_lower_case=None, weights=None, vocab_file=None):
  """The casing of a model: ``(do_lower_case, where it was learned)``.

  In order: the ``do_lower_case`` argument (checked as the scripts' ``--do_lower_case``:
  against Google's released checkpoint names and a ``tokenizer_config.json`` in ``folder``,
  errors; against the vocab's casing, a warning), the fine-tuning's own (``classifier.json`` or
  ``token_classifier.json`` in ``folder``: a cased vocab fine-tuned with the default
  ``--do_lower_case=True`` was classified without lower-casing), ``tokenizer_config.json`` in
  ``folder`` (Hugging Face), Google's released checkpoint names, and the vocab itself (capital
  letters in it mean a cased model).
  """
  if do_lower_case is not None:
    tokenization.validate_case_matches_checkpoint(
        bool(do_lower_case), weights or os.path.join(folder, "bert_model.ckpt"))
    warning = check_flag(do_lower_case, vocab, vocab_file or os.path.join(folder, "vocab.txt"),
                         folder, name="do_lower_case")
    if warning:
      logging.warning("%s", warning.removeprefix("warning: "))
    return bool(do_lower_case), "argument"
  from bert_tf import classifier_labels  # pylint: disable=import-outside-toplevel
  for read, name in ((classifier_labels.read, classifier_labels.FILE_NAME),
                     (classifier_labels.read_tokens, classifier_labels.TOKEN_FILE_NAME)):
    info = read(folder)
    if info is not None and isinstance(info.get("do_lower_case"), bool):
      return info["do_lower_case"], os.path.join(folder, name)
  tokenizer_config = os.path.join(folder, "tokenizer_config.json")
  if fileio.exists(tokenizer_config):
    value = _tokenizer_config_casing(tokenizer_config)
    if value is not None:
      return value, tokenizer_config
  known = _casing_of_google_name(folder)
  if known is not None:
    return known, "Google's checkpoint name"
  return _casing_of_vocab(vocab), "vocab"


def check_flag(do_lower_case, vocab, vocab_file, init_checkpoint=None, name="--do_lower_case"):
  """``--do_lower_case`` against what the model says of its casing, beyond the original's
  check of Google's checkpoint names: a Hugging Face ``tokenizer_config.json`` beside
  ``init_checkpoint`` that says otherwise is an error; a vocab of the other casing (capital
  letters in it, or none) is a warning, returned as a line (None when all agree).

  Raises:
    BertTfError: ``tokenizer_config.json`` says the other ``do_lower_case``.
  """
  lower = bool(do_lower_case)
  folder = fileio.checkpoint_folder(init_checkpoint)
  tokenizer_config = folder and os.path.join(folder, "tokenizer_config.json")
  if tokenizer_config and fileio.exists(tokenizer_config):
    value = _tokenizer_config_casing(tokenizer_config)
    if value is not None:
      if value != lower:
        raise BertTfError(
            f"{name}={lower} does not match {tokenizer_config}: do_lower_case "
            f"{str(value).lower()} ({'an uncased' if value else 'a cased'} model), so pass "
            f"{name}={value}")
      return None
  capital = _capital_token(vocab)
  if (capital is None) == lower:
    return None
  if lower:
    return (f"warning: {name}=True, but {vocab_file} is a cased vocab (it has "
            f"{capital!r}): the text's capitals are lost to the model; a cased model takes "
            f"{name}=False")
  return (f"warning: {name}=False, but {vocab_file} has no capital letters (an "
          "uncased vocab): capitalised words become other pieces or [UNK]; an uncased model "
          f"takes {name}=True")
