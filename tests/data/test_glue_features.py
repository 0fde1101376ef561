"""Classifier features, TFRecords and tf.data against Google's original run_classifier.

The original's convert_single_example, file_based_convert_examples_to_features and
file_based_input_fn_builder (with its own tokenizer) run on the fixture samples of every task
with the real bert-base-uncased vocab; bert_tf's must give the same features, records and
batches.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.data import classifier_features as cf
from bert_tf.data import glue
from bert_tf.errors import BertTfError
from tests.data.test_glue import task_dir
from tests.reference.google_bert import google


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
  return tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)


@pytest.fixture(scope="module")
def google_tokenizer(uncased_vocab):
  return google("tokenization").FullTokenizer(vocab_file=str(uncased_vocab), do_lower_case=True)


def _examples(name, split):
  return glue.get_processor(name).get_examples(task_dir(name), split)


def _to_original(example, task):
  """Our example as the original's InputExample (a test example gets its dummy label)."""
  run_classifier = google("run_classifier")
  if isinstance(example, cf.PaddingInputExample):
    return run_classifier.PaddingInputExample()
  label = example.label
  if label is None or task.is_regression:
    label = task.labels[0] if task.labels else "dummy"
  return run_classifier.InputExample(example.guid, example.text_a, example.text_b, label)


ALL_SPLITS = [(name, split) for name, task in glue.TASKS.items() for split in task.splits]


@pytest.mark.parametrize("max_seq_length", [10, 128])
@pytest.mark.parametrize("name,split", ALL_SPLITS)
def test_convert_single_example_matches_original(name, split, max_seq_length, tokenizer,
                                                 google_tokenizer):
  run_classifier = google("run_classifier")
  task = glue.get_task(name)
  label_list = list(task.labels) or ["dummy"]
  for example in cf.pad_to_batch(_examples(name, split), 4):
    ours = cf.convert_single_example(example, task.labels, max_seq_length, tokenizer,
                                     is_regression=task.is_regression)
    theirs = run_classifier.convert_single_example(
        99, _to_original(example, task), label_list, max_seq_length, google_tokenizer)
    assert ours.input_ids == theirs.input_ids
    assert ours.input_mask == theirs.input_mask
    assert ours.segment_ids == theirs.segment_ids
    assert ours.is_real_example == theirs.is_real_example
    if task.is_regression:
      expected = example.label if getattr(example, "label", None) is not None else 0.0
      assert ours.label_id == expected and isinstance(ours.label_id, float)
    else:
      assert ours.label_id == theirs.label_id


def test_fixtures_exercise_truncation_at_10(tokenizer):
  single, pair_a_longer, pair_b_longer = 0, 0, 0
  for name, split in ALL_SPLITS:
    for e in _examples(name, split):
      a = len(tokenizer.tokenize(e.text_a))
      b = len(tokenizer.tokenize(e.text_b)) if e.text_b else 0
      if not e.text_b:
        single += a > 8
      elif a + b > 7:
        pair_a_longer += a > b
        pair_b_longer += b >= a
  assert single >= 3 and pair_a_longer >= 3 and pair_b_longer >= 3


def test_truncate_seq_pair_by_hand():
  a, b = [1, 2, 3, 4, 5], [6, 7, 8]
  cf.truncate_seq_pair(a, b, 6)
  assert (a, b) == ([1, 2, 3], [6, 7, 8])
  cf.truncate_seq_pair(a, b, 5)  # Equal lengths: b loses first.
  assert (a, b) == ([1, 2, 3], [6, 7])
  cf.truncate_seq_pair(a, b, 2)
  assert (a, b) == ([1], [6])


def test_features_by_hand(tokenizer):
  vocab = tokenizer.vocab
  example = glue.InputExample("x-1", "the dog", "is hairy .", "1")
  f = cf.convert_single_example(example, ["0", "1"], 8, tokenizer)
  ids = [vocab[t] for t in ["[CLS]", "the", "dog", "[SEP]", "is", "hairy", ".", "[SEP]"]]
  assert f == cf.InputFeatures(ids, [1] * 8, [0, 0, 0, 0, 1, 1, 1, 1], 1, True)
  single = cf.convert_single_example(glue.InputExample("x-2", "the dog is hairy", "", "0"),
                                     ["0", "1"], 5, tokenizer)  # Empty text_b: no pair.
  assert single.input_ids == [vocab[t] for t in ["[CLS]", "the", "dog", "is", "[SEP]"]]
  assert single.segment_ids == [0] * 5
  with pytest.raises(BertTfError, match=r"example x-3: label '2' is not one of \['0', '1'\]"):
    cf.convert_single_example(glue.InputExample("x-3", "a", None, "2"), ["0", "1"], 8, tokenizer)


def _read_records(path):
  return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]


@pytest.mark.parametrize("name,split", [("mrpc", "dev"), ("mnli", "test_mismatched"),
                                        ("cola", "train"), ("xnli", "dev")])
def test_tfrecords_match_original(name, split, tmp_path, tokenizer, google_tokenizer):
  run_classifier = google("run_classifier")
  task = glue.get_task(name)
  examples = cf.pad_to_batch(_examples(name, split), 4)
  ours = str(tmp_path / "ours" / "eval.tf_record")
  theirs = str(tmp_path / "theirs.tf_record")
  assert cf.file_based_convert_examples_to_features(
      examples, task.labels, 24, tokenizer, ours) == len(examples)
  run_classifier.file_based_convert_examples_to_features(
      [_to_original(e, task) for e in examples], list(task.labels), 24, google_tokenizer, theirs)
  ours_records, theirs_records = _read_records(ours), _read_records(theirs)
  assert len(ours_records) == len(theirs_records) == len(examples)
  assert ours_records == theirs_records
  assert list(ours_records[0].features.feature) == list(theirs_records[0].features.feature)
  assert sorted(os.listdir(tmp_path / "ours")) == ["eval.tf_record"]  # No temp file left.


def test_regression_records_hold_float_labels(tmp_path, tokenizer):
  examples = _examples("sts-b", "dev")
  path = str(tmp_path / "stsb.tf_record")
  cf.file_based_convert_examples_to_features(cf.pad_to_batch(examples, 3), (), 16, tokenizer,
                                             path, is_regression=True)
  labels = [r.features.feature["label_ids"].float_list.value[0] for r in _read_records(path)]
  # The scores written in the fixture file, then the padding example's 0.
  assert labels == pytest.approx([5.0, 4.75, 0.0, 3.6, 0.2, 0.0])
  batches = list(cf.make_dataset(path, 16, 3, is_training=False, drop_remainder=True,
                                 is_regression=True))
  assert batches[0]["label_ids"].dtype == tf.float32
  assert np.allclose(np.concatenate([b["label_ids"] for b in batches]), labels)
  assert [b["is_real_example"].numpy().tolist() for b in batches] == [[1, 1, 1], [1, 1, 0]]


def test_eval_dataset_matches_original_input_fn(tmp_path, tokenizer):
  run_classifier = google("run_classifier")
  task = glue.get_task("mnli")
  path = str(tmp_path / "eval.tf_record")
  examples = cf.pad_to_batch(_examples("mnli", "dev_matched"), 4)
  cf.file_based_convert_examples_to_features(examples, task.labels, 20, tokenizer, path)
  theirs = run_classifier.file_based_input_fn_builder(path, 20, is_training=False,
                                                      drop_remainder=True)({"batch_size": 4})
  ours = cf.make_dataset(path, 20, 4, is_training=False, drop_remainder=True)
  assert ours.element_spec == {
      "input_ids": tf.TensorSpec([4, 20], tf.int32), "input_mask": tf.TensorSpec([4, 20], tf.int32),
      "segment_ids": tf.TensorSpec([4, 20], tf.int32), "label_ids": tf.TensorSpec([4], tf.int32),
      "is_real_example": tf.TensorSpec([4], tf.int32)}
  ours_batches, theirs_batches = list(ours), list(theirs)
  assert len(ours_batches) == len(theirs_batches) == 2
  for a, b in zip(ours_batches, theirs_batches):
    assert set(a) == set(b)
    for key in a:
      assert a[key].dtype == b[key].dtype
      np.testing.assert_array_equal(a[key], b[key])
  assert ours_batches[1]["is_real_example"].numpy().tolist() == [1, 0, 0, 0]


def test_train_dataset_repeats_shuffles_and_has_static_shapes(tmp_path, tokenizer):
  path = str(tmp_path / "train.tf_record")
  examples = _examples("cola", "train")  # 7 examples.
  cf.file_based_convert_examples_to_features(examples, ("0", "1"), 16, tokenizer, path)
  features = [cf.convert_single_example(e, ("0", "1"), 16, tokenizer) for e in examples]
  dataset = cf.make_dataset(path, 16, 3, is_training=True, drop_remainder=True, seed=1)
  assert dataset.element_spec["input_ids"].shape == [3, 16]
  rows = [tuple(ids) for b in dataset.take(7) for ids in b["input_ids"].numpy().tolist()]
  assert len(rows) == 21  # More than one epoch: repeated.
  assert set(rows) == {tuple(f.input_ids) for f in features}
  assert rows[:7] != [tuple(f.input_ids) for f in features]  # Shuffled (seeded).


def test_dataset_shards_by_input_context(tmp_path, tokenizer):
  path = str(tmp_path / "eval.tf_record")
  examples = cf.pad_to_batch(_examples("qnli", "dev"), 4)  # 5 + 3 padding = 8.
  cf.file_based_convert_examples_to_features(examples, ("entailment", "not_entailment"), 16,
                                             tokenizer, path)
  all_ids = [b["input_ids"].numpy() for b in
             cf.make_dataset(path, 16, 1, is_training=False, drop_remainder=True)]
  context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                       num_replicas_in_sync=2)
  shard = list(cf.make_dataset(path, 16, 4, is_training=False, drop_remainder=True,
                               input_context=context))
  assert [b["input_ids"].shape.as_list() for b in shard] == [[2, 16], [2, 16]]  # 4 / 2 replicas.
  np.testing.assert_array_equal(np.concatenate([b["input_ids"] for b in shard]),
                                np.concatenate(all_ids[1::2]))


def test_cache_reuses_and_rewrites(tmp_path, tokenizer, uncased_vocab):
  examples = cf.pad_to_batch(_examples("rte", "dev"), 4)
  labels = glue.get_task("rte").labels
  path = str(tmp_path / "eval.tf_record")
  first = cf.cached_convert_examples_to_features(examples, labels, 16, tokenizer, path)
  assert not first["cached"]
  assert (first["num_examples"], first["num_real_examples"]) == (8, 5)
  os.utime(path, (1, 1))
  again = cf.cached_convert_examples_to_features(examples, labels, 16, tokenizer, path)
  assert again["cached"] and again["fingerprint"] == first["fingerprint"]
  assert os.stat(path).st_mtime == 1  # Not rewritten.
  # A changed byte or a cut in the cached records: written again (one warning), not reused to
  # fail every run.
  sound = open(path, "rb").read()
  for damaged in (sound[:-3], sound[:40] + bytes([sound[40] ^ 1]) + sound[41:]):
    with open(path, "wb") as f:
      f.write(damaged)
    redone = cf.cached_convert_examples_to_features(examples, labels, 16, tokenizer, path)
    assert not redone["cached"] and open(path, "rb").read() == sound
  # Sound records of other features under this name (run_squad's and run_ner's own
  # eval.tf_record, written beside run_classifier's sidecar): not taken for the cache (the
  # next run_classifier run failed with a parse traceback).
  other = str(tmp_path / "other.tf_record")
  cf.cached_convert_examples_to_features(examples, labels, 24, tokenizer, other)
  os.replace(other, path)
  os.remove(other + ".meta.json")
  redone = cf.cached_convert_examples_to_features(examples, labels, 16, tokenizer, path)
  assert not redone["cached"] and open(path, "rb").read() == sound

  cased = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=False)
  changes = [
      (examples, labels, 20, tokenizer),                                   # Sequence length.
      (examples[:5], labels, 16, tokenizer),                               # Padding.
      (examples, labels[::-1], 16, tokenizer),                             # Label order.
      (examples, labels, 16, cased),                                       # Tokenizer.
      ([glue.InputExample("dev-0", "changed", "text", "entailment")] + examples[1:],
       labels, 16, tokenizer),                                             # Text.
  ]
  for args in changes:
    os.utime(path, (1, 1))
    meta = cf.cached_convert_examples_to_features(*args, path)
    assert not meta["cached"] and os.stat(path).st_mtime != 1
    assert len(_read_records(path)) == len(args[0])
  assert sorted(os.listdir(tmp_path)) == ["eval.tf_record", "eval.tf_record.meta.json"]


def test_interrupted_write_leaves_nothing(tmp_path, tokenizer):
  class Failing:
    vocab = tokenizer.vocab

    def __init__(self):
      self.calls = 0

    def tokenize(self, text):
      self.calls += 1
      if self.calls > 3:
        raise KeyboardInterrupt
      return tokenizer.tokenize(text)

    def convert_tokens_to_ids(self, tokens):
      return tokenizer.convert_tokens_to_ids(tokens)

  path = str(tmp_path / "train.tf_record")
  with pytest.raises(KeyboardInterrupt):
    cf.file_based_convert_examples_to_features(_examples("sst-2", "train"), ("0", "1"), 16,
                                               Failing(), path)
  assert os.listdir(tmp_path) == []


def test_accepts_googles_tokenizer_and_fingerprints_are_stable(tokenizer, google_tokenizer,
                                                               uncased_vocab):
  examples = _examples("wnli", "dev")
  ours = [cf.convert_single_example(e, ("0", "1"), 32, tokenizer) for e in examples]
  theirs = [cf.convert_single_example(e, ("0", "1"), 32, google_tokenizer) for e in examples]
  assert ours == theirs
  # A new process builds a new tokenizer from the same vocab: the cache must still hit.
  same = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  assert cf.tokenizer_fingerprint(same) == cf.tokenizer_fingerprint(tokenizer)
  assert (cf.features_fingerprint(examples, ("0", "1"), 32, same)
          == cf.features_fingerprint(examples, ("0", "1"), 32, tokenizer))
  # --preserve_unused_tokens tokenizes "[unused1]" otherwise: a cache made without it must miss.
  preserving = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True,
                                          preserve_unused_tokens=True)
  assert cf.tokenizer_fingerprint(preserving) != cf.tokenizer_fingerprint(tokenizer)
