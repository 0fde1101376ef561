"""Real pretrained weights (all-MiniLM-L6-v2) against Hugging Face transformers' own outputs.

tests/fixtures/minilm_reference.npz was made by tests/fixtures/make_minilm_reference.py with
torch + transformers (see its docstring); bert_tf must reproduce every hidden state, the
pooled output and every attention map within 1e-5.
"""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.modeling import BertModel, checkpoints
from bert_tf.modeling.config import BertConfig
from tests.conftest import FIXTURES

TOL = 1e-5


@pytest.fixture(scope="module")
def reference():
  return dict(np.load(FIXTURES / "minilm_reference.npz"))


def _run(model, reference):
  return model({"input_word_ids": reference["input_ids"], "input_mask": reference["input_mask"],
                "input_type_ids": reference["input_type_ids"]}, output_attentions=True)


def _assert_matches(outputs, reference):
  hidden = [outputs["embedding_output"]] + outputs["encoder_outputs"]
  assert len(hidden) == reference["hidden_states"].shape[0] == 7
  for ours, theirs in zip(hidden, reference["hidden_states"]):
    np.testing.assert_allclose(ours, theirs, atol=TOL)
  np.testing.assert_allclose(outputs["pooled_output"], reference["pooled_output"], atol=TOL)
  for ours, theirs in zip(outputs["attention_probs"], reference["attentions"]):
    np.testing.assert_allclose(ours, theirs, atol=TOL)


@pytest.fixture(scope="module")
def minilm(minilm_path):
  config = checkpoints.load_config(str(minilm_path))
  model = BertModel(config)
  report = checkpoints.load_weights(model, str(minilm_path))
  return config, model, report


def test_config_keeps_hugging_face_meaning_of_gelu(minilm):
  config, _, _ = minilm
  assert config.hidden_act == "gelu_exact"  # HF "gelu" is the erf form.
  assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (6, 384, 30522)


def test_minilm_matches_transformers(minilm, reference):
  _, model, report = minilm
  assert not report.missing and not report.unexpected
  _assert_matches(_run(model, reference), reference)


def test_minilm_as_google_checkpoint_gives_same_numbers(minilm, reference, tmp_path):
  config, model, _ = minilm
  prefix = checkpoints.save_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
  reader = tf.train.load_checkpoint(prefix)
  shapes = reader.get_variable_to_shape_map()
  # Google's names and [in,out] kernels.
  assert shapes["bert/encoder/layer_0/intermediate/dense/kernel"] == [384, 1536]
  assert shapes["bert/embeddings/LayerNorm/gamma"] == [384]
  again = BertModel(config)
  report = checkpoints.load_weights(again, prefix)
  assert not report.missing
  _assert_matches(_run(again, reference), reference)


def test_prefixed_weights_and_heads(minilm_path, minilm, tmp_path):
  """``bert.``-prefixed names (BertForPreTraining layout) load too; a classifier head is
  reported missing, not silently ignored."""
  from safetensors.numpy import load_file, save_file
  from bert_tf.modeling import BertClassifier
  tensors = load_file(str(minilm_path / "model.safetensors"))
  prefixed = {"bert." + k: v for k, v in tensors.items()}
  save_file(prefixed, str(tmp_path / "model.safetensors"))
  shutil.copy(minilm_path / "config.json", tmp_path / "config.json")
  config = checkpoints.load_config(str(tmp_path))
  model = BertClassifier(config, num_labels=3)
  report = checkpoints.load_weights(model, str(tmp_path))
  assert report.missing == ["output_weights", "output_bias"]
  np.testing.assert_array_equal(model.bert.word_embeddings.numpy(),
                                minilm[1].word_embeddings.numpy())


def test_hugging_face_tensors_the_model_has_no_place_for(minilm_path, tmp_path):
  """As for Google's checkpoints: encoder tensors the config has no variable for (MiniLM's
  sixth layer in a config of five) are an error naming one, never a partly loaded encoder;
  tensors of a head the model lacks (BertForPreTraining's next-sentence head in a BertModel)
  are reported as unexpected, under their Hugging Face names."""
  from safetensors.numpy import load_file, save_file
  config = checkpoints.load_config(str(minilm_path))
  five = BertModel(BertConfig.from_dict(dict(config.to_dict(), num_hidden_layers=5)))
  with pytest.raises(BertTfError, match=r"encoder variable\(s\) the config does not, e\.g\. "
                     r"encoder\.layer\.5\."):
    checkpoints.load_weights(five, str(minilm_path))
  tensors = load_file(str(minilm_path / "model.safetensors"))
  tensors["cls.seq_relationship.weight"] = np.zeros([2, config.hidden_size], np.float32)
  tensors["cls.seq_relationship.bias"] = np.zeros([2], np.float32)
  save_file(tensors, str(tmp_path / "model.safetensors"))
  report = checkpoints.load_weights(BertModel(config), str(tmp_path / "model.safetensors"))
  assert not report.missing
  assert report.unexpected == ["cls.seq_relationship.bias", "cls.seq_relationship.weight"]


def test_old_layer_norm_names_load_as_transformers_reads_them(minilm_path, reference, tmp_path):
  """Older conversions (bert-base-uncased's own files among them) name LayerNorm's scale and
  offset ``gamma`` / ``beta``; transformers reads them as ``weight`` / ``bias``, and so must
  bert_tf: the same numbers as transformers', nothing missing or left over."""
  from safetensors.numpy import load_file, save_file
  tensors = load_file(str(minilm_path / "model.safetensors"))
  renamed = {"bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma")
                        .replace("LayerNorm.bias", "LayerNorm.beta"): v
             for k, v in tensors.items()}
  assert sum(k.endswith("LayerNorm.gamma") for k in renamed) == 13  # embeddings + 6 x 2
  assert sum(k.endswith("LayerNorm.beta") for k in renamed) == 13
  save_file(renamed, str(tmp_path / "model.safetensors"))
  shutil.copy(minilm_path / "config.json", tmp_path / "config.json")
  model = BertModel(checkpoints.load_config(str(tmp_path)))
  report = checkpoints.load_weights(model, str(tmp_path))
  assert not report.missing and not report.unexpected
  _assert_matches(_run(model, reference), reference)


def test_google_gelu_means_tanh_approximation():
  from bert_tf.modeling.activations import gelu, gelu_exact
  x = np.linspace(-4, 4, 33).astype(np.float32)
  tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
  from math import erf
  erf_form = np.array([0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x], np.float32)
  np.testing.assert_allclose(gelu(tf.constant(x)), tanh_form, atol=1e-6)
  np.testing.assert_allclose(gelu_exact(tf.constant(x)), erf_form, atol=1e-6)
  assert np.abs(tanh_form - erf_form).max() > 1e-4  # the two really differ


def test_hugging_face_config_translation(tmp_path):
  values = {"model_type": "bert", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu_new",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 16, "type_vocab_size": 2, "initializer_range": 0.02}
  path = tmp_path / "config.json"
  path.write_text(json.dumps(values))
  assert BertConfig.from_json_file(str(path)).hidden_act == "gelu"  # gelu_new = tanh form


def test_every_hugging_face_activation_name_keeps_transformers_function():
  """Each hidden_act a Hugging Face config.json may carry reads as the function transformers
  computes for it (ACT2FN), and writes back (to_hugging_face_dict) as a name transformers
  computes the same function for; a config.json without layer_norm_eps has transformers'
  default."""
  torch = pytest.importorskip("torch", reason="torch is a test-only dependency")
  transformers = pytest.importorskip("transformers", reason="transformers is a test-only "
                                     "dependency")
  from transformers.activations import ACT2FN
  from bert_tf.modeling.activations import get_activation
  x = np.linspace(-6.0, 6.0, 241).astype(np.float32)
  values = {"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16, "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 16,
            "type_vocab_size": 2, "initializer_range": 0.02, "model_type": "bert"}

  def theirs(name):
    return ACT2FN[name](torch.tensor(x)).numpy()

  for name in ("gelu", "gelu_python", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu",
               "tanh", "linear", "silu", "swish"):
    config = BertConfig.from_hugging_face_dict(dict(values, hidden_act=name))
    fn = get_activation(config.hidden_act) or (lambda t: t)
    ours = fn(tf.constant(x)).numpy()
    np.testing.assert_allclose(ours, theirs(name), atol=1e-5, err_msg=name)
    written = config.to_hugging_face_dict()["hidden_act"]
    np.testing.assert_allclose(ours, theirs(written), atol=1e-5, err_msg=f"{name} -> {written}")
  assert abs(theirs("gelu") - theirs("gelu_new")).max() > 1e-4  # the two GELUs differ
  config = BertConfig.from_hugging_face_dict(dict(values, hidden_act="gelu"))
  assert config.layer_norm_eps == transformers.BertConfig().layer_norm_eps


def test_minilm_under_mixed_bfloat16_stays_near_transformers(minilm_path, minilm, reference):
  """Under mixed_bfloat16 the residual stream between the layers is bf16 (LayerNorm computed
  in float32, its output rounded once) and the outputs float32: every hidden state within
  bf16's rounding of transformers' float32 ones (measured: at most about 1% relative error, as
  with the former float32 residual stream)."""
  config, model, _ = minilm
  mixed = BertModel(config, dtype="mixed_bfloat16")
  mixed.set_weights(model.get_weights())
  word_ids = tf.constant(reference["input_ids"], tf.int32)
  type_ids = tf.constant(reference["input_type_ids"], tf.int32)
  stream = mixed.embeddings(word_ids, type_ids)
  assert stream.dtype == tf.bfloat16
  adder = tf.zeros([word_ids.shape[0], 1, 1, word_ids.shape[1]])
  assert mixed.encoder_layers[0](stream, adder)[0].dtype == tf.bfloat16
  outputs = _run(mixed, reference)
  hidden = [outputs["embedding_output"]] + outputs["encoder_outputs"]
  mask = reference["input_mask"].astype(bool)
  for i, (ours, theirs) in enumerate(zip(hidden, reference["hidden_states"])):
    assert ours.dtype == tf.float32
    ours, theirs = ours.numpy()[mask], theirs[mask]
    relative = np.linalg.norm(ours - theirs) / np.linalg.norm(theirs)
    assert relative < 0.02, (i, relative)
