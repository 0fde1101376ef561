"""bert_tf.tokenization against Google's original tokenization.py, token for token."""

import collections
import pickle

import pytest

from bert_tf import tokenization
from bert_tf.errors import BertTfError
from tests.tokenization.conftest import (HARD_LINES, SETTING_IDS, SETTINGS, code_point_lines,
                                         random_ascii_lines, random_lines, vocab_path)


@pytest.fixture(scope="module", params=SETTINGS, ids=SETTING_IDS)
def tokenizer_pair(request, google_tokenization, uncased_vocab):
  """(original, ours) FullTokenizers on one vocab and casing."""
  name, lower = request.param
  vocab = vocab_path(name, uncased_vocab)
  return (google_tokenization.FullTokenizer(vocab, do_lower_case=lower),
          tokenization.FullTokenizer(vocab, do_lower_case=lower))


def _assert_same(original, ours, texts):
  for text in texts:
    expected = original.tokenize(text)
    assert ours.tokenize(text) == expected, repr(text)
    assert ours.convert_tokens_to_ids(expected) == original.convert_tokens_to_ids(expected)


def test_vocab_is_the_original(tokenizer_pair):
  original, ours = tokenizer_pair
  assert list(ours.vocab.items()) == list(original.vocab.items())
  assert ours.inv_vocab == original.inv_vocab


def test_real_corpus(tokenizer_pair, lines):
  original, ours = tokenizer_pair
  assert len(lines) > 10000
  assert ours.tokenize_batch(lines) == [original.tokenize(line) for line in lines]


def test_hand_made_lines(tokenizer_pair):
  _assert_same(*tokenizer_pair, HARD_LINES)


def test_invalid_utf8_bytes(tokenizer_pair):
  texts = [b"", b"\xff", b"caf\xc3\xa9 \xe4\xb8", b"a\x80b \xed\xa0\x80x \xf0\x9f\x98",
           b"\xc0\xaf/\xe0\x80\xaf", "naïve 北京".encode("utf-8"), b"ok\xf4\x90\x80\x80ok"]
  _assert_same(*tokenizer_pair, texts)


def test_random_code_points(tokenizer_pair):
  _assert_same(*tokenizer_pair, random_lines(1500) + random_ascii_lines(1500))


@pytest.mark.parametrize("lower", [True, False], ids=["lower", "nolower"])
def test_every_code_point(google_tokenization, uncased_vocab, lower):
  # Each character alone, and glued to ASCII letters (WordPiece continuations, punctuation).
  # (The normalisation under test does not depend on the vocab: one vocab is enough.)
  original = google_tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=lower)
  ours = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=lower)
  for line in code_point_lines():
    assert ours.tokenize(line) == original.tokenize(line), repr(line[:20])
    glued = line.replace(" ", "a")
    assert ours.tokenize(glued) == original.tokenize(glued), repr(glued[:20])


def test_ids_round_trip(tokenizer_pair):
  _, ours = tokenizer_pair
  tokens = ours.tokenize("The quick brown fox jumped over the lazy dog's back.")
  assert ours.convert_ids_to_tokens(ours.convert_tokens_to_ids(tokens)) == tokens
  assert tokenization.convert_ids_to_tokens(
      ours.inv_vocab, tokenization.convert_tokens_to_ids(ours.vocab, tokens)) == tokens


def test_wordpiece_greedy_longest_match(google_tokenization):
  # The original's own unit-test vocab.
  vocab = {t: i for i, t in enumerate(
      ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", "##"])}
  ours = tokenization.WordpieceTokenizer(vocab)
  original = google_tokenization.WordpieceTokenizer(vocab)
  for text in ["", "unwanted running", "unwantedX running", "wa want ##ed ##", "x" * 201]:
    assert ours.tokenize(text) == original.tokenize(text), text
  assert ours.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
  assert ours.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_basic_tokenizer(google_tokenization):
  for lower in (True, False):
    ours = tokenization.BasicTokenizer(do_lower_case=lower)
    original = google_tokenization.BasicTokenizer(do_lower_case=lower)
    for text in HARD_LINES + random_lines(200, seed=1):
      assert ours.tokenize(text) == original.tokenize(text), repr(text)
  assert tokenization.BasicTokenizer().tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
      "hello", "!", "how", "are", "you", "?"]


def _later_original_vocab(path):
  """Google's later tokenization.py (GitHub master) reads a vocab so: one readline() per id,
  the line stripped, ``vocab[token] = index`` (a repeated token: its last line's index)."""
  vocab, index = collections.OrderedDict(), 0
  with open(path, "rb") as reader:
    while True:
      token = reader.readline().decode("utf-8")
      if not token:
        break
      vocab[token.strip()] = index
      index += 1
  return vocab


def test_load_vocab_edge_cases(tmp_path, google_tokenization):
  # Lines stripped, blank lines and \r\n as the original (bert-tensorflow 1.0.4).
  path = tmp_path / "vocab.txt"
  path.write_bytes(b"[PAD]\n[UNK]\r\n  a \nb\n\n\xc3\xa9\nc\x1cd\nlast")
  assert (list(tokenization.load_vocab(str(path)).items()) ==
          list(google_tokenization.load_vocab(str(path)).items()))


def test_a_repeated_token_keeps_every_id_its_line(tmp_path, google_tokenization, caplog):
  """A token on two lines (or two blank lines): ids stay line numbers, the rows of the
  model's embedding table, as Google's later tokenization.py and Hugging Face read them;
  bert-tensorflow 1.0.4 gave every later token the id of the line before its own."""
  path = tmp_path / "vocab.txt"
  path.write_bytes(b"[PAD]\n[UNK]\r\n  a \nb\n\na\n\n\xc3\xa9\nc\x1cd\nlast\n")
  vocab = tokenization.load_vocab(str(path))
  assert list(vocab.items()) == list(_later_original_vocab(path).items())
  assert vocab["last"] == 9 and google_tokenization.load_vocab(str(path))["last"] == 7
  assert tokenization.vocab_size(vocab) == 10
  assert vocab.repeats == [(6, 3, "a"), (7, 5, "")]
  assert "vocab.txt:6: token 'a' repeats line 3 (and 1 more line repeat a token)" in caplog.text
  tokenizer = tokenization.FullTokenizer(str(path))
  assert tokenizer.convert_tokens_to_ids(["a", "b", "last"]) == [5, 3, 9]
  assert tokenizer.convert_ids_to_tokens([2, 5, 9]) == ["a", "a", "last"]
  assert tokenizer.vocab_size == 10
  copied = vocab.copy()  # (OrderedDict.copy builds the class from the dict alone)
  assert tokenization.vocab_size(copied) == 10 and copied.lines == vocab.lines
  assert tokenization.vocab_lines({"b": 1, "a": 0}) == ["a", "b"]


def test_a_vocab_line_that_is_not_utf8_is_named(tmp_path, caplog):
  """The original dropped the bytes in silence ("caf\\xe9" became "caf", here another line's
  token); they are dropped as before (a model's folder keeps loading) and the line is named."""
  path = tmp_path / "vocab.txt"
  path.write_bytes(b"[PAD]\n[UNK]\ncaf\xe9\ncaf\n")
  assert tokenization.load_vocab(str(path)).lines == ["[PAD]", "[UNK]", "caf", "caf"]
  assert (f"{path}:3: not valid UTF-8 (byte 4 of the line): its bytes that are not UTF-8 are "
          "dropped, as the original did") in caplog.text


def test_missing_vocab_file_names_it(tmp_path):
  missing = str(tmp_path / "nope" / "vocab.txt")
  with pytest.raises(BertTfError, match="vocab file not found: .*nope/vocab.txt") as err:
    tokenization.FullTokenizer(missing)
  assert "\n" not in str(err.value)


def test_never_split(uncased_vocab, google_tokenization):
  ours = tokenization.FullTokenizer(str(uncased_vocab), never_split=["[MASK]", "[SEP]"])
  assert ours.tokenize("The [MASK] sat.[SEP]Then [mask]") == [
      "the", "[MASK]", "sat", ".", "[SEP]", "then", "[", "mask", "]"]
  assert ours.tokenize(b"a[MASK]b") == ["a", "[MASK]", "b"]
  # Without it, the original's behaviour: special tokens in raw text are split like text.
  original = google_tokenization.FullTokenizer(str(uncased_vocab))
  default = tokenization.FullTokenizer(str(uncased_vocab))
  assert default.tokenize("a [MASK] b") == original.tokenize("a [MASK] b") == [
      "a", "[", "mask", "]", "b"]
  with pytest.raises(BertTfError, match="never_split token '<mask>' is not in vocab file"):
    tokenization.FullTokenizer(str(uncased_vocab), never_split=["<mask>"])



def test_never_split_takes_the_longest_token_that_starts_there(uncased_vocab):
  """Of never_split tokens starting at one place the longest is kept, whatever their order
  (as Hugging Face's added-token Trie splits "a newton, new" into "a ", "newton", ", ",
  "new"): the first one listed won, "new" + "ton", unnoticed."""
  for never_split in (["new", "newton"], ["newton", "new"]):
    ours = tokenization.FullTokenizer(str(uncased_vocab), never_split=never_split)
    assert ours.tokenize("a newton, new") == ["a", "newton", ",", "new"], never_split

@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("checkpoint", [
    "", "/x/model.ckpt", "gs://b/uncased_L-12_H-768_A-12/bert_model.ckpt",
    "uncased_L-24_H-1024_A-16/bert_model.ckpt", "/m/multilingual_L-12_H-768_A-12/bert_model.ckpt",
    "chinese_L-12_H-768_A-12/bert_model.ckpt", "/m/cased_L-12_H-768_A-12/bert_model.ckpt-100",
    "cased_L-24_H-1024_A-16/bert_model.ckpt", "multi_cased_L-12_H-768_A-12/bert_model.ckpt",
    "/m/my_uncased_model/bert_model.ckpt"])
def test_validate_case_matches_checkpoint(google_tokenization, lower, checkpoint):
  try:
    google_tokenization.validate_case_matches_checkpoint(lower, checkpoint)
    original_raises = False
  except ValueError:
    original_raises = True
  if original_raises:
    with pytest.raises(BertTfError, match=f"--do_lower_case={lower} does not match") as err:
      tokenization.validate_case_matches_checkpoint(lower, checkpoint)
    assert "\n" not in str(err.value)
  else:
    tokenization.validate_case_matches_checkpoint(lower, checkpoint)


def test_convert_to_unicode(google_tokenization):
  for value in ["abc", b"abc", b"\xff\xfeab\xc3", "é".encode("utf-8")]:
    assert tokenization.convert_to_unicode(value) == google_tokenization.convert_to_unicode(value)
  with pytest.raises(ValueError, match="Unsupported string type"):
    tokenization.convert_to_unicode(3)


def test_pickles_for_worker_processes(tokenizer_pair):
  # create_pretraining_data sends the tokenizer to worker processes.
  original, ours = tokenizer_pair
  ours.tokenize("warm the caches: héllo 北京")
  _assert_same(original, pickle.loads(pickle.dumps(ours)), HARD_LINES)


def test_preserve_unused_tokens_as_the_originals_flag(google_tokenization, uncased_vocab):
  """The original's --preserve_unused_tokens (tokenization.preserve_token): a word that is
  exactly [unusedN] and in the vocab stays whole; with punctuation attached, another case or
  not in the vocab it is split as usual; a control character inside it is cleaned away first.
  Compared with the original under its flag, on hand-made and random texts, both casings."""
  import random  # pylint: disable=import-outside-toplevel
  from absl import flags  # pylint: disable=import-outside-toplevel
  texts = ["[unused0]", "a [unused0] b", "[unused0],", "[UNUSED0]", "x[unused1]",
           "[unused1] [unused998]", "[unused99999]", "Hello [unused5]\u4e2d[unused6] world",
           "[unu\x00sed1]", "\t[unused2]\n", "[unused3]\u2028[unused4]", "[unused\u0663]",
           "\u00c9COLE [unused7] D\u00e9j\u00e0"]
  rng = random.Random(0)
  parts = list("ab [\u4e2d\x00\t\u00a0\u00c9,.!") + ["[unused1]", "[unused12]", " [unused0] "]
  texts += ["".join(rng.choice(parts) for _ in range(rng.randint(0, 16))) for _ in range(400)]
  for lower in (True, False):
    ours = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=lower,
                                      preserve_unused_tokens=True)
    flags.FLAGS.preserve_unused_tokens = True
    try:
      original = google_tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=lower)
      expected = [original.tokenize(t) for t in texts]
    finally:
      flags.FLAGS.preserve_unused_tokens = False
    assert [ours.tokenize(t) for t in texts] == expected
    assert expected[1] == ["a", "[unused0]", "b"] and "[unused0]" not in expected[2]
