"""Chunk (entity) precision, recall and F1 of tagged sentences, as CoNLL's ``conlleval`` scores.

The CoNLL-2000/2003 shared tasks scored taggers with the ``conlleval`` Perl script; seqeval's
default mode and Hugging Face's ``run_ner`` report the same numbers. A tag is ``O`` (outside)
or ``<prefix>-<TYPE>`` with prefix ``B`` (begins a chunk), ``I`` (inside), ``E`` (ends) or
``S`` (a one-token chunk), so IOB1 (CoNLL-2003's files), IOB2 and IOBES all score. IOB1, IOB2
and IOE tags score exactly as conlleval.pl scores them (checked against the script); ``S-``
tags, and an ``E-`` before a ``B-``, score as seqeval scores IOBES: conlleval.pl knows no
``S-`` (it takes ``S-PER S-PER`` for one chunk) and differs there.
A chunk is a maximal run of tokens of one type:

  it ENDS after a token when the next tag is O, B or S, or of another type, or when the token
  itself is E or S;
  it STARTS at a token tagged B or S, at an I or E after an O, E or S (or the sentence's start,
  which counts as O), and wherever the type changes.

So ``I-PER I-PER`` is one chunk (IOB1), ``B-PER B-PER`` two, and an ``I-LOC`` after ``B-PER``
starts a LOC chunk. A chunk counts as correct when the predicted one has the same type, first
and last token as a gold one. Over all sentences (a sentence boundary ends every chunk):

  precision = correct / predicted chunks      recall = correct / gold chunks
  f1        = 2 precision recall / (precision + recall)   (each 0 when its denominator is 0)
  accuracy  = tokens whose predicted tag equals the gold tag / tokens (O tokens included)

The per-type scores restrict both sides to that type. Results are fractions (0-1), not the
Perl script's percentages.
"""

import collections

OUTSIDE = "O"
PREFIXES = ("B", "I", "E", "S")


def is_chunk_tag(tag):
  """Whether ``tag`` is ``O`` or ``B/I/E/S-<TYPE>`` (a tag set chunk scores apply to)."""
  return tag == OUTSIDE or (len(tag) > 2 and tag[0] in PREFIXES and tag[1] == "-")


def _split(tag):
  if tag == OUTSIDE:
    return OUTSIDE, None
  if not is_chunk_tag(tag):
    raise ValueError(f"tag {tag!r} is neither O nor B-, I-, E- or S-<type>")
  return tag[0], tag[2:]


def chunks(tags):
  """The chunks of one sentence's tags: a list of ``(type, first, last)`` token indices."""
  found = []
  start, prev_prefix, prev_type = None, OUTSIDE, None
  for i, tag in enumerate(list(tags) + [OUTSIDE]):  # The sentence end closes every chunk.
    prefix, kind = _split(tag)
    ends = prev_prefix != OUTSIDE and (
        prev_prefix in ("E", "S") or prefix in (OUTSIDE, "B", "S") or kind != prev_type)
    if ends:
      found.append((prev_type, start, i - 1))
      start = None
    starts = prefix != OUTSIDE and (
        prefix in ("B", "S") or prev_prefix in (OUTSIDE, "E", "S") or kind != prev_type)
    if starts:
      start = i
    prev_prefix, prev_type = prefix, kind
  return found


def _prf(correct, predicted, gold):
  precision = correct / predicted if predicted else 0.0
  recall = correct / gold if gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return precision, recall, f1


def evaluate(gold_sentences, predicted_sentences):
  """conlleval's scores of predicted tags against gold tags.

  Args:
    gold_sentences: a list of sentences, each a list of tags.
    predicted_sentences: the predictions, sentence for sentence and token for token.

  Returns:
    {"precision", "recall", "f1", "accuracy": float, "types": {type: {"precision",
    "recall", "f1", "gold", "predicted", "correct"}}, "gold", "predicted", "correct": int}.

  Raises:
    ValueError: a sentence's lengths differ, or a tag is not a chunk tag (``is_chunk_tag``).
  """
  if len(gold_sentences) != len(predicted_sentences):
    raise ValueError(f"{len(gold_sentences)} gold sentences, {len(predicted_sentences)} "
                     "predicted")
  counts = collections.defaultdict(lambda: [0, 0, 0])  # type -> [correct, predicted, gold]
  tokens = right = 0
  for i, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
    if len(gold) != len(predicted):
      raise ValueError(f"sentence {i}: {len(gold)} gold tags, {len(predicted)} predicted")
    tokens += len(gold)
    right += sum(g == p for g, p in zip(gold, predicted))
    gold_chunks, predicted_chunks = set(chunks(gold)), set(chunks(predicted))
    for kind, _, _ in gold_chunks:
      counts[kind][2] += 1
    for chunk in predicted_chunks:
      counts[chunk[0]][1] += 1
      counts[chunk[0]][0] += chunk in gold_chunks
  correct, predicted, gold = (sum(c[j] for c in counts.values()) for j in range(3))
  precision, recall, f1 = _prf(correct, predicted, gold)
  types = {}
  for kind in sorted(counts):
    c, p, g = counts[kind]
    tp, tr, tf1 = _prf(c, p, g)
    types[kind] = {"precision": tp, "recall": tr, "f1": tf1, "correct": c, "predicted": p,
                   "gold": g}
  return {"precision": precision, "recall": recall, "f1": f1,
          "accuracy": right / tokens if tokens else float("nan"), "types": types,
          "correct": correct, "predicted": predicted, "gold": gold}


def chunk_types(labels):
  """The sorted chunk types of a label set (``B-PER``, ``I-PER`` -> ``PER``)."""
  return sorted({label[2:] for label in labels if label != OUTSIDE and is_chunk_tag(label)})
