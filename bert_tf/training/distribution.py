"""The one strategy resolver every script uses, and the original's TPU flags as aliases.

Two steps, so that the flag logic is a pure function that tests can pin:

  ``resolve_distribution_args(**flag_values)`` turns new-style values (--distribution_strategy,
  --tpu, --steps_per_loop, ...) and the original's (--use_tpu, --tpu_name, --master,
  --num_tpu_cores, --iterations_per_loop) into one ``DistributionArgs``; None means "not given".
  ``get_strategy(**args.strategy_kwargs())`` builds the ``tf.distribute`` strategy.

So a Cloud TPU command line of the original,
    --use_tpu=True --tpu_name=my-tpu --tpu_zone=us-central1-f --num_tpu_cores=8
    --iterations_per_loop=1000
resolves to distribution_strategy="tpu", tpu="my-tpu", steps_per_loop=1000.

Strategies:
  default                the default strategy: one device, TensorFlow's placement.
  one_device             ``OneDeviceStrategy`` on /gpu:0 if a GPU is visible, else /cpu:0.
  mirrored               ``MirroredStrategy`` over the first ``num_gpus`` GPUs; num_gpus=0:
                         all visible GPUs, or every logical CPU device if there is no GPU
                         (tests split the CPU into 2 logical devices).
  multi_worker_mirrored  ``MultiWorkerMirroredStrategy``; the cluster comes from TF_CONFIG.
                         A task of the cluster that has not started within
                         ``worker_start_timeout_s`` seconds is a one-line ``BertTfError``
                         on every task that did start, not a hang.
  tpu                    ``TPUStrategy`` on ``tpu`` (a Cloud TPU name, grpc://host:port, or
                         "local" on a TPU VM; None: $TPU_NAME). A TPU that cannot be reached
                         is a one-line ``BertTfError`` naming the TPU and zone, within
                         ``tpu_timeout_s`` seconds, not a hang; so are a TPU that cannot be
                         looked up by name, and --tpu=local where no TPU is attached, each
                         saying what to do.
"""

import dataclasses
import importlib.util
import os
import socket
import tempfile
import threading
import urllib.error
import urllib.parse

import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.training import preflight, registration

STRATEGIES = ("default", "tpu", "mirrored", "multi_worker_mirrored", "one_device")
DEFAULT_STRATEGY = "default"
# The original's --iterations_per_loop default.
DEFAULT_STEPS_PER_LOOP = 1000
# Connecting to and initialising a pod slice takes a minute or two; a TPU that has not
# answered in this long is not coming.
DEFAULT_TPU_TIMEOUT_S = 600
# A TCP connect to the TPU worker, tried first: refused or unroutable addresses fail here.
_TPU_PROBE_TIMEOUT_S = 10
# Hosts of a cluster are started by hand or by a scheduler, minutes apart at worst; a task that
# has not registered in this long is not coming (TensorFlow's defaults wait far longer: a lone
# worker 0 of a 2-worker cluster was still waiting after 12 minutes here).
DEFAULT_WORKER_START_TIMEOUT_S = 600
# TensorFlow looks a TPU's name up (its workers' addresses) through the Cloud TPU API: with
# the cloud-tpu-client package where it is installed, else with its own copy of that client
# (tensorflow/python/tpu/client/client.py), which needs only these two modules. The
# cloud-tpu-client package itself does not install beside TensorFlow 2.21 (0.10 pins
# google-api-python-client 1.8.0, which takes protobuf down to 3.20); these two do (setup.py's
# "tpu" extra).
_TPU_API_MODULES = ("googleapiclient", "oauth2client")
TPU_API_PIP = "pip install google-api-python-client oauth2client"
# Where TensorFlow's client finds a TPU when none is named: these variables hold a name or
# addresses (KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS on GKE), TPU_CONFIG a JSON node config.
_TPU_NAME_VARIABLES = ("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_NAME")


@dataclasses.dataclass(frozen=True)
class DistributionArgs:
  """Resolved distribution settings (see ``resolve_distribution_args``)."""
  distribution_strategy: str = DEFAULT_STRATEGY
  tpu: str | None = None
  tpu_zone: str | None = None
  gcp_project: str | None = None
  num_gpus: int = 0
  num_tpu_cores: int | None = None
  tpu_job_name: str | None = None
  steps_per_loop: int = DEFAULT_STEPS_PER_LOOP
  worker_start_timeout_s: int = DEFAULT_WORKER_START_TIMEOUT_S

  def strategy_kwargs(self):
    """The keyword arguments of ``get_strategy``."""
    kwargs = dataclasses.asdict(self)
    del kwargs["steps_per_loop"]
    return kwargs


def resolve_distribution_args(distribution_strategy=None, tpu=None, tpu_zone=None,
                              gcp_project=None, num_gpus=None, steps_per_loop=None,
                              use_tpu=None, tpu_name=None, master=None, num_tpu_cores=None,
                              iterations_per_loop=None, tpu_job_name=None,
                              worker_start_timeout_s=None, given_before_use_tpu=()):
  """Merges new-style and original-style flag values into one ``DistributionArgs``.

  Every argument but ``given_before_use_tpu`` is a flag value, None when the flag was not
  given. ``given_before_use_tpu``: the names among "distribution_strategy" and "tpu" of the
  flags given (last) before --use_tpu on the command line, flag files expanded where they
  stand (``flags.distribution_args`` reads them). Rules:
    - --use_tpu=True means --distribution_strategy=tpu; either alone is enough, and
      --tpu alone implies tpu too. Otherwise the strategy is "default".
    - --use_tpu overrides the flags given before it, as a flag given again does:
      --use_tpu=False after --distribution_strategy=tpu and --tpu (a TPU flag file's, then
      --use_tpu=False on the command line) means no TPU, and --use_tpu=True after another
      --distribution_strategy means tpu. Where --use_tpu comes first, a disagreement is an
      error.
    - --tpu, --tpu_name and --master name the same thing (the original used --tpu_name, or
      --master for a grpc:// address); giving two different values is an error.
    - --iterations_per_loop is --steps_per_loop.
    - --worker_start_timeout_s (multi_worker_mirrored) must be >= 1.
    - Without the tpu strategy, --tpu_name/--master/--tpu_zone/--gcp_project/--num_tpu_cores/
      --tpu_job_name are ignored, as the original ignored them with --use_tpu=False; --tpu is
      an error.

  Raises:
    BertTfError: conflicting or invalid values, naming the flags.
  """
  if distribution_strategy is not None and distribution_strategy not in STRATEGIES:
    raise BertTfError(f"--distribution_strategy={distribution_strategy} is not one of "
                      f"{', '.join(STRATEGIES)}")
  if use_tpu is not None:
    before = set(given_before_use_tpu)
    if "distribution_strategy" in before and (distribution_strategy == "tpu") != use_tpu:
      distribution_strategy = None
    if "tpu" in before and not use_tpu:
      tpu = None
  if use_tpu and distribution_strategy not in (None, "tpu"):
    raise BertTfError(f"--use_tpu=True conflicts with "
                      f"--distribution_strategy={distribution_strategy}: leave out one, or "
                      "give --use_tpu=True after the other (it then decides)")
  if use_tpu is False and distribution_strategy == "tpu":
    instead = "--distribution_strategy=default" + (" --tpu=" if tpu else "")
    raise BertTfError(
        f"--use_tpu=False conflicts with --distribution_strategy=tpu"
        f"{f' and --tpu={tpu}' if tpu else ''}: to run without a TPU, give --use_tpu=False "
        f"after them (after the --flagfile that sets them), or {instead} instead")
  if use_tpu is False and tpu and distribution_strategy is None:
    raise BertTfError(f"--tpu={tpu} conflicts with --use_tpu=False: leave out one, or give "
                      "--use_tpu=False after --tpu (it then decides)")
  if distribution_strategy is None:
    distribution_strategy = "tpu" if (use_tpu or tpu) else DEFAULT_STRATEGY

  named = [(flag, value) for flag, value in
           (("--tpu", tpu), ("--tpu_name", tpu_name), ("--master", master)) if value]
  if len({value for _, value in named}) > 1:
    (flag_a, value_a), (flag_b, value_b) = named[0], next(
        (f, v) for f, v in named[1:] if v != named[0][1])
    raise BertTfError(f"{flag_a}={value_a} conflicts with {flag_b}={value_b}: they name the "
                      "same TPU")
  if distribution_strategy == "tpu":
    tpu = named[0][1] if named else None
  elif tpu:
    raise BertTfError(f"--tpu={tpu} needs --distribution_strategy=tpu (got "
                      f"{distribution_strategy}): to run without a TPU, also give --tpu= "
                      "(empty), or give --use_tpu=False after --tpu (after the --flagfile "
                      "that sets it)")
  else:
    tpu_zone = gcp_project = num_tpu_cores = tpu_job_name = None

  if (steps_per_loop is not None and iterations_per_loop is not None and
      steps_per_loop != iterations_per_loop):
    raise BertTfError(f"--steps_per_loop={steps_per_loop} conflicts with "
                      f"--iterations_per_loop={iterations_per_loop}: they are the same flag")
  if steps_per_loop is None:
    steps_per_loop = (iterations_per_loop if iterations_per_loop is not None
                      else DEFAULT_STEPS_PER_LOOP)
  if steps_per_loop < 1:
    raise BertTfError(f"--steps_per_loop must be >= 1, got {steps_per_loop}")
  num_gpus = 0 if num_gpus is None else num_gpus
  if num_gpus < 0:
    raise BertTfError(f"--num_gpus must be >= 0, got {num_gpus}")
  if num_tpu_cores is not None and num_tpu_cores < 1:
    raise BertTfError(f"--num_tpu_cores must be >= 1, got {num_tpu_cores}")
  if tpu_job_name is not None and not tpu_job_name.strip():
    raise BertTfError("--tpu_job_name is empty: give the TPU workers' job name, or leave the "
                      "flag out for 'worker'")
  if worker_start_timeout_s is None:
    worker_start_timeout_s = DEFAULT_WORKER_START_TIMEOUT_S
  if worker_start_timeout_s < 1:
    raise BertTfError(f"--worker_start_timeout_s must be >= 1, got {worker_start_timeout_s}")
  return DistributionArgs(
      distribution_strategy=distribution_strategy, tpu=tpu, tpu_zone=tpu_zone,
      gcp_project=gcp_project, num_gpus=num_gpus, num_tpu_cores=num_tpu_cores,
      tpu_job_name=tpu_job_name, steps_per_loop=steps_per_loop,
      worker_start_timeout_s=worker_start_timeout_s)


_MIRRORED_KEYS_LOCK = threading.Lock()


def mirrored_strategy(devices=None, cross_device_ops=None):
  """``tf.distribute.MirroredStrategy(devices, cross_device_ops)`` whose collective ops use keys
  no other strategy of this process uses.

  Every MirroredStrategy numbers its collectives (group and instance keys) from the same start,
  and TensorFlow resolves a collective's shape once per process by those keys: the second of
  two strategies over the same devices in one process (two runs in a notebook, or in one test
  process) then fails its first all-gather of another shape with "Shape mismatch in the
  collective instance 100". TensorFlow's own tests give each strategy its own key range through
  the class's ``_collective_key_base``; so does this.
  """
  with _MIRRORED_KEYS_LOCK:
    tf.distribute.MirroredStrategy._collective_key_base += 100_000  # pylint: disable=protected-access
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=cross_device_ops)


def get_strategy(distribution_strategy=DEFAULT_STRATEGY, tpu=None, tpu_zone=None,
                 gcp_project=None, num_gpus=0, num_tpu_cores=None, tpu_job_name=None,
                 tpu_timeout_s=DEFAULT_TPU_TIMEOUT_S,
                 worker_start_timeout_s=DEFAULT_WORKER_START_TIMEOUT_S):
  """Returns the ``tf.distribute.Strategy`` named by ``distribution_strategy``.

  Args:
    distribution_strategy: one of ``STRATEGIES`` (see the module docstring).
    tpu, tpu_zone, gcp_project: the Cloud TPU (tpu strategy only).
    num_gpus: GPUs for mirrored / one_device; 0 = what is visible.
    num_tpu_cores: if given, the TPU must have this many cores (replicas).
    tpu_job_name: the TPU workers' job name in the cluster (tpu strategy only); None:
      TensorFlow's default, ``worker``.
    tpu_timeout_s: seconds to wait for the TPU to connect and initialise.
    worker_start_timeout_s: multi_worker_mirrored: seconds to wait for every task of
      TF_CONFIG's cluster to start.
  Raises:
    BertTfError: an unknown strategy, missing GPUs, a TPU that cannot be reached, or a
      cluster task that did not start.
  """
  if distribution_strategy == "default":
    return tf.distribute.get_strategy()
  if distribution_strategy == "one_device":
    return tf.distribute.OneDeviceStrategy(_gpu_devices(num_gpus, at_most=1)[0]
                                           if num_gpus or _visible("GPU") else "/cpu:0")
  if distribution_strategy == "mirrored":
    if num_gpus or _visible("GPU"):
      return mirrored_strategy(_gpu_devices(num_gpus))
    # On CPUs, sum on one device: host memory is shared.
    return mirrored_strategy(_visible("CPU"),
                             cross_device_ops=tf.distribute.ReductionToOneDevice())
  if distribution_strategy == "multi_worker_mirrored":
    return _multi_worker_strategy(worker_start_timeout_s)
  if distribution_strategy == "tpu":
    strategy = _tpu_strategy(tpu, tpu_zone, gcp_project, tpu_timeout_s, tpu_job_name)
    if num_tpu_cores is not None and strategy.num_replicas_in_sync != num_tpu_cores:
      raise BertTfError(f"--num_tpu_cores={num_tpu_cores} but "
                        f"{_describe_tpu(tpu, tpu_zone, gcp_project)} has "
                        f"{strategy.num_replicas_in_sync} cores")
    return strategy
  raise BertTfError(f"--distribution_strategy={distribution_strategy} is not one of "
                    f"{', '.join(STRATEGIES)}")


def is_chief(strategy):
  """Whether this process writes checkpoints, summaries and results.

  Every process but the non-chief workers of a multi-worker cluster is the chief: the task
  ``chief`` of TF_CONFIG, or ``worker`` 0 when the cluster has no ``chief`` job (the usual
  MultiWorkerMirroredStrategy convention). The others run the same steps and discard what
  they would write (``worker_write_dir``).
  """
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return True
  resolver = strategy.cluster_resolver
  if resolver is None or not resolver.task_type:
    return True
  if resolver.task_type == "chief":
    return True
  jobs = resolver.cluster_spec().as_dict()
  return resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in jobs


def worker_write_dir(strategy, model_dir):
  """``model_dir`` on the chief; elsewhere a new local temporary directory for the
  checkpoints a non-chief worker must also write (every worker takes part in a save), which
  the caller removes (``shutil.rmtree``) when training ends."""
  if is_chief(strategy):
    return model_dir
  resolver = strategy.cluster_resolver
  return tempfile.mkdtemp(prefix=f"bert_tf-{resolver.task_type}{resolver.task_id}-")


def _visible(device_type):
  return [device.name for device in tf.config.list_logical_devices(device_type)]


def _gpu_devices(num_gpus, at_most=None):
  gpus = _visible("GPU")
  if at_most is not None and num_gpus > at_most:
    raise BertTfError(f"--num_gpus={num_gpus} but this strategy uses at most {at_most}")
  if num_gpus > len(gpus):
    raise BertTfError(f"--num_gpus={num_gpus} but {len(gpus)} GPUs are visible")
  return gpus[:num_gpus] if num_gpus else gpus


def _multi_worker_strategy(timeout_s):
  """``MultiWorkerMirroredStrategy`` whose start is bounded by ``timeout_s``.

  At start every task registers with the coordination service (run by the leader, the chief
  or worker 0), and the strategy waits until all have. Left to itself it waits far longer than
  anyone would (see ``DEFAULT_WORKER_START_TIMEOUT_S``), inside a C++ call that holds the GIL,
  so a watchdog thread cannot help. So the coordination service is configured here, before
  the strategy would configure it with its defaults: registration becomes a barrier with
  ``timeout_s``, which fails on every task that is waiting when a task never came; and
  ``registration.interruptible`` makes the wait one where Ctrl-C and SIGTERM stop at once.
  TensorFlow's API for this is private; if it moved, the strategy starts as TensorFlow
  configures it.
  """
  if not os.environ.get("TF_CONFIG", "").strip():
    raise BertTfError("--distribution_strategy=multi_worker_mirrored needs TF_CONFIG in the "
                      "environment (the cluster's workers and this task's index); without it "
                      "this would train as one worker: set TF_CONFIG on every worker, or use "
                      "--distribution_strategy=mirrored on one machine")
  preflight.check_tf_config()  # a malformed TF_CONFIG: one line, not TensorFlow's traceback
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  cluster = resolver.cluster_spec()
  jobs = [job for job in ("chief", "worker") if job in cluster.jobs]
  tasks = sum(cluster.num_tasks(job) for job in jobs)
  if tasks > 1 and resolver.task_type in jobs:
    _bound_registration(cluster, jobs, timeout_s)
  try:
    with registration.interruptible():  # Ctrl-C and SIGTERM stop the wait at once.
      return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
  except tf.errors.DeadlineExceededError as e:
    addresses = ", ".join(f"{job} {i} at {address}" for job in jobs
                          for i, address in enumerate(cluster.job_tasks(job)))
    raise BertTfError(
        f"multi_worker_mirrored: not every task of TF_CONFIG's cluster ({addresses}) started "
        f"within {timeout_s} s (this is {resolver.task_type} {resolver.task_id}); start each "
        "one with the same TF_CONFIG cluster and its own task, or raise "
        "--worker_start_timeout_s") from e


def _bound_registration(cluster, jobs, timeout_s):
  try:
    # pylint: disable=import-outside-toplevel
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context
    ctx = context.context()
    if ctx.coordination_service is not None:
      return
    ctx.configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(cluster),
        coordinated_jobs=[coordination_config_pb2.CoordinatedJob(
            name=job, num_tasks=cluster.num_tasks(job)) for job in jobs],
        cluster_register_timeout_in_ms=int(timeout_s * 1000))
    # pylint: disable-next=protected-access
    ctx._coordination_service_config.cluster_register_with_barrier = True
  except (ImportError, AttributeError, TypeError, ValueError):
    return


def _describe_tpu(tpu, tpu_zone, gcp_project):
  where = [f"zone {tpu_zone or '(default)'}"]
  if gcp_project:
    where.append(f"project {gcp_project}")
  if not tpu:
    variable = next((v for v in _TPU_NAME_VARIABLES if os.environ.get(v)), None)
    if variable:
      return f"TPU {os.environ[variable]!r} (${variable}, {', '.join(where)})"
  return f"TPU {tpu or '(not named)'!r} ({', '.join(where)})"


def _tpu_named_by_environment():
  """Whether TensorFlow's client would find a TPU without --tpu (as its ``_get_tpu_name``
  and ``_get_tpu_node_config`` read the environment)."""
  return (any(v in os.environ for v in _TPU_NAME_VARIABLES) or
          bool(os.environ.get("TPU_CONFIG")))


def _tpu_api_client_installed():
  return all(importlib.util.find_spec(name) is not None for name in _TPU_API_MODULES)


def _lookup_error(error, what, tpu, tpu_zone, gcp_project):
  """The one line for a failed look-up of a TPU by name (``TPUClusterResolver`` or its
  ``master()``), saying what to do where the cause is known."""
  other_ways = ("on the TPU VM itself pass --tpu=local, from another machine the TPU's "
                "address as --tpu=grpc://IP:8470")
  text = str(error)
  if "cloud-tpu-client" in text or "Google API client" in text:
    # TF's client without googleapiclient/oauth2client ("Run `pip install cloud-tpu-client`",
    # which would not install: see _TPU_API_MODULES).
    return (f"cannot look up {what} by name: TensorFlow's Cloud TPU API client needs the "
            f"Google API client packages: {TPU_API_PIP} (bert_tf's [tpu] extra); or "
            f"{other_ways}")
  if isinstance(error, urllib.error.URLError) and not (tpu_zone and gcp_project):
    # The client reads a missing zone or project from the GCE metadata server, which only a
    # Google Cloud VM reaches.
    install = "" if _tpu_api_client_installed() else f" (and {TPU_API_PIP})"
    return (f"cannot look up {what}: without --tpu_zone and --gcp_project they come from the "
            f"Google Cloud metadata server, which did not answer ({_first_line(error)}): off "
            f"a Google Cloud VM pass --tpu_zone and --gcp_project{install}; or {other_ways}")
  if ("Application Default Credentials" in text or
      type(error).__name__ == "ApplicationDefaultCredentialsError"):
    return (f"cannot look up {what}: no Google Cloud credentials here for the Cloud TPU API: "
            "run `gcloud auth application-default login` or set "
            "GOOGLE_APPLICATION_CREDENTIALS to a service account key file; or pass the TPU's "
            "address as --tpu=grpc://IP:8470")
  return f"cannot find {what}: {_first_line(error)}"


def _first_line(error):
  text = str(error).strip() or type(error).__name__
  return text.splitlines()[0].strip()


def _tpu_strategy(tpu, tpu_zone, gcp_project, timeout_s, job_name=None):
  """Resolves, probes, connects and initialises the TPU; each failure is one line."""
  what = _describe_tpu(tpu, tpu_zone, gcp_project)
  # The original passed --tpu_job_name to TPUConfig; TPUClusterResolver takes it as job_name.
  job = {"job_name": job_name} if job_name else {}
  if not tpu and not _tpu_named_by_environment():
    raise BertTfError("the tpu strategy needs a TPU: pass --tpu=local on the TPU VM itself, "
                      "--tpu=NAME (a Cloud TPU's name) or --tpu=grpc://IP:8470 (--tpu_name "
                      "is the same flag), or set $TPU_NAME")
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=tpu, zone=tpu_zone, project=gcp_project, **job)
    master = resolver.master()
  except Exception as e:  # The Cloud TPU API client raises many types; all mean "not found".
    raise BertTfError(_lookup_error(e, what, tpu, tpu_zone, gcp_project)) from e

  local = tpu == "local" or not master
  if not local:
    address = urllib.parse.urlparse(master if "://" in master else f"grpc://{master}")
    try:
      socket.create_connection((address.hostname, address.port or 8470),
                               timeout=min(_TPU_PROBE_TIMEOUT_S, timeout_s)).close()
    except OSError as e:
      raise BertTfError(f"cannot reach {what} at {master}: {_first_line(e)}") from e

  # Connecting and initialising can block forever on a worker that accepts connections
  # but never answers; wait in a daemon thread and give up after timeout_s.
  outcome = {}

  def connect():
    try:
      if not local:
        tf.config.experimental_connect_to_cluster(resolver)
      tf.tpu.experimental.initialize_tpu_system(resolver)
    except Exception as e:  # Reported below, in the caller's thread.
      outcome["error"] = e

  thread = threading.Thread(target=connect, name="tpu-connect", daemon=True)
  thread.start()
  thread.join(timeout_s)
  if thread.is_alive():
    raise BertTfError(f"{what} at {master or 'local'} did not answer within {timeout_s} s")
  if "error" in outcome:
    error = outcome["error"]
    if local and ("ConfigureDistributedTPU" in str(error) or "TPUs not found" in str(error)):
      # TensorFlow without a TPU device: no kernel for the op that configures one.
      raise BertTfError(
          f"cannot initialise {what}: no TPU is attached to this machine (--tpu=local is for "
          "the TPU VM itself): run there, or name the TPU with --tpu=NAME or "
          "--tpu=grpc://IP:8470, or leave out the TPU flags (after a TPU --flagfile: give "
          "--use_tpu=False) to run on this machine's CPU or GPU") from error
    raise BertTfError(f"cannot initialise {what}: {_first_line(error)}") from error
  return tf.distribute.TPUStrategy(resolver)
