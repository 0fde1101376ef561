"""create_pretraining_data.py: bad output/input paths fail in one line, before anything is written."""

import fnmatch
import hashlib
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOTU = str(FIXTURES / "pretraining" / "sotu_sample.txt")
PROG = "create_pretraining_data.py"


def _script(*args):
  return subprocess.run(
      [sys.executable, os.path.join(ROOT, "data_prep", PROG), *args],
      capture_output=True, text=True, cwd=ROOT, timeout=600,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def _digest(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _tree(root):
  return sorted(os.path.relpath(os.path.join(d, f), root)
                for d, _, files in os.walk(root) for f in files)


def _run(tmp_path, vocab, outputs, inputs=SOTU, *extra):
  return _script(f"--input_file={inputs}", f"--output_file={','.join(outputs)}",
                 f"--vocab_file={vocab}", "--dupe_factor=1", "--max_seq_length=32",
                 "--max_predictions_per_seq=5", *extra)


def _assert_one_line_error(result, message):
  assert result.returncode == 1, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == f"{PROG}: error: {message}"


@pytest.fixture
def vocab(tmp_path, uncased_vocab):
  return str(uncased_vocab)


def test_the_same_output_twice_is_an_error(tmp_path, vocab):
  a = str(tmp_path / "a.tfrecord")
  alias = str(tmp_path / "sub" / ".." / "a.tfrecord")
  os.makedirs(tmp_path / "sub")
  result = _run(tmp_path, vocab, [a, alias])
  _assert_one_line_error(result, f"--output_file: {alias!r} is given twice (as {a!r} too)")
  assert _tree(tmp_path) == []


def test_gzip_and_the_output_names_agree(tmp_path, vocab):
  """--gzip wrote GZIP into a file named .tfrecord (or a .gz name got plain records): the
  readers take a file for GZIP by its .gz name, so run_pretraining and check_tfrecords.py
  then called the valid file damaged. The mismatch is refused before anything is written;
  matching names are written as before (a GZIP stream under .gz)."""
  plain, zipped = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord.gz")
  _assert_one_line_error(_run(tmp_path, vocab, [zipped, plain], SOTU, "--gzip"),
                         f"--output_file {plain!r}: --gzip outputs are named *.gz (the "
                         "readers take a file for GZIP by its name)")
  _assert_one_line_error(_run(tmp_path, vocab, [plain, zipped]),
                         f"--output_file {zipped!r} is named .gz but --gzip is off: pass "
                         "--gzip, or drop the .gz")
  assert _tree(tmp_path) == []
  assert _run(tmp_path, vocab, [zipped], SOTU, "--gzip").returncode == 0
  with open(zipped, "rb") as f:
    assert f.read(2) == b"\x1f\x8b"


def test_an_output_equal_to_an_input_or_the_vocab_is_an_error(tmp_path, vocab):
  corpus = tmp_path / "corpus.txt"
  corpus.write_bytes(open(SOTU, "rb").read())
  before = _digest(corpus), _digest(vocab)
  result = _run(tmp_path, vocab, [str(tmp_path / "ok.tfrecord"), str(corpus)], str(corpus))
  _assert_one_line_error(
      result, f"--output_file: {str(corpus)!r} would overwrite --input_file {str(corpus)!r}")
  result = _run(tmp_path, vocab, [vocab], str(corpus))
  _assert_one_line_error(result, f"--output_file: {vocab!r} would overwrite --vocab_file {vocab!r}")
  assert (_digest(corpus), _digest(vocab)) == before
  assert _tree(tmp_path) == ["corpus.txt"]


def test_an_earlier_runs_numbered_shards_beside_the_outputs_are_named(tmp_path, vocab):
  """An earlier run wrote shards 0-4, this one writes 0-1: shards 2-4 stay (they are the
  user's), but a glob of the outputs would read them with the new records: the run says so,
  naming them and the glob, at the start and the end. Other names are not taken for shards."""
  for i in range(5):
    (tmp_path / f"train-{i}.tfrecord").write_bytes(b"old")
  for name in ("train-x.tfrecord", "train-2.tfrecord.gz", "notes-3.txt"):
    (tmp_path / name).write_bytes(b"mine")
  outputs = [str(tmp_path / "train-0.tfrecord"), str(tmp_path / "train-1.tfrecord")]
  result = _run(tmp_path, vocab, outputs)
  assert result.returncode == 0, result.stderr[-2000:]
  stale = [str(tmp_path / f"train-{i}.tfrecord") for i in (2, 3, 4)]
  glob = str(tmp_path / "train-*.tfrecord")
  warning = (f"{', '.join(stale)}: numbered as --output_file's files but not written by this "
             f"run (an earlier run's?); a glob such as {glob!r} reads them with this run's "
             "records: remove them, or write to a folder of their own")
  assert [line.split("] ", 1)[1] for line in result.stderr.splitlines()
          if line.endswith("folder of their own")] == [warning, warning]
  assert all((tmp_path / f"train-{i}.tfrecord").read_bytes() == b"old" for i in (2, 3, 4))
  again = _run(tmp_path / "alone", vocab, [str(tmp_path / "alone" / "train-0.tfrecord")])
  assert again.returncode == 0 and "folder of their own" not in again.stderr


@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_output_that_is_a_directory_fails_before_anything_is_written(tmp_path, vocab, workers):
  os.makedirs(tmp_path / "d")
  outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "d")]
  result = _run(tmp_path, vocab, outputs, SOTU, f"--num_workers={workers}")
  _assert_one_line_error(result, f"--output_file: {outputs[1]!r} is a directory")
  assert _tree(tmp_path) == [] and os.listdir(tmp_path) == ["d"]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_missing_output_folder_is_made_in_both_modes(tmp_path, vocab, workers):
  out = str(tmp_path / "new" / "deeper" / "a.tfrecord")
  result = _run(tmp_path, vocab, [out], SOTU, f"--num_workers={workers}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert _tree(tmp_path) == ["new/deeper/a.tfrecord"]


def test_an_output_folder_that_cannot_be_made_is_an_error(tmp_path, vocab):
  # A file where the folder should be: fails for root too (unlike a chmod'ed folder).
  (tmp_path / "plain").write_text("user data\n")
  out = str(tmp_path / "plain" / "a.tfrecord")
  result = _run(tmp_path, vocab, [out])
  _assert_one_line_error(result, f"--output_file: cannot make the folder of {out!r}: "
                                 "File exists")
  assert _tree(tmp_path) == ["plain"]
  assert (tmp_path / "plain").read_text() == "user data\n"


def test_a_directory_as_input_is_an_error(tmp_path, vocab):
  os.makedirs(tmp_path / "corpus")
  result = _run(tmp_path, vocab, [str(tmp_path / "a.tfrecord")], str(tmp_path / "corpus"))
  _assert_one_line_error(result, f"--input_file: {str(tmp_path / 'corpus')!r} is a directory, "
                                 "not a file")
  assert _tree(tmp_path) == []


def test_leftovers_of_a_killed_run_are_removed_and_user_files_kept(tmp_path, vocab):
  out = tmp_path / "a.tfrecord"
  (tmp_path / "a.tfrecord.tmp-1234-0123abcd").write_bytes(b"partial")
  os.makedirs(tmp_path / ".bert_tf-shards-ab_12xyz" / "x")
  (tmp_path / ".bert_tf-shards-ab_12xyz" / "x" / "s").write_bytes(b"spill")
  os.makedirs(tmp_path / ".bert_tf-shards-0123456789ab")  # --runner's spill directory
  (tmp_path / ".bert_tf-shards-0123456789ab" / "shard-0").write_bytes(b"spill")
  user = {"a.tfrecord.tmp-notes.txt": b"mine", "b.tfrecord.tmp-1234-0123abcd": b"other output",
          ".bert_tf-shards-mine.txt": b"mine too"}
  for name, data in user.items():
    (tmp_path / name).write_bytes(data)
  expected_dir = tmp_path / "clean"
  os.makedirs(expected_dir)
  clean = _run(tmp_path, vocab, [str(expected_dir / "a.tfrecord")], SOTU, "--num_workers=2")
  assert clean.returncode == 0, clean.stderr[-2000:]
  result = _run(tmp_path, vocab, [str(out)], SOTU, "--num_workers=2")
  assert result.returncode == 0, result.stderr[-2000:]
  assert sorted(os.listdir(tmp_path)) == sorted([*user, "a.tfrecord", "clean"])
  assert {n: (tmp_path / n).read_bytes() for n in user} == user
  assert _digest(out) == _digest(expected_dir / "a.tfrecord")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, vocab, workers):
  out = str(tmp_path / "a.tfrecord")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "BERT_TF_FAULT": "enospc:1000"}
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, "data_prep", PROG), f"--input_file={SOTU}",
       f"--output_file={out}", f"--vocab_file={vocab}", "--dupe_factor=1",
       "--max_seq_length=32", "--max_predictions_per_seq=5", f"--num_workers={workers}"],
      capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
  assert result.returncode == 1, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  last = result.stderr.strip().splitlines()[-1]
  # The first file to fill the disk (named though write() names none): the output (its
  # temporary file), or (sharded) a worker's spill file.
  failed = (re.escape(out) if workers == "0" else
            re.escape(str(tmp_path)) + r"/\.bert_tf-shards-[a-z0-9_]{8}/shard-\d+-\d+\.records")
  assert re.fullmatch(f"{PROG}: error: {failed}: No space left on device", last), last
  assert os.listdir(tmp_path) == []


def test_earlier_shards_are_those_of_the_outputs_numbered_series(tmp_path):
  """A single output is no series (phase 1's wiki_seq128 beside phase 2's wiki_seq512 is not
  "an earlier run's"); a series numbered in its first number of two (part-00000-of-00002)
  finds an earlier run's part-00003-of-00004, with a glob that reads the outputs too."""
  from bert_tf.data import output_checks  # pylint: disable=import-outside-toplevel
  for name in ("wiki_seq512.tfrecord", "part-00003-of-00004", "part-00000-of-00002"):
    (tmp_path / name).write_bytes(b"old")
  assert output_checks.earlier_shards([str(tmp_path / "wiki_seq128.tfrecord")]) == ([], None)
  outputs = [str(tmp_path / f"part-0000{i}-of-00002") for i in (0, 1)]
  found, glob = output_checks.earlier_shards(outputs)
  assert found == [str(tmp_path / "part-00003-of-00004")]
  assert glob == str(tmp_path / "part-*-of-*")
  assert all(fnmatch.fnmatch(path, glob) for path in outputs)


def test_leftovers_are_spill_folders_of_the_names_sharded_mode_makes(tmp_path):
  """The spill folders a killed run leaves are removed as tempfile names them
  (``tempfile.mkdtemp``: the prefix and 8 random characters) and as --runner names them (12
  hex digits); a user's folder of another name under the same prefix stays (a loosened
  pattern removed a user's ``.bert_tf-shards-backup`` folder unnoticed)."""
  import tempfile  # pylint: disable=import-outside-toplevel
  import uuid  # pylint: disable=import-outside-toplevel
  from bert_tf.data import output_checks  # pylint: disable=import-outside-toplevel
  spills = [tempfile.mkdtemp(prefix=".bert_tf-shards-", dir=tmp_path) for _ in range(3)]
  spills.append(str(tmp_path / f".bert_tf-shards-{uuid.uuid4().hex[:12]}"))
  os.mkdir(spills[-1])
  users = [".bert_tf-shards-backup", ".bert_tf-shards-my_old_shards", ".bert_tf-shards-x",
           ".bert_tf-shards-0123456789abcdef", ".bert_tf-shards-0123456789AB"]
  for name in users:
    os.mkdir(tmp_path / name)
  removed = output_checks.remove_leftovers([str(tmp_path / "train.tfrecord")])
  assert removed == sorted(spills)
  assert sorted(os.listdir(tmp_path)) == sorted(users)
