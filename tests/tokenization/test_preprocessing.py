"""bert_tf.preprocessing.BertPreprocessor against Google's tokenizer and convert_single_example;
its word-piece offsets against the original BasicTokenizer and hand-worked cases."""

import itertools
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.errors import BertTfError
from tests.reference.google_bert import google
from tests.tokenization.conftest import (HARD_LINES, SETTING_IDS, SETTINGS, code_point_lines,
                                         random_ascii_lines, random_lines, vocab_path)

MAX_SEQ_LENGTH = 24


@pytest.fixture(scope="module", params=SETTINGS, ids=SETTING_IDS)
def layer_pair(request, google_tokenization, uncased_vocab):
  """(original FullTokenizer, BertPreprocessor) on one vocab and casing."""
  name, lower = request.param
  vocab = vocab_path(name, uncased_vocab)
  return (google_tokenization.FullTokenizer(vocab, do_lower_case=lower),
          preprocessing.BertPreprocessor(vocab, do_lower_case=lower,
                                         max_seq_length=MAX_SEQ_LENGTH))


def _original_ids(tokenizer, texts):
  return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in texts]


def _assert_same_ids(original, layer, texts):
  got = layer.tokenize(tf.constant(texts)).to_list()
  for text, ids, expected in zip(texts, got, _original_ids(original, texts)):
    assert ids == expected, repr(text)


def test_real_corpus(layer_pair, lines):
  _assert_same_ids(*layer_pair, lines)


def test_hand_made_and_random_lines(layer_pair):
  _assert_same_ids(*layer_pair, HARD_LINES + random_lines(1500) + random_ascii_lines(1500))


@pytest.mark.parametrize("lower", [True, False], ids=["lower", "nolower"])
def test_every_code_point(google_tokenization, uncased_vocab, lower):
  # (The normalisation under test does not depend on the vocab: one vocab is enough.)
  original = google_tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=lower)
  layer = preprocessing.BertPreprocessor(str(uncased_vocab), do_lower_case=lower)
  lines = code_point_lines()
  _assert_same_ids(original, layer, lines + [line.replace(" ", "a") for line in lines])


def test_final_sigma(layer_pair):
  # str.lower's one context rule: Σ at the end of a word is ς; the layer implements it.
  lines = ["ΟΔΟΣ", "ΣΑΣ Σ ΑΣ.", "ΑΣ'Σ ΑΣ\u0301 ΑΣ\u00adΒ Α\u200bΣ Α\x00Σ", "ΑΣΑ ΑΣ1 ΑΣΣ 1Σ ΑΣ北",
           "ὈΔΥΣΣΕΎΣ", "ΑΣ\tΣΑ", "ΑΣ\u2028Β", "ᾼΣ ΑΣ\U0001d165"]
  _assert_same_ids(*layer_pair, lines + random_lines(300, seed=7))


def test_invalid_utf8(layer_pair):
  texts = [b"", b"\xff", b"caf\xc3\xa9 \xe4\xb8", b"a\x80b \xed\xa0\x80x \xf0\x9f\x98",
           b"\xc0\xaf/\xe0\x80\xaf", b"ok\xf4\x90\x80\x80ok", b"\xef\xbf\xbd\xef\xbb\xbfA"]
  _assert_same_ids(*layer_pair, texts)


# === Word-piece offsets ===

def _squad_contexts():
  """The distinct contexts of the SQuAD fixtures: real English, then Unicode-heavy ones."""
  from tests.squad.conftest import V1_SAMPLE, V2_HANDMADE  # pylint: disable=import-outside-toplevel
  contexts = [p["context"] for path in (V1_SAMPLE, V2_HANDMADE)
              for a in json.loads(path.read_text(encoding="utf-8"))["data"]
              for p in a["paragraphs"]]
  return list(dict.fromkeys(contexts))


def test_tokenize_with_offsets_ids_and_sources(layer_pair, lines):
  """Ids equal ``tokenize``'s and the original's; each piece's source text, tokenized alone by
  the original BasicTokenizer, is the piece (allowing for the two context effects: final
  sigma, and pieces that split one character, e.g. Hangul jamo, sharing its source)."""
  original, layer = layer_pair
  lines = HARD_LINES + random_lines(200) + _squad_contexts() + lines[::20]
  ids, begin, end = layer.tokenize_with_offsets(tf.constant(lines))
  assert ids.dtype == tf.int32 and begin.dtype == end.dtype == tf.int64
  assert ids.to_list() == layer.tokenize(tf.constant(lines)).to_list()
  assert ids.to_list() == _original_ids(original, lines)
  basic = original.basic_tokenizer
  checked = shared = 0
  for line, row_ids, row_begin, row_end in zip(lines, ids.to_list(), begin.to_list(),
                                               end.to_list()):
    data = line.encode("utf-8")
    assert row_begin == sorted(row_begin) and all(b < e for b, e in zip(row_begin, row_end))
    for i, (token_id, b, e) in enumerate(zip(row_ids, row_begin, row_end)):
      source = data[b:e].decode("utf-8")  # Offsets fall on character boundaries.
      normalised = "".join(basic.tokenize(source))
      piece = original.inv_vocab[token_id]
      piece = piece[2:] if piece.startswith("##") else piece
      if piece == "[UNK]":
        assert normalised, (line, source)
        continue
      shares = i > 0 and b < row_end[i - 1]
      if shares:  # Only the one character the two pieces split (+ marks dropped after it).
        overlap = data[b:row_end[i - 1]].decode("utf-8")
        assert not basic.tokenize(overlap[1:]), (line, source)
      if shares or (i + 1 < len(row_begin) and row_begin[i + 1] < e):
        shared += 1
        assert piece in normalised, (line, source, piece)
      else:
        checked += 1
        assert normalised.replace("ς", "σ") == piece.replace("ς", "σ"), (line, source, piece)
  assert checked > 5000 and shared < checked / 20


# Hand-made cases: (text, [(piece, the text it slices), ...]) on OFFSET_VOCAB, worked out by
# hand from the definition: a piece slices the source characters of its normalised characters,
# plus the characters normalisation drops right after it (up to the next kept one).
OFFSET_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "caf", "##e", "##é",
                "H", "##llo", ",", "!", ".", "北", "京", "ᄒ", "##ᅡᆫ", "naive", "déjà", "vu"]
OFFSET_CASES_LOWER = [
    ("  Héllo,   WORLD!  ",                       # extra spaces, accent, case, punctuation
     [("hello", "Héllo"), (",", ","), ("world", "WORLD"), ("!", "!")]),
    ("café cafe\u0301",                           # accent: composed, then e + combining acute
     [("caf", "caf"), ("##e", "é"), ("caf", "caf"), ("##e", "e\u0301")]),
    ("北京欢",                                     # CJK: one word per character
     [("北", "北"), ("京", "京"), ("[UNK]", "欢")]),
    ("naïve\tvu...", [("naive", "naïve"), ("vu", "vu"), (".", "."), (".", "."), (".", ".")]),
    ("hel\u200blo world\x00!",                    # dropped: zero-width space, NUL
     [("hello", "hel\u200blo"), ("world", "world\x00"), ("!", "!")]),
    ("한", [("ᄒ", "한"), ("##ᅡᆫ", "한")]),          # one syllable, two jamo pieces
]
OFFSET_CASES_CASED = [
    ("  Héllo WORLD déjà  vu", [("H", "H"), ("##é", "é"), ("##llo", "llo"),
                                ("[UNK]", "WORLD"), ("déjà", "déjà"), ("vu", "vu")]),
    ("café, 北", [("caf", "caf"), ("##é", "é"), (",", ","), ("北", "北")]),
]


@pytest.mark.parametrize("do_lower_case, cases", [(True, OFFSET_CASES_LOWER),
                                                   (False, OFFSET_CASES_CASED)],
                         ids=["lower", "nolower"])
def test_tokenize_with_offsets_hand_made(do_lower_case, cases):
  layer = preprocessing.BertPreprocessor(OFFSET_VOCAB, do_lower_case=do_lower_case)
  texts = [text for text, _ in cases]
  ids, begin, end = layer.tokenize_with_offsets(tf.constant(texts))
  for (text, expected), row_ids, row_begin, row_end in zip(
      cases, ids.to_list(), begin.to_list(), end.to_list()):
    data = text.encode("utf-8")
    got = [(OFFSET_VOCAB[i], data[b:e].decode("utf-8"))
           for i, b, e in zip(row_ids, row_begin, row_end)]
    assert got == expected, text


def test_odd_vocab_file(google_tokenization, tmp_path):
  # Repeated tokens (ids: their last lines', as the later original's load_vocab), a blank line
  # (an id for ""), "##" alone, \r\n endings; the original's word pieces.
  path = tmp_path / "vocab.txt"
  path.write_bytes(b"[PAD]\n[UNK]\r\n[CLS]\n[SEP]\n\nthe\nthe\n##\n##e\nt\n##h\n"
                   b"a\n##b\nab\n\xc3\xa9\n[UNK]\nx\n")
  line_ids = {}
  for i, line in enumerate(path.read_bytes().decode().split("\n")[:-1]):
    line_ids[line.strip()] = i  # the later original: vocab[token] = index of every line
  texts = ["the thé ab abb the# ## x xx", "", "THE Ab", "\u00e9\u00e9 e\u0301 \u0301"]
  for lower in (True, False):
    original = google_tokenization.FullTokenizer(str(path), do_lower_case=lower)
    got = preprocessing.BertPreprocessor(str(path), lower).tokenize(tf.constant(texts))
    assert got.to_list() == [[line_ids[p] for p in original.tokenize(t)] for t in texts]
  assert line_ids["the"] == 6 and line_ids["[UNK]"] == 15


def test_known_mismatch_canonical_reordering(google_tokenization, tmp_path):
  """The one place the layer cannot match: NFD reorders two adjacent spacing combining marks.

  U+302E (HANGUL SINGLE DOT TONE MARK, Mc, combining class 224) followed by U+1715 (TAGALOG
  SIGN PAMUDPOD, Mc, class 9): NFD puts U+1715 first, and neither is dropped as an accent. The
  layer maps characters one at a time and keeps the input order. Only 25 such Mc code points
  exist; no real vocab has a token with two of them in a row, so ids differ only with a vocab
  like this one.
  """
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n\u1715\u302e\n\u302e\u1715\n", encoding="utf-8")
  original = google_tokenization.FullTokenizer(str(path), do_lower_case=True)
  layer = preprocessing.BertPreprocessor(str(path), do_lower_case=True)
  text = "\u302e\u1715"
  assert original.tokenize(text) == ["\u1715\u302e"]
  assert layer.tokenize(tf.constant([text])).to_list() == [[5]]  # "\u302e\u1715": input order.
  # Without lowercasing there is no NFD, and the two agree.
  original_cased = google_tokenization.FullTokenizer(str(path), do_lower_case=False)
  cased = preprocessing.BertPreprocessor(str(path), do_lower_case=False)
  assert original_cased.tokenize(text) == ["\u302e\u1715"]
  assert cased.tokenize(tf.constant([text])).to_list() == [[5]]


def _original_features(tokenizer, text_a, text_b, max_seq_length):
  run_classifier = google("run_classifier")
  example = run_classifier.InputExample(guid="x", text_a=text_a, text_b=text_b, label="0")
  feature = run_classifier.convert_single_example(10, example, ["0"], max_seq_length, tokenizer)
  return feature.input_ids, feature.input_mask, feature.segment_ids


@pytest.mark.parametrize("max_seq_length", [3, 9, 24])
def test_packing_matches_convert_single_example(google_tokenization, uncased_vocab, lines,
                                                max_seq_length):
  original = google_tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  layer = preprocessing.BertPreprocessor(str(uncased_vocab), max_seq_length=max_seq_length)
  texts_a = [line for line in lines[:3000:10]] + ["", "x", "北京 " * 20]
  texts_b = [line for line in lines[1:3001:10]] + ["y " * 30, "", ""]
  single = layer(tf.constant(texts_a))
  pair = layer((tf.constant(texts_a), tf.constant(texts_b)))
  for i, (a, b) in enumerate(zip(texts_a, texts_b)):
    for outputs, text_b in ((single, None), (pair, b)):
      ids, mask, types = _original_features(original, a, text_b, max_seq_length)
      assert outputs["input_word_ids"][i].numpy().tolist() == ids, (a, text_b)
      assert outputs["input_mask"][i].numpy().tolist() == mask
      assert outputs["input_type_ids"][i].numpy().tolist() == types
  for outputs in (single, pair):
    for value in outputs.values():
      assert value.dtype == tf.int32 and value.shape == (len(texts_a), max_seq_length)


def test_truncated_pair_lengths_closed_form():
  truncate = google("run_classifier")._truncate_seq_pair
  cases = list(itertools.product(range(12), range(12), range(9)))
  got_a, got_b = preprocessing.truncated_pair_lengths(
      tf.constant([a for a, _, _ in cases]), tf.constant([b for _, b, _ in cases]),
      tf.constant([m for _, _, m in cases]))
  for (a, b, m), new_a, new_b in zip(cases, got_a.numpy(), got_b.numpy()):
    tokens_a, tokens_b = list(range(a)), list(range(b))
    truncate(tokens_a, tokens_b, m)
    assert (new_a, new_b) == (len(tokens_a), len(tokens_b)), (a, b, m)


def test_saved_model_round_trip(uncased_vocab, tmp_path):
  layer = preprocessing.BertPreprocessor(str(uncased_vocab), max_seq_length=12)

  class Serving(tf.Module):

    def __init__(self):
      super().__init__()
      self.preprocessor = layer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def single(self, text):
      return self.preprocessor(text)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def pair(self, text_a, text_b):
      return self.preprocessor((text_a, text_b))

  texts_a = tf.constant(["Héllo, WORLD!", "ΟΔΟΣ 北京", "", "a " * 40])
  texts_b = tf.constant(["second segment", "", "x", "b " * 40])
  module = Serving()
  tf.saved_model.save(module, str(tmp_path / "saved"))
  del module
  reloaded = tf.saved_model.load(str(tmp_path / "saved"))
  for got, expected in ((reloaded.single(texts_a), layer(texts_a)),
                        (reloaded.pair(texts_a, texts_b), layer((texts_a, texts_b)))):
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
      np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy())


def test_keras_config_round_trip(uncased_vocab):
  layer = preprocessing.BertPreprocessor(str(uncased_vocab), do_lower_case=False,
                                         max_seq_length=10, name="pre")
  restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
  assert isinstance(restored, preprocessing.BertPreprocessor)
  assert restored.get_config() == layer.get_config()
  inputs = keras.Input(shape=(), dtype="string")
  model = keras.Model(inputs, restored(inputs))
  texts = tf.constant(["Ünïcode Text, cased.", ""])
  for key, value in model(texts).items():
    np.testing.assert_array_equal(value.numpy(), layer(texts)[key].numpy())


def test_bad_input(uncased_vocab, tmp_path):
  with pytest.raises(BertTfError, match="vocab file not found: .*missing.txt"):
    preprocessing.BertPreprocessor(str(tmp_path / "missing.txt"))
  with pytest.raises(BertTfError, match=r"vocabulary has no \[CLS\] token"):
    preprocessing.BertPreprocessor(["[PAD]", "[UNK]", "[SEP]", "a"])
  with pytest.raises(BertTfError, match="max_seq_length must be at least 2, got 1"):
    preprocessing.BertPreprocessor(str(uncased_vocab), max_seq_length=1)
  layer = preprocessing.BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
  with pytest.raises(BertTfError, match="takes one or two text segments, got 3"):
    layer([tf.constant(["a"])] * 3)
