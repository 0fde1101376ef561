"""Resuming a fine-tuning folder's checkpoints on other training examples is refused with one
line (bert_tf.run_lock.check_training_data): the resumed run went on from the checkpoint's
step through the new examples, a model trained on a mix of the two, without a word. The same
examples at another path resume; ``--resume_with_changed_flags`` resumes with a warning and
records the new examples."""

import json
import shutil

import pytest
import tensorflow as tf

from bert_tf import run_lock
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig
from bert_tf.training import classifier, loop, pretraining
from tests.conftest import FIXTURES
from tests.reference import google_models
from tests.training.test_run_pretraining import PRED, SEQ, workdir  # noqa: F401  (fixture)


def _data(tmp_path, name, change=False):
  folder = tmp_path / name
  shutil.copytree(FIXTURES / "glue" / "SST-2", folder)
  if change:  # one word of one training sentence
    train = folder / "train.tsv"
    lines = train.read_text().splitlines()
    sentence, label = lines[1].rsplit("\t", 1)
    lines[1] = f"{sentence} again\t{label}"
    train.write_text("\n".join(lines) + "\n")
  return str(folder)


def _train(out, data_dir, epochs, lines=None, **kwargs):
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))
  return classifier.run_classifier(
      config, "SST-2", kwargs.pop("vocab"), str(out), tf.distribute.get_strategy(),
      data_dir=data_dir, max_seq_length=16, do_train=True, train_batch_size=2,
      num_train_epochs=epochs, seed=3, steps_per_loop=1,
      progress=(lines.append if lines is not None else None), **kwargs)


def _step(out):
  return int(loop.latest_checkpoint(str(out)).rsplit("-", 1)[1])


def _recorded(out):
  return json.loads((out / run_lock.SETTINGS_FILE).read_text())[run_lock.TRAINING_DATA]


def test_resuming_on_other_training_examples_is_refused(tmp_path, uncased_vocab):
  vocab = str(uncased_vocab)
  out = tmp_path / "out"
  _train(out, _data(tmp_path, "first"), 1.0, vocab=vocab)
  first_step, first_record = _step(out), _recorded(out)
  assert first_step == 3  # 6 examples / 2

  # Other examples, more epochs (a resume): refused before anything is written.
  changed = _data(tmp_path, "changed", change=True)
  with pytest.raises(BertTfError) as error:
    _train(out, changed, 2.0, vocab=vocab)
  assert str(error.value) == (
      f"--output_dir {str(out)!r} holds checkpoints trained on other examples than "
      f"{changed}/train.tsv's: resumed, the model would go on from their step through these, "
      "trained on a mix of the two; pass --resume_with_changed_flags to resume them anyway, "
      "or use another --output_dir")
  assert _step(out) == first_step and _recorded(out) == first_record

  # The same examples moved to another folder: they resume.
  _train(out, _data(tmp_path, "moved"), 2.0, vocab=vocab)
  assert _step(out) == 2 * first_step and _recorded(out) == first_record

  # --resume_with_changed_flags: a warning, and the new examples are recorded.
  lines = []
  _train(out, changed, 3.0, lines, vocab=vocab, resume_with_changed_flags=True)
  assert f"warning: --output_dir {str(out)!r} holds checkpoints trained on other examples " \
      f"than {changed}/train.tsv's: resuming them on these (--resume_with_changed_flags)" in lines
  assert _step(out) == 3 * first_step and _recorded(out) != first_record
  _train(out, changed, 4.0, vocab=vocab)  # now theirs
  assert _step(out) == 4 * first_step


def test_a_folder_without_the_record_takes_the_resumed_runs(tmp_path, uncased_vocab):
  """A folder of an older bert_tf (no training_data in run_settings.json) resumes and records
  the examples it resumed on."""
  vocab = str(uncased_vocab)
  out = tmp_path / "out"
  data = _data(tmp_path, "data")
  _train(out, data, 1.0, vocab=vocab)
  record = json.loads((out / run_lock.SETTINGS_FILE).read_text())
  fingerprint = record.pop(run_lock.TRAINING_DATA)
  (out / run_lock.SETTINGS_FILE).write_text(json.dumps(record))
  _train(out, data, 2.0, vocab=vocab)
  assert _recorded(out) == fingerprint


def test_without_progress_the_warnings_are_logged(tmp_path, uncased_vocab, caplog):
  """Called from Python without ``progress=`` (a notebook), a run's warning lines are absl
  warnings: a damaged newest checkpoint was skipped without a word."""
  vocab = str(uncased_vocab)
  out = tmp_path / "out"
  data = _data(tmp_path, "data")
  _train(out, data, 1.0, vocab=vocab, save_checkpoints_steps=1)
  index = out / "ckpt-3.index"
  index.write_bytes(index.read_bytes()[:10])
  with caplog.at_level("WARNING"):
    _train(out, data, 2.0, vocab=vocab, save_checkpoints_steps=1)
  warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert [m for m in warned if m.startswith("warning: ") and "ckpt-3" in m], warned


def test_resuming_pretraining_on_other_input_files_is_refused(tmp_path, workdir):  # noqa: F811
  """run_pretraining: the record holds each input file's name and size in order and the head of
  the first; a resume on other files (a shard dropped or added, files made anew) is refused, the
  same files moved to another folder resume."""
  config = BertConfig.from_json_file(str(workdir / "bert_config.json"))
  out = tmp_path / "out"

  def train(input_file, steps, lines=None, **kwargs):
    return pretraining.run_pretraining(
        config, input_file, str(out), tf.distribute.get_strategy(), max_seq_length=SEQ,
        max_predictions_per_seq=PRED, train_batch_size=8, learning_rate=2e-3,
        num_train_steps=steps, num_warmup_steps=1, steps_per_loop=1, seed=1,
        progress=(lines.append if lines is not None else None), **kwargs)

  both = str(workdir / "data-*.tfrecord")
  train(both, 2)
  first_record = _recorded(out)
  one = str(workdir / "data-0.tfrecord")
  with pytest.raises(BertTfError) as error:
    train(one, 4)
  assert str(error.value) == (
      f"--output_dir {str(out)!r} holds checkpoints trained on other input files than "
      f"--input_file {one!r} gives (1 file(s): one added, left out or made anew): "
      "resumed, the model would go on from their step through these, trained on a mix of the "
      "two; pass --resume_with_changed_flags to resume them anyway, or use another "
      "--output_dir")
  assert _step(out) == 2 and _recorded(out) == first_record

  moved = tmp_path / "moved"
  moved.mkdir()
  for name in ("data-0.tfrecord", "data-1.tfrecord"):
    shutil.copy(workdir / name, moved / name)
  train(str(moved / "data-*.tfrecord"), 4)
  assert _step(out) == 4 and _recorded(out) == first_record

  lines = []
  train(one, 6, lines, resume_with_changed_flags=True)
  assert any(line.startswith("warning: ") and "other input files" in line for line in lines)
  assert _step(out) == 6 and _recorded(out) != first_record
