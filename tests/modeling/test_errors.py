"""Bad inputs get one-line errors that name the file or variable at fault."""

import json
import shutil

import pytest

from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig, BertModel, BertPretrainer, checkpoints
from tests.reference import google_models

TINY = google_models.tiny_config_dict()


def _one_line(excinfo):
  message = str(excinfo.value)
  assert "\n" not in message
  return message


@pytest.mark.parametrize("change,needle", [
    ({"hidden_size": 30}, "not a multiple of num_attention_heads"),
    ({"hidden_act": "gelu2"}, "unknown hidden_act 'gelu2'"),
    ({"vocab_size": 0}, "vocab_size must be a positive integer"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be in [0, 1)"),
    # Were tracebacks (ValueError, TypeError, Keras' own), or a model of NaN outputs.
    ({"hidden_dropout_prob": "abc"}, "hidden_dropout_prob must be in [0, 1), got 'abc'"),
    ({"attention_probs_dropout_prob": None},
     "attention_probs_dropout_prob must be in [0, 1), got None"),
    ({"hidden_act": ["gelu"]}, "unknown hidden_act ['gelu']"),
    ({"initializer_range": "x"}, "initializer_range must be a number >= 0, got 'x'"),
    ({"layer_norm_eps": "x"}, "layer_norm_eps must be a number > 0, got 'x'"),
    ({"layer_norm_eps": -1}, "layer_norm_eps must be a number > 0, got -1"),
    ({"layer_norm_eps": 0}, "layer_norm_eps must be a number > 0, got 0"),
])
def test_impossible_config(tmp_path, change, needle):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps({**TINY, **change}))
  with pytest.raises(BertTfError) as excinfo:
    BertConfig.from_json_file(str(path))
  message = _one_line(excinfo)
  assert needle in message and str(path) in message


def test_config_file_not_utf8_or_a_folder(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_bytes(json.dumps(TINY).encode("utf-8").replace(b'"gelu"', b'"gel\xff"'))
  with pytest.raises(BertTfError) as excinfo:
    BertConfig.from_json_file(str(path))
  assert _one_line(excinfo).startswith(f"{path}:1: not valid UTF-8")
  with pytest.raises(BertTfError) as excinfo:
    BertConfig.from_json_file(str(tmp_path))
  assert _one_line(excinfo) == (f"config file {str(tmp_path)!r} is a folder (give its "
                                "bert_config.json or config.json)")


def test_missing_field_and_bad_json(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps({k: v for k, v in TINY.items() if k != "type_vocab_size"}))
  with pytest.raises(BertTfError, match="missing field.*type_vocab_size"):
    BertConfig.from_json_file(str(path))
  path.write_text("{not json")
  with pytest.raises(BertTfError, match="not valid JSON"):
    BertConfig.from_json_file(str(path))
  with pytest.raises(BertTfError, match="config file not found"):
    BertConfig.from_json_file(str(tmp_path / "nope.json"))


def test_config_round_trips_google_json(tmp_path):
  config = BertConfig.from_dict(TINY)
  config.to_json_file(str(tmp_path / "c.json"))
  assert json.loads((tmp_path / "c.json").read_text()) == TINY


@pytest.fixture(scope="module")
def google_checkpoint(tmp_path_factory):
  features = google_models.random_pretraining_features(TINY)
  path = str(tmp_path_factory.mktemp("ckpt") / "bert_model.ckpt")
  google_models.run_google_pretraining(TINY, features, save_path=path)
  return path


def test_missing_checkpoint(tmp_path):
  model = BertModel(BertConfig.from_dict(TINY))
  with pytest.raises(BertTfError, match="checkpoint not found"):
    checkpoints.load_weights(model, str(tmp_path / "bert_model.ckpt"))


def test_a_head_fine_tuned_for_other_labels_says_so(tmp_path):
  """MNLI (3 labels) started from a checkpoint fine-tuned on MRPC (2): the config is right,
  the head is another task's (helper-50: the error asked whether the config belonged)."""
  from bert_tf.modeling import BertClassifier
  config = BertConfig.from_dict(TINY)
  mrpc = BertClassifier(config, num_labels=2)
  prefix = checkpoints.save_google_checkpoint(mrpc, str(tmp_path / "bert_model.ckpt"))
  with pytest.raises(BertTfError) as raised:
    checkpoints.load_weights(BertClassifier(config, num_labels=3), prefix)
  assert str(raised.value) == (
      f"{prefix}: its classification head (output_weights) has 2 outputs, this model 3 labels: "
      "it was fine-tuned for other labels; start from the pretrained checkpoint it came from, "
      "or give the labels it was fine-tuned with")
  assert checkpoints.load_weights(BertClassifier(config, num_labels=2), prefix).loaded


def test_the_original_checkpoint_names_and_files(tmp_path):
  """What a user of the original types: its Estimator's model.ckpt-N where bert_tf wrote
  ckpt-N (the error names the file to use), and the TF1 graph file bert_model.ckpt.meta for
  the checkpoint (its prefix, as .index and .data-* are)."""
  (tmp_path / "ckpt-20.index").write_bytes(b"")
  with pytest.raises(BertTfError) as raised:
    checkpoints.resolve_checkpoint_prefix(str(tmp_path / "model.ckpt-20"))
  assert str(raised.value).endswith(f"use {tmp_path / 'ckpt-20'}")
  with pytest.raises(BertTfError) as raised:
    checkpoints.resolve_checkpoint_prefix(str(tmp_path / "model.ckpt-21"))
  assert "use " not in str(raised.value)
  for suffix in (".meta", ".index", ".data-00000-of-00001"):
    (tmp_path / f"bert_model.ckpt{suffix}").write_bytes(b"")
  for suffix in (".meta", ".index", ".data-00000-of-00001"):
    assert checkpoints.resolve_checkpoint_prefix(
        str(tmp_path / f"bert_model.ckpt{suffix}")) == str(tmp_path / "bert_model.ckpt")


def test_a_folder_without_its_checkpoint_file_gives_its_latest_checkpoint(tmp_path):
  """A copied folder without TensorFlow's 'checkpoint' file: the highest step (ckpt-10000
  sorts before ckpt-14000 and was loaded silently), the one checkpoint there, or, for several
  names, one line asking which."""
  def folder(name, prefixes):
    path = tmp_path / name
    path.mkdir()
    for prefix in prefixes:
      (path / f"{prefix}.index").write_bytes(b"")
    return str(path)
  assert checkpoints.resolve_checkpoint_prefix(
      folder("steps", ["ckpt-10000", "ckpt-14000", "ckpt-9"])).endswith("/ckpt-14000")
  assert checkpoints.resolve_checkpoint_prefix(
      folder("google", ["model.ckpt-300", "model.ckpt-200"])).endswith("/model.ckpt-300")
  assert checkpoints.resolve_checkpoint_prefix(
      folder("one", ["bert_model.ckpt"])).endswith("/bert_model.ckpt")
  # A copy whose "checkpoint" file names the original folder's absolute path (TF1's Saver
  # writes them): the copy's own checkpoint, not the original's.
  original = folder("original", ["model.ckpt-7"])
  copy = folder("copy", ["model.ckpt-7"])
  (tmp_path / "copy" / "checkpoint").write_text(
      f'model_checkpoint_path: "{original}/model.ckpt-7"\n')
  assert checkpoints.resolve_checkpoint_prefix(copy) == f"{copy}/model.ckpt-7"
  # The one it names is missing (its .index not copied): said, not another one loaded, and
  # without TensorFlow's ERROR line.
  (tmp_path / "copy" / "model.ckpt-7.index").unlink()
  (tmp_path / "copy" / "model.ckpt-5.index").write_bytes(b"")
  (tmp_path / "copy" / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-7"\n')
  with pytest.raises(BertTfError) as e:
    checkpoints.resolve_checkpoint_prefix(copy)
  assert str(e.value) == (f"{copy}/checkpoint names model.ckpt-7, but {copy!r} has no "
                          "model.ckpt-7.index (a partial copy?): copy it, or give the "
                          "checkpoint to use")
  mixed = folder("mixed", ["bert_model.ckpt", "ckpt-5"])
  with pytest.raises(BertTfError) as e:
    checkpoints.resolve_checkpoint_prefix(mixed)
  assert str(e.value) == (f"{mixed!r} holds 2 checkpoints (bert_model.ckpt, ckpt-5) and no "
                          "'checkpoint' file naming the latest: give the one to use (its path "
                          "without .index)")


def test_wrong_config_for_checkpoint(google_checkpoint):
  model = BertModel(BertConfig.from_dict({**TINY, "num_hidden_layers": 1}))
  with pytest.raises(BertTfError) as excinfo:
    checkpoints.load_weights(model, google_checkpoint)
  assert "encoder variable(s) the config does not" in _one_line(excinfo)
  model = BertModel(BertConfig.from_dict({**TINY, "num_hidden_layers": 3}))
  with pytest.raises(BertTfError, match="lacks .* encoder variable.*layer_2"):
    checkpoints.load_weights(model, google_checkpoint)
  model = BertModel(BertConfig.from_dict({**TINY, "intermediate_size": 40}))
  with pytest.raises(BertTfError, match=r"intermediate/dense/kernel has shape \[32, 37\] in the "
                     r"checkpoint but \[32, 40\] in the model"):
    checkpoints.load_weights(model, google_checkpoint)


def test_a_data_file_names_its_checkpoint(google_checkpoint):
  """--init_checkpoint=bert_model.ckpt.data-00000-of-00001 (the file a user sees) was 'no
  bert_model.ckpt.data-00000-of-00001.index'; its .index was taken."""
  for path in (google_checkpoint + ".data-00000-of-00001", google_checkpoint + ".index"):
    assert checkpoints.resolve_checkpoint_prefix(path) == google_checkpoint
  model = BertModel(BertConfig.from_dict(TINY))
  report = checkpoints.load_weights(model, google_checkpoint + ".data-00000-of-00001")
  assert not report.missing or all(not n.startswith("bert/encoder") for n in report.missing)


def test_vocab_size_mismatch(google_checkpoint):
  model = BertPretrainer(BertConfig.from_dict({**TINY, "vocab_size": 100}))
  with pytest.raises(BertTfError) as excinfo:
    checkpoints.load_weights(model, google_checkpoint)
  assert "word_embeddings has shape [99, 32]" in _one_line(excinfo)


def test_truncated_checkpoint(google_checkpoint, tmp_path):
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(google_checkpoint + suffix, tmp_path / ("bert_model.ckpt" + suffix))
  data = tmp_path / "bert_model.ckpt.data-00000-of-00001"
  data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
  model = BertModel(BertConfig.from_dict(TINY))
  with pytest.raises(BertTfError) as excinfo:
    checkpoints.load_weights(model, str(tmp_path / "bert_model.ckpt"))
  assert "unreadable" in _one_line(excinfo)


def test_hugging_face_errors(tmp_path, minilm_path):
  model = BertModel(BertConfig.from_dict(TINY))
  (tmp_path / "model.safetensors").write_bytes(b"garbage")
  with pytest.raises(BertTfError, match="not a readable safetensors file"):
    checkpoints.load_weights(model, str(tmp_path))
  # The real MiniLM weights into a config of another size: shape error naming the variable.
  with pytest.raises(BertTfError, match=r"word_embeddings has shape \[30522, 384\]"):
    checkpoints.load_weights(model, str(minilm_path))


def test_partial_head_load_is_reported(google_checkpoint):
  from bert_tf.modeling import BertClassifier
  model = BertClassifier(BertConfig.from_dict(TINY), num_labels=2)
  report = checkpoints.load_weights(model, google_checkpoint)
  assert report.missing == ["output_weights", "output_bias"]
  assert "cls/predictions/output_bias" in report.unexpected
  assert "missing (left at their initial values): output_weights" in str(report)


def test_config_checked_against_the_checkpoint_before_building(google_checkpoint, tmp_path,
                                                                minilm_path):
  """The layer count and the word-embedding / intermediate shapes, from the checkpoint's index
  or header only, in Google, bert_tf and Hugging Face weights: a mistyped num_hidden_layers
  (10**8 here) was built layer by layer before the load compared anything (a hang)."""
  trained = tmp_path / "trained"
  model = BertModel(BertConfig.from_dict(TINY))
  checkpoints.load_weights(model, google_checkpoint)
  tf_checkpoint = __import__("tensorflow").train.Checkpoint(
      model=checkpoints.trackable_variables(model))
  trained_prefix = tf_checkpoint.write(str(trained / "ckpt-1"))
  minilm = {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
            "num_attention_heads": 12, "intermediate_size": 1536}
  for path, sizes in ((google_checkpoint, TINY), (trained_prefix, TINY),
                      (str(trained), TINY), (str(minilm_path), minilm)):
    checkpoints.check_config_fits(BertConfig.from_dict({**TINY, **sizes}), path)  # fits
    config = BertConfig.from_dict({**TINY, **sizes, "num_hidden_layers": 10 ** 8})
    with pytest.raises(BertTfError) as excinfo:
      checkpoints.check_config_fits(config, path)
    assert (f"the checkpoint has {sizes['num_hidden_layers']} encoder layers but the config "
            "says num_hidden_layers 100000000 (does the config belong to this checkpoint?)"
            in _one_line(excinfo))
    hidden = BertConfig.from_dict({**TINY, **sizes, "vocab_size": 7})
    with pytest.raises(BertTfError, match=r"variable bert/embeddings/word_embeddings has shape "
                       rf"\[{sizes['vocab_size']}, {sizes['hidden_size']}\] in the checkpoint "
                       rf"but \[7, {sizes['hidden_size']}\] in the model"):
      checkpoints.check_config_fits(hidden, path)
    inner = BertConfig.from_dict({**TINY, **sizes, "intermediate_size": 10 ** 9})
    with pytest.raises(BertTfError, match=r"layer_0/intermediate/dense/kernel has shape "
                       rf"\[{sizes['hidden_size']}, {sizes['intermediate_size']}\] in the "
                       rf"checkpoint but \[{sizes['hidden_size']}, 1000000000\] in the model"):
      checkpoints.check_config_fits(inner, path)
  # What cannot be listed is left to the load's own error.
  checkpoints.check_config_fits(BertConfig.from_dict(TINY), str(tmp_path / "missing"))
  # bert_tf.load (python -m bert_tf) of a folder whose config says 10**8 layers: the same line.
  folder = tmp_path / "model"
  folder.mkdir()
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(google_checkpoint + suffix, folder / ("bert_model.ckpt" + suffix))
  (folder / "bert_config.json").write_text(json.dumps({**TINY, "num_hidden_layers": 10 ** 8}))
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  (folder / "vocab.txt").write_text("\n".join(special + [f"w{i}" for i in range(
      TINY["vocab_size"] - len(special))]) + "\n")
  import bert_tf  # pylint: disable=import-outside-toplevel
  with pytest.raises(BertTfError, match="the checkpoint has 2 encoder layers but the config "
                     "says num_hidden_layers 100000000"):
    bert_tf.load(str(folder))
