"""create_pretraining_data.py --runner=DirectRunner (Apache Beam) against sharded mode.

Sharded mode (``--num_workers``) is checked against Google's original per shard in
test_create_pretraining_data.py; here the Beam pipeline, run by Beam's DirectRunner in
multi-process mode (2 worker processes), must write the same output files, byte for byte,
plain and GZIP, and report the same counts (its summary comes from Beam metrics).
"""

import os
import re
import subprocess
import sys

import pytest

from bert_tf import tokenization
from bert_tf.data import pretraining
from tests.conftest import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "data_prep", "create_pretraining_data.py")
SOTU = str(FIXTURES / "pretraining" / "sotu_sample.txt")
# 3 shards of the SOTU sample (68 KB), 2 of pydoc text.
SHARD_MB = 0.02


def _script(*args, hide_beam=False):
  """Runs the script; with ``hide_beam``, as if apache-beam were not installed."""
  prelude = "import runpy, sys\n"
  if hide_beam:
    prelude += "sys.modules['apache_beam'] = None\n"
  prelude += f"sys.argv = [{SCRIPT!r}] + sys.argv[1:]\nrunpy.run_path({SCRIPT!r}, run_name='__main__')\n"
  return subprocess.run([sys.executable, "-c", prelude, *args], capture_output=True, text=True,
                        cwd=ROOT, timeout=600,
                        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                             "PYTHONPATH": os.pathsep.join(
                                 [ROOT] + os.environ.get("PYTHONPATH", "").split(os.pathsep))})


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  from pydoc_data import topics
  d = tmp_path_factory.mktemp("beam_corpus")
  text = "".join(" ".join(topics.topics[name].split()[:400]) + "\nSecond line.\n\n"
                 for name in sorted(topics.topics)[:20])
  (d / "pydoc.txt").write_text(text, encoding="utf-8")
  return [SOTU, str(d / "pydoc.txt")]


def _flags(inputs, vocab, outputs):
  return [f"--input_file={','.join(inputs)}", f"--output_file={','.join(outputs)}",
          f"--vocab_file={vocab}", "--max_seq_length=64", "--max_predictions_per_seq=10",
          "--dupe_factor=2", "--random_seed=7", f"--shard_size_mb={SHARD_MB}"]


@pytest.mark.parametrize("gzip", [False, True])
def test_direct_runner_writes_the_bytes_of_sharded_mode(inputs, uncased_vocab, tmp_path, gzip):
  pytest.importorskip("apache_beam", reason="pip install 'bert_tf[beam]' (CI installs it)")
  sharded_dir, beam_dir = tmp_path / "sharded", tmp_path / "beam"
  sharded_dir.mkdir()
  beam_dir.mkdir()
  names = [f"{n}.tfrecord{'.gz' if gzip else ''}" for n in "abc"]
  options = pretraining.InstanceOptions(max_seq_length=64, max_predictions_per_seq=10,
                                        dupe_factor=2, random_seed=7)
  expected = pretraining.create_pretraining_data(
      inputs, [str(sharded_dir / n) for n in names],
      tokenization.FullTokenizer(str(uncased_vocab), True), options, num_workers=2,
      shard_size_mb=SHARD_MB, gzip=gzip)
  assert expected.shards == 5 and expected.instances > 300
  result = _script(*_flags(inputs, uncased_vocab, [str(beam_dir / n) for n in names]),
                   "--runner=DirectRunner", "--num_workers=2", f"--gzip={gzip}")
  assert result.returncode == 0, result.stderr[-3000:]
  # Only the outputs are left (no spill or temporary files of Beam's).
  assert sorted(os.listdir(beam_dir)) == names
  for name in names:
    ours = (beam_dir / name).read_bytes()
    assert ours == (sharded_dir / name).read_bytes(), name
    assert ours[:2] == b"\x1f\x8b" if gzip else ours[:2] != b"\x1f\x8b"
  # The summary from Beam's metrics counts what sharded mode's workers counted.
  logged = [l.split("] ", 1)[1] for l in result.stderr.splitlines()
            if "create_pretraining_data.py:" in l and "] " in l]
  assert logged[:2] == expected.lines_of_text()[:2], logged
  assert re.fullmatch(r"time [\d.]+ s \(\d+ instances/s\), peak memory \d+ MB "
                      r"\(largest worker \d+ MB\)", logged[2])
  # Quiet by default: only the script's own lines, none of Beam's (~50 lines of its workers'
  # logging set-up, relayed warnings, missing optional GCP libraries).
  assert len(logged) == len(result.stderr.splitlines()), result.stderr[-3000:]


def test_a_workers_error_is_one_line_and_leaves_no_output(inputs, uncased_vocab, tmp_path):
  pytest.importorskip("apache_beam", reason="pip install 'bert_tf[beam]' (CI installs it)")
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"Fine line.\n\nInvalid \xff byte.\n")
  out = tmp_path / "out"
  out.mkdir()
  result = _script(*_flags([inputs[1], str(bad)], uncased_vocab, [str(out / "o.tfrecord")]),
                   "--runner=DirectRunner")
  assert result.returncode == 1
  # One line: Beam's own log of the worker's exception (ERROR, with its traceback) is dropped
  # for a user's mistake, and so is Beam's "[while running 'MakeShard']".
  assert result.stderr == (f"create_pretraining_data.py: error: {bad}:3: invalid UTF-8 at byte "
                           "9 of the line (fix the file or pass --skip_invalid_utf8)\n")
  assert not os.listdir(out)


@pytest.mark.parametrize("args,hide_beam,message", [
    (["--runner=DirectRunner"], True,
     r"--runner=DirectRunner needs apache-beam, which is not installed \(.*\): "
     r"pip install 'bert_tf\[beam\]'"),
    (["--", "--project=p"], False,
     r"unexpected arguments '--project=p' \(Beam's options, after '--', need --runner\)"),
    # Was Beam's 29-line ValueError traceback ("Pipeline has validations errors").
    (["--runner=DataflowRunner", "--", "--project=p"], False,
     r"--runner: Missing GCS path option: temp_location; .*Missing required option: region "
     r"\(Beam's options go after '--', e\.g\. -- --project=P --region=R "
     r"--temp_location=gs://bucket/tmp\)"),
])
def test_flag_errors_are_one_line(inputs, uncased_vocab, tmp_path, args, hide_beam, message):
  result = _script(*_flags(inputs, uncased_vocab, [str(tmp_path / "o.tfrecord")]), *args,
                   hide_beam=hide_beam)
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert re.fullmatch(r"create_pretraining_data.py: error: " + message, lines[-1]), lines[-1]
  assert not os.listdir(tmp_path)


def test_no_text_is_an_error_and_writes_no_file(uncased_vocab, tmp_path):
  pytest.importorskip("apache_beam", reason="pip install 'bert_tf[beam]' (CI installs it)")
  blank = tmp_path / "blank.txt"
  blank.write_text("\n  \n\n", encoding="utf-8")
  out = tmp_path / "out"
  out.mkdir()
  result = _script(*_flags([str(blank)], uncased_vocab, [str(out / "o.tfrecord")]),
                   "--runner=DirectRunner")
  assert result.returncode == 1
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert lines[-1] == ("create_pretraining_data.py: error: --input_file: no text in 1 input "
                       "files (expected one sentence per line, blank lines between documents)")
  assert not os.listdir(out)
