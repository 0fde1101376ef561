"""build_vocab.py on an input with no words is an error, and writes nothing (issue 17).

Before: an empty corpus gave a vocab of the 5 special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]),
which tokenizes every text to [UNK], and exit status 0.
"""

import pytest

from bert_tf import tokenization, vocab
from bert_tf.errors import BertTfError
from tests.faults.support_export import digests, error_line, run_script


def test_build_vocab_script_on_an_empty_file(tmp_path):
  (tmp_path / "corpus.txt").write_bytes(b"")
  before = digests(tmp_path)
  result = run_script("data_prep/build_vocab.py", f"--input_file={tmp_path}/corpus.txt",
                      f"--vocab_file={tmp_path}/vocab.txt", "--vocab_size=100")
  assert error_line(result) == (
      f"build_vocab.py: error: no words in --input_file '{tmp_path}/corpus.txt' (empty or "
      "blank files): no vocab to learn, nothing written")
  assert result.stdout == ""
  assert digests(tmp_path) == before  # No vocab.txt, no temporary.


def test_build_vocab_on_blank_files(tmp_path):
  """Whitespace, control characters and U+FFFD are no words either (BasicTokenizer drops
  them), across several files and patterns."""
  (tmp_path / "a.txt").write_text("\n\n   \t\n")
  (tmp_path / "b.txt").write_text("\x00\x07 \ufffd\r\n\u200b\n")
  before = digests(tmp_path)
  with pytest.raises(BertTfError) as error:
    vocab.build_vocab([str(tmp_path / "a.txt"), str(tmp_path / "b*.txt")],
                      str(tmp_path / "vocab.txt"), vocab_size=100)
  assert str(error.value) == (
      f"no words in --input_file '{tmp_path}/a.txt,{tmp_path}/b*.txt' (empty or blank "
      "files): no vocab to learn, nothing written")
  assert digests(tmp_path) == before
  # One word is enough: then the vocab is written, and it tokenizes the word without [UNK].
  (tmp_path / "b.txt").write_text("\x00 hi\n")
  written = vocab.build_vocab([str(tmp_path / "b.txt")], str(tmp_path / "vocab.txt"),
                              vocab_size=100)
  assert written[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(written) > 5
  tokenizer = tokenization.FullTokenizer(str(tmp_path / "vocab.txt"))
  assert "".join(tokenizer.tokenize("hi")).replace("##", "") == "hi"


def test_invalid_utf8_and_a_folder_are_named(tmp_path):
  """Invalid UTF-8 was dropped without a word (create_pretraining_data stops at the file and
  line for the same input); a folder as input said "no words". Both name the file now, and
  --skip_invalid_utf8 leaves out the bad lines as create_pretraining_data's does."""
  corpus = tmp_path / "corpus.txt"
  corpus.write_bytes(b"hello world\nabc\xff\xfe zebra\ngood night\n")
  (tmp_path / "folder").mkdir()
  before = digests(tmp_path)
  with pytest.raises(BertTfError) as error:
    vocab.build_vocab([str(corpus)], str(tmp_path / "vocab.txt"), vocab_size=100)
  assert str(error.value) == (f"{corpus}:2: invalid UTF-8 at byte 4 of the line (fix the file "
                              "or pass --skip_invalid_utf8)")
  with pytest.raises(BertTfError) as error:
    vocab.build_vocab([str(tmp_path / "folder")], str(tmp_path / "vocab.txt"), vocab_size=100)
  assert str(error.value) == (f"--input_file '{tmp_path}/folder' is a folder: give its files "
                              f"(e.g. '{tmp_path}/folder/*.txt')")
  assert digests(tmp_path) == before
  written = vocab.build_vocab([str(corpus)], str(tmp_path / "vocab.txt"), vocab_size=100,
                              skip_invalid_utf8=True)
  # Every character of the other lines; none of the skipped line's own (z, b).
  assert {"h", "w", "g", "n", "##e", "##o"} <= set(written)
  assert not {"z", "##z", "b", "##b"} & set(written)


@pytest.mark.parametrize("flag,message", [
    ("--num_unused_tokens=-1", "--num_unused_tokens=-1: must be >= 0"),
    ("--min_pair_count=0", "--min_pair_count=0: must be >= 1"),
])
def test_build_vocab_flag_ranges(tmp_path, flag, message):
  (tmp_path / "corpus.txt").write_text("the cat sat\n")
  before = digests(tmp_path)
  result = run_script("data_prep/build_vocab.py", f"--input_file={tmp_path}/corpus.txt",
                      f"--vocab_file={tmp_path}/vocab.txt", "--vocab_size=100", flag)
  assert error_line(result) == f"build_vocab.py: error: {message}"
  assert digests(tmp_path) == before
