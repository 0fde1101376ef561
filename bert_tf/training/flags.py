"""absl flag definitions shared by run_pretraining.py, run_classifier.py and run_squad.py.

Flags are defined here only; each script calls the ``define_*`` functions it needs, parses,
and turns the parsed values into library arguments with ``distribution_args``,
``optimizer_kwargs`` and ``loop_kwargs``: the library never reads FLAGS. Every function takes
the ``FlagValues`` to use (``absl.flags.FLAGS`` by default), so tests can use their own.

    from bert_tf.training import flags as training_flags
    training_flags.define_training_flags()
    ...
    args = training_flags.distribution_args(FLAGS)
    strategy = distribution.get_strategy(**args.strategy_kwargs())
    with strategy.scope():
      optimizer = optimization.create_optimizer(
          FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps,
          **training_flags.optimizer_kwargs(FLAGS))

The original's TPU flags (--use_tpu, --tpu_name, --master, --num_tpu_cores,
--iterations_per_loop) are defined too, as aliases, so its command lines run unchanged;
aliases and the new flags they stand for default to None so that the resolver can tell
"not given" from a value (``distribution.resolve_distribution_args``).
"""

import dataclasses
import functools
import inspect
import sys

from absl import flags

from bert_tf import optimization
from bert_tf.errors import BertTfError
from bert_tf.modeling.config import ATTENTION_IMPLEMENTATIONS
from bert_tf.training import DTYPE_POLICIES
from bert_tf.training import distribution

FLAGS = flags.FLAGS

_DISTRIBUTION_FLAGS = ("distribution_strategy", "tpu", "tpu_zone", "gcp_project", "num_gpus",
                       "steps_per_loop", "use_tpu", "tpu_name", "master", "num_tpu_cores",
                       "iterations_per_loop", "tpu_job_name", "worker_start_timeout_s")


def _defined_anew(define):
  """``define`` called again on the same ``FlagValues`` (scripts run one after another in one
  process: a notebook's ``%run run_classifier.py ...``, then ``%run run_squad.py ...``)
  defines its flags anew, with this call's defaults and help, instead of failing with absl's
  ``DuplicateFlagError``. Its first call in a process defines them as before."""
  signature = inspect.signature(define)
  defined = {}  # id(FlagValues) -> the names define's first call added there

  @functools.wraps(define)
  def wrapper(*args, **kwargs):
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    fv = bound.arguments["flag_values"]
    for name in defined.get(id(fv), ()):
      if name in fv:
        delattr(fv, name)
    before = set(fv)
    result = define(*args, **kwargs)
    defined[id(fv)] = defined.get(id(fv), set()) | (set(fv) - before)
    return result

  return wrapper


@_defined_anew
def define_distribution_flags(flag_values=FLAGS):
  """--distribution_strategy, --tpu, --tpu_zone, --gcp_project, --num_gpus, --steps_per_loop
  and the original's aliases."""
  fv = flag_values
  flags.DEFINE_enum(
      "distribution_strategy", None, list(distribution.STRATEGIES),
      "How to distribute training. Default: tpu if --use_tpu or --tpu is given, else "
      "default (one device).", flag_values=fv)
  flags.DEFINE_string(
      "tpu", None,
      "Cloud TPU to use: its name, a grpc://host:port address, or 'local' on a TPU VM. "
      "Implies --distribution_strategy=tpu.", flag_values=fv)
  flags.DEFINE_string(
      "tpu_zone", None,
      "GCE zone of the Cloud TPU. If not given, it is detected from the GCE metadata.",
      flag_values=fv)
  flags.DEFINE_string(
      "gcp_project", None,
      "GCP project of the Cloud TPU. If not given, it is detected from the GCE metadata.",
      flag_values=fv)
  flags.DEFINE_integer(
      "num_gpus", None,
      "GPUs for --distribution_strategy=mirrored/one_device. Default 0: every visible GPU, "
      "or the CPU when there is none.", flag_values=fv)
  flags.DEFINE_integer(
      "steps_per_loop", None,
      "Training steps run in-graph per host call (the original's --iterations_per_loop). "
      f"Default {distribution.DEFAULT_STEPS_PER_LOOP}.", flag_values=fv)
  flags.DEFINE_integer(
      "worker_start_timeout_s", None,
      "--distribution_strategy=multi_worker_mirrored: seconds every task of TF_CONFIG's "
      "cluster waits for the others to start; then a one-line error rather than a hang. "
      f"Default {distribution.DEFAULT_WORKER_START_TIMEOUT_S}.", flag_values=fv)
  # The original's flags, kept as aliases.
  flags.DEFINE_bool(
      "use_tpu", None,
      "Original flag: --use_tpu=True means --distribution_strategy=tpu. Given after "
      "--distribution_strategy and --tpu (after a TPU --flagfile), it overrides them: "
      "--use_tpu=False then runs without a TPU.", flag_values=fv)
  flags.DEFINE_string(
      "tpu_name", None, "Original flag: the same as --tpu.", flag_values=fv)
  flags.DEFINE_string(
      "master", None, "Original flag: a TPU grpc:// address; the same as --tpu.",
      flag_values=fv)
  flags.DEFINE_integer(
      "num_tpu_cores", None,
      "Original flag: TPU cores. If given, the TPU must have this many.", flag_values=fv)
  flags.DEFINE_integer(
      "iterations_per_loop", None, "Original flag: the same as --steps_per_loop.",
      flag_values=fv)
  flags.DEFINE_string(
      "tpu_job_name", None,
      "Original flag (run_classifier.py): the name of the TPU workers' job in the cluster, "
      "for clusters that do not call it 'worker' (the default).", flag_values=fv)


@_defined_anew
def define_optimizer_flags(flag_values=FLAGS):
  """--optimizer_type, --weight_decay_rate, --adam_beta1/2, --adam_epsilon, --clip_norm,
  --exclude_from_weight_decay, --end_learning_rate, --lr_decay_power."""
  fv = flag_values
  flags.DEFINE_enum(
      "optimizer_type", optimization.DEFAULT_OPTIMIZER_TYPE, list(optimization.OPTIMIZERS),
      "adamw_original: Google's AdamWeightDecay (no bias correction); adamw: AdamW with bias "
      "correction; lamb: LAMB for large batches.", flag_values=fv)
  flags.DEFINE_float(
      "weight_decay_rate", optimization.DEFAULT_WEIGHT_DECAY_RATE,
      "Decoupled weight decay, added to the update (lr * rate * weight).", flag_values=fv)
  flags.DEFINE_float("adam_beta1", optimization.DEFAULT_BETA_1,
                     "Decay of the first moment.", flag_values=fv)
  flags.DEFINE_float("adam_beta2", optimization.DEFAULT_BETA_2,
                     "Decay of the second moment.", flag_values=fv)
  flags.DEFINE_float("adam_epsilon", optimization.DEFAULT_EPSILON,
                     "Added to sqrt(v) in the denominator.", flag_values=fv)
  flags.DEFINE_float(
      "clip_norm", optimization.DEFAULT_CLIP_NORM,
      "Clip the gradient of the global batch to this global norm; 0: no clipping.",
      flag_values=fv)
  flags.DEFINE_list(
      "exclude_from_weight_decay", list(optimization.DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY),
      "Regular expressions: variables whose path matches one get no weight decay (and, "
      "with lamb, no layer adaptation).", flag_values=fv)
  flags.DEFINE_float(
      "end_learning_rate", 0.0, "Learning rate reached at --num_train_steps.",
      flag_values=fv)
  flags.DEFINE_float(
      "lr_decay_power", 1.0, "Power of the polynomial decay after warmup (1: linear).",
      flag_values=fv)


@_defined_anew
def define_loop_flags(flag_values=FLAGS):
  """--dtype, --jit_compile, --gradient_accumulation_steps, --attention_implementation,
  --device_loop, --prefetch_to_device, --xla_cache_dir."""
  fv = flag_values
  flags.DEFINE_enum(
      "attention_implementation", "auto", list(ATTENTION_IMPLEMENTATIONS),
      "auto: cuDNN's fused attention where it applies (GPU, XLA, bfloat16/float16, no "
      "attention dropout: attention_probs_dropout_prob 0 in the BERT config), else xla; "
      "xla: the original's attention ops always; xla_recompute: as xla, with the "
      "attention recomputed in the backward pass instead of its [B,N,S,S] tensors kept "
      "(training with attention dropout under XLA: less memory, more time; opt-in); "
      "cudnn: the fused kernel or a one-line error; "
      "cudnn_btnh: as cudnn, on the hidden stream's [B,S,N,D] layout (no layout copies "
      "around the kernel; q, k, v from three products); "
      "cudnn_dropout: the fused kernel with cuDNN's dropout (experimental). README: "
      "'Fused attention on a GPU'.", flag_values=fv)
  flags.DEFINE_enum(
      "dtype", "float32", list(DTYPE_POLICIES),
      "Compute dtype: float32, bfloat16 (TPU) or float16 (GPU, dynamic loss scaling). "
      "Variables stay float32.", flag_values=fv)
  flags.DEFINE_bool(
      "jit_compile", None,
      "Compile the train step with XLA. Unset: on with a GPU or TPU, off on CPU "
      "(training.loop.resolve_jit_compile); --jit_compile / --nojit_compile decide.",
      flag_values=fv)
  flags.DEFINE_integer(
      "gradient_accumulation_steps", 1,
      "Micro-batches per update; the update equals one batch this many times larger.",
      lower_bound=1, flag_values=fv)
  flags.DEFINE_bool(
      "device_loop", None,
      "Run each host call's --steps_per_loop updates as one XLA computation: the call's "
      "batches stacked and copied to the device once, then a loop on the device (no copy and "
      "no launch between two updates). Where the whole update is one XLA computation (one "
      "GPU, XLA, no gradient accumulation, not float16); elsewhere it says so and runs as "
      "usual. Same numbers to float32 rounding. Default: on where the whole update is one "
      "XLA computation on a GPU (on an H100 it removed a ~10 ms host stall per BERT-Large "
      "update; BENCHMARKS.md), unless --prefetch_to_device; --nodevice_loop turns it off.",
      flag_values=fv)
  flags.DEFINE_bool(
      "prefetch_to_device", None,
      "Have tf.data copy the batches to the device in its own thread, two ahead of the "
      "loop. Where the whole update is one XLA computation (as --device_loop, which it "
      "excludes). Same numbers. Default: off (not measured on a GPU yet).", flag_values=fv)
  flags.DEFINE_string(
      "xla_cache_dir", None,
      "Keep the XLA-compiled train step in this folder, and load it from there instead of "
      "compiling again when a later run (a restart, a resume, the same command) compiles "
      "the same program: same model, shapes and flags (TensorFlow's persistent XLA cache; "
      "training.xla_cache). E.g. $OUTPUT_DIR/xla_cache. One run at a time per folder. "
      "Default: off.", flag_values=fv)


@_defined_anew
def define_output_dir_flags(flag_values=FLAGS):
  """--resume_with_changed_flags."""
  flags.DEFINE_bool(
      "resume_with_changed_flags", False,
      "Resume the checkpoints of --output_dir although they were made with other training "
      "flags (seed, learning rate, batch size, warmup, sequence length, BERT config, ...: "
      "its run_settings.json) or on other training examples or input files; "
      "without it such a resume is refused, naming the flags or the training file.",
      flag_values=flag_values)


@_defined_anew
def define_eval_during_training_flags(default_metric, flag_values=FLAGS):
  """--eval_during_training, --best_metric, --early_stopping_patience, --use_best_checkpoint
  (``training.eval_during_training``); ``default_metric`` says what --best_metric defaults
  to."""
  fv = flag_values
  flags.DEFINE_bool(
      "eval_during_training", False,
      "Evaluate at every checkpoint training saves (--save_checkpoints_steps, and the last): "
      "output_dir/eval_history.jsonl, TensorBoard's summaries/eval, and output_dir/best/, the "
      "checkpoint with the best --best_metric (it loads alone, like output_dir).",
      flag_values=fv)
  flags.DEFINE_string(
      "best_metric", None,
      "With --eval_during_training: the eval_results.txt key that picks the best checkpoint "
      f"(lower is better for a loss, else higher). Default: {default_metric}.", flag_values=fv)
  flags.DEFINE_integer(
      "early_stopping_patience", 0,
      "With --eval_during_training: stop training after this many evaluations in a row "
      "without a better --best_metric (0: train to the end).", flag_values=fv)
  flags.DEFINE_bool(
      "use_best_checkpoint", False,
      "Eval, predict, exports and output_dir/google use the best checkpoint (output_dir/best, "
      "from --eval_during_training) instead of the last one.", flag_values=fv)


def eval_during_training_kwargs(flag_values=FLAGS):
  """The library's keyword arguments of ``define_eval_during_training_flags``' flags."""
  return {name: flag_values[name].value for name in (
      "eval_during_training", "best_metric", "early_stopping_patience", "use_best_checkpoint")}


@_defined_anew
def define_training_flags(flag_values=FLAGS):
  """All of the above."""
  define_distribution_flags(flag_values)
  define_optimizer_flags(flag_values)
  define_loop_flags(flag_values)
  define_output_dir_flags(flag_values)


def model_config(config, flag_values=FLAGS):
  """``BertConfig`` read from the config file -> the one the model is built from (with
  --attention_implementation, which is not written back to any config file)."""
  return dataclasses.replace(config,
                             attention_implementation=flag_values.attention_implementation)


def distribution_args(flag_values=FLAGS, argv=None):
  """Parsed distribution flags -> ``distribution.DistributionArgs`` (aliases resolved).

  ``argv``: the command line the flags were parsed from (default ``sys.argv``, what the
  scripts parse), read only for which flags came before --use_tpu, which it overrides (see
  ``resolve_distribution_args``): ``--flagfile=tpu_configs/FILE.flags --use_tpu=False`` runs a
  TPU flag file without a TPU. If ``argv`` does not hold the flags ``flag_values`` was given
  (they were parsed from another list), the order is unknown and a disagreement stays an
  error."""
  return distribution.resolve_distribution_args(
      **{name: flag_values[name].value for name in _DISTRIBUTION_FLAGS},
      given_before_use_tpu=_given_before_use_tpu(
          flag_values, sys.argv if argv is None else argv))


# The flags a later --use_tpu overrides.
_USE_TPU_OVERRIDES = ("distribution_strategy", "tpu")


def _given_before_use_tpu(flag_values, argv):
  """The names of ``_USE_TPU_OVERRIDES`` whose last occurrence in ``argv``, its flag files
  expanded in place, comes before the last --use_tpu (absl parses them in that order, and a
  flag given again takes its last value). Empty when the order cannot be told."""
  try:
    expanded = flag_values.read_flags_from_files(list(argv[1:]), force_gnu=False)
  except (flags.Error, OSError):
    return ()
  last = {}
  for index, arg in enumerate(expanded):
    if arg == "--":
      break
    if not arg.startswith("-"):
      continue
    name = arg.lstrip("-").split("=", 1)[0]
    name = "use_tpu" if name == "nouse_tpu" else name
    if name in ("use_tpu",) + _USE_TPU_OVERRIDES:
      last[name] = index
  for name in ("use_tpu",) + _USE_TPU_OVERRIDES:
    if (name in last) != bool(flag_values[name].present):
      return ()  # not the command line these values came from
  if "use_tpu" not in last:
    return ()
  return tuple(name for name in _USE_TPU_OVERRIDES
               if name in last and last[name] < last["use_tpu"])


def optimizer_kwargs(flag_values=FLAGS):
  """Parsed optimizer flags -> keyword arguments of ``optimization.create_optimizer``."""
  fv = flag_values
  return {
      "optimizer_type": fv.optimizer_type,
      "weight_decay_rate": fv.weight_decay_rate,
      "beta_1": fv.adam_beta1,
      "beta_2": fv.adam_beta2,
      "epsilon": fv.adam_epsilon,
      "clip_norm": fv.clip_norm,
      "exclude_from_weight_decay": list(fv.exclude_from_weight_decay),
      "end_learning_rate": fv.end_learning_rate,
      "power": fv.lr_decay_power,
  }


def enable_xla_cache(flag_values=FLAGS, progress=print):
  """--xla_cache_dir, if given: ``xla_cache.enable``. Before TensorFlow starts: the scripts
  pass it to ``cli.run(before_tensorflow=...)``."""
  if flag_values.xla_cache_dir:
    from bert_tf.training import xla_cache  # pylint: disable=import-outside-toplevel
    xla_cache.enable(flag_values.xla_cache_dir, progress=progress)


def loop_kwargs(flag_values=FLAGS):
  """Parsed loop flags -> {steps_per_loop, gradient_accumulation_steps, dtype, jit_compile,
  device_loop, prefetch_to_device}."""
  fv = flag_values
  if fv.device_loop and fv.prefetch_to_device:
    raise BertTfError("--device_loop and --prefetch_to_device exclude each other: the device "
                      "loop copies each host call's batches itself")
  return {
      "steps_per_loop": distribution_args(fv).steps_per_loop,
      "gradient_accumulation_steps": fv.gradient_accumulation_steps,
      "dtype": fv.dtype,
      "jit_compile": fv.jit_compile,
      "device_loop": fv.device_loop,
      "prefetch_to_device": fv.prefetch_to_device,
  }
