"""The pretraining input pipeline: parsing, static shapes, sharding, dynamic masking."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import pipeline
from bert_tf.errors import BertTfError
from tests.reference import google_models

SEQ, PRED = 16, 4
CONFIG = google_models.tiny_config_dict(vocab_size=50)
CLS, SEP, MASK = 2, 3, 4


def _write(path, examples, start, count):
  """Writes examples[start:start+count] as the original's tf.train.Example records."""
  with tf.io.TFRecordWriter(str(path)) as writer:
    for i in range(start, start + count):
      feature = {}
      for name, values in examples.items():
        row = np.asarray(values[i]).reshape(-1)
        if name == "masked_lm_weights":
          feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=row.tolist()))
        else:
          feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=row.tolist()))
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=feature)).SerializeToString())


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  examples = google_models.random_pretraining_features(CONFIG, batch_size=12, seq_length=SEQ,
                                                       num_predictions=PRED, seed=3)
  # Real-looking sequences: [CLS] ... [SEP] ... [SEP] with ids >= 5 elsewhere.
  ids = examples["input_ids"]
  mask = examples["input_mask"]
  ids = np.where(ids > 0, np.maximum(ids, 5), 0)
  for b in range(ids.shape[0]):
    n = int(mask[b].sum())
    ids[b, 0], ids[b, n // 2], ids[b, n - 1] = CLS, SEP, SEP
  examples["input_ids"] = ids
  # Stored masks consistent with the ids: masked positions hold [MASK].
  for b in range(ids.shape[0]):
    for p, w in zip(examples["masked_lm_positions"][b], examples["masked_lm_weights"][b]):
      if w:
        examples["masked_lm_ids"][b][list(examples["masked_lm_positions"][b]).index(p)] = \
            ids[b, p] if ids[b, p] not in (CLS, SEP) else 7
        ids[b, p] = MASK
  directory = tmp_path_factory.mktemp("records")
  files = [directory / f"part-{i}.tfrecord" for i in range(3)]
  for i, f in enumerate(files):
    _write(f, examples, 4 * i, 4)
  return examples, [str(f) for f in files]


def test_eval_reads_every_record_in_order_with_static_shapes(records):
  examples, files = records
  ds = pipeline.pretraining_dataset(",".join(files), 4, SEQ, PRED, is_training=False)
  spec = ds.element_spec
  assert spec["input_ids"].shape == (4, SEQ) and spec["input_ids"].dtype == tf.int32
  assert spec["masked_lm_weights"].shape == (4, PRED)
  assert spec["masked_lm_weights"].dtype == tf.float32
  assert spec["next_sentence_labels"].shape == (4, 1)
  # In order by tf.data's guarantee, not by its map-and-batch fusion's luck (unfused, a
  # nondeterministic parallel map returned record 0 last).
  assert ds.options().deterministic is True
  batches = list(ds)
  assert len(batches) == 3
  for name, values in examples.items():
    got = np.concatenate([b[name].numpy() for b in batches])
    np.testing.assert_array_equal(got, np.asarray(values).reshape(got.shape))


def test_training_repeats_shuffles_and_is_deterministic_with_seed(records):
  _, files = records
  def first(seed):
    ds = pipeline.pretraining_dataset(files, 4, SEQ, PRED, is_training=True, seed=seed)
    return np.concatenate([b["input_ids"].numpy() for b in ds.take(6)])
  a, b = first(5), first(5)
  np.testing.assert_array_equal(a, b)
  assert a.shape == (24, SEQ)  # 6 batches from 12 records: it repeats


@pytest.mark.parametrize("dynamic", [False, True], ids=["stored-masks", "dynamic-masks"])
def test_input_pipelines_share_out_the_global_batches_of_one(records, dynamic):
  # Pipeline i of n keeps records i, i+n, ... of the one seeded stream, so its k-th batch of b
  # is rows i, i+n, ... of one pipeline's k-th global batch of n*b: n workers train on the
  # batches of one process (masks included: each example's seed is drawn before sharding).
  _, files = records
  masking = (dict(vocab_size=50, mask_id=MASK, special_ids=[CLS, SEP, 0], masked_lm_prob=0.15)
             if dynamic else None)
  n, b, steps = 3, 2, 5  # 30 rows from 12 records: across epochs and reshuffles
  def batches(size, ctx=None):
    ds = pipeline.pretraining_dataset(files, size, SEQ, PRED, is_training=True, seed=1,
                                      input_context=ctx, dynamic_masking=masking)
    return [{k: v.numpy() for k, v in batch.items()} for batch in ds.take(steps)]
  whole = batches(n * b)
  for i in range(n):
    ctx = tf.distribute.InputContext(num_input_pipelines=n, input_pipeline_id=i,
                                     num_replicas_in_sync=n)
    for k, part in enumerate(batches(b, ctx)):
      for name in part:
        np.testing.assert_array_equal(part[name], whole[k][name][i::n], err_msg=name)
  assert len({tuple(row) for batch in whole for row in batch["input_ids"]}) > n * b


@pytest.mark.parametrize("dynamic", [False, True], ids=["stored-masks", "dynamic-masks"])
def test_skipped_batches_are_the_batches_that_follow(records, dynamic):
  # A resumed run skips the batches read before its checkpoint; skip_batches skips their
  # records unparsed: the batches that come are those of ``.skip(k)`` of the whole stream
  # (across epochs and reshuffles; masks drawn for their own examples), in each of 2 input
  # pipelines too.
  _, files = records
  masking = (dict(vocab_size=50, mask_id=MASK, special_ids=[CLS, SEP, 0], masked_lm_prob=0.15)
             if dynamic else None)
  def batches(ctx=None, skip_batches=0, take=4):
    ds = pipeline.pretraining_dataset(files, 2, SEQ, PRED, is_training=True, seed=1,
                                      input_context=ctx, dynamic_masking=masking,
                                      skip_batches=skip_batches)
    return [{k: v.numpy() for k, v in batch.items()} for batch in ds.take(take)]
  for ctx in (None, tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                               num_replicas_in_sync=2)):
    whole = batches(ctx, take=11)
    for k in (1, 7):
      for got, want in zip(batches(ctx, skip_batches=k), whole[k:k + 4], strict=True):
        for name in want:
          np.testing.assert_array_equal(got[name], want[name], err_msg=f"{k}: {name}")


def test_missing_files_are_one_line_errors(tmp_path):
  with pytest.raises(BertTfError, match=r"no input files match .*nothing\*.tfrecord"):
    pipeline.pretraining_dataset(str(tmp_path / "nothing*.tfrecord"), 4, SEQ, PRED, True)


def test_gzip_and_plain_files_in_one_input_are_one_line(records, tmp_path):
  """One pipeline reads its files one way: the .gz one was read as plain and called damaged."""
  import gzip  # pylint: disable=import-outside-toplevel
  _, files = records
  packed = tmp_path / "part-9.tfrecord.gz"
  with open(files[0], "rb") as f:
    packed.write_bytes(gzip.compress(f.read()))
  with pytest.raises(BertTfError) as e:
    pipeline.pretraining_dataset(f"{files[1]},{packed}", 4, SEQ, PRED, False)
  assert str(e.value) == (f"--input_file mixes GZIP files (named .gz: {packed}) and plain ones "
                          f"({files[1]}): give files of one kind")
  batches = list(pipeline.pretraining_dataset(str(packed), 4, SEQ, PRED, False))
  assert len(batches) == 1  # alone, it reads


def test_eval_with_repeat_wraps_around_as_the_originals_eval_input(records):
  """The original's eval input_fn is ``TFRecordDataset(files).repeat()`` then whole batches:
  12 records in batches of 5 give records 0-4, 5-9, 10, 11, 0, 1, 2 (across the wrap), ..."""
  examples, files = records
  ds = pipeline.pretraining_dataset(files, 5, SEQ, PRED, is_training=False, repeat=True)
  batches = [b for _, b in zip(range(5), ds)]
  order = [i % 12 for i in range(25)]
  for name, values in examples.items():
    got = np.concatenate([b[name].numpy() for b in batches])
    want = np.asarray(values)[order]
    np.testing.assert_array_equal(got, want.reshape(got.shape), err_msg=name)


def test_drop_next_sentence(records):
  _, files = records
  ds = pipeline.pretraining_dataset(files, 4, SEQ, PRED, is_training=False,
                                    use_next_sentence=False)
  assert "next_sentence_labels" not in ds.element_spec


def test_dynamic_masking_follows_the_rule(records):
  examples, files = records
  options = dict(vocab_size=50, mask_id=MASK, special_ids=[CLS, SEP, 0], masked_lm_prob=0.15)
  # With a seed, a new pass over the data re-draws the same masks (reproducible runs) ...
  seeded = pipeline.pretraining_dataset(files, 4, SEQ, PRED, is_training=False, seed=11,
                                        dynamic_masking=options)
  first, second = [np.concatenate([b["input_ids"].numpy() for b in seeded]) for _ in range(2)]
  np.testing.assert_array_equal(first, second)
  # ... and a repeating (training) pipeline re-masks each time it reads a sequence.
  repeated = pipeline.pretraining_dataset(files, 4, SEQ, PRED, is_training=True, seed=11,
                                          dynamic_masking=options)
  # The unmasked originals, to check against.
  originals = np.array(examples["input_ids"])
  for b in range(originals.shape[0]):
    for p, w, i in zip(examples["masked_lm_positions"][b], examples["masked_lm_weights"][b],
                       examples["masked_lm_ids"][b]):
      if w:
        originals[b, p] = i
  # The rule, checked on 880 reads of the repeating pipeline.
  known = {tuple(row): row for row in originals}
  kinds = {"mask": 0, "same": 0, "random": 0}
  patterns = {}
  for batch in repeated.take(220):
    for b in range(4):
      ids = batch["input_ids"][b].numpy()
      n = int(batch["input_mask"][b].numpy().sum())
      weights = batch["masked_lm_weights"][b].numpy()
      positions = batch["masked_lm_positions"][b].numpy()[weights > 0]
      targets = batch["masked_lm_ids"][b].numpy()[weights > 0]
      restored = ids.copy()
      restored[positions] = targets
      original = known[tuple(restored)]  # the read is a re-masking of a stored sequence
      patterns.setdefault(tuple(restored), set()).add(tuple(positions))
      assert len(positions) == min(PRED, max(1, int(round(n * 0.15))))
      assert list(positions) == sorted(set(positions))
      assert all(original[p] not in (CLS, SEP, 0) and p < n for p in positions)
      for p in positions:
        kinds["mask" if ids[p] == MASK else "same" if ids[p] == original[p] else "random"] += 1
  # Each of the 12 sequences was read ~73 times: fixed masks would give 1 pattern each.
  assert len(patterns) == 12 and min(len(p) for p in patterns.values()) > 5
  total = sum(kinds.values())
  # 80/10/10 (a random id can equal the original: 1/50 of the 10%).
  assert abs(kinds["mask"] / total - 0.8) < 0.05
  assert abs(kinds["same"] / total - 0.1 - 0.1 / 50) < 0.04
  assert abs(kinds["random"] / total - 0.1) < 0.04


@pytest.mark.parametrize("dynamic", [False, True])
def test_training_batches_have_static_shapes(records, dynamic):
  """What a TPU needs (tpu_configs/README.md): every training feature fully static, batch
  included (drop_remainder), masked positions padded to max_predictions_per_seq, also when
  the masks are re-drawn on every read."""
  _, files = records
  options = dict(vocab_size=50, mask_id=MASK, special_ids=[CLS, SEP, 0], masked_lm_prob=0.15)
  ds = pipeline.pretraining_dataset(files, 4, SEQ, PRED, is_training=True, seed=1,
                                    dynamic_masking=options if dynamic else None)
  shapes = {name: spec.shape.as_list() for name, spec in ds.element_spec.items()}
  assert shapes == {"input_ids": [4, SEQ], "input_mask": [4, SEQ], "segment_ids": [4, SEQ],
                    "masked_lm_positions": [4, PRED], "masked_lm_ids": [4, PRED],
                    "masked_lm_weights": [4, PRED], "next_sentence_labels": [4, 1]}
