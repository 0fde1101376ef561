"""SavedModel exports load in a fresh process without bert_tf and give the Keras model's outputs.

The reference is the in-process Keras model (``BertClassifier``, classification and
regression / ``BertModel``) fed by the in-graph ``BertPreprocessor``; the child process has
TensorFlow and tensorflow-text only (the repository and bert_tf's editable install are off its
path, which the child asserts).
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import export
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertClassifier, BertConfig
from bert_tf.preprocessing import BertPreprocessor
from tests._autograph_builtins import method_bindings_taken_for_builtins

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "on",
         "mat", "##s", "free", "money", "now", "win", "##ner", "hello", "world", "!", ",", ".",
         "is", "not", "it", "café", "##é", "deja", "vu"]
LABELS = ["ham", "spam", "other"]
SEQ_LENGTH = 12
TEXT_A = ["The cat sat on the mat.", "FREE money now!!! winner", "", "Déjà vu, hello world",
          "dog " * 20]
TEXT_B = ["It is not a dog.", "", "cats", "the mats", "mat " * 20]

# The child's shared parts: what it may import, the expected values, ``check``, the verdict.
_CHILD_HEAD = r"""
import importlib.util, sys
assert importlib.util.find_spec("bert_tf") is None, "bert_tf must not be importable here"
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the WordPiece ops)

expected = dict(np.load("expected.npz", allow_pickle=False))
text_a = tf.constant(expected.pop("text_a").tolist())
text_b = tf.constant(expected.pop("text_b").tolist())
failures = []

def check(name, got, atol=0.0):
  want = expected.pop(name)
  got = np.asarray(got)
  if want.dtype.kind == "U":
    ok = [x.decode() if isinstance(x, bytes) else x for x in got.tolist()] == want.tolist()
  elif atol:
    ok = got.shape == want.shape and np.allclose(got, want, atol=atol, rtol=0)
  else:
    ok = got.shape == want.shape and np.array_equal(got, want)
  if not ok:
    failures.append(f"{name}: {got!r} != {want!r}")
"""

_CHILD_TAIL = r"""
if expected:
  failures.append(f"not checked: {sorted(expected)}")
print("\n".join(failures) or "OK")
"""

_CHILD_ALL = r"""
classifier = tf.saved_model.load("export/classifier")
single = classifier.signatures["serving_default"](text=text_a)
pair = classifier.signatures["serve_text_pair"](text_a=text_a, text_b=text_b)
ids = {k: tf.constant(expected[f"pair_{k}"]) for k in
       ("input_word_ids", "input_mask", "input_type_ids")}
by_ids = classifier.signatures["serve_ids"](**ids)
for prefix, outputs in (("single", single), ("pair", pair), ("ids", by_ids)):
  check(f"{prefix}_logits", outputs["logits"], atol=1e-5)
  check(f"{prefix}_probabilities", outputs["probabilities"], atol=1e-6)
  check(f"{prefix}_label_ids", outputs["label_ids"])
  check(f"{prefix}_labels", outputs["labels"])
check("label_names", classifier.label_names)
check("single_method_logits", classifier.serve_text(text_a)["logits"], atol=1e-5)

encoder = tf.saved_model.load("export/encoder")
out = encoder(ids)                           # TF Hub style: dict in, dict out.
check("sequence_output", out["sequence_output"], atol=1e-5)
check("pooled_output", out["pooled_output"], atol=1e-5)
check("default", out["default"], atol=1e-5)
check("encoder_outputs", np.stack([x.numpy() for x in out["encoder_outputs"]]), atol=1e-5)
signature = encoder.signatures["serving_default"](**ids)
check("signature_encoder_outputs", signature["encoder_outputs"], atol=1e-5)
check("num_trainable_variables", len(encoder.trainable_variables))
# training=True is dropout on, as TF Hub's encoders (fine-tuning's outputs are not serving's).
check("dropout_in_training", np.abs(encoder(ids, training=True)["sequence_output"].numpy() -
                                    encoder(ids)["sequence_output"].numpy()).max() > 1e-3)
with tf.GradientTape() as tape:
  loss = tf.reduce_sum(encoder(ids, training=True)["pooled_output"])
grads = tape.gradient(loss, encoder.trainable_variables)
check("num_gradients", sum(g is not None for g in grads))
check("do_lower_case", encoder.do_lower_case.numpy())
with open(encoder.vocab_file.asset_path.numpy().decode()) as f:
  check("vocab", f.read().split("\n")[:-1])

preprocessor = tf.saved_model.load("export/preprocessor")
for name, value in preprocessor(text_a).items():
  check(f"single_{name}", value)
for name, value in preprocessor.signatures["serve_text_pair"](text_a=text_a,
                                                              text_b=text_b).items():
  check(f"pair_{name}", value)
tokens_a, tokens_b = preprocessor.tokenize(text_a), preprocessor.tokenize(text_b)
check("tokenize_values", tokens_a.flat_values)
check("tokenize_row_lengths", tokens_a.row_lengths())
for name, value in preprocessor.bert_pack_inputs([tokens_a, tokens_b]).items():
  check(f"packed_{name}", value)
"""

_CHILD_REGRESSION = r"""
regressor = tf.saved_model.load("export/regressor")
ids = {k: tf.constant(expected.pop(f"ids_{k}")) for k in
       ("input_word_ids", "input_mask", "input_type_ids")}
for prefix, outputs in (
    ("single", regressor.signatures["serving_default"](text=text_a)),
    ("pair", regressor.signatures["serve_text_pair"](text_a=text_a, text_b=text_b)),
    ("ids", regressor.signatures["serve_ids"](**ids)),
    ("single_method", regressor.serve_text(text_a))):
  check(f"{prefix}_keys", sorted(outputs))
  check(f"{prefix}_logits", outputs["logits"], atol=1e-5)
  check(f"{prefix}_predictions", outputs["predictions"], atol=1e-5)
check("has_label_names", hasattr(regressor, "label_names"))
"""


def _site_packages():
  """The directory TensorFlow and tensorflow-text are installed in (no .pth files read)."""
  import tensorflow_text  # pylint: disable=import-outside-toplevel
  paths = {os.path.dirname(os.path.dirname(m.__file__)) for m in (tf, tensorflow_text, np)}
  return sorted(paths)


def _randomize(model, features, seed=2):
  """Weights far from their initial values (so that no output is trivially near zero), and
  an output bias that centres the logits on ``features`` (so that the labels differ)."""
  rng = np.random.RandomState(seed)
  for variable in model.trainable_variables:
    base = 1.0 if variable.path.endswith("gamma") else 0.0
    variable.assign(base + rng.normal(0.0, 0.3, variable.shape).astype(np.float32))
  bias = model.classifier.output_bias
  bias.assign(np.zeros(bias.shape, np.float32))
  bias.assign(-model(features, training=False).numpy().mean(0))


def _tiny_classifier(tmp_path, num_labels):
  """(vocab path, a randomized ``BertClassifier`` with ``num_labels`` outputs, its
  ``BertPreprocessor``) on WORDS: 2 layers of width 16."""
  (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
  vocab = str(tmp_path / "vocab.txt")
  config = BertConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=24, max_position_embeddings=32,
                      type_vocab_size=2)
  model = BertClassifier(config, num_labels=num_labels)
  preprocessor = BertPreprocessor(vocab, do_lower_case=True, max_seq_length=SEQ_LENGTH)
  _randomize(model, preprocessor((tf.constant(TEXT_A), tf.constant(TEXT_B))))
  return vocab, model, preprocessor


def _check_in_fresh_process(tmp_path, child_body, expected):
  """Runs ``child_body`` (between _CHILD_HEAD and _CHILD_TAIL) in a Python without bert_tf,
  in ``tmp_path``, against ``expected`` (saved as expected.npz with TEXT_A and TEXT_B)."""
  expected = {"text_a": np.array(TEXT_A), "text_b": np.array(TEXT_B), **expected}
  np.savez(tmp_path / "expected.npz", **{k: (v.astype(str) if v.dtype == object else v)
                                        for k, v in expected.items()})
  code = ("import sys\nsys.path.extend(%r)\n" % _site_packages() +
          textwrap.dedent(_CHILD_HEAD + child_body + _CHILD_TAIL))
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  result = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().splitlines()[-1] == "OK", result.stdout[-3000:]


def test_exports_load_without_bert_tf_and_match_keras(tmp_path):
  vocab, model, preprocessor = _tiny_classifier(tmp_path, len(LABELS))
  text_a, text_b = tf.constant(TEXT_A), tf.constant(TEXT_B)
  export.export_all(model, str(tmp_path / "export"), vocab_file=vocab, do_lower_case=True,
                    max_seq_length=SEQ_LENGTH, labels=LABELS)
  assert sorted(os.listdir(tmp_path)) == ["export", "vocab.txt"]  # No temporary left over.

  # What the Keras model and the in-graph preprocessing give.
  expected = {"label_names": np.array(LABELS, object)}
  inputs = {"single": preprocessor(text_a), "pair": preprocessor((text_a, text_b))}
  inputs["ids"] = inputs["pair"]
  for prefix, features in inputs.items():
    if prefix != "ids":
      for name, value in features.items():
        expected[f"{prefix}_{name}"] = value.numpy()
    logits = model(features, training=False).numpy()
    expected[f"{prefix}_logits"] = logits
    expected[f"{prefix}_probabilities"] = tf.nn.softmax(logits).numpy()
    expected[f"{prefix}_label_ids"] = logits.argmax(-1).astype(np.int32)
    expected[f"{prefix}_labels"] = np.array([LABELS[i] for i in logits.argmax(-1)], object)
  assert len(set(expected["pair_label_ids"])) > 1  # The labels are not all the same.
  expected["single_method_logits"] = expected["single_logits"]
  encoder = model.bert(inputs["pair"], training=False)
  for name in ("sequence_output", "pooled_output"):
    expected[name] = encoder[name].numpy()
  expected["default"] = expected["pooled_output"]
  expected["encoder_outputs"] = np.stack([x.numpy() for x in encoder["encoder_outputs"]])
  expected["signature_encoder_outputs"] = expected["encoder_outputs"]
  expected["num_trainable_variables"] = np.array(len(model.bert.trainable_variables))
  expected["num_gradients"] = expected["num_trainable_variables"]
  # (mutation audit round 3: an encoder that ignored training=True went unnoticed)
  expected["dropout_in_training"] = np.array(True)
  expected["do_lower_case"] = np.array(True)
  expected["vocab"] = np.array(WORDS, object)
  tokens = preprocessor.tokenize(text_a)
  expected["tokenize_values"] = tokens.flat_values.numpy()
  expected["tokenize_row_lengths"] = tokens.row_lengths().numpy()
  for name, value in preprocessor.pack(tokens, preprocessor.tokenize(text_b)).items():
    expected[f"packed_{name}"] = value.numpy()
  _check_in_fresh_process(tmp_path, _CHILD_ALL, expected)


def test_regression_export_loads_without_bert_tf_and_matches_keras(tmp_path):
  """A one-output classifier (STS-B-like regression) exports its score as ``predictions``."""
  vocab, model, preprocessor = _tiny_classifier(tmp_path, 1)
  export.export_classifier(model, str(tmp_path / "export" / "regressor"), vocab_file=vocab,
                           do_lower_case=True, max_seq_length=SEQ_LENGTH)
  text_a, text_b = tf.constant(TEXT_A), tf.constant(TEXT_B)
  inputs = {"single": preprocessor(text_a), "pair": preprocessor((text_a, text_b))}
  inputs["ids"], inputs["single_method"] = inputs["pair"], inputs["single"]
  expected = {"has_label_names": np.array(False)}
  for name, value in inputs["ids"].items():
    expected[f"ids_{name}"] = value.numpy()
  for prefix, features in inputs.items():
    logits = model(features, training=False).numpy()                      # [B, 1]
    expected[f"{prefix}_keys"] = np.array(["logits", "predictions"], object)
    expected[f"{prefix}_logits"] = logits
    expected[f"{prefix}_predictions"] = logits[:, 0]                       # [B]
  assert logits.shape == (len(TEXT_A), 1)
  assert np.ptp(expected["pair_predictions"]) > 0.1  # The scores are not all the same.
  _check_in_fresh_process(tmp_path, _CHILD_REGRESSION, expected)




def test_write_atomically_replaces_whole_or_not_at_all(tmp_path):
  target = tmp_path / "model"

  def write(files):
    def fn(tmp):
      os.makedirs(tmp)
      for name, text in files.items():
        with open(os.path.join(tmp, name), "w") as f:
          f.write(text)
    return fn

  # SavedModel-shaped folders (what check_export_dir lets an overwrite replace).
  export.write_atomically(str(target), write({"saved_model.pb": "1", "fingerprint.pb": "f"}))
  export.write_atomically(str(target), write({"saved_model.pb": "2"}),  # replaces, old
                          overwrite=True)                                # files gone
  assert sorted(os.listdir(target)) == ["saved_model.pb"]
  assert (target / "saved_model.pb").read_text() == "2"

  def fails(tmp):
    write({"saved_model.pb": "3"})(tmp)
    raise RuntimeError("disk full")

  with pytest.raises(RuntimeError, match="disk full"):
    export.write_atomically(str(target), fails, overwrite=True)
  assert (target / "saved_model.pb").read_text() == "2"         # the old export stays whole
  assert sorted(os.listdir(tmp_path)) == ["model"]              # no temporary left over
  (tmp_path / "file").write_text("x")
  with pytest.raises(BertTfError, match="exists and is not a directory"):
    export.write_atomically(str(tmp_path / "file"), write({"a": "1"}))
  assert sorted(os.listdir(tmp_path)) == ["file", "model"]


def test_exports_of_a_vocab_or_length_that_does_not_fit_are_refused(tmp_path):
  """As the scripts refuse them: a vocab of another size (the export was written, and served
  text then failed in a Gather), a max_seq_length beyond the position embeddings (was a
  multi-line error from tracing); nothing is written."""
  vocab, model, _ = _tiny_classifier(tmp_path, num_labels=2)
  (tmp_path / "big.txt").write_text("\n".join(WORDS + ["extra"]) + "\n")
  big = str(tmp_path / "big.txt")
  for call, message in [
      (lambda: export.export_classifier(model, str(tmp_path / "c"), vocab_file=big,
                                        max_seq_length=SEQ_LENGTH),
       f"vocab file {big!r} has {len(WORDS) + 1} tokens but the BERT config says vocab_size "
       f"{len(WORDS)}: they are not of the same model"),
      (lambda: export.export_encoder(model, str(tmp_path / "e"), vocab_file=big),
       f"vocab file {big!r} has {len(WORDS) + 1} tokens"),
      (lambda: export.export_classifier(model, str(tmp_path / "c"), vocab_file=vocab,
                                        max_seq_length=33),
       "max_seq_length 33 exceeds the model's max_position_embeddings 32")]:
    with pytest.raises(BertTfError) as e:
      call()
    assert str(e.value).startswith(message)
  assert sorted(os.listdir(tmp_path)) == ["big.txt", "vocab.txt"]


def test_a_kernel_that_takes_a_method_binding_for_a_builtin_exports_the_same(tmp_path):
  """See tests/_autograph_builtins.py: the modules' tf.function methods run without AutoGraph,
  so a binding taken for a builtin (a Jupyter kernel's stale id) cannot call them with the
  wrong self; the exports give the Keras model's outputs."""
  vocab, model, preprocessor = _tiny_classifier(tmp_path, len(LABELS))
  with method_bindings_taken_for_builtins():
    export.export_all(model, str(tmp_path / "export"), vocab_file=vocab, do_lower_case=True,
                      max_seq_length=SEQ_LENGTH, labels=LABELS)
  text_a, text_b = tf.constant(TEXT_A), tf.constant(TEXT_B)
  features = preprocessor((text_a, text_b))
  folders = sorted(os.listdir(tmp_path / "export"))
  loaded = {name: tf.saved_model.load(str(tmp_path / "export" / name)) for name in folders}
  classifier = next(m for m in loaded.values() if hasattr(m, "label_names"))
  np.testing.assert_allclose(classifier.serve_text_pair(text_a, text_b)["logits"].numpy(),
                             model(features, training=False).numpy(), rtol=1e-5, atol=1e-6)
  encoder = next(m for m in loaded.values() if hasattr(m, "trainable_variables")
                 and m is not classifier)
  np.testing.assert_allclose(encoder(features)["pooled_output"].numpy(),
                             model.bert(features, training=False)["pooled_output"].numpy(),
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_model_trained_in_16_bits_is_exported_computing_in_float32(tmp_path, policy):
  """run_classifier.py --dtype=bfloat16 (float16) exported the model built under its mixed
  policy: the SavedModel computed in 16 bits, its logits off bert_tf.load's and the
  evaluation's of the same checkpoint. It computes in float32 now: the numbers of a float32
  model with the same weights."""
  vocab, float_model, preprocessor = _tiny_classifier(tmp_path, len(LABELS))
  mixed = BertClassifier(float_model.bert.config, num_labels=len(LABELS), dtype=policy)
  features = preprocessor((tf.constant(TEXT_A), tf.constant(TEXT_B)))
  mixed(features, training=False)
  mixed.set_weights(float_model.get_weights())
  want = float_model(features, training=False).numpy()
  sixteen = mixed(features, training=False).numpy().astype(np.float32)
  assert np.abs(sixteen - want).max() > 1e-4  # (16 bits: the check below can fail)
  export.export_classifier(mixed, str(tmp_path / "export"), vocab_file=vocab,
                           max_seq_length=SEQ_LENGTH, labels=LABELS)
  served = tf.saved_model.load(str(tmp_path / "export")).signatures["serve_text_pair"](
      text_a=tf.constant(TEXT_A), text_b=tf.constant(TEXT_B))["logits"].numpy()
  np.testing.assert_allclose(served, want, atol=1e-5)
  assert mixed.dtype_policy.name == policy  # the trained model itself is left as it was
