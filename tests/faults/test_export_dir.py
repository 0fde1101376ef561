"""--export_dir never deletes what the user had (issue 17).

Before: ``write_atomically`` removed whatever was at --export_dir, so ``--export_dir`` equal to
``--output_dir`` (or any folder of the user's) lost checkpoints, google/, predictions and the
user's own files, with exit status 0. Now an existing folder is replaced only when it is empty
or holds nothing but a previous export, and then only with ``--overwrite_export``; the
export_dir may not be the output_dir or contain it. Each case: the exact exit status, the one
line on stderr, and the folder's files byte for byte (sha256) afterwards.
"""

import hashlib
import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

import bert_tf
from bert_tf import export, faults
from bert_tf.errors import BertTfError
from bert_tf.export import hugging_face
from bert_tf.modeling import BertConfig, BertSpanLabeler, checkpoints
from bert_tf.squad import export as squad_export
from tests.faults.support_export import (ROOT, TINY_VOCAB, digests, error_line, run_script,
                                         tiny_encoder)
from tests.faults.test_stale_temps import _dead_pid
from tests.reference import google_models

CONFIG = google_models.tiny_config_dict(vocab_size=30522, max_position_embeddings=64)
LENGTHS = ["--max_seq_length=48", "--doc_stride=16", "--max_query_length=12"]


def _fill(folder, files):
  for name, text in files.items():
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
  return folder


def _output_dir(tmp_path):
  """What a finished run leaves in --output_dir, plus a file of the user's."""
  return _fill(tmp_path / "out", {
      "checkpoint": 'model_checkpoint_path: "ckpt-4"\n', "ckpt-4.index": "index",
      "ckpt-4.data-00000-of-00001": "weights", "google/bert_model.ckpt.index": "google",
      "google/vocab.txt": "[PAD]\n", "eval_results.txt": "eval_accuracy = 0.5\n",
      "predictions.json": "{}", "my_notes.txt": "do not lose me"})


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("config") / "bert_config.json"
  path.write_text(json.dumps(CONFIG))
  return path


def test_run_classifier_export_dir_equal_to_output_dir(tmp_path, config_file, uncased_vocab):
  out = _output_dir(tmp_path)
  before = digests(tmp_path)
  result = run_script("run_classifier.py", "--task_name=MRPC", f"--vocab_file={uncased_vocab}",
                      f"--bert_config_file={config_file}", f"--output_dir={out}",
                      f"--export_dir={out}/")
  assert error_line(result) == (
      f"run_classifier.py: error: --export_dir '{out}/' is the --output_dir: give the export "
      f"a folder of its own, e.g. '{out}/export'")
  assert digests(tmp_path) == before


def test_run_squad_export_dir_is_a_users_folder(tmp_path, config_file, uncased_vocab):
  mine = _fill(tmp_path / "mine", {"corpus/wiki.txt": "text", "notes.txt": "mine"})
  before = digests(tmp_path)
  result = run_script("run_squad.py", f"--vocab_file={uncased_vocab}",
                      f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}",
                      f"--export_dir={mine}", *LENGTHS)
  assert error_line(result) == (
      f"run_squad.py: error: --export_dir '{mine}' is a folder with other files in it (e.g. "
      f"'corpus') that an export would replace; nothing was written: give a new path, e.g. "
      f"'{mine}/export'")
  assert digests(tmp_path) == before  # Nor was --output_dir created: the check comes first.


def test_check_export_dir_rules(tmp_path):
  out = _output_dir(tmp_path)
  before = digests(tmp_path)
  refused = {
      str(tmp_path): f"--export_dir '{tmp_path}' contains the --output_dir '{out}': give the "
                     f"export a folder of its own, e.g. '{out}/export'",
      str(out / "google"): f"--export_dir '{out}/google' is a folder with other files in it "
                           f"(e.g. 'bert_model.ckpt.index') that an export would replace; "
                           f"nothing was written: give a new path, e.g. '{out}/google/export'",
      str(out / "my_notes.txt"): f"--export_dir '{out}/my_notes.txt' exists and is not a "
                                 "directory; give a new path",
  }
  for export_dir, message in refused.items():
    for overwrite in (False, True):  # --overwrite_export replaces exports only.
      with pytest.raises(BertTfError) as error:
        export.check_export_dir(export_dir, overwrite=overwrite, output_dir=str(out))
      assert str(error.value) == message
  (out / "empty").mkdir()
  for allowed in ("export", "empty", "new/deeper"):  # Inside output_dir is fine.
    export.check_export_dir(str(out / allowed), output_dir=str(out))
  assert digests(tmp_path) == dict(before, **{"out/empty": None})
  # The working folder, even empty, cannot be swapped out (the export's temporary sibling of
  # "." was named inside it, and the run failed after training).
  cwd = os.getcwd()
  os.chdir(out / "empty")
  try:
    for export_dir, where in ((".", "the working folder"),
                              ("..", "a folder holding the working folder")):
      with pytest.raises(BertTfError) as error:
        export.check_export_dir(export_dir, output_dir=str(out / "elsewhere"))
      assert str(error.value) == (
          f"--export_dir {export_dir!r} is {where}: an export replaces its folder whole; give "
          f"it a folder of its own, e.g. '{export_dir}/export'")
    export.check_export_dir("export", output_dir=str(out / "elsewhere"))
  finally:
    os.chdir(cwd)


def test_what_counts_as_a_previous_export(tmp_path):
  single = _fill(tmp_path / "single", {"saved_model.pb": "g", "fingerprint.pb": "f",
                                       "variables/variables.index": "v", "assets/vocab.txt": "a"})
  layout = {f"{name}/saved_model.pb": "g" for name in ("classifier", "encoder", "preprocessor")}
  export_all = _fill(tmp_path / "all", dict(layout, **{"encoder/variables/x.index": "v"}))
  partial = _fill(tmp_path / "partial", {"classifier/saved_model.pb": "g"})
  with_notes = _fill(tmp_path / "with_notes", {"saved_model.pb": "g", "README": "mine"})
  all_with_notes = _fill(tmp_path / "all_with_notes", dict(layout, **{"notes.txt": "mine"}))
  no_graph = _fill(tmp_path / "no_graph", {"classifier/variables/x.index": "v"})
  for folder in (single, export_all, partial):
    assert export.is_previous_export(str(folder)), folder
    with pytest.raises(BertTfError, match=r"holds a previous export: pass --overwrite_export "
                                          r"to replace it, or give a new path$"):
      export.check_export_dir(str(folder))
    export.check_export_dir(str(folder), overwrite=True)
  for folder in (with_notes, all_with_notes, no_graph):
    assert not export.is_previous_export(str(folder)), folder
    with pytest.raises(BertTfError, match="is a folder with other files in it"):
      export.check_export_dir(str(folder), overwrite=True)


def _tiny_answerer_model(seed):
  keras.utils.set_random_seed(seed)
  return BertSpanLabeler(BertConfig.from_dict(CONFIG))


def test_previous_export_replaced_only_with_overwrite_export(tmp_path, tmp_path_factory,
                                                              config_file, uncased_vocab):
  """A previous QA export: refused without --overwrite_export (files untouched), replaced
  whole with it; a write that fails half-way leaves the previous export as it was."""
  qa = tmp_path / "qa"
  squad_export.export_question_answerer(_tiny_answerer_model(3), str(uncased_vocab), str(qa),
                                        max_seq_length=48, doc_stride=16, max_query_length=12)
  old = digests(qa)
  assert {"saved_model.pb", "variables/variables.index"} <= set(old)
  # The export's weights: another model's, head included (an export of random weights is
  # refused).
  init = tmp_path_factory.mktemp("init") / "bert_model.ckpt"
  model = _tiny_answerer_model(5)
  model({"input_ids": tf.zeros([1, 4], tf.int32), "input_mask": tf.ones([1, 4], tf.int32),
         "segment_ids": tf.zeros([1, 4], tf.int32)})
  checkpoints.save_google_checkpoint(model, str(init))
  args = ("run_squad.py", f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
          f"--output_dir={tmp_path / 'out'}", f"--export_dir={qa}", f"--init_checkpoint={init}",
          *LENGTHS)

  result = run_script(*args)
  assert error_line(result) == (
      f"run_squad.py: error: --export_dir '{qa}' holds a previous export: pass "
      "--overwrite_export to replace it, or give a new path")
  assert digests(qa) == old
  assert sorted(os.listdir(tmp_path)) == ["qa"]

  # A failure half-way through writing the new export (every export goes through
  # write_atomically): the previous one stays as it was.
  def write_half_then_fail(tmp):
    _fill(pathlib.Path(tmp), {"saved_model.pb": "half"})
    raise OSError("No space left on device")
  with pytest.raises(OSError, match="No space left on device"):
    export.write_atomically(str(qa), write_half_then_fail, overwrite=True)
  assert digests(qa) == old
  assert sorted(os.listdir(tmp_path)) == ["qa"]  # No temporary left beside it.

  result = run_script(*args, "--overwrite_export")
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"exported the question-answering SavedModel to {qa}" in result.stdout
  new = digests(qa)
  assert set(new) == set(old)                                   # The same layout, the
  assert new["variables/variables.data-00000-of-00001"] != \
      old["variables/variables.data-00000-of-00001"]            # new weights (seed 5).
  # No temporary, no old copy; and no --output_dir: an export-only run writes nothing there
  # (it left a config and vocab without weights).
  assert sorted(os.listdir(tmp_path)) == ["qa"]
  answer = tf.saved_model.load(str(qa))(tf.constant(["Who ran?"]), tf.constant(["Bob ran."]))
  assert answer["answer_text"].shape == (1,)


def test_a_killed_exports_temporary_folders_are_removed_by_the_next(tmp_path):
  """An export killed half-way leaves ``<export>.tmp-<pid>-<hex>`` folders (the new export being
  written; the previous one renamed aside): the next export removes those and nothing else."""
  target = tmp_path / "export"
  dead = _dead_pid()  # the killed export's process
  _fill(tmp_path, {f"export.tmp-{dead}-0123abcd/variables/variables.index": "partial",
                   f"export.tmp-{dead}-89abcdef/saved_model.pb": "old, renamed aside",
                   "export.tmp-notes/mine.txt": "mine", f"export.tmp-{dead}-0123abcd.txt": "mine",
                   f"other.tmp-{dead}-0123abcd/x": "another target's"})
  leftovers = (f"export.tmp-{dead}-0123abcd", f"export.tmp-{dead}-89abcdef")
  kept = {k: v for k, v in digests(tmp_path).items() if k.split("/")[0] not in leftovers}

  def write(folder):
    _fill(pathlib.Path(folder), {"saved_model.pb": "new"})

  assert export.write_atomically(str(target), write) == str(target)
  assert (target / "saved_model.pb").read_text() == "new"
  assert digests(tmp_path) == dict(kept, **{f"export/{k}": v for k, v in digests(target).items()},
                                   export=None)


def test_another_running_exports_folders_are_left_until_it_has_stopped(tmp_path):
  """Two exports of one --export_dir at once: the second leaves the first's temporary folders
  (its new export being written, its previous one set aside between the two renames) while
  the first's process runs, and neither takes the aside export for a killed overwrite's. Once
  that process has stopped, they are a killed export's leftovers and go."""
  target = tmp_path / "export"
  writer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)  # runs until its stdin is closed
  try:
    running = {f"export.tmp-{writer.pid}-0123abcd/saved_model.pb": "being written",
               f"export.previous.tmp-{writer.pid}-89abcdef/saved_model.pb": "set aside"}
    _fill(tmp_path, running)
    export.write_atomically(str(target), _write_new_export)
    assert (target / "saved_model.pb").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == sorted(["export"] + [n.split("/")[0] for n in running])
    for name, text in running.items():
      assert (tmp_path / name).read_text() == text
  finally:
    writer.stdin.close()
    writer.wait(timeout=60)
  export.write_atomically(str(target), _write_new_export, overwrite=True)
  assert sorted(os.listdir(tmp_path)) == ["export"]


_WRITE_NEW_EXPORT = """
import pathlib, sys
from bert_tf import export
def write(folder):
  (pathlib.Path(folder) / "variables").mkdir(parents=True)
  (pathlib.Path(folder) / "saved_model.pb").write_text("new")
export.write_atomically(sys.argv[1], write, overwrite=True)
"""


def test_an_overwrite_killed_between_its_two_renames_loses_nothing(tmp_path):
  """--overwrite_export renames the previous export aside, then the new one in: a SIGKILL
  between the two (the fault point ``export_swap``) leaves no export at --export_dir; the next
  run puts the previous one back, whole, before anything else."""
  target = tmp_path / "export"
  _fill(target, {"saved_model.pb": "old", "variables/variables.index": "old variables"})
  before = digests(tmp_path)
  killed = subprocess.run(
      [sys.executable, "-c", _WRITE_NEW_EXPORT, str(target)], cwd=ROOT, capture_output=True,
      text=True, timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                   "BERT_TF_FAULT": "kill:export_swap"})
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  assert not target.exists()
  aside = [n for n in os.listdir(tmp_path) if n.startswith("export.previous.tmp-")]
  assert len(aside) == 1
  assert {k.split("/", 1)[1]: v for k, v in before.items() if "/" in k} == digests(
      tmp_path / aside[0])
  # The next run (without --overwrite_export): the previous export is back, and refused.
  with pytest.raises(BertTfError, match="holds a previous export: pass --overwrite_export"):
    export.check_export_dir(str(target))
  assert digests(target) == {k.split("/", 1)[1]: v for k, v in before.items() if "/" in k}
  # The next run with --overwrite_export (in this process: no fault): the new export, no
  # temporary folder left.
  export.write_atomically(str(target), _write_new_export, overwrite=True)
  assert sorted(os.listdir(tmp_path)) == ["export"]
  assert digests(target) == {"saved_model.pb": _sha256("new"), "variables": None}


def _write_new_export(folder):  # what _WRITE_NEW_EXPORT writes
  (pathlib.Path(folder) / "variables").mkdir(parents=True)
  (pathlib.Path(folder) / "saved_model.pb").write_text("new")


def _sha256(text):
  return hashlib.sha256(text.encode()).hexdigest()


def test_an_overwrite_stopped_between_its_two_renames_puts_the_previous_export_back(
    tmp_path, monkeypatch):
  """Ctrl-C (or any exception) between the two renames: the previous export is renamed back at
  once, nothing is left beside it, and the exception goes on."""
  target = tmp_path / "export"
  _fill(target, {"saved_model.pb": "old", "variables/variables.index": "old variables"})
  before = digests(tmp_path)
  passes = []

  def interrupt(name, number=None):
    del number
    passes.append(name)
    if name == "export_swap":
      assert not target.exists()  # The previous export is aside.
      raise KeyboardInterrupt
  monkeypatch.setattr(faults, "point", interrupt)
  with pytest.raises(KeyboardInterrupt):
    export.write_atomically(str(target), _write_new_export, overwrite=True)
  assert passes == ["export_swap"]
  assert digests(tmp_path) == before


def test_an_aside_export_of_another_kind_is_never_deleted(tmp_path):
  """A Hugging Face export set aside by a killed overwrite, then a SavedModel export to the same
  path: it is not a SavedModel, so it is neither put back as one nor deleted."""
  dead = _dead_pid()
  aside = _fill(tmp_path / f"export.previous.tmp-{dead}-0123abcd",
                {"config.json": "{}", "model.safetensors": "weights", "vocab.txt": "[PAD]\n"})
  empty_aside = tmp_path / f"export.previous.tmp-{dead}-89abcdef"  # an empty folder set aside
  empty_aside.mkdir()
  kept = digests(aside)
  export.write_atomically(str(tmp_path / "export"), _write_new_export)
  assert sorted(os.listdir(tmp_path)) == ["export", aside.name]
  assert digests(aside) == kept
  assert (tmp_path / "export" / "saved_model.pb").read_text() == "new"


_WRITE_NEW_HF_EXPORT = """
import sys
import bert_tf
from tests.faults.support_export import tiny_encoder
bert_tf.export_hugging_face(tiny_encoder(seed=2), sys.argv[1], vocab_file=sys.argv[2],
                            overwrite=True)
"""


def test_a_hugging_face_overwrite_killed_between_its_two_renames_loses_nothing(tmp_path):
  """The Hugging Face export swaps as the SavedModel one does (``bert_tf.export.swap``): a
  SIGKILL at ``export_swap`` leaves the previous export whole aside and the new one whole in its
  temporary folder; the next export puts the previous one back first (refused without
  overwrite), and with overwrite writes the new one, leaving nothing beside it."""
  vocab = tmp_path / "vocab.txt"
  vocab.write_text(TINY_VOCAB)
  out = tmp_path / "out"
  target = out / "hf"
  bert_tf.export_hugging_face(tiny_encoder(seed=1), str(target), vocab_file=str(vocab))
  old = digests(target)
  # What the new export must be: the same model written to a fresh folder.
  bert_tf.export_hugging_face(tiny_encoder(seed=2), str(tmp_path / "expected"),
                              vocab_file=str(vocab))
  new = digests(tmp_path / "expected")
  assert sorted(old) == sorted(new) == sorted(hugging_face.FILES)
  assert old["model.safetensors"] != new["model.safetensors"]

  killed = subprocess.run(
      [sys.executable, "-c", _WRITE_NEW_HF_EXPORT, str(target), str(vocab)], cwd=ROOT,
      capture_output=True, text=True, timeout=600,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "BERT_TF_FAULT": "kill:export_swap"})
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  left = {re.sub(r"tmp-\d+-[0-9a-f]{8}$", "tmp-*", name): name for name in os.listdir(out)}
  assert sorted(left) == ["hf.previous.tmp-*", "hf.tmp-*"]  # No hf: between the renames.
  assert digests(out / left["hf.previous.tmp-*"]) == old
  assert digests(out / left["hf.tmp-*"]) == new

  # The next run without overwrite: the previous export is back, and refused.
  with pytest.raises(bert_tf.BertTfError, match=r"holds a previous export: pass overwrite=True"):
    bert_tf.export_hugging_face(tiny_encoder(seed=2), str(target), vocab_file=str(vocab))
  assert digests(target) == old
  # With overwrite: the new export, byte for byte; no temporary folder left.
  bert_tf.export_hugging_face(tiny_encoder(seed=2), str(target), vocab_file=str(vocab),
                              overwrite=True)
  assert sorted(os.listdir(out)) == ["hf"]
  assert digests(target) == new


def test_an_overwrite_keeps_the_users_assets_extra(tmp_path):
  """TF Serving's warmup requests live in a SavedModel's assets.extra/, which TensorFlow never
  writes: --overwrite_export deleted them with the previous export. They go into the new one,
  for one SavedModel and for export_all's three; a new export without a previous one has
  none."""
  warmup = {"assets.extra/tf_serving_warmup_requests": "warmup",
            "assets.extra/more/notes.txt": "mine"}
  single = tmp_path / "single"
  _fill(single, {"saved_model.pb": "old", "variables/variables.index": "old", **warmup})
  export.write_atomically(str(single), _write_new_export, overwrite=True)
  assert digests(single) == {"saved_model.pb": _sha256("new"), "variables": None,
                             "assets.extra": None, "assets.extra/more": None,
                             "assets.extra/tf_serving_warmup_requests": _sha256("warmup"),
                             "assets.extra/more/notes.txt": _sha256("mine")}

  every = tmp_path / "all"
  _fill(every, {"classifier/saved_model.pb": "old", "encoder/saved_model.pb": "old",
                **{f"classifier/{k}": v for k, v in warmup.items()}})

  def write_all(folder):
    for name in ("classifier", "encoder"):
      _write_new_export(os.path.join(folder, name))

  export.write_atomically(str(every), write_all, overwrite=True)
  assert sorted(digests(every)) == [
      "classifier", "classifier/assets.extra", "classifier/assets.extra/more",
      "classifier/assets.extra/more/notes.txt",
      "classifier/assets.extra/tf_serving_warmup_requests", "classifier/saved_model.pb",
      "classifier/variables", "encoder", "encoder/saved_model.pb", "encoder/variables"]
  assert sorted(os.listdir(tmp_path)) == ["all", "single"]
