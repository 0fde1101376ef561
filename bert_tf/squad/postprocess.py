"""Start/end logits -> answer texts: predictions.json, nbest_predictions.json, null_odds.json.

As the original ``write_predictions`` (REFERENCE.md "Fine-tuning: SQuAD", Prediction), with
the flags it read from absl FLAGS (``version_2_with_negative``, ``null_score_diff_threshold``,
``verbose_logging``) passed as arguments. Per example, over all its features (doc spans):

  - candidates are the top ``n_best_size`` start and end positions of each feature; a pair is
    dropped if a position is outside the context, the start is not at its max-context span,
    end < start, or it is longer than ``max_answer_length`` tokens;
  - v2: the null score is the minimum over features of start_logits[0] + end_logits[0]
    ([CLS]), and the null answer "" is a candidate with those logits;
  - candidates are ranked by start_logit + end_logit; the first ``n_best_size`` distinct texts
    form the n-best list, with softmax probabilities over it. A text is the WordPiece span
    de-tokenized and mapped back onto the original words (``get_final_text``);
  - v1: the answer is the best text; v2: it is "" iff
    null_score - best_non_null_score > null_score_diff_threshold, and null_odds.json records
    that difference.

Where the original crashes we answer instead (these cases only): an example with no feature
(empty context) under v2, or one whose only n-best entry is "", predicts "" with a score
difference of ``NO_NON_NULL_SCORE_DIFF``; results whose unique_id matches no feature (batch
padding) are ignored.

Shapes: per feature, start_logits and end_logits are [S] floats (S = max_seq_length).
"""

import collections
import json
import math
from typing import NamedTuple

from absl import logging
import numpy as np

from bert_tf import fileio

# The original's "large and positive" start for the minimum null score; also the recorded
# null-minus-best difference when there is no non-null answer at all (always predicts "").
NO_NON_NULL_SCORE_DIFF = 1000000.0


class RawResult(NamedTuple):
  """The model's output for one feature: start_logits, end_logits are [S] float sequences."""
  unique_id: int
  start_logits: list
  end_logits: list


class _PrelimPrediction(NamedTuple):
  feature_index: int
  start_index: int
  end_index: int
  start_logit: float
  end_logit: float


class _NbestPrediction(NamedTuple):
  text: str
  start_logit: float
  end_logit: float


class SquadPredictions(NamedTuple):
  """What ``compute_predictions`` returns; each is an OrderedDict keyed by qas_id.

  predictions: qas_id -> answer text ("" for no answer under v2).
  nbest: qas_id -> list of {"text", "probability", "start_logit", "end_logit"}, best first.
  null_odds: qas_id -> null_score - best_non_null_score (v2 only; empty for v1).
  """
  predictions: dict
  nbest: dict
  null_odds: dict


def _default_basic_tokenizer(do_lower_case):
  from bert_tf import tokenization  # Imported late: only prediction needs it.
  return tokenization.BasicTokenizer(do_lower_case=do_lower_case)


def _strip_spaces(text):
  """Text without " ", and a map from each kept character's new index to its old index."""
  ns_chars = []
  ns_to_s_map = {}
  for i, c in enumerate(text):
    if c == " ":
      continue
    ns_to_s_map[len(ns_chars)] = i
    ns_chars.append(c)
  return "".join(ns_chars), ns_to_s_map


def get_final_text(pred_text, orig_text, do_lower_case, basic_tokenizer=None,
                   verbose_logging=False):
  """Maps a de-tokenized prediction back onto the original words' characters.

  ``orig_text`` is the whole words the predicted span touches ("Steve Smith's"),
  ``pred_text`` the de-tokenized WordPieces ("steve smith"). The original words are
  basic-tokenized again; if that text, without spaces, has as many characters as
  ``orig_text`` without spaces, the two are aligned character by character and the span of
  ``pred_text`` is cut out of ``orig_text`` ("Steve Smith"). Otherwise (accents NFD-split,
  [UNK], ...) the whole ``orig_text`` is returned.

  Args:
    pred_text: str, WordPiece tokens joined by spaces with "##" removed.
    orig_text: str, the original words joined by spaces.
    do_lower_case: as the tokenizer.
    basic_tokenizer: a ``BasicTokenizer``-like object (``tokenize(text) -> [str]``) with
      the same ``do_lower_case``; default ``bert_tf.tokenization.BasicTokenizer``.
    verbose_logging: log why an alignment failed.
  """
  if basic_tokenizer is None:
    basic_tokenizer = _default_basic_tokenizer(do_lower_case)
  tok_text = " ".join(basic_tokenizer.tokenize(orig_text))

  start_position = tok_text.find(pred_text)
  if start_position == -1:
    if verbose_logging:
      logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
    return orig_text
  end_position = start_position + len(pred_text) - 1

  orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
  tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
  if len(orig_ns_text) != len(tok_ns_text):
    if verbose_logging:
      logging.info("Length not equal after stripping spaces: '%s' vs '%s'", orig_ns_text,
                   tok_ns_text)
    return orig_text

  tok_s_to_ns_map = {s: ns for ns, s in tok_ns_to_s_map.items()}
  orig_start_position = orig_ns_to_s_map.get(tok_s_to_ns_map.get(start_position))
  if orig_start_position is None:
    if verbose_logging:
      logging.info("Couldn't map start position")
    return orig_text
  orig_end_position = orig_ns_to_s_map.get(tok_s_to_ns_map.get(end_position))
  if orig_end_position is None:
    if verbose_logging:
      logging.info("Couldn't map end position")
    return orig_text
  return orig_text[orig_start_position:orig_end_position + 1]


def _get_best_indexes(logits, n_best_size):
  """Indexes of the ``n_best_size`` largest logits, largest first (ties: lower index first)."""
  index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
  return [index for index, _ in index_and_score[:n_best_size]]


def _compute_softmax(scores):
  """Softmax over a list of floats (python floats, as the original)."""
  if not scores:
    return []
  max_score = max(scores)
  exp_scores = [math.exp(score - max_score) for score in scores]
  total_sum = 0.0
  for x in exp_scores:
    total_sum += x
  return [x / total_sum for x in exp_scores]


def _as_floats(logits):
  """Python floats (exact for float32) so that sums, sorting and JSON match the original."""
  return np.asarray(logits, dtype=np.float64).tolist()


def _prediction_text(example, feature, start_index, end_index, do_lower_case,
                     basic_tokenizer, verbose_logging):
  tok_tokens = feature.tokens[start_index:end_index + 1]
  orig_doc_start = feature.token_to_orig_map[start_index]
  orig_doc_end = feature.token_to_orig_map[end_index]
  orig_tokens = example.doc_tokens[orig_doc_start:orig_doc_end + 1]
  # De-tokenize WordPieces that have been split off, then clean whitespace.
  tok_text = " ".join(tok_tokens).replace(" ##", "").replace("##", "")
  tok_text = " ".join(tok_text.strip().split())
  orig_text = " ".join(orig_tokens)
  return get_final_text(tok_text, orig_text, do_lower_case, basic_tokenizer, verbose_logging)


def compute_predictions(all_examples, all_features, all_results, n_best_size,
                        max_answer_length, do_lower_case, version_2_with_negative=False,
                        null_score_diff_threshold=0.0, verbose_logging=False,
                        basic_tokenizer=None):
  """Answers, n-best lists and null odds for every example (see the module docstring).

  Args:
    all_examples: list of ``SquadExample``, in the order given to the feature converter.
    all_features: the ``InputFeatures`` made from them.
    all_results: ``RawResult``s (any order; extra unique_ids are ignored); every feature
      needs one.
    n_best_size: start/end positions tried per feature, and n-best entries kept (20).
    max_answer_length: longest answer in WordPiece tokens (30).
    do_lower_case: as the tokenizer (for mapping text back to the original words).
    version_2_with_negative: SQuAD 2.0: consider the null answer.
    null_score_diff_threshold: v2: predict "" if null - best non-null score is above this.
    verbose_logging: log alignment failures in ``get_final_text``.
    basic_tokenizer: see ``get_final_text``.

  Returns:
    ``SquadPredictions``.
  """
  if basic_tokenizer is None:
    basic_tokenizer = _default_basic_tokenizer(do_lower_case)
  example_index_to_features = collections.defaultdict(list)
  for feature in all_features:
    example_index_to_features[feature.example_index].append(feature)
  unique_id_to_result = {int(result.unique_id): result for result in all_results}

  all_predictions = collections.OrderedDict()
  all_nbest_json = collections.OrderedDict()
  scores_diff_json = collections.OrderedDict()
  for example_index, example in enumerate(all_examples):
    features = example_index_to_features[example_index]

    prelim_predictions = []
    score_null = NO_NON_NULL_SCORE_DIFF  # minimum of [CLS] start + end over the features
    min_null_feature_index = 0
    null_start_logit = 0.0
    null_end_logit = 0.0
    for feature_index, feature in enumerate(features):
      result = unique_id_to_result[feature.unique_id]
      start_logits = _as_floats(result.start_logits)
      end_logits = _as_floats(result.end_logits)
      if version_2_with_negative:
        feature_null_score = start_logits[0] + end_logits[0]
        if feature_null_score < score_null:
          score_null = feature_null_score
          min_null_feature_index = feature_index
          null_start_logit = start_logits[0]
          null_end_logit = end_logits[0]
      for start_index in _get_best_indexes(start_logits, n_best_size):
        for end_index in _get_best_indexes(end_logits, n_best_size):
          # Drop spans in the question or padding, off their max-context span, or too long.
          if start_index >= len(feature.tokens) or end_index >= len(feature.tokens):
            continue
          if (start_index not in feature.token_to_orig_map or
              end_index not in feature.token_to_orig_map):
            continue
          if not feature.token_is_max_context.get(start_index, False):
            continue
          if end_index < start_index:
            continue
          if end_index - start_index + 1 > max_answer_length:
            continue
          prelim_predictions.append(_PrelimPrediction(
              feature_index=feature_index, start_index=start_index, end_index=end_index,
              start_logit=start_logits[start_index], end_logit=end_logits[end_index]))

    if version_2_with_negative:
      prelim_predictions.append(_PrelimPrediction(
          feature_index=min_null_feature_index, start_index=0, end_index=0,
          start_logit=null_start_logit, end_logit=null_end_logit))
    prelim_predictions.sort(key=lambda x: x.start_logit + x.end_logit, reverse=True)

    seen_predictions = set()
    nbest = []
    for pred in prelim_predictions:
      if len(nbest) >= n_best_size:
        break
      if pred.start_index > 0:  # a non-null prediction
        final_text = _prediction_text(example, features[pred.feature_index], pred.start_index,
                                      pred.end_index, do_lower_case, basic_tokenizer,
                                      verbose_logging)
        if final_text in seen_predictions:
          continue
      else:
        final_text = ""
      seen_predictions.add(final_text)
      nbest.append(_NbestPrediction(final_text, pred.start_logit, pred.end_logit))

    # v2: the null answer is always in the n-best list.
    if version_2_with_negative and "" not in seen_predictions:
      nbest.append(_NbestPrediction("", null_start_logit, null_end_logit))
    # No valid span at all (e.g. an empty context): the original's nonce answer.
    if not nbest:
      nbest.append(_NbestPrediction("empty", 0.0, 0.0))

    total_scores = [entry.start_logit + entry.end_logit for entry in nbest]
    best_non_null_entry = next((entry for entry in nbest if entry.text), None)
    probs = _compute_softmax(total_scores)
    nbest_json = []
    for i, entry in enumerate(nbest):
      output = collections.OrderedDict()
      output["text"] = entry.text
      output["probability"] = probs[i]
      output["start_logit"] = entry.start_logit
      output["end_logit"] = entry.end_logit
      nbest_json.append(output)

    if not version_2_with_negative:
      all_predictions[example.qas_id] = nbest_json[0]["text"]
    else:
      if best_non_null_entry is None:
        score_diff = NO_NON_NULL_SCORE_DIFF
      else:
        score_diff = (score_null - best_non_null_entry.start_logit -
                      best_non_null_entry.end_logit)
      scores_diff_json[example.qas_id] = score_diff
      if best_non_null_entry is None or score_diff > null_score_diff_threshold:
        all_predictions[example.qas_id] = ""
      else:
        all_predictions[example.qas_id] = best_non_null_entry.text
    all_nbest_json[example.qas_id] = nbest_json

  return SquadPredictions(all_predictions, all_nbest_json, scores_diff_json)


def _json_text(obj):
  return json.dumps(obj, indent=4) + "\n"


def write_predictions(all_examples, all_features, all_results, n_best_size,
                      max_answer_length, do_lower_case, output_prediction_file,
                      output_nbest_file, output_null_log_odds_file,
                      version_2_with_negative=False, null_score_diff_threshold=0.0,
                      verbose_logging=False, basic_tokenizer=None):
  """``compute_predictions``, then writes the original's three JSON files, together
  (``fileio.write_together``: all new, or all as they were).

  predictions.json ({qas_id: text}), nbest_predictions.json ({qas_id: [n-best entries]})
  and, for v2 only, null_odds.json ({qas_id: null - best non-null score}); each is
  ``json.dumps(..., indent=4)`` plus a newline, as the original. The arguments are the
  original's, then its absl flags as keyword arguments.

  Returns:
    the ``SquadPredictions``.
  """
  result = compute_predictions(
      all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
      version_2_with_negative=version_2_with_negative,
      null_score_diff_threshold=null_score_diff_threshold, verbose_logging=verbose_logging,
      basic_tokenizer=basic_tokenizer)
  # The three files as one output (a stop between them mixed two runs' files).
  files = {output_prediction_file: _json_text(result.predictions),
           output_nbest_file: _json_text(result.nbest)}
  if version_2_with_negative:
    files[output_null_log_odds_file] = _json_text(result.null_odds)
  fileio.write_together(files)
  return result


def answer_from_logits(example, features, start_logits, end_logits, n_best_size=20,
                       max_answer_length=30, do_lower_case=True,
                       version_2_with_negative=False, null_score_diff_threshold=0.0,
                       basic_tokenizer=None):
  """The answer to one question: (answer text, score), for serving.

  Args:
    example: the ``SquadExample`` (e.g. from ``examples.example_from_text``).
    features: its ``InputFeatures`` (``convert_examples_to_features([example], ...)``),
      F of them, with ``example_index`` 0.
    start_logits, end_logits: [F, S] float arrays, the model's output for ``features`` in
      order.
    The rest: as ``compute_predictions``.

  Returns:
    (text, score): the predicted answer (str; "" = no answer under v2; "empty" if no span
    is valid, as the original) and its score, start_logit + end_logit of the chosen n-best
    entry (for "" under v2: the null score, the minimum [CLS] start + end logit).
  """
  start_logits = np.asarray(start_logits)
  end_logits = np.asarray(end_logits)
  if start_logits.shape != end_logits.shape or start_logits.shape[:1] != (len(features),):
    raise ValueError(f"start_logits {start_logits.shape} and end_logits {end_logits.shape} "
                     f"must both be [{len(features)}, max_seq_length]")
  results = [RawResult(f.unique_id, s, e)
             for f, s, e in zip(features, start_logits, end_logits)]
  predicted = compute_predictions(
      [example], features, results, n_best_size, max_answer_length, do_lower_case,
      version_2_with_negative=version_2_with_negative,
      null_score_diff_threshold=null_score_diff_threshold, basic_tokenizer=basic_tokenizer)
  text = predicted.predictions[example.qas_id]
  entry = next(e for e in predicted.nbest[example.qas_id] if e["text"] == text)
  return text, entry["start_logit"] + entry["end_logit"]
