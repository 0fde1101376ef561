"""bench/tpu_compile_deviceless.py without its TPU compiler (libtpu is not a test dependency):
one core's micro-batch read from each tpu_configs/ pretraining file, the step's memory
estimate by its parts, and the one-line errors. The compile itself is recorded in
BENCHMARKS.md ("What a TPU core needs, from XLA's TPU compiler")."""

import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tpu_configs"))

import make_configs  # noqa: E402  pylint: disable=wrong-import-position,import-error
import tpu_compile_deviceless as tool  # noqa: E402  pylint: disable=wrong-import-position,import-error

PRETRAINING = sorted(glob.glob(os.path.join(ROOT, "tpu_configs", "bert_*_phase*_*.flags")))


def test_every_pretraining_file_gives_its_tables_per_replica_batch():
  """The micro-batch from the file's train_batch_size, the slice's devices and the
  accumulation steps (both read by the tool) is the per-replica batch of make_configs.py's
  table, which wrote the files (the most a core holds, compiled as BENCHMARKS.md records);
  smaller only in an Adam file whose slice would hold more than the recipe's 256 sequences
  per update, which then accumulates nothing."""
  assert len(PRETRAINING) == 24
  column = {("base", 128): 1, ("base", 512): 2, ("large", 128): 3, ("large", 512): 4}
  smaller = []
  for path in PRETRAINING:
    shapes = tool.shapes_of_flagfile(path)
    slice_name = os.path.basename(path)[:-len(".flags")].rsplit("_", 1)[1]
    table = make_configs.ACCELERATORS[slice_name]
    most = table[column[(shapes["model"], shapes["seq"])]]
    assert shapes["batch"] <= most, path
    if shapes["batch"] < most:
      assert shapes["gradient_accumulation_steps"] == 1 and table[0] * most > 256, path
      smaller.append(os.path.basename(path))
    assert shapes["tpu"] == slice_name.split("-")[0] and shapes["tpu"] in tool.TPUS
    assert shapes["predictions"] == {128: 20, 512: 80}[shapes["seq"]]
  assert smaller == ["bert_base_phase1_v3-8.flags", "bert_base_phase1_v4-8.flags",
                     "bert_base_phase1_v5e-8.flags", "bert_base_phase2_v3-32.flags",
                     "bert_base_phase2_v4-32.flags"]
  # Read by hand from the file: 256 sequences, 8 cores, 8 accumulation steps.
  assert tool.shapes_of_flagfile(
      os.path.join(ROOT, "tpu_configs", "bert_large_phase2_v2-8.flags")) == {
          "model": "large", "seq": 512, "predictions": 80, "batch": 4, "tpu": "v2",
          "gradient_accumulation_steps": 8}


def test_the_estimate_adds_the_adam_slots_and_the_accumulators():
  stats = {"temp_bytes": 1, "argument_bytes": 2, "output_bytes": 3, "code_bytes": 4}
  # 10 weights: 40 bytes each for m and v; 40 more for the accumulators.
  assert tool.estimate(stats, 10, accumulation=1) == 1 + 2 + 3 + 4 + 80
  assert tool.estimate(stats, 10, accumulation=4) == 1 + 2 + 3 + 4 + 80 + 40


def _run(*args):
  return subprocess.run([sys.executable, os.path.join(ROOT, "bench", "tpu_compile_deviceless.py"),
                         *args], capture_output=True, text=True, timeout=120, check=False)


def test_without_a_tpu_compiler_or_with_a_bad_flagfile_one_line(tmp_path):
  missing = tmp_path / "no-python"
  result = _run(f"--tpu_python={missing}")
  assert result.returncode == 1
  assert result.stderr == f"error: {missing}: no Python with jax[tpu] (make tpu-compiler)\n"
  flagfile = tmp_path / "bert_large_phase2_v2-8.flags"
  flagfile.write_text("--train_batch_size=100\n--max_seq_length=512\n"
                      "--max_predictions_per_seq=80\n")
  result = _run(f"--flagfile={flagfile}", f"--tpu_python={missing}")
  assert result.returncode == 1
  assert result.stderr == (f"error: --flagfile={flagfile}: train_batch_size 100 is not a "
                           "multiple of 8 devices x 1 accumulation steps\n")


@pytest.mark.parametrize("name,text,error", [
    ("bert_large_phase2_v9-8.flags", "--train_batch_size=256\n", "not a pretraining file"),
    ("bert_large_glue_v3-8.flags", "--train_batch_size=32\n", "not a pretraining file"),
    ("bert_large_phase2_v3-8.flags", "--train_batch_size=256\n", "no --max_seq_length")])
def test_other_files_are_refused_by_name_or_missing_flag(tmp_path, name, text, error):
  flagfile = tmp_path / name
  flagfile.write_text(text)
  with pytest.raises(ValueError, match=error):
    tool.shapes_of_flagfile(str(flagfile))
