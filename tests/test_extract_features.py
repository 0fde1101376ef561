"""extract_features.py end to end on the real MiniLM weights, against transformers' numbers."""

import json
import os
import sys

import numpy as np
import pytest

from bert_tf import extract
from bert_tf.errors import BertTfError
from tests import warm
from tests.conftest import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = ["The quick brown fox jumps over the lazy dog. ||| It barked back.",
         "Paris is the capital of France; Berlin is Germany's."]


def _run(*args):
  return warm.run([sys.executable, os.path.join(ROOT, "extract_features.py"), *args],
                  capture_output=True, text=True, cwd=ROOT, timeout=600)


def _common(minilm_path):
  return [f"--vocab_file={minilm_path / 'vocab.txt'}",
          f"--bert_config_file={minilm_path / 'config.json'}",
          f"--init_checkpoint={minilm_path}"]


def test_output_matches_transformers(tmp_path, minilm_path):
  reference = np.load(FIXTURES / "minilm_reference.npz")
  (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n")
  out = tmp_path / "out.jsonl"
  result = _run(f"--input_file={tmp_path / 'in.txt'}", f"--output_file={out}",
                "--layers=-1,-2", "--max_seq_length=24", "--batch_size=1",
                *_common(minilm_path))
  assert result.returncode == 0, result.stderr
  # Piped, no line per batch (an INFO line each was logged: 1,250 of them for 10k lines).
  assert "lines" not in result.stderr, result.stderr
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [r["linex_index"] for r in rows] == [0, 1]
  vocab = (minilm_path / "vocab.txt").read_text().splitlines()
  for b, row in enumerate(rows):
    n = int(reference["input_mask"][b].sum())
    tokens = [f["token"] for f in row["features"]]
    assert tokens == [vocab[i] for i in reference["input_ids"][b, :n]]
    for t, feature in enumerate(row["features"]):
      assert [layer["index"] for layer in feature["layers"]] == [-1, -2]
      for layer, hidden in zip(feature["layers"], (6, 5)):
        np.testing.assert_allclose(layer["values"], reference["hidden_states"][hidden, b, t],
                                   atol=2e-5)
        # The original writes round(float(x), 6) (mutation audit round 2: unrounded values,
        # three times the file, went unnoticed).
        assert all(v == round(v, 6) for v in layer["values"]), layer["values"][:4]
  # A pair has segment B tokens after the first [SEP]; both [SEP]s are there.
  assert [f["token"] for f in rows[0]["features"]].count("[SEP]") == 2


def test_read_examples_lines_and_bad_bytes(tmp_path):
  """As the original: a line an example (a blank one too), ``a ||| b`` a pair, ids by line;
  a byte-order mark is not text; bytes that are not UTF-8 (the original dropped them
  silently) and an empty file are one line."""
  path = tmp_path / "in.txt"
  path.write_bytes("\ufeffHello there\n\nWho ||| me\n".encode("utf-8"))
  assert extract.read_examples(str(path)) == [
      extract.InputExample(0, "Hello there"), extract.InputExample(1, ""),
      extract.InputExample(2, "Who", "me")]
  path.write_bytes(b"fine\ncaf\xe9 au lait\n")
  with pytest.raises(BertTfError) as e:
    extract.read_examples(str(path))
  assert str(e.value) == f"{path}:2: not valid UTF-8 (byte 4 of the line)"
  path.write_bytes(b"")
  with pytest.raises(BertTfError, match=r"in\.txt: empty \(--input_file has one text"):
    extract.read_examples(str(path))


@pytest.mark.parametrize("flag,needle", [
    ("--input_file=/nonexistent/in.txt", "input file not found (--input_file)"),
    ("--layers=-7", "--layers: index -7 is out of range for a model with 6 layers"),
])
def test_bad_input_is_one_line_error(tmp_path, minilm_path, flag, needle):
  (tmp_path / "in.txt").write_text("hello\n")
  args = [f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'o.jsonl'}",
          *_common(minilm_path), flag]
  result = _run(*args)
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert needle in last and "Traceback" not in result.stderr
  assert not (tmp_path / "o.jsonl").exists()


# Words of one word piece each in the uncased vocab, so a text of k of them is k pieces; the
# last text's words are several pieces each.
_WORDS = "the cat sat on a mat and then it ran far away".split()
_TEXTS = [" ".join(_WORDS[:k]) for k in range(1, 11)] + [
    "Unaffable bankers' naïveté: supercalifragilistic!"]


@pytest.mark.parametrize("max_seq_length", [3, 5, 8, 11, 16])
def test_packing_matches_the_originals_convert_examples_to_features(minilm_path,
                                                                     max_seq_length):
  """Tokens and features of every pair of lengths 1..10 (equal lengths too: the original pops
  from text_b then) and of single texts, at lengths that cut them, as the original
  extract_features.py's convert_examples_to_features makes them (mutation audit round 3: its
  truncation was untested; popping a on ties, a pair budget of S - 2, a single text cut to
  S - 3 went unnoticed), and a text_b without word pieces."""
  from bert_tf import tokenization  # pylint: disable=import-outside-toplevel
  from tests.reference.google_bert import google  # pylint: disable=import-outside-toplevel
  original = google("extract_features")
  vocab = str(minilm_path / "vocab.txt")
  # A text_b without word pieces is no text_b (the original's `if tokens_b`): a is cut to
  # S - 2, not to S - 3 as for a pair (it was, in extract_features and bert_tf.load's calls).
  pairs = [(a, b) for a in _TEXTS for b in _TEXTS + ["", "\x00 \u200b"]] + [
      (a, None) for a in _TEXTS]
  theirs = original.convert_examples_to_features(
      [original.InputExample(i, a, b) for i, (a, b) in enumerate(pairs)], max_seq_length,
      google("tokenization").FullTokenizer(vocab, do_lower_case=True))
  tokens, features = extract.convert_examples_to_features(
      [extract.InputExample(i, a, b) for i, (a, b) in enumerate(pairs)], max_seq_length,
      tokenization.FullTokenizer(vocab, do_lower_case=True))
  assert any(a == b and len(f.tokens) < 2 * len(a.split()) + 3
             for (a, b), f in zip(pairs, theirs))  # a cut pair of equal lengths
  for i, feature in enumerate(theirs):
    assert tokens[i] == feature.tokens, pairs[i]
    assert features["input_ids"][i].tolist() == feature.input_ids, pairs[i]
    assert features["input_mask"][i].tolist() == feature.input_mask, pairs[i]
    assert features["segment_ids"][i].tolist() == feature.input_type_ids, pairs[i]


def test_layer_indexes_are_those_of_the_originals_list_of_layers():
  """--layers takes exactly the indexes of the original's ``get_all_encoder_layers()[i]``, a
  list of L layers: -L..L-1; any other is one line before the model runs (mutation audit
  round 3: index L let through, an IndexError traceback at the first batch, went unnoticed)."""
  layers = [f"layer_{i}" for i in range(6)]  # the original's list, of 6 layers
  for index in range(-8, 8):
    try:
      layers[index]  # pylint: disable=pointless-statement
    except IndexError:
      with pytest.raises(BertTfError, match=rf"^--layers: index {index} is out of range for a "
                         r"model with 6 layers$"):
        extract.parse_layers(str(index), 6)
    else:
      assert extract.parse_layers(f"{index},-1", 6) == [index, -1]
