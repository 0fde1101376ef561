"""The official SQuAD evaluation, v1.1 and v2.0, as library functions.

Same formulas as the official ``evaluate-v1.1.py`` and ``evaluate-v2.0.py``:

  - ``normalize_answer``: lowercase, drop ASCII punctuation (``string.punctuation``), drop the
    words a / an / the, collapse whitespace;
  - exact match (EM): normalised texts are equal; F1: over normalised whitespace tokens,
    common = multiset intersection, P = common / len(pred), R = common / len(gold),
    F1 = 2PR / (P + R); each question takes the max over its gold answers; scores are
    percentages over questions.
  - v1.1: a question without prediction scores 0; F1 is 0 whenever nothing is in common
    (also when both are empty).
  - v2.0: a question without gold answers (unanswerable) has the single gold "", and F1 of two
    empty token lists is 1. A prediction is replaced by "no answer" where its null
    probability / score (null_odds.json) is above ``na_prob_thresh`` (1.0). Scores are also
    given for the HasAns and NoAns questions, and, with null odds, ``best_exact`` /
    ``best_f1``: the score with the best threshold, found by sweeping the questions in order
    of increasing null odds (``find_best_thresh``).

For BERT's SQuAD 2.0 output, null_odds.json holds null_score - best_non_null_score, so
``best_f1_thresh`` is the value to pass as ``null_score_diff_threshold``.

One difference, for incomplete predictions only: the official v2.0 script raises a KeyError
when an answerable or unanswerable question has no prediction; here the HasAns / NoAns splits
count only the questions that were predicted, as the overall v2.0 score does.
"""

import collections
import json
import re
import string

from absl import logging
import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import BertTfError
from bert_tf.squad.examples import json_field, load_squad_json

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s):
  """Lowercases, removes punctuation, the articles a/an/the, and extra whitespace."""
  text = s.lower()
  text = "".join(ch for ch in text if ch not in _PUNCTUATION)
  text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())


def get_tokens(s):
  """Normalised whitespace tokens of ``s`` ([] for an empty string)."""
  if not s:
    return []
  return normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
  """1 if the normalised texts are equal, else 0."""
  return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def _token_f1(gold_toks, pred_toks, num_same):
  precision = 1.0 * num_same / len(pred_toks)
  recall = 1.0 * num_same / len(gold_toks)
  return (2 * precision * recall) / (precision + recall)


def compute_f1(a_gold, a_pred):
  """SQuAD 2.0 token F1 in [0, 1]; 1 if both are empty ("no answer" agrees), 0 if one is."""
  gold_toks = get_tokens(a_gold)
  pred_toks = get_tokens(a_pred)
  num_same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
  if not gold_toks or not pred_toks:
    return int(gold_toks == pred_toks)
  if num_same == 0:
    return 0
  return _token_f1(gold_toks, pred_toks, num_same)


def f1_score_v1(prediction, ground_truth):
  """SQuAD 1.1 token F1 in [0, 1]: 0 when no token is in common (even if both are empty)."""
  pred_toks = normalize_answer(prediction).split()
  gold_toks = normalize_answer(ground_truth).split()
  num_same = sum((collections.Counter(pred_toks) & collections.Counter(gold_toks)).values())
  if num_same == 0:
    return 0
  return _token_f1(gold_toks, pred_toks, num_same)


def _questions(dataset, source):
  """Yields (qas_id, [gold answer texts]) for every question of the ``data`` list."""
  for i, article in enumerate(dataset):
    for j, paragraph in enumerate(json_field(article, "paragraphs", list, f"data[{i}]", source)):
      where_p = f"data[{i}].paragraphs[{j}]"
      for k, qa in enumerate(json_field(paragraph, "qas", list, where_p, source)):
        where = f"{where_p}.qas[{k}]"
        qas_id = json_field(qa, "id", (str, int), where, source)
        answers = json_field(qa, "answers", list, where, source)
        texts = [json_field(a, "text", str, f"{where}.answers[{n}]", source)
                 for n, a in enumerate(answers)]
        yield qas_id, texts


def evaluate_v1(dataset, predictions, source="<dataset>"):
  """The official SQuAD 1.1 evaluation.

  Args:
    dataset: the ``data`` list of a SQuAD file.
    predictions: {qas_id: answer text}.
    source: the dataset's file name, for error messages.

  Returns:
    {"exact_match": EM %, "f1": F1 %}, over all questions (unanswered ones score 0).
  """
  exact_match = f1 = 0.0
  total = 0
  missing = []
  for qas_id, ground_truths in _questions(dataset, source):
    total += 1
    if qas_id not in predictions:
      missing.append(qas_id)
      continue
    if not ground_truths:
      raise BertTfError(f"{source}: question {qas_id!r} has no gold answer; SQuAD 2.0 data "
                        "needs the v2.0 evaluation (--version_2_with_negative)")
    prediction = predictions[qas_id]
    exact_match += max(compute_exact(gt, prediction) for gt in ground_truths)
    f1 += max(f1_score_v1(prediction, gt) for gt in ground_truths)
  if missing:
    logging.warning("%d unanswered questions will receive score 0 (first: %r)",
                    len(missing), missing[0])
  if total == 0:
    raise BertTfError(f"{source}: no questions to evaluate")
  return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def make_qid_to_has_ans(dataset, source="<dataset>"):
  """{qas_id: whether the question has at least one gold answer}."""
  return {qas_id: bool(texts) for qas_id, texts in _questions(dataset, source)}


def get_raw_scores(dataset, preds, source="<dataset>"):
  """Per-question EM and F1 (max over gold answers; gold "" for unanswerable ones).

  Returns:
    (exact_scores, f1_scores): {qas_id: score in [0, 1]} for the predicted questions.
  """
  exact_scores = {}
  f1_scores = {}
  missing = []
  for qas_id, texts in _questions(dataset, source):
    gold_answers = [a for a in texts if normalize_answer(a)]
    if not gold_answers:
      gold_answers = [""]  # Unanswerable: the only correct answer is "".
    if qas_id not in preds:
      missing.append(qas_id)
      continue
    a_pred = preds[qas_id]
    exact_scores[qas_id] = max(compute_exact(a, a_pred) for a in gold_answers)
    f1_scores[qas_id] = max(compute_f1(a, a_pred) for a in gold_answers)
  if missing:
    logging.warning("Missing prediction for %d questions (first: %r)", len(missing), missing[0])
  return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
  """Scores with "no answer" predicted where na_probs > na_prob_thresh (then 1 iff no gold)."""
  new_scores = {}
  for qid, s in scores.items():
    if na_probs[qid] > na_prob_thresh:
      new_scores[qid] = float(not qid_to_has_ans[qid])
    else:
      new_scores[qid] = s
  return new_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
  """{"exact", "f1", "total"} in % over ``qid_list`` (default: all scored questions)."""
  if not qid_list:
    qid_list = list(exact_scores)
  total = len(qid_list)
  return collections.OrderedDict([
      ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
      ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
      ("total", total),
  ])


def merge_eval(main_eval, new_eval, prefix):
  for k in new_eval:
    main_eval[f"{prefix}_{k}"] = new_eval[k]


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
  """The best score (%) over no-answer thresholds, and that threshold.

  Starts from "everything is no answer" (score = number of unanswerable questions), then
  lets the questions answer one at a time in order of increasing null odds: an answerable
  one adds its score, an unanswerable one with a non-empty prediction loses 1. The best
  running total, and the null odds at which it was first reached (0.0 if never improved).
  """
  num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
  cur_score = num_no_ans
  best_score = cur_score
  best_thresh = 0.0
  for qid in sorted(na_probs, key=lambda k: na_probs[k]):
    if qid not in scores:
      continue
    if qid_to_has_ans[qid]:
      diff = scores[qid]
    else:
      diff = -1 if preds[qid] else 0
    cur_score += diff
    if cur_score > best_score:
      best_score = cur_score
      best_thresh = na_probs[qid]
  return 100.0 * best_score / len(scores), best_thresh


def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
  best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
  best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
  main_eval["best_exact"] = best_exact
  main_eval["best_exact_thresh"] = exact_thresh
  main_eval["best_f1"] = best_f1
  main_eval["best_f1_thresh"] = f1_thresh


def evaluate_v2(dataset, preds, na_probs=None, na_prob_thresh=1.0, source="<dataset>",
                na_prob_source="<null odds>"):
  """The official SQuAD 2.0 evaluation.

  Args:
    dataset: the ``data`` list of a SQuAD file.
    preds: {qas_id: answer text}, "" for no answer.
    na_probs: {qas_id: null probability or score} (BERT's null_odds.json), or None
      (then all 0.0 and no best-threshold search).
    na_prob_thresh: predict no answer where na_probs is above this.
    source, na_prob_source: file names, for error messages.

  Returns:
    OrderedDict: exact, f1, total; HasAns_exact/f1/total and NoAns_exact/f1/total where such
    questions exist; with ``na_probs``: best_exact, best_exact_thresh, best_f1,
    best_f1_thresh. Percentages.
  """
  has_na_probs = na_probs is not None
  if not has_na_probs:
    na_probs = {k: 0.0 for k in preds}
  qid_to_has_ans = make_qid_to_has_ans(dataset, source)
  exact_raw, f1_raw = get_raw_scores(dataset, preds, source)
  if not exact_raw:
    raise BertTfError(f"{source}: no prediction for any of its {len(qid_to_has_ans)} "
                      "questions")
  missing = [qid for qid in exact_raw if qid not in na_probs]
  if missing:
    raise BertTfError(f"{na_prob_source}: no null odds for question {missing[0]!r} "
                      f"({len(missing)} missing)")
  exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
  f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
  out_eval = make_eval_dict(exact_thresh, f1_thresh)
  has_ans_qids = [k for k, v in qid_to_has_ans.items() if v and k in exact_raw]
  no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v and k in exact_raw]
  if has_ans_qids:
    merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, has_ans_qids), "HasAns")
  if no_ans_qids:
    merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, no_ans_qids), "NoAns")
  if has_na_probs:
    find_all_best_thresh(out_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
  return out_eval


def _load_json_object(path, what, value_types, value_name):
  fileio.require_file(path, what)
  with tf.io.gfile.GFile(path, "r") as f:
    text = f.read()
  try:
    obj = json.loads(text)
  except json.JSONDecodeError as e:
    raise BertTfError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}, "
                      f"column {e.colno}") from None
  if not isinstance(obj, dict):
    raise BertTfError(f"{path}: expected a JSON object {{qas_id: ...}}, "
                      f"got a {type(obj).__name__}")
  for qid, value in obj.items():
    if not isinstance(value, value_types) or isinstance(value, bool):
      raise BertTfError(f"{path}: the value of {qid!r} is {json.dumps(value)[:40]}, expected "
                        f"{value_name}")
  return obj


def evaluate_files(data_file, prediction_file, null_odds_file=None,
                   version_2_with_negative=False, na_prob_thresh=1.0):
  """Runs the official evaluation on files, as evaluate-v1.1.py / evaluate-v2.0.py do.

  Args:
    data_file: the SQuAD JSON with the gold answers (e.g. dev-v1.1.json).
    prediction_file: predictions.json.
    null_odds_file: v2: null_odds.json (enables the best-threshold search), or None.
    version_2_with_negative: use the v2.0 evaluation (else v1.1).
    na_prob_thresh: v2: the no-answer threshold on the null odds (1.0, the official default).

  Returns:
    the scores dict (see ``evaluate_v1`` / ``evaluate_v2``).
  """
  squad_json = load_squad_json(data_file)
  dataset = json_field(squad_json, "data", list, "the top level", data_file)
  preds = _load_json_object(prediction_file, "predictions file", str, "the answer text")
  if not version_2_with_negative:
    version = squad_json.get("version")
    if version != "1.1":
      logging.warning("%s: evaluation expects v-1.1, but got dataset with v-%s", data_file,
                      version)
    return evaluate_v1(dataset, preds, source=data_file)
  na_probs = None
  if null_odds_file:
    na_probs = _load_json_object(null_odds_file, "null odds file", (int, float),
                                 "a number (the null odds)")
  return evaluate_v2(dataset, preds, na_probs, na_prob_thresh, source=data_file,
                     na_prob_source=null_odds_file)


def write_scores(output_file, scores):
  """Writes the scores dict as JSON (indented, key order kept), atomically."""
  with fileio.atomic_write(output_file, "w") as f:
    f.write(json.dumps(scores, indent=2) + "\n")
