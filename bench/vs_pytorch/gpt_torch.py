"""brigade's GPT written in plain PyTorch, for bench/vs_pytorch/vs_pytorch.py.

The same model as brigade's (model/gpt_layout.cc, model/gpt.cc): GPT-2 with learned positions,
pre-LayerNorm blocks (eps 1e-5), tanh GELU, causal attention, biases everywhere, the head tied to
wte; initialised as brigade does (normal 0.02, the residual projections 0.02 / sqrt(2 L), biases
0, LayerNorm 1 and 0). AdamW as brigade's: betas (0.9, 0.95), eps 1e-8, decoupled weight decay
0.1 on matrices only, global-norm clipping at 1.0. Attention is the explicit product, mask and
softmax: PyTorch 1.13 (Debian's python3-torch) has no fused CPU attention.

  python3 gpt_torch.py --nproc N --precision f32|bf16 --steps S --vocab V --seq T --d C
      --layers L --heads H --micro-batch B

Prints one JSON line: the per-step seconds of rank 0 (after the DDP all-reduce, so a step is
the job's step) and the last loss. One thread per process (torch.set_num_threads(1)), DDP over
gloo on loopback for N > 1, random tokens (the work does not depend on the values).
"""
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, layers):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        proj_std = 0.02 / math.sqrt(2 * layers)
        for lin, std in ((self.c_attn, 0.02), (self.c_proj, proj_std), (self.c_fc, 0.02),
                         (self.mlp_proj, proj_std)):
            nn.init.normal_(lin.weight, 0.0, std)
            nn.init.zeros_(lin.bias)

    def forward(self, x, mask):
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, seq, d, layers, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe.weight, 0.0, 0.02)
        self.h = nn.ModuleList(Block(d, heads, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # the tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def worker(rank, args, out_path):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if args.nproc > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                                world_size=args.nproc)
    model = Gpt(args.vocab, args.seq, args.d, args.layers, args.heads)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    net = nn.parallel.DistributedDataParallel(model) if args.nproc > 1 else model
    g = torch.Generator().manual_seed(100 + rank)
    times, loss = [], float("nan")
    for _ in range(args.steps):
        idx = torch.randint(0, args.vocab, (args.micro_batch, args.seq), generator=g)
        targets = torch.randint(0, args.vocab, (args.micro_batch, args.seq), generator=g)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if args.precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = net(idx, targets)
        else:
            out = net(idx, targets)
        out.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss = out.item()
        times.append(time.perf_counter() - start)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"step_s": times, "loss": loss,
                       "params": sum(p.numel() for p in model.parameters())}, f)
    if args.nproc > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    for name, default in (("nproc", 1), ("steps", 10), ("vocab", 256), ("seq", 256), ("d", 256),
                          ("layers", 4), ("heads", 4), ("micro_batch", 8), ("port", 29533)):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if args.nproc == 1:
        worker(0, args, args.out)
    else:
        mp.spawn(worker, args=(args, args.out), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main()
