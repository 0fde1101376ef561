"""Doc-span features: identical, field by field, to the original convert_examples_to_features."""

import collections
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.squad import examples as squad_examples
from bert_tf.squad import features as squad_features
from tests.squad.conftest import V1_SAMPLE, V2_HANDMADE, original_flags, training_copy

FEATURE_FIELDS = [f.name for f in dataclasses.fields(squad_features.InputFeatures)]

# (max_seq_length, doc_stride, max_query_length): small lengths give many overlapping spans.
LENGTHS = [(64, 16, 8), (96, 32, 16), (64, 32, 12), (48, 7, 5), (384, 128, 64)]


def original_features(run_squad, examples, tokenizer, lengths, is_training):
  max_seq_length, doc_stride, max_query_length = lengths
  collected = []
  run_squad.convert_examples_to_features(
      examples=examples, tokenizer=tokenizer, max_seq_length=max_seq_length,
      doc_stride=doc_stride, max_query_length=max_query_length, is_training=is_training,
      output_fn=collected.append)
  return collected


def our_features(examples, tokenizer, lengths, is_training):
  max_seq_length, doc_stride, max_query_length = lengths
  return list(squad_features.convert_examples_to_features(
      examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training))


def assert_same_features(ours, expected):
  assert len(ours) == len(expected)
  for a, b in zip(ours, expected):
    for name in FEATURE_FIELDS:
      assert getattr(a, name) == getattr(b, name), (a.unique_id, name)


def _both(run_squad, path, is_training, version_2_with_negative):
  ours = squad_examples.read_squad_examples(str(path), is_training,
                                            version_2_with_negative).examples
  with original_flags(version_2_with_negative=version_2_with_negative):
    theirs = run_squad.read_squad_examples(str(path), is_training=is_training)
  return ours, theirs


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("is_training", [False, True])
def test_real_v1_sample_features_match_original(run_squad, google_tokenizer, tmp_path,
                                               lengths, is_training):
  path = training_copy(V1_SAMPLE, tmp_path / "train.json") if is_training else V1_SAMPLE
  ours_examples, their_examples = _both(run_squad, path, is_training, False)
  ours = our_features(ours_examples, google_tokenizer, lengths, is_training)
  expected = original_features(run_squad, their_examples, google_tokenizer, lengths,
                               is_training)
  assert_same_features(ours, expected)
  if lengths[0] <= 96:  # The point of these lengths: several spans per example,
    assert len(ours) >= 2 * len(ours_examples)
    if is_training:  # some holding the answer, some pointing at [CLS].
      assert {f.start_position > 0 for f in ours} == {True, False}


@pytest.mark.parametrize("lengths", LENGTHS[:3])
@pytest.mark.parametrize("is_training", [False, True])
def test_handmade_v2_features_match_original(run_squad, google_tokenizer, lengths,
                                             is_training):
  ours_examples, their_examples = _both(run_squad, V2_HANDMADE, is_training, True)
  ours = our_features(ours_examples, google_tokenizer, lengths, is_training)
  expected = original_features(run_squad, their_examples, google_tokenizer, lengths,
                               is_training)
  assert_same_features(ours, expected)
  if is_training:
    impossible = [f for f in ours if f.is_impossible]
    assert impossible and all((f.start_position, f.end_position) == (0, 0)
                              for f in impossible)


def test_features_with_bert_tf_tokenizer_match_original(run_squad, google_tokenizer,
                                                        uncased_vocab):
  from bert_tf import tokenization
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  ours_examples, their_examples = _both(run_squad, V2_HANDMADE, True, True)
  ours = our_features(ours_examples, tokenizer, (64, 16, 8), True)
  expected = original_features(run_squad, their_examples, google_tokenizer, (64, 16, 8), True)
  assert_same_features(ours, expected)


def test_numbering_and_layout(google_tokenizer):
  examples = squad_examples.read_squad_examples(str(V1_SAMPLE), False).examples
  features = our_features(examples, google_tokenizer, (64, 16, 8), False)
  assert [f.unique_id for f in features] == list(range(1000000000,
                                                       1000000000 + len(features)))
  for f in features:
    n = len(f.tokens)
    query_length = f.tokens.index("[SEP]") - 1
    assert query_length <= 8 and f.tokens[0] == "[CLS]" and f.tokens[-1] == "[SEP]"
    assert f.segment_ids == [0] * (query_length + 2) + [1] * (n - query_length - 2) + [0] * (
        64 - n)
    assert f.input_mask == [1] * n + [0] * (64 - n)
    assert sorted(f.token_to_orig_map) == list(range(query_length + 2, n - 1))


def test_doc_spans_and_max_context_by_hand():
  # 10 tokens, windows of 4 advancing by 3: [0,4) [3,7) [6,10).
  spans = squad_features.make_doc_spans(10, 4, 3)
  assert spans == [(0, 4), (3, 4), (6, 4)]
  # Token 3: span 0 has (left 3, right 0) -> 0.04; span 1 has (0, 3) -> 0.04: first wins.
  assert squad_features.check_is_max_context(spans, 0, 3)
  assert not squad_features.check_is_max_context(spans, 1, 3)
  # Token 4: span 1 has min(1, 2) = 1 -> 1.04, span 0 does not hold it.
  assert squad_features.check_is_max_context(spans, 1, 4)
  # The stride is capped at the span length, and the last span ends at the end.
  assert squad_features.make_doc_spans(5, 2, 10) == [(0, 2), (2, 2), (4, 1)]
  assert squad_features.make_doc_spans(0, 4, 3) == []


def _original_doc_spans(num_doc_tokens, max_tokens_for_doc, doc_stride):
  """The sliding windows of the original's convert_examples_to_features, transcribed."""
  doc_span = collections.namedtuple("DocSpan", ["start", "length"])
  doc_spans = []
  start_offset = 0
  while start_offset < num_doc_tokens:
    length = num_doc_tokens - start_offset
    if length > max_tokens_for_doc:
      length = max_tokens_for_doc
    doc_spans.append(doc_span(start=start_offset, length=length))
    if start_offset + length == num_doc_tokens:
      break
    start_offset += min(length, doc_stride)
  return doc_spans


def _most_context_without_length(spans, position):
  """The first span with the most min(left, right) context for ``position``: the rule
  without the original's 0.01 * span length term."""
  scores = [min(position - s.start, s.start + s.length - 1 - position)
            if s.start <= position < s.start + s.length else -1 for s in spans]
  return scores.index(max(scores))


def test_max_context_counts_the_span_length(run_squad):
  """201 tokens, windows of 200 advancing by 128: [0,200) and [128,201). Token 164 scores
  min(164, 35) + 0.01 * 200 = 37.0 in span 0 and min(36, 36) + 0.01 * 73 = 36.73 in span 1:
  span 0 is its max context, as the original's _check_is_max_context says (without the
  length term span 1 would win, 35 < 36). Token 200 is in span 1 alone."""
  spans = squad_features.make_doc_spans(201, 200, 128)
  assert spans == [(0, 200), (128, 73)]
  assert run_squad._check_is_max_context(spans, 0, 164)  # pylint: disable=protected-access
  assert squad_features.check_is_max_context(spans, 0, 164)
  assert not squad_features.check_is_max_context(spans, 1, 164)
  assert _most_context_without_length(spans, 164) == 1
  assert squad_features.check_is_max_context(spans, 1, 200)


@pytest.mark.parametrize("max_tokens_for_doc,doc_strides", [
    (4, (1, 2, 3, 5)), (7, (2, 3, 7)), (150, (50, 128)), (200, (64, 128)), (317, (128,))])
def test_doc_spans_and_max_context_equal_the_original(run_squad, max_tokens_for_doc,
                                                      doc_strides):
  """Every token of every span, for documents from 1 token (every third length around the
  long windows) to two strides past a window: the same windows as the original's loop, the
  same max-context answers as its _check_is_max_context. Over 100 tokens a window's
  0.01 * length can outweigh a token of context, next to a short last window: such
  tokens are among them."""
  check_original = run_squad._check_is_max_context  # pylint: disable=protected-access
  decided_by_length = 0
  for doc_stride in doc_strides:
    lengths = range(1, max_tokens_for_doc + 2 * doc_stride + 3)
    if max_tokens_for_doc > 100:
      lengths = range(max_tokens_for_doc - 2, max_tokens_for_doc + 2 * doc_stride + 3, 3)
    for num_doc_tokens in lengths:
      spans = squad_features.make_doc_spans(num_doc_tokens, max_tokens_for_doc, doc_stride)
      assert spans == _original_doc_spans(num_doc_tokens, max_tokens_for_doc, doc_stride)
      for index, span in enumerate(spans):
        for position in range(span.start, span.start + span.length):
          expected = check_original(spans, index, position)
          assert squad_features.check_is_max_context(spans, index, position) == expected, (
              num_doc_tokens, doc_stride, index, position)
          if expected != (_most_context_without_length(spans, position) == index):
            decided_by_length += 1
  assert (decided_by_length > 0) == (max_tokens_for_doc > 100)


def test_long_document_max_context_features_match_original(run_squad, google_tokenizer):
  """The 201-token document through both converters: windows of 200 (205 - "[CLS] why ?
  [SEP]" - "[SEP]") by 128; token 164's max context is the first feature's, field for field
  the original's features."""
  example = squad_examples.example_from_text("Why?", " ".join(["word"] * 201))
  ours = our_features([example], google_tokenizer, (205, 128, 64), False)
  expected = original_features(run_squad, [example], google_tokenizer, (205, 128, 64), False)
  assert_same_features(ours, expected)
  assert [f.tokens[:4] for f in ours] == [["[CLS]", "why", "?", "[SEP]"]] * 2
  assert ours[0].token_is_max_context[4 + 164] and not ours[1].token_is_max_context[
      4 + 164 - 128]


def test_improve_answer_span_reference_cases(google_tokenizer):
  # The original's own examples: "(1895-1943)." holds "1895"; "Japanese" stays whole.
  doc = google_tokenizer.tokenize("The leader was John Smith (1895-1943).")
  start = doc.index("(")
  span = squad_features.improve_answer_span(doc, start, len(doc) - 1, google_tokenizer, "1895")
  assert doc[span[0]:span[1] + 1] == ["1895"]
  doc = google_tokenizer.tokenize("The Japanese electronics industry")
  assert squad_features.improve_answer_span(doc, 1, 1, google_tokenizer, "Japan") == (1, 1)


def test_long_question_is_cut_to_max_query_length(google_tokenizer):
  question = " ".join(["why"] * 500)  # Far longer than max_seq_length.
  example = squad_examples.example_from_text(question, "Because it is so.")
  (feature,) = our_features([example], google_tokenizer, (32, 8, 10), False)
  assert feature.tokens == ["[CLS]"] + ["why"] * 10 + ["[SEP]", "because", "it", "is", "so",
                                                        ".", "[SEP]"]


@pytest.mark.parametrize("lengths, message", [
    ((64, 16, 61), "max_seq_length (64) must be greater than max_query_length (61) + 3 "
                   "(--max_seq_length, --max_query_length)"),
    ((64, 0, 8), "doc_stride (0) must be at least 1 (--doc_stride)"),
    ((64, 16, 0), "max_query_length (0) must be at least 1 (--max_query_length)"),
])
def test_lengths_without_room_for_context_are_one_line_errors(google_tokenizer, lengths,
                                                              message):
  example = squad_examples.example_from_text("Why?", "Because.")
  with pytest.raises(BertTfError) as e:
    our_features([example], google_tokenizer, lengths, False)
  assert str(e.value) == message


def test_empty_context_has_no_features(run_squad, google_tokenizer):
  examples = [squad_examples.example_from_text("Why?", ""),
              squad_examples.example_from_text("Why?", "Because.")]
  ours = our_features(examples, google_tokenizer, (32, 8, 8), False)
  expected = original_features(run_squad, examples, google_tokenizer, (32, 8, 8), False)
  assert_same_features(ours, expected)
  assert [f.example_index for f in ours] == [1]


# --- TFRecords and tf.data ----------------------------------------------------------------------

def _parse_file(path):
  parsed = []
  for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
    example = tf.train.Example.FromString(record)
    parsed.append({name: list(feature.int64_list.value)
                   for name, feature in example.features.feature.items()})
  return parsed


@pytest.mark.parametrize("is_training", [False, True])
def test_tfrecords_match_original_feature_writer(run_squad, google_tokenizer, tmp_path,
                                                 is_training):
  examples = squad_examples.read_squad_examples(str(V2_HANDMADE), is_training, True).examples
  features = our_features(examples, google_tokenizer, (64, 16, 8), is_training)
  ours_path = tmp_path / "out" / "ours.tf_record"
  with squad_features.FeatureWriter(str(ours_path), is_training) as writer:
    for feature in features:
      writer.write(feature)
  theirs = run_squad.FeatureWriter(str(tmp_path / "theirs.tf_record"), is_training)
  for feature in features:
    theirs.process_feature(feature)
  theirs.close()
  assert writer.num_features == theirs.num_features == len(features)
  assert _parse_file(ours_path) == _parse_file(tmp_path / "theirs.tf_record")
  assert sorted(p.name for p in ours_path.parent.iterdir()) == ["ours.tf_record"]


def test_feature_writer_leaves_nothing_on_failure(tmp_path):
  path = tmp_path / "train.tf_record"
  with pytest.raises(RuntimeError):
    with squad_features.FeatureWriter(str(path), is_training=False):
      raise RuntimeError("interrupted")
  assert list(tmp_path.iterdir()) == []


def _write_features(path, features, is_training):
  with squad_features.FeatureWriter(str(path), is_training) as writer:
    for feature in features:
      writer.write(feature)


def test_prediction_dataset_static_shapes_and_padding(google_tokenizer, tmp_path):
  examples = squad_examples.read_squad_examples(str(V1_SAMPLE), False).examples
  features = our_features(examples, google_tokenizer, (64, 16, 8), False)
  path = tmp_path / "eval.tf_record"
  _write_features(path, features, False)
  batch_size = 4
  assert len(features) % batch_size != 0
  d = squad_features.input_dataset(str(path), 64, is_training=False, batch_size=batch_size,
                                   pad_to_batch=True)
  assert set(d.element_spec) == {"unique_ids", "input_ids", "input_mask", "segment_ids"}
  assert d.element_spec["input_ids"].shape.as_list() == [batch_size, 64]
  assert d.element_spec["unique_ids"].shape.as_list() == [batch_size]
  assert all(spec.dtype == tf.int32 for spec in d.element_spec.values())
  batches = list(d.as_numpy_iterator())
  rows = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
  n = len(features)
  assert len(rows["unique_ids"]) == -(-n // batch_size) * batch_size
  np.testing.assert_array_equal(rows["unique_ids"][:n], [f.unique_id for f in features])
  np.testing.assert_array_equal(rows["input_ids"][:n], [f.input_ids for f in features])
  np.testing.assert_array_equal(rows["segment_ids"][:n], [f.segment_ids for f in features])
  assert (rows["unique_ids"][n:] == squad_features.PADDING_UNIQUE_ID).all()
  assert (rows["input_mask"][n:] == 0).all()
  # Without padding, the last batch is short (the original's predict input_fn).
  d = squad_features.input_dataset(str(path), 64, is_training=False, batch_size=batch_size)
  assert sum(len(b["unique_ids"]) for b in d.as_numpy_iterator()) == n


def test_training_dataset_repeats_shuffles_and_is_static(google_tokenizer, tmp_path):
  examples = squad_examples.read_squad_examples(str(V2_HANDMADE), True, True).examples
  features = our_features(examples, google_tokenizer, (64, 16, 8), True)
  path = tmp_path / "train.tf_record"
  _write_features(path, features, True)
  d = squad_features.input_dataset(str(path), 64, is_training=True, batch_size=8, seed=1)
  assert {name: spec.shape.as_list() for name, spec in d.element_spec.items()} == {
      "unique_ids": [8], "input_ids": [8, 64], "input_mask": [8, 64], "segment_ids": [8, 64],
      "start_positions": [8], "end_positions": [8], "is_impossible": [8]}
  by_id = {f.unique_id: f for f in features}
  seen = []
  for batch in d.take(2 * len(features) // 8 + 1).as_numpy_iterator():
    for i, unique_id in enumerate(batch["unique_ids"]):
      f = by_id[int(unique_id)]
      assert (batch["start_positions"][i], batch["end_positions"][i],
              batch["is_impossible"][i]) == (f.start_position, f.end_position,
                                             int(f.is_impossible))
      np.testing.assert_array_equal(batch["input_ids"][i], f.input_ids)
      seen.append(int(unique_id))
  assert len(seen) > len(features)  # Repeats past one epoch.
  assert seen[:len(features)] != sorted(seen[:len(features)])  # Shuffled.


def test_prediction_dataset_shards_per_input_pipeline(google_tokenizer, tmp_path):
  examples = squad_examples.read_squad_examples(str(V1_SAMPLE), False).examples
  features = our_features(examples, google_tokenizer, (64, 16, 8), False)
  path = tmp_path / "eval.tf_record"
  _write_features(path, features, False)
  ids = []
  for pipeline in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                         num_replicas_in_sync=2)
    d = squad_features.input_dataset(str(path), 64, is_training=False, batch_size=8,
                                     pad_to_batch=True, input_context=context)
    assert d.element_spec["input_ids"].shape.as_list() == [4, 64]  # Per-replica batch.
    ids.append([int(i) for b in d.as_numpy_iterator() for i in b["unique_ids"] if i])
  # Record k goes to pipeline k % 2; together they hold every feature once.
  assert ids[0] == [f.unique_id for f in features[0::2]]
  assert ids[1] == [f.unique_id for f in features[1::2]]
