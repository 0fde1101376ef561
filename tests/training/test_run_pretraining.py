"""run_pretraining.py end to end on TFRecords made by Google's own create_pretraining_data.py
from real text: the loss falls, eval_results.txt has the original's keys, the Google-format
export is read by Google's code, and a run killed with SIGKILL resumes to the same weights."""

import os
import random
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig
from bert_tf.training import pretraining
from tests import warm
from tests.reference.google_bert import google

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ, PRED = 32, 5
CONFIG = ('{"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, '
          '"num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu", '
          '"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, '
          '"max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}')


def _corpus(path, documents=40):
  """Real English prose: Python's own pydoc topics, one sentence per line, topic = document."""
  import re
  from pydoc_data import topics
  lines = []
  for text in list(topics.topics.values())[:documents]:
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split()))]
    lines.extend(s for s in sentences if len(s) > 20)
    lines.append("")
  path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, uncased_vocab):
  work = tmp_path_factory.mktemp("pretraining")
  _corpus(work / "corpus.txt")
  original = google("create_pretraining_data")
  tokenization = google("tokenization")
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  instances = original.create_training_instances(
      [str(work / "corpus.txt")], tokenizer, SEQ, 2, 0.15, PRED, 0.1, random.Random(12345))
  files = [str(work / "data-0.tfrecord"), str(work / "data-1.tfrecord")]
  original.write_instance_to_example_files(instances, tokenizer, SEQ, PRED, files)
  (work / "bert_config.json").write_text(CONFIG)
  return work


def _command(work, output_dir, steps, extra=()):
  return [sys.executable, os.path.join(ROOT, "run_pretraining.py"),
          f"--input_file={work}/data-*.tfrecord", f"--output_dir={output_dir}",
          f"--bert_config_file={work}/bert_config.json", "--do_train=True",
          f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
          "--train_batch_size=8", "--eval_batch_size=8", "--learning_rate=2e-3",
          f"--num_train_steps={steps}", "--num_warmup_steps=2", "--seed=1", *extra]


def _env():
  return {**os.environ, "TF_DETERMINISTIC_OPS": "1", "TF_CPP_MIN_LOG_LEVEL": "3",
          "PYTHONUNBUFFERED": "1"}


def _google_export(output_dir):
  reader = tf.train.load_checkpoint(os.path.join(output_dir, "google", "bert_model.ckpt"))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _scalars(folder):
  """{tag: [(step, value)]} of the TensorBoard scalars in ``folder``'s event files."""
  found = {}
  for path in sorted(folder.glob("events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      for value in event.summary.value:
        found.setdefault(value.tag, []).append(
            (event.step, np.float32(tf.make_ndarray(value.tensor))))
  return found


def test_pretraining_learns_and_evaluates(workdir, tmp_path, uncased_vocab):
  out = tmp_path / "out"
  result = warm.run(
      _command(workdir, out, 40, [f"--vocab_file={uncased_vocab}",
                                  "--do_eval=True", "--steps_per_loop=10",
                                  "--save_checkpoints_steps=20", "--max_eval_steps=5",
                                  "--use_tpu=False", "--iterations_per_loop=10"]),
      capture_output=True, text=True, cwd=ROOT, timeout=600, env=_env())
  assert result.returncode == 0, result.stderr[-3000:]
  steps = [line for line in result.stdout.splitlines() if line.startswith("step ")]
  assert [line.split()[1] for line in steps] == ["10/40", "20/40", "30/40", "40/40"]
  # What the glob took is said (an earlier data preparation's extra shards would be read too).
  files = sorted(str(p) for p in workdir.glob("data-*.tfrecord"))
  assert f"--input_file: {len(files)} file(s): {', '.join(files)}" in result.stdout
  first, last = float(steps[0].split()[3]), float(steps[-1].split()[3])
  assert last < first - 1.0, (first, last)
  for needle in ("examples/s", "tokens/s", "ETA"):
    assert needle in steps[-1]
  results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
  assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                             "next_sentence_accuracy", "next_sentence_loss"]
  assert results["global_step"] == "40" and 0 < float(results["masked_lm_accuracy"]) < 1
  assert os.listdir(out / "summaries" / "train")
  # --do_eval's numbers in TensorBoard too (the original's Estimator wrote eval/ events).
  scalars = _scalars(out / "summaries" / "eval")
  assert sorted(scalars) == sorted(k for k in results if k != "global_step")
  for key, points in scalars.items():
    assert points == [(40, np.float32(results[key]))], (key, points)
  # Google's names in the export, with both heads.
  names = set(_google_export(out))
  modeling = google("modeling")
  del modeling
  assert {"bert/embeddings/word_embeddings", "cls/predictions/output_bias",
          "cls/seq_relationship/output_weights", "global_step"} <= names
  # An eval-only run from the training checkpoint gives the same numbers again.
  again = warm.run(
      _command(workdir, out, 40, ["--do_train=False", "--do_eval=True", "--max_eval_steps=5"]),
      capture_output=True, text=True, cwd=ROOT, timeout=600, env=_env())
  assert again.returncode == 0, again.stderr[-3000:]
  assert (out / "eval_results.txt").read_text() == "\n".join(
      f"{k} = {v}" for k, v in sorted(results.items())) + "\n"
  # --vocab_file travels with the weights: the folder and google/ load alone, heads included.
  from tests.reference import loadable  # pylint: disable=import-outside-toplevel
  assert (out / "vocab.txt").read_bytes() == uncased_vocab.read_bytes()
  bert = loadable.assert_folder_loads_alone(out, out / "google", has_masked_lm=True)
  assert len(bert.fill_mask("the [MASK] sat.", top_k=3)) == 3


def test_killed_run_resumes_to_the_same_weights(workdir, tmp_path):
  steps = 12
  flags = ["--steps_per_loop=1", "--save_checkpoints_steps=1", "--keep_checkpoint_max=20"]
  straight = warm.run(_command(workdir, tmp_path / "straight", steps, flags),
                      capture_output=True, text=True, cwd=ROOT, timeout=600, env=_env())
  assert straight.returncode == 0, straight.stderr[-3000:]
  killed_dir = tmp_path / "killed"
  # SIGKILL after step 5's progress line, before its save (the fault point of bert_tf.faults).
  killed = warm.run(_command(workdir, killed_dir, steps, flags), cwd=ROOT, timeout=600,
                    env={**_env(), "BERT_TF_FAULT": "kill:step:5"}, capture_output=True)
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  assert not (killed_dir / "google").exists()
  resumed = warm.run(_command(workdir, killed_dir, steps, flags), capture_output=True,
                     text=True, cwd=ROOT, timeout=600, env=_env())
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"resumed from {killed_dir}/ckpt-4 at step 4" in resumed.stdout
  a, b = _google_export(tmp_path / "straight"), _google_export(killed_dir)
  assert a.keys() == b.keys()
  for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_bad_flags_are_one_line_errors(workdir, tmp_path):
  for extra, needle in (
      (["--max_seq_length=128"], "--max_seq_length 128 exceeds max_position_embeddings 64"),
      ([f"--input_file={tmp_path}/none-*.tfrecord"], "no input files match"),
      (["--train_batch_size=7", "--gradient_accumulation_steps=2"], "must divide evenly"),
      ([f"--bert_config_file={tmp_path}/missing.json"], "config file not found")):
    result = warm.run(_command(workdir, tmp_path / "o", 2, extra), capture_output=True,
                      text=True, cwd=ROOT, timeout=600, env=_env())
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert needle in result.stderr.strip().splitlines()[-1]


def test_forced_fused_attention_without_a_gpu_is_a_one_line_error(workdir, tmp_path):
  result = warm.run(
      _command(workdir, tmp_path / "o", 2, ["--attention_implementation=cudnn"]),
      capture_output=True, text=True, cwd=ROOT, timeout=600, env=_env())
  assert result.returncode == 1, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  assert ("error: --attention_implementation=cudnn: cuDNN's fused attention cannot run the "
          "training step: no GPU of compute capability 8.0" in
          result.stderr.strip().splitlines()[-1])


def test_pretraining_warmup_longer_than_the_run_is_said(tmp_path, workdir):
  """--num_warmup_steps above --num_train_steps (the original took it without a word): the
  whole run is warmup, the rate ends at learning_rate x steps / warmup (2e-3 x 2 / 5)."""
  config = BertConfig.from_json_file(str(workdir / "bert_config.json"))
  lines = []
  pretraining.run_pretraining(
      config, str(workdir / "data-*.tfrecord"), str(tmp_path / "out"),
      tf.distribute.get_strategy(), max_seq_length=SEQ, max_predictions_per_seq=PRED,
      train_batch_size=8, learning_rate=2e-3, num_train_steps=2, num_warmup_steps=5,
      steps_per_loop=1, seed=1, progress=lines.append)
  assert ("warning: --num_warmup_steps 5 is more than --num_train_steps 2: the learning rate "
          "rises through the whole run, to about 0.0008 at its end, and never reaches "
          "--learning_rate 0.002") in lines


def test_a_tpu_flag_file_runs_on_cpu_with_use_tpu_false_after_it(workdir, tmp_path):
  """tpu_configs/README.md's way to try a flag file without a TPU: the file, then
  --use_tpu=False and smaller settings. Given before the file, --use_tpu=False is one line
  that names the whole fix."""
  flagfile = f"--flagfile={ROOT}/tpu_configs/bert_base_phase1_v3-8.flags"
  command = _command(workdir, tmp_path / "cpu", 2, ["--use_tpu=False", "--dtype=float32",
                                                    "--max_eval_steps=2"])
  command.insert(2, flagfile)
  result = warm.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600, env=_env())
  assert result.returncode == 0, result.stderr[-3000:]
  assert (tmp_path / "cpu" / "google" / "bert_model.ckpt.index").exists()
  assert (tmp_path / "cpu" / "eval_results.txt").exists()  # the file's --do_eval=True
  command = _command(workdir, tmp_path / "o", 2)
  command[2:2] = ["--use_tpu=False", flagfile]
  result = warm.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600, env=_env())
  assert result.returncode == 1 and "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      "run_pretraining.py: error: --use_tpu=False conflicts with --distribution_strategy=tpu "
      "and --tpu=local: to run without a TPU, give --use_tpu=False after them (after the "
      "--flagfile that sets them), or --distribution_strategy=default --tpu= instead")
