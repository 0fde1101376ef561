"""The strategy resolver: the original's TPU flags as aliases, strategies, unreachable TPUs."""

import os
import pathlib
import re
import socket
import subprocess
import sys
import textwrap
import time

import pytest
import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.training import distribution
from bert_tf.training.distribution import DistributionArgs, resolve_distribution_args

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_original_cloud_tpu_command_line_resolves_to_tpu():
  # run_pretraining.py's README command: --use_tpu=True --tpu_name=$TPU_NAME, plus the flags
  # its TPUEstimator read.
  args = resolve_distribution_args(use_tpu=True, tpu_name="my-tpu", tpu_zone="us-central1-f",
                                   gcp_project="proj", num_tpu_cores=8,
                                   iterations_per_loop=500)
  assert args == DistributionArgs(distribution_strategy="tpu", tpu="my-tpu",
                                  tpu_zone="us-central1-f", gcp_project="proj",
                                  num_tpu_cores=8, steps_per_loop=500)
  assert args.strategy_kwargs() == {
      "distribution_strategy": "tpu", "tpu": "my-tpu", "tpu_zone": "us-central1-f",
      "gcp_project": "proj", "num_gpus": 0, "num_tpu_cores": 8, "tpu_job_name": None,
      "worker_start_timeout_s": distribution.DEFAULT_WORKER_START_TIMEOUT_S}
  assert resolve_distribution_args(use_tpu=True, master="grpc://10.0.0.2:8470").tpu == (
      "grpc://10.0.0.2:8470")


def test_new_flags_and_defaults():
  assert resolve_distribution_args() == DistributionArgs(
      distribution_strategy="default", steps_per_loop=distribution.DEFAULT_STEPS_PER_LOOP)
  assert resolve_distribution_args(tpu="local").distribution_strategy == "tpu"
  args = resolve_distribution_args(distribution_strategy="mirrored", num_gpus=4,
                                   steps_per_loop=100)
  assert (args.distribution_strategy, args.num_gpus, args.steps_per_loop) == (
      "mirrored", 4, 100)
  # Same value under both names is fine.
  assert resolve_distribution_args(steps_per_loop=7, iterations_per_loop=7).steps_per_loop == 7
  assert resolve_distribution_args(tpu="t", tpu_name="t", use_tpu=True).tpu == "t"


def test_original_ignores_tpu_flags_without_use_tpu():
  args = resolve_distribution_args(use_tpu=False, tpu_name="my-tpu", tpu_zone="z",
                                   num_tpu_cores=8, tpu_job_name="tpu_worker")
  assert args == DistributionArgs(distribution_strategy="default")


@pytest.mark.parametrize("kwargs,message", [
    ({"use_tpu": True, "distribution_strategy": "mirrored"},
     "--use_tpu=True conflicts with --distribution_strategy=mirrored"),
    ({"use_tpu": False, "distribution_strategy": "tpu"},
     "--use_tpu=False conflicts with --distribution_strategy=tpu: to run without a TPU, give "
     "--use_tpu=False after them (after the --flagfile that sets them), or "
     "--distribution_strategy=default instead"),
    # A TPU flag file's two flags, --use_tpu=False given before them: the whole fix at once.
    ({"use_tpu": False, "distribution_strategy": "tpu", "tpu": "local"},
     "--use_tpu=False conflicts with --distribution_strategy=tpu and --tpu=local: to run "
     "without a TPU, give --use_tpu=False after them (after the --flagfile that sets them), "
     "or --distribution_strategy=default --tpu= instead"),
    ({"use_tpu": False, "tpu": "local"}, "--tpu=local conflicts with --use_tpu=False"),
    ({"tpu": "a", "tpu_name": "b"}, "--tpu=a conflicts with --tpu_name=b"),
    ({"use_tpu": True, "tpu_name": "a", "master": "grpc://1.2.3.4:8470"},
     "--tpu_name=a conflicts with --master=grpc://1.2.3.4:8470"),
    ({"steps_per_loop": 10, "iterations_per_loop": 20},
     "--steps_per_loop=10 conflicts with --iterations_per_loop=20"),
    ({"distribution_strategy": "mirrored", "tpu": "a"},
     "--tpu=a needs --distribution_strategy=tpu (got mirrored): to run without a TPU, also "
     "give --tpu= (empty), or give --use_tpu=False after --tpu"),
    ({"distribution_strategy": "gpu"}, "--distribution_strategy=gpu is not one of"),
    ({"iterations_per_loop": 0}, "--steps_per_loop must be >= 1, got 0"),
    ({"num_gpus": -1}, "--num_gpus must be >= 0"),
    ({"use_tpu": True, "tpu_job_name": " "}, "--tpu_job_name is empty"),
])
def test_conflicts_are_one_line_errors(kwargs, message):
  with pytest.raises(BertTfError, match=re.escape(message)) as error:
    resolve_distribution_args(**kwargs)
  assert "\n" not in str(error.value)


def test_use_tpu_given_after_the_strategy_flags_overrides_them():
  # A TPU flag file (--distribution_strategy=tpu --tpu=local), then --use_tpu=False: no TPU.
  assert resolve_distribution_args(
      distribution_strategy="tpu", tpu="local", use_tpu=False, tpu_zone="z", num_tpu_cores=8,
      given_before_use_tpu=("distribution_strategy", "tpu")) == DistributionArgs()
  # A strategy given after it still counts: here it agrees.
  assert resolve_distribution_args(
      distribution_strategy="mirrored", tpu="local", use_tpu=False,
      given_before_use_tpu=("tpu",)).distribution_strategy == "mirrored"
  # --use_tpu=True after another strategy: the TPU.
  args = resolve_distribution_args(distribution_strategy="mirrored", use_tpu=True,
                                   tpu_name="my-tpu",
                                   given_before_use_tpu=("distribution_strategy",))
  assert (args.distribution_strategy, args.tpu) == ("tpu", "my-tpu")
  # Given after --use_tpu, the others decide: a disagreement is the error, as without order.
  with pytest.raises(BertTfError, match="--tpu=local conflicts with --use_tpu=False"):
    resolve_distribution_args(distribution_strategy="tpu", tpu="local", use_tpu=False,
                              given_before_use_tpu=("distribution_strategy",))
  with pytest.raises(BertTfError, match="--use_tpu=False conflicts with "
                                        "--distribution_strategy=tpu: "):
    resolve_distribution_args(distribution_strategy="tpu", tpu="local", use_tpu=False,
                              given_before_use_tpu=("tpu",))


def test_default_one_device_and_mirrored_on_logical_cpus():
  assert distribution.get_strategy() is tf.distribute.get_strategy()
  one = distribution.get_strategy("one_device")
  assert isinstance(one, tf.distribute.OneDeviceStrategy)
  assert one.num_replicas_in_sync == 1
  if tf.config.list_logical_devices("GPU"):
    pytest.skip("the mirrored-on-CPU case needs a machine without GPU")
  cpus = tf.config.list_logical_devices("CPU")
  mirrored = distribution.get_strategy("mirrored")
  assert isinstance(mirrored, tf.distribute.MirroredStrategy)
  assert mirrored.num_replicas_in_sync == len(cpus)
  assert sorted(tf.DeviceSpec.from_string(d).to_string().split("device:")[1]
                for d in mirrored.extended.worker_devices) == sorted(
                    f"CPU:{i}" for i in range(len(cpus)))


def test_two_mirrored_strategies_in_one_process_gather_their_own_shapes():
  """Two strategies over the same devices, each all-gathering a tensor of its own shape (two
  runs in one notebook): the second would fail its gather with "Shape mismatch in the
  collective instance 100" if both numbered their collectives from the same keys."""
  cpus = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
  if len(cpus) < 2:
    pytest.skip("needs 2 logical CPUs (tests/conftest.py configures them)")
  for width in (3, 2):
    strategy = distribution.mirrored_strategy(cpus)

    @tf.function
    def gather(width=width):
      def replica_fn():
        row = tf.fill([1, width], tf.cast(
            tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32))
        return tf.distribute.get_replica_context().all_gather(tf.identity(row), axis=0)
      return strategy.experimental_local_results(strategy.run(replica_fn))[0]

    assert gather().numpy().tolist() == [[0.0] * width, [1.0] * width]


def test_missing_gpus_and_unknown_strategy_are_errors():
  visible = len(tf.config.list_logical_devices("GPU"))
  with pytest.raises(BertTfError, match=f"--num_gpus={visible + 1} but {visible} GPUs"):
    distribution.get_strategy("mirrored", num_gpus=visible + 1)
  with pytest.raises(BertTfError, match="--num_gpus=2 but this strategy uses at most 1"):
    distribution.get_strategy("one_device", num_gpus=2)
  with pytest.raises(BertTfError, match="--distribution_strategy=parameter_server"):
    distribution.get_strategy("parameter_server")


# Bounds that only tell "gave up" from "waited the default --tpu_timeout_s (600 s)": far above
# what a loaded machine adds, far below the default.
GAVE_UP_S = distribution.DEFAULT_TPU_TIMEOUT_S / 4


def test_unknown_tpu_name_fails_fast_naming_tpu_and_zone():
  start = time.monotonic()
  with pytest.raises(BertTfError) as error:
    distribution.get_strategy("tpu", tpu="no-such-tpu-xyz", tpu_zone="us-central1-f",
                              gcp_project="no-such-project")
  assert time.monotonic() - start < GAVE_UP_S
  message = str(error.value)
  what = "TPU 'no-such-tpu-xyz' (zone us-central1-f, project no-such-project)"
  if _has_cloud_tpu_client():
    # Off Google Cloud, without credentials: the look-up says how to get them.
    assert message.startswith((f"cannot find {what}: ", f"cannot look up {what}: "))
  else:
    # TF's own Cloud TPU client needs the Google API client to look a name up: the message
    # names the pip packages, and what works without them (TF's tpu/client/client.py skips
    # the API for grpc:// addresses).
    assert message.startswith(f"cannot look up {what} by name: ")
    assert "pip install google-api-python-client oauth2client" in message
    assert "--tpu=local" in message and "--tpu=grpc://IP:8470" in message
    assert "does not install" not in message
  assert "\n" not in message


def _has_cloud_tpu_client():
  try:
    import googleapiclient  # pylint: disable=import-outside-toplevel,unused-import
    import oauth2client  # pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    return False
  return True


def test_the_tpu_lookup_needs_only_the_packages_the_message_names():
  """What the look-up message tells to install is what TensorFlow's resolver needs: it falls
  back to TensorFlow's own client when cloud-tpu-client is missing, and that client imports
  the Google API client and oauth2client (read from TensorFlow's installed source)."""
  python = pathlib.Path(tf.__file__).parent / "python"
  resolver = (python / "distribute" / "cluster_resolver" / "tpu" /
              "tpu_cluster_resolver.py").read_text()
  assert "from tensorflow.python.tpu.client import client" in resolver
  client = (python / "tpu" / "client" / "client.py").read_text()
  guarded = client.split("_GOOGLE_API_CLIENT_INSTALLED = True", 1)[1].split("except ImportError",
                                                                         1)[0]
  modules = {line.split()[1].split(".")[0] for line in guarded.splitlines()
             if line.strip().startswith("from ")}
  assert modules == {"googleapiclient", "oauth2client"}
  # pip's names of those modules' distributions, in the message and in setup.py's extra.
  packages = {"googleapiclient": "google-api-python-client", "oauth2client": "oauth2client"}
  assert distribution.TPU_API_PIP == "pip install " + " ".join(
      packages[m] for m in sorted(modules))
  setup = (REPO / "setup.py").read_text()
  extra = setup.split('"tpu": [', 1)[1].split("]", 1)[0]
  assert sorted(re.findall(r'"([\w-]+)', extra)) == sorted(packages.values())


def test_tpu_name_without_zone_off_google_cloud_says_to_give_zone_and_project(monkeypatch):
  # The metadata server TensorFlow asks for a missing zone and project: an address that
  # refuses connections, as metadata.google.internal is unreachable off Google Cloud.
  with socket.socket() as closed:
    closed.bind(("127.0.0.1", 0))
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{closed.getsockname()[1]}")
    with pytest.raises(BertTfError) as error:
      distribution.get_strategy("tpu", tpu="my-tpu")
  message = str(error.value)
  assert message.startswith("cannot look up TPU 'my-tpu' (zone (default)): without --tpu_zone "
                            "and --gcp_project they come from the Google Cloud metadata "
                            "server, which did not answer (")
  assert "off a Google Cloud VM pass --tpu_zone and --gcp_project" in message
  assert "--tpu=local" in message and "--tpu=grpc://IP:8470" in message
  assert "\n" not in message


def test_tpu_strategy_without_a_tpu_says_which_flag(monkeypatch):
  for variable in ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG"):
    monkeypatch.delenv(variable, raising=False)
  args = resolve_distribution_args(use_tpu=True)
  with pytest.raises(BertTfError) as error:
    distribution.get_strategy(**args.strategy_kwargs())
  assert str(error.value) == (
      "the tpu strategy needs a TPU: pass --tpu=local on the TPU VM itself, --tpu=NAME (a "
      "Cloud TPU's name) or --tpu=grpc://IP:8470 (--tpu_name is the same flag), or set "
      "$TPU_NAME")
  # Named by $TPU_NAME: the errors say the name, not "$TPU_NAME".
  monkeypatch.setenv("TPU_NAME", "tpu-from-env")
  with pytest.raises(BertTfError) as error:
    distribution.get_strategy("tpu", tpu_zone="us-central1-f", gcp_project="p")
  assert "TPU 'tpu-from-env' ($TPU_NAME, zone us-central1-f, project p)" in str(error.value)


@pytest.mark.skipif("not _has_cloud_tpu_client()", reason="pip install "
                    "google-api-python-client oauth2client (setup.py's [tpu] extra)")
def test_tpu_name_without_credentials_says_how_to_get_them(monkeypatch, tmp_path):
  # With TensorFlow's client installed, off Google Cloud: no Application Default Credentials.
  monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
  monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud login of this machine's
  monkeypatch.setenv("HOME", str(tmp_path))
  with socket.socket() as closed:
    closed.bind(("127.0.0.1", 0))
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{closed.getsockname()[1]}")
    monkeypatch.setenv("GCE_METADATA_IP", f"127.0.0.1:{closed.getsockname()[1]}")
    with pytest.raises(BertTfError) as error:
      distribution.get_strategy("tpu", tpu="my-tpu", tpu_zone="us-central1-b",
                                gcp_project="p")
  assert str(error.value).startswith(
      "cannot look up TPU 'my-tpu' (zone us-central1-b, project p): no Google Cloud "
      "credentials here for the Cloud TPU API: run `gcloud auth application-default login`")


def test_unreachable_tpu_address_fails_fast():
  # A port bound by this test and not listening: a connection is refused, and the port stays
  # this test's (one closed after bind could be taken by another process before the probe).
  with socket.socket() as closed:
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(BertTfError, match=rf"cannot reach TPU 'grpc://127.0.0.1:{port}' "
                       rf"\(zone europe-west4-a\) at grpc://127.0.0.1:{port}: "
                       r".*[Cc]onnection refused"):
      distribution.get_strategy("tpu", tpu=f"grpc://127.0.0.1:{port}",
                                tpu_zone="europe-west4-a")
    assert time.monotonic() - start < GAVE_UP_S


def test_tpu_job_name_names_the_resolvers_job(monkeypatch):
  # The original's --tpu_job_name (run_classifier.py, TPUConfig's tpu_job_name) reaches
  # TensorFlow's resolver, whose cluster then calls the TPU's workers by it; without it, by
  # TensorFlow's default name. The TPU is an address that refuses connections, so the strategy
  # stops at the probe, after the resolver is made.
  made = []
  real = tf.distribute.cluster_resolver.TPUClusterResolver

  def recording(*args, **kwargs):
    made.append(real(*args, **kwargs))
    return made[-1]

  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", recording)
  with socket.socket() as closed:
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    for job in ("tpu_worker", None):
      args = resolve_distribution_args(use_tpu=True, tpu_name=f"grpc://127.0.0.1:{port}",
                                       tpu_job_name=job)
      assert args.tpu_job_name == job
      with pytest.raises(BertTfError, match="cannot reach TPU"):
        distribution.get_strategy(**args.strategy_kwargs())
  assert [r.cluster_spec().as_dict() for r in made] == [
      {"tpu_worker": [f"127.0.0.1:{port}"]}, {"worker": [f"127.0.0.1:{port}"]}]


_SUBPROCESS = textwrap.dedent("""
    import socket, sys, time
    from bert_tf.errors import BertTfError
    from bert_tf.training import distribution
    tpu = sys.argv[1]
    if tpu == "silent":  # Accepts connections, never answers.
      server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()
      tpu = "grpc://127.0.0.1:%d" % server.getsockname()[1]
    start = time.monotonic()
    try:
      distribution.get_strategy("tpu", tpu=tpu, tpu_zone="us-east1-d", tpu_timeout_s=3)
    except BertTfError as e:
      print("ERROR", round(time.monotonic() - start, 1), e)
""")


@pytest.mark.parametrize("tpu,message", [
    ("local", "cannot initialise TPU 'local' (zone us-east1-d): no TPU is attached to this "
              "machine (--tpu=local is for the TPU VM itself)"),
    ("silent", "did not answer within 3 s"),
])
def test_tpu_that_does_not_answer_gives_up(tpu, message):
  # A subprocess: connecting to a cluster changes the process-wide TensorFlow context. The
  # process exits despite the stuck connecting thread: a hang is the timeout's error (a bound
  # far above TensorFlow's start on a loaded machine, not a measure of it).
  result = subprocess.run([sys.executable, "-c", _SUBPROCESS, tpu], cwd=REPO, timeout=600,
                          capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  lines = [line for line in result.stdout.splitlines() if line.startswith("ERROR")]
  assert len(lines) == 1, result.stdout + result.stderr
  assert message in lines[0]
  # Seconds inside get_strategy: the 3 s of --tpu_timeout_s, not the 600 s default.
  assert float(lines[0].split()[1]) < GAVE_UP_S
