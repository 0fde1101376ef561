"""run_pretraining.py with --distribution_strategy=multi_worker_mirrored: 2 worker processes
on 127.0.0.1 sharing a TF_CONFIG make the same updates as one process over the same global
batches (dropout off), and only the chief writes. (Killed jobs: test_multi_worker_resume.py.)"""

import os

import pytest

from tests.training import multi_worker as mw


@pytest.fixture(scope="module")
def work(tmp_path_factory, uncased_vocab):
  return mw.pretraining_workdir(tmp_path_factory.mktemp("mw_pretraining"), uncased_vocab)


@pytest.fixture(scope="module")
def two_workers(work):
  """The 2-worker run, and beside it the single-process run (``work / "single"``)."""
  out, tmp = work / "two", work / "two_tmp"
  tmp.mkdir()
  with mw.single_beside(mw.pretraining_command(work, work / "single", strategy="default"),
                        work):
    outputs = mw.run_workers([mw.pretraining_command(work, out)] * 2, work, tmp)
  return {"out": out, "tmp": tmp, "outputs": outputs}


@pytest.fixture(scope="module")
def single(work, two_workers):
  del two_workers  # it runs the single process too
  return work / "single"


def test_two_workers_make_the_single_process_updates(single, two_workers):
  for step in (2, mw.STEPS):
    one = mw.checkpoint_weights(str(single / f"ckpt-{step}"))
    mw.assert_weights_close(mw.checkpoint_weights(str(two_workers["out"] / f"ckpt-{step}")),
                            one, atol=1e-5)
  # Not vacuous: the updates move the weights far more than the tolerance.
  first = mw.checkpoint_weights(str(single / "ckpt-2"))
  last = mw.checkpoint_weights(str(single / f"ckpt-{mw.STEPS}"))
  assert max(abs(first[k] - last[k]).max() for k in first) > 1e-3


def test_only_the_chief_writes(single, two_workers):
  # The chief's output directory holds exactly what one process writes; the other worker's
  # temporary checkpoint directory is gone.
  assert mw.written_files(two_workers["out"]) == mw.written_files(single)
  assert os.listdir(two_workers["tmp"]) == []
  chief, other = two_workers["outputs"]
  for output in (chief, other):
    assert f"step {mw.STEPS}/{mw.STEPS} loss" in output
  # Two files over two workers: every pipeline reads both, in the seeded order.
  assert ("input: 2 file(s) read in the same order by each of 2 input pipelines, sharded by "
          "record") in chief
