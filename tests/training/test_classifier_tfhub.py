"""run_classifier_with_tfhub.py and bert_tf.tfhub: Google's BERT modules of TF-Hub.

The module fixture (tests/fixtures/tfhub/cased_L-2_H-32_A-4) was exported by tensorflow_hub's
own ``hub.create_module_spec`` around Google's modeling.py, and its reference outputs were
computed by ``hub.Module`` from the folder (tests/fixtures/make_tfhub_module.py): bert_tf reads
the module without tensorflow_hub and must compute the same. The script must then be
run_classifier.py given the module's parts by hand.
"""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest

from bert_tf import tfhub
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig, BertModel, checkpoints
from tests import warm
from tests.conftest import FIXTURES
from tests.inference.model_server import ModelServer
from tests.reference import google_models

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = FIXTURES / "tfhub" / "cased_L-2_H-32_A-4"
REFERENCE = FIXTURES / "tfhub" / "tfhub_reference.npz"
MRPC = FIXTURES / "glue" / "MRPC"
# The fixture's config (make_tfhub_module.py): the tiny reference config, 1,000 tokens.
CONFIG = google_models.tiny_config_dict(vocab_size=1000, intermediate_size=64)


def _tar_gz(path, arcname="."):
  """A .tar.gz of ``path`` named ``arcname`` in it (``.``: TF-Hub's archives hold a module's
  files at the top)."""
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
    tar.add(path, arcname=arcname)
  return buffer.getvalue()


def _outputs(module):
  reference = np.load(REFERENCE)
  feed = {k: reference[k] for k in ("input_ids", "input_mask", "segment_ids")}
  model = BertModel(module.config)
  model(feed)
  checkpoints.load_weights(model, module.checkpoint)
  out = model(feed, training=False)
  return reference, {k: out[k].numpy() for k in ("pooled_output", "sequence_output")}


def test_module_gives_what_the_hub_library_computes():
  module = tfhub.load(str(MODULE))
  assert module.folder == str(MODULE)
  assert tfhub.resolve(MODULE.as_uri()) == str(MODULE)
  assert module.vocab_file == str(MODULE / "assets" / "vocab.txt")
  # The module's tokenization_info says False (the scripts' flag defaults to True).
  assert module.do_lower_case is False
  assert module.config.to_dict() == {**BertConfig(**CONFIG).to_dict()}
  assert module.heads_from == "the module's name (A-4)"
  assert module.casing_from == "the module's tokenization_info"
  reference, outputs = _outputs(module)
  for key, value in outputs.items():
    np.testing.assert_allclose(value, reference[key], atol=2e-6, rtol=0, err_msg=key)


def test_bert_tf_load_takes_a_module(tmp_path, monkeypatch):
  import bert_tf  # pylint: disable=import-outside-toplevel
  monkeypatch.setenv("BERT_TF_CACHE", str(tmp_path / "cache"))
  archive = tmp_path / "bert_cased_L-2_H-32_A-4.tar.gz"
  archive.write_bytes(_tar_gz(MODULE, "module"))
  reference = np.load(REFERENCE)
  feed = {k: reference[k] for k in ("input_ids", "input_mask", "segment_ids")}
  for handle in (str(MODULE), archive.as_uri()):
    model = bert_tf.load(handle)
    assert model.do_lower_case is False and not model.has_masked_lm, handle
    np.testing.assert_allclose(model.encoder(feed, training=False)["pooled_output"],
                               reference["pooled_output"], atol=2e-6, rtol=0)
    assert model.tokenize(["Hello"])[0] == [["[CLS]", "H", "##el", "##lo", "[SEP]"]]
  lowered = bert_tf.load(str(MODULE), do_lower_case=True)
  assert lowered.tokenize(["Hello"])[0] == [["[CLS]", "he", "##ll", "##o", "[SEP]"]]
  # What bert_tf.load read before is not taken for a module.
  assert not any(tfhub.is_handle(p) for p in (
      str(MODULE / "variables" / "variables"), str(MODULE / "assets"), "bert-base-uncased",
      str(tmp_path / "missing.tar.gz"), None,
      "https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-2_H-128_A-2.zip"))
  assert tfhub.is_handle("https://tfhub.dev/google/bert_uncased_L-12_H-768_A-12/1")


def _module_with_casing(folder, make_node):
  """A copy of the module at ``folder`` whose do_lower_case tensor's node is ``make_node(name)``
  (a NodeDef, with any extra nodes it needs: a list)."""
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel
  shutil.copytree(MODULE, folder)
  model = saved_model_pb2.SavedModel()
  model.ParseFromString((folder / "saved_model.pb").read_bytes())
  for graph in model.meta_graphs:
    name = graph.signature_def["tokenization_info"].outputs["do_lower_case"].name.split(":")[0]
    kept = [n for n in graph.graph_def.node if n.name != name]
    del graph.graph_def.node[:]
    graph.graph_def.node.extend(kept + make_node(name))
  (folder / "saved_model.pb").write_bytes(model.SerializeToString())
  return folder


def test_casing_computed_from_the_graph_else_from_the_name(tmp_path):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tensorflow.core.framework import node_def_pb2  # pylint: disable=import-outside-toplevel

  def logical_not_of_true(name):  # do_lower_case = not True: no constant to read
    true = node_def_pb2.NodeDef(name=name + "/x", op="Const")
    true.attr["dtype"].type = tf.bool.as_datatype_enum
    true.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(True))
    result = node_def_pb2.NodeDef(name=name, op="LogicalNot", input=[true.name])
    return [true, result]

  def unknown_op(name):  # a graph TensorFlow cannot run
    return [node_def_pb2.NodeDef(name=name, op="NoSuchOpOfAnOlderTensorFlow")]

  computed = _module_with_casing(tmp_path / "computed_L-2_H-32_A-4", logical_not_of_true)
  assert tfhub.tokenization_info(str(computed))[1:] == (False, "the module's tokenization_info")
  named = _module_with_casing(tmp_path / "bert_uncased_L-2_H-32_A-4", unknown_op)
  assert tfhub.tokenization_info(str(named))[1:] == (True, "the module's name (uncased)")
  assert tfhub.tokenization_info(str(named), "https://tfhub.dev/google/bert_cased_L-2/1")[1:] == (
      False, "the module's name (cased)")
  unnamed = _module_with_casing(tmp_path / "mine", unknown_op)
  with pytest.raises(BertTfError, match="cannot evaluate its tokenization_info's do_lower_case"):
    tfhub.tokenization_info(str(unnamed))


def _shapes(hidden=32):
  return {"bert/embeddings/word_embeddings": [1000, hidden],
          "bert/embeddings/position_embeddings": [64, hidden],
          "bert/embeddings/token_type_embeddings": [2, hidden],
          "bert/encoder/layer_0/intermediate/dense/kernel": [hidden, 64],
          "bert/encoder/layer_0/output/dense/bias": [hidden],
          "bert/encoder/layer_1/output/dense/bias": [hidden],
          "bert/encoder/layer_2/output/dense/bias": [hidden]}


def test_heads_from_the_name_else_64_wide_else_a_config_file(tmp_path):
  config, where = tfhub.module_config(_shapes(768), "https://tfhub.dev/google/bert_cased_L-3_H"
                                      "-768_A-6/1")
  assert (config.num_attention_heads, config.num_hidden_layers, where) == (
      6, 3, "the module's name (A-6)")
  config, where = tfhub.module_config(
      _shapes(768), "https://www.kaggle.com/models/google/bert/tensorFlow1/cased-l-3-h-768-a-6/1")
  assert (config.num_attention_heads, where) == (6, "the module's name (a-6)")
  config, where = tfhub.module_config(_shapes(768), "/models/my_bert", folder_name="1")
  assert (config.num_attention_heads, where) == (12, "hidden size 768 / 64 (Google's head size)")
  assert (config.vocab_size, config.intermediate_size, config.max_position_embeddings,
          config.type_vocab_size, config.hidden_act) == (1000, 64, 64, 2, "gelu")
  with pytest.raises(BertTfError, match="cannot tell its number of attention heads"):
    tfhub.module_config(_shapes(96), "/models/my_bert")
  with pytest.raises(BertTfError, match="5 attention heads do not divide its hidden size 32"):
    tfhub.module_config(_shapes(32), "/models/bert_L-2_H-32_A-5")
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(CONFIG))
  config, where = tfhub.module_config(_shapes(96), "/models/my_bert", str(path))
  assert (config.num_attention_heads, where) == (4, f"--bert_config_file={path}")
  with pytest.raises(BertTfError, match="not a BERT module .no variable bert/embeddings/posit"):
    tfhub.module_config({"bert/embeddings/word_embeddings": [9, 8]}, "m")


def test_an_archive_is_unpacked_once_into_the_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("BERT_TF_CACHE", str(tmp_path / "cache"))
  archive = tmp_path / "bert_cased_L-2_H-32_A-4.tar.gz"
  archive.write_bytes(_tar_gz(MODULE, "module"))
  url = archive.as_uri()
  module = tfhub.load(url)
  assert module.folder == tfhub.cached_folder(url)
  assert module.folder.startswith(str(tmp_path / "cache" / "tfhub") + os.sep)
  assert module.do_lower_case is False
  reference, outputs = _outputs(module)
  np.testing.assert_allclose(outputs["pooled_output"], reference["pooled_output"], atol=2e-6)
  # The cached folder is used; nothing is unpacked again.
  with monkeypatch.context() as patched:
    patched.setattr(tfhub, "_fetch_and_unpack", lambda *args: pytest.fail("unpacked again"))
    assert tfhub.resolve(url) == module.folder
    assert tfhub.resolve(str(archive)) == module.folder  # the same file, as a path
  # Only the folder is left in the cache, no temporary names.
  assert os.listdir(os.path.dirname(module.folder)) == [os.path.basename(module.folder)]
  # An archive of the same name elsewhere, or this one replaced, is not that module (it was
  # given the cached one silently): here both are damaged, and say so.
  (tmp_path / "other").mkdir()
  for damaged in (tmp_path / "other" / archive.name, archive):
    damaged.write_bytes(_tar_gz(MODULE, "module")[:20000])
    with pytest.raises(BertTfError, match="cannot unpack it as a .tar.gz"):
      tfhub.resolve(str(damaged))


def test_a_url_is_fetched_as_tfhub_serves_modules_once(tmp_path, monkeypatch):
  # A local HTTP server in place of tfhub.dev: the module's URL is asked for with
  # ?tf-hub-format=compressed; a cut download is one line and leaves nothing in the cache.
  monkeypatch.setenv("BERT_TF_CACHE", str(tmp_path / "cache"))
  server = ModelServer()
  try:
    url = f"{server.url}/google/bert_cased_L-2_H-32_A-4/1"
    server.files["/google/bert_cased_L-2_H-32_A-4/1?tf-hub-format=compressed"] = _tar_gz(MODULE)
    server.mode = "truncate"
    with pytest.raises(BertTfError, match=r"cannot download the module .* connection lost"):
      tfhub.load(url, stream=io.StringIO())
    assert os.listdir(tmp_path / "cache" / "tfhub") == []
    # What a killed download leaves (a stopped process's temporary names) goes with the next.
    gone = subprocess.Popen(["true"])
    gone.wait()
    target = tfhub.cached_folder(url)
    for stale in (f"{target}.tar.gz.tmp-{gone.pid}-0123abcd", f"{target}.tmp-{gone.pid}-0123abcd"):
      open(stale, "wb").close()
    server.mode = "whole"
    module = tfhub.load(url, stream=io.StringIO())
    assert module.heads_from == "the module's name (A-4)" and module.do_lower_case is False
    reference, outputs = _outputs(module)
    np.testing.assert_allclose(outputs["pooled_output"], reference["pooled_output"], atol=2e-6)
    assert tfhub.load(url).folder == module.folder
    assert server.requests == ["/google/bert_cased_L-2_H-32_A-4/1?tf-hub-format=compressed"] * 2
    assert os.listdir(tmp_path / "cache" / "tfhub") == [os.path.basename(target)]
  finally:
    server.close()


def test_bad_handles_are_one_line_errors(tmp_path, monkeypatch):
  monkeypatch.setenv("BERT_TF_CACHE", str(tmp_path / "cache"))
  cut = tmp_path / "cut.tar.gz"
  cut.write_bytes(_tar_gz(MODULE, "module")[:20000])
  plain = tmp_path / "plain"
  shutil.copytree(MODULE, plain)
  (plain / "saved_model.pb").write_bytes(b"\x00garbage\xff" * 10)
  empty = tmp_path / "empty"
  empty.mkdir()
  unsafe = tmp_path / "unsafe.tar.gz"
  unsafe.write_bytes(_tar_gz(MODULE / "saved_model.pb", "../saved_model.pb"))
  junk = tmp_path / "junk.tar.gz"  # tarfile's error lists every method it tried, a line each
  junk.write_bytes(b"not an archive " * 100)
  cases = [
      (str(tmp_path / "missing"), "no such folder or .tar.gz, and not a URL"),
      (str(junk), f"^{junk}: cannot unpack it as a .tar.gz \\(ReadError: "),
      (str(empty), "not a TF-Hub module folder"),
      (str(cut), "cannot unpack it as a .tar.gz"),
      (str(unsafe), "cannot unpack it as a .tar.gz"),
      ((tmp_path / "nothing.tar.gz").as_uri(), "cannot download the module"),
      (str(plain), "saved_model.pb: not a SavedModel"),
  ]
  for handle, message in cases:
    with pytest.raises(BertTfError, match=message) as error:
      tfhub.load(handle)
    assert "\n" not in str(error.value), handle
  assert not [n for n in os.listdir(tmp_path / "cache" / "tfhub") if ".tmp-" in n]


def _run(script, out, *flags):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  return warm.run(
      [sys.executable, os.path.join(ROOT, script), "--task_name=MRPC", f"--data_dir={MRPC}",
       f"--output_dir={out}", "--do_train=True", "--do_eval=True", "--do_predict=True",
       "--max_seq_length=32", "--train_batch_size=2", "--eval_batch_size=4",
       "--predict_batch_size=4", "--learning_rate=1e-3", "--num_train_epochs=2", "--seed=5",
       "--iterations_per_loop=2", "--noexport_google_checkpoint", *flags],
      capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)


def test_script_is_run_classifier_given_the_modules_parts(tmp_path):
  hub = _run("run_classifier_with_tfhub.py", tmp_path / "hub",
             f"--bert_hub_module_handle={MODULE}")
  assert hub.returncode == 0, hub.stderr[-3000:]
  assert "4 heads (from the module's name (A-4))" in hub.stdout
  assert "do_lower_case=False" in hub.stdout
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(CONFIG))
  by_hand = _run("run_classifier.py", tmp_path / "by_hand",
                 f"--init_checkpoint={MODULE / 'variables' / 'variables'}",
                 f"--vocab_file={MODULE / 'assets' / 'vocab.txt'}",
                 f"--bert_config_file={config_file}", "--do_lower_case=False")
  assert by_hand.returncode == 0, by_hand.stderr[-3000:]
  for name in ("eval_results.txt", "test_results.tsv"):
    assert (tmp_path / "hub" / name).read_text() == (tmp_path / "by_hand" / name).read_text()
  # Trained: the predictions are not the same for every example.
  rows = (tmp_path / "hub" / "test_results.tsv").read_text().splitlines()
  assert len(rows) == 5 and len(set(rows)) > 1


@pytest.mark.parametrize("flag,message", [
    ("--do_lower_case=True", "--do_lower_case=True contradicts the module, whose "
                             "tokenization_info says do_lower_case=False"),
    ("--vocab_file=/tmp/vocab.txt", "--vocab_file cannot be given with --bert_hub_module_handle"),
])
def test_script_flags_that_contradict_the_module(tmp_path, flag, message):
  result = _run("run_classifier_with_tfhub.py", tmp_path / "out",
                f"--bert_hub_module_handle={MODULE}", flag)
  assert result.returncode == 1
  assert message in result.stderr and "Traceback" not in result.stderr
  assert not (tmp_path / "out").exists()
