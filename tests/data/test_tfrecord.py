"""bert_tf.data.tfrecord (TFRecord framing without TensorFlow) against TensorFlow's writer and
reader, and the published CRC-32C check value; create_pretraining_data without TensorFlow."""

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import pretraining
from bert_tf.data import tfrecord

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_crc32c_check_value():
  # The standard check value of CRC-32C (Castagnoli): CRC of the ASCII digits "123456789".
  assert tfrecord.crc32c(b"123456789") == 0xE3069283
  assert tfrecord.crc32c(b"") == 0


def test_crc32c_rows_equal_bytewise():
  rng = np.random.default_rng(1)
  lengths = rng.integers(0, 70, size=200)
  data = rng.integers(0, 256, size=(200, 80), dtype=np.uint8)
  got = tfrecord.crc32c_rows(data, lengths)
  want = [tfrecord.crc32c(row[:n].tobytes()) for row, n in zip(data, lengths)]
  assert got.tolist() == want


def _records(seed, count, most):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(0, most, size=count).tolist() + [0, 1, 3, 4, 5, 8, most]
  return [rng.integers(0, 256, size=n, dtype=np.uint8).tobytes() for n in lengths]


def test_file_bytes_equal_tensorflows_writer(tmp_path):
  records = _records(0, 3000, 900)  # several batches of the writer
  with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
    for record in records:
      writer.write(record)
  ours = tfrecord.TFRecordWriter(str(tmp_path / "ours.tfrecord"))
  ours.write_all(records[:2500])
  for record in records[2500:]:
    ours.write(record)
  ours.close()
  assert (tmp_path / "ours.tfrecord").read_bytes() == (tmp_path / "tf.tfrecord").read_bytes()


def test_gzip_read_by_tensorflow(tmp_path):
  records = _records(2, 500, 300)
  path = str(tmp_path / "z.tfrecord")
  writer = tfrecord.TFRecordWriter(path, gzip_compress=True)
  writer.write_all(records)
  writer.close()
  got = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]
  assert got == records


@pytest.mark.parametrize("gzip_compress", [False, True])
def test_write_file_appends_framed_records(tmp_path, gzip_compress):
  """Records written, then a file of framed records appended (a kernel copy into a plain
  file), then more records: TensorFlow reads all of them in order."""
  records = _records(3, 700, 400)
  spill = tmp_path / "spill.records"
  spill.write_bytes(tfrecord.frame(records[100:600]))
  path = str(tmp_path / "out.tfrecord")
  writer = tfrecord.TFRecordWriter(path, gzip_compress=gzip_compress)
  writer.write_all(records[:100])
  writer.write_file(str(spill))
  if gzip_compress:  # Already compressed: appended as GZIP members, between two of ours.
    member = tmp_path / "member.gz"
    member.write_bytes(gzip.compress(tfrecord.frame(records[600:650])) +
                       gzip.compress(tfrecord.frame(records[650:660])))
    writer.write_file(str(member), compressed=True)
    writer.write_all(records[660:])
  else:
    writer.write_all(records[600:])
  writer.close()
  got = [r.numpy() for r in tf.data.TFRecordDataset(
      path, compression_type="GZIP" if gzip_compress else "")]
  assert got == records


def test_empty_gzip_file_is_gzip(tmp_path):
  path = str(tmp_path / "empty.tfrecord.gz")
  tfrecord.TFRecordWriter(path, gzip_compress=True).close()
  assert gzip.decompress(open(path, "rb").read()) == b""
  assert not list(tf.data.TFRecordDataset(path, compression_type="GZIP"))


def test_local_glob_equals_tensorflows(tmp_path):
  names = ["zeta.txt", "b10.txt", "b2.txt", "B1.txt", ".hidden.txt", "a b.txt", "é.txt"]
  for name in names:
    (tmp_path / name).write_text("x\n")
  (tmp_path / "sub").mkdir()
  (tmp_path / "sub" / "in.txt").write_text("x\n")
  for pattern in ["*", "*.txt", "b*", "*/*.txt", "[bz]*", "?2.txt", "b2.txt", "missing.txt"]:
    full = str(tmp_path / pattern)
    assert pretraining._glob(full) == tf.io.gfile.glob(full), pattern  # pylint: disable=protected-access


def test_create_pretraining_data_imports_no_tensorflow(tmp_path, uncased_vocab):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("The first sentence here.\nAnd a second one.\n\nAnother document.\n"
                    "With two sentences.\n\nA third document.\nIt ends here.\n")
  out = tmp_path / "out.tfrecord.gz"  # --gzip outputs are named .gz
  code = (
      "import runpy, sys\n"
      f"sys.argv = ['create_pretraining_data', '--input_file={corpus}', "
      f"'--output_file={out}', '--vocab_file={uncased_vocab}', '--dupe_factor=2', "
      "'--max_seq_length=32', '--max_predictions_per_seq=5', '--gzip']\n"
      "try:\n"
      "  runpy.run_path('data_prep/create_pretraining_data.py', run_name='__main__')\n"
      "except SystemExit as e:\n"
      "  assert not e.code, e.code\n"
      "print('TF' if any(m.split('.')[0] == 'tensorflow' for m in sys.modules) else 'NO TF')\n")
  result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
  assert result.stdout.strip().splitlines()[-1] == "NO TF", result.stdout + result.stderr
  records = list(tf.data.TFRecordDataset(str(out), compression_type="GZIP"))
  assert records
  example = tf.train.Example.FromString(records[0].numpy())
  assert len(example.features.feature["input_ids"].int64_list.value) == 32


if __name__ == "__main__":
  sys.exit(pytest.main([__file__]))
