"""One way of counting layers: ``embed``/``word_embedding``'s ``layers`` and the CLI's
``--layers`` count encoder layers as extract_features.py's ``--layers`` does (the original's
``get_all_encoder_layers()[i]``: -1 the last, 0 the first), ``"embeddings"`` naming the
embedding output; checked against extract_features' JSON output on the tiny Google model."""

import json

import numpy as np
import pytest

from bert_tf import extract, tokenization
from bert_tf.modeling import BertModel, checkpoints

TEXT = "the cat sat on the mat ."


@pytest.fixture(scope="module")
def extracted(tiny_google, tmp_path_factory):
  """extract_features' per-token values for every encoder layer of the tiny 2-layer model."""
  folder, _ = tiny_google
  tmp = tmp_path_factory.mktemp("layers")
  (tmp / "input.txt").write_text(TEXT + "\n")
  config = checkpoints.load_config(str(folder / "bert_config.json"))
  assert config.num_hidden_layers == 2
  model = BertModel(config)
  checkpoints.load_weights(model, str(folder / "bert_model.ckpt"))
  tokenizer = tokenization.FullTokenizer(str(folder / "vocab.txt"))
  extract.extract_features(model, tokenizer, str(tmp / "input.txt"), str(tmp / "out.jsonl"),
                           layers="-1,-2,0,1", max_seq_length=16)
  features = json.loads((tmp / "out.jsonl").read_text())["features"]
  return {layer["index"]: np.array([[f["layers"][j]["values"] for f in features]])[0]
          for j, layer in enumerate(features[0]["layers"])}  # index -> [S,H]


@pytest.mark.parametrize("layer", [-1, -2, 0, 1])
def test_embed_layers_are_extract_features_layers(tiny_bert, extracted, layer):
  words = TEXT.split()
  for position in (0, 3, 6):  # One word piece each: a word's vector is its token's.
    vector = tiny_bert.word_embedding(TEXT, position, layers=[layer])
    np.testing.assert_allclose(vector, extracted[layer][position + 1], atol=2e-6,
                               err_msg=f"{layer} {words[position]}")
  mean = tiny_bert.embed(TEXT, pooling="mean", layers=layer)
  np.testing.assert_allclose(mean[0], extracted[layer].mean(axis=0), atol=2e-6)


def test_embeddings_by_name_and_out_of_range(tiny_bert, extracted):
  out = tiny_bert(TEXT, output_hidden_states=True)
  np.testing.assert_allclose(tiny_bert.embed(TEXT, pooling="cls", layers="embeddings")[0],
                             out.hidden_states[0][0, 0], atol=1e-6)
  np.testing.assert_allclose(out.hidden_states[1][0], extracted[0], atol=2e-6)  # HF's count
  np.testing.assert_allclose(out.hidden_states[-1][0], extracted[-1], atol=2e-6)
  # -3 is an error for both on a 2-layer model (embed no longer reaches the embeddings).
  with pytest.raises(Exception, match=r"-3 is not an encoder layer of this 2-layer model"):
    tiny_bert.embed(TEXT, layers=-3)
  with pytest.raises(Exception, match=r"--layers: index -3 is out of range for a model with 2 "
                     r"layers"):
    extract.parse_layers("-3", 2)


def test_cli_layers_take_embeddings_by_name(tiny_google, tiny_bert, tmp_path):
  """`bert_tf embed --layers=embeddings,-1`: the same vectors as the library's call."""
  import io  # pylint: disable=import-outside-toplevel
  from bert_tf import __main__ as cli  # pylint: disable=import-outside-toplevel
  folder, _ = tiny_google
  out = io.StringIO()
  assert cli.main(["embed", f"--model={folder}", "--layers=embeddings,-1", "--combine=concat",
                   "--pooling=mean", f"--output_file={tmp_path / 'e.npy'}", TEXT], out) == 0
  np.testing.assert_allclose(
      np.load(tmp_path / "e.npy"),
      tiny_bert.embed(TEXT, pooling="mean", layers=["embeddings", -1], combine="concat"),
      atol=1e-6)
