"""Using a trained BERT: load a checkpoint folder in one call, then look inside it.

  >>> bert = bert_tf.load("uncased_L-12_H-768_A-12")            # doctest: +SKIP
  >>> out = bert(["Paris is nice.", ("A man.", "He walks.")],
  ...            output_hidden_states=True, output_attentions=True)  # doctest: +SKIP
  >>> len(out.hidden_states), out.attentions[0].shape             # doctest: +SKIP
  (13, (2, 12, 8, 8))
  >>> bert.fill_mask("Paris is the most [MASK] city.", top_k=3)   # doctest: +SKIP
  >>> bert.next_sentence("I went to the store.", "I bought milk.")   # doctest: +SKIP
  >>> bert.embed(["a sentence", "another"], pooling="last4_mean")  # doctest: +SKIP
  >>> bert.word_embedding("He sat by the river bank.", "bank")     # doctest: +SKIP

``load`` reads a folder in Google's layout (``bert_config.json``, ``vocab.txt``,
``bert_model.ckpt*``), a bert_tf training checkpoint folder with a ``bert_config.json`` and
``vocab.txt`` beside it (or given by ``config_file=``/``vocab_file=``), or a Hugging Face folder
(``config.json``, ``vocab.txt``, ``model.safetensors``). The masked-LM and next-sentence heads
are loaded when the checkpoint has them.

Texts are tokenized as the original does (``pack_example``: ``[CLS] a [SEP] (b [SEP])``), with
``[MASK]`` and the other special tokens kept whole where they occur in the raw text (as Hugging
Face's tokenizer does). Many texts run in padded batches: sorted by length, cut into batches of
``batch_size``, each padded to its own longest sequence.

Shape legend: B = texts, S = longest sequence in the call (tokens), H = hidden size,
L = encoder layers, N = attention heads, V = vocab size, P = [MASK]s per text, D = embedding
size (H, or k*H for a concatenation of k layers).
"""

import copy
import dataclasses
import os
import re
import warnings

import numpy as np

import tensorflow as tf
from absl import logging

from bert_tf import classifier_labels, inference_heads, pretrained, progress, quiet, tfhub
from bert_tf import tokenization
from bert_tf import pooling as pooling_lib
from bert_tf.casing import resolve_do_lower_case
from bert_tf.errors import BertTfError, quoted, shortened
from bert_tf.extract import pack_example
from bert_tf.modeling import BertPretrainer, checkpoints
from bert_tf.inference_heads import _IDS, MASK_TOKEN, _as_items  # noqa: F401
from bert_tf.pooling import COMBINES, POOLINGS, parse_pooling, pool_tokens  # noqa: F401

# Kept whole where they occur in raw text (Google's tokenizer would split "[MASK]" into
# "[", "mask", "]"; Hugging Face's keeps it, and fill_mask needs it).
SPECIAL_TOKENS = tokenization.SPECIAL_TOKENS
# Added by packing; raw text holding them gets them twice (see InferenceModel.tokenize).
_PACKING_TOKENS = ("[CLS]", "[SEP]")
# ``layers=`` name of the embedding output (encoder layers are ints, as extract_features.py's).
EMBEDDINGS = "embeddings"
# ``words``' choices of what a word is; the first is the default.
WORD_SPLITS = ("basic", "whitespace")
# The original tokenizer's whitespace (tokenization._is_whitespace): \t \n \r, space, Zs.
_WHITESPACE = re.compile(r"[\t\n\r \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")


# The compiled functions' inputs: [b,s] int32 ids/mask/types (or [b,P] positions), [k] int32.
_INDEXES = tf.TensorSpec([None], tf.int32)


# Each loaded model compiles its own functions (of its weights) and traces each once
# (bert_tf.quiet): the sixth model loaded in a process was told not to create tf.functions in a
# loop.
quiet.per_run_functions("InferenceModel._compile.<locals>.",
                        f"{inference_heads.HeadsMixin._classifier_fn.__qualname__}.<locals>.",
                        f"{inference_heads.HeadsMixin._tagger_fn.__qualname__}.<locals>.")


@dataclasses.dataclass
class BertOutput:
  """What calling an ``InferenceModel`` returns (numpy arrays, float32 / int32).

  Attributes:
    tokens: B lists of word pieces, ``[CLS] ... [SEP]`` (no padding).
    input_word_ids, input_mask, input_type_ids: [B,S] int32, padded with 0.
    sequence_output: [B,S,H], the last layer.
    pooled_output: [B,H], or None when the checkpoint has no pooler (e.g. a Hugging Face
      masked-LM-only model).
    hidden_states: with ``output_hidden_states``, a tuple of L+1 arrays [B,S,H]: the embedding
      output, then every layer (Hugging Face's convention); else None.
    attentions: with ``output_attentions``, a tuple of L arrays [B,N,S,S] (rows: from, columns:
      to); else None.
  Hidden states and attention rows at padding positions (``input_mask == 0``) are zeros, so
  results do not depend on how texts were batched. Also readable as ``out["sequence_output"]``.
  """
  tokens: list
  input_word_ids: np.ndarray
  input_mask: np.ndarray
  input_type_ids: np.ndarray
  sequence_output: np.ndarray
  pooled_output: np.ndarray = None
  hidden_states: tuple = None
  attentions: tuple = None

  def __getitem__(self, name):
    return getattr(self, name)

  def keys(self):
    return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]


# ---------------------------------------------------------------------------------------------
# Loading.
# ---------------------------------------------------------------------------------------------


def load(path, *, config_file=None, vocab_file=None, do_lower_case=None, max_seq_length=None,
         batch_size=32):
  """Loads a trained BERT (encoder, heads when present, tokenizer, casing) ready to use.

  Args:
    path: a model folder (Google, bert_tf or Hugging Face layout), a checkpoint prefix
      (``.../bert_model.ckpt``) or ``.safetensors`` file whose folder holds the config/vocab,
      the name of one of Google's released checkpoints (``"bert-base-uncased"``,
      ``"uncased_L-12_H-768_A-12"``, ...: downloaded once into a cache, see
      ``bert_tf.pretrained``), or one of Google's BERT modules of TF-Hub (its folder, a
      ``.tar.gz`` or URL: ``https://tfhub.dev/google/bert_uncased_L-12_H-768_A-12/1``; see
      ``bert_tf.tfhub``).
    config_file: ``bert_config.json`` / ``config.json``, if not in the folder (or a model name).
    vocab_file: ``vocab.txt``, if not in the folder (or a model name).
    do_lower_case: override the casing (else learned as in ``resolve_do_lower_case``).
    max_seq_length: longest input in tokens (default: the model's max_position_embeddings);
      longer inputs are truncated as the original does.
    batch_size: sequences per batch.
  Returns:
    An ``InferenceModel``.
  Raises:
    BertTfError: a missing file, a config that does not fit the checkpoint, a casing that
      contradicts a Google checkpoint's name.
  """
  if not isinstance(path, (str, os.PathLike)):
    raise BertTfError(f"load: expected a model's folder, checkpoint, file or name (a str), got "
                      f"{quoted(path)}")
  path = os.fspath(path)
  if tfhub.is_handle(path):
    return _load_tfhub_module(path, config_file, vocab_file, do_lower_case, max_seq_length,
                              batch_size)
  given = path
  path = pretrained.resolve(path)
  if path is not given and path != given:  # a released model, from the download cache
    try:
      return _load_path(path, config_file, vocab_file, do_lower_case, max_seq_length,
                        batch_size)
    except BertTfError as e:
      raise BertTfError(f"{e} (in the download cache: delete {path} and it is downloaded "
                        "again)") from None
  return _load_path(path, config_file, vocab_file, do_lower_case, max_seq_length, batch_size)


def _load_path(path, config_file, vocab_file, do_lower_case, max_seq_length, batch_size):
  """``load`` of a folder or checkpoint."""
  config_file = pretrained.resolve_file(config_file, "bert_config.json")
  vocab_file = pretrained.resolve_file(vocab_file, "vocab.txt")
  path = os.fspath(path) if path else path
  if not path or not (tf.io.gfile.exists(path) or tf.io.gfile.exists(path + ".index")):
    # A bare word (or an "org/name") may have been meant as a released model's name.
    parent = os.path.dirname(path or "")
    named = (path and not path.startswith(("/", ".", "~")) and path.count("/") <= 1
             and not os.path.splitext(path)[1]
             and not (parent and os.path.isdir(parent)))  # "out/google": a path in out/
    hint = (f" (no such folder or checkpoint, nor a released model's name"
            f"{pretrained.suggest(path)})") if named else ""
    raise BertTfError(f"model not found: {path!r}{hint}")
  folder = path if tf.io.gfile.isdir(path) else (os.path.dirname(path) or ".")

  if config_file is None:
    for name in ("bert_config.json", "config.json"):
      if tf.io.gfile.exists(os.path.join(folder, name)):
        config_file = os.path.join(folder, name)
        break
    else:
      raise BertTfError(f"no bert_config.json or config.json in {folder!r} "
                        "(pass config_file=, or --bert_config_file)")
  config = checkpoints.load_config(config_file)

  if vocab_file is None:
    vocab_file = os.path.join(folder, "vocab.txt")
    if not tf.io.gfile.exists(vocab_file):
      raise BertTfError(f"no vocab.txt in {folder!r} (pass vocab_file=, or --vocab_file)")
  vocab = tokenization.load_vocab(vocab_file)
  tokenization.check_vocab_size(vocab_file, tokenization.vocab_size(vocab), config.vocab_size,
                               config_file)

  weights = path if not tf.io.gfile.isdir(path) else None
  lower, source = resolve_do_lower_case(folder, vocab, do_lower_case, weights, vocab_file)
  never_split = [t for t in SPECIAL_TOKENS if t in vocab]
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=lower,
                                         never_split=never_split,
                                         clean_up_tokenization_spaces=_clean_up_setting(folder))
  classifier_info = classifier_labels.read(folder)
  token_classifier_info = classifier_labels.read_tokens(folder)
  if classifier_info is None and token_classifier_info is None:  # a Hugging Face task folder
    classifier_info, token_classifier_info = classifier_labels.from_hugging_face(folder)

  return _ready(config, tokenizer, path, lower, source, max_seq_length, batch_size,
                classifier_info, token_classifier_info)


def _load_tfhub_module(handle, config_file, vocab_file, do_lower_case, max_seq_length,
                       batch_size):
  """``load`` of one of Google's BERT modules of TF-Hub (``bert_tf.tfhub``): its weights, its
  vocab (or ``vocab_file``) and the casing its ``tokenization_info`` says (or
  ``do_lower_case``); ``config_file``, if given, for the model's sizes."""
  module = tfhub.load(handle, pretrained.resolve_file(config_file, "bert_config.json"))
  vocab_file = pretrained.resolve_file(vocab_file, "vocab.txt") or module.vocab_file
  vocab = tokenization.load_vocab(vocab_file)
  tokenization.check_vocab_size(vocab_file, tokenization.vocab_size(vocab),
                                module.config.vocab_size, config_file or module.checkpoint)
  if do_lower_case is None:
    lower, source = module.do_lower_case, module.casing_from
  else:
    lower, source = bool(do_lower_case), "do_lower_case="
  tokenizer = tokenization.FullTokenizer(
      vocab_file, do_lower_case=lower, never_split=[t for t in SPECIAL_TOKENS if t in vocab])
  return _ready(module.config, tokenizer, module.checkpoint, lower, source, max_seq_length,
                batch_size, None)


def _ready(config, tokenizer, path, lower, source, max_seq_length, batch_size,
           classifier_info, token_classifier_info=None):
  """The ``InferenceModel`` of ``config`` with the weights at ``path``."""
  checkpoints.check_config_fits(config, path)  # (before a model of a mistyped size is built)
  model = BertPretrainer(config)
  report = checkpoints.load_weights(model, path)
  # Heads (and the pooler, absent from Hugging Face's masked-LM-only models) are optional.
  missing = set(report.missing)
  lacks = lambda prefix: any(n.startswith(prefix) for n in missing)  # noqa: E731
  has_masked_lm = not lacks("cls/predictions/")
  has_next_sentence = not lacks("cls/seq_relationship/")
  has_pooler = not lacks("bert/pooler/")
  logging.info("loaded %s: do_lower_case=%s (from %s), masked LM head: %s, next sentence "
               "head: %s", path, lower, source, has_masked_lm, has_next_sentence)
  return InferenceModel(model, tokenizer, source=str(path), do_lower_case=lower,
                        has_masked_lm=has_masked_lm,
                        has_next_sentence=has_next_sentence and has_pooler,
                        has_pooler=has_pooler, max_seq_length=max_seq_length,
                        batch_size=batch_size, load_report=report, weights_path=str(path),
                        classifier_info=classifier_info,
                        token_classifier_info=token_classifier_info)


def _clean_up_setting(folder):
  """A Hugging Face folder's ``tokenizer_config.json`` ``clean_up_tokenization_spaces`` (as
  transformers honours it), else True (``FullTokenizer``'s default)."""
  from bert_tf.casing import _read_json_field  # pylint: disable=import-outside-toplevel
  path = os.path.join(folder, "tokenizer_config.json")
  value = _read_json_field(path, "clean_up_tokenization_spaces") if tf.io.gfile.exists(
      path) else None
  return value if isinstance(value, bool) else True


# ---------------------------------------------------------------------------------------------
# The ready model.
# ---------------------------------------------------------------------------------------------


class InferenceModel(inference_heads.HeadsMixin):
  """A loaded BERT with its tokenizer; see the module docstring for examples.

  Attributes:
    model: the ``BertPretrainer`` (``model.bert`` is the encoder ``BertModel``).
    config, tokenizer, do_lower_case, source (the path loaded).
    has_masked_lm, has_next_sentence, has_pooler: which parts the checkpoint had.
    load_report: the ``checkpoints.LoadReport`` of the load.
    classifier_info: for a folder fine-tuned by run_classifier, its ``classifier.json``
      (``labels``, ``is_regression``, ``max_seq_length``, ...; see ``classify``), else None.
    token_classifier_info: for a folder fine-tuned by run_ner, its ``token_classifier.json``
      (``labels``, ``max_seq_length``, ...; see ``tag``), else None.
  """

  def __init__(self, model, tokenizer, *, source="", do_lower_case=True, has_masked_lm=True,
               has_next_sentence=True, has_pooler=True, max_seq_length=None, batch_size=32,
               load_report=None, weights_path=None, classifier_info=None,
               token_classifier_info=None):
    self.model = model
    self.encoder = model.bert
    self.config = model.config
    self.tokenizer = tokenizer
    self.source = source
    self.do_lower_case = do_lower_case
    self.has_masked_lm = has_masked_lm
    self.has_next_sentence = has_next_sentence
    self.has_pooler = has_pooler
    self.load_report = load_report
    self.weights_path = weights_path or source
    self.classifier_info = classifier_info  # classifier_labels.read's dict, or None
    self._classifier = None
    self.token_classifier_info = token_classifier_info  # classifier_labels.read_tokens's
    self._tagger = None
    self.max_seq_length = self.config.max_position_embeddings
    self.max_seq_length = self._limit(max_seq_length)
    if batch_size < 1:
      raise BertTfError(f"batch_size must be positive, got {batch_size}")
    self.batch_size = batch_size
    self._warned_packing_tokens = False
    self._never_split_re = None
    if tokenizer.never_split:
      by_length = sorted(set(tokenizer.never_split), key=len, reverse=True)
      self._never_split_re = re.compile("(" + "|".join(map(re.escape, by_length)) + ")")
    self._compile()

  def __repr__(self):
    c = self.config
    heads = [n for n, has in (("masked LM", self.has_masked_lm),
                              ("next sentence", self.has_next_sentence)) if has]
    return (f"InferenceModel({self.source!r}: L={c.num_hidden_layers}, H={c.hidden_size}, "
            f"N={c.num_attention_heads}, vocab={c.vocab_size}, "
            f"do_lower_case={self.do_lower_case}, heads: {', '.join(heads) or 'none'})")

  # --- tokenization -----------------------------------------------------------------------

  def tokenize(self, texts, text_pairs=None, max_seq_length=None, add_special_tokens=True):
    """Texts -> ``(tokens lists, segment id lists)``, packed and truncated as the original.

    ``add_special_tokens=False`` (as Hugging Face's): texts that already hold their own
    ``[CLS] ... [SEP] (... [SEP])`` are taken as they are, with nothing added; segment 0 runs
    up to and including the first ``[SEP]``, segment 1 after it (a pair's ``text_b``, given
    separately, is segment 1). Too long a sequence is cut at its end.
    """
    return self._tokenize(texts, text_pairs, max_seq_length, add_special_tokens,
                          self.tokenizer)

  def _tokenize(self, texts, text_pairs, max_seq_length, add_special_tokens, tokenizer):
    """``tokenize`` with ``tokenizer`` for the texts (``fine_tuning_tokenizer`` for the
    fine-tuned heads) when bert_tf adds the special tokens."""
    limit = self._limit(max_seq_length)
    tokens, segments = [], []
    for a, b in _as_items(texts, text_pairs):
      if not add_special_tokens:
        packed, segment_ids = self._own_special_tokens(a, b, limit)
      else:
        tokens_b = self._tokenize_text(b, tokenizer) if b is not None else None
        packed, segment_ids = pack_example(self._tokenize_text(a, tokenizer), tokens_b, limit)
      tokens.append(packed)
      segments.append(segment_ids)
    return tokens, segments

  def features(self, texts, text_pairs=None, *, max_seq_length=None):
    """The encoder's inputs for texts (as ``tokenize``): ``{"input_word_ids", "input_mask",
    "input_type_ids"}``, [B,S] int32 padded with 0 to the longest, e.g. for Keras ``fit`` of
    a task model (``BertClassifier``)."""
    ids, mask, types = self._features(*self.tokenize(texts, text_pairs, max_seq_length))
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}

  def _own_special_tokens(self, a, b, limit):
    """``add_special_tokens=False``: the texts' own word pieces, nothing added."""
    tokens_a = self.tokenizer.tokenize(a)
    tokens_b = self.tokenizer.tokenize(b) if b is not None else []
    if "[SEP]" in tokens_a and b is None:
      first_b = tokens_a.index("[SEP]") + 1
    else:
      first_b = len(tokens_a)
    packed = (tokens_a + tokens_b)[:limit]
    if not packed:
      raise BertTfError(f"add_special_tokens=False: no token in {a!r}")
    return packed, [0 if i < first_b else 1 for i in range(len(packed))]

  @property
  def fine_tuning_tokenizer(self):
    """The tokenizer run_classifier.py and run_ner.py fine-tune with (their SavedModels' too):
    the original's, which cuts a ``[MASK]``, ``[CLS]`` or ``[UNK]`` written in a text into
    word pieces like any other word; ``tokenizer`` keeps them whole (``fill_mask``'s
    ``[MASK]``). ``classify`` and ``tag`` use it: they gave other numbers than the served
    model for such a text. (A folder fine-tuned with transformers saw them whole: for such a
    text its classify, like its SavedModel export, is Google's tokenization, not theirs.)"""
    plain = self.__dict__.get("_fine_tuning_tokenizer")
    if plain is None:
      plain = copy.copy(self.tokenizer)
      plain.never_split, plain._never_split_re = (), None  # pylint: disable=protected-access
      self._fine_tuning_tokenizer = plain
    return plain

  def _tokenize_text(self, text, tokenizer=None):
    """One raw text -> word pieces (``tokenizer``'s, default ``self.tokenizer``), warning
    (once per model) when it holds [CLS] or [SEP]."""
    pieces = (tokenizer or self.tokenizer).tokenize(text)
    if self._warned_packing_tokens:
      return pieces
    # Written in the text (kept whole by ``tokenizer``'s never_split; cut into word pieces by
    # ``fine_tuning_tokenizer``, which is told of them all the same).
    unicode_text = tokenization.convert_to_unicode(text)
    found = [t for t in _PACKING_TOKENS if t in self.tokenizer.never_split and t in unicode_text]
    if found:
      self._warned_packing_tokens = True
      warnings.warn(
          f"text {unicode_text[:60]!r} already holds "
          f"{' and '.join(found)}: bert_tf adds [CLS] ... [SEP] itself, so the model sees them "
          "twice; pass the plain text (and a pair as (text_a, text_b)), or "
          "add_special_tokens=False to use the text's own", UserWarning,
          stacklevel=4)
    return pieces

  def words(self, text, split="basic"):
    """The words of ``text`` and their word pieces: ``[(word, [pieces])]``.

    Args:
      text: one raw text (str or UTF-8 bytes).
      split: what counts as a word. ``"basic"`` (the default): what the basic tokenizer
        splits, so punctuation marks are words of their own, as in Hugging Face's
        ``word_ids`` ("co-founded" is 3 words: "co", "-", "founded"); the words are
        lowercased for uncased models. ``"whitespace"``: the whitespace-separated parts of the
        raw text, as written ("co-founded," is one word; ``text.split()`` for ordinary text).
        Special tokens such as ``[MASK]`` are one word each with ``"basic"``.
    Concatenating the pieces gives ``tokenizer.tokenize(text)`` in both modes.
    """
    return [(word, [p for _, pieces in parts for p in pieces]) if split == "whitespace"
            else parts[0] for word, parts in self._word_table(text, split)]

  def _word_table(self, text, split):
    """``[(word, [(basic word, [pieces])])]``: ``split``'s words, each with its basic words
    (for ``"basic"``: one entry per basic word, ``[(word, pieces)]``)."""
    if split not in WORD_SPLITS:
      raise BertTfError(f"split must be one of {', '.join(map(repr, WORD_SPLITS))}, got "
                        f"{split!r}")
    text = tokenization.convert_to_unicode(text)
    table = []
    # The original's whitespace (the basic tokenizer splits there first, and nothing it does
    # crosses it), so the chunks' basic words, joined, are the whole text's.
    for chunk in _WHITESPACE.split(text):
      parts = self._never_split_re.split(chunk) if self._never_split_re else [chunk]
      basic = []
      for i, part in enumerate(parts):
        if i % 2:
          basic.append((part, [part]))
          continue
        for word in self.tokenizer.basic_tokenizer.tokenize(part):
          basic.append((word, list(self.tokenizer.wordpiece_tokenizer.tokenize_word(word))))
      if split == "basic":
        table.extend((word, [(word, pieces)]) for word, pieces in basic)
      elif basic:  # A chunk of characters the tokenizer drops (controls) is no word.
        table.append((chunk, basic))
    return table

  def _limit(self, max_seq_length):
    limit = self.max_seq_length if max_seq_length is None else max_seq_length  # 0 is no limit
    if limit > self.config.max_position_embeddings:
      raise BertTfError(f"max_seq_length {limit} exceeds the model's max_position_embeddings "
                        f"{self.config.max_position_embeddings}")
    if limit < 3:
      raise BertTfError(f"max_seq_length must be at least 3, got {limit}")
    return limit

  # --- running the encoder in padded batches ----------------------------------------------

  # One trace per function, whatever the batch size, length or layer choice: the shapes are
  # left open in the signatures (reduce_retracing alone still traced each new shape/flag mix
  # once, and warned about retracing when texts are run one by one).
  def _encoder_fn(self, word_ids, mask, type_ids, output_attentions, layers):
    """``layers``: [k] int32 hidden-state indexes (0 = embeddings) to return, so that only
    those leave the device (a tensor, so that a new choice of layers needs no new trace)."""
    fn = self._encoder_with_attentions if output_attentions else self._encoder_alone
    return fn(word_ids, mask, type_ids, layers)

  _COMPILED = ("_encoder_alone", "_encoder_with_attentions", "_masked_lm_fn", "_next_sentence_fn")

  def __getstate__(self):
    """Copies and pickles leave the compiled functions out (closures over this model's
    encoder, with traced graphs that do not pickle): a copy compiles its own."""
    state = {k: v for k, v in self.__dict__.items() if k not in self._COMPILED}
    state["_classifier"] = state["_tagger"] = None  # (model, function): built again on use
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    self._compile()

  def _compile(self):
    """The compiled functions, this model's own: closures over its encoder and heads, not
    ``tf.function`` methods. TensorFlow binds a method to its instance through a weak
    ``TfMethodTarget``, and AutoGraph tells builtins by the ids it recorded when TensorFlow was
    first imported: in a Jupyter kernel one of them is ipykernel's per-cell ``builtins.input``,
    freed when the cell ends, and a binding that landed at that address was called as a
    builtin, with the TfMethodTarget as ``self`` (once in CI: AttributeError:
    'TfMethodTarget' object has no attribute '_encode'). A closure has no such binding."""
    encoder, model = self.encoder, self.model

    def encode(word_ids, mask, type_ids, layers, output_attentions):
      out = encoder({"input_word_ids": word_ids, "input_mask": mask,
                     "input_type_ids": type_ids}, training=False,
                    output_attentions=output_attentions)
      every = tf.stack([out["embedding_output"]] + out["encoder_outputs"])  # [L+1,b,s,H]
      hidden = tf.gather(every, layers)  # [k,b,s,H]
      result = {"hidden_states": hidden, "pooled_output": out["pooled_output"]}
      if output_attentions:
        result["attentions"] = tf.stack(out["attention_probs"])  # [L,b,N,s,s]
      return result

    @tf.function(input_signature=[_IDS, _IDS, _IDS, _INDEXES])
    def encoder_alone(word_ids, mask, type_ids, layers):
      return encode(word_ids, mask, type_ids, layers, output_attentions=False)

    @tf.function(input_signature=[_IDS, _IDS, _IDS, _INDEXES])
    def encoder_with_attentions(word_ids, mask, type_ids, layers):
      return encode(word_ids, mask, type_ids, layers, output_attentions=True)

    @tf.function(input_signature=[_IDS, _IDS, _IDS, _IDS])
    def masked_lm_fn(word_ids, mask, type_ids, positions):
      out = encoder({"input_word_ids": word_ids, "input_mask": mask,
                     "input_type_ids": type_ids}, training=False)
      logits = model.masked_lm(out["sequence_output"], positions,
                               encoder.word_embeddings)  # [b,P,V]
      return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    @tf.function(input_signature=[_IDS, _IDS, _IDS])
    def next_sentence_fn(word_ids, mask, type_ids):
      out = encoder({"input_word_ids": word_ids, "input_mask": mask,
                     "input_type_ids": type_ids}, training=False)
      return tf.nn.softmax(model.next_sentence(out["pooled_output"]), axis=-1)  # [b,2]

    self._encoder_alone = encoder_alone
    self._encoder_with_attentions = encoder_with_attentions
    self._masked_lm_fn = masked_lm_fn
    self._next_sentence_fn = next_sentence_fn

  def _batches(self, tokens, segments, batch_size=None):
    """Yields ``(indexes, word_ids, mask, type_ids)``, each batch padded to its longest.

    Sequences are sorted by length first, so that a batch wastes little on padding.
    """
    batch_size = self.batch_size if batch_size is None else batch_size
    if batch_size < 1:
      raise BertTfError(f"batch_size must be positive, got {batch_size}")
    order = sorted(range(len(tokens)), key=lambda i: -len(tokens[i]))
    starts = range(0, len(order), batch_size)
    for start in progress.track(starts, len(starts), "batches"):
      indexes = order[start:start + batch_size]
      word_ids, mask, type_ids = self._features([tokens[i] for i in indexes],
                                                [segments[i] for i in indexes])
      yield indexes, word_ids, mask, type_ids

  def _features(self, tokens, segments):
    """Token and segment lists -> ``[n,s]`` int32 word ids, mask, type ids (s: the longest)."""
    length = max(len(t) for t in tokens)
    word_ids = np.zeros((len(tokens), length), np.int32)
    mask = np.zeros_like(word_ids)
    type_ids = np.zeros_like(word_ids)
    for i, (toks, segs) in enumerate(zip(tokens, segments)):
      word_ids[i, :len(toks)] = self.tokenizer.convert_tokens_to_ids(toks)
      mask[i, :len(toks)] = 1
      type_ids[i, :len(toks)] = segs
    return word_ids, mask, type_ids

  def __call__(self, texts, text_pairs=None, *, output_hidden_states=False,
               output_attentions=False, max_seq_length=None, batch_size=None,
               add_special_tokens=True):
    """Runs the encoder on texts (str, ``(a, b)`` pairs, or lists of them) -> ``BertOutput``.

    Arrays are padded to the longest sequence of the call (S); see ``BertOutput``.
    ``add_special_tokens=False``: the texts hold their own ``[CLS]``/``[SEP]`` (``tokenize``).
    """
    tokens, segments = self.tokenize(texts, text_pairs, max_seq_length, add_special_tokens)
    word_ids, mask, type_ids = self._features(tokens, segments)
    b, s = word_ids.shape
    c = self.config
    layers = tuple(range(c.num_hidden_layers + 1)) if output_hidden_states else (
        c.num_hidden_layers,)
    hidden = np.zeros((len(layers), b, s, c.hidden_size), np.float32)
    pooled = np.zeros((b, c.hidden_size), np.float32)
    attentions = None
    if output_attentions:
      attentions = np.zeros((c.num_hidden_layers, b, c.num_attention_heads, s, s), np.float32)
    for indexes, ids, m, types in self._batches(tokens, segments, batch_size):
      out = self._encoder_fn(ids, m, types, bool(output_attentions),
                             np.array(layers, np.int32))
      n = ids.shape[1]  # This batch's length, <= s.
      real = m.astype(np.float32)  # [b,n]: padding positions are zeroed in the outputs, so
      # that they do not depend on which texts shared a batch.
      hidden[:, indexes, :n] = out["hidden_states"].numpy() * real[None, :, :, None]
      pooled[indexes] = out["pooled_output"].numpy()
      if output_attentions:
        # Padding columns are already 0 (the -10000 mask underflows in the softmax).
        attentions[:, indexes, :, :n, :n] = (out["attentions"].numpy() *
                                             real[None, :, None, :, None])
    return BertOutput(
        tokens=tokens, input_word_ids=word_ids, input_mask=mask, input_type_ids=type_ids,
        sequence_output=hidden[-1], pooled_output=pooled if self.has_pooler else None,
        hidden_states=tuple(hidden) if output_hidden_states else None,
        attentions=tuple(attentions) if output_attentions else None)

  # --- embeddings ----------------------------------------------------------------------------

  def _layer_indexes(self, layers):
    """``layers`` (``EMBEDDINGS`` or encoder layer indexes, as extract_features.py's
    ``--layers``) -> hidden-state indexes (0 = embeddings, as ``BertOutput.hidden_states``)."""
    count = self.config.num_hidden_layers
    indexes = []
    for layer in layers:
      if layer == EMBEDDINGS:
        indexes.append(0)
        continue
      if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not (
          -count <= layer < count):
        raise BertTfError(f"layers: {layer!r} is not an encoder layer of this {count}-layer "
                          f"model (0..{count - 1}, or -1 = the last .. -{count} = the first) "
                          f"nor {EMBEDDINGS!r}")
      indexes.append(int(layer) % count + 1)
    if not indexes:
      raise BertTfError("layers: no layer given")
    return indexes

  def embed(self, texts, pooling="cls", *, layers=None, combine=None, text_pairs=None,
            max_seq_length=None, batch_size=None, add_special_tokens=True):
    """One vector per text: ``[B,D]`` float32.

    Args:
      texts: str, ``(a, b)`` pair, or a list of them.
      pooling: ``"cls"`` (the [CLS] token's vector), ``"mean"`` (mean over the real tokens,
        [CLS] and [SEP] included: mask-aware), ``"max"`` (mask-aware max), ``"pooler"`` (the
        pooled output, dense+tanh on [CLS]), or ``"lastK_mean"`` / ``"lastK_concat"`` /
        ``"lastK_sum"`` (the last K layers combined per token, then the mask-aware mean).
      layers: encoder layers to use, counted as extract_features.py's ``--layers`` (the
        original's ``get_all_encoder_layers()[i]``): -1 = the last layer (the default), -2
        the one before, 0 = the first layer; ``"embeddings"`` is the embedding output. E.g.
        ``-2`` or ``[-4, -3, -2, -1]``. (``BertOutput.hidden_states`` counts as Hugging
        Face does, the embeddings first: ``layers=i`` is ``hidden_states[i + 1]`` for
        i >= 0, ``hidden_states[i]`` for i < 0.)
      combine: how several layers become one vector per token: ``"mean"`` (default),
        ``"sum"`` or ``"concat"`` (D = k*H).
    """
    token_pooling, layers, combine = pooling_lib.parse_pooling(pooling, layers, combine)
    last_k = pooling_lib.LAST_K.match(str(pooling))
    if last_k and int(last_k.group(1)) > self.config.num_hidden_layers:
      # Said in the user's words: the -K index it expands to is not something they typed.
      raise BertTfError(f"pooling={pooling} needs {last_k.group(1)} layers; this model has "
                        f"{self.config.num_hidden_layers}")
    if token_pooling == "pooler":
      self._require(self.has_pooler, "embed(pooling='pooler')", "pooler (bert/pooler/*)")
    indexes = self._layer_indexes(layers if layers is not None else [-1])
    tokens, segments = self.tokenize(texts, text_pairs, max_seq_length, add_special_tokens)
    vectors = None
    for batch_indexes, ids, m, types in self._batches(tokens, segments, batch_size):
      out = self._encoder_fn(ids, m, types, False, np.array(indexes, np.int32))
      if token_pooling == "pooler":
        pooled = out["pooled_output"].numpy()
      else:
        per_token = pooling_lib.combine_layers(out["hidden_states"].numpy(), combine)  # [b,s,D]
        pooled = pooling_lib.pool_tokens(per_token, m, token_pooling)
      if vectors is None:
        vectors = np.zeros((len(tokens), pooled.shape[-1]), np.float32)
      vectors[batch_indexes] = pooled
    return vectors

  def word_embedding(self, text, word, *, split="basic", layers=None, combine=None,
                     max_seq_length=None):
    """The vector of one word of ``text``: its word pieces' vectors averaged, ``[D]``.

    ``word`` is the word's position in ``words(text, split)`` (0-based) or the word itself
    (its first occurrence, compared after the tokenizer's lowercasing). ``split``: what counts
    as a word, as in ``words``: ``"basic"`` (default; punctuation marks are words, so in
    "Jobs co-founded Apple." position 2 is "-") or ``"whitespace"`` (position 1 is
    "co-founded"; punctuation at either end of a whitespace word, as in "bank.", is left out
    of its vector). ``layers``/``combine`` as in ``embed`` (e.g. ``layers=[-4, -3, -2, -1],
    combine="sum"`` for the usual word-sense vectors).
    """
    return self.embed_words([text], [word], split=split, layers=layers, combine=combine,
                            max_seq_length=max_seq_length)[0]

  def embed_words(self, texts, words, *, split="basic", layers=None, combine=None,
                  max_seq_length=None, batch_size=None):
    """``word_embedding`` for many ``(text, word)`` at once, batched -> ``[M,D]`` float32."""
    texts = [texts] if isinstance(texts, (str, bytes)) else list(texts)
    words = list(words) if isinstance(words, (list, tuple)) else [words] * len(texts)
    if len(words) != len(texts):
      raise BertTfError(f"embed_words: {len(words)} words for {len(texts)} texts")
    _, layers, combine = pooling_lib.parse_pooling("mean", layers, combine)
    indexes = self._layer_indexes(layers if layers is not None else [-1])
    limit = self._limit(max_seq_length)
    tokens, segments, spans = [], [], []
    for text, word in zip(texts, words):
      start, end = self._word_span(text, word, split)
      toks, segs = pack_example(self._tokenize_text(text), None, limit)
      if end + 1 > len(toks) - 1:
        raise BertTfError(f"word {quoted(word)} of {quoted(text)} is cut off by max_seq_length "
                          f"{limit}")
      tokens.append(toks)
      segments.append(segs)
      spans.append((start + 1, end + 1))  # +1 for [CLS].
    vectors = None
    for batch_indexes, ids, m, types in self._batches(tokens, segments, batch_size):
      out = self._encoder_fn(ids, m, types, False, np.array(indexes, np.int32))
      per_token = pooling_lib.combine_layers(out["hidden_states"].numpy(), combine)  # [b,s,D]
      if vectors is None:
        vectors = np.zeros((len(tokens), per_token.shape[-1]), np.float32)
      for row, i in enumerate(batch_indexes):
        start, end = spans[i]
        vectors[i] = per_token[row, start:end].mean(axis=0)
    return vectors

  def _word_span(self, text, word, split="basic"):
    """``[start, end)`` word-piece positions (in ``tokenize(text)``) of one word.

    With ``split="whitespace"`` the span leaves out punctuation marks at either end of the
    whitespace word ("bank." -> "bank"; "(co-founded)," -> "co - founded"), unless the word is
    nothing else.
    """
    table = self._word_table(text, split)
    names = [w for w, _ in table]
    if isinstance(word, (str, bytes)):
      wanted = self.tokenizer.basic_tokenizer.tokenize(word)
      if split == "basic" and len(wanted) != 1:
        raise BertTfError(f"word {word!r} is {len(wanted)} words for the tokenizer; give one "
                          "word, or its position")
      if split == "whitespace" and len(tokenization.convert_to_unicode(word).split()) != 1:
        raise BertTfError(f"word {word!r} is not one whitespace-separated word; give one "
                          "word, or its position")
      found = [i for i, (_, basic) in enumerate(table)
               if [w for w, _ in basic] == wanted or [w for w, _ in _trim(basic)[0]] == wanted]
      if not found:
        raise BertTfError(f"word {quoted(word)} is not in {quoted(text)} (words: "
                          f"{shortened(' '.join(names))})")
      index = found[0]
    elif isinstance(word, (int, np.integer)) and not isinstance(word, bool):
      index = int(word)
      if not 0 <= index < len(table):
        raise BertTfError(f"word position {index} is out of range: {quoted(text)} has "
                          f"{len(table)} "
                          f"words ({split} split)")
    else:
      raise BertTfError(f"word must be a position (int) or a word (str), got {word!r}")
    start = sum(len(p) for _, basic in table[:index] for _, p in basic)
    kept, skipped = _trim(table[index][1])
    start += sum(len(p) for _, p in skipped)
    return start, start + sum(len(p) for _, p in kept)


def _trim(basic):
  """A whitespace word's ``[(basic word, pieces)]`` -> ``(kept, skipped at the front)``: the
  word without punctuation marks at either end (all of it if it is only punctuation)."""
  punctuation = [len(w) == 1 and tokenization._is_punctuation(w)  # pylint: disable=protected-access
                 for w, _ in basic]
  if all(punctuation):
    return basic, []
  first = punctuation.index(False)
  last = len(basic) - punctuation[::-1].index(False)
  return basic[first:last], basic[:first]
