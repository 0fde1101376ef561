"""Word positions by the basic tokenizer or by whitespace (hand-worked cases on the real MiniLM
vocab), and the warning for raw text that already holds [CLS]/[SEP]."""

import re
import warnings

import numpy as np
import pytest

import bert_tf
from bert_tf import inference, tokenization

TEXT = "Steve Jobs co-founded Apple (in 1976)."
TOL = 1e-5


def test_basic_words_count_punctuation(minilm_bert):
  words = minilm_bert.words(TEXT)  # split="basic" is the default.
  assert words == minilm_bert.words(TEXT, split="basic")
  assert [w for w, _ in words] == ["steve", "jobs", "co", "-", "founded", "apple", "(", "in",
                                   "1976", ")", "."]
  assert words[3] == ("-", ["-"])


def test_whitespace_words_are_as_written(minilm_bert):
  words = minilm_bert.words(TEXT, split="whitespace")
  assert words == [("Steve", ["steve"]), ("Jobs", ["jobs"]),
                   ("co-founded", ["co", "-", "founded"]), ("Apple", ["apple"]),
                   ("(in", ["(", "in"]), ("1976).", ["1976", ")", "."])]
  text = " \tUnaffable\u3000[MASK]\u00a0bank.\x00\n \x01 "  # Ideographic/no-break spaces split.
  assert minilm_bert.words(text, split="whitespace") == [
      ("Unaffable", ["una", "##ffa", "##ble"]), ("[MASK]", ["[MASK]"]),
      ("bank.\x00", ["bank", "."])]
  for split in inference.WORD_SPLITS:
    for t in (TEXT, text):
      assert [p for _, pieces in minilm_bert.words(t, split) for p in pieces] == \
          minilm_bert.tokenizer.tokenize(t)
  with pytest.raises(bert_tf.BertTfError, match=r"^split must be one of 'basic', 'whitespace', "
                     r"got 'spaces'$"):
    minilm_bert.words(TEXT, split="spaces")


def test_whitespace_pattern_is_the_tokenizers_whitespace():
  every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
  # pylint: disable=protected-access
  matched = "".join(re.findall(inference._WHITESPACE, every))
  assert matched == "".join(c for c in every if tokenization._is_whitespace(c))


def test_word_embedding_by_position_in_each_mode(minilm_bert):
  out = minilm_bert(TEXT, output_hidden_states=True)
  tokens = out.tokens[0]
  assert tokens[3:6] == ["co", "-", "founded"] and tokens[7:11] == ["(", "in", "1976", ")"]
  last = out.hidden_states[-1][0]  # [S,H]
  cases = [  # (word, split, [start, end) in tokens)
      (3, "basic", (4, 5)),          # "-"
      (2, "whitespace", (3, 6)),     # "co-founded": co - founded
      (4, "whitespace", (8, 9)),     # "(in": the "(" is left out
      (5, "whitespace", (9, 10)),    # "1976).": ")" and "." are left out
      ("co-founded", "whitespace", (3, 6)),
      ("1976", "whitespace", (9, 10)),
      ("apple", "basic", (6, 7)),
  ]
  for word, split, (start, end) in cases:
    got = minilm_bert.word_embedding(TEXT, word, split=split)
    np.testing.assert_allclose(got, last[start:end].mean(axis=0), atol=TOL,
                               err_msg=f"{word!r} {split}")
  both = minilm_bert.embed_words([TEXT, TEXT], [2, "Jobs"], split="whitespace")
  np.testing.assert_allclose(both[0], last[3:6].mean(axis=0), atol=TOL)
  np.testing.assert_allclose(both[1], last[2], atol=TOL)
  with pytest.raises(bert_tf.BertTfError, match=r"word position 6 is out of range: .* has 6 "
                     r"words \(whitespace split\)"):
    minilm_bert.word_embedding(TEXT, 6, split="whitespace")
  with pytest.raises(bert_tf.BertTfError, match=r"is not one whitespace-separated word"):
    minilm_bert.word_embedding(TEXT, "Steve Jobs", split="whitespace")
  with pytest.raises(bert_tf.BertTfError, match=r"is 3 words for the tokenizer"):
    minilm_bert.word_embedding(TEXT, "co-founded")


def test_special_tokens_in_raw_text_warn_once(minilm_bert):
  bert = bert_tf.inference.InferenceModel(minilm_bert.model, minilm_bert.tokenizer)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    bert.tokenize("The [MASK] sat.")  # [MASK] is fine.
    assert not caught
    tokens, _ = bert.tokenize("[CLS] The cat sat. [SEP]")
    bert.tokenize(("[CLS] a", "b [SEP]"))
  assert tokens[0][:2] == ["[CLS]", "[CLS]"] and tokens[0][-2:] == ["[SEP]", "[SEP]"]
  assert [str(w.message) for w in caught] == [
      "text '[CLS] The cat sat. [SEP]' already holds [CLS] and [SEP]: bert_tf adds [CLS] ... "
      "[SEP] itself, so the model sees them twice; pass the plain text (and a pair as "
      "(text_a, text_b)), or add_special_tokens=False to use the text's own"]
  assert caught[0].category is UserWarning
