"""Model step on CPU: bert_tf vs keras-hub ``BertBackbone`` vs Hugging Face ``BertModel``.

One command drives all three on the same machine with the same configs and the same
synthetic batches (``bench/_harness.py``), each (framework, config, mode, batch size) in its
own process so that its peak memory (``ru_maxrss``) is its own:

  inference  the encoder + pooler, dropout off (``training=False`` / ``eval()``):
               bert_tf ``BertModel`` and keras-hub ``BertBackbone`` in a ``tf.function``
               (``jit_compile`` False and True); transformers ``BertModel`` under
               ``torch.inference_mode``.
  training   one update (forward + backward + optimizer) on the pretraining loss: the MLM
               head on the P masked positions only (dense + LayerNorm + tied output layer)
               plus next sentence, loss = weighted MLM nll / (sum(w) + 1e-5) + NSP nll, dropout
               0.1, an Adam-type optimizer with decoupled weight decay and global-norm clip 1.0:
               bert_tf: its real training path, ``training.loop.Trainer`` (one step per
                 call, gradients in a tf.function, XLA-compiled with ``jit_compile``), with
                 ``create_optimizer`` (Google's AdamWeightDecay);
               keras-hub: ``BertBackbone`` + ``keras_hub.layers.MaskedLMHead`` (as its
                 ``BertMaskedLM`` builds it) + Dense(2), the whole step (optimizer included)
                 in one ``tf.function`` as Keras's ``fit`` compiles it, ``keras.optimizers.AdamW``;
               transformers: ``BertModel`` + ``BertPreTrainingHeads`` on the gathered
                 positions, eager, ``torch.optim.AdamW`` (``bench/_torch_peer.py``).

Each process times ``--max_repeats`` calls after 2 warm-up calls (the first one, with tracing
and XLA compilation, is reported apart) and reports the median.

keras-hub and torch are not bert_tf dependencies. keras-hub goes into the bench venv (it
leaves tensorflow and keras as they are); torch runs in another interpreter
(``--torch_python``):

  .venv/bin/pip install keras-hub==0.32.0
  python -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 transformers

Run (about 15 minutes on 2 cores):

  .venv/bin/python bench/bench_model_cpu.py --torch_python=/work/refvenv/bin/python \
      --output_json=/tmp/model_cpu.json
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

import _harness  # noqa: E402

FRAMEWORKS = ("bert_tf", "bert_tf_xla", "keras_hub", "keras_hub_xla", "hf_torch")
LABELS = {"bert_tf": "bert_tf", "bert_tf_xla": "bert_tf XLA", "keras_hub": "keras-hub",
          "keras_hub_xla": "keras-hub XLA", "hf_torch": "HF torch"}

flags.DEFINE_string("plan", "small:1,8,32;base:1,8",
                    "config:batch sizes;... (configs of bench/_harness.py).")
flags.DEFINE_list("frameworks", list(FRAMEWORKS), "Which of " + ", ".join(FRAMEWORKS))
flags.DEFINE_list("modes", ["infer", "train"], "infer and/or train.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("num_predictions", 20, "Masked positions per sequence (training).")
flags.DEFINE_integer("rounds", 1, "Runs of the whole plan (framework order rotated); the "
                     "median over rounds is reported.")
flags.DEFINE_integer("min_repeats", 3, "Timed calls per process, at least.")
flags.DEFINE_integer("max_repeats", 10, "Timed calls per process, at most.")
flags.DEFINE_float("budget_s", 20.0, "Stop timing a process after this many seconds (once "
                   "min_repeats are done).")
flags.DEFINE_integer("threads", 0, "Intra-op threads of every framework (0: each one's "
                     "default, all cores).")
flags.DEFINE_string("torch_python", "/work/refvenv/bin/python",
                    "An interpreter with torch and transformers, for the HF peer.")
flags.DEFINE_string("output_json", None, "Write every result here too.")
flags.DEFINE_string("worker", None, "Internal: run one TensorFlow measurement and print it.")
flags.DEFINE_string("config", "small", "Internal (worker): config name.")
flags.DEFINE_string("mode", "infer", "Internal (worker): infer or train.")
flags.DEFINE_integer("batch_size", 8, "Internal (worker): batch size.")
FLAGS = flags.FLAGS


# === Workers (one measurement per process) ===

def _bert_tf_step(c, batch, mode, jit):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from bert_tf import optimization  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig, BertModel  # pylint: disable=import-outside-toplevel
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  from bert_tf.training.pretraining import PretrainingTask  # noqa: E501 pylint: disable=import-outside-toplevel

  config = BertConfig.from_dict(c)
  if mode == "infer":
    model = BertModel(config)
    inputs = {"input_word_ids": tf.constant(batch["input_ids"]),
              "input_mask": tf.constant(batch["input_mask"]),
              "input_type_ids": tf.constant(batch["segment_ids"])}

    @tf.function(jit_compile=jit)
    def forward(x):
      out = model(x, training=False)
      return out["sequence_output"], out["pooled_output"]

    return lambda: [t.numpy() for t in forward(inputs)]

  strategy = tf.distribute.get_strategy()
  task = PretrainingTask(config)
  model = task.build_model()
  optimizer = optimization.create_optimizer(1e-4, num_train_steps=10000, num_warmup_steps=100)
  trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
      model_dir=tempfile.mkdtemp(), num_train_steps=10000, jit_compile=jit))
  train_loop = trainer.build_train_loop()
  dataset = strategy.distribute_datasets_from_function(
      lambda ctx: tf.data.Dataset.from_tensors(batch).repeat())
  iterator = iter(dataset)
  one = tf.constant(1, tf.int32)
  return lambda: train_loop(iterator, one).numpy()


def _keras_hub_step(c, batch, mode, jit):
  import keras  # pylint: disable=import-outside-toplevel
  import keras_hub  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  init = lambda: keras.initializers.TruncatedNormal(stddev=c["initializer_range"])  # noqa
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=c["vocab_size"], num_layers=c["num_hidden_layers"],
      num_heads=c["num_attention_heads"], hidden_dim=c["hidden_size"],
      intermediate_dim=c["intermediate_size"], dropout=c["hidden_dropout_prob"],
      max_sequence_length=c["max_position_embeddings"], num_segments=c["type_vocab_size"])
  inputs = {"token_ids": tf.constant(batch["input_ids"]),
            "segment_ids": tf.constant(batch["segment_ids"]),
            "padding_mask": tf.constant(batch["input_mask"])}
  if mode == "infer":
    @tf.function(jit_compile=jit)
    def forward(x):
      out = backbone(x, training=False)
      return out["sequence_output"], out["pooled_output"]

    return lambda: [t.numpy() for t in forward(inputs)]

  mlm_head = keras_hub.layers.MaskedLMHead(
      vocabulary_size=c["vocab_size"], token_embedding=backbone.token_embedding,
      intermediate_activation="gelu", kernel_initializer=init())
  nsp_head = keras.layers.Dense(2, kernel_initializer=init())
  positions = tf.constant(batch["masked_lm_positions"])
  ids = tf.constant(batch["masked_lm_ids"])
  weights = tf.constant(batch["masked_lm_weights"])
  labels = tf.constant(batch["next_sentence_labels"][:, 0])

  def loss_fn(training):
    out = backbone(inputs, training=training)
    logits = mlm_head(out["sequence_output"], mask_positions=positions)  # [B,P,V]
    nll = keras.losses.sparse_categorical_crossentropy(ids, logits, from_logits=True)
    mlm = tf.reduce_sum(weights * nll) / (tf.reduce_sum(weights) + 1e-5)
    nsp = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
        labels, nsp_head(out["pooled_output"]), from_logits=True))
    return mlm + nsp

  loss_fn(False)  # builds the heads
  variables, seen = [], set()
  for v in (backbone.trainable_variables + mlm_head.trainable_variables +
            nsp_head.trainable_variables):
    if id(v) not in seen:
      seen.add(id(v))
      variables.append(v)
  optimizer = keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6,
                                     global_clipnorm=1.0)
  optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
  optimizer.build(variables)

  @tf.function(jit_compile=jit)
  def train_step():
    with tf.GradientTape() as tape:
      loss = loss_fn(True)
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss

  return lambda: train_step().numpy()


def run_worker():
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  if FLAGS.threads:
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
  keras.utils.set_random_seed(0)
  c = _harness.config_dict(FLAGS.config)
  batch = _harness.pretraining_batch(c, FLAGS.batch_size, FLAGS.seq_length,
                                     FLAGS.num_predictions)
  jit = FLAGS.worker.endswith("_xla")
  versions = {"python": platform.python_version(), "tensorflow": tf.__version__,
              "keras": keras.__version__}
  if FLAGS.worker.startswith("bert_tf"):
    step = _bert_tf_step(c, batch, FLAGS.mode, jit)
  else:
    import keras_hub  # pylint: disable=import-outside-toplevel
    versions["keras_hub"] = keras_hub.__version__
    step = _keras_hub_step(c, batch, FLAGS.mode, jit)
  result = _harness.measure(step, FLAGS.min_repeats, FLAGS.max_repeats, FLAGS.budget_s)
  result.update(framework=FLAGS.worker, config=FLAGS.config, mode=FLAGS.mode,
                batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
                peak_rss_mb=_harness.peak_rss_mb(), versions=versions,
                threads=tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count())
  _harness.emit(result)


# === Driver ===

def _plan():
  jobs = []
  for part in FLAGS.plan.split(";"):
    name, sizes = part.split(":")
    for mode in FLAGS.modes:
      for size in sizes.split(","):
        jobs.append((name.strip(), mode, int(size)))
  return jobs


def _command(framework, config, mode, batch_size):
  common = [f"--config={config}", f"--mode={mode}", f"--batch_size={batch_size}",
            f"--seq_length={FLAGS.seq_length}", f"--num_predictions={FLAGS.num_predictions}",
            f"--min_repeats={FLAGS.min_repeats}", f"--max_repeats={FLAGS.max_repeats}",
            f"--budget_s={FLAGS.budget_s}", f"--threads={FLAGS.threads}"]
  here = os.path.dirname(os.path.abspath(__file__))
  if framework == "hf_torch":
    return [FLAGS.torch_python, os.path.join(here, "_torch_peer.py")] + common
  return [sys.executable, os.path.abspath(__file__), f"--worker={framework}"] + common


def _run_one(framework, config, mode, batch_size):
  load_before = os.getloadavg()[0]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  start = time.time()
  proc = subprocess.run(_command(framework, config, mode, batch_size), capture_output=True,
                        text=True, env=env, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith(_harness.RESULT_PREFIX)]
  if proc.returncode or not lines:
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    print(f"  {framework} {config} {mode} b{batch_size}: FAILED rc={proc.returncode}\n    "
          + "\n    ".join(tail), flush=True)
    return None
  result = json.loads(lines[-1][len(_harness.RESULT_PREFIX):])
  result.update(framework=framework, load_before=load_before, load_after=os.getloadavg()[0],
                wall_s=time.time() - start)
  print(f"  {framework:14s} {config:5s} {mode:5s} b{batch_size:<3d} "
        f"median {1000 * result['median_s']:9.1f} ms  cpu {1000 * result['median_cpu_s']:9.1f} ms  "
        f"first {result['first_call_s']:6.1f} s  rss {result['peak_rss_mb']:6.0f} MiB  load {load_before:.1f}", flush=True)
  return result


def _table(results, mode, key="median_s"):
  """Markdown: one row per (config, batch), ms (ratio to the fastest), then peak memory.

  ``key``: "median_s" (wall time) or "median_cpu_s" (CPU time of all the process's threads).
  """
  frameworks = [f for f in FRAMEWORKS if f in FLAGS.frameworks]
  rows = sorted({(r["config"], r["batch_size"]) for r in results if r["mode"] == mode},
                key=lambda k: (list(_harness.CONFIGS).index(k[0]), k[1]))
  head = ["config", "batch"] + [f"{LABELS[f]} ms" for f in frameworks] + [
      "bert_tf best / peers' best"] + [f"{LABELS[f]} MiB" for f in frameworks]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for config, batch_size in rows:
    med, mem = {}, {}
    for f in frameworks:
      mine = [r for r in results if (r["framework"], r["config"], r["mode"], r["batch_size"])
              == (f, config, mode, batch_size)]
      if mine:
        med[f] = statistics.median(r[key] for r in mine)
        mem[f] = max(r["peak_rss_mb"] for r in mine)
    fastest = min(med.values())
    cells = [config, str(batch_size)]
    for f in frameworks:
      cells.append(f"{1000 * med[f]:.1f} ({med[f] / fastest:.2f}x)" if f in med else "-")
    ours = [med[f] for f in ("bert_tf", "bert_tf_xla") if f in med]
    peers = [med[f] for f in ("keras_hub", "keras_hub_xla", "hf_torch") if f in med]
    cells.append(f"{min(ours) / min(peers):.2f}" if ours and peers else "-")
    cells += [f"{mem[f]:.0f}" if f in mem else "-" for f in frameworks]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _cpu_model():
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    for line in f:
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  return platform.processor()


def run_driver():
  jobs = _plan()
  frameworks = [f for f in FRAMEWORKS if f in FLAGS.frameworks]
  print(f"machine: {os.cpu_count()} x {_cpu_model()}; load {os.getloadavg()}", flush=True)
  results = []
  for round_index in range(FLAGS.rounds):
    for job_index, (config, mode, batch_size) in enumerate(jobs):
      shift = (round_index + job_index) % len(frameworks)
      for framework in frameworks[shift:] + frameworks[:shift]:
        result = _run_one(framework, config, mode, batch_size)
        if result:
          result["round"] = round_index
          results.append(result)
  versions = {}
  for r in results:
    versions.update(r["versions"])
  loads = [r[k] for r in results for k in ("load_before", "load_after")]
  summary = {
      "date": time.strftime("%Y-%m-%d"), "nproc": os.cpu_count(), "cpu": _cpu_model(),
      "versions": versions, "seq_length": FLAGS.seq_length, "threads": FLAGS.threads,
      "environment": {k: os.environ[k] for k in (
          "TF_CPU_ALLOCATOR_USE_BFC", "TF_ENABLE_ONEDNN_OPTS", "OMP_NUM_THREADS")
                      if k in os.environ},
      "num_predictions": FLAGS.num_predictions,
      "load_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)}
      if loads else None,
      "results": results,
  }
  print(json.dumps({k: v for k, v in summary.items() if k != "results"}, indent=1))
  for key, what in (("median_s", "wall"), ("median_cpu_s", "CPU")):
    for mode in FLAGS.modes:
      print(f"\n{mode}: median {what} ms per call (ratio to the fastest); peak RSS MiB\n")
      print(_table(results, mode, key))
  if FLAGS.output_json:
    from bert_tf import fileio  # pylint: disable=import-outside-toplevel
    with fileio.atomic_write(FLAGS.output_json) as f:
      json.dump(summary, f, indent=1)


def main(argv):
  del argv
  if FLAGS.worker:
    run_worker()
  else:
    run_driver()


if __name__ == "__main__":
  app.run(main)
