"""README's tutorial section, run as written: its Python blocks, in order, in one namespace,
with a small Google-format checkpoint (4 layers, for the tutorial's last-four-layers vectors)
served as ``bert-base-uncased`` by the local stand-in for Google's storage. The results are
then checked against the same calls on the folder itself and against what each task must
give."""

import json
import os
import re

import numpy as np
import pytest

import bert_tf
from bert_tf.modeling import BertPretrainer, checkpoints
from bert_tf.modeling.config import BertConfig
from tests.inference.conftest import NEXT_SENTENCE, TINY_VOCAB

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTION = "## Tutorial: the classic BERT tasks, from a model's name"


def tutorial_blocks():
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    readme = f.read()
  start = readme.index(SECTION)
  end = readme.index("\n## ", start + len(SECTION))
  return re.findall(r"```python\n(.*?)```", readme[start:end], re.S)


@pytest.fixture(scope="module")
def four_layers(tmp_path_factory):
  folder = tmp_path_factory.mktemp("tutorial") / "model"
  folder.mkdir()
  config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_hidden_layers=4,
                      num_attention_heads=4, intermediate_size=37, max_position_embeddings=64,
                      type_vocab_size=2)
  checkpoints.save_google_checkpoint(BertPretrainer(config), str(folder / "bert_model.ckpt"))
  config.to_json_file(str(folder / "bert_config.json"))
  (folder / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
  return folder


def test_the_tutorial_runs_as_written(four_layers, model_mirror, tmp_path, monkeypatch):
  folder = four_layers
  model_mirror.serve("bert-base-uncased", folder)
  monkeypatch.chdir(tmp_path)
  blocks = tutorial_blocks()
  assert len(blocks) == 7 and blocks[0].count('bert_tf.load("bert-base-uncased")') == 1
  namespace = {}
  for block in blocks:
    exec(compile(block, "README.md (tutorial)", "exec"), namespace)  # pylint: disable=exec-used
  assert model_mirror.requests == ["/2018_10_18/uncased_L-12_H-768_A-12.zip"]
  same = bert_tf.load(str(folder))
  ns = namespace
  # Hidden states and embeddings.
  assert len(ns["out"].tokens[0]) == ns["out"].attentions[0].shape[-1]
  assert ns["token_vectors"].shape[1] == same.config.hidden_size
  np.testing.assert_array_equal(ns["vectors"], same.embed_words(
      ns["texts"], "bank", layers=[-4, -3, -2, -1], combine="sum"))
  np.testing.assert_array_equal(ns["embeddings"], same.embed(ns["sentences"], pooling="mean"))
  np.testing.assert_allclose(np.diag(ns["similarity"]), 1.0, atol=1e-6)
  # The heads: the same as the folder's (which test_heads checks against Google's graph).
  text = "The man went to the [MASK]. He bought a gallon of milk."
  assert ns["bert"].fill_mask(text) == same.fill_mask(text)
  assert ns["follows"] == same.next_sentence("The man went to the store.",
                                             "He bought a gallon of milk.")
  assert 0.0 < ns["random"] < 1.0
  # Pictures.
  for picture in ("attention.html", "bank.html"):
    assert (tmp_path / picture).read_text().startswith("<!DOCTYPE html>")
  assert ns["coords"].shape == (4, 2) and ns["explained"].shape == (2,)
  # Fine-tuning ran (the encoder moved away from the pretrained one) and predicts 2 logits.
  assert ns["logits"].shape == (2, 2)
  before = {w.path: w.numpy() for w in same.encoder.weights}
  assert any(not np.array_equal(before[w.path], w.numpy())
             for w in ns["classifier"].bert.weights)
  # The Hugging Face folder.
  config = json.loads((tmp_path / "bert-base-uncased-hf" / "config.json").read_text())
  assert config["architectures"] == ["BertForPreTraining"] and config["hidden_act"] == "gelu_new"


def test_features_are_the_encoders_inputs(tiny_bert):
  # The hand-tokenized pairs of conftest: ids by the vocab's line numbers, B from its start.
  features = tiny_bert.features([pair for pair, _, _ in NEXT_SENTENCE])
  length = max(len(tokens) for _, tokens, _ in NEXT_SENTENCE)
  for i, (_, tokens, b_start) in enumerate(NEXT_SENTENCE):
    n = len(tokens)
    assert features["input_word_ids"][i].tolist() == (
        [TINY_VOCAB.index(t) for t in tokens] + [0] * (length - n))
    assert features["input_mask"][i].tolist() == [1] * n + [0] * (length - n)
    assert features["input_type_ids"][i].tolist() == (
        [0] * b_start + [1] * (n - b_start) + [0] * (length - n))
  assert {v.dtype for v in features.values()} == {np.dtype(np.int32)}
