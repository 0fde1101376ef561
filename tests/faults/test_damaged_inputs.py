"""run_pretraining.py on damaged or mismatched input files, and with impossible numbers.

Each case runs the script and asserts the exit status and the one line it prints. Where a
byte is changed or a file cut, the expected offset is summed from the lengths of the records
the test wrote (TensorFlow's writer), not taken from the code under test.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import record_check
from bert_tf.errors import BertTfError

from tests import warm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ, PRED, RECORDS = 16, 3, 300
CONFIG = ('{{"vocab_size": {vocab}, "hidden_size": 16, "num_hidden_layers": 1, '
          '"num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu", '
          '"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, '
          '"max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}}')
PROG = "run_pretraining.py"


def _examples(count, seq, pred, seed, max_id=100):
  rng = np.random.default_rng(seed)
  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))
  for _ in range(count):
    yield tf.train.Example(features=tf.train.Features(feature={
        "input_ids": ints(rng.integers(1, max_id, seq)), "input_mask": ints([1] * seq),
        "segment_ids": ints([0] * (seq // 2) + [1] * (seq - seq // 2)),
        "masked_lm_positions": ints(sorted(rng.choice(np.arange(1, seq), pred, False))),
        "masked_lm_ids": ints(rng.integers(1, max_id, pred)),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * pred)),
        "next_sentence_labels": ints([rng.integers(0, 2)])})).SerializeToString()


def _write(path, seq=SEQ, pred=PRED, seed=0, max_id=100, count=RECORDS):
  """Writes the records with TensorFlow's writer; returns the frame offsets (and the end)."""
  lengths = []
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in _examples(count, seq, pred, seed, max_id):
      writer.write(record)
      lengths.append(len(record))
  return np.concatenate([[0], np.cumsum([16 + n for n in lengths])])


@pytest.fixture
def work(tmp_path):
  (tmp_path / "bert_config.json").write_text(CONFIG.format(vocab=100))
  offsets = [_write(tmp_path / f"data-{i}.tfrecord", seed=i) for i in range(2)]
  return tmp_path, offsets


def _run(work_dir, out, extra=(), steps=60, files="data-*.tfrecord"):
  command = [sys.executable, os.path.join(ROOT, PROG),
             f"--input_file={work_dir}/{files}", f"--output_dir={out}",
             f"--bert_config_file={work_dir}/bert_config.json", "--do_train=True",
             f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
             "--train_batch_size=8", "--learning_rate=1e-3", f"--num_train_steps={steps}",
             "--num_warmup_steps=0", "--seed=1", "--steps_per_loop=5",
             "--save_checkpoints_steps=5", *extra]
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}
  return warm.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600,
                  env=env)


def _one_line(result):
  """The error line: exit 1, no traceback, the last line of stderr."""
  assert result.returncode == 1, (result.returncode, result.stderr[-3000:])
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  return result.stderr.strip().splitlines()[-1]


def _damage(path, offsets, how, k):
  data = path.read_bytes()
  if how == "flipped":
    changed = bytearray(data)
    changed[offsets[k] + 12 + 7] ^= 0x01  # a byte inside record k's data
    path.write_bytes(bytes(changed))
    return "the data's CRC-32C does not match (a changed byte)"
  path.write_bytes(data[:offsets[k] + 12 + 7])  # cut inside record k's data
  return f"the file ends inside the record (cut short: it needs {offsets[k + 1] - offsets[k]} "\
         "bytes, 19 are left)"


@pytest.mark.parametrize("how", ["flipped", "truncated"])
def test_damaged_record_mid_run_is_one_line_and_again_after_resume(work, tmp_path, how):
  work_dir, offsets = work
  bad = work_dir / "data-1.tfrecord"
  k = 250  # far enough that training has saved checkpoints before it reads record k
  reason = _damage(bad, offsets[1], how, k)
  expected = (f"{PROG}: error: {bad}: damaged TFRecord at byte {offsets[1][k]} (record {k}): "
              f"{reason}; {record_check.ADVICE}")
  out = tmp_path / "out"
  first = _run(work_dir, out)
  assert _one_line(first) == expected
  steps = [line for line in first.stdout.splitlines() if line.startswith("step ")]
  assert steps, "the damage must be met mid-run, after some training"
  assert tf.train.latest_checkpoint(str(out)) is not None
  # The checker names the same record.
  check = warm.run([sys.executable, os.path.join(ROOT, "data_prep", "check_tfrecords.py"),
                    f"--input_file={work_dir}/data-*.tfrecord"], capture_output=True,
                   text=True, cwd=ROOT, timeout=600)
  assert _one_line(check) == expected.replace(PROG, "check_tfrecords.py", 1)
  if how == "truncated":
    return  # the rest is the same for both kinds of damage
  again = _run(work_dir, out)
  assert "resumed from" in again.stdout
  assert _one_line(again) == expected
  # --check_input_files stops before training.
  checked = _run(work_dir, tmp_path / "checked", ["--check_input_files"])
  assert _one_line(checked) == expected
  assert not [line for line in checked.stdout.splitlines() if line.startswith("step ")]
  assert not os.path.exists(tmp_path / "checked" / "checkpoint")


def _check_inputs(work_dir, vocab=100, full=False):
  """What run_pretraining checks before building the model (in-process: no start-up)."""
  from bert_tf.data import input_checks, pipeline  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig  # pylint: disable=import-outside-toplevel
  files = pipeline.expand_file_patterns(f"{work_dir}/data-*.tfrecord")
  config = BertConfig.from_dict(json.loads(CONFIG.format(vocab=vocab)))
  input_checks.check_pretraining_inputs(files, config, SEQ, PRED, full=full)


def test_files_of_two_shapes_are_named_before_training(work):
  work_dir, _ = work
  _check_inputs(work_dir)
  _write(work_dir / "data-2.tfrecord", seq=32, pred=5, seed=2, count=3)
  with pytest.raises(BertTfError) as error:
    _check_inputs(work_dir)
  assert str(error.value) == (
      f"--input_file mixes records of two shapes: {work_dir}/data-0.tfrecord "
      f"has max_seq_length {SEQ}, max_predictions_per_seq {PRED}; {work_dir}/data-2.tfrecord "
      "has 32, 5 (data made with other --max_seq_length/--max_predictions_per_seq): give files "
      "of one shape")


def test_a_record_of_another_shape_inside_a_file_is_one_line(work, tmp_path):
  """Records of another shape appended to a file, past the first record every pipeline reads:
  named by --check_input_files (record and count), and one line when a run meets them (both
  were a TensorFlow traceback; check_pretraining_files reads first records only)."""
  work_dir, _ = work
  _write(tmp_path / "other.tfrecord", seq=32, pred=5, count=3)
  with open(work_dir / "data-0.tfrecord", "ab") as out:
    out.write((tmp_path / "other.tfrecord").read_bytes())
  _check_inputs(work_dir)  # the first records fit
  with pytest.raises(BertTfError) as error:
    _check_inputs(work_dir, full=True)
  assert str(error.value) == (
      f"{work_dir}/data-0.tfrecord: record {RECORDS} has 32 input_ids, the records before it "
      f"{SEQ} (data of another --max_seq_length/--max_predictions_per_seq appended to this "
      "file?)")
  run = _run(work_dir, tmp_path / "out", steps=120)  # 960 records: every one is read
  line = _one_line(run)
  assert re.fullmatch(  # (its first feature that does not parse, as TensorFlow says)
      re.escape(f"{PROG}: error: a record in --input_file ({work_dir}/data-0.tfrecord, "
                f"{work_dir}/data-1.tfrecord) does not parse as pretraining data of "
                f"--max_seq_length {SEQ}, --max_predictions_per_seq {PRED} (its ") +
      r"[a-z_]+" + re.escape(
          "): data of another shape in a file? --check_input_files names the file and record"),
      line), line


def test_an_id_past_the_embedding_table_met_by_a_run_is_one_line():
  """TensorFlow's own message for the gather (an id past the sample checked before the run):
  the config's table it overruns is named."""
  from bert_tf.data import input_checks  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig  # pylint: disable=import-outside-toplevel
  config = BertConfig.from_dict(json.loads(CONFIG.format(vocab=100)))
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    tf.gather(tf.zeros([100, 4]), tf.constant([[1, 2], [3, 400]]))
  assert input_checks.describe_bad_record(error.value.message, ["a.tfrecord"], config, SEQ,
                                          PRED) == (
      "an id 400 in --input_file (a.tfrecord) is not below the config's vocab_size 100 (data "
      "made with another vocab?): --check_input_files names the file and record")
  assert input_checks.describe_bad_record("something else", ["a"], config, SEQ, PRED) is None


def _max_input_id(records):
  """(max input id, first record holding it), from the protos."""
  ids = [max(tf.train.Example.FromString(r).features.feature["input_ids"].int64_list.value)
         for r in records]
  return max(ids), ids.index(max(ids))


def test_ids_past_the_configs_vocab_are_one_line_before_training(work):
  work_dir, _ = work
  # Random ids in [1, 100): the first file's first records reach 99; 50 rows do not hold
  # them. Checked on a sample (64 records of the first file) or on every record.
  sample = list(_examples(RECORDS, SEQ, PRED, 0))[:input_checks_sample()]
  top, record = _max_input_id(sample)
  for full in (False, True):
    with pytest.raises(BertTfError) as error:
      _check_inputs(work_dir, vocab=50, full=full)
    assert str(error.value) == (
        f"{work_dir}/data-0.tfrecord: record {record} has input_ids {top}, but the config has "
        "vocab_size 50 (the data was made with another vocab, or another --bert_config_file is "
        "needed)")
  _check_inputs(work_dir, vocab=100, full=True)
  # An id only past the sample (in record 100 of one file): found by the full check alone.
  records = list(_examples(100, SEQ, PRED, 0, max_id=60)) + list(
      _examples(1, SEQ, PRED, 9, max_id=100))
  with tf.io.TFRecordWriter(str(work_dir / "data-0.tfrecord")) as writer:
    for r in records:
      writer.write(r)
  (work_dir / "data-1.tfrecord").unlink()
  _check_inputs(work_dir, vocab=60)
  top, record = _max_input_id(records)
  with pytest.raises(BertTfError, match=f"record {record} has input_ids {top}, but the config "
                     "has vocab_size 60"):
    _check_inputs(work_dir, vocab=60, full=True)



def _write_ids(path, count, bad=None):
  """``count`` records of shape (SEQ, PRED), every id 1 and segment 0, but record ``bad[0]``,
  whose ``bad[1]`` feature has ``bad[2]`` at its last position."""
  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  with tf.io.TFRecordWriter(str(path)) as writer:
    for k in range(count):
      values = {"input_ids": [1] * SEQ, "segment_ids": [0] * SEQ, "masked_lm_ids": [1] * PRED}
      if bad is not None and k == bad[0]:
        values[bad[1]][-1] = bad[2]
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          **{name: ints(v) for name, v in values.items()}, "input_mask": ints([1] * SEQ),
          "masked_lm_positions": ints(list(range(1, PRED + 1))),
          "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
              value=[1.0] * PRED)),
          "next_sentence_labels": ints([0])})).SerializeToString())


@pytest.mark.parametrize("name,value,limit", [
    ("input_ids", 100, "vocab_size 100"), ("masked_lm_ids", 100, "vocab_size 100"),
    ("segment_ids", 2, "type_vocab_size 2")])
def test_an_id_equal_to_the_table_size_is_past_it(tmp_path, name, value, limit):
  """A table of N rows takes ids 0 .. N - 1 (the config: vocab_size 100, type_vocab_size 2):
  an id of N is refused, N - 1 taken, on the sample and on every record (an id equal to the
  size, and a segment id 2 checked against vocab_size, went through unnoticed)."""
  for full in (False, True):
    _write_ids(tmp_path / "data-0.tfrecord", 10, bad=(3, name, value - 1))
    _check_inputs(tmp_path, full=full)
    _write_ids(tmp_path / "data-0.tfrecord", 10, bad=(3, name, value))
    with pytest.raises(BertTfError) as error:
      _check_inputs(tmp_path, full=full)
    assert str(error.value) == (
        f"{tmp_path}/data-0.tfrecord: record 3 has {name} {value}, but the config has {limit} "
        "(the data was made with another vocab, or another --bert_config_file is needed)")


def test_the_sample_reads_every_files_first_record_and_names_records_past_a_batch(tmp_path):
  """The sample check reads the first record of each file after the first (an id past the
  vocab there was let through when none of them was read); the full check counts records
  across its parse batches (of 4096): the bad record 4100 was named as record 4."""
  _write_ids(tmp_path / "data-0.tfrecord", 5)
  _write_ids(tmp_path / "data-1.tfrecord", 5, bad=(0, "input_ids", 500))
  with pytest.raises(BertTfError, match=r"data-1\.tfrecord: record 0 has input_ids 500, but "):
    _check_inputs(tmp_path)
  (tmp_path / "data-1.tfrecord").unlink()
  _write_ids(tmp_path / "data-0.tfrecord", 4200, bad=(4100, "input_ids", 500))
  _check_inputs(tmp_path)  # (past the sample)
  with pytest.raises(BertTfError, match=r"data-0\.tfrecord: record 4100 has input_ids 500, "):
    _check_inputs(tmp_path, full=True)

def input_checks_sample():
  from bert_tf.data import input_checks  # pylint: disable=import-outside-toplevel
  return input_checks.SAMPLE


def test_impossible_learning_rate_is_one_line(work, tmp_path):
  """The script's way there (its flags checked by cli.run before main); the other values and
  flags are checked in-process below, through the same table."""
  work_dir, _ = work
  result = _run(work_dir, tmp_path / "out", ["--learning_rate=nan"])
  assert _one_line(result) == f"{PROG}: error: --learning_rate=nan: must be a finite number > 0"
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("flag,value,message", [
    ("learning_rate", "inf", "--learning_rate=inf: must be a finite number > 0"),
    ("learning_rate", "-0.001", "--learning_rate=-0.001: must be a finite number > 0"),
    ("learning_rate", "0", "--learning_rate=0.0: must be a finite number > 0"),
    ("warmup_proportion", "1.5", "--warmup_proportion=1.5: must be in [0, 1]"),
    ("warmup_proportion", "-0.1", "--warmup_proportion=-0.1: must be in [0, 1]"),
    ("classifier_dropout", "1", "--classifier_dropout=1.0: must be in [0, 1)"),
    ("adam_beta2", "nan", "--adam_beta2=nan: must be in [0, 1)"),
    ("num_train_epochs", "0", "--num_train_epochs=0.0: must be a finite number > 0"),
    ("num_train_steps", "0", "--num_train_steps=0: must be >= 1"),
    ("num_train_steps", "-5", "--num_train_steps=-5: must be >= 1"),
])
def test_flag_ranges_every_script_shares(flag, value, message):
  from absl import flags  # pylint: disable=import-outside-toplevel
  from bert_tf import flag_ranges  # pylint: disable=import-outside-toplevel
  from bert_tf.training import flags as training_flags  # pylint: disable=import-outside-toplevel
  fv = flags.FlagValues()
  training_flags.define_training_flags(fv)
  for name in ("learning_rate", "warmup_proportion", "classifier_dropout", "num_train_epochs"):
    flags.DEFINE_float(name, 0.1, "", flag_values=fv)
  flags.DEFINE_integer("num_train_steps", 10, "", flag_values=fv)
  fv(["prog"])
  flag_ranges.check(fv)  # the defaults pass
  fv(["prog", f"--{flag}={value}"])
  with pytest.raises(BertTfError) as error:
    flag_ranges.check(fv)
  assert str(error.value) == message


@pytest.mark.parametrize("flag,value,message", [
    ("seed", "-1", "--seed=-1: must be in [0, 2**32 - 1]"),
    ("seed", "4294967296", "--seed=4294967296: must be in [0, 2**32 - 1]"),
    ("shard_size_mb", "inf", "--shard_size_mb=inf: must be a finite number > 0"),
    ("shard_size_mb", "nan", "--shard_size_mb=nan: must be a finite number > 0"),
])
def test_seed_and_shard_size_ranges(flag, value, message):
  """--seed outside keras.utils.set_random_seed's range and a --shard_size_mb of inf or nan
  were tracebacks (ValueError, OverflowError) after the run had started writing."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  from bert_tf import flag_ranges  # pylint: disable=import-outside-toplevel
  fv = flags.FlagValues()
  flags.DEFINE_integer("seed", None, "", flag_values=fv)
  flags.DEFINE_float("shard_size_mb", 16.0, "", flag_values=fv)
  fv(["prog", "--seed=0"])
  flag_ranges.check(fv)
  fv(["prog", "--seed=4294967295"])
  flag_ranges.check(fv)
  fv(["prog", f"--{flag}={value}"])
  with pytest.raises(BertTfError) as error:
    flag_ranges.check(fv)
  assert str(error.value) == message


@pytest.mark.parametrize("edge,outside", [("1", "0"), ("0.5", "1.5"), ("1e-9", "-0.1")])
def test_masked_lm_prob_is_a_fraction_above_0(edge, outside):
  """--masked_lm_prob in (0, 1]: 0 is refused, 1 is not. run_pretraining's --dynamic_masking
  has no other check of it (0 masked max(1, round(0)) = 1 token a sequence); the data prep's
  InstanceOptions checks its own (mutation audit: 0 let through went unnoticed)."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  from bert_tf import flag_ranges  # pylint: disable=import-outside-toplevel
  fv = flags.FlagValues()
  flags.DEFINE_float("masked_lm_prob", 0.15, "", flag_values=fv)
  fv(["prog", f"--masked_lm_prob={edge}"])
  flag_ranges.check(fv)
  fv(["prog", f"--masked_lm_prob={outside}"])
  with pytest.raises(BertTfError) as error:
    flag_ranges.check(fv)
  assert str(error.value) == f"--masked_lm_prob={float(outside)}: must be in (0, 1]"


@pytest.mark.parametrize("script,args,message", [
    ("data_prep/sample_corpus.py", ["--output_file="], "--output_file is empty: give a path"),
    ("data_prep/build_vocab.py", ["--input_file=x", "--vocab_file= "],
     "--vocab_file is empty: give a path"),
    ("data_prep/check_tfrecords.py", ["--input_file=,"], "--input_file is empty: give a path"),
    ("data_prep/sample_corpus.py", ["--output_file=c.txt", "--min_sentence_chars=0"],
     "--min_sentence_chars=0: must be >= 1"),
])
def test_empty_paths_and_sentence_lengths(tmp_path, script, args, message):
  """An empty output name was a FileNotFoundError traceback (a write to ''), an empty
  check_tfrecords input 'no damage', --min_sentence_chars=0 a corpus of empty sentences."""
  result = subprocess.run([sys.executable, os.path.join(ROOT, script), *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
  assert _one_line(result) == f"{os.path.basename(script)}: error: {message}"
  assert os.listdir(tmp_path) == []


def test_non_finite_loss_stops_at_its_step_keeps_last_finite_checkpoint(work, tmp_path):
  # An overflowing learning rate, no warmup: update 1 (from the initial weights, a finite
  # loss) moves every weight by about 1e30 x lr-free Adam steps; the next forward pass
  # overflows float32, so the loss of update 2 is the first that is not finite.
  work_dir, _ = work
  out = tmp_path / "out"
  result = _run(work_dir, out, ["--learning_rate=1e30", "--steps_per_loop=1",
                                "--save_checkpoints_steps=1"], steps=6)
  assert _one_line(result) == (
      f"{PROG}: error: the loss is not finite at step 2: training stopped without saving (the "
      "latest checkpoint, ckpt-1, holds the last finite weights); lower --learning_rate, or "
      "check the input data")
  assert os.path.basename(tf.train.latest_checkpoint(str(out))) == "ckpt-1"
  assert not os.path.exists(out / "ckpt-2.index")
  assert not os.path.exists(out / "google")
  reader = tf.train.load_checkpoint(str(out / "ckpt-1"))
  for name, dtype in reader.get_variable_to_dtype_map().items():
    if dtype.is_floating:
      assert np.all(np.isfinite(reader.get_tensor(name))), name


def test_every_input_check_comes_before_the_model_is_built(work, tmp_path, monkeypatch):
  """run_pretraining (the library call the script makes) on each kind of bad input: the
  one-line error comes before ``PretrainingTask.build_model`` (which fails this test if
  called) and the output folder is not made. In-process: no script start-up to pay."""
  from bert_tf.modeling import BertConfig  # pylint: disable=import-outside-toplevel
  from bert_tf.training import pretraining  # pylint: disable=import-outside-toplevel
  work_dir, offsets = work
  built = []
  monkeypatch.setattr(pretraining.PretrainingTask, "build_model",
                      lambda self, dtype=None: built.append(1) or pytest.fail("model built"))

  def refused(files="data-*.tfrecord", vocab=100, **kwargs):
    out = tmp_path / "out"
    config = BertConfig.from_dict(json.loads(CONFIG.format(vocab=vocab)))
    with pytest.raises(BertTfError) as error:
      pretraining.run_pretraining(
          config, f"{work_dir}/{files}", str(out), tf.distribute.get_strategy(),
          max_seq_length=SEQ, max_predictions_per_seq=PRED, train_batch_size=8,
          num_train_steps=10, num_warmup_steps=0, **kwargs)
    assert not built and not out.exists()
    return str(error.value)

  assert refused("nothing-*.tfrecord") == (
      f"no input files match '{work_dir}/nothing-*.tfrecord' (--input_file)")
  # Ids past the config's vocab (sampled).
  assert refused(vocab=50).startswith(f"{work_dir}/data-0.tfrecord: record ")
  # A damaged record, with --check_input_files (the record the checker names, by offset).
  reason = _damage(work_dir / "data-1.tfrecord", offsets[1], "flipped", 250)
  assert refused(check_input_files=True) == (
      f"{work_dir}/data-1.tfrecord: damaged TFRecord at byte {offsets[1][250]} (record 250): "
      f"{reason}; {record_check.ADVICE}")
  # Records of another shape beside them.
  _write(work_dir / "data-1.tfrecord", seq=32, pred=5, seed=2, count=3)
  assert refused().startswith("--input_file mixes records of two shapes: ")
