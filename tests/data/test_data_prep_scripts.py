"""data_prep/sample_corpus.py and data_prep/build_vocab.py as a user runs them."""

import os
import subprocess
import sys

from tests.reference.google_bert import google

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(script, *args):
  return subprocess.run([sys.executable, os.path.join(ROOT, "data_prep", script), *args],
                        capture_output=True, text=True, cwd=ROOT, timeout=600,
                        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def test_corpus_then_vocab_that_googles_tokenizer_reads(tmp_path):
  corpus = tmp_path / "corpus.txt"
  result = _run("sample_corpus.py", f"--output_file={corpus}")
  assert result.returncode == 0, result.stderr[-2000:]
  documents = corpus.read_text().strip().split("\n\n")
  assert len(documents) > 50
  assert all(len(d.splitlines()) >= 2 for d in documents)
  assert "***" not in corpus.read_text()
  vocab = tmp_path / "vocab.txt"
  result = _run("build_vocab.py", f"--input_file={corpus}", f"--vocab_file={vocab}",
                "--vocab_size=1000")
  assert result.returncode == 0, result.stderr[-2000:]
  tokens = vocab.read_text().splitlines()
  assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(tokens) <= 1000
  tokenizer = google("tokenization").FullTokenizer(str(vocab), do_lower_case=True)
  pieces = tokenizer.tokenize(documents[0].splitlines()[0])
  assert pieces and "[UNK]" not in pieces


def test_a_vocab_smaller_than_asked_says_why(tmp_path):
  """Three words yield fewer tokens than --vocab_size asks (5 reserved, 7 characters, a few
  merges): the line says so and why (it said only how many were written)."""
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("low lower lowest\n")
  vocab = tmp_path / "vocab.txt"
  result = _run("build_vocab.py", f"--input_file={corpus}", f"--vocab_file={vocab}",
                "--vocab_size=1000")
  assert result.returncode == 0, result.stderr[-2000:]
  tokens = vocab.read_text().splitlines()
  assert result.stdout == (f"wrote {len(tokens)} tokens to {vocab} (fewer than "
                           "--vocab_size=1000: no pair of pieces left occurs "
                           "--min_pair_count=2 times; a larger corpus makes more)\n")
  assert len(tokens) < 20


def test_missing_input_is_one_line_error(tmp_path):
  result = _run("build_vocab.py", f"--input_file={tmp_path}/none.txt",
                f"--vocab_file={tmp_path}/v.txt")
  assert result.returncode == 1 and "Traceback" not in result.stderr
  assert "input file not found" in result.stderr.strip().splitlines()[-1]


def test_a_sample_with_no_document_left_is_one_line(tmp_path):
  """--min_sentence_chars longer than every sentence wrote an empty corpus with exit 0 (and
  create_pretraining_data failed later on it)."""
  corpus = tmp_path / "corpus.txt"
  result = _run("sample_corpus.py", f"--output_file={corpus}", "--min_sentence_chars=100000")
  assert result.returncode == 1 and "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      "sample_corpus.py: error: --min_sentence_chars=100000: no document keeps two sentences "
      "that long; nothing written")
  assert not os.listdir(tmp_path)
