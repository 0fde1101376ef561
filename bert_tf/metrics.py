"""Classification and regression metrics for GLUE-style tasks, in numpy (no sklearn/scipy).

Shapes: N = number of examples. Every function takes `labels` [N], `predictions` [N] and an
optional `weights` [N] of 0/1 (the features' `is_real_example`): examples with weight 0 (the
padding that fills the last eval batch) are left out. All results are Python floats.

Definitions (the same as scikit-learn's / scipy's, which the tests check against):
  accuracy  mean(label == prediction)
  f1        binary, positive class 1: 2 TP / (2 TP + FP + FN); 0 when there is no positive
            label or prediction
  mcc       Matthews correlation (multi-class form; CoLA is binary); 0 when undefined
  pearson   Pearson's r; nan when either side is constant
  spearman  Pearson's r of the ranks, ties given their average rank; nan when constant

Multi-label tasks (`MULTI_LABEL_METRICS`; labels and predictions multi-hot [N, C] of 0/1,
weights [N] select rows), as scikit-learn's multi-label scores with zero_division=0:
  accuracy        subset accuracy: the fraction of examples whose predicted label SET is right
  f1, precision,  micro-averaged over every (example, label) cell: 2 TP / (2 TP + FP + FN),
  recall          TP / (TP + FP), TP / (TP + FN)
  macro_f1        the mean over labels of each label's binary F1 (`label_f1`)
  label_accuracy  the fraction of (example, label) cells right (1 - Hamming loss)

`task_metrics` picks a task's metrics from the GLUE task table (bert_tf.data.glue.TASKS).
"""

import collections

import numpy as np


def _select(labels, predictions, weights):
  labels = np.asarray(labels).reshape(-1)
  predictions = np.asarray(predictions).reshape(-1)
  if labels.shape != predictions.shape:
    raise ValueError(f"labels {labels.shape} and predictions {predictions.shape} differ")
  if weights is not None:
    weights = np.asarray(weights).reshape(-1)
    if weights.shape != labels.shape:
      raise ValueError(f"weights {weights.shape} and labels {labels.shape} differ")
    if not np.all((weights == 0) | (weights == 1)):
      raise ValueError("weights must be 0 or 1 (is_real_example)")
    keep = weights != 0
    labels, predictions = labels[keep], predictions[keep]
  return labels, predictions


def accuracy(labels, predictions, weights=None):
  """Fraction of examples whose predicted class id equals the label id."""
  labels, predictions = _select(labels, predictions, weights)
  if labels.size == 0:
    return float("nan")
  return float(np.mean(labels == predictions))


def f1_score(labels, predictions, weights=None):
  """Binary F1 of the positive class (id 1), as GLUE reports it for MRPC and QQP."""
  labels, predictions = _select(labels, predictions, weights)
  labels, predictions = labels == 1, predictions == 1
  tp = np.sum(labels & predictions)
  denominator = 2 * tp + np.sum(~labels & predictions) + np.sum(labels & ~predictions)
  return float(2 * tp / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions, weights=None):
  """Matthews correlation coefficient (CoLA's metric), in its multi-class form.

  From the confusion matrix C: (c s - t.p) / sqrt((s^2 - p.p) (s^2 - t.t)), where t = true
  counts per class, p = predicted counts, c = correct, s = total. Binary: the usual
  (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)).
  """
  labels, predictions = _select(labels, predictions, weights)
  classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
  y_true, y_pred = encoded[:labels.size], encoded[labels.size:]
  t = np.bincount(y_true, minlength=classes.size).astype(np.float64)
  p = np.bincount(y_pred, minlength=classes.size).astype(np.float64)
  c = float(np.sum(y_true == y_pred))
  s = float(labels.size)
  cov_ytyp = c * s - np.dot(t, p)
  cov_ypyp = s * s - np.dot(p, p)
  cov_ytyt = s * s - np.dot(t, t)
  if cov_ypyp * cov_ytyt == 0:
    return 0.0
  return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


def pearson_corrcoef(labels, predictions, weights=None):
  """Pearson's r between float labels and predictions (STS-B); nan if either is constant."""
  labels, predictions = _select(labels, predictions, weights)
  x = labels.astype(np.float64) - np.mean(labels, dtype=np.float64)
  y = predictions.astype(np.float64) - np.mean(predictions, dtype=np.float64)
  denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
  if denominator == 0:
    return float("nan")
  # Clip float error so that a perfect correlation reads 1.0, not 1.0000000000000002.
  return float(np.clip(np.dot(x, y) / denominator, -1.0, 1.0))


def rankdata(values):
  """Ranks from 1, ties given the average of the ranks they span (scipy's "average")."""
  values = np.asarray(values).reshape(-1)
  order = np.argsort(values, kind="mergesort")
  sorted_values = values[order]
  # Start index (in sorted order) of each run of equal values.
  new_run = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
  run_id = np.cumsum(new_run) - 1                                   # [N] run of each position
  run_starts = np.flatnonzero(new_run)                              # [R]
  run_ends = np.concatenate([run_starts[1:], [values.size]])        # [R] exclusive
  average = (run_starts + 1 + run_ends) / 2.0                       # mean of ranks start+1..end
  ranks = np.empty(values.size, dtype=np.float64)
  ranks[order] = average[run_id]
  return ranks


def spearman_corrcoef(labels, predictions, weights=None):
  """Spearman's rho: Pearson's r of the average ranks (STS-B); nan if either is constant."""
  labels, predictions = _select(labels, predictions, weights)
  return pearson_corrcoef(rankdata(labels), rankdata(predictions))


def _select_multi_hot(labels, predictions, weights):
  """[N,C] labels and predictions as bool, the rows of weight 0 left out."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  if labels.ndim != 2 or labels.shape != predictions.shape:
    raise ValueError(f"multi-label labels {labels.shape} and predictions {predictions.shape} "
                     "must be the same [N, C]")
  if weights is not None:
    rows = np.arange(labels.shape[0])
    _, keep = _select(rows, rows, weights)  # checks the weights, keeps the rows of weight 1
    labels, predictions = labels[keep], predictions[keep]
  return labels.astype(bool), predictions.astype(bool)


def _ratio(numerator, denominator):
  return float(numerator / denominator) if denominator else 0.0


def subset_accuracy(labels, predictions, weights=None):
  """Multi-label: the fraction of examples whose predicted labels are exactly the gold ones."""
  labels, predictions = _select_multi_hot(labels, predictions, weights)
  if labels.shape[0] == 0:
    return float("nan")
  return float(np.mean(np.all(labels == predictions, axis=1)))


def _counts(labels, predictions, axis=None):
  """True positives, false positives, false negatives (summed over ``axis``)."""
  return (np.sum(labels & predictions, axis=axis), np.sum(~labels & predictions, axis=axis),
          np.sum(labels & ~predictions, axis=axis))


def micro_f1(labels, predictions, weights=None):
  """Multi-label F1 over every (example, label) cell."""
  tp, fp, fn = _counts(*_select_multi_hot(labels, predictions, weights))
  return _ratio(2 * tp, 2 * tp + fp + fn)


def micro_precision(labels, predictions, weights=None):
  tp, fp, _ = _counts(*_select_multi_hot(labels, predictions, weights))
  return _ratio(tp, tp + fp)


def micro_recall(labels, predictions, weights=None):
  tp, _, fn = _counts(*_select_multi_hot(labels, predictions, weights))
  return _ratio(tp, tp + fn)


def label_f1(labels, predictions, weights=None):
  """Multi-label: each label's binary F1 (0 for a label never gold nor predicted), [C]."""
  tp, fp, fn = _counts(*_select_multi_hot(labels, predictions, weights), axis=0)
  return [_ratio(2 * t, 2 * t + p + n) for t, p, n in zip(tp, fp, fn)]


def macro_f1(labels, predictions, weights=None):
  """Multi-label: the mean of the labels' F1."""
  return float(np.mean(label_f1(labels, predictions, weights)))


def label_accuracy(labels, predictions, weights=None):
  """Multi-label: the fraction of (example, label) cells predicted right (1 - Hamming loss)."""
  labels, predictions = _select_multi_hot(labels, predictions, weights)
  if labels.size == 0:
    return float("nan")
  return float(np.mean(labels == predictions))


# Metric name (as in the task table) -> function(labels, predictions, weights).
METRICS = collections.OrderedDict([
    ("accuracy", accuracy),
    ("f1", f1_score),
    ("mcc", matthews_corrcoef),
    ("pearson", pearson_corrcoef),
    ("spearman", spearman_corrcoef),
])


# A multi-label task's metrics (the task table's names for them).
MULTI_LABEL_METRICS = collections.OrderedDict([
    ("accuracy", subset_accuracy),
    ("f1", micro_f1),
    ("precision", micro_precision),
    ("recall", micro_recall),
    ("macro_f1", macro_f1),
    ("label_accuracy", label_accuracy),
])


def task_metrics(task, labels, predictions, weights=None, prefix="eval_"):
  """The task's own metrics, keyed as in eval_results.txt ("eval_accuracy", "eval_f1", ...).

  A multi-label task reports `MULTI_LABEL_METRICS` and the F1 of each label as
  "eval_f1_<label name>".

  Args:
    task: a `bert_tf.data.glue.GlueTask` or a task name ("MRPC", "sts-b", ...).
    labels: [N] label ids (classification) or scores (regression); multi-label: [N, C] 0/1.
    predictions: [N] predicted ids, or [N, num_labels] logits/probabilities (argmax is
      taken); regression: [N] or [N, 1] scores; multi-label: [N, C] logits (float: a
      positive logit is a predicted label) or 0/1.
    weights: [N] is_real_example (0/1), or None.
    prefix: key prefix; the task table's eval_splits give "eval_mm_" for MNLI mismatched.

  Returns:
    OrderedDict metric key -> float, in the task table's order.

  Example:
    >>> dict(task_metrics("mrpc", [1, 0, 1, 1], [1, 0, 0, 1]))
    {'eval_accuracy': 0.75, 'eval_f1': 0.8}
  """
  from bert_tf.data import glue  # Import here: glue is the data layer, metrics sit beside it.

  if isinstance(task, str):
    task = glue.get_task(task)
  predictions = np.asarray(predictions)
  if task.multi_label:
    if np.issubdtype(predictions.dtype, np.floating):
      predictions = predictions > 0
    values = collections.OrderedDict(
        (prefix + name, MULTI_LABEL_METRICS[name](labels, predictions, weights))
        for name in task.metrics)
    for name, value in zip(task.labels, label_f1(labels, predictions, weights)):
      values[f"{prefix}f1_{name}"] = value
    return values
  if task.is_regression:
    predictions = predictions.reshape(predictions.shape[0], -1)[:, 0]
  elif predictions.ndim == 2:
    predictions = predictions.argmax(axis=-1)
  return collections.OrderedDict(
      (prefix + name, METRICS[name](labels, predictions, weights)) for name in task.metrics)
