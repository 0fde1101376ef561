"""bert_tf.vocab: learned vocabs load in Google's tokenizer, cover their corpus, keep BERT's ids."""

import pytest

from bert_tf import tokenization
from bert_tf import vocab
from bert_tf.errors import BertTfError
from tests.tokenization.conftest import CASED_VOCAB


def test_merges_hand_computed():
  # Sennrich et al.'s BPE example in WordPiece notation. Pair counts at the start:
  # (##e,##s)=9 (newest 6 + widest 3), (##s,##t)=9, (##w,##e)=8, (l,##o)=7, (##o,##w)=7 ...
  # 1. ##e ##s -> ##es (9; ties go to the smaller pair), 2. ##es ##t -> ##est (9),
  # 3. ##o ##w -> ##ow (7; "##o" sorts before "l"), 4. l ##ow -> low (7).
  counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
  learned = vocab.learn_vocab(counts, vocab_size=100, min_pair_count=1)
  alphabet = {"l", "n", "w", "##o", "##w", "##e", "##r", "##s", "##t", "##i", "##d"}
  assert learned[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert set(learned[5:5 + len(alphabet)]) == alphabet
  assert learned[5 + len(alphabet):][:4] == ["##es", "##est", "##ow", "low"]
  assert {"newest", "widest", "lower"} <= set(learned)


def test_a_pair_as_frequent_as_min_pair_count_is_merged_and_ties_go_by_code_point():
  # "ab" twice: pieces a and ##b, 2 each (a tie: "##b" < "a" by code point), pair (a, ##b) 2.
  # min_pair_count=2 merges it, as Hugging Face's WordPieceTrainer(min_frequency=2) does;
  # 3 does not (mutation audit round 3: stopping at a count equal to min_pair_count, and
  # ties in first-seen order, went unnoticed: the hand-computed case above uses 1, a set).
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert vocab.learn_vocab({"ab": 2}, vocab_size=10) == special + ["##b", "a", "ab"]
  assert vocab.learn_vocab({"ab": 2}, vocab_size=10, min_pair_count=3) == special + ["##b", "a"]
  assert vocab.learn_vocab({"ba": 1, "ab": 1}, vocab_size=9, min_pair_count=1) == special + [
      "##a", "##b", "a", "b"]


def test_special_ids_match_google_layout(uncased_vocab):
  google_ids = tokenization.load_vocab(str(uncased_vocab))
  learned = vocab.learn_vocab({"hello": 3, "world": 2}, vocab_size=200, num_unused_tokens=99)
  for token in ("[PAD]", "[unused0]", "[unused98]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
    assert learned.index(token) == google_ids[token], token
  assert vocab.learn_vocab({"a": 1}, vocab_size=10)[:5] == [
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_built_vocab_covers_corpus(tmp_path, lines, google_tokenization, do_lower_case):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("\n".join(lines[:3000]), encoding="utf-8")
  out = tmp_path / "out" / "vocab.txt"
  written = vocab.build_vocab([str(tmp_path / "corpus*.txt")], str(out), vocab_size=3000,
                              do_lower_case=do_lower_case)
  original = google_tokenization.FullTokenizer(str(out), do_lower_case=do_lower_case)
  assert list(original.vocab) == written and len(written) <= 3000
  assert [original.vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
      0, 1, 2, 3, 4]
  pieces = [p for line in lines[:3000] for p in original.tokenize(line)]
  assert "[UNK]" not in pieces and len(pieces) > 20000
  assert any(p.startswith("##") for p in pieces)
  if not do_lower_case:
    assert {"The", "the"} <= set(written)


def test_small_vocab_keeps_frequent_characters(lines):
  counts = vocab.count_words(lines[:500])
  learned = vocab.learn_vocab(counts, vocab_size=20)
  assert len(learned) == 20 and learned[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert "##e" in learned  # The commonest continuation letter in English.


def test_a_vocab_too_small_for_the_alphabet_says_what_turns_to_unk(caplog):
  """Hand-counted: "ab" x3, "ac" x2, "d" x1 have the pieces a (5), ##b (3), ##c (2), d (1);
  vocab_size 7 keeps the 5 reserved tokens and a, ##b: "ac" and "d" (3 of 6 words) are [UNK].
  A vocab_size that holds the alphabet says nothing."""
  counts = {"ab": 3, "ac": 2, "d": 1}
  with caplog.at_level("WARNING"):
    learned = vocab.learn_vocab(counts, vocab_size=7)
  assert learned == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"]
  assert [r.getMessage() for r in caplog.records] == [
      "vocab_size=7 holds 2 of the corpus's 4 characters (## continuations counted apart; 5 "
      "tokens reserved): 3 of its 6 words (50.0%) hold a character left out and tokenize to "
      "[UNK]; vocab_size=9 or more keeps every character"]
  caplog.clear()
  with caplog.at_level("WARNING"):
    vocab.learn_vocab(counts, vocab_size=9)
  assert not caplog.records


def test_count_words_skips_overlong_words():
  counts = vocab.count_words(["ok " + "x" * 201 + " " + "y" * 200])
  assert counts == {"ok": 1, "y" * 200: 1}


def test_bad_input(tmp_path):
  with pytest.raises(BertTfError, match="vocab_size=4 is smaller than the 5 reserved tokens"):
    vocab.learn_vocab({"a": 1}, vocab_size=4)
  with pytest.raises(BertTfError, match="input file not found: .*nothing-here"):
    vocab.build_vocab([str(tmp_path / "nothing-here*")], str(tmp_path / "v.txt"), 100)


def test_cased_fixture_is_cased_and_google_loadable(google_tokenization):
  original = google_tokenization.FullTokenizer(str(CASED_VOCAB), do_lower_case=False)
  assert original.vocab["[UNK]"] == 100 and original.vocab["[MASK]"] == 103
  assert original.tokenize("The President said") == ["The", "President", "said"]
