"""fill_mask and next_sentence on a Google-format checkpoint with cls/* heads, against Google's
original pretraining graph run on hand-tokenized inputs (tests/inference/conftest.py)."""

import shutil

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.modeling import BertClassifier, BertPretrainer, checkpoints
from tests.conftest import FIXTURES
from tests.inference.conftest import FILL_MASK, NEXT_SENTENCE, TINY_VOCAB

TOL = 1e-5


def _check_candidates(candidates, probs, top_k):
  """``candidates`` are a top_k of Google's probabilities ``probs`` [V], most likely first.

  Near-ties (random weights give an almost flat distribution) may come in either order.
  """
  assert len(candidates) == top_k
  ids = [c["token_id"] for c in candidates]
  assert [c["token"] for c in candidates] == [TINY_VOCAB[i] for i in ids]
  got = np.array([c["probability"] for c in candidates])
  np.testing.assert_allclose(got, probs[ids], atol=TOL)
  # Near-uniform probabilities (~1/V) make log-probabilities the sharper comparison.
  np.testing.assert_allclose(np.log(got), np.log(probs[ids]), atol=TOL)
  assert np.all(np.diff(got) <= 0)
  left_out = np.delete(probs, ids)
  if left_out.size:
    assert got[-1] >= left_out.max() - TOL
  assert len(set(ids)) == top_k


def test_load_finds_heads_casing_and_tokens(tiny_google, tiny_bert):
  folder, reference = tiny_google
  assert {"cls/predictions/output_bias", "cls/seq_relationship/output_weights"} <= set(
      reference["variable_names"])
  assert tiny_bert.has_masked_lm and tiny_bert.has_next_sentence and tiny_bert.has_pooler
  assert tiny_bert.do_lower_case  # The vocab has no capital letters.
  assert not tiny_bert.load_report.missing
  tokens, _ = tiny_bert.tokenize([text for text, _, _ in FILL_MASK])
  assert tokens == [expected for _, expected, _ in FILL_MASK]
  tokens, segments = tiny_bert.tokenize([pair for pair, _, _ in NEXT_SENTENCE])
  assert tokens == [expected for _, expected, _ in NEXT_SENTENCE]
  for segment_ids, (_, expected, b_start) in zip(segments, NEXT_SENTENCE):
    assert segment_ids == [0] * b_start + [1] * (len(expected) - b_start)


@pytest.mark.parametrize("batch_size", [1, 2])
def test_fill_mask_matches_google(tiny_google, tiny_bert, batch_size):
  _, reference = tiny_google
  top_k = 6
  results = tiny_bert.fill_mask([text for text, _, _ in FILL_MASK], top_k=top_k,
                                batch_size=batch_size)
  # One mask -> one list of candidates; two masks -> one list per mask.
  per_text = [[results[0]], results[1]]
  for (_, tokens, positions), masks, probs in zip(FILL_MASK, per_text,
                                                   reference["mask_probs"]):
    assert len(masks) == len(positions)
    for candidates, position, row in zip(masks, positions, probs):
      _check_candidates(candidates, row, top_k)
      filled = list(tokens)
      filled[position] = candidates[0]["token"]
      # Joined as decode does, spaces before "." and "," removed (Hugging Face's cleanup).
      joined = " ".join(filled[1:-1]).replace(" ##", "")
      assert candidates[0]["sequence"] == joined.replace(" .", ".").replace(" ,", ",")


def test_fill_mask_single_text(tiny_google, tiny_bert):
  _, reference = tiny_google
  candidates = tiny_bert.fill_mask(FILL_MASK[0][0], top_k=3)
  _check_candidates(candidates, reference["mask_probs"][0][0], 3)
  everything = tiny_bert.fill_mask(FILL_MASK[0][0], top_k=1000)  # Capped at the vocab size.
  _check_candidates(everything, reference["mask_probs"][0][0], len(TINY_VOCAB))
  np.testing.assert_allclose(sum(c["probability"] for c in everything), 1.0, atol=TOL)


def test_fill_mask_returns_logits(tiny_google, tiny_bert):
  """return_logits: the head's logits at each [MASK] ([P,V]); log_softmax of them is Google's
  log-probabilities, and the candidates are unchanged."""
  _, reference = tiny_google
  texts = [text for text, _, _ in FILL_MASK]
  results, logits = tiny_bert.fill_mask(texts, top_k=3, return_logits=True)
  assert results == tiny_bert.fill_mask(texts, top_k=3)
  for row, (_, _, positions), probs in zip(logits, FILL_MASK, reference["mask_probs"]):
    assert row.shape == (len(positions), len(TINY_VOCAB)) and row.dtype == np.float32
    log_softmax = row - np.log(np.exp(row - row.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - row.max(-1, keepdims=True)
    np.testing.assert_allclose(log_softmax, np.log(probs), atol=TOL)
  one, one_logits = tiny_bert.fill_mask(texts[0], return_logits=True)
  np.testing.assert_allclose(one_logits, logits[0], atol=1e-6)
  assert [c["token"] for c in one] == [c["token"] for c in tiny_bert.fill_mask(texts[0])]


def test_text_with_its_own_special_tokens(tiny_google, tiny_bert):
  """add_special_tokens=False takes the text's own [CLS]/[SEP] (segment 1 after the first
  [SEP]), giving what the plain text or pair gives with them added."""
  _, reference = tiny_google
  (pair, expected, b_start) = NEXT_SENTENCE[0]
  own = "[CLS] " + pair[0] + " [SEP] " + pair[1] + " [SEP]"
  tokens, segments = tiny_bert.tokenize(own, add_special_tokens=False)
  assert tokens == [expected]
  assert segments == [[0] * b_start + [1] * (len(expected) - b_start)]
  assert tiny_bert.next_sentence(own, add_special_tokens=False) == pytest.approx(
      reference["is_next"][0], abs=TOL)
  with pytest.warns(UserWarning, match="add_special_tokens=False"):
    doubled, _ = tiny_bert.tokenize(own)
  assert doubled[0][:2] == ["[CLS]", "[CLS]"]
  text, expected_mask, _ = FILL_MASK[0]
  got = tiny_bert.fill_mask("[CLS] " + text + " [SEP]", top_k=3, add_special_tokens=False)
  _check_candidates(got, reference["mask_probs"][0][0], 3)
  out = tiny_bert(["[CLS] " + text + " [SEP]"], add_special_tokens=False)
  np.testing.assert_allclose(out.sequence_output, tiny_bert([text]).sequence_output, atol=1e-6)
  assert out.tokens == [expected_mask]


def test_next_sentence_matches_google(tiny_google, tiny_bert):
  _, reference = tiny_google
  pairs = [pair for pair, _, _ in NEXT_SENTENCE]
  np.testing.assert_allclose(tiny_bert.next_sentence([a for a, _ in pairs],
                                                     [b for _, b in pairs]),
                             reference["is_next"], atol=TOL)
  np.testing.assert_allclose(tiny_bert.next_sentence(pairs, batch_size=1),
                             reference["is_next"], atol=TOL)
  single = tiny_bert.next_sentence(*pairs[1])
  assert isinstance(single, float)
  assert abs(single - reference["is_next"][1]) < TOL


def _training_checkpoint(model, directory):
  """A checkpoint as bert_tf's training loop writes it (training/loop.py)."""
  checkpoint = tf.train.Checkpoint(model=checkpoints.trackable_variables(model))
  return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=1).save()


def test_bert_tf_checkpoint_folder(tiny_google, tmp_path):
  """A bert_tf training checkpoint with bert_config.json + vocab.txt beside it."""
  folder, reference = tiny_google
  model = BertPretrainer(checkpoints.load_config(str(folder)))
  checkpoints.load_weights(model, str(folder))
  _training_checkpoint(model, tmp_path / "run")
  shutil.copy(folder / "bert_config.json", tmp_path / "run")
  shutil.copy(folder / "vocab.txt", tmp_path / "run")
  bert = bert_tf.load(str(tmp_path / "run"))
  assert bert.has_masked_lm and bert.has_next_sentence
  _check_candidates(bert.fill_mask(FILL_MASK[0][0], top_k=4), reference["mask_probs"][0][0], 4)
  np.testing.assert_allclose(bert.next_sentence(*NEXT_SENTENCE[0][0]), reference["is_next"][0],
                             atol=TOL)


def test_checkpoint_without_pretraining_heads(tiny_google, tmp_path):
  """A fine-tuning run's checkpoint (classifier head only): the encoder loads, the
  pretraining heads are known to be absent."""
  folder, _ = tiny_google
  model = BertClassifier(checkpoints.load_config(str(folder)), num_labels=3)
  checkpoints.load_weights(model, str(folder))
  _training_checkpoint(model, tmp_path)
  bert = bert_tf.load(str(tmp_path), config_file=str(folder / "bert_config.json"),
                      vocab_file=str(folder / "vocab.txt"))
  assert not bert.has_masked_lm and not bert.has_next_sentence and bert.has_pooler
  with pytest.raises(bert_tf.BertTfError, match="has no masked-LM head"):
    bert.fill_mask("the [MASK]")
  np.testing.assert_allclose(bert("the cat").pooled_output,
                             model.bert({"input_word_ids": np.array([[2, 5, 7, 3]])})["pooled_output"],
                             atol=TOL)


def test_google_folder_without_checkpoint_file(tiny_google, tmp_path):
  """Google's released folders have no 'checkpoint' file, just bert_model.ckpt.*."""
  folder, reference = tiny_google
  shutil.copytree(folder, tmp_path / "released")
  (tmp_path / "released" / "checkpoint").unlink()
  bert = bert_tf.load(str(tmp_path / "released"))
  np.testing.assert_allclose(bert.next_sentence(*NEXT_SENTENCE[1][0]), reference["is_next"][1],
                             atol=TOL)


def test_config_and_vocab_given_separately(tiny_google, tmp_path):
  """A checkpoint prefix in a folder without config/vocab (like output_dir/google)."""
  folder, reference = tiny_google
  for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
    shutil.copy(folder / name, tmp_path / name)
  bert = bert_tf.load(str(tmp_path / "bert_model.ckpt"),
                      config_file=str(folder / "bert_config.json"),
                      vocab_file=str(folder / "vocab.txt"))
  np.testing.assert_allclose(bert.next_sentence(*NEXT_SENTENCE[1][0]), reference["is_next"][1],
                             atol=TOL)


def test_fill_mask_errors(tiny_bert):
  with pytest.raises(bert_tf.BertTfError, match=r"^fill_mask: no \[MASK\] in 'the cat sat'"):
    tiny_bert.fill_mask("the cat sat")
  with pytest.raises(bert_tf.BertTfError, match="top_k must be a positive integer"):
    tiny_bert.fill_mask("the [MASK]", top_k=0)
  with pytest.raises(bert_tf.BertTfError, match=r"no \[MASK\].*after truncation"):
    tiny_bert.fill_mask("the cat sat on the mat [MASK]", max_seq_length=4)


def test_next_sentence_needs_pairs(tiny_bert):
  with pytest.raises(bert_tf.BertTfError, match="give two texts"):
    tiny_bert.next_sentence("the cat sat")
  # A text_b without tokens was 'every input needs a text_b', though one was given.
  with pytest.raises(bert_tf.BertTfError) as e:
    tiny_bert.next_sentence("the cat sat", " ")
  assert str(e.value) == "next_sentence: the text_b has no tokens (' ')"
  with pytest.raises(bert_tf.BertTfError) as e:
    tiny_bert.next_sentence(["a", "b"], ["c", ""])
  assert str(e.value) == "next_sentence: the text_b of input 1 has no tokens ('')"
  # Pairs from a generator, read once (the texts were read twice: "no texts given").
  pairs = [("the cat sat", "it purred"), ("a dog ran", "the sky")]
  np.testing.assert_array_equal(tiny_bert.next_sentence(p for p in pairs),
                                tiny_bert.next_sentence(pairs))


def test_missing_files_are_one_line_errors(tiny_google, tmp_path):
  folder, _ = tiny_google
  missing = str(tmp_path / "missing")
  with pytest.raises(bert_tf.BertTfError) as e:
    bert_tf.load(missing)
  assert str(e.value) == f"model not found: {missing!r}"
  (tmp_path / "empty").mkdir()
  with pytest.raises(bert_tf.BertTfError, match=r"no bert_config.json or config.json in .*"
                     r"\(pass config_file=, or --bert_config_file\)"):
    bert_tf.load(str(tmp_path / "empty"))
  (tmp_path / "novocab").mkdir()
  shutil.copy(folder / "bert_config.json", tmp_path / "novocab")
  with pytest.raises(bert_tf.BertTfError, match=r"no vocab.txt in .*novocab"):
    bert_tf.load(str(tmp_path / "novocab"))
  big = tmp_path / "big_vocab.txt"
  big.write_text("\n".join(TINY_VOCAB + ["extra"]) + "\n")
  with pytest.raises(bert_tf.BertTfError, match=r"has 45 tokens but .* says vocab_size 44"):
    bert_tf.load(str(folder), vocab_file=str(big))
  with pytest.raises(bert_tf.BertTfError) as e:  # was an IsADirectoryError traceback
    bert_tf.load(str(folder), vocab_file=str(folder))
  assert str(e.value) == f"vocab file {str(folder)!r} is a folder (give its vocab.txt)"
  fine_tuned = tmp_path / "fine_tuned"
  shutil.copytree(folder, fine_tuned)
  (fine_tuned / "classifier.json").write_bytes(b'{"labels": ["caf\xe9", "b"]}')
  with pytest.raises(bert_tf.BertTfError) as e:  # was a UnicodeDecodeError traceback
    bert_tf.load(str(fine_tuned))
  assert str(e.value) == (f"{fine_tuned / 'classifier.json'}:1: not valid UTF-8 (byte 17 of "
                          "the line)")


def test_casing_contradicting_a_google_checkpoint_name(tiny_google, tmp_path):
  folder, _ = tiny_google
  named = tmp_path / "uncased_L-12_H-768_A-12"
  shutil.copytree(folder, named)
  with pytest.raises(bert_tf.BertTfError, match="uncased_L-12_H-768_A-12 is a lowercased "
                     "model, so pass --do_lower_case=True"):
    bert_tf.load(str(named), do_lower_case=False)


def test_hugging_face_folder_with_heads():
  """A BertForPreTraining folder: transformers' own probabilities, its own tokenizer's ids
  (tests/fixtures/make_tiny_hf_pretraining.py)."""
  folder = FIXTURES / "tiny_hf_pretraining"
  reference = np.load(folder / "reference.npz")
  bert = bert_tf.load(str(folder))
  assert bert.has_masked_lm and bert.has_next_sentence and bert.do_lower_case
  assert not bert.load_report.missing and not bert.load_report.unexpected
  texts = [str(t) for t in reference["fill_mask_texts"]]
  tokens, _ = bert.tokenize(texts)
  results = bert.fill_mask(texts, top_k=len(TINY_VOCAB))
  for i, (text_tokens, result) in enumerate(zip(tokens, [[results[0]], results[1]])):
    assert bert.tokenizer.convert_tokens_to_ids(text_tokens) == list(
        reference[f"fill_mask_input_ids_{i}"])
    for candidates, probs in zip(result, reference[f"mask_probs_{i}"]):
      _check_candidates(candidates, probs, len(TINY_VOCAB))
  pairs = [tuple(str(t) for t in pair) for pair in reference["next_sentence_pairs"]]
  np.testing.assert_allclose(bert.next_sentence(pairs), reference["is_next"], atol=TOL)
