"""The task heads of a loaded BERT (``bert_tf.inference.InferenceModel``): fill-mask and
next-sentence on the pretraining heads, ``classify`` on a folder fine-tuned by
run_classifier.py, and ``tag`` on a folder fine-tuned by run_ner.py. A mixin: the methods use
the model's tokenizer, batching and compiled functions (``tokenize``, ``_batches``,
``_masked_lm_fn``...), which ``InferenceModel`` has.

Shape legend: b = texts in a batch, s = its longest sequence, P = [MASK]s per text, V = vocab
size, C = classes.
"""

import collections.abc

import numpy as np
import tensorflow as tf

from bert_tf import classifier_labels, tokenization
from bert_tf.errors import BertTfError, quoted
from bert_tf.modeling import checkpoints

MASK_TOKEN = "[MASK]"
# The compiled functions' [b,s] int32 ids/mask/types (or [b,P] positions).
_IDS = tf.TensorSpec([None, None], tf.int32)


def _as_items(texts, text_pairs=None):
  """Texts in any accepted form -> list of ``(text_a, text_b or None)``.

  ``texts``: a str, a ``(a, b)`` tuple, or a list of str / ``(a, b)`` tuples.
  ``text_pairs``: optional second segments, one per text (a str for a single text).
  """
  if isinstance(texts, (str, bytes)) or (isinstance(texts, tuple) and len(texts) == 2 and
                                          all(isinstance(t, (str, bytes)) for t in texts)):
    texts = [texts]
    if isinstance(text_pairs, (str, bytes)):
      text_pairs = [text_pairs]
  if not isinstance(texts, collections.abc.Iterable):
    raise BertTfError(f"texts: expected a str, an (a, b) pair or a list of them, got "
                      f"{quoted(texts)}")
  texts = list(texts)
  if text_pairs is not None:
    if not isinstance(text_pairs, collections.abc.Iterable):
      raise BertTfError(f"text_pairs: expected a list of str, got {quoted(text_pairs)}")
    text_pairs = list(text_pairs)
    if len(text_pairs) != len(texts):
      raise BertTfError(f"text_pairs has {len(text_pairs)} entries but texts has {len(texts)}")
  items = []
  for i, text in enumerate(texts):
    if isinstance(text, (tuple, list)):
      if len(text) != 2 or text_pairs is not None:
        raise BertTfError(f"texts[{i}]: expected a str or an (a, b) pair, got {quoted(text)}")
      a, b = text
    else:
      a, b = text, (text_pairs[i] if text_pairs is not None else None)
    if not isinstance(a, (str, bytes)) or not (b is None or isinstance(b, (str, bytes))):
      raise BertTfError(f"texts[{i}]: expected text, got {quoted(text)}")
    items.append((a, b))
  if not items:
    raise BertTfError("no texts given")
  return items


def classification_result(row, info):
  """What ``classify`` says of one text's logits ``row`` [C] for a classifier described by
  ``info`` (classifier.json's fields): a regression's score; a multi-label classifier's labels
  whose own sigmoid probability is above 0.5 (logit above 0); else the most probable label of
  the softmax."""
  labels = info["labels"]
  if info.get("is_regression"):
    return {"score": float(row[0]), "logits": [float(row[0])]}
  if info.get("multi_label"):
    probs = 1.0 / (1.0 + np.exp(-np.asarray(row, np.float64)))
    return {"labels": [name for name, x in zip(labels, row) if x > 0],
            "probabilities": {name: float(p) for name, p in zip(labels, probs)},
            "logits": [float(x) for x in row]}
  row = np.asarray(row)
  probs = np.exp(row - row.max())
  probs /= probs.sum()
  best = int(np.argmax(probs))
  return {"label": labels[best], "probability": float(probs[best]),
          "probabilities": {name: float(p) for name, p in zip(labels, probs)},
          "logits": [float(x) for x in row]}


class HeadsMixin:
  """``fill_mask``, ``next_sentence``, ``classify`` and ``tag`` of ``InferenceModel``."""

  # --- the pretraining heads ---------------------------------------------------------------

  def _require(self, has, what, variables):
    if not has:
      raise BertTfError(f"{what}: {self.source} has no {variables} weights (this checkpoint "
                        "was saved without its pretraining heads)")

  def fill_mask(self, text, top_k=5, *, max_seq_length=None, batch_size=None,
                return_logits=False, add_special_tokens=True):
    """The ``top_k`` most likely tokens at each ``[MASK]`` of ``text``.

    Args:
      text: a str (or ``(a, b)`` pair) with at least one ``[MASK]``, or a list of them.
      top_k: candidates per mask, most probable first.
      return_logits: also return the masked-LM head's logits (before the softmax).
      add_special_tokens: False when the text holds its own ``[CLS]``/``[SEP]``.
    Returns:
      For one text with one ``[MASK]``: a list of ``{"token", "token_id", "probability",
      "sequence"}`` dicts (``sequence``: the text's word pieces with this candidate in place,
      decoded as ``tokenizer.decode`` does, without ``[CLS]`` and the last ``[SEP]``: "the cat
      sat on the mat."). With several masks, one such list per mask; for a list of texts, one
      result per text. Probabilities are the softmax over the whole vocabulary.
      With ``return_logits``: ``(results, logits)``, logits a ``[P,V]`` float32 array for one
      text (one row per ``[MASK]``, in text order), a list of them for a list of texts.
    """
    self._require(self.has_masked_lm, "fill_mask", "masked-LM head (cls/predictions/*)")
    if MASK_TOKEN not in self.tokenizer.vocab:
      raise BertTfError(f"fill_mask: the vocab has no {MASK_TOKEN} token")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
      raise BertTfError(f"fill_mask: top_k must be a positive integer, got {top_k!r}")
    single = isinstance(text, (str, bytes)) or isinstance(text, tuple)
    tokens, segments = self.tokenize(text, max_seq_length=max_seq_length,
                                     add_special_tokens=add_special_tokens)
    positions = []
    for toks, item in zip(tokens, _as_items(text)):
      where = [i for i, t in enumerate(toks) if t == MASK_TOKEN]
      if not where:
        raise BertTfError(f"fill_mask: no {MASK_TOKEN} in {quoted(item[0])}"
                          + (f" / {quoted(item[1])}" if item[1] is not None else "")
                          + " (after truncation)")
      positions.append(where)
    top_k = min(top_k, self.config.vocab_size)
    results = [None] * len(tokens)
    all_logits = [None] * len(tokens)
    for indexes, ids, m, types in self._batches(tokens, segments, batch_size):
      width = max(len(positions[i]) for i in indexes)
      batch_positions = np.zeros((len(indexes), width), np.int32)  # [b,P], padded with 0
      for row, i in enumerate(indexes):
        batch_positions[row, :len(positions[i])] = positions[i]
      out = self._masked_lm_fn(ids, m, types, batch_positions)
      probs = out["probabilities"].numpy()  # [b,P,V]
      logits = out["logits"].numpy()  # [b,P,V]
      for row, i in enumerate(indexes):
        all_logits[i] = logits[row, :len(positions[i])]
        per_mask = []
        for p, position in enumerate(positions[i]):
          row_probs = probs[row, p]
          best = np.argsort(-row_probs, kind="stable")[:top_k]
          per_mask.append([self._candidate(tokens[i], position, int(t), float(row_probs[t]))
                           for t in best])
        results[i] = per_mask[0] if len(per_mask) == 1 else per_mask
    if return_logits:
      return (results[0], all_logits[0]) if single else (results, all_logits)
    return results[0] if single else results

  def _candidate(self, tokens, position, token_id, probability):
    token = self.tokenizer.inv_vocab.get(token_id, f"[unused id {token_id}]")
    filled = list(tokens)
    filled[position] = token
    if filled and filled[0] == "[CLS]":  # Without [CLS] and the last [SEP].
      filled = filled[1:]
    if filled and filled[-1] == "[SEP]":
      filled = filled[:-1]
    sequence = tokenization.join_word_pieces(filled)
    if self.tokenizer.clean_up_tokenization_spaces:
      sequence = tokenization.clean_up_tokenization(sequence)
    return {"token": token, "token_id": token_id, "probability": probability,
            "sequence": sequence}

  def next_sentence(self, text_a, text_b=None, *, max_seq_length=None, batch_size=None,
                    add_special_tokens=True):
    """The probability that ``text_b`` follows ``text_a`` (the NSP head's label 0).

    ``text_a`` and ``text_b`` are strs (-> a float) or equally long lists (-> [B] float32);
    ``text_a`` may also be a list of ``(a, b)`` pairs with ``text_b`` left out.
    """
    self._require(self.has_next_sentence, "next_sentence",
                  "next-sentence head (cls/seq_relationship/*) or pooler")
    single = isinstance(text_a, (str, bytes))
    if single and not isinstance(text_b, (str, bytes)) and add_special_tokens:
      raise BertTfError("next_sentence: give two texts, text_a and text_b")
    items = _as_items(text_a, text_b)  # (once: the texts may be a generator)
    tokens, segments = self.tokenize(items, None, max_seq_length, add_special_tokens)
    for i, ((_, b), s) in enumerate(zip(items, segments)):
      if s[-1] == 1:
        continue
      if b is None or not add_special_tokens:
        raise BertTfError("next_sentence: every input needs a text_b (sentence B)")
      which = "" if single else f" of input {i}"
      raise BertTfError(f"next_sentence: the text_b{which} has no tokens ({quoted(b)})")
    is_next = np.zeros(len(tokens), np.float32)
    for indexes, ids, m, types in self._batches(tokens, segments, batch_size):
      is_next[indexes] = self._next_sentence_fn(ids, m, types).numpy()[:, 0]
    return float(is_next[0]) if single else is_next

  # --- a fine-tuned classifier ---------------------------------------------------------------

  def classify(self, texts, text_pairs=None, *, max_seq_length=None, batch_size=None,
               add_special_tokens=True):
    """Label names and probabilities from a folder fine-tuned by run_classifier.py.

    Args:
      texts: a str, an ``(a, b)`` pair, or a list of them (``text_pairs``: second segments).
      max_seq_length: default: the fine-tuning run's ``--max_seq_length`` (texts are
        truncated as it truncated them), else the model's limit.
    Returns:
      For one text a dict ``{"label": name, "probability": p, "probabilities": {name: p},
      "logits": [C floats]}`` (label: the most probable, names in output order); for a
      regression ``{"score": value, "logits": [value]}``; for a multi-label classifier
      ``{"labels": [names], "probabilities": {name: p}, "logits": [C floats]}`` (each
      label's own sigmoid probability; ``labels``: those above 0.5, in output order). For a
      list, a list of them.
    Raises:
      BertTfError: the folder has no ``classifier.json`` (not written by run_classifier.py)
        or its checkpoint no classifier head (``output_weights``/``output_bias``).
    """
    info = self.classifier_info
    if info is None:
      raise BertTfError(f"classify: {self.source} has no {classifier_labels.FILE_NAME} (the "
                        "label names run_classifier.py writes beside a fine-tuned model)")
    if max_seq_length is None and info.get("max_seq_length"):
      max_seq_length = min(int(info["max_seq_length"]), self.config.max_position_embeddings)
    single = isinstance(texts, (str, bytes)) or isinstance(texts, tuple)
    tokens, segments = self._tokenize(  # pylint: disable=protected-access
        texts, text_pairs, max_seq_length, add_special_tokens, self.fine_tuning_tokenizer)
    fn = self._classifier_fn()
    logits = None
    for indexes, ids, m, types in self._batches(tokens, segments, batch_size):
      out = fn(ids, m, types).numpy()  # [b,C]
      if logits is None:
        logits = np.zeros((len(tokens), out.shape[-1]), np.float32)
      logits[indexes] = out
    results = [classification_result(row, info) for row in logits]
    return results[0] if single else results

  def _classifier_fn(self):
    """The fine-tuned classifier (encoder + head, built and loaded on first use) as a
    ``tf.function`` of ``[b,s]`` ids, mask, type ids -> logits ``[b,C]``."""
    if self._classifier is None:
      from bert_tf.modeling import BertClassifier  # pylint: disable=import-outside-toplevel
      info = self.classifier_info
      num_labels = 1 if info.get("is_regression") else len(info["labels"])
      model = BertClassifier(self.config, num_labels, classifier_dropout=0.0)
      report = checkpoints.load_weights(model, self.weights_path)
      if {"output_weights", "output_bias"} & set(report.missing):
        raise BertTfError(f"classify: {self.source} has no classifier head weights "
                          "(output_weights/output_bias)")

      @tf.function(input_signature=[_IDS, _IDS, _IDS])
      def logits_fn(word_ids, mask, type_ids):
        return model({"input_word_ids": word_ids, "input_mask": mask,
                      "input_type_ids": type_ids}, training=False)

      self._classifier = (model, logits_fn)
    return self._classifier[1]

  # --- token classification (run_ner.py) ---------------------------------------------------

  def tag(self, texts, *, split="basic", max_seq_length=None, batch_size=None):
    """The tag of every word, and the entities, from a folder fine-tuned by run_ner.py.

    Args:
      texts: a str, a list of str, or a list of pre-split sentences (lists of words, as a
        CoNLL file holds them).
      split: how a str is cut into words: ``"basic"`` (default) as the basic tokenizer cuts
        (punctuation marks are words of their own; the case is kept), ``"whitespace"`` at
        whitespace only.
      max_seq_length: default: the fine-tuning run's ``--max_seq_length``. A longer text is
        split between words into several sequences, as run_ner.py splits it.
    Returns:
      For one text (a str or one list of words in a list of one) a dict ``{"words": [...],
      "tags": [...], "entities": [{"type", "text", "first_word", "last_word"}]}``; entities
      are conlleval's chunks of the tags (none when the tags have no B-/I- prefixes). For a
      list, a list of them.
    Raises:
      BertTfError: the folder has no ``token_classifier.json`` (not written by run_ner.py) or
        its checkpoint no classifier head.
    """
    from bert_tf import conlleval  # pylint: disable=import-outside-toplevel
    from bert_tf.data import conll  # pylint: disable=import-outside-toplevel
    info = self.token_classifier_info
    if info is None:
      raise BertTfError(f"tag: {self.source} has no {classifier_labels.TOKEN_FILE_NAME} (the "
                        "tag names run_ner.py writes beside a fine-tuned model)")
    if split not in ("basic", "whitespace"):
      raise BertTfError(f"split must be 'basic' or 'whitespace', got {split!r}")
    single = isinstance(texts, (str, bytes))
    texts = [texts] if single else list(texts)
    splitter = tokenization.BasicTokenizer(do_lower_case=False)
    sentences = []
    for i, text in enumerate(texts):
      if isinstance(text, (list, tuple)) and all(isinstance(w, str) for w in text):
        words = list(text)
      elif isinstance(text, (str, bytes)):
        text = tokenization.convert_to_unicode(text)
        words = splitter.tokenize(text) if split == "basic" else text.split()
      else:
        raise BertTfError(f"texts[{i}]: expected a str or a list of words, got {quoted(text)}")
      sentences.append(conll.TaggedSentence(words, None))
    if max_seq_length is None and info.get("max_seq_length"):
      max_seq_length = int(info["max_seq_length"])
    length = self._limit(max_seq_length)
    labels = info["labels"]
    features = conll.convert_sentences(sentences, labels, length, self.fine_tuning_tokenizer)
    fn = self._tagger_fn()
    size = batch_size or self.batch_size
    predicted = []
    for start in range(0, len(features), size):
      batch = features[start:start + size]
      used = max(sum(f.input_mask) for f in batch)
      ids, mask, types = (tf.constant([getattr(f, name)[:used] for f in batch], tf.int32)
                          for name in ("input_ids", "input_mask", "segment_ids"))
      predicted.extend(np.argmax(fn(ids, mask, types).numpy(), axis=-1))
    tags = conll.word_predictions(sentences, features, predicted, labels)
    chunked = all(conlleval.is_chunk_tag(label) for label in labels)
    results = []
    for sentence, sentence_tags in zip(sentences, tags):
      entities = [{"type": kind, "text": " ".join(sentence.words[first:last + 1]),
                   "first_word": first, "last_word": last}
                  for kind, first, last in (conlleval.chunks(sentence_tags) if chunked else [])]
      results.append({"words": sentence.words, "tags": sentence_tags, "entities": entities})
    return results[0] if single else results

  def _tagger_fn(self):
    """The fine-tuned token classifier (built and loaded on first use) as a ``tf.function``
    of ``[b,s]`` ids, mask, type ids -> logits ``[b,s,C]``."""
    if self._tagger is None:
      from bert_tf.modeling import BertTokenClassifier  # pylint: disable=import-outside-toplevel
      model = BertTokenClassifier(self.config, len(self.token_classifier_info["labels"]),
                                  classifier_dropout=0.0)
      report = checkpoints.load_weights(model, self.weights_path)
      if {"output_weights", "output_bias"} & set(report.missing):
        raise BertTfError(f"tag: {self.source} has no token classifier head weights "
                          "(output_weights/output_bias)")

      @tf.function(input_signature=[_IDS, _IDS, _IDS])
      def logits_fn(word_ids, mask, type_ids):
        return model({"input_word_ids": word_ids, "input_mask": mask,
                      "input_type_ids": type_ids}, training=False)

      self._tagger = (model, logits_fn)
    return self._tagger[1]
