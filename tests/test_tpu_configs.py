"""Every tpu_configs/*.flags file parses with its script's flags, and matches its generator."""

import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "tpu_configs")

_CHECK = r"""
import sys
sys.argv = ["check"]
import importlib
importlib.import_module(SCRIPT)
from absl import flags
FLAGS = flags.FLAGS
problems = []
for path in FILES:
  argv = FLAGS.read_flags_from_files(["check", "--flagfile=" + path], force_gnu=False)
  if len(argv) < 5:
    problems.append(f"{path}: only {len(argv) - 1} flags")
  for arg in argv[1:]:
    name, _, value = arg[2:].partition("=")
    if name not in FLAGS:
      problems.append(f"{path}: unknown flag --{name}")
      continue
    try:
      FLAGS[name].parse(value)
    except Exception as e:
      problems.append(f"{path}: --{name}={value}: {e}")
print("\n".join(problems) or "OK")
"""


def _script_for(name):
  if "_glue_" in name:
    return "run_classifier"
  if "_squad_" in name:
    return "run_squad"
  return "run_pretraining"


def _files_by_script():
  groups = {}
  for path in sorted(glob.glob(os.path.join(CONFIGS, "*.flags"))):
    groups.setdefault(_script_for(os.path.basename(path)), []).append(path)
  return groups


def test_every_accelerator_model_and_phase_is_there():
  names = {os.path.basename(p) for p in glob.glob(os.path.join(CONFIGS, "*.flags"))}
  for tpu in ("v2-8", "v3-8", "v4-8", "v5e-8", "v3-32", "v4-32"):
    for model in ("base", "large"):
      for phase in (1, 2):
        assert f"bert_{model}_phase{phase}_{tpu}.flags" in names
  for model in ("base", "large"):
    assert {f"bert_{model}_glue_v3-8.flags", f"bert_{model}_squad_v3-8.flags"} <= names


@pytest.mark.parametrize("script", ["run_pretraining", "run_classifier", "run_squad"])
def test_flags_exist_and_parse(script):
  files = _files_by_script()[script]
  if not os.path.exists(os.path.join(ROOT, script + ".py")):
    pytest.fail(f"{script}.py is missing")
  code = f"SCRIPT = {script!r}\nFILES = {files!r}\n" + _CHECK
  result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip().splitlines()[-1] == "OK", result.stdout


def test_files_match_the_generator(tmp_path):
  spec = importlib.util.spec_from_file_location("make_configs",
                                                os.path.join(CONFIGS, "make_configs.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  for name, lines in module.all_configs().items():
    with open(os.path.join(CONFIGS, name)) as f:
      assert f.read() == "\n".join(lines) + "\n", f"{name} is stale: run make_configs.py"


def _flags_of(path):
  values = {}
  with open(path) as f:
    for line in f:
      if line.startswith("--"):
        name, _, value = line[2:].strip().partition("=")
        values[name] = value
  return values


def test_every_pretraining_file_keeps_the_recipes_global_batch():
  """The recipe as tpu_configs/README.md states it (phase 1: 900k steps of 256, phase 2: 100k
  steps of 256): every Adam file updates with that batch (train_batch_size, which the slice's
  replicas x gradient_accumulation_steps micro-batches make up) and its steps; a LAMB file
  sees as many sequences in all. Each micro-batch is at most what the generator's table says a
  core holds."""
  with open(os.path.join(CONFIGS, "README.md")) as f:
    readme = f.read()
  recipe = {}
  for phase in (1, 2):
    row = next(line for line in readme.splitlines() if f"_phase{phase}_<tpu>.flags" in line)
    steps, batch = re.search(r"(\d+)k steps of (\d+)", row).groups()
    recipe[phase] = (int(steps) * 1000, int(batch))
  spec = importlib.util.spec_from_file_location("make_configs",
                                                os.path.join(CONFIGS, "make_configs.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  files = sorted(glob.glob(os.path.join(CONFIGS, "bert_*_phase*_*.flags")))
  adam = 0
  for path in files:
    model, phase, accelerator = re.fullmatch(r"bert_(base|large)_phase(\d)_(.+)\.flags",
                                             os.path.basename(path)).groups()
    steps, batch = recipe[int(phase)]
    values = _flags_of(path)
    global_batch, train_steps = int(values["train_batch_size"]), int(values["num_train_steps"])
    accumulation = int(values.get("gradient_accumulation_steps", 1))
    replicas, *most = module.ACCELERATORS[accelerator]
    micro, rest = divmod(global_batch, replicas * accumulation)
    assert rest == 0, path
    assert micro <= most[{("base", "1"): 0, ("base", "2"): 1, ("large", "1"): 2,
                          ("large", "2"): 3}[model, phase]], path
    if values["optimizer_type"] == "lamb":
      assert global_batch > batch and global_batch * train_steps == batch * steps, path
    else:
      adam += 1
      assert (global_batch, micro * replicas * accumulation, train_steps) == (
          batch, batch, steps), path
      assert float(values["learning_rate"]) == 1e-4, path
  assert adam == len(files) - 4  # LAMB: phase 1 on the two pod slices, Base and Large
