"""Scripts run one after another in one process, as a notebook does with ``%run``: each run
defines its flags and starts from their defaults as a new process would. absl's flag registry
is the process's: a second ``%run run_classifier.py ...`` failed with ``DuplicateFlagError:
The flag 'data_dir' is defined twice`` (so did ``%run run_squad.py`` after run_classifier,
through the shared training flags), and a run that got past it kept the flags the earlier run
was given and this one left out.

Runs real IPython (the ``test`` extra installs it with ipykernel); each run stops at its
first one-line error, before TensorFlow builds anything."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("IPython")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SESSION = """
from absl import flags
ip = get_ipython()
flags.DEFINE_integer("my_own", 1, "a notebook's own flag")
flags.FLAGS.my_own = 5
def session_step(line):  # (%run puts the script's names, its run() too, here)
  ip.run_line_magic("run", line)
  print("flags:", flags.FLAGS.learning_rate, getattr(flags.FLAGS, "task_name", "-"),
        flags.FLAGS.best_metric, flush=True)
session_step("run_classifier.py --learning_rate=0.5 --task_name=MRPC --best_metric=accuracy")
session_step("run_classifier.py --do_train")
session_step("run_squad.py --do_train --learning_rate=0.25")
session_step("run_pretraining.py --do_train")
session_step("run_classifier_with_tfhub.py --do_train")
session_step("run_classifier.py --do_train --task_name=RTE")
ip.run_line_magic("run", "extract_features.py")  # its own --use_tpu, --master, --num_tpu_cores
import os
here = os.getcwd()
os.chdir("/")  # run_classifier.py above was a path relative to the folder left
ip.run_line_magic("run", os.path.join(here, "run_classifier.py") + " --do_train")
os.chdir(here)
ip.run_line_magic("run", "data_prep/build_vocab.py --input_file=/nonexistent --vocab_size=7")
print("vocab_size:", flags.FLAGS.vocab_size)
ip.run_line_magic("run", "data_prep/build_vocab.py --input_file=/nonexistent")
print("vocab_size:", flags.FLAGS.vocab_size)
print("my_own:", flags.FLAGS.my_own)  # a user's own flag: neither removed nor reset
"""


def test_scripts_run_again_in_one_ipython_session_define_their_flags_anew(tmp_path):
  session = tmp_path / "session.py"
  session.write_text(_SESSION)
  done = subprocess.run(
      [sys.executable, "-m", "IPython", "--quick", "--colors=nocolor", "--no-banner",
       str(session)], cwd=ROOT, capture_output=True, text=True, timeout=300,
      env={**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"})
  out = done.stdout + done.stderr
  assert "DuplicateFlagError" not in out and "Traceback" not in out, out
  errors = [line.split(": error: ")[0] for line in out.splitlines() if ": error: " in line]
  # Each run reached its own flag checks (its first one-line error).
  assert errors == ["run_classifier.py", "run_classifier.py", "run_squad.py",
                    "run_pretraining.py", "run_classifier_with_tfhub.py", "run_classifier.py",
                    "extract_features.py", "run_classifier.py", "build_vocab.py",
                    "build_vocab.py"], out
  values = [line for line in out.splitlines()
            if line.startswith(("flags:", "vocab_size:", "my_own:"))]
  assert values == [
      "flags: 0.5 MRPC accuracy",  # as given
      "flags: 5e-05 None None",  # run_classifier's defaults again, not the first run's
      "flags: 0.25 - None",  # run_squad's (run_classifier's own flags gone)
      "flags: 5e-05 - None",  # run_pretraining's
      "flags: 5e-05 None None",  # run_classifier's again, through run_classifier_with_tfhub
      "flags: 5e-05 RTE None",
      "vocab_size: 7", "vocab_size: 30522", "my_own: 5"], out
