"""bert_tf: Google's BERT, reimplemented in TensorFlow 2 / Keras 3."""

from setuptools import find_packages, setup

# Pinned to the stack the project is tested on (README.md, Install): TF 2.21 with its Keras 3.
INSTALL_REQUIRES = [
    "tensorflow==2.21.0",
    "tensorflow-text>=2.21.0,<2.22",
    "tensorflow-datasets==4.9.10",
    "absl-py>=2.1",
    "numpy>=1.26",
    "safetensors>=0.4",
    # tf.summary (the training scripts' TensorBoard summaries) needs it; TF 2.21 no longer
    # installs it.
    "tensorboard>=2.21,<2.22",
]

EXTRAS_REQUIRE = {
    # Google's original code, for the differential tests.
    # bert-tensorflow: Google's original code; matplotlib: the PNG outputs of the inspection
    # tools; torch + transformers: loading the Hugging Face export (test-only: never a bert_tf
    # dependency). Not scikit-learn: Keras imports it at its own import where installed (about
    # a second in every script the tests start); its and scipy's reference metric values are
    # fixtures (tests/fixtures/make_metrics_reference.py).
    # pytest-timeout: a test that hangs fails after the Makefile's --timeout, rather than
    # holding CI to its own limit.
    "test": ["pytest>=8", "pytest-xdist>=3.5", "pytest-timeout>=2.3", "bert-tensorflow==1.0.4",
             "six", "matplotlib>=3.8", "torch==2.13.0", "transformers>=5",
             # A real Jupyter kernel for tests/inference/test_notebook.py.
             "nbconvert>=7", "nbformat>=5", "ipykernel>=6"],
    "plots": ["matplotlib>=3.8"],
    # create_pretraining_data.py --runner=...: sharded mode on Apache Beam. 2.77.0 installs
    # beside TensorFlow 2.21 (Beam wants protobuf < 7, TF >= 6.31.1: pip picks 6.x).
    "beam": ["apache-beam>=2.77.0,<3"],
    # --tpu=NAME (a TPU looked up by name through the Cloud TPU API, from another machine or a
    # pod slice's worker 0): TensorFlow 2.21's own Cloud TPU client needs these two, and they
    # install beside it (protobuf stays 6.x). Not cloud-tpu-client: its last release (0.10)
    # pins google-api-python-client 1.8.0, whose dependencies take protobuf down to 3.20.
    "tpu": ["google-api-python-client>=2", "oauth2client>=4.1"],
}

setup(
    name="bert_tf",
    version="0.1.0",
    description="Google's BERT in TensorFlow 2 / Keras 3: exact, complete, fast, TPU-first.",
    packages=find_packages(include=["bert_tf", "bert_tf.*"]),
    py_modules=["run_pretraining", "run_classifier", "run_classifier_with_tfhub", "run_squad",
                "run_ner", "extract_features"],
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={
        "console_scripts": [
            "bert_tf=bert_tf.__main__:console_main",
            "bert_tf_run_pretraining=run_pretraining:console_main",
            "bert_tf_run_classifier=run_classifier:console_main",
            "bert_tf_run_classifier_with_tfhub=run_classifier_with_tfhub:console_main",
            "bert_tf_run_squad=run_squad:console_main",
            "bert_tf_run_ner=run_ner:console_main",
            "bert_tf_extract_features=extract_features:console_main",
        ],
    },
)
