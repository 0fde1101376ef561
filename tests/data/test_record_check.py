"""record_check against an independent account of where the damage is: records written by
TensorFlow's own writer, their frame offsets summed from their lengths (16 framing bytes
each), one byte changed or the file cut at a known place; TensorFlow's reader must fail on
each damaged file too (so the damage is real) and read the sound ones whole."""

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import record_check
from bert_tf.errors import BertTfError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write(path, count=60, seed=0):
  """TensorFlow-written records of random lengths: (their bytes, frame offsets)."""
  rng = np.random.default_rng(seed)
  records = [rng.integers(0, 256, size=int(n), dtype=np.uint8).tobytes()
             for n in rng.integers(0, 300, size=count)]
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  offsets = np.concatenate([[0], np.cumsum([16 + len(r) for r in records])])
  assert offsets[-1] == os.path.getsize(path)
  return records, offsets


def _tf_reads(path, compression=None):
  try:
    return sum(1 for _ in tf.data.TFRecordDataset(str(path), compression_type=compression))
  except tf.errors.DataLossError:
    return None


def test_sound_file_every_record(tmp_path):
  path = tmp_path / "a.tfrecord"
  records, _ = _write(path)
  result = record_check.scan_file(str(path))
  assert result.damage is None and result.records == len(records) == _tf_reads(path)
  (tmp_path / "empty.tfrecord").write_bytes(b"")
  assert record_check.scan_file(str(tmp_path / "empty.tfrecord")).records == 0


# Where in record k's frame the changed byte is (from the frame's start, or from its end when
# negative): the length field (its lowest and highest byte), its CRC, the data (byte 4, the
# last byte), the data's CRC.
@pytest.mark.parametrize("part,at", [("length", 3), ("length", 7), ("length crc", 9),
                                     ("data", 16), ("data", -5), ("data crc", -2)])
@pytest.mark.parametrize("k", [0, 17, 59])
def test_changed_byte_is_named_at_its_record(tmp_path, part, at, k):
  path = tmp_path / "a.tfrecord"
  records, offsets = _write(path)
  if part == "data" and len(records[k]) < 5:
    pytest.skip("a record too short for the byte")
  byte = offsets[k] + at if at >= 0 else offsets[k + 1] + at
  data = bytearray(path.read_bytes())
  data[byte] ^= 0x10
  path.write_bytes(bytes(data))
  assert _tf_reads(path) is None
  damage = record_check.scan_file(str(path)).damage
  assert (damage.offset, damage.record) == (offsets[k], k), (part, damage)
  reason = {"length": "length field", "length crc": "length field", "data": "data's CRC",
            "data crc": "data's CRC"}[part]
  assert reason in damage.reason
  assert str(damage).startswith(f"{path}: damaged TFRecord at byte {offsets[k]} (record {k}): ")
  # TensorFlow's message names an offset but no file: the file is found from it.
  other = tmp_path / "b.tfrecord"
  _, other_offsets = _write(other, seed=5)
  with pytest.raises(BertTfError) as error:
    with record_check.naming_damaged_records([str(other), str(path)]):
      for _ in tf.data.TFRecordDataset(str(path)):
        pass
  assert str(error.value) == f"{damage}; {record_check.ADVICE}"
  # The other file damaged too (its record 3's length CRC): still the record TensorFlow met
  # is named, found from its message's offset (frame or data start), not the first damage a
  # scan of the files finds (the data-start offset left unused went unnoticed).
  data = bytearray(other.read_bytes())
  data[other_offsets[3] + 9] ^= 0x10
  other.write_bytes(bytes(data))
  with pytest.raises(BertTfError) as error:
    with record_check.naming_damaged_records([str(other), str(path)]):
      for _ in tf.data.TFRecordDataset(str(path)):
        pass
  assert str(error.value) == f"{damage}; {record_check.ADVICE}"


@pytest.mark.parametrize("cut", ["in header", "in data", "in crc"])
def test_file_cut_short_is_named_at_the_cut_record(tmp_path, cut):
  path = tmp_path / "a.tfrecord"
  _, offsets = _write(path)
  k = 31
  end = {"in header": offsets[k] + 5, "in data": offsets[k] + 14,
         "in crc": offsets[k + 1] - 2}[cut]
  path.write_bytes(path.read_bytes()[:end])
  # TensorFlow takes a partial header for the end of the file (its records, quietly); a
  # cut inside a record's data or CRC is its DataLossError.
  assert _tf_reads(path) == (k if cut == "in header" else None)
  damage = record_check.scan_file(str(path)).damage
  assert (damage.offset, damage.record) == (offsets[k], k)
  assert "cut short" in damage.reason
  # Cut at a record boundary, the file is a sound shorter one (as TensorFlow reads it).
  path.write_bytes(path.read_bytes()[:offsets[k]])
  assert record_check.scan_file(str(path)).records == k == _tf_reads(path)


def test_gzip_file(tmp_path):
  plain = tmp_path / "a.tfrecord"
  _, offsets = _write(plain)
  data = bytearray(plain.read_bytes())
  data[offsets[40] + 20] ^= 1
  gz = tmp_path / "a.tfrecord.gz"
  gz.write_bytes(gzip.compress(bytes(data)))
  assert _tf_reads(gz, "GZIP") is None
  damage = record_check.scan_file(str(gz)).damage
  assert (damage.offset, damage.record) == (offsets[40], 40)
  assert "decompressed byte" in str(damage)
  gz.write_bytes(gzip.compress(plain.read_bytes())[:-30])  # a broken GZIP stream
  assert "GZIP stream is damaged" in record_check.scan_file(str(gz)).damage.reason


def test_check_tool_names_file_offset_and_record(tmp_path):
  good, bad = tmp_path / "a-0.tfrecord", tmp_path / "a-1.tfrecord"
  _write(good, seed=1)
  records, offsets = _write(bad, seed=2)
  data = bytearray(bad.read_bytes())
  data[offsets[44] + 12] ^= 0xFF
  bad.write_bytes(bytes(data))
  command = [sys.executable, os.path.join(ROOT, "data_prep", "check_tfrecords.py"),
             f"--input_file={tmp_path}/a-*.tfrecord"]
  result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
  assert result.returncode == 1
  assert result.stdout.splitlines() == [f"{good}: 60 records, every CRC matches"]
  assert result.stderr.strip().splitlines() == [
      f"check_tfrecords.py: error: {bad}: damaged TFRecord at byte {offsets[44]} (record 44): "
      f"the data's CRC-32C does not match (a changed byte); {record_check.ADVICE}"]
  bad.write_bytes(bytes(data[:offsets[44]]))
  result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines()[-1] == (
      f"2 file(s), {60 + 44} records, {os.path.getsize(good) + offsets[44]} bytes: no damage")


def test_check_tool_reads_what_training_reads(tmp_path):
  """The temporary file of a data preparation killed beside its outputs is left out of a glob
  (training leaves it out; the check called it damaged); no file, or files of no record
  (training refuses them), is one line, not 'no damage'."""
  _write(tmp_path / "a-0.tfrecord", seed=1)
  cut = tmp_path / "a-1.tfrecord.tmp-99999-0123abcd"
  cut.write_bytes((tmp_path / "a-0.tfrecord").read_bytes()[:100])
  assert record_check.expand_patterns(f"{tmp_path}/a-*") == [str(tmp_path / "a-0.tfrecord")]
  assert record_check.expand_patterns(str(cut)) == [str(cut)]  # named, it is checked
  with pytest.raises(BertTfError, match="^--input_file names no file$"):
    record_check.expand_patterns(" , ")
  with pytest.raises(BertTfError) as e:
    record_check.expand_patterns(str(tmp_path))
  assert str(e.value) == (f"no input files match {str(tmp_path)!r} (--input_file): a folder; "
                          f"give its files, e.g. {str(tmp_path / '*')!r}")
  (tmp_path / "empty.tfrecord").write_bytes(b"")
  command = [sys.executable, os.path.join(ROOT, "data_prep", "check_tfrecords.py"),
             f"--input_file={tmp_path}/empty.tfrecord"]
  result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      f"check_tfrecords.py: error: no records in 1 file(s) ({tmp_path}/empty.tfrecord): "
      "nothing to train on"]


def test_check_tool_needs_no_tensorflow(tmp_path):
  _write(tmp_path / "a.tfrecord")
  code = ("import sys; sys.argv = ['check_tfrecords.py', '--input_file=" + str(tmp_path) +
          "/a.tfrecord']; import runpy\ntry:\n  runpy.run_path('data_prep/check_tfrecords.py', "
          "run_name='__main__')\nexcept SystemExit:\n  pass\nassert 'tensorflow' not in "
          "sys.modules, 'imported'\nprint('no tensorflow')")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
  assert result.stdout.splitlines()[-1] == "no tensorflow", result.stderr[-2000:]


def test_data_loss_that_names_no_record_is_not_blamed_on_the_inputs(tmp_path):
  # E.g. a damaged checkpoint read inside the same block: TensorFlow's error goes on as it is.
  path = tmp_path / "a.tfrecord"
  _write(path)
  error = tf.errors.DataLossError(None, None, "Checksum does not match: stored 1 vs. calculated")
  with pytest.raises(tf.errors.DataLossError):
    with record_check.naming_damaged_records([str(path)]):
      raise error
