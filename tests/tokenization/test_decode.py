"""``FullTokenizer.decode``: hand-worked cases, the round trip through Google's original
tokenizer (bert-tensorflow 1.0.4) on real text with the real vocabs, and Hugging Face's
``BertTokenizer.decode`` on the real bert-base-uncased vocab (when transformers is installed)."""

import importlib.util

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.errors import BertTfError
from tests.tokenization.conftest import HARD_LINES, SETTING_IDS, SETTINGS, vocab_path

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "de", "##ja",
         "-", "vu", "!", "##", "#", "hello", ",", "world", ".", "?", "isn", "'", "t", "i", "m",
         "s", "ve", "re", "n"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  path = tmp_path_factory.mktemp("decode") / "vocab.txt"
  path.write_text("\n".join(VOCAB) + "\n")
  return tokenization.FullTokenizer(str(path))


@pytest.mark.parametrize("tokens,expected,skipped", [
    (["un", "##aff", "##able"], "unaffable", "unaffable"),
    (["[CLS]", "de", "##ja", "-", "vu", "!", "[SEP]"], "[CLS] deja - vu ! [SEP]", "deja - vu !"),
    (["[CLS]", "un", "[MASK]", "##able", "[SEP]", "[PAD]", "[PAD]"],
     "[CLS] un [MASK]able [SEP] [PAD] [PAD]", "unable"),
    (["##aff", "vu"], "aff vu", "aff vu"),  # A leading continuation has nothing to join.
    (["#", "##", "#"], "# ## #", "# ## #"),  # "##" alone is a token, not a continuation mark.
    (["[UNK]", "vu"], "[UNK] vu", "vu"),
    ([], "", ""),
])
def test_hand_worked(tiny, tokens, expected, skipped):
  """The pieces joined, without the cleanup (none of these has a space it removes but "!")."""
  ids = tiny.convert_tokens_to_ids(tokens)
  assert tiny.decode(ids, clean_up_tokenization_spaces=False) == expected
  assert tiny.decode(np.array(ids, np.int32), skip_special_tokens=True,
                     clean_up_tokenization_spaces=False) == skipped
  assert tiny.decode(ids) == expected.replace(" !", "!")


# Hugging Face's clean_up_tokenization rules, worked by hand on the joined pieces.
@pytest.mark.parametrize("tokens,cleaned", [
    (["hello", ",", "world", "!"], "hello, world!"),
    (["isn", "'", "t", "?"], "isn't?"),
    (["i", "'", "m", "."], "i'm."),
    (["i", "'", "ve", ",", "i", "'", "re", ",", "i", "'", "s"], "i've, i're, i's"),
    (["'", "s"], "' s"),  # No space before the first piece: " ' " does not match.
    (["hello", "'", "world"], "hello'world"),  # " ' " -> "'", as Hugging Face (quotes too).
    (["[CLS]", "hello", ".", "[SEP]", "world", "?", "[SEP]"], "[CLS] hello. [SEP] world? [SEP]"),
    (["de", "##ja", "-", "vu", "!"], "deja - vu!"),  # Only the listed marks lose their space.
])
def test_clean_up_hand_worked(tiny, tokens, cleaned):
  ids = tiny.convert_tokens_to_ids(tokens)
  assert tiny.decode(ids) == cleaned
  assert tiny.decode(ids, clean_up_tokenization_spaces=True) == cleaned
  assert tiny.decode(ids, clean_up_tokenization_spaces=False) == " ".join(tokens).replace(
      " ##", "")


def test_tokenizer_wide_cleanup_setting(tiny, tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(VOCAB) + "\n")
  plain = tokenization.FullTokenizer(str(path), clean_up_tokenization_spaces=False)
  ids = plain.convert_tokens_to_ids(["hello", ",", "world", "!"])
  assert plain.decode(ids) == "hello , world !"
  assert plain.decode(ids, clean_up_tokenization_spaces=True) == "hello, world!"
  assert tiny.clean_up_tokenization_spaces and not plain.clean_up_tokenization_spaces


@pytest.mark.parametrize("one", [15, np.int64(15), np.int32(15), np.array(15),
                                 tf.constant(15), [15], np.array([15]), tf.constant([15])],
                         ids=["int", "np.int64", "np.int32", "np-0d", "tf-0d", "list",
                              "np-1d", "tf-1d"])
def test_one_id_of_any_kind(tiny, one):
  assert tiny.decode(one) == "hello"


def test_vocab_size(tiny, uncased_vocab):
  assert tiny.vocab_size == len(VOCAB)
  assert tokenization.FullTokenizer(str(uncased_vocab)).vocab_size == 30522


def test_unknown_id_is_a_one_line_error(tiny):
  with pytest.raises(BertTfError, match=rf"^decode: id {len(VOCAB)} at position 1 is not in "
                     rf"the vocab \({len(VOCAB)} tokens\)$"):
    tiny.decode([5, len(VOCAB)])
  with pytest.raises(BertTfError, match=r"^decode: expected one id or a 1-D sequence of ids, "
                     r"got shape \(1, 2\) \(decode each row\)$"):
    tiny.decode([[5, 6]])


@pytest.mark.parametrize("name,lower", SETTINGS, ids=SETTING_IDS)
def test_round_trip_with_google(google_tokenization, uncased_vocab, lines, name, lower):
  """decode(ids of Google's tokens) is Google's basic words joined by spaces, and tokenizes
  back to the same ids, for every line without [UNK]."""
  vocab = vocab_path(name, uncased_vocab)
  original = google_tokenization.FullTokenizer(vocab, do_lower_case=lower)
  ours = tokenization.FullTokenizer(vocab, do_lower_case=lower)
  checked = 0
  for line in lines[::7] + HARD_LINES:
    tokens = original.tokenize(line)
    if "[UNK]" in tokens:
      continue
    ids = original.convert_tokens_to_ids(tokens)
    text = ours.decode(ids, clean_up_tokenization_spaces=False)
    assert text == " ".join(original.basic_tokenizer.tokenize(line)), line
    assert original.convert_tokens_to_ids(original.tokenize(text)) == ids, line
    checked += 1
  assert checked > 1000


def _hf_sequences(tokenizer, lines):
  """Id rows as the models see them: ``[CLS] a [SEP]``, pairs, padding, a [MASK] and [UNK]."""
  rows = []
  for i, line in enumerate(lines):
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))[:60]
    row = [101] + ids + [102]
    if i % 3 == 1 and ids:
      row[1 + len(ids) // 2] = 103  # [MASK]
    if i % 5 == 2:
      row += ids[::-1][:10] + [102] + [0] * 4  # A pair, then padding.
    if i % 11 == 4:
      row.insert(2, 100)  # [UNK]
    rows.append(row)
  return rows


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers is not installed (test-only dependency: pip install "
                    "-e '.[test]')")
def test_same_as_hugging_face_decode(uncased_vocab, lines):
  """Many real sentences (and hard lines: quotes, contractions, every kind of punctuation):
  decode equals Hugging Face's BertTokenizer.decode on the real bert-base-uncased vocab, with
  and without the cleanup and the special tokens."""
  from tokenizers import decoders  # pylint: disable=import-outside-toplevel
  from transformers import BertTokenizer  # pylint: disable=import-outside-toplevel
  hf = BertTokenizer(str(uncased_vocab), do_lower_case=True)
  # Hugging Face's decode with clean_up_tokenization_spaces=False still glues " . , ! ?" in its
  # WordPiece decoder; with the decoder's cleanup off it is the plain join.
  hf_plain = BertTokenizer(str(uncased_vocab), do_lower_case=True)
  hf_plain.backend_tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)
  ours = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  quirks = ["Hello, world! Isn't it? I'm here; you're there, we've 'quoted' it's done.",
            "He said: \"don't\" -- and I'd say 'no' . . . ?! (yes) [a] {b} 3.5 , 4 ' s",
            "O'Neil's rock 'n' roll ' ' '' `` n't 'm 've 're 's 'S ; : ..."]
  rows = _hf_sequences(ours, lines[::5] + HARD_LINES + quirks)
  assert len(rows) > 2000
  cleaned = 0
  for row in rows:
    for skip in (False, True):
      expected = hf.decode(row, skip_special_tokens=skip, clean_up_tokenization_spaces=True)
      assert ours.decode(row, skip_special_tokens=skip) == expected, row
      assert ours.decode(row, skip_special_tokens=skip,
                         clean_up_tokenization_spaces=False) == hf_plain.decode(
                             row, skip_special_tokens=skip, clean_up_tokenization_spaces=False)
      cleaned += expected != hf_plain.decode(row, skip_special_tokens=skip)
  assert cleaned > 1000  # The cleanup was exercised.
  for one in (2492, np.int64(2492)):
    assert ours.decode(one) == hf.decode(int(one)) == "field"
