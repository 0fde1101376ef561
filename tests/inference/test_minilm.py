"""``bert_tf.load`` on the real all-MiniLM-L6-v2 weights (a Hugging Face folder) against Hugging
Face transformers' hidden states and attentions (tests/fixtures/minilm_reference.npz, made by
tests/fixtures/make_minilm_reference.py); embeddings and word vectors against hand pooling."""

import numpy as np
import pytest

import bert_tf
from bert_tf import inference
from tests.conftest import FIXTURES

TOL = 1e-5
# The fixture's inputs (make_minilm_reference.py), padded to 24 tokens there.
TEXTS = [("The quick brown fox jumps over the lazy dog.", "It barked back."),
         "Paris is the capital of France; Berlin is Germany's.",
         ("Naïve café owners in Zürich serve crème brûlée.", "日本語も少し。")]


@pytest.fixture(scope="module")
def reference():
  return dict(np.load(FIXTURES / "minilm_reference.npz"))


@pytest.fixture(scope="module")
def outputs(minilm_bert):
  # batch_size=2: the longest two texts share a batch, the third runs alone and shorter.
  return minilm_bert(TEXTS, output_hidden_states=True, output_attentions=True,
                     max_seq_length=24, batch_size=2)


def test_load_reads_a_hugging_face_folder(minilm_bert):
  assert minilm_bert.do_lower_case  # From tokenizer_config.json.
  assert (minilm_bert.config.num_hidden_layers, minilm_bert.config.hidden_size) == (6, 384)
  assert minilm_bert.has_pooler
  assert not minilm_bert.has_masked_lm and not minilm_bert.has_next_sentence
  assert "heads: none" in repr(minilm_bert)


def test_hidden_states_and_attentions_equal_transformers(outputs, reference):
  s = outputs.input_word_ids.shape[1]
  lengths = reference["input_mask"].sum(axis=1)
  assert s == lengths.max() < 24  # Padded to the longest text, not to 24.
  np.testing.assert_array_equal(outputs.input_word_ids, reference["input_ids"][:, :s])
  np.testing.assert_array_equal(outputs.input_mask, reference["input_mask"][:, :s])
  np.testing.assert_array_equal(outputs.input_type_ids, reference["input_type_ids"][:, :s])
  assert [len(t) for t in outputs.tokens] == list(lengths)
  assert len(outputs.hidden_states) == 7 and len(outputs.attentions) == 6
  for b, n in enumerate(lengths):
    for ours, theirs in zip(outputs.hidden_states, reference["hidden_states"]):
      np.testing.assert_allclose(ours[b, :n], theirs[b, :n], atol=TOL)
      assert not ours[b, n:].any()  # Padding positions are zeroed.
    for ours, theirs in zip(outputs.attentions, reference["attentions"]):
      assert ours.shape == (3, 12, s, s)
      # Every row of real tokens, including the (zero) weights on padding columns.
      np.testing.assert_allclose(ours[b, :, :n], theirs[b, :, :n, :s], atol=TOL)
      assert not ours[b, :, n:].any()
  np.testing.assert_allclose(outputs.sequence_output, outputs.hidden_states[-1])
  np.testing.assert_allclose(outputs.pooled_output, reference["pooled_output"], atol=TOL)
  assert outputs["pooled_output"] is outputs.pooled_output
  assert set(outputs.keys()) >= {"hidden_states", "attentions", "sequence_output"}


def test_batching_does_not_change_results(minilm_bert, outputs):
  one_by_one = minilm_bert(TEXTS, output_hidden_states=True, output_attentions=True,
                           max_seq_length=24, batch_size=1)
  for ours, theirs in zip(one_by_one.hidden_states, outputs.hidden_states):
    np.testing.assert_allclose(ours, theirs, atol=TOL)
  for ours, theirs in zip(one_by_one.attentions, outputs.attentions):
    np.testing.assert_allclose(ours, theirs, atol=TOL)
  plain = minilm_bert(TEXTS, max_seq_length=24)
  assert plain.hidden_states is None and plain.attentions is None
  np.testing.assert_allclose(plain.sequence_output, outputs.sequence_output, atol=TOL)


def test_text_pairs_argument_and_single_text(minilm_bert, outputs):
  same = minilm_bert([TEXTS[0][0]], text_pairs=[TEXTS[0][1]], max_seq_length=24)
  assert same.tokens[0] == outputs.tokens[0]
  n = len(same.tokens[0])
  np.testing.assert_allclose(same.sequence_output[0, :n], outputs.sequence_output[0, :n],
                             atol=TOL)
  single = minilm_bert(TEXTS[1])
  assert single.sequence_output.shape == (1, len(outputs.tokens[1]), 384)


def _mask_mean(x, mask):
  m = mask[:, :, None].astype(np.float64)
  return (x * m).sum(axis=1) / m.sum(axis=1)


def test_embed_poolings(minilm_bert, outputs):
  hidden, mask = outputs.hidden_states, outputs.input_mask
  cases = {
      "cls": hidden[-1][:, 0],
      "mean": _mask_mean(hidden[-1], mask),
      "pooler": outputs.pooled_output,
      "last4_mean": _mask_mean(np.mean(hidden[-4:], axis=0), mask),
      "last4_concat": _mask_mean(np.concatenate(hidden[-4:], axis=-1), mask),
      "last2_sum": _mask_mean(hidden[-2] + hidden[-1], mask),
  }
  for pooling, expected in cases.items():
    got = minilm_bert.embed(TEXTS, pooling=pooling, max_seq_length=24, batch_size=2)
    np.testing.assert_allclose(got, expected, atol=TOL, err_msg=pooling)
  max_pooled = np.stack([hidden[-1][b, :n].max(axis=0)
                         for b, n in enumerate(mask.sum(axis=1))])
  np.testing.assert_allclose(minilm_bert.embed(TEXTS, pooling="max", max_seq_length=24),
                             max_pooled, atol=TOL)
  np.testing.assert_allclose(
      minilm_bert.embed(TEXTS, pooling="mean", layers=["embeddings", -2], combine="concat",
                        max_seq_length=24),
      _mask_mean(np.concatenate([hidden[0], hidden[-2]], axis=-1), mask), atol=TOL)


def test_word_embedding_averages_its_pieces(minilm_bert):
  text = "The unaffable banker sat by the river bank."
  words = minilm_bert.words(text)
  assert [p for _, pieces in words for p in pieces] == minilm_bert.tokenizer.tokenize(text)
  assert [w for w, _ in words][:3] == ["the", "unaffable", "banker"]
  pieces = words[1][1]
  assert len(pieces) > 1  # "unaffable" is several word pieces in the uncased vocab.
  out = minilm_bert(text, output_hidden_states=True)
  last4 = np.sum(out.hidden_states[-4:], axis=0)[0]  # [S,H]
  start = 1 + len(words[0][1])  # After [CLS] and "the".
  expected = last4[start:start + len(pieces)].mean(axis=0)
  got = minilm_bert.word_embedding(text, 1, layers=[-4, -3, -2, -1], combine="sum")
  np.testing.assert_allclose(got, expected, atol=TOL)
  np.testing.assert_allclose(minilm_bert.word_embedding(text, "Unaffable", layers=[-4, -3, -2, -1],
                                                        combine="sum"), expected, atol=TOL)
  bank = [w for w, _ in words].index("bank")
  start = 1 + sum(len(p) for _, p in words[:bank])
  np.testing.assert_allclose(minilm_bert.word_embedding(text, "bank"),
                             out.hidden_states[-1][0, start], atol=TOL)
  both = minilm_bert.embed_words([text, "A bank loan."], ["bank", 1])
  np.testing.assert_allclose(both[0], out.hidden_states[-1][0, start], atol=TOL)
  assert both.shape == (2, 384)


def test_special_tokens_stay_whole(minilm_bert):
  tokens, _ = minilm_bert.tokenize("Paris is the most [MASK] city.")
  assert tokens[0] == ["[CLS]", "paris", "is", "the", "most", "[MASK]", "city", ".", "[SEP]"]
  assert ("[MASK]", ["[MASK]"]) in minilm_bert.words("the [MASK] city")


def test_missing_heads_are_one_line_errors(minilm_bert, minilm_path):
  with pytest.raises(bert_tf.BertTfError, match=r"^fill_mask: .* has no masked-LM head "
                     r"\(cls/predictions/\*\) weights"):
    minilm_bert.fill_mask("Paris is the [MASK] of France.")
  with pytest.raises(bert_tf.BertTfError, match=r"^next_sentence: .* has no next-sentence head"):
    minilm_bert.next_sentence("A.", "B.")


@pytest.mark.parametrize("call,needle", [
    (lambda m: m.embed("x", pooling="median"), "unknown pooling 'median'"),
    (lambda m: m.embed("x", pooling="mean", combine="avg"), "unknown combine 'avg'"),
    (lambda m: m.embed("x", pooling="last4_mean", layers=[-1]), "already names the layers"),
    (lambda m: m.embed("x", layers=[6]), "layers: 6 is not an encoder layer of this 6-layer "
                                          "model (0..5, or -1 = the last .. -6 = the first) "
                                          "nor 'embeddings'"),
    (lambda m: m.embed("x", layers=[-7]), "layers: -7 is not an encoder layer"),
    (lambda m: m.word_embedding("the river bank", "money"),
     "word 'money' is not in 'the river bank' (words: the river bank)"),
    (lambda m: m.word_embedding("the river bank", 3), "word position 3 is out of range"),
    (lambda m: m.word_embedding("the river bank", "river bank"), "is 2 words"),
    (lambda m: m.word_embedding("the river bank", 2, max_seq_length=4), "is cut off by"),
    (lambda m: m("x", max_seq_length=513), "exceeds the model's max_position_embeddings 512"),
    (lambda m: m([]), "no texts given"),
    (lambda m: m(["a", "b"], text_pairs=["c"]), "text_pairs has 1 entries but texts has 2"),
    # Were TypeErrors.
    (lambda m: m(None), "texts: expected a str, an (a, b) pair or a list of them, got None"),
    (lambda m: m(["a"], text_pairs=3), "text_pairs: expected a list of str, got 3"),
    (lambda m: bert_tf.load(5), "load: expected a model's folder, checkpoint, file or name (a "
                                "str), got 5"),
])
def test_bad_arguments(minilm_bert, call, needle):
  with pytest.raises(bert_tf.BertTfError) as info:
    call(minilm_bert)
  assert needle in str(info.value) and "\n" not in str(info.value)


def test_casing_sources(tmp_path, minilm_path):
  vocab = {"[CLS]": 0, "hello": 1}
  assert inference.resolve_do_lower_case(str(minilm_path), vocab) == (
      True, str(minilm_path / "tokenizer_config.json"))
  (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}')
  assert inference.resolve_do_lower_case(str(tmp_path), vocab)[0] is False
  (tmp_path / "tokenizer_config.json").unlink()
  assert inference.resolve_do_lower_case(str(tmp_path), vocab) == (True, "vocab")
  cased = tokenization_vocab(FIXTURES / "cased_vocab.txt")
  assert inference.resolve_do_lower_case(str(tmp_path), cased) == (False, "vocab")
  assert inference.resolve_do_lower_case(str(tmp_path / "cased_L-12_H-768_A-12"), vocab) == (
      False, "Google's checkpoint name")
  assert inference.resolve_do_lower_case(str(tmp_path), cased, do_lower_case=True) == (
      True, "argument")
  # A tokenizer_config.json that is not UTF-8 (was a traceback) or whose do_lower_case is not
  # true or false (was ignored): one line.
  (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": "nope"}')
  with pytest.raises(bert_tf.BertTfError) as e:
    inference.resolve_do_lower_case(str(tmp_path), vocab)
  assert str(e.value) == (f"{tmp_path / 'tokenizer_config.json'}: do_lower_case must be true "
                          "or false, got 'nope'")
  (tmp_path / "tokenizer_config.json").write_bytes(b'{"do_lower_case": true, "x": "\xff"}')
  with pytest.raises(bert_tf.BertTfError, match=r"tokenizer_config\.json:1: not valid UTF-8"):
    inference.resolve_do_lower_case(str(tmp_path), vocab)


def test_the_scripts_do_lower_case_checked_against_the_model(tmp_path, minilm_path,
                                                             uncased_vocab):
  """The fine-tuning scripts' --do_lower_case: a Hugging Face tokenizer_config.json beside
  --init_checkpoint that says otherwise is an error (as the original's check of Google's
  names); a vocab of the other casing (the real uncased vocab has no capital letter; a cased
  one has) a warning line."""
  from bert_tf import casing  # pylint: disable=import-outside-toplevel
  uncased = tokenization_vocab(uncased_vocab)
  cased_file = FIXTURES / "cased_vocab.txt"
  cased = tokenization_vocab(cased_file)
  assert casing.check_flag(True, uncased, "v.txt", str(minilm_path)) is None
  assert casing.check_flag(True, uncased, "v.txt", str(minilm_path / "model.safetensors")) is None
  with pytest.raises(bert_tf.BertTfError) as e:
    casing.check_flag(False, uncased, "v.txt", str(minilm_path))
  assert str(e.value) == (
      f"--do_lower_case=False does not match {minilm_path / 'tokenizer_config.json'}: "
      "do_lower_case true (an uncased model), so pass --do_lower_case=True")
  assert casing.check_flag(True, uncased, "v.txt", None) is None
  assert casing.check_flag(False, cased, "c.txt", str(tmp_path / "bert_model.ckpt")) is None
  assert casing.check_flag(False, uncased, "v.txt", None) == (
      "warning: --do_lower_case=False, but v.txt has no capital letters (an uncased vocab): "
      "capitalised words become other pieces or [UNK]; an uncased model takes "
      "--do_lower_case=True")
  first_capital = next(t for t in cased if t != t.lower() and not t.startswith("["))
  assert casing.check_flag(True, cased, "c.txt", None) == (
      f"warning: --do_lower_case=True, but c.txt is a cased vocab (it has {first_capital!r}): "
      "the text's capitals are lost to the model; a cased model takes --do_lower_case=False")


def test_load_checks_its_do_lower_case_as_the_scripts_do(tmp_path, minilm_path, caplog):
  """bert_tf.load(..., do_lower_case=) and export-hf's: a tokenizer_config.json of the model
  that says otherwise is an error (the real MiniLM folder says true); a vocab of the other
  casing a warning naming it (before, both were taken silently)."""
  with pytest.raises(bert_tf.BertTfError) as e:
    bert_tf.load(str(minilm_path), do_lower_case=False)
  assert str(e.value) == (
      f"do_lower_case=False does not match {minilm_path / 'tokenizer_config.json'}: "
      "do_lower_case true (an uncased model), so pass do_lower_case=True")
  cased = tokenization_vocab(FIXTURES / "cased_vocab.txt")
  with caplog.at_level("WARNING"):
    assert inference.resolve_do_lower_case(str(tmp_path), cased, do_lower_case=True,
                                           vocab_file="c.txt") == (True, "argument")
  assert [r.getMessage() for r in caplog.records if "cased vocab" in r.getMessage()] == [
      f"do_lower_case=True, but c.txt is a cased vocab (it has "
      f"{next(t for t in cased if t != t.lower() and not t.startswith('['))!r}): the text's "
      "capitals are lost to the model; a cased model takes do_lower_case=False"]


def tokenization_vocab(path):
  from bert_tf.tokenization import load_vocab  # pylint: disable=import-outside-toplevel
  return load_vocab(str(path))


def test_the_clis_do_lower_case_error_names_the_flag(minilm_path, capsys):
  """python -m bert_tf --do_lower_case against the model's tokenizer_config.json: the one line
  names --do_lower_case, the flag the user typed (the library's message says do_lower_case=)."""
  from bert_tf.__main__ import main  # pylint: disable=import-outside-toplevel
  status = main(["embed", f"--model={minilm_path}", "--do_lower_case=False",
                 "--output_file=x.npy", "text"])
  err = capsys.readouterr().err.strip().splitlines()
  assert status == 1 and err[-1] == (
      f"bert_tf embed: error: --do_lower_case=False does not match "
      f"{minilm_path / 'tokenizer_config.json'}: do_lower_case true (an uncased model), so pass "
      "--do_lower_case=True")
