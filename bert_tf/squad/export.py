"""Question answering as a SavedModel: question and context strings in, answer text out.

``export_question_answerer(model, vocab_file, export_dir, ...)`` writes a SavedModel whose
``serving_default`` signature runs the whole SQuAD pipeline in the graph:

  question [B], context [B] (tf.string, UTF-8)
    -> the original's features: question cut to ``max_query_length`` word pieces, context
       cut into doc spans of ``max_seq_length - len(query) - 3`` pieces every ``doc_stride``,
       ``[CLS] query [SEP] span [SEP]``; every span of every pair in one model call
    -> start/end logits -> the original's span choice (``postprocess.compute_predictions``)
    -> {"answer_text" [B] string, "score" [B] float64,
        "answer_start" [B] int64, "answer_end" [B] int64}

Nothing of bert_tf is needed to serve it: ``tf.saved_model.load(path)`` after
``import tensorflow_text`` (which registers the WordPiece ops).

What is the same as the Python pipeline (``examples.example_from_text`` ->
``features.convert_examples_to_features`` -> model -> ``postprocess.answer_from_logits``):
the word-piece ids (``preprocessing.BertPreprocessor``, equal to ``FullTokenizer``), the doc
spans, max-context flags and features, and the choice of the answer: top ``n_best_size``
starts and ends per span, the same filters, ranking by start + end logit in float64 with the
same tie order, the v2.0 null score and ``null_score_diff_threshold``; so ``score`` is the
same number, and "" (v2.0, no answer) or "empty" (no valid span, the original's nonce) come
out in the same cases.

What differs, on purpose: the answer text. The original maps the chosen word pieces back to
the context by re-tokenizing the whole words they touch and aligning characters
(``postprocess.get_final_text``); that joins words with single spaces, returns the whole
words when the alignment fails (accents in NFD form, [UNK], characters that lower-casing
lengthens) and can pick the wrong occurrence inside them ("s" in "smith's"). Here every
word piece carries the byte offsets of the context characters it came from
(``BertPreprocessor.tokenize_with_offsets``), and the answer is exactly
``context[answer_start:answer_end]`` (code point offsets, as SQuAD's ``answer_start``): the
original text, its spacing and accents included. Where a character expands into several
normalised ones (a Hangul syllable into jamo) and a piece boundary falls inside it, the whole
character is taken; marks that normalisation drops (combining accents, format characters)
right after the last piece belong to the answer. Where the original's alignment works (at the
right occurrence), its answer is this one with each run of whitespace read as one space.

There is no limit on the context length: a long context becomes as many spans as it needs, all
in one batch of the model call (memory grows with the number of spans).

Shape legend:
  B = question/context pairs, F = features (doc spans) of all pairs, S = max_seq_length,
  K = candidate starts (and ends) per feature = min(n_best_size, S), N = most spans of a pair,
  T = word pieces of one context.
"""

import numpy as np
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.errors import BertTfError
from bert_tf.squad import features as squad_features
from bert_tf.squad import postprocess

_NEG_INF = float("-inf")
SIGNATURE_KEY = "serving_default"


def _first_max(scores, valid):
  """Per row of [R, X] float64 ``scores``: (best value, index of its FIRST occurrence, any).

  Python's stable sort keeps the first of equal candidates; ``tf.argmax`` promises no order.
  """
  masked = tf.where(valid, scores, _NEG_INF)
  best = tf.reduce_max(masked, axis=1)                                        # [R]
  width = tf.shape(scores, out_type=tf.int64)[1]
  positions = tf.range(width)[None, :]
  is_best = valid & (masked == best[:, None])
  index = tf.reduce_min(tf.where(is_best, positions, width), axis=1)           # [R]
  return best, tf.minimum(index, tf.maximum(width - 1, 0)), tf.reduce_any(valid, axis=1)


class QuestionAnswerer(tf.Module):
  """The SavedModel root: ``answerer(question, context)`` -> answer dict (module docstring).

  Args:
    model: a ``BertSpanLabeler`` (or any Keras model taking ``input_word_ids``,
      ``input_mask``, ``input_type_ids`` [F, S] and returning ``start_logits``,
      ``end_logits`` [F, S]).
    vocab_file: the model's vocab.txt (or the tokens in id order).
    do_lower_case, max_seq_length, doc_stride, max_query_length: as the features.
    n_best_size, max_answer_length, version_2_with_negative, null_score_diff_threshold: as
      ``postprocess.compute_predictions``.
  """

  def __init__(self, model, vocab_file, do_lower_case=True, max_seq_length=384,
               doc_stride=128, max_query_length=64, n_best_size=20, max_answer_length=30,
               version_2_with_negative=False, null_score_diff_threshold=0.0):
    super().__init__(name="question_answerer")
    squad_features.check_lengths(max_seq_length, doc_stride, max_query_length)
    from bert_tf.export import saved_models  # pylint: disable=import-outside-toplevel
    saved_models.check_fits(model, vocab_file, max_seq_length)
    if n_best_size < 1 or max_answer_length < 1:
      raise BertTfError(f"n_best_size ({n_best_size}) and max_answer_length "
                        f"({max_answer_length}) must be at least 1")
    self.model = model
    self.preprocessor = preprocessing.BertPreprocessor(
        vocab_file, do_lower_case=do_lower_case, max_seq_length=max_seq_length)
    self.max_seq_length = int(max_seq_length)
    self.doc_stride = int(doc_stride)
    self.max_query_length = int(max_query_length)
    self.n_best_size = int(n_best_size)
    self.max_answer_length = int(max_answer_length)
    self.version_2_with_negative = bool(version_2_with_negative)
    self.null_score_diff_threshold = float(null_score_diff_threshold)

  @tf.function(autograph=False,
               input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                tf.TensorSpec([None], tf.string, name="context")])
  def __call__(self, question, context):
    """question, context: [B] UTF-8 strings -> {answer_text, score, answer_start, answer_end}.

    answer_text [B] string: ``context[answer_start:answer_end]``; under v2.0 "" for no
      answer; "empty" (the original's nonce) when no span is valid (e.g. an empty context).
    score [B] float64: start + end logit of the answer (v2.0 "": the null score).
    answer_start, answer_end [B] int64: code point offsets into the context (-1 when
      the answer is not a span).
    B may be 0 (outputs of shape [0]), and every context may be empty (F = 0). A question
    and a context batch of different sizes raise InvalidArgumentError naming both.
    """
    S = self.max_seq_length  # pylint: disable=invalid-name
    question, context = preprocessing.assert_same_batch(
        "question_answerer", [("question", question), ("context", context)])
    num_pairs = tf.shape(question, out_type=tf.int64)[0]
    query_ids = self.preprocessor.tokenize(question)[:, :self.max_query_length]  # [B, (Q)]
    doc_ids, doc_begin, doc_end = self.preprocessor.tokenize_with_offsets(context)  # [B, (T)]
    query_length = query_ids.row_lengths()                                       # [B]
    doc_length = doc_ids.row_lengths()                                           # [B]

    # Doc spans, as make_doc_spans: every span but the last is max_tokens_for_doc long.
    max_tokens_for_doc = S - query_length - 3                                    # [B]
    stride = tf.minimum(max_tokens_for_doc, self.doc_stride)
    beyond_first = tf.maximum(doc_length - max_tokens_for_doc, 0)
    num_spans = tf.where(doc_length > 0, 1 + (beyond_first + stride - 1) // stride, 0)
    span_example = tf.repeat(tf.range(num_pairs), num_spans)                     # [F]
    span_index = tf.ragged.range(num_spans).flat_values                          # [F]
    span_start = span_index * tf.gather(stride, span_example)                    # [F]
    span_length = tf.minimum(tf.gather(doc_length, span_example) - span_start,
                             tf.gather(max_tokens_for_doc, span_example))        # [F]

    # Features: [CLS] query [SEP] span [SEP], padded (pack never truncates: they fit).
    doc_first = tf.gather(doc_ids.row_starts(), span_example) + span_start       # [F]
    span_positions = tf.ragged.range(doc_first, doc_first + span_length)         # [F, (L)]
    span_ids = tf.gather(doc_ids.flat_values, span_positions)
    inputs = self.preprocessor.pack(tf.gather(query_ids, span_example), span_ids)
    outputs = self.model(inputs, training=False)
    start_logits = tf.cast(outputs["start_logits"], tf.float64)                  # [F, S]
    end_logits = tf.cast(outputs["end_logits"], tf.float64)

    # Candidates: top K starts x top K ends per feature, lower index first on ties.
    k = min(self.n_best_size, S)
    start_values, start_index = tf.math.top_k(start_logits, k)                   # [F, K]
    end_values, end_index = tf.math.top_k(end_logits, k)
    start_index = tf.cast(start_index, tf.int64)
    end_index = tf.cast(end_index, tf.int64)
    doc_offset = tf.gather(query_length, span_example) + 2                       # [F]

    def in_span(index):
      return ((index >= doc_offset[:, None]) &
              (index < (doc_offset + span_length)[:, None]))
    start_ok = in_span(start_index) & self._is_max_context(
        span_example, span_index, span_start, span_length, num_spans,
        span_start[:, None] + start_index - doc_offset[:, None])
    length = end_index[:, None, :] - start_index[:, :, None] + 1                 # [F, K, K]
    valid = (start_ok[:, :, None] & in_span(end_index)[:, None, :] & (length >= 1) &
             (length <= self.max_answer_length))
    scores = start_values[:, :, None] + end_values[:, None, :]                   # [F, K, K]

    # Per pair, candidates in the original's order: feature, start rank, end rank.
    def per_pair(x, fill):  # [F, ...] -> [B, N * (size of ...)], padded with ``fill``
      flat = tf.reshape(x, [-1, int(np.prod(x.shape[1:]))])
      return tf.RaggedTensor.from_row_lengths(flat, num_spans, validate=False).merge_dims(
          1, 2).to_tensor(fill)

    best_score, best_at, has_span = _first_max(per_pair(scores, 0.0),
                                               per_pair(valid, False))           # [B]
    num_features = tf.size(span_example, out_type=tf.int64)
    best_feature = tf.where(has_span, tf.ragged.range(num_spans).row_starts() + best_at // (k * k),
                            num_features)                                        # [B]

    def at_best(x, column):  # [F, K] -> [B]: x[best_feature, column] (0 without a span)
      flat = tf.concat([tf.reshape(x, [-1]), tf.zeros([1], x.dtype)], 0)
      return tf.gather(flat, tf.where(has_span, best_feature * k + column, num_features * k))

    def at_feature(x, feature):  # [F] -> [B] (0 for feature F)
      return tf.gather(tf.concat([x, tf.zeros([1], x.dtype)], 0), feature)

    start_rank, end_rank = (best_at % (k * k)) // k, best_at % k
    best_start_logit = at_best(start_values, start_rank)
    best_end_logit = at_best(end_values, end_rank)
    # Chosen token positions -> doc tokens -> bytes of the context -> code points.
    first_doc_token = at_feature(span_start - doc_offset, best_feature)
    row_start = doc_ids.row_starts()
    begin = tf.gather(tf.concat([doc_begin.flat_values, [0]], 0), tf.where(
        has_span, row_start + first_doc_token + at_best(start_index, start_rank),
        tf.size(doc_begin.flat_values, out_type=tf.int64)))
    end = tf.gather(tf.concat([doc_end.flat_values, [0]], 0), tf.where(
        has_span, row_start + first_doc_token + at_best(end_index, end_rank),
        tf.size(doc_end.flat_values, out_type=tf.int64)))
    span_text = tf.strings.substr(context, begin, end - begin)
    before = tf.strings.substr(context, tf.zeros_like(begin), begin)
    answer_start = tf.cast(tf.strings.length(before, unit="UTF8_CHAR"), tf.int64)
    answer_end = answer_start + tf.cast(tf.strings.length(span_text, unit="UTF8_CHAR"),
                                        tf.int64)

    if not self.version_2_with_negative:
      return {
          "answer_text": tf.where(has_span, span_text, "empty"),
          "score": tf.where(has_span, best_score, tf.zeros_like(best_score)),
          "answer_start": tf.where(has_span, answer_start, -tf.ones_like(answer_start)),
          "answer_end": tf.where(has_span, answer_end, -tf.ones_like(answer_end)),
      }
    # v2.0: the null score is the smallest [CLS] start + end over the pair's features, the
    # first one on ties (and NO_NON_NULL_SCORE_DIFF, logits 0, when none is smaller).
    feature_null = start_logits[:, 0] + end_logits[:, 0]                         # [F]
    null_scores = per_pair(feature_null, 0.0)                                    # [B, N]
    is_feature = per_pair(tf.ones_like(feature_null, tf.bool), False)
    neg_null, null_at, has_null = _first_max(
        -null_scores, is_feature & (null_scores < postprocess.NO_NON_NULL_SCORE_DIFF))
    null_feature = tf.where(has_null, tf.ragged.range(num_spans).row_starts() + null_at,
                            num_features)
    score_null = tf.where(has_null, -neg_null,
                          tf.constant(postprocess.NO_NON_NULL_SCORE_DIFF, tf.float64))
    null_start_logit = at_feature(start_logits[:, 0], null_feature)
    null_end_logit = at_feature(end_logits[:, 0], null_feature)
    # The best non-null entry is in the n-best list unless the null one ranks above it and
    # the list holds only one entry (null entries sort after equal scores: appended last).
    has_non_null = has_span
    if self.n_best_size == 1:
      has_non_null &= ~(score_null > best_score)
    score_diff = score_null - best_start_logit - best_end_logit
    is_null = ~has_non_null | (score_diff > self.null_score_diff_threshold)
    return {
        "answer_text": tf.where(is_null, "", span_text),
        "score": tf.where(is_null, null_start_logit + null_end_logit, best_score),
        "answer_start": tf.where(is_null, -tf.ones_like(answer_start), answer_start),
        "answer_end": tf.where(is_null, -tf.ones_like(answer_end), answer_end),
    }

  def _is_max_context(self, span_example, span_index, span_start, span_length, num_spans,
                      position):
    """[F, K] bool: whether feature f's span gives doc token ``position[f, j]`` its most
    context, as ``features.check_is_max_context`` (first best span wins), in float64."""
    def padded(x):  # [F] -> [B, N], 0 beyond each pair's spans
      return tf.RaggedTensor.from_row_lengths(x, num_spans, validate=False).to_tensor(0)
    starts, lengths = padded(span_start), padded(span_length)                    # [B, N]
    max_spans = tf.shape(starts)[1]
    g_start = tf.gather(starts, span_example)[:, None, :]                        # [F, 1, N]
    g_length = tf.gather(lengths, span_example)[:, None, :]
    g_end = g_start + g_length - 1
    p = position[:, :, None]                                                     # [F, K, 1]
    inside = (g_length > 0) & (p >= g_start) & (p <= g_end)                      # [F, K, N]
    score = (tf.cast(tf.minimum(p - g_start, g_end - p), tf.float64) +
             0.01 * tf.cast(g_length, tf.float64))
    # [F*K, N], the row count spelled out: with no feature at all N is 0 as well, and
    # reshape cannot infer a -1 beside a 0 (every context empty, or a batch of 0 pairs).
    flat = lambda x: tf.reshape(x, [tf.size(position), max_spans])  # noqa: E731
    _, best, _ = _first_max(flat(score), flat(inside))
    return tf.reshape(best, tf.shape(position)) == span_index[:, None]


def export_question_answerer(model, vocab_file, export_dir, *, overwrite=False, **options):
  """Writes the question-answering SavedModel of ``model`` to ``export_dir``.

  ``options``: those of ``QuestionAnswerer`` (do_lower_case, max_seq_length, doc_stride,
  max_query_length, n_best_size, max_answer_length, version_2_with_negative,
  null_score_diff_threshold). The SavedModel is written under a temporary name beside
  ``export_dir`` and renamed when whole; ``export_dir`` may be missing or empty, or (with
  ``overwrite``) a previous export, replaced whole: anything else is refused
  (``bert_tf.export.check_export_dir``).

  Serving:
    import tensorflow as tf, tensorflow_text  # registers the WordPiece ops
    answerer = tf.saved_model.load(export_dir)
    answerer(question=tf.constant(["Who?"]), context=tf.constant(["Bob did."]))
    # or answerer.signatures["serving_default"](question=..., context=...)

  Returns:
    ``export_dir``.
  """
  from bert_tf.export import write_atomically  # pylint: disable=import-outside-toplevel
  from bert_tf.export.saved_models import in_float32  # pylint: disable=import-outside-toplevel
  answerer = QuestionAnswerer(in_float32(model), vocab_file, **options)
  # The concrete function: a tf.function would be traced once more for the signature.
  signature = answerer.__call__.get_concrete_function()
  return write_atomically(
      export_dir, lambda tmp: tf.saved_model.save(answerer, tmp,
                                                  signatures={SIGNATURE_KEY: signature}),
      overwrite=overwrite)
