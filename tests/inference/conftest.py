"""Fixtures for the inference tests: the real MiniLM weights loaded with ``bert_tf.load`` and a
tiny Google-format checkpoint with ``cls/*`` heads made by Google's original code.

The tiny model's reference outputs come from Google's original pretraining graph
(``tests/reference/google_models.py``) run on hand-written tokens, so the tests do not trust
bert_tf's tokenizer, packing or heads to make their expectations.
"""

import json

import numpy as np
import pytest

import bert_tf
from bert_tf import pretrained
from tests.inference.model_server import ModelServer
from tests.reference.google_models import run_google_pretraining, tiny_config_dict

# A small lowercase vocab (the real uncased vocab is too big for a tiny config).
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat",
              "on", "mat", ".", ",", "is", "was", "ran", "to", "park", "paris", "city",
              "beautiful", "most", "capital", "of", "france", "he", "she", "walked", "store",
              "bought", "milk", "un", "##aff", "##able", "river", "bank", "money", "deposit",
              "##ed", "in", "and", "it", "barked"]

# Hand-tokenized inputs: [CLS] a [SEP] (b [SEP]); "[MASK]" stays whole in bert_tf's tokenizer.
FILL_MASK = [
    ("the cat sat on the [MASK] .",
     ["[CLS]", "the", "cat", "sat", "on", "the", "[MASK]", ".", "[SEP]"], [6]),
    ("[MASK] dog ran to the unaffable [MASK] park.",
     ["[CLS]", "[MASK]", "dog", "ran", "to", "the", "un", "##aff", "##able", "[MASK]", "park",
      ".", "[SEP]"], [1, 9]),
]
NEXT_SENTENCE = [
    (("He walked to the store.", "He bought milk."),
     ["[CLS]", "he", "walked", "to", "the", "store", ".", "[SEP]", "he", "bought", "milk", ".",
      "[SEP]"], 8),
    (("Paris is the capital of France.", "The dog barked."),
     ["[CLS]", "paris", "is", "the", "capital", "of", "france", ".", "[SEP]", "the", "dog",
      "barked", ".", "[SEP]"], 9),
]


def _google_features(rows, vocab):
  """Padded pretraining features for Google's graph from (tokens, positions, segment B start)."""
  length = max(len(tokens) for tokens, _, _ in rows)
  width = max(len(positions) for _, positions, _ in rows)
  n = len(rows)
  features = {
      "input_ids": np.zeros((n, length), np.int32), "input_mask": np.zeros((n, length), np.int32),
      "segment_ids": np.zeros((n, length), np.int32),
      "masked_lm_positions": np.zeros((n, width), np.int32),
      "masked_lm_ids": np.zeros((n, width), np.int32),
      "masked_lm_weights": np.zeros((n, width), np.float32),
      "next_sentence_labels": np.zeros((n, 1), np.int32),
  }
  for i, (tokens, positions, b_start) in enumerate(rows):
    features["input_ids"][i, :len(tokens)] = [vocab.index(t) for t in tokens]
    features["input_mask"][i, :len(tokens)] = 1
    if b_start:
      features["segment_ids"][i, b_start:len(tokens)] = 1
    features["masked_lm_positions"][i, :len(positions)] = positions
    features["masked_lm_weights"][i, :len(positions)] = 1.0
  return features


@pytest.fixture(scope="session")
def tiny_google(tmp_path_factory):
  """``(folder, reference)``: a Google-layout folder (bert_config.json, vocab.txt,
  bert_model.ckpt*, random weights incl. cls/*) and Google's outputs on FILL_MASK +
  NEXT_SENTENCE rows: ``mask_probs`` (per text, [P,V]) and ``is_next`` ([2])."""
  folder = tmp_path_factory.mktemp("tiny") / "tiny_model"
  folder.mkdir()
  config = tiny_config_dict(vocab_size=len(TINY_VOCAB))
  (folder / "bert_config.json").write_text(json.dumps(config))
  (folder / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
  rows = ([(tokens, positions, 0) for _, tokens, positions in FILL_MASK] +
          [(tokens, [], b_start) for _, tokens, b_start in NEXT_SENTENCE])
  features = _google_features(rows, TINY_VOCAB)
  out = run_google_pretraining(config, features, save_path=str(folder / "bert_model.ckpt"))
  width = features["masked_lm_positions"].shape[1]
  log_probs = out["masked_lm_log_probs"].reshape(len(rows), width, -1)  # [B,P,V]
  reference = {
      "mask_probs": [np.exp(log_probs[i, :len(positions)])
                     for i, (_, _, positions) in enumerate(FILL_MASK)],
      "is_next": np.exp(out["next_sentence_log_probs"][len(FILL_MASK):, 0]),
      "variable_names": out["variable_names"],
  }
  return folder, reference


@pytest.fixture(scope="session")
def tiny_bert(tiny_google):
  folder, _ = tiny_google
  return bert_tf.load(str(folder))


@pytest.fixture(scope="session")
def minilm_bert(minilm_path):
  return bert_tf.load(str(minilm_path))


@pytest.fixture
def model_mirror(monkeypatch, tmp_path):
  """A ``ModelServer`` (a local stand-in for Google's storage) as ``$BERT_TF_MIRROR``, with an
  empty ``$BERT_TF_CACHE`` (``tmp_path/cache``)."""
  server = ModelServer()
  monkeypatch.setenv(pretrained.MIRROR_ENV, server.url)
  monkeypatch.setenv(pretrained.CACHE_ENV, str(tmp_path / "cache"))
  yield server
  server.close()
