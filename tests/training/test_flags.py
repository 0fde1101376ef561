"""Shared absl flags: defined into any FlagValues, aliases resolved, kwargs fit the library."""

import pathlib
import re

from absl import flags
import bert
import pytest
import tensorflow as tf

from bert_tf import optimization
from bert_tf.errors import BertTfError
from bert_tf.training import distribution
from bert_tf.training import flags as training_flags
from bert_tf.training import loop

# The TPU flags of Google's run_pretraining.py / run_classifier.py / run_squad.py.
ORIGINAL_TPU_FLAGS = ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master",
                      "num_tpu_cores", "iterations_per_loop")


def _parsed(argv):
  flag_values = flags.FlagValues()
  training_flags.define_training_flags(flag_values)
  flag_values(["prog"] + argv)
  return flag_values


def test_define_twice_in_separate_flag_values():
  first, second = flags.FlagValues(), flags.FlagValues()
  training_flags.define_training_flags(first)
  training_flags.define_training_flags(second)
  first(["prog", "--optimizer_type=lamb"])
  second(["prog"])
  assert (first.optimizer_type, second.optimizer_type) == ("lamb", "adamw_original")
  # Defined again on the same FlagValues (a second script run in one process, a notebook's
  # %run): the flags are defined anew, not absl's DuplicateFlagError; the other FlagValues
  # keeps its own.
  first(["prog", "--steps_per_loop=7", "--optimizer_type=lamb"])
  training_flags.define_distribution_flags(first)
  first(["prog"])
  assert first.steps_per_loop is None and first.optimizer_type == "lamb"
  assert second.optimizer_type == "adamw_original" and "steps_per_loop" in second
  # A name the function did not define stays absl's error.
  flags.DEFINE_integer("mine", 1, "a user's own flag", flag_values=second)
  with pytest.raises(flags.DuplicateFlagError):
    flags.DEFINE_integer("mine", 2, "again", flag_values=second)


@pytest.mark.parametrize("script", ["run_pretraining", "run_classifier", "run_squad"])
def test_original_tpu_flags_are_all_defined(script):
  # The original's flag names, read from its source (importing it defines global flags).
  source = (pathlib.Path(bert.__file__).parent / f"{script}.py").read_text()
  original = set(re.findall(r'flags\.DEFINE_\w+\(\s*"(\w+)"', source))
  assert set(ORIGINAL_TPU_FLAGS) <= original
  flag_values = flags.FlagValues()
  training_flags.define_distribution_flags(flag_values)
  for name in ORIGINAL_TPU_FLAGS:
    assert name in flag_values, name


def test_original_command_line_resolves_to_tpu():
  fv = _parsed(["--use_tpu=True", "--tpu_name=my-tpu", "--tpu_zone=us-central1-f",
                "--num_tpu_cores=8", "--iterations_per_loop=250", "--tpu_job_name=tpu_worker"])
  assert training_flags.distribution_args(fv) == distribution.DistributionArgs(
      distribution_strategy="tpu", tpu="my-tpu", tpu_zone="us-central1-f",
      num_tpu_cores=8, tpu_job_name="tpu_worker", steps_per_loop=250)
  assert training_flags.loop_kwargs(fv)["steps_per_loop"] == 250


def test_new_command_line_and_defaults():
  fv = _parsed(["--distribution_strategy=mirrored", "--num_gpus=2", "--steps_per_loop=10",
                "--dtype=bfloat16", "--jit_compile", "--gradient_accumulation_steps=4"])
  assert training_flags.distribution_args(fv) == distribution.DistributionArgs(
      distribution_strategy="mirrored", num_gpus=2, steps_per_loop=10)
  assert training_flags.loop_kwargs(fv) == {
      "steps_per_loop": 10, "gradient_accumulation_steps": 4, "dtype": "bfloat16",
      "jit_compile": True, "device_loop": None, "prefetch_to_device": None}
  defaults = _parsed([])
  assert training_flags.distribution_args(defaults) == distribution.DistributionArgs()
  assert training_flags.loop_kwargs(defaults) == {
      "steps_per_loop": 1000, "gradient_accumulation_steps": 1, "dtype": "float32",
      "jit_compile": None, "device_loop": None, "prefetch_to_device": None}
  assert training_flags.loop_kwargs(_parsed(["--nojit_compile"]))["jit_compile"] is False


def test_device_loop_and_prefetch_to_device_flags_exclude_each_other():
  for argv, expected in ((["--device_loop"], (True, None)),
                         (["--prefetch_to_device"], (None, True)),
                         (["--nodevice_loop", "--noprefetch_to_device"], (False, False))):
    kwargs = training_flags.loop_kwargs(_parsed(argv))
    assert (kwargs["device_loop"], kwargs["prefetch_to_device"]) == expected, argv
  with pytest.raises(BertTfError, match="--device_loop and --prefetch_to_device exclude each "
                                        "other"):
    training_flags.loop_kwargs(_parsed(["--device_loop", "--prefetch_to_device"]))


def test_unset_jit_compile_means_xla_only_with_an_accelerator():
  """Unset: XLA with a GPU/TPU, not on CPU; an explicit value always wins."""
  has_accelerator = bool(tf.config.list_logical_devices("GPU")
                         or tf.config.list_logical_devices("TPU"))
  assert loop.resolve_jit_compile(None) is has_accelerator
  assert loop.resolve_jit_compile(True) is True
  assert loop.resolve_jit_compile(False) is False


def test_alias_conflict_names_both_flags():
  fv = _parsed(["--steps_per_loop=10", "--iterations_per_loop=20"])
  with pytest.raises(BertTfError, match="--steps_per_loop=10 conflicts with "
                                        "--iterations_per_loop=20"):
    training_flags.distribution_args(fv)


def test_use_tpu_false_after_a_tpu_flag_file_runs_without_a_tpu(tmp_path):
  """A TPU flag file's --distribution_strategy=tpu --tpu=local (as tpu_configs/ writes them),
  then --use_tpu=False on the command line: no TPU, as absl lets any later flag override the
  file's. Before the file it is an error naming the whole fix."""
  flagfile = tmp_path / "tpu.flags"
  flagfile.write_text("--distribution_strategy=tpu\n--tpu=local\n--steps_per_loop=1000\n")
  for no in ("--use_tpu=False", "--nouse_tpu"):
    argv = ["prog", f"--flagfile={flagfile}", no]
    fv = flags.FlagValues()
    training_flags.define_training_flags(fv)
    fv(argv)
    assert training_flags.distribution_args(fv, argv) == distribution.DistributionArgs(
        steps_per_loop=1000)
    # GPUs instead: a strategy after the file, before or after --use_tpu=False.
    for extra in (["--distribution_strategy=mirrored", no], [no, "--distribution_strategy="
                                                               "mirrored"]):
      argv = ["prog", f"--flagfile={flagfile}", *extra]
      fv(argv)
      assert training_flags.distribution_args(fv, argv).distribution_strategy == "mirrored"
  argv = ["prog", "--use_tpu=False", f"--flagfile={flagfile}"]
  fv(argv)
  with pytest.raises(BertTfError) as error:
    training_flags.distribution_args(fv, argv)
  assert str(error.value) == (
      "--use_tpu=False conflicts with --distribution_strategy=tpu and --tpu=local: to run "
      "without a TPU, give --use_tpu=False after them (after the --flagfile that sets them), "
      "or --distribution_strategy=default --tpu= instead")
  # Values parsed from another list than argv: the order is unknown, no override.
  fv(["prog", f"--flagfile={flagfile}", "--use_tpu=False"])
  with pytest.raises(BertTfError, match="--use_tpu=False conflicts"):
    training_flags.distribution_args(fv, ["prog", f"--flagfile={flagfile}"])


def test_optimizer_kwargs_build_the_optimizer():
  defaults = training_flags.optimizer_kwargs(_parsed([]))
  assert defaults == {
      "optimizer_type": "adamw_original", "weight_decay_rate": 0.01, "beta_1": 0.9,
      "beta_2": 0.999, "epsilon": 1e-6, "clip_norm": 1.0,
      "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"],
      "end_learning_rate": 0.0, "power": 1.0}
  kwargs = training_flags.optimizer_kwargs(_parsed([
      "--optimizer_type=lamb", "--weight_decay_rate=0.02", "--adam_epsilon=1e-8",
      "--clip_norm=0", "--exclude_from_weight_decay=LayerNorm,bias,embeddings"]))
  optimizer = optimization.create_optimizer(1e-3, 100, 10, **kwargs)
  assert isinstance(optimizer, optimization.LAMB)
  config = optimizer.get_config()
  assert (config["weight_decay_rate"], config["epsilon"], config["global_clipnorm"]) == (
      0.02, 1e-8, None)
  assert config["exclude_from_weight_decay"] == ["LayerNorm", "bias", "embeddings"]


def test_every_optimizer_flag_reaches_the_optimizer_and_its_schedule():
  """Non-default --adam_beta1/2, --end_learning_rate and --lr_decay_power are those the
  optimizer and its learning rate use: after warmup, Keras's own PolynomialDecay with that end
  value and power (mutation audit: --lr_decay_power left at 1.0 on its way to the optimizer
  went unnoticed; the test above gives the defaults of those two)."""
  import keras  # pylint: disable=import-outside-toplevel
  kwargs = training_flags.optimizer_kwargs(_parsed([
      "--adam_beta1=0.8", "--adam_beta2=0.95", "--end_learning_rate=1e-4",
      "--lr_decay_power=2.0", "--weight_decay_rate=0.05"]))
  optimizer = optimization.create_optimizer(1e-3, 100, 10, **kwargs)
  assert (optimizer.beta_1, optimizer.beta_2, optimizer.weight_decay_rate) == (0.8, 0.95, 0.05)
  reference = keras.optimizers.schedules.PolynomialDecay(1e-3, 100, end_learning_rate=1e-4,
                                                         power=2.0)
  schedule = optimizer._learning_rate  # pylint: disable=protected-access
  assert isinstance(schedule, optimization.WarmupPolynomialDecay)
  for step in (10, 50, 99, 100, 150):
    assert abs(float(schedule(step)) - float(reference(step))) < 1e-9, step


def test_bad_values_are_rejected_at_parse_time():
  for argv in (["--optimizer_type=sgd"], ["--dtype=int8"], ["--gradient_accumulation_steps=0"],
               ["--distribution_strategy=gpu"]):
    with pytest.raises(flags.IllegalFlagValueError):
      _parsed(argv)
