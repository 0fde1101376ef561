"""``FullTokenizer.decode``: hand-worked cases, and the round trip through Google's original
tokenizer (bert-tensorflow 1.0.4) on real text with the real vocabs."""

import numpy as np
import pytest

from bert_tf import tokenization
from bert_tf.errors import BertTfError
from tests.tokenization.conftest import HARD_LINES, SETTING_IDS, SETTINGS, vocab_path

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "de", "##ja",
         "-", "vu", "!", "##", "#"]


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
  ids = tiny.convert_tokens_to_ids(tokens)
  assert tiny.decode(ids) == expected
  assert tiny.decode(np.array(ids, np.int32), skip_special_tokens=True) == skipped


def test_unknown_id_is_a_one_line_error(tiny):
  with pytest.raises(BertTfError, match=r"^decode: id 15 at position 1 is not in the vocab "
                     r"\(15 tokens\)$"):
    tiny.decode([5, 15])


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
    text = ours.decode(ids)
    assert text == " ".join(original.basic_tokenizer.tokenize(line)), line
    assert original.convert_tokens_to_ids(original.tokenize(text)) == ids, line
    checked += 1
  assert checked > 1000
