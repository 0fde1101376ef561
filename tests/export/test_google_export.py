"""Google export (``bert_tf.export_google``, ``python -m bert_tf export-google``): an
intermediate ``ckpt-N`` of a bert_tf training run, given to Google's original code (bert-
tensorflow 1.0.4, TF1 graph mode: ``modeling.BertModel``, ``run_pretraining``'s heads,
``run_classifier.create_model``, ``run_squad.create_model``, each restored as Google's scripts
restore ``--init_checkpoint``: ``get_assignment_map_from_checkpoint`` +
``tf.train.init_from_checkpoint``), gives the numbers ``bert_tf.load`` gives for that
``ckpt-N``, with every variable of Google's graph found (none left at its initial value). The
``ckpt-N`` itself matches none of them: what Google's code ran on before, without a word. The
export of a run's last checkpoint is the run's own ``output_dir/google``, byte for byte."""

import inspect
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf import classifier_labels, optimization
from bert_tf.__main__ import main as cli_main
from bert_tf.export import google as google_export
from bert_tf.modeling import (BertConfig, BertModel, BertSpanLabeler, BertTokenClassifier,
                              checkpoints)
from bert_tf.training import classifier, loop
from bert_tf.training.pretraining import PretrainingTask
from tests.conftest import FIXTURES
from tests.reference import google_models
from tests.reference.google_bert import google

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MRPC = FIXTURES / "glue" / "MRPC"
TOL = 1e-5
tf1 = tf.compat.v1
CONFIG = google_models.tiny_config_dict()  # vocab 99
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(94)]


def _randomize(variables, seed, scale=0.2):
  """Weights far from their initial values: outputs then differ between inputs."""
  rng = np.random.RandomState(seed)
  for variable in variables:
    base = 1.0 if variable.path.endswith("gamma") else 0.0
    variable.assign(base + rng.normal(0.0, scale, variable.shape).astype(np.float32))


def _tensors(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _google_run(checkpoint, build):
  """Google's graph of ``build()`` (its fetches), initialised as run_classifier.py /
  run_squad.py / run_pretraining.py initialise from ``--init_checkpoint``. Returns the fetched
  numpy values, the variables the checkpoint left at their initial values, and all of the
  graph's variables."""
  modeling = google("modeling")
  graph = tf.Graph()
  with graph.as_default():
    tf1.set_random_seed(1)
    # create_model reads `shape[-1].value` (TF1 Dimensions): TF1 shapes while it builds.
    tf1.disable_v2_tensorshape()
    try:
      fetches = build(modeling)
    finally:
      tf1.enable_v2_tensorshape()
    tvars = tf1.trainable_variables()
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(tvars,
                                                                              str(checkpoint))
    tf1.train.init_from_checkpoint(str(checkpoint), assignment_map)
    every = sorted(v.op.name for v in tf1.global_variables())
    left = sorted(v.op.name for v in tf1.global_variables() if v.name not in initialized)
    with tf1.Session(graph=graph) as sess:
      sess.run(tf1.global_variables_initializer())
      return sess.run(fetches), left, every


# --- a pretraining run's intermediate checkpoint --------------------------------------------


@pytest.fixture(scope="module")
def pretraining_run(tmp_path_factory):
  """A tiny pretraining run (bert_tf's training loop, as run_pretraining.py runs it) from large
  random weights, saving ckpt-2 and ckpt-4, with bert_config.json and vocab.txt beside."""
  out = tmp_path_factory.mktemp("pretraining") / "out"
  keras.utils.set_random_seed(7)
  config = BertConfig.from_dict(CONFIG)
  task = PretrainingTask(config)
  model = task.build_model()
  _randomize(model.weights, seed=3)
  optimizer = optimization.create_optimizer(1e-2, num_train_steps=4, num_warmup_steps=1)
  examples = google_models.random_pretraining_features(CONFIG, batch_size=4, seq_length=12,
                                                       num_predictions=3, seed=0)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=str(out), num_train_steps=4, steps_per_loop=1, save_checkpoints_steps=2,
      keep_checkpoint_max=0, seq_length=12))
  trainer.train(lambda ctx: tf.data.Dataset.from_tensor_slices(examples).repeat().batch(2))
  config.to_json_file(str(out / "bert_config.json"))
  (out / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  assert sorted(p.name for p in out.glob("ckpt-*.index")) == ["ckpt-2.index", "ckpt-4.index"]
  return out


def test_an_intermediate_pretraining_checkpoint_gives_googles_numbers(pretraining_run, tmp_path):
  out = pretraining_run
  export = tmp_path / "google"
  assert bert_tf.export_google(str(out / "ckpt-2"), str(export)) == str(export)
  assert sorted(os.listdir(export)) == sorted(google_export.FILES)
  features = google_models.random_pretraining_features(CONFIG, batch_size=3, seq_length=12,
                                                       num_predictions=4, seed=5)

  def build(_):
    config = json.loads((export / "bert_config.json").read_text())
    return google_models.google_pretraining_graph(config, features)

  theirs, left, every = _google_run(export / "bert_model.ckpt", build)
  assert left == []  # every variable of Google's graph (encoder and both heads) was found
  assert "cls/predictions/output_bias" in every and "cls/seq_relationship/output_weights" in every
  # The ckpt-N itself: Google's code matches none of its variables (and runs random weights).
  _, left_by_ckpt, _ = _google_run(out / "ckpt-2", build)
  assert left_by_ckpt == every

  bert = bert_tf.load(str(out / "ckpt-2"))
  inputs = {k: tf.constant(v) for k, v in features.items()}
  encoder = bert.encoder(inputs, training=False)
  heads = bert.model(inputs, training=False)
  real = features["input_mask"].astype(bool)
  np.testing.assert_allclose(np.asarray(encoder["sequence_output"])[real],
                             theirs["sequence_output"][real], atol=TOL)
  np.testing.assert_allclose(encoder["pooled_output"], theirs["pooled_output"], atol=TOL)
  np.testing.assert_allclose(
      tf.nn.log_softmax(heads["masked_lm_logits"]).numpy().reshape(-1, CONFIG["vocab_size"]),
      theirs["masked_lm_log_probs"], atol=TOL)
  np.testing.assert_allclose(tf.nn.log_softmax(heads["next_sentence_logits"]),
                             theirs["next_sentence_log_probs"], atol=TOL)
  # It is ckpt-2's weights (not the folder's newest, ckpt-4), at its step.
  written = _tensors(export / "bert_model.ckpt")
  assert int(written.pop("global_step")) == 2
  kept = checkpoints.read_bert_tf_checkpoint(str(out / "ckpt-2"))
  assert sorted(written) == sorted(kept)
  for name, value in kept.items():
    assert written[name].tobytes() == value.tobytes(), name
  newest = checkpoints.read_bert_tf_checkpoint(str(out / "ckpt-4"))
  assert not np.array_equal(newest["bert/embeddings/word_embeddings"],
                            written["bert/embeddings/word_embeddings"])


def test_the_folder_exports_its_newest_checkpoint(pretraining_run, tmp_path):
  assert cli_main(["export-google", f"--model={pretraining_run}",
                   f"--output_dir={tmp_path / 'g'}"]) == 0
  written = _tensors(tmp_path / "g" / "bert_model.ckpt")
  assert int(written["global_step"]) == 4
  newest = checkpoints.read_bert_tf_checkpoint(str(pretraining_run / "ckpt-4"))
  assert written["cls/predictions/output_bias"].tobytes() == (
      newest["cls/predictions/output_bias"].tobytes())


# --- a fine-tuned classifier's intermediate checkpoint --------------------------------------


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory, uncased_vocab):
  """run_classifier (in-process) on the MRPC fixture from a Google checkpoint of large random
  weights: ckpt-2, ckpt-4, ckpt-6, classifier.json, and its own output_dir/google (step 6)."""
  tmp = tmp_path_factory.mktemp("mrpc")
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))
  encoder = BertModel(config)
  _randomize(encoder.trainable_variables, seed=0)
  init = checkpoints.save_google_checkpoint(encoder, str(tmp / "init" / "bert_model.ckpt"))
  out = tmp / "out"
  classifier.run_classifier(
      config, "MRPC", str(uncased_vocab), str(out), tf.distribute.get_strategy(),
      data_dir=str(MRPC), init_checkpoint=init, max_seq_length=24, do_train=True,
      train_batch_size=2, num_train_epochs=2, learning_rate=1e-3, seed=5, steps_per_loop=1,
      save_checkpoints_steps=2, keep_checkpoint_max=0, progress=lambda line: None)
  assert sorted(p.name for p in out.glob("ckpt-*.index")) == [
      "ckpt-2.index", "ckpt-4.index", "ckpt-6.index"]
  return out


TEXTS = [("the bank raised its rates .", "rates went up at the bank ."),
         ("he walked to the store", "she bought milk"),
         ("paris is the capital of france .", None)]


def test_an_intermediate_classifier_checkpoint_gives_googles_logits(classifier_run, tmp_path):
  out = classifier_run
  export = tmp_path / "google"
  assert cli_main(["export-google", f"--model={out / 'ckpt-2'}",
                   f"--output_dir={export}"]) == 0
  assert sorted(os.listdir(export)) == sorted(google_export.FILES + ("classifier.json",))
  assert (json.loads((export / "classifier.json").read_text()) ==
          json.loads((out / "classifier.json").read_text()))
  bert = bert_tf.load(str(out / "ckpt-2"))
  features = bert.features([a if b is None else (a, b) for a, b in TEXTS])

  def build(modeling):
    config = modeling.BertConfig.from_json_file(str(export / "bert_config.json"))
    _, _, logits, _ = google("run_classifier").create_model(
        config, False, tf1.constant(features["input_word_ids"]),
        tf1.constant(features["input_mask"]), tf1.constant(features["input_type_ids"]),
        tf1.constant(np.zeros(len(TEXTS), np.int32)), 2, False)
    return logits

  theirs, left, _ = _google_run(export / "bert_model.ckpt", build)
  assert left == []  # the encoder, the pooler and output_weights / output_bias
  ours = np.array([r["logits"] for r in bert.classify(
      [a if b is None else (a, b) for a, b in TEXTS])])
  np.testing.assert_allclose(ours, theirs, atol=TOL)
  # Not the run's last weights: ckpt-2's (the intermediate asked for), at step 2.
  last = np.array([r["logits"] for r in bert_tf.load(str(out)).classify(
      [a if b is None else (a, b) for a, b in TEXTS])])
  assert np.abs(last - ours).max() > 100 * TOL
  assert int(_tensors(export / "bert_model.ckpt")["global_step"]) == 2
  # bert_tf reads the export back: the same labels and logits.
  again = bert_tf.load(str(export)).classify([a if b is None else (a, b) for a, b in TEXTS])
  np.testing.assert_allclose([r["logits"] for r in again], ours, atol=1e-6)
  assert {r["label"] for r in again} <= {"0", "1"}


def test_the_last_checkpoint_exports_as_the_run_itself_did(classifier_run, tmp_path):
  """export-google of the run's folder (its newest ckpt-6) writes what the run wrote at its
  end (--export_google_checkpoint: output_dir/google), file for file."""
  out = classifier_run
  assert google_export.is_previous_export(str(out / "google"))
  # A run given no --vocab_file (run_pretraining's is optional) writes google/ without one:
  # still a previous export (--overwrite replaces it); another file is not.
  bare = tmp_path / "bare"
  shutil.copytree(out / "google", bare)
  (bare / "vocab.txt").unlink()
  assert google_export.is_previous_export(str(bare))
  (bare / "notes.txt").write_text("mine")
  assert not google_export.is_previous_export(str(bare))
  bert_tf.export_google(str(out), str(tmp_path / "google"))
  ours, theirs = tmp_path / "google", out / "google"
  assert sorted(os.listdir(ours)) == sorted(os.listdir(theirs))
  written, kept = _tensors(ours / "bert_model.ckpt"), _tensors(theirs / "bert_model.ckpt")
  assert sorted(written) == sorted(kept)
  for name, value in kept.items():
    assert written[name].dtype == value.dtype and written[name].tobytes() == value.tobytes(), (
        name)
  for name in ("bert_config.json", "vocab.txt", "classifier.json", "checkpoint"):
    assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name


def test_a_hugging_face_classifier_folder_exports_with_its_head(classifier_run, tmp_path):
  """The same checkpoint through transformers' layout (export-hf) and back to Google's: the
  classifier head (classifier.weight there, its label names in config.json) is written, as
  the export of the ckpt-N itself, bit for bit, with its labels file."""
  out = classifier_run
  bert_tf.export_hugging_face(str(out / "ckpt-2"), str(tmp_path / "hf"))
  bert_tf.export_google(str(tmp_path / "hf"), str(tmp_path / "from_hf"))
  bert_tf.export_google(str(out / "ckpt-2"), str(tmp_path / "direct"))
  written = _tensors(tmp_path / "from_hf" / "bert_model.ckpt")
  direct = _tensors(tmp_path / "direct" / "bert_model.ckpt")
  assert "global_step" not in written and "output_weights" in written
  assert sorted(written) == sorted(set(direct) - {"global_step"})
  for name, value in written.items():
    assert value.tobytes() == direct[name].tobytes(), name
  labels = json.loads((tmp_path / "from_hf" / "classifier.json").read_text())
  assert labels["labels"] == ["0", "1"] and labels["max_seq_length"] == 24


def test_a_head_without_its_labels_file_is_kept_as_it_is(classifier_run, tmp_path):
  """A classifier checkpoint whose folder lost its classifier.json: its head is no model
  bert_tf.load knows, but the export keeps output_weights / output_bias as the checkpoint has
  them (Google's run_classifier then reads them), not a Google checkpoint without them."""
  out = classifier_run
  folder = tmp_path / "copied"
  folder.mkdir()
  for name in ("ckpt-4.index", "ckpt-4.data-00000-of-00001", "bert_config.json", "vocab.txt"):
    shutil.copy(out / name, folder / name)
  bert_tf.export_google(str(folder), str(tmp_path / "google"))
  assert "classifier.json" not in os.listdir(tmp_path / "google")
  written = _tensors(tmp_path / "google" / "bert_model.ckpt")
  kept = checkpoints.read_bert_tf_checkpoint(str(out / "ckpt-4"))
  assert sorted(set(written) - {"global_step"}) == sorted(kept)
  for name in ("output_weights", "output_bias"):
    assert written[name].tobytes() == kept[name].tobytes()


# --- run_squad's and run_ner's heads --------------------------------------------------------


def _training_folder(model, folder):
  """``model`` saved as bert_tf's training loop saves it (``ckpt-1``: no optimizer, no step),
  with bert_config.json and vocab.txt."""
  checkpoint = tf.train.Checkpoint(model=checkpoints.trackable_variables(model))
  prefix = tf.train.CheckpointManager(checkpoint, str(folder), max_to_keep=1).save()
  model.config.to_json_file(str(folder / "bert_config.json"))
  (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  return prefix


def test_a_squad_checkpoint_gives_googles_start_and_end_logits(tmp_path):
  model = BertSpanLabeler(BertConfig.from_dict(CONFIG))
  features = google_models.random_pretraining_features(CONFIG, batch_size=2, seq_length=10)
  inputs = {"input_word_ids": features["input_ids"], "input_mask": features["input_mask"],
            "input_type_ids": features["segment_ids"]}
  model(inputs)
  _randomize(model.weights, seed=4)
  prefix = _training_folder(model, tmp_path / "squad")
  bert_tf.export_google(prefix, str(tmp_path / "google"))
  written = _tensors(tmp_path / "google" / "bert_model.ckpt")
  assert "global_step" not in written  # (a checkpoint saved without one)
  assert {"cls/squad/output_weights", "cls/squad/output_bias"} <= set(written)

  def build(modeling):
    config = modeling.BertConfig.from_json_file(str(tmp_path / "google" / "bert_config.json"))
    return google("run_squad").create_model(
        config, False, tf1.constant(features["input_ids"]),
        tf1.constant(features["input_mask"]), tf1.constant(features["segment_ids"]), False)

  (start, end), left, _ = _google_run(tmp_path / "google" / "bert_model.ckpt", build)
  assert left == []
  ours = model(inputs, training=False)
  np.testing.assert_allclose(ours["start_logits"], start, atol=TOL)
  np.testing.assert_allclose(ours["end_logits"], end, atol=TOL)


def test_a_ner_checkpoint_is_written_as_run_ners_own_export(tmp_path):
  """run_ner.py's head has no Google original: the export holds what run_ner.py's own
  --export_google_checkpoint writes for the same model (checkpoints.save_google_checkpoint),
  and its token_classifier.json; bert_tf tags with the export as with the checkpoint."""
  config = BertConfig.from_dict(CONFIG)
  model = BertTokenClassifier(config, 3, classifier_dropout=0.0)
  model({"input_word_ids": np.ones([1, 4], np.int32)})
  _randomize(model.weights, seed=6)
  folder = tmp_path / "ner"
  _training_folder(model, folder)
  classifier_labels.write_tokens(str(folder), ["O", "B-PER", "I-PER"], max_seq_length=16)
  assert cli_main(["export-google", f"--model={folder}",
                   f"--output_dir={tmp_path / 'google'}"]) == 0
  checkpoints.save_google_checkpoint(model, str(tmp_path / "own" / "bert_model.ckpt"))
  written, own = (_tensors(tmp_path / "google" / "bert_model.ckpt"),
                  _tensors(tmp_path / "own" / "bert_model.ckpt"))
  assert sorted(written) == sorted(own)
  for name, value in own.items():
    assert written[name].tobytes() == value.tobytes(), name
  assert ((tmp_path / "google" / "token_classifier.json").read_bytes() ==
          (folder / "token_classifier.json").read_bytes())
  text = "w1 w2 w3 w4 w5"
  assert bert_tf.load(str(tmp_path / "google")).tag(text) == bert_tf.load(str(folder)).tag(text)


# --- the output folder, the errors, the command line ----------------------------------------


def test_output_dir_is_new_empty_or_a_previous_export(pretraining_run, tmp_path, capsys):
  model = str(pretraining_run / "ckpt-2")
  taken = tmp_path / "taken"
  taken.mkdir()
  (taken / "notes.txt").write_text("mine")
  # A released Google folder (bert_model.ckpt.meta, no "checkpoint" file) is no export.
  released = tmp_path / "uncased_L-2_H-32_A-4"
  bert_tf.export_google(model, str(released))
  (released / "checkpoint").unlink()
  (released / "bert_model.ckpt.meta").write_bytes(b"graph")
  for folder, first in ((taken, "notes.txt"), (released, "bert_config.json")):
    before = sorted(os.listdir(folder))
    assert cli_main(["export-google", f"--model={model}", f"--output_dir={folder}",
                     "--overwrite"]) == 1
    assert capsys.readouterr().err == (
        f"bert_tf export-google: error: --output_dir '{folder}' is a folder with other files "
        f"in it (e.g. '{first}'); nothing was written: give a new or empty folder\n")
    assert sorted(os.listdir(folder)) == before
  with pytest.raises(bert_tf.BertTfError, match=r"^output_dir '.*taken' is a folder with other"):
    bert_tf.export_google(model, str(taken))
  (tmp_path / "empty").mkdir()
  assert cli_main(["export-google", f"--model={model}",
                   f"--output_dir={tmp_path / 'empty'}"]) == 0
  assert capsys.readouterr().out == f"wrote {tmp_path / 'empty'}\n"
  with pytest.raises(bert_tf.BertTfError, match=r"holds a previous export: pass overwrite=True"):
    bert_tf.export_google(model, str(tmp_path / "empty"))
  assert cli_main(["export-google", f"--model={pretraining_run / 'ckpt-4'}",
                   f"--output_dir={tmp_path / 'empty'}"]) == 1
  assert capsys.readouterr().err == (
      f"bert_tf export-google: error: --output_dir '{tmp_path / 'empty'}' holds a previous "
      "export: pass --overwrite to replace it, or give a new path\n")
  assert int(_tensors(tmp_path / "empty" / "bert_model.ckpt")["global_step"]) == 2
  # --overwrite replaces it whole; nothing but the export is left beside it.
  assert cli_main(["export-google", f"--model={pretraining_run / 'ckpt-4'}",
                   f"--output_dir={tmp_path / 'empty'}", "--overwrite"]) == 0
  assert int(_tensors(tmp_path / "empty" / "bert_model.ckpt")["global_step"]) == 4
  assert sorted(os.listdir(tmp_path)) == ["empty", "taken", "uncased_L-2_H-32_A-4"]
  # Never the exported model's own folder (a ckpt-N prefix names its folder).
  capsys.readouterr()
  assert cli_main(["export-google", f"--model={model}", f"--output_dir={pretraining_run}",
                   "--overwrite"]) == 1
  assert capsys.readouterr().err == (
      f"bert_tf export-google: error: --output_dir '{pretraining_run}' is the folder of the "
      f"model exported ('{model}'): give the export a folder of its own\n")


@pytest.mark.parametrize("argv,line", [
    (["export-google", "--output_dir=g"],
     "bert_tf export-google: error: the following arguments are required: --model"),
    (["export-google", "--model=m"],
     "bert_tf export-google: error: the following arguments are required: --output_dir"),
    (["export-google", "--model=", "--output_dir=g"],
     "bert_tf export-google: error: --model is empty: give a model folder, checkpoint or "
     "released model's name"),
    (["export-google", "--model=./missing", "--output_dir=g"],
     "bert_tf export-google: error: model not found: './missing'"),
])
def test_command_line_mistakes_are_one_line(argv, line, capsys, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  try:
    status = cli_main(argv)
  except SystemExit as e:
    status = e.code
  assert status == 1 and capsys.readouterr().err == line + "\n"
  assert os.listdir(tmp_path) == []


def test_a_checkpoint_step_not_in_the_folder_is_one_line(pretraining_run, tmp_path, capsys):
  assert cli_main(["export-google", f"--model={pretraining_run / 'ckpt-3'}",
                   f"--output_dir={tmp_path / 'g'}"]) == 1
  assert capsys.readouterr().err == (
      f"bert_tf export-google: error: model not found: '{pretraining_run / 'ckpt-3'}'\n")
  assert not (tmp_path / "g").exists()


def test_the_command_runs_as_a_program(pretraining_run, tmp_path):
  """``python -m bert_tf export-google``: the export, one line of output; a refused folder:
  one line of error, status 1, no traceback."""
  env = {**os.environ, "PYTHONPATH": ROOT}
  command = [sys.executable, "-m", "bert_tf", "export-google",
             f"--model={pretraining_run / 'ckpt-2'}", f"--output_dir={tmp_path / 'g'}"]
  result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=env)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout == f"wrote {tmp_path / 'g'}\n"
  assert sorted(os.listdir(tmp_path / "g")) == sorted(google_export.FILES)
  result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=env)
  assert result.returncode == 1
  assert result.stderr.splitlines()[-1] == (
      f"bert_tf export-google: error: --output_dir '{tmp_path / 'g'}' holds a previous export: "
      "pass --overwrite to replace it, or give a new path")
  assert "Traceback" not in result.stderr


def test_a_keras_model_needs_its_vocab_and_has_no_step(tmp_path):
  model = BertModel(BertConfig.from_dict(CONFIG))
  model({"input_word_ids": np.ones([1, 4], np.int32)})
  with pytest.raises(bert_tf.BertTfError, match=r"^export_google: a Keras model needs "
                                                r"vocab_file= \(its vocab.txt\)$"):
    bert_tf.export_google(model, str(tmp_path / "g"))
  (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  bert_tf.export_google(model, str(tmp_path / "g"), vocab_file=str(tmp_path / "vocab.txt"))
  written = _tensors(tmp_path / "g" / "bert_model.ckpt")
  assert "global_step" not in written and all(n.startswith("bert/") for n in written)
  assert (tmp_path / "g" / "vocab.txt").read_bytes() == (tmp_path / "vocab.txt").read_bytes()


def test_a_config_googles_code_cannot_run_is_noted(tmp_path, capsys):
  """hidden_act gelu_exact (a Hugging Face model's erf GELU) is bert_tf's own name: Google's
  modeling.get_activation refuses it. The export is written (bert_tf reads it) with a note."""
  config = BertConfig.from_dict({**CONFIG, "hidden_act": "gelu_exact"})
  model = BertModel(config)
  model({"input_word_ids": np.ones([1, 4], np.int32)})
  folder = tmp_path / "m"
  folder.mkdir()
  _training_folder(model, folder)
  assert cli_main(["export-google", f"--model={folder}", f"--output_dir={tmp_path / 'g'}"]) == 0
  err = capsys.readouterr().err
  assert err == ("bert_tf: note: hidden_act 'gelu_exact' is bert_tf's, not Google's (its "
                 "modeling.py knows gelu, relu, tanh, linear): Google's code refuses this "
                 "config\n")
  with pytest.raises(ValueError, match="Unsupported activation"):
    google("modeling").get_activation("gelu_exact")
  shutil.rmtree(tmp_path / "g")


def test_a_layer_norm_eps_googles_code_ignores_is_noted():
  """Google's modeling.py has no layer_norm_eps: its BertConfig takes none and its layer_norm
  is contrib's, whose epsilon is 1e-12 (REFERENCE.md). A config with another one is noted;
  Google's own is not (mutation audit round 3: the note never written went unnoticed)."""
  modeling = google("modeling")
  assert "layer_norm_eps" not in inspect.signature(modeling.BertConfig).parameters
  assert list(inspect.signature(modeling.layer_norm).parameters) == ["input_tensor", "name"]
  assert google_export.google_incompatibilities(BertConfig.from_dict(CONFIG)) == []
  assert google_export.google_incompatibilities(
      BertConfig.from_dict({**CONFIG, "layer_norm_eps": 1e-5})) == [
          "layer_norm_eps 1e-05 is not Google's 1e-12: Google's code ignores it and computes "
          "slightly other numbers"]
