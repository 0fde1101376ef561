"""The README's main command, shortened, run once: every step runs and leaves its artifact, the
scripts print no TensorFlow log lines and nothing twice, the classifier's accuracy comes with
the majority-class baseline, and the README's "What quickstart made" commands work on its
outputs."""

import collections
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A glog/absl-formatted line (I/W/E/F, MMDD) and TensorFlow's known start-up noise.
GLOG = re.compile(r"^[IWEF]\d{4} ")
NOISE = ("cuInit", "cudart_stub", "InitializeLog", "cpu_feature_guard", "Sharding callback",
         "signature_serialization", "Assets written", "fingerprint", "INFO:tensorflow")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
  """``(out folder, merged stdout+stderr lines)`` of one tiny quickstart run."""
  out = tmp_path_factory.mktemp("quickstart") / "out"
  return out, _run_quickstart(out, FIRST_STEPS, TRAIN_STEPS)


# Few steps (what the tests check is that each step runs and what it prints, not how well the
# model learns): pretraining to FIRST_STEPS, then resumed to TRAIN_STEPS, each evaluated on
# EVAL_STEPS batches; a twentieth of an epoch of fine-tuning.
FIRST_STEPS, TRAIN_STEPS, EVAL_STEPS = 2, 4, 2


def _run_quickstart(out, first_steps, train_steps):
  """quickstart.sh's merged stdout+stderr lines (it must exit 0)."""
  env = {**os.environ, "OUT": str(out), "PY": sys.executable, "PYTHONUNBUFFERED": "1",
         "FIRST_STEPS": str(first_steps), "TRAIN_STEPS": str(train_steps),
         "EVAL_STEPS": str(EVAL_STEPS), "EPOCHS": "0.05", "VOCAB_SIZE": "600"}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the user's default
  result = subprocess.run(["bash", os.path.join(ROOT, "quickstart.sh")], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900)
  assert result.returncode == 0, result.stdout[-6000:]
  return result.stdout.splitlines()


def _segments(lines):
  """{command line: the lines it printed} for each ``$ command`` quickstart ran."""
  segments, current = {}, None
  for line in lines:
    if line.startswith("$ "):
      current = line
      segments[current] = []
    elif current is not None and line.strip():
      segments[current].append(line)
  return segments


def test_quickstart_runs_end_to_end(quickstart):
  out, lines = quickstart
  for artifact in ("corpus.txt", "vocab.txt", "pretraining-0.tfrecord", "pretraining-1.tfrecord",
                   "pretraining/eval_results.txt", "pretraining/google/bert_model.ckpt.index",
                   "classifier/eval_results.txt", "saved_model/classifier/saved_model.pb"):
    assert (out / artifact).exists(), artifact
  # Config and vocab travel with the weights (run_pretraining got --vocab_file).
  for folder in ("pretraining", "pretraining/google", "classifier", "classifier/google"):
    assert (out / folder / "vocab.txt").read_bytes() == (out / "vocab.txt").read_bytes(), folder
    assert (out / folder / "bert_config.json").exists(), folder
  assert any(line.startswith(f"after {FIRST_STEPS} steps: masked_lm_accuracy") for line in lines)
  assert any(line.startswith(f"after {TRAIN_STEPS} steps: masked_lm_accuracy") for line in lines)
  assert any("resumed from" in line and f"at step {FIRST_STEPS}" in line for line in lines)
  answers = [line for line in lines if " -> " in line]
  assert len(answers) == 2 and all(line.split(" -> ")[1].split()[0] in ("ham", "spam")
                                   for line in answers)
  # Every step is a documented user command, printed before it runs.
  commands = [line for line in lines if line.startswith("$ ")]
  for script in ("data_prep/sample_corpus.py", "data_prep/build_vocab.py",
                 "data_prep/create_pretraining_data.py", "run_pretraining.py",
                 "run_classifier.py"):
    assert any(script in line for line in commands), script


def test_accuracy_is_shown_beside_the_majority_class_baseline(quickstart):
  out, lines = quickstart
  dev = (ROOT + "/tests/fixtures/glue/spam_subjects/dev.tsv")
  with open(dev, encoding="utf-8") as f:
    labels = [line.rstrip("\n").split("\t")[-1] for line in f][1:]
  label, count = collections.Counter(labels).most_common(1)[0]
  results = dict(line.split(" = ") for line in
                 (out / "classifier" / "eval_results.txt").read_text().splitlines())
  expected = (f"classifier accuracy {float(results['eval_accuracy']):.4f}; majority-class "
              f"baseline {count / len(labels):.4f} (always {label!r}, {count} of "
              f"{len(labels)} dev examples)")
  assert expected in lines


def test_scripts_print_no_tensorflow_logging_and_nothing_twice(quickstart):
  """Each command's output (stdout and stderr): no glog-formatted line except the script's
  own absl INFO lines, none of TensorFlow's known noise, no line twice. The last step is plain
  TensorFlow (the SavedModel served without bert_tf): quickstart.sh keeps its C++ start-up
  lines (cuInit on a machine without a GPU, ...) out of the terminal too."""
  _, lines = quickstart
  segments = _segments(lines)
  assert len(segments) == 7, list(segments)
  for command, printed in segments.items():
    script = ("<stdin>" if command.endswith(" -") or " - " in command
              else os.path.basename(command.split()[2]))
    for line in printed:
      assert not (GLOG.match(line) and f" {script}:" not in line), (command, line)
      assert not any(noise in line for noise in NOISE), (command, line)
    repeated = [line for line, n in collections.Counter(printed).items() if n > 1]
    assert not repeated, (command, repeated)


def _readme_block():
  """The bash block of README's "What quickstart made" section, verbatim."""
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    readme = f.read()
  section = readme.split("### What quickstart made, and how to use it", 1)[1]
  section = section.split("\n#", 1)[0]
  return section.split("```bash\n", 1)[1].split("```", 1)[0]


def test_readme_commands_run_on_quickstart_outputs(quickstart, tmp_path, capsys):
  """The README section's block, run by bash exactly as typed (venv activation first, then
  plain `python`) from a folder holding `quickstart_output` (this run's) and a `.venv` whose
  activate script puts this Python first on PATH: exit 0, nothing on stderr; what the
  commands write is what the library computes."""
  out, _ = quickstart
  block = _readme_block()
  lines = [line for line in block.splitlines() if line.strip()]
  assert lines[0] == "source .venv/bin/activate"
  assert len(lines) == 7 and all(line.startswith("python -m bert_tf ") for line in lines[1:])
  (tmp_path / "quickstart_output").symlink_to(out)
  activate = tmp_path / ".venv" / "bin" / "activate"
  activate.parent.mkdir(parents=True)
  activate.write_text(f'export PATH={shlex.quote(os.path.dirname(sys.executable))}:"$PATH"\n')
  env = {**os.environ, "PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1200)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stderr == "", result.stderr[-3000:]
  printed = result.stdout.splitlines()
  assert "wrote quickstart_output/embeddings.npy" not in printed  # (sizes are in the line)
  assert any(line.startswith("wrote 3 embeddings of size 128 to quickstart_output/"
                             "embeddings.npy") for line in printed), printed
  import bert_tf  # pylint: disable=import-outside-toplevel
  bert = bert_tf.load(str(out / "pretraining"))
  np.testing.assert_allclose(
      np.load(out / "embeddings.npy"),
      bert.embed(["a list of items", "a tuple of values", "an exception is raised"],
                 pooling="mean"), atol=1e-5)
  for name in ("heads.html", "heads.png"):
    assert (out / name).stat().st_size > 0, name
  # classify: one line per text, "label  probability  text", as the library computes it.
  texts = ["Re: patch for the build script", "Lowest mortgage rates - act now"]
  results = bert_tf.load(str(out / "classifier")).classify(texts)
  assert {r["label"] for r in results} <= {"ham", "spam"}
  expected = [f"{r['label']}  {r['probability']:.4f}  {t}" for r, t in zip(results, texts)]
  assert printed[-2:] == expected, printed[-4:]
  # The classifier's google/ folder has no masked-LM head: one line naming it. Run in-process
  # (``python -m bert_tf``'s main): that the module entry point's stderr holds nothing but such
  # a line is tested by tests/inference/test_cli.py (test_module_entry_point_prints_one_line_error)
  # and its quiet start-up by the block above (stderr empty).
  from bert_tf.__main__ import main  # pylint: disable=import-outside-toplevel
  capsys.readouterr()
  status = main(["fill-mask", f"--model={out / 'classifier' / 'google'}", "a [MASK] b"])
  captured = capsys.readouterr()
  assert status == 1
  assert (captured.out, captured.err) == (
      "", f"bert_tf fill-mask: error: fill_mask: {out / 'classifier' / 'google'} has no "
      "masked-LM head (cls/predictions/*) weights (this checkpoint was saved without its "
      "pretraining heads)\n")


def test_verbosity_brings_the_logs_back(quickstart):
  """--verbosity: the quieting is off (the load report and TensorFlow's lines come back)."""
  out, _ = quickstart
  env = {**os.environ, "PYTHONPATH": ROOT}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run(
      [sys.executable, "-m", "bert_tf", "embed", f"--model={out / 'pretraining'}",
       "--verbosity=1", f"--output_file={out / 'v.npy'}", "a list"],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stderr.splitlines()
  assert (f"DEBUG:absl:loaded 46 variables from {out / 'pretraining'}/ckpt-{TRAIN_STEPS}"
          in lines), lines
  assert any(line.startswith("E0000 ") and "cuInit" in line for line in lines) or any(
      "cudart_stub" in line or "cpu_feature_guard" in line for line in lines), lines


def test_a_second_quickstart_continues_over_its_own_output(quickstart):
  """`make quickstart` again over its own output folder (README: `TRAIN_STEPS=... make
  quickstart`): pretraining resumes (the first eval is at the step already reached, and says
  so), the classifier's export replaces the previous one, and it ends as the first did."""
  out, _ = quickstart
  lines = _run_quickstart(out, FIRST_STEPS, TRAIN_STEPS + 1)
  evals = [line.split(":")[0] for line in lines if ": masked_lm_accuracy" in line]
  # The first run reached TRAIN_STEPS.
  assert evals == [f"after {TRAIN_STEPS} steps", f"after {TRAIN_STEPS + 1} steps"], evals
  assert sum(" -> " in line for line in lines) == 2
  assert (out / "saved_model" / "classifier" / "saved_model.pb").exists()
