"""``--help`` of every script, run as ``python script.py`` and as the installed console
command: exit status 0, the script's description, and every flag it defines (its own and the
shared training flags of bert_tf.training.flags), found by reading the sources."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ["run_pretraining.py", "run_classifier.py", "run_squad.py", "extract_features.py",
           "data_prep/build_vocab.py", "data_prep/create_pretraining_data.py",
           "data_prep/sample_corpus.py"]
# setup.py's console_scripts.
CONSOLE = {"bert_tf_run_pretraining": "run_pretraining.py",
           "bert_tf_run_classifier": "run_classifier.py", "bert_tf_run_squad": "run_squad.py",
           "bert_tf_extract_features": "extract_features.py"}
_DEFINE = re.compile(r"DEFINE_(?!alias)\w+\(\s*\"(\w+)\"")


def _defined_flags(script):
  with open(os.path.join(ROOT, script), encoding="utf-8") as f:
    source = f.read()
  names = set(_DEFINE.findall(source))
  if "define_training_flags()" in source:
    with open(os.path.join(ROOT, "bert_tf", "training", "flags.py"), encoding="utf-8") as f:
      names |= set(_DEFINE.findall(f.read()))
  return names


def _first_doc_line(script):
  with open(os.path.join(ROOT, script), encoding="utf-8") as f:
    return f.read().split('"""')[1].strip().splitlines()[0]


def _run_all(commands):
  env = {**os.environ, "PYTHONPATH": ROOT}
  processes = [subprocess.Popen(command, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE) for command in commands]
  return [(p, *p.communicate(timeout=300)) for p in processes]


def _check(script, process, stdout, stderr):
  assert process.returncode == 0, (script, stderr[-2000:])
  assert stdout.startswith(_first_doc_line(script)), (script, stdout[:300])
  listed = set(re.findall(r"^  --(?:\[no\])?(\w+)", stdout, re.M))
  defined = _defined_flags(script)
  assert len(defined) >= 2 and defined <= listed, (script, sorted(defined - listed))
  assert "--helpfull" not in listed and "Traceback" not in stderr


def test_script_help_lists_every_flag_and_exits_0():
  commands = [[sys.executable, os.path.join(ROOT, s), "--help"] for s in SCRIPTS]
  for script, (process, stdout, stderr) in zip(SCRIPTS, _run_all(commands)):
    _check(script, process, stdout, stderr)


def test_console_scripts_help_lists_every_flag_and_exits_0():
  folder = os.path.dirname(sys.executable)
  missing = [name for name in CONSOLE if not os.path.exists(os.path.join(folder, name))]
  if missing:
    pytest.skip(f"console scripts not installed beside {sys.executable}: {missing} "
                "(pip install -e .)")
  names = list(CONSOLE)
  commands = [[os.path.join(folder, name), "--help"] for name in names]
  commands.append([os.path.join(folder, "bert_tf_run_squad"), "--helpfull"])
  results = _run_all(commands)
  for name, (process, stdout, stderr) in zip(names, results):
    _check(CONSOLE[name], process, stdout, stderr)
  process, stdout, stderr = results[-1]
  _check("run_squad.py", process, stdout, stderr)
  assert "--[no]logtostderr" in stdout  # --helpfull adds absl's own flags.
