"""Hugging Face export (``bert_tf.export_hugging_face``, ``python -m bert_tf export-hf``):
transformers loads the folder and gives the same hidden states and MLM/NSP logits within 1e-5
(Google's tanh GELU and Hugging Face's exact one); bert_tf loads it back bit for bit; a
Hugging Face folder comes back as the very tensors transformers wrote."""

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf.__main__ import main as cli_main
from bert_tf.modeling import BertModel, BertPretrainer, checkpoints
from bert_tf.modeling.config import BertConfig
from tests.conftest import FIXTURES
from tests.inference.conftest import TINY_VOCAB

TOL = 1e-5
HF_FIXTURE = FIXTURES / "tiny_hf_pretraining"  # transformers' own BertForPreTraining, "gelu"
TEXTS = [("the cat sat on the [MASK] .", None),
         ("he walked to the store .", "she bought milk ."),
         ("Paris is the capital of France.", "The dog barked in the park.")]


def _randomize(model, seed):
  """Every variable at random, large enough that the two GELUs differ beyond 1e-5."""
  rng = np.random.RandomState(seed)
  for variable in model.weights:
    shape = tuple(variable.shape)
    if variable.path.endswith("gamma"):
      variable.assign(1.0 + 0.1 * rng.randn(*shape).astype(np.float32))
    else:
      variable.assign(0.3 * rng.randn(*shape).astype(np.float32))


@pytest.fixture(scope="module")
def google_folder(tmp_path_factory):
  """A Google-layout folder (tanh ``"gelu"``, both heads) with large random weights."""
  folder = tmp_path_factory.mktemp("google") / "tiny"
  folder.mkdir()
  config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=37, max_position_embeddings=64,
                      type_vocab_size=2)
  model = BertPretrainer(config)
  _randomize(model, seed=3)
  checkpoints.save_google_checkpoint(model, str(folder / "bert_model.ckpt"))
  config.to_json_file(str(folder / "bert_config.json"))
  (folder / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
  return folder


def _bert_tf_outputs(bert):
  """bert_tf's hidden states [L+1,B,S,H], MLM logits at every position [B,S,V], NSP logits."""
  out = bert([a if b is None else (a, b) for a, b in TEXTS], output_hidden_states=True)
  ids, mask, types = out.input_word_ids, out.input_mask, out.input_type_ids
  positions = np.tile(np.arange(ids.shape[1], dtype=np.int32), (len(ids), 1))
  heads = bert.model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                      "masked_lm_positions": positions})
  return out, np.stack(out.hidden_states), np.asarray(heads["masked_lm_logits"]), np.asarray(
      heads["next_sentence_logits"])


def _saved_tensors(folder):
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("source,hidden_act", [("google", "gelu_new"), ("hf", "gelu")])
def test_transformers_gives_the_same_numbers(source, hidden_act, google_folder, tmp_path):
  torch = pytest.importorskip("torch", reason="torch is a test-only dependency (pip install "
                              "'bert_tf[test]')")
  transformers = pytest.importorskip("transformers", reason="transformers is a test-only "
                                     "dependency (pip install 'bert_tf[test]')")
  folder = google_folder if source == "google" else HF_FIXTURE
  out_dir = tmp_path / "hf"
  assert bert_tf.export_hugging_face(str(folder), str(out_dir)) == str(out_dir)
  assert sorted(os.listdir(out_dir)) == ["config.json", "model.safetensors",
                                         "special_tokens_map.json", "tokenizer_config.json",
                                         "vocab.txt"]
  config = json.loads((out_dir / "config.json").read_text())
  assert config["hidden_act"] == hidden_act and config["architectures"] == ["BertForPreTraining"]
  bert = bert_tf.load(str(folder))
  out, hidden, mlm, nsp = _bert_tf_outputs(bert)

  # Hugging Face's tokenizer on the folder: the same ids as bert_tf's.
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(out_dir), local_files_only=True)
  for i, (a, b) in enumerate(TEXTS):
    n = int(out.input_mask[i].sum())
    assert tokenizer(a, b)["input_ids"] == out.input_word_ids[i, :n].tolist()

  def run(model):
    with torch.no_grad():
      result = model(input_ids=torch.tensor(out.input_word_ids, dtype=torch.long),
                     attention_mask=torch.tensor(out.input_mask, dtype=torch.long),
                     token_type_ids=torch.tensor(out.input_type_ids, dtype=torch.long),
                     output_hidden_states=True)
    return (np.stack([h.numpy() for h in result.hidden_states]),
            result.prediction_logits.numpy(), result.seq_relationship_logits.numpy())

  model, info = transformers.BertForPreTraining.from_pretrained(
      str(out_dir), local_files_only=True, attn_implementation="eager",
      output_loading_info=True)
  model.eval()
  assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys",
                                       "error_msgs")), info
  their_hidden, their_mlm, their_nsp = run(model)
  real = out.input_mask.astype(bool)  # padding positions differ by design (zeros in bert_tf)
  np.testing.assert_allclose(hidden[:, real], their_hidden[:, real], atol=TOL, rtol=0)
  np.testing.assert_allclose(mlm[real], their_mlm[real], atol=TOL, rtol=0)
  np.testing.assert_allclose(nsp, their_nsp, atol=TOL, rtol=0)
  # The test can fail: the other GELU is off by far more than the tolerance.
  model.config.hidden_act = "gelu" if hidden_act == "gelu_new" else "gelu_new"
  other = transformers.BertForPreTraining(model.config).eval()
  other.load_state_dict(model.state_dict())
  assert np.abs(run(other)[1][real] - mlm[real]).max() > 10 * TOL


def test_a_hugging_face_folder_comes_back_as_the_same_tensors(tmp_path):
  bert_tf.export_hugging_face(str(HF_FIXTURE), str(tmp_path / "hf"))
  theirs, ours = _saved_tensors(HF_FIXTURE), _saved_tensors(tmp_path / "hf")
  assert sorted(ours) == sorted(theirs)
  for name, value in theirs.items():
    assert ours[name].dtype == value.dtype and ours[name].shape == value.shape, name
    np.testing.assert_array_equal(ours[name], value, err_msg=name)
  assert (tmp_path / "hf" / "vocab.txt").read_text() == (HF_FIXTURE / "vocab.txt").read_text()


def test_bert_tf_loads_it_back_bit_for_bit(google_folder, tmp_path):
  original = bert_tf.load(str(google_folder))
  bert_tf.export_hugging_face(original, str(tmp_path / "hf"))
  tokenizer_config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
  assert tokenizer_config["do_lower_case"] is True
  assert json.loads((tmp_path / "hf" / "special_tokens_map.json").read_text()) == {
      "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
      "mask_token": "[MASK]"}
  back = bert_tf.load(str(tmp_path / "hf"))
  assert back.config == original.config
  assert (back.has_masked_lm, back.has_next_sentence, back.do_lower_case) == (True, True, True)
  assert not back.load_report.missing and not back.load_report.unexpected
  for a, b in zip(original.model.weights, back.model.weights):
    assert a.path == b.path
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_a_keras_encoder_is_a_bert_model_and_casing_comes_from_the_vocab(tmp_path):
  config = BertConfig(vocab_size=6, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=16, max_position_embeddings=16, hidden_act="gelu_exact")
  encoder = BertModel(config)
  _randomize(encoder, seed=5)
  (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nParis\n##is\n")
  with pytest.raises(bert_tf.BertTfError, match=r"^export_hugging_face: a Keras model needs "
                     r"vocab_file="):
    bert_tf.export_hugging_face(encoder, str(tmp_path / "hf"))
  bert_tf.export_hugging_face(encoder, str(tmp_path / "hf"),
                              vocab_file=str(tmp_path / "vocab.txt"))
  config_json = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config_json["architectures"] == ["BertModel"] and config_json["hidden_act"] == "gelu"
  assert BertConfig.from_hugging_face_dict(config_json) == config
  tensors = _saved_tensors(tmp_path / "hf")
  assert "embeddings.word_embeddings.weight" in tensors and not any(
      k.startswith(("bert.", "cls.")) for k in tensors)
  np.testing.assert_array_equal(tensors["encoder.layer.0.attention.self.query.weight"],
                                encoder.weights[[v.path for v in encoder.weights].index(
                                    "bert/encoder/layer_0/attention/self/query/kernel")]
                                .numpy().T)
  tokenizer_config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
  assert tokenizer_config["do_lower_case"] is False  # "Paris": a cased vocab
  assert "mask_token" not in tokenizer_config  # not in this vocab
  # A vocab that lists a token twice: every line is written, so Hugging Face's ids (line
  # numbers) stay the rows of the table (the tokens only, once each, moved later ids).
  (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\nParis\n[SEP]\nParis\n##is\n")
  bert_tf.export_hugging_face(encoder, str(tmp_path / "hf2"),
                              vocab_file=str(tmp_path / "vocab.txt"))
  assert (tmp_path / "hf2" / "vocab.txt").read_text() == (tmp_path / "vocab.txt").read_text()


def test_a_keras_pretrainer_is_a_bert_for_pretraining(tmp_path):
  """A Keras ``BertPretrainer`` is written with both heads: transformers' BertForPreTraining
  loads every weight and gives bert_tf's next-sentence logits (mutation audit round 3: a Keras
  pretrainer written as a BertForMaskedLM, without its next-sentence head, went unnoticed)."""
  torch = pytest.importorskip("torch", reason="torch is a test-only dependency")
  transformers = pytest.importorskip("transformers", reason="transformers is a test-only "
                                     "dependency")
  config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=24, max_position_embeddings=16)
  pretrainer = BertPretrainer(config)
  _randomize(pretrainer, seed=11)
  (tmp_path / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
  bert_tf.export_hugging_face(pretrainer, str(tmp_path / "hf"),
                              vocab_file=str(tmp_path / "vocab.txt"))
  model, info = transformers.BertForPreTraining.from_pretrained(
      str(tmp_path / "hf"), local_files_only=True, output_loading_info=True)
  assert model.config.architectures == ["BertForPreTraining"]
  assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys",
                                       "error_msgs")), info
  ids = np.array([[2, 5, 7, 9, 3, 26, 16, 3]], np.int32)  # [CLS] the cat sat [SEP] he ran [SEP]
  types = np.array([[0, 0, 0, 0, 0, 1, 1, 1]], np.int32)
  ours = pretrainer({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                     "input_type_ids": types, "masked_lm_positions": np.zeros([1, 1], np.int32)},
                    training=False)["next_sentence_logits"]
  with torch.no_grad():
    theirs = model.eval()(input_ids=torch.tensor(ids, dtype=torch.long),
                          token_type_ids=torch.tensor(types, dtype=torch.long)
                          ).seq_relationship_logits.numpy()
  np.testing.assert_allclose(np.asarray(ours), theirs, atol=TOL, rtol=0)


def test_layer_norm_eps_and_pad_token_id_reach_transformers(tmp_path):
  """A model of another ``layer_norm_eps`` (1e-3; Hugging Face models have others than
  Google's 1e-12) exports it: transformers' BertModel gives bert_tf's hidden states, which
  1e-12 misses by far more than the tolerance; ``pad_token_id`` is the id of [PAD], the one
  transformers' tokenizer pads with, here not 0 (mutation audit round 3: config.json with a
  fixed 1e-12 or pad_token_id 0 went unnoticed: every model tested had both)."""
  torch = pytest.importorskip("torch", reason="torch is a test-only dependency")
  transformers = pytest.importorskip("transformers", reason="transformers is a test-only "
                                     "dependency")
  vocab = TINY_VOCAB[1:5] + ["[PAD]"] + TINY_VOCAB[5:]  # [PAD] is id 4
  (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
  config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=37, max_position_embeddings=64,
                      type_vocab_size=2, layer_norm_eps=1e-3)
  encoder = BertModel(config)
  _randomize(encoder, seed=7)
  bert_tf.export_hugging_face(encoder, str(tmp_path / "hf"),
                              vocab_file=str(tmp_path / "vocab.txt"))
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"),
                                                         local_files_only=True)
  model = transformers.BertModel.from_pretrained(str(tmp_path / "hf"), local_files_only=True,
                                                 attn_implementation="eager").eval()
  assert model.config.layer_norm_eps == 1e-3
  assert model.config.pad_token_id == tokenizer.pad_token_id == 4
  batch = tokenizer(["the cat sat on the mat .", "he walked to the store ."], padding=True,
                    return_tensors="np")
  assert (batch["input_ids"] == 4).any()  # padded with [PAD]'s id
  ours = encoder({"input_word_ids": batch["input_ids"].astype(np.int32),
                  "input_mask": batch["attention_mask"].astype(np.int32),
                  "input_type_ids": batch["token_type_ids"].astype(np.int32)},
                 training=False)["sequence_output"].numpy()

  def run(hf_model):
    with torch.no_grad():
      return hf_model(**{k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
                      ).last_hidden_state.numpy()

  real = batch["attention_mask"].astype(bool)
  np.testing.assert_allclose(ours[real], run(model)[real], atol=TOL, rtol=0)
  # The test can fail: Google's 1e-12 is off by far more than the tolerance.
  other_config = copy.deepcopy(model.config)
  other_config.layer_norm_eps = 1e-12
  other = transformers.BertModel(other_config).eval()
  other.load_state_dict(model.state_dict())
  assert np.abs(run(other)[real] - ours[real]).max() > 10 * TOL


def test_output_dir_is_new_empty_or_a_previous_export(google_folder, tmp_path, capsys):
  bert = bert_tf.load(str(google_folder))
  taken = tmp_path / "taken"
  taken.mkdir()
  (taken / "notes.txt").write_text("mine")
  with pytest.raises(bert_tf.BertTfError, match=(
      r"^output_dir '.*taken' is a folder with other files in it \(e\.g\. 'notes\.txt'\); "
      r"nothing was written: give a new or empty folder$")):
    bert_tf.export_hugging_face(bert, str(taken), overwrite=True)
  assert os.listdir(taken) == ["notes.txt"]
  (tmp_path / "empty").mkdir()
  bert_tf.export_hugging_face(bert, str(tmp_path / "empty"))
  first = (tmp_path / "empty" / "model.safetensors").read_bytes()
  with pytest.raises(bert_tf.BertTfError, match=r"holds a previous export: pass overwrite=True"):
    bert_tf.export_hugging_face(bert, str(tmp_path / "empty"))
  # The CLI: says its own flag (it said "pass overwrite=True (--overwrite)"), and replaces it
  # with --overwrite; nothing but the export is left beside it.
  assert cli_main(["export-hf", f"--model={google_folder}",
                   f"--output_dir={tmp_path / 'empty'}"]) == 1
  assert capsys.readouterr().err == (
      f"bert_tf export-hf: error: --output_dir '{tmp_path / 'empty'}' holds a previous export: "
      "pass --overwrite to replace it, or give a new path\n")
  status = cli_main(["export-hf", f"--model={google_folder}",
                     f"--output_dir={tmp_path / 'empty'}", "--overwrite"])
  assert status == 0 and capsys.readouterr().out == f"wrote {tmp_path / 'empty'}\n"
  assert (tmp_path / "empty" / "model.safetensors").read_bytes() == first
  assert sorted(os.listdir(tmp_path)) == ["empty", "taken"]
  status = cli_main(["export-hf", f"--model={google_folder}", f"--output_dir={taken}"])
  assert status == 1
  assert capsys.readouterr().err.startswith(
      f"bert_tf export-hf: error: --output_dir '{taken}' is a folder with other files")


def test_output_dirs_refused_before_the_model_loads(google_folder, tmp_path, capsys,
                                                   monkeypatch):
  """Refused at once, before the model loads (it may be a download): the working folder (an
  export is a new folder renamed in place: its temporary sibling was named inside ".", and the
  run failed after the load), a path under a file (was a FailedPreconditionError traceback),
  the exported model's own folder (a folder transformers saved passed as a previous export
  and was replaced with --overwrite), and a folder transformers saved with a model alone."""
  (tmp_path / "here").mkdir()
  monkeypatch.chdir(tmp_path / "here")
  (tmp_path / "afile").write_text("x")
  hf = tmp_path / "hf"
  bert_tf.export_hugging_face(str(google_folder), str(hf))
  (hf / "tokenizer.json").write_text("{}")  # as transformers saves a fast tokenizer
  model_only = tmp_path / "model_only"
  model_only.mkdir()
  for name in ("config.json", "model.safetensors"):
    (model_only / name).write_bytes((hf / name).read_bytes())
  # A released model's name that is not cached (and no mirror): loading it would fail.
  monkeypatch.setenv("BERT_TF_CACHE", str(tmp_path / "cache"))
  monkeypatch.setenv("BERT_TF_MIRROR", (tmp_path / "no_mirror").as_uri())
  for output_dir, model, message in [
      (".", "bert-base-uncased", "--output_dir '.' is the working folder: an export replaces "
                                 "its folder whole; give it a folder of its own, e.g. "
                                 "'./export'"),
      ("..", "bert-base-uncased", "--output_dir '..' is a folder holding the working folder"),
      (str(tmp_path / "afile" / "sub"), "bert-base-uncased",
       f"--output_dir {tmp_path / 'afile' / 'sub'}: {tmp_path / 'afile'} is a file, not a folder"),
      (str(hf), hf, f"--output_dir {str(hf)!r} is the folder of the model exported "
                    f"({str(hf)!r}): give the export a folder of its own"),
      (str(model_only), "bert-base-uncased", f"--output_dir {str(model_only)!r} is a folder "
                                             "with other files in it (e.g. 'config.json')")]:
    status = cli_main(["export-hf", f"--model={model}", f"--output_dir={output_dir}",
                       "--overwrite"])
    err = capsys.readouterr().err
    assert status == 1 and f"error: {message}" in err, err
  assert os.listdir(tmp_path / "here") == []
  assert sorted(os.listdir(model_only)) == ["config.json", "model.safetensors"]
  # A relative path in the working folder: the export, no temporary folder left beside it.
  assert cli_main(["export-hf", f"--model={google_folder}", "--output_dir=exported"]) == 0
  assert os.listdir(tmp_path / "here") == ["exported"]


def test_a_killed_exports_half_made_folder_goes_even_when_the_next_run_is_refused(tmp_path):
  """A killed export-hf --overwrite left ``<output_dir>.tmp-<pid>-<hex>`` (its half-made
  folder): a later run refused (no --overwrite) kept it until an export went through; the
  check of the output folder removes it now (a live process's is kept)."""
  from bert_tf import fileio  # pylint: disable=import-outside-toplevel
  from bert_tf.export import hugging_face  # pylint: disable=import-outside-toplevel
  out = tmp_path / "out"
  out.mkdir()
  (out / "notes.txt").write_text("mine")
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True).stdout.strip()
  stale = tmp_path / f"out.tmp-{dead}-0123abcd"
  live = tmp_path / f"out.tmp-{os.getpid()}-4567cdef"
  for folder in (stale, live):
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"half")
  with pytest.raises(bert_tf.BertTfError, match="is a folder with other files"):
    hugging_face.check_output_dir(str(out), overwrite=False)
  assert not stale.exists() and live.exists()
  assert fileio.temp_target(live.name) == ("out", os.getpid())


def test_a_masked_lm_without_next_sentence_is_a_bert_for_masked_lm(google_folder):
  from bert_tf.export import hugging_face  # pylint: disable=import-outside-toplevel
  bert = bert_tf.load(str(google_folder))
  tensors, architecture = hugging_face.hugging_face_tensors(bert.model, masked_lm=True,
                                                           next_sentence=False)
  assert architecture == "BertForMaskedLM"
  assert sorted(k for k in tensors if k.startswith("cls.")) == [
      "cls.predictions.bias", "cls.predictions.transform.LayerNorm.bias",
      "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.dense.bias",
      "cls.predictions.transform.dense.weight"]
  assert all(k.startswith(("bert.", "cls.predictions.")) for k in tensors)
  assert "bert.pooler.dense.weight" in tensors  # kept: BertModel.from_pretrained uses it


@pytest.mark.parametrize("architecture", ["BertForTokenClassification",
                                          "BertForSequenceClassification",
                                          "BertForQuestionAnswering"])
def test_fine_tuned_models_have_the_tensors_of_transformers_task_classes(
    architecture, minilm_path, tmp_path):
  """A fine-tuned model (MiniLM + a head) exports exactly the tensor names and shapes of
  transformers' class for its task (tests/fixtures/make_ner_reference.py recorded them), with
  its label names, and loads back into the same bert_tf model bit for bit."""
  from bert_tf.modeling import BertClassifier, BertSpanLabeler, BertTokenClassifier
  reference = json.loads((FIXTURES / "ner" / "reference.json").read_text(encoding="utf-8"))
  labels = reference["labels"]
  config = checkpoints.load_config(str(minilm_path / "config.json"))
  model = {"BertForTokenClassification": lambda: BertTokenClassifier(config, len(labels)),
           "BertForSequenceClassification": lambda: BertClassifier(config, len(labels)),
           "BertForQuestionAnswering": lambda: BertSpanLabeler(config)}[architecture]()
  checkpoints.load_weights(model, str(minilm_path))
  rng = np.random.RandomState(5)
  for variable in model.weights:
    if not variable.path.startswith("bert/"):  # the head, at random
      variable.assign(rng.randn(*variable.shape).astype(np.float32))
  out = tmp_path / "hf"
  bert_tf.export_hugging_face(model, str(out), vocab_file=str(minilm_path / "vocab.txt"),
                              labels=None if "Question" in architecture else labels)
  from safetensors.numpy import load_file
  tensors = load_file(str(out / "model.safetensors"))
  assert {k: list(v.shape) for k, v in tensors.items()} == (
      reference["hugging_face_state_dicts"][architecture])
  written = json.loads((out / "config.json").read_text())
  assert written["architectures"] == [architecture]
  if "Question" not in architecture:
    assert written["id2label"] == {str(i): name for i, name in enumerate(labels)}
    assert written["label2id"] == {name: i for i, name in enumerate(labels)}
  back = type(model)(config, len(labels)) if "Question" not in architecture else (
      type(model)(config))
  report = checkpoints.load_weights(back, str(out))
  for a, b in zip(model.weights, back.weights):
    if "Question" in architecture or "Token" in architecture:
      if a.path.startswith("bert/pooler/"):
        assert "bert/pooler/dense/kernel" in report.missing
        continue
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def _fine_tuned_classifier_folder(minilm_path, tmp_path, max_seq_length):
  """``(config, model, folder)``: MiniLM with a random 3-label head (no dropout), saved as
  run_classifier.py leaves a folder (Google checkpoint, config, vocab, classifier.json)."""
  from bert_tf import classifier_labels
  from bert_tf.modeling import BertClassifier
  config = checkpoints.load_config(str(minilm_path / "config.json"))
  model = BertClassifier(config, 3, classifier_dropout=0.0)
  checkpoints.load_weights(model, str(minilm_path))
  model.classifier.output_weights.assign(
      np.random.RandomState(1).randn(3, config.hidden_size).astype(np.float32))
  folder = tmp_path / "fine_tuned"
  checkpoints.save_google_checkpoint(model, str(folder / "bert_model.ckpt"))
  config.to_json_file(str(folder / "bert_config.json"))
  (folder / "vocab.txt").write_bytes((minilm_path / "vocab.txt").read_bytes())
  classifier_labels.write(str(folder), ["spam", "ham", "eggs"], task_name="user",
                          max_seq_length=max_seq_length)
  return config, model, folder


def test_a_fine_tuned_classifier_folder_exports_with_its_head_and_label_names(
    minilm_path, tmp_path):
  """A folder as run_classifier.py leaves it (Google checkpoint, config, vocab,
  classifier.json) exports as a BertForSequenceClassification with classifier.json's names."""
  config, model, folder = _fine_tuned_classifier_folder(minilm_path, tmp_path, 24)
  assert cli_main(["export-hf", f"--model={folder}", f"--output_dir={tmp_path / 'hf'}"]) == 0
  written = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert written["architectures"] == ["BertForSequenceClassification"]
  assert written["id2label"] == {"0": "spam", "1": "ham", "2": "eggs"}
  # transformers truncates where fine-tuning (and the SavedModel) did, not at the position
  # limit: other answers for long texts.
  tokenizer_config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
  assert tokenizer_config["model_max_length"] == 24 != config.max_position_embeddings
  # And back: the Hugging Face folder classifies as the folder it came from (it had no
  # classifier.json: "has no classifier.json", though config.json names the labels).
  texts = ["free money now", "see you at the meeting " * 8]
  ours, theirs = bert_tf.load(str(folder)), bert_tf.load(str(tmp_path / "hf"))
  want, got = ours.classify(texts), theirs.classify(texts)

  assert [r["label"] for r in got] == [r["label"] for r in want]
  np.testing.assert_allclose([r["logits"] for r in got], [r["logits"] for r in want],
                             atol=1e-5)
  from safetensors.numpy import load_file
  tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
  np.testing.assert_array_equal(tensors["classifier.weight"],
                                model.classifier.output_weights.numpy())
  assert "bert.pooler.dense.weight" in tensors


def test_a_fine_tuned_squad_folder_exports_with_its_head(minilm_path, tmp_path):
  """A folder as run_squad.py leaves it (a Google checkpoint with the cls/squad head, config,
  vocab; no labels file) exports as a BertForQuestionAnswering with its head: it was a
  BertModel, and transformers' BertForQuestionAnswering drew a random qa_outputs with only a
  warning. The names and shapes are transformers' (tests/fixtures/make_ner_reference.py)."""
  from bert_tf.modeling import BertSpanLabeler
  reference = json.loads((FIXTURES / "ner" / "reference.json").read_text(encoding="utf-8"))
  config = checkpoints.load_config(str(minilm_path / "config.json"))
  model = BertSpanLabeler(config)
  checkpoints.load_weights(model, str(minilm_path))
  head = np.random.RandomState(2).randn(2, config.hidden_size).astype(np.float32)
  model.span.output_weights.assign(head)
  folder = tmp_path / "squad"
  checkpoints.save_google_checkpoint(model, str(folder / "bert_model.ckpt"))
  config.to_json_file(str(folder / "bert_config.json"))
  (folder / "vocab.txt").write_bytes((minilm_path / "vocab.txt").read_bytes())
  assert cli_main(["export-hf", f"--model={folder}", f"--output_dir={tmp_path / 'hf'}"]) == 0
  written = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert written["architectures"] == ["BertForQuestionAnswering"]
  from safetensors.numpy import load_file
  tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
  assert {k: list(v.shape) for k, v in tensors.items()} == (
      reference["hugging_face_state_dicts"]["BertForQuestionAnswering"])
  np.testing.assert_array_equal(tensors["qa_outputs.weight"], head)


def test_the_saved_model_exports_take_what_bert_tf_load_returns(minilm_path, tmp_path):
  """export_classifier / export_all / export_encoder given a loaded folder (what bert_tf.load
  returns) were AttributeError tracebacks: the folder's classifier head, labels and casing are
  exported, the same answers as the export of the Keras model it was saved from; a model that
  is no fine-tuned classifier is one line."""
  from bert_tf import classifier_labels, export
  _, model, folder = _fine_tuned_classifier_folder(minilm_path, tmp_path, 16)
  vocab = str(minilm_path / "vocab.txt")
  # Fine-tuned without lower-casing (on this uncased vocab the vocab alone says otherwise):
  # bert_tf.load and the exports take the fine-tuning's casing.
  classifier_labels.write(str(folder), ["spam", "ham", "eggs"], task_name="user",
                          do_lower_case=False, max_seq_length=16)
  bert = bert_tf.load(str(folder))
  assert bert.do_lower_case is False
  export.export_classifier(model, str(tmp_path / "keras"), vocab_file=vocab,
                           max_seq_length=16, labels=["spam", "ham", "eggs"])
  # The folder's labels and length (classifier.json's), not export_all's defaults (128).
  export.export_all(bert, str(tmp_path / "loaded"), vocab_file=vocab)
  packed = tf.saved_model.load(str(tmp_path / "loaded" / "preprocessor")).signatures[
      "serving_default"](text=tf.constant(["a long text " * 20]))
  assert packed["input_word_ids"].shape == (1, 16)
  texts = tf.constant(["free money now", "see you at the meeting", "eggs and ham"])
  want = tf.saved_model.load(str(tmp_path / "keras")).signatures["serving_default"](text=texts)
  got = tf.saved_model.load(str(tmp_path / "loaded" / "classifier")).signatures[
      "serving_default"](text=texts)
  np.testing.assert_array_equal(got["labels"].numpy(), want["labels"].numpy())
  np.testing.assert_allclose(got["logits"].numpy(), want["logits"].numpy(), atol=1e-6)
  assert sorted(os.listdir(tmp_path / "loaded")) == ["classifier", "encoder", "preprocessor"]
  # classify tokenizes as fine-tuning and the served model do: a [CLS], [SEP], [MASK] or
  # [UNK] written in a text is word pieces there (bert_tf.load's tokenizer keeps them whole:
  # the logits differed by 0.02).
  odd = ["[CLS] hi [SEP]", "a [MASK] and [UNK] here", "free money now"]
  served = tf.saved_model.load(str(tmp_path / "loaded" / "classifier")).signatures[
      "serving_default"](text=tf.constant(odd))["logits"].numpy()
  with pytest.warns(UserWarning, match="already holds"):
    classified = [r["logits"] for r in bert.classify(odd)]
  np.testing.assert_allclose(classified, served, atol=2e-5)
  assert bert.tokenizer.tokenize("a [MASK]") == ["a", "[MASK]"]  # fill-mask's: kept whole
  export.export_encoder(bert, str(tmp_path / "encoder"), vocab_file=vocab)
  for exported in (tmp_path / "encoder", tmp_path / "loaded" / "encoder"):
    assert not bool(tf.saved_model.load(str(exported)).do_lower_case.numpy())
  plain = bert_tf.load(str(minilm_path))
  for call in (lambda: export.export_all(plain, str(tmp_path / "x"), vocab_file=vocab),
               lambda: export.export_classifier("a/path", str(tmp_path / "x"), vocab_file=vocab)):
    with pytest.raises(bert_tf.BertTfError) as error:
      call()
    assert "\n" not in str(error.value) and "export_" in str(error.value)
  assert not (tmp_path / "x").exists()
