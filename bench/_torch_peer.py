"""The PyTorch peer of ``bench_model_cpu.py``: Hugging Face transformers ``BertModel`` on CPU.

Run by the driver in its own process with an interpreter that has torch and transformers
(torch is no dependency of bert_tf), e.g. the reference venv:

  /work/refvenv/bin/python bench/_torch_peer.py --config=small --mode=train --batch_size=8

To reproduce elsewhere: ``pip install torch==2.13.0 transformers``. Prints one ``RESULT {json}``
line (see ``_harness.emit``).

On a GPU (the peer of ``bench_pretraining_gpu.py``): ``--device=cuda --compile --dtype=bfloat16``
runs the same step under ``torch.compile`` with bf16 autocast (float32 master weights), fused
AdamW and SDPA attention, synchronizing the device after every ``--steps_per_sync`` steps
(one timed call) so that wall times are the GPU's; ``sequences_per_second`` is over all the
timed calls; the result adds ``peak_gpu_memory_gb`` (bytes allocated at the peak of the timed
steps, warm-up excluded, as bert_tf's is measured) and ``peak_gpu_memory_gb_with_warmup``.

The model is the same BERT as bert_tf's: same sizes, tanh-GELU (``gelu_pytorch_tanh``, the
original's ``gelu``, as one fused kernel), LayerNorm eps 1e-12, dropout 0.1 when training
(``--attention_probs_dropout_prob`` sets the attention's: 0 for the rows where bert_tf runs
with 0, so that both sides do the same work; SDPA then needs no dropout in its kernel).
``mode=infer``: ``BertModel`` (encoder + pooler) in eval mode under ``torch.inference_mode``.
``mode=train``: ``BertModel`` + ``BertPreTrainingHeads`` (decoder tied to the word
embeddings), the MLM head on the gathered masked positions only, loss = the original's
weighted MLM loss + NSP loss; backward; clip to global norm 1.0; ``torch.optim.AdamW``
(lr 1e-4, eps 1e-6, weight decay 0.01 except biases and LayerNorm).
"""

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness  # noqa: E402


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--config", default="small", choices=sorted(_harness.CONFIGS))
  parser.add_argument("--mode", default="infer", choices=["infer", "train"])
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--num_predictions", type=int, default=20)
  parser.add_argument("--min_repeats", type=int, default=3)
  parser.add_argument("--max_repeats", type=int, default=20)
  parser.add_argument("--budget_s", type=float, default=20.0)
  parser.add_argument("--threads", type=int, default=0, help="0: the framework's default")
  parser.add_argument("--device", default="cpu", help="cpu or cuda")
  parser.add_argument("--compile", action="store_true", help="torch.compile the model")
  parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                      help="bfloat16: autocast of the forward pass (weights stay float32)")
  parser.add_argument("--attention_probs_dropout_prob", type=float, default=None,
                      help="the attention probabilities' dropout (default: the config's, "
                           "BERT's 0.1)")
  parser.add_argument("--steps_per_sync", type=int, default=1,
                      help="steps per timed call: the device is synchronized once per call "
                           "(bench_pretraining_gpu.py passes its rows' steps_per_loop, so that "
                           "both sides wait for the GPU equally often)")
  args = parser.parse_args()
  if args.steps_per_sync < 1:
    parser.error(f"--steps_per_sync must be at least 1, got {args.steps_per_sync}")

  import torch  # pylint: disable=import-outside-toplevel
  import torch.nn.functional as F  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  from transformers.models.bert import modeling_bert  # pylint: disable=import-outside-toplevel

  if args.threads:
    torch.set_num_threads(args.threads)
  torch.manual_seed(0)
  c = _harness.config_dict(args.config)
  hf_config = transformers.BertConfig(
      vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
      num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
      intermediate_size=c["intermediate_size"], hidden_act="gelu_pytorch_tanh",
      hidden_dropout_prob=c["hidden_dropout_prob"],
      attention_probs_dropout_prob=(c["attention_probs_dropout_prob"]
                                    if args.attention_probs_dropout_prob is None
                                    else args.attention_probs_dropout_prob),
      max_position_embeddings=c["max_position_embeddings"],
      type_vocab_size=c["type_vocab_size"], initializer_range=c["initializer_range"],
      layer_norm_eps=1e-12)
  batch = _harness.pretraining_batch(c, args.batch_size, args.seq_length, args.num_predictions)
  device = torch.device(args.device)
  t = {k: (torch.from_numpy(v).long() if v.dtype.kind == "i" else torch.from_numpy(v)).to(device)
       for k, v in batch.items()}
  bert = modeling_bert.BertModel(hf_config).to(device)
  cuda = device.type == "cuda"
  autocast = torch.autocast(device.type, dtype=torch.bfloat16,
                            enabled=args.dtype == "bfloat16")
  run_bert = torch.compile(bert) if args.compile else bert

  if args.mode == "infer":
    bert.eval()

    def one_step():
      with torch.inference_mode(), autocast:
        out = run_bert(input_ids=t["input_ids"], attention_mask=t["input_mask"],
                       token_type_ids=t["segment_ids"])
      return out.last_hidden_state, out.pooler_output
  else:
    bert.train()
    heads = modeling_bert.BertPreTrainingHeads(hf_config).to(device)
    heads.predictions.decoder.weight = bert.embeddings.word_embeddings.weight  # tied
    run_heads = torch.compile(heads) if args.compile else heads
    heads.train()
    named = {}
    for prefix, module in (("bert", bert), ("cls", heads)):
      for name, p in module.named_parameters():
        if all(p is not q for q in named.values()):
          named[f"{prefix}.{name}"] = p
    no_decay = [p for n, p in named.items() if "bias" in n or "LayerNorm" in n]
    decay = [p for n, p in named.items() if not ("bias" in n or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-4, eps=1e-6, **({"fused": True} if cuda else {}))
    params = list(named.values())
    h = hf_config.hidden_size

    def one_step():
      with autocast:
        out = run_bert(input_ids=t["input_ids"], attention_mask=t["input_mask"],
                       token_type_ids=t["segment_ids"])
        positions = t["masked_lm_positions"].unsqueeze(-1).expand(-1, -1, h)
        gathered = torch.gather(out.last_hidden_state, 1, positions)  # [B,P,H]
        mlm_logits, nsp_logits = run_heads(gathered, out.pooler_output)
      mlm_logits, nsp_logits = mlm_logits.float(), nsp_logits.float()
      nll = F.cross_entropy(mlm_logits.reshape(-1, mlm_logits.shape[-1]),
                            t["masked_lm_ids"].reshape(-1), reduction="none")
      w = t["masked_lm_weights"].reshape(-1)
      loss = (w * nll).sum() / (w.sum() + 1e-5)
      loss = loss + F.cross_entropy(nsp_logits, t["next_sentence_labels"].reshape(-1))
      loss.backward()
      torch.nn.utils.clip_grad_norm_(params, 1.0)
      optimizer.step()
      optimizer.zero_grad(set_to_none=True)
      return loss

  def step():
    # steps_per_sync steps queued back to back, then one wait for the device (nothing in a
    # step reads a value back to the host).
    for _ in range(args.steps_per_sync):
      out = one_step()
    if cuda:
      torch.cuda.synchronize()
    return out

  warmup_peak = []

  def before_timed():
    # The timed steps' peak, as bench_pretraining_gpu.py measures bert_tf's (compilation and
    # autotuning excluded on both sides); the whole process's peak is kept beside it.
    if cuda:
      torch.cuda.synchronize()
      warmup_peak.append(torch.cuda.max_memory_allocated())
      torch.cuda.reset_peak_memory_stats()

  result = _harness.measure(step, args.min_repeats, args.max_repeats, args.budget_s,
                            before_timed=before_timed)
  result.update(
      framework="hf_torch",
      variant=("transformers BertModel (PyTorch " + ("torch.compile" if args.compile else "eager")
               + (", bf16 autocast" if args.dtype == "bfloat16" else "") + f", {args.device})"),
      device=args.device, compiled=args.compile, dtype=args.dtype,
      num_predictions=args.num_predictions,
      config=args.config, mode=args.mode, batch_size=args.batch_size,
      seq_length=args.seq_length, peak_rss_mb=_harness.peak_rss_mb(),
      versions={"python": platform.python_version(), "torch": torch.__version__,
                "transformers": transformers.__version__},
      threads=torch.get_num_threads(),
      attention_probs_dropout_prob=hf_config.attention_probs_dropout_prob,
      attn_implementation=getattr(bert.config, "_attn_implementation", None),
      steps_per_call=args.steps_per_sync,
      # Over all the timed calls, as bench_pretraining_gpu.py measures bert_tf's rows (slow
      # steps included); median_update_s is the median call's time per step.
      sequences_per_second=(args.batch_size * args.steps_per_sync * len(result["times_s"])
                            / sum(result["times_s"])),
      median_update_s=result["median_s"] / args.steps_per_sync)
  if cuda:
    peak = torch.cuda.max_memory_allocated()
    result["peak_gpu_memory_gb"] = peak / 1e9  # over the timed steps
    result["peak_gpu_memory_gb_with_warmup"] = max([peak] + warmup_peak) / 1e9
    result["gpu_memory_in_use_gb"] = torch.cuda.memory_allocated() / 1e9
    result["gpu_memory_reserved_gb"] = torch.cuda.max_memory_reserved() / 1e9
    result["device_name"] = torch.cuda.get_device_name()
  _harness.emit(result)


if __name__ == "__main__":
  main()
