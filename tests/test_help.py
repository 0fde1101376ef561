"""``--help`` of every script, run as ``python script.py`` and as the installed console
command: exit status 0, the script's description, and every flag it defines (its own and the
shared training flags of bert_tf.training.flags), found by reading the sources.

All in one Python process: it imports what the scripts share (TensorFlow, through
bert_tf.training.flags, after bert_tf.cli's quieting, as a script does), then forks one child
per command, which runs the script (or the console command's pip wrapper) as ``__main__``
with ``runpy``, ``sys.argv`` and ``sys.path[0]`` as ``python script.py --help`` sets them, its
file descriptors 1 and 2 into files: the child's exit status, stdout and stderr are the
command's. Each child starts from the parent's flags (none defined), as a new process does,
so the scripts' flag definitions do not meet; one TensorFlow import instead of twelve."""

import json
import os
import re
import subprocess
import sys

import bert
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ["run_pretraining.py", "run_classifier.py", "run_classifier_with_tfhub.py",
           "run_squad.py", "run_ner.py", "extract_features.py",
           "data_prep/build_vocab.py", "data_prep/create_pretraining_data.py",
           "data_prep/sample_corpus.py"]
# setup.py's console_scripts.
CONSOLE = {"bert_tf_run_pretraining": "run_pretraining.py",
           "bert_tf_run_classifier": "run_classifier.py",
           "bert_tf_run_classifier_with_tfhub": "run_classifier_with_tfhub.py",
           "bert_tf_run_squad": "run_squad.py",
           "bert_tf_run_ner": "run_ner.py",
           "bert_tf_extract_features": "extract_features.py"}
_DEFINE = re.compile(r"DEFINE_(?!alias)\w+\(\s*\"(\w+)\"")

# argv[1]: a JSON list of [script path, *args]; argv[2]: a folder for each child's stdout and
# stderr (<i>.out, <i>.err). Prints the exit statuses as a JSON list.
_FORKER = r"""
import json, os, runpy, signal, sys, traceback
from bert_tf import cli  # noqa: F401  (quiet.setup, before TensorFlow, as in the scripts)
import bert_tf.training.flags  # noqa: F401  (TensorFlow and the shared modules, once)
commands, folder = json.loads(sys.argv[1]), sys.argv[2]
statuses = []
for i, argv in enumerate(commands):
  sys.stdout.flush(); sys.stderr.flush()
  pid = os.fork()
  if pid == 0:
    signal.alarm(240)  # a child that hangs ends (SIGALRM) rather than outliving the test
    for fd, ext in ((1, "out"), (2, "err")):
      target = os.open(os.path.join(folder, f"{i}.{ext}"), os.O_WRONLY | os.O_CREAT, 0o644)
      os.dup2(target, fd)
      os.close(target)
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    code = 0
    try:
      runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:  # as the interpreter turns it into an exit status
      if e.code is None or isinstance(e.code, int):
        code = e.code or 0
      else:
        print(e.code, file=sys.stderr)
        code = 1
    except BaseException:  # pylint: disable=broad-except
      traceback.print_exc()
      code = 1
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(code)
  statuses.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
print(json.dumps(statuses))
"""


def _defined_flags(script):
  with open(os.path.join(ROOT, script), encoding="utf-8") as f:
    source = f.read()
  names = set(_DEFINE.findall(source))
  if "\nimport run_classifier" in source:  # Its flags, adopted.
    names |= _defined_flags("run_classifier.py")
  if "define_training_flags()" in source:
    with open(os.path.join(ROOT, "bert_tf", "training", "flags.py"), encoding="utf-8") as f:
      shared = f.read()
    # Each define_* function's flags; the ones a script calls for itself only where it does.
    for name, body in re.findall(r"\ndef (define_\w+)\((.*?)(?=\ndef |\Z)", shared, re.S):
      if name == "define_eval_during_training_flags" and f"{name}(" not in source:
        continue
      names |= set(_DEFINE.findall(body))
  return names


def _first_doc_line(script):
  with open(os.path.join(ROOT, script), encoding="utf-8") as f:
    return f.read().split('"""')[1].strip().splitlines()[0]


def _console_folder():
  return os.path.dirname(sys.executable)


def _console_installed():
  return all(os.path.exists(os.path.join(_console_folder(), name)) for name in CONSOLE)


def _commands():
  """{key: argv}: each script's --help, and (when installed) each console command's, plus
  run_squad's --helpfull."""
  commands = {script: [os.path.join(ROOT, script), "--help"] for script in SCRIPTS}
  if _console_installed():
    for name in CONSOLE:
      commands[name] = [os.path.join(_console_folder(), name), "--help"]
    commands["--helpfull"] = [os.path.join(_console_folder(), "bert_tf_run_squad"), "--helpfull"]
  return commands


@pytest.fixture(scope="module")
def helps(tmp_path_factory):
  """{key: (exit status, stdout, stderr)} of every command of ``_commands``."""
  folder = tmp_path_factory.mktemp("help")
  commands = _commands()
  env = {**os.environ, "PYTHONPATH": ROOT}
  result = subprocess.run([sys.executable, "-c", _FORKER, json.dumps(list(commands.values())),
                           str(folder)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  statuses = json.loads(result.stdout.splitlines()[-1])
  assert len(statuses) == len(commands), result.stdout[-3000:]
  return {key: (status, (folder / f"{i}.out").read_text(), (folder / f"{i}.err").read_text())
          for i, (key, status) in enumerate(zip(commands, statuses))}


def _check(script, status, stdout, stderr):
  assert status == 0, (script, stderr[-2000:])
  assert stdout.startswith(_first_doc_line(script)), (script, stdout[:300])
  listed = set(re.findall(r"^  --(?:\[no\])?(\w+)", stdout, re.M))
  defined = _defined_flags(script)
  assert len(defined) >= 2 and defined <= listed, (script, sorted(defined - listed))
  assert "--helpfull" not in listed and "Traceback" not in stderr


def test_script_help_lists_every_flag_and_exits_0(helps):
  for script in SCRIPTS:
    _check(script, *helps[script])


def test_script_help_shows_the_docstring_as_written(helps):
  # Every line of the script's docstring, as in its source, is a line of --help: the example
  # commands keep their trailing backslashes (raw strings: not joined into one line).
  for script in SCRIPTS:
    with open(os.path.join(ROOT, script), encoding="utf-8") as f:
      written = f.read().split('"""')[1]
    printed = set(helps[script][1].splitlines())
    missing = [line for line in written.splitlines() if line.strip() and line not in printed]
    assert not missing, (script, missing[:3])


# Google's scripts (bert-tensorflow) and ours that stand for them.
ORIGINAL_SCRIPTS = {"run_pretraining.py": "run_pretraining.py",
                    "run_classifier.py": "run_classifier.py",
                    "run_classifier_with_tfhub.py": "run_classifier_with_tfhub.py",
                    "run_squad.py": "run_squad.py",
                    "extract_features.py": "extract_features.py",
                    "create_pretraining_data.py": "data_prep/create_pretraining_data.py"}


@pytest.mark.parametrize("original", sorted(ORIGINAL_SCRIPTS))
def test_every_flag_of_the_original_script_is_listed(helps, original):
  # The flags the original script defines, read from its source: an original command line
  # must parse here.
  with open(os.path.join(os.path.dirname(bert.__file__), original), encoding="utf-8") as f:
    defined = set(_DEFINE.findall(f.read()))
  assert defined, original
  status, stdout, _ = helps[ORIGINAL_SCRIPTS[original]]
  assert status == 0
  listed = set(re.findall(r"^  --(?:\[no\])?(\w+)", stdout, re.M))
  assert defined <= listed, (original, sorted(defined - listed))


def test_console_scripts_help_lists_every_flag_and_exits_0(helps):
  if not _console_installed():
    missing = [name for name in CONSOLE
               if not os.path.exists(os.path.join(_console_folder(), name))]
    pytest.skip(f"console scripts not installed beside {sys.executable}: {missing} "
                "(pip install -e .)")
  for name, script in CONSOLE.items():
    _check(script, *helps[name])
  status, stdout, stderr = helps["--helpfull"]
  _check("run_squad.py", status, stdout, stderr)
  assert "--[no]logtostderr" in stdout  # --helpfull adds absl's own flags.


_ECHO = {"absl": "from absl import app\napp.run(lambda argv: print('main got', argv[1:]))\n",
         "bert_tf": "from bert_tf import cli\n"
                    "cli.run(lambda argv: print('main got', argv[1:]), positional_args=True)\n"}


@pytest.mark.parametrize("argv,main_gets", [
    (["--", "--help"], ["--help"]), (["--", "a", "--helpfull"], ["a", "--helpfull"]),
    (["--helpshort", "--", "a"], None)])
def test_help_flags_after_double_dash_are_arguments_as_absl_has_them(argv, main_gets):
  """After '--' nothing is a flag: absl's own app.run gives '--help' there to main (a Beam
  option of create_pretraining_data.py --runner), and so does cli.run; a help flag before
  '--' is help in both (None: main does not run). (cli.run printed its help for a help flag
  anywhere, unnoticed.)"""
  env = {**os.environ, "PYTHONPATH": ROOT}
  for name, source in _ECHO.items():
    result = subprocess.run([sys.executable, "-c", source, *argv], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    if main_gets is None:  # absl's help (exit 1) or ours (exit 0), not main
      assert result.stdout.strip() and "main got" not in result.stdout, name
    else:
      assert (result.returncode, result.stdout) == (0, f"main got {main_gets}\n"), (
          name, result.stdout[:300], result.stderr[-2000:])
