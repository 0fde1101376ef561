"""Files the README's commands and the build files name exist in the repository: a newcomer's
command typed as written does not stop at a missing file."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(name):
  with open(os.path.join(ROOT, name), encoding="utf-8") as f:
    return f.read()


def test_readme_input_files_exist():
  """Every input path flag in README's bash blocks that is not under a $VARIABLE or a folder
  the command itself makes (--output_dir etc.) is a file of the repository."""
  blocks = re.findall(r"```bash\n(.*?)```", _read("README.md"), re.S)
  inputs = set()
  for block in blocks:
    for flag, path in re.findall(r"--(train_file|predict_file|input_file|data_dir|vocab_file|"
                                 r"bert_config_file)=(\S+)", block):
      if "$" not in path and "*" not in path and not path.startswith(("gs://", "'")):
        inputs.add((flag, path))
  assert ("predict_file", "tests/fixtures/squad/allennlp_squad_v1.1_sample.json") in inputs
  made_by_quickstart = ("quickstart_output/", "corpus/", "data/", "lines.txt", "senses.txt",
                        "input.txt", "pairs.txt", "vocab.txt", "bert_config.json", "my_",
                        "/tmp/")  # /tmp/: made by the block's own commands
  missing = [f"--{flag}={path}" for flag, path in sorted(inputs)
             if not path.startswith(made_by_quickstart)
             and not os.path.exists(os.path.join(ROOT, path))]
  assert not missing, missing


def test_build_files_name_only_existing_documents():
  for name in ("setup.py", "Makefile", "quickstart.sh"):
    for doc in re.findall(r"\b([\w./-]+\.md)\b", _read(name)):
      assert os.path.exists(os.path.join(ROOT, doc)), (name, doc)
