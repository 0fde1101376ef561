"""Three worker processes on 127.0.0.1 (multi_worker_mirrored) over two input files: fewer
files than workers is no error, the records are sharded (with a log line saying so), and the
updates are those of one process over the same global batches (dropout off)."""

from tests.training import multi_worker as mw


def test_three_workers_two_files_make_the_single_process_updates(tmp_path, uncased_vocab):
  work = mw.pretraining_workdir(tmp_path, uncased_vocab, num_files=2)
  steps = 4
  (work / "tmp").mkdir()
  with mw.single_beside(
      mw.pretraining_command(work, work / "single", strategy="default", steps=steps), work):
    outputs = mw.run_workers(
        [mw.pretraining_command(work, work / "three", steps=steps)] * 3, work, work / "tmp")
  mw.assert_weights_close(mw.checkpoint_weights(str(work / "three" / f"ckpt-{steps}")),
                          mw.checkpoint_weights(str(work / "single" / f"ckpt-{steps}")),
                          atol=1e-5)
  assert mw.written_files(work / "three") == mw.written_files(work / "single")
  assert list((work / "tmp").glob("bert_tf-*")) == []
  assert ("input: 2 file(s) read in the same order by each of 3 input pipelines, sharded by "
          "record (pipeline i keeps records i, i+3, ...)") in outputs[0]
  assert "input pipelines" not in outputs[1] + outputs[2]  # the chief's pipeline logs it
