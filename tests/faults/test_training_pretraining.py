"""run_pretraining.py under faults: killed runs, damaged checkpoints, foreign inputs, Ctrl-C.

Each case runs the script (subprocess) and asserts the exact outcome: exit status, the one
line it prints, the files in ``--output_dir`` and their digests. The reference is an
uninterrupted run of the same command (tiny BERT, the Google-made TFRecords of
``tests/training/test_run_pretraining.py``).
"""

import hashlib
import os
import random
import shutil
import signal
import subprocess

import pytest
import tensorflow as tf

from tests import warm
from tests.faults import hook
# The module fixture ``workdir`` (TFRecords by Google's create_pretraining_data) and helpers.
from tests.training.test_run_pretraining import (PRED, ROOT, SEQ, _command, _env,  # noqa: F401
                                                 workdir)

STEPS = 6
FLAGS = ["--steps_per_loop=1", "--save_checkpoints_steps=1", "--keep_checkpoint_max=3",
         "--do_eval=True", "--max_eval_steps=2"]
PROG = "run_pretraining.py"


def _run(work, out, extra=(), env=None, steps=STEPS):
  return warm.run(_command(work, out, steps, [*FLAGS, *extra]), capture_output=True,
                  text=True, cwd=ROOT, timeout=600, env=env or _env())


def _digests(folder):
  """{relative path: sha256} of every file under ``folder`` but the TensorBoard events (their
  names and contents carry wall-clock times) and the ``checkpoint`` state (timestamps)."""
  result = {}
  for dirpath, _, names in os.walk(folder):
    for name in names:
      path = os.path.join(dirpath, name)
      rel = os.path.relpath(path, folder)
      if rel.startswith("summaries" + os.sep) or rel == "checkpoint":
        continue
      with open(path, "rb") as f:
        result[rel] = hashlib.sha256(f.read()).hexdigest()
  return result


def _state(folder):
  state = tf.train.get_checkpoint_state(str(folder))
  return (os.path.basename(state.model_checkpoint_path),
          [os.path.basename(p) for p in state.all_model_checkpoint_paths])


@pytest.fixture(scope="module")
def straight(workdir, tmp_path_factory):  # noqa: F811
  out = tmp_path_factory.mktemp("straight") / "out"
  result = _run(workdir, out)
  assert result.returncode == 0, result.stderr[-3000:]
  digests = _digests(out)
  assert sorted(digests) == sorted(
      [f"ckpt-{n}.{ext}" for n in (4, 5, 6) for ext in ("index", "data-00000-of-00001")] +
      ["bert_config.json", "eval_results.txt", "google/bert_config.json", "google/bert_model.ckpt.index",
       "google/bert_model.ckpt.data-00000-of-00001", "google/checkpoint", "run_settings.json"])
  assert _state(out) == ("ckpt-6", ["ckpt-4", "ckpt-5", "ckpt-6"])
  return out


def _kill_at(work, out, point, n):
  """Runs the command with ``BERT_TF_FAULT=kill:<point>:<n>``: it SIGKILLs itself there."""
  result = _run(work, out, env=hook.env(_env(), point, n, action="kill"))
  assert result.returncode == -signal.SIGKILL, (point, n, result.stderr[-3000:])


def test_sigkill_at_seeded_points_then_the_same_command_gives_the_uninterrupted_outputs(
    workdir, straight, tmp_path):  # noqa: F811
  rng = random.Random(20261124)
  start = rng.randint(1, 2)             # killed inside the save of ckpt-<start>, no file yet
  written = rng.randint(start + 1, 4)   # killed after ckpt-<written>.* are whole, before the
  #                                       `checkpoint` state names them
  step = rng.randint(written + 1, 5)    # killed right after the progress line of a step,
  #                                       before its save
  out = tmp_path / "out"
  _kill_at(workdir, out, "save_start", start)
  _kill_at(workdir, out, "save_written", written)
  assert os.path.exists(out / f"ckpt-{written}.index")
  assert _state(out)[0] == f"ckpt-{written - 1}"  # the kill came before the state update
  _kill_at(workdir, out, "step", step)
  assert _state(out)[0] == f"ckpt-{step - 1}"
  result = _run(workdir, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  assert f"resumed from {out}/ckpt-{step - 1} at step {step - 1}" in result.stdout
  # The same files, byte for byte (checkpoints, Google export, eval_results.txt), none more.
  assert _digests(out) == _digests(straight)
  assert _state(out) == _state(straight)


def _copy(straight, tmp_path):
  out = tmp_path / "out"
  shutil.copytree(straight, out)
  return out


def _truncate(path, size=None):
  """Cuts a file to ``size`` bytes (default: half, which loses optimizer slots, not the model)."""
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2 if size is None else size)


def test_garbage_state_and_truncated_shard_fall_back_and_leftovers_are_cleaned(
    workdir, straight, tmp_path):  # noqa: F811
  out = _copy(straight, tmp_path)
  (out / "checkpoint").write_text("garbage\n")
  _truncate(out / "ckpt-6.data-00000-of-00001")
  # What a save killed before TF merged its shards leaves, and the user's own look-alikes.
  (out / "ckpt-7_temp").mkdir()
  shutil.copyfile(straight / "ckpt-6.index", out / "ckpt-7_temp" / "part-00000-of-00001.index")
  (out / "notes_temp").mkdir()
  (out / "notes_temp" / "mine.txt").write_text("keep me")
  (out / "ckpt-7_temp.txt").write_text("keep me too")
  result = _run(workdir, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  warnings = [x for x in result.stdout.splitlines() if x.startswith(("warning:", "removing"))]
  assert warnings == [
      f"removing {out}/ckpt-7_temp, left by a save that was interrupted",
      f"warning: {out}/checkpoint is unreadable; checkpoint {out}/ckpt-6 is damaged (Read less "
      f"bytes than requested): resuming from {out}/ckpt-5, the newest readable checkpoint"]
  assert f"resumed from {out}/ckpt-5 at step 5" in result.stdout.splitlines()
  expected = dict(_digests(straight), **{"notes_temp/mine.txt": _sha("keep me"),
                                         "ckpt-7_temp.txt": _sha("keep me too")})
  assert _digests(out) == expected
  assert _state(out) == _state(straight)


def _sha(text):
  return hashlib.sha256(text.encode()).hexdigest()


def test_missing_index_and_missing_data_fall_back_two_checkpoints(workdir, straight, tmp_path):  # noqa: F811,E501
  out = _copy(straight, tmp_path)
  os.remove(out / "ckpt-6.index")
  os.remove(out / "ckpt-5.data-00000-of-00001")
  result = _run(workdir, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  warnings = [x for x in result.stdout.splitlines() if x.startswith("warning:")]
  assert len(warnings) == 1
  assert warnings[0].startswith(f"warning: checkpoint {out}/ckpt-6 is damaged (")
  assert f"; checkpoint {out}/ckpt-5 is damaged (" in warnings[0]
  assert warnings[0].endswith(f": resuming from {out}/ckpt-4, the newest readable checkpoint")
  assert _digests(out) == _digests(straight)
  assert _state(out) == _state(straight)


def _error_cases(workdir, straight, tmp_path):  # noqa: F811
  """(name, extra flags, output_dir, expected last stderr line, digests before)."""
  cases = []
  # Every checkpoint damaged: an error, nothing overwritten.
  all_bad = tmp_path / "all_bad"
  shutil.copytree(straight, all_bad)
  for n in (4, 5, 6):
    _truncate(all_bad / f"ckpt-{n}.data-00000-of-00001")
  reason = "Read less bytes than requested"
  cases.append(([], all_bad, (
      f"{PROG}: error: --output_dir '{all_bad}': no readable checkpoint, all are damaged: "
      f"ckpt-6 ({reason}); ckpt-5 ({reason}); ckpt-4 ({reason}); move them away to start "
      "over")))
  # Eval only, the newest checkpoint damaged: an error, not an evaluation of older weights.
  eval_only = tmp_path / "eval_only"
  shutil.copytree(straight, eval_only)
  _truncate(eval_only / "ckpt-6.data-00000-of-00001", 1000)  # the model's variables too
  cases.append((["--do_train=False"], eval_only, (
      f"{PROG}: error: checkpoint '{eval_only}/ckpt-6' is unreadable (truncated or corrupt?): "
      f"{reason}")))
  # Another bert_config over the same output_dir: refused by the flags its checkpoints were
  # made with (run_settings.json); asked to resume anyway, they do not fit the model.
  config = tmp_path / "bert_config_64.json"
  config.write_text((workdir / "bert_config.json").read_text().replace(
      '"hidden_size": 32', '"hidden_size": 64'))
  other = tmp_path / "other"
  shutil.copytree(straight, other)
  cases.append(([f"--bert_config_file={config}"], other, (
      f"{PROG}: error: --output_dir '{other}' holds checkpoints made with other flags: "
      "--bert_config_file's hidden_size 32 (now 64); pass --resume_with_changed_flags to resume "
      "them anyway, or use another --output_dir")))
  other = tmp_path / "other_asked"
  shutil.copytree(straight, other)
  cases.append(([f"--bert_config_file={config}", "--resume_with_changed_flags"], other, (
      f"{PROG}: error: --output_dir '{other}': checkpoint ckpt-6 was written for another "
      "model: bert/embeddings/LayerNorm/beta has shape [32] there, [64] in this model "
      "(another --bert_config_file?); use a new --output_dir")))
  return cases


def _input_cases(tmp_path):
  """(--input_file, output_dir, expected error) of inputs refused before anything is made."""
  cases = []
  # Inputs: an empty TFRecord; records written for another max_seq_length.
  empty = tmp_path / "empty.tfrecord"
  empty.write_bytes(b"")
  cases.append((f"{empty}", tmp_path / "o1", f"no records in the input file(s): {empty}"))
  longer = tmp_path / "seq64.tfrecord"
  with tf.io.TFRecordWriter(str(longer)) as writer:
    ints = lambda n: tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * n))  # noqa: E731
    writer.write(tf.train.Example(features=tf.train.Features(feature={
        "input_ids": ints(64), "input_mask": ints(64), "segment_ids": ints(64),
        "masked_lm_positions": ints(PRED), "masked_lm_ids": ints(PRED),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * PRED)),
        "next_sentence_labels": ints(1)})).SerializeToString())
  cases.append((f"{empty},{longer}", tmp_path / "o2", (
      f"{longer}: feature input_ids has 64 values, expected {SEQ} "
      f"(--max_seq_length {SEQ}): the file was written for --max_seq_length 64")))
  return cases


def test_failures_are_one_line_errors_and_nothing_is_overwritten(workdir, straight, tmp_path):  # noqa: F811,E501
  cases = _error_cases(workdir, straight, tmp_path)
  before = [_digests(out) if out.exists() else {} for _, out, _ in cases]
  states = [(out / "checkpoint").read_text() if out.exists() else None for _, out, _ in cases]
  for extra, out, line in cases:
    result = _run(workdir, out, extra)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == line
  for (_, out, _), digests, state in zip(cases, before, states):
    if state is not None:
      assert _digests(out) == digests
      assert (out / "checkpoint").read_text() == state
    else:  # an input error, found before anything is written: no checkpoint, no folder
      assert not out.exists()


def test_foreign_inputs_are_one_line_errors_before_anything_is_written(workdir, tmp_path):  # noqa: F811,E501
  """In-process (the script's way to its one line is checked above): the library call the
  script makes, with the script's flags."""
  from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  from bert_tf.training import pretraining  # pylint: disable=import-outside-toplevel
  config = checkpoints.load_config(str(workdir / "bert_config.json"))
  for input_file, out, line in _input_cases(tmp_path):
    with pytest.raises(BertTfError) as error:
      pretraining.run_pretraining(
          config, input_file, str(out), tf.distribute.get_strategy(), max_seq_length=SEQ,
          max_predictions_per_seq=PRED, do_eval=True, train_batch_size=8, eval_batch_size=8,
          learning_rate=2e-3, num_train_steps=STEPS, num_warmup_steps=2, max_eval_steps=2,
          save_checkpoints_steps=1, keep_checkpoint_max=3, steps_per_loop=1, seed=1)
    assert str(error.value) == line
    assert not out.exists()


def seeded_points(seed, steps, count):
  """``count`` distinct (point, step) of a run of ``steps`` steps with a save every step, in a
  seeded order: inside a save before any file, after a save's files are whole, after a step's
  progress line."""
  points = [(p, k) for k in range(1, steps + 1) for p in ("save_start", "save_written", "step")]
  return random.Random(seed).sample(points, count)


SIGNALS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}


def test_ctrl_c_and_sigterm_stop_at_once_and_the_same_command_resumes(
    workdir, straight, tmp_path):  # noqa: F811
  # Ctrl-C, Ctrl-C again, then SIGTERM, each while the run waits at a seeded point (in a save,
  # between its files and the state, or between steps; each resumed run goes to a later
  # point), then the same command: the uninterrupted run's outputs. (One final run for the
  # three stops: each must leave a folder that resumes exactly.) (Before Ctrl-C stopped the
  # TensorFlow scripts at once, an interrupt inside TF's checkpoint code gave "RuntimeError:
  # Exiting device scope without proper scope nesting" and, once, a segmentation fault at
  # exit.)
  order = ("step", "save_start", "save_written")  # within a step, as a run passes them
  points = sorted(seeded_points(20261125, STEPS, 3), key=lambda p: (p[1], order.index(p[0])))
  out = tmp_path / "out"
  for signum, (point, n) in zip((signal.SIGINT, signal.SIGINT, signal.SIGTERM), points):
    process = hook.start_at_point(_command(workdir, out, STEPS, FLAGS), _env(), point, n,
                                  tmp_path / f"ready-{point}-{n}", cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=600)
    code, word = SIGNALS[signum]
    assert process.returncode == code, (point, n, stderr[-3000:])
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == f"{PROG}: {word}"
    # Checkpoints are whole or absent: every ckpt-N has its index and data. (A stop between
    # TF's shard write and merge may leave ckpt-N_temp/: the next run removes it.)
    names = os.listdir(out)
    for prefix in {n.split(".")[0] for n in names
                   if n.startswith("ckpt-") and not n.split(".")[0].endswith("_temp")}:
      assert {f"{prefix}.index", f"{prefix}.data-00000-of-00001"} <= set(names), names
  result = _run(workdir, out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  assert _digests(out) == _digests(straight)
  assert _state(out) == _state(straight)


def test_the_next_run_removes_temp_files_of_a_stopped_process(tmp_path):
  """An output stopped mid-write (Ctrl-C, a kill) leaves ``<name>.tmp-<pid>-<8 hex>``: the next
  training run in the folder removes it when that process is gone, and only then."""
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  from tests.faults.test_stale_temps import _dead_pid  # pylint: disable=import-outside-toplevel
  dead = tmp_path / f"eval_results.txt.tmp-{_dead_pid()}-0123abcd"
  alive = tmp_path / f"eval_results.txt.tmp-{os.getpid()}-0123abcd"  # a run still writing
  user = tmp_path / "notes.tmp-1-xyz"  # not the pattern
  for path in (dead, alive, user):
    path.write_text("x")
  said = []
  loop.clean_save_leftovers(str(tmp_path), said.append)
  assert sorted(os.listdir(tmp_path)) == sorted([alive.name, user.name])
  assert said == [f"removing {dead}, left by a write that was interrupted"]
