"""A tiny Llama compiled by TVM, run by relaxvm alone: prefill a prompt, decode token by token,
fork the sequence into several that share its prefix and decode them as one batch, sampling
greedily and with top-p.

    python examples/llm.py [MODEL_DIR]

MODEL_DIR (default ``tiny-llama/``) holds ``model.so`` and ``params.npz``; when it does not, this
script first compiles them with TVM by running ``examples/llm_model.py`` in ``.venv-tvm`` (or the
Python ``--tvm-python`` names). Everything after that is relaxvm: TVM is not imported. See
docs/llm.md for the protocol the calls below follow.
"""

from __future__ import annotations

import argparse
import os
import subprocess

import numpy as np

import relaxvm as rx

HERE = os.path.dirname(os.path.abspath(__file__))

add_sequence = rx.get_global_func("vm.builtin.kv_state_add_sequence")
fork_sequence = rx.get_global_func("vm.builtin.kv_state_fork_sequence")
remove_sequence = rx.get_global_func("vm.builtin.kv_state_remove_sequence")
begin_forward = rx.get_global_func("vm.builtin.kv_state_begin_forward")
end_forward = rx.get_global_func("vm.builtin.kv_state_end_forward")
sample_top_p = rx.get_global_func("vm.builtin.sample_top_p_from_logits")


class TinyLlama:
    """The compiled model, its weights and one paged KV cache."""

    def __init__(self, model_dir: str, max_batch: int = 4, max_tokens: int = 512, chunk: int = 64):
        self.vm = rx.VirtualMachine(rx.load_module(os.path.join(model_dir, "model.so")), rx.cpu())
        with np.load(os.path.join(model_dir, "params.npz")) as z:
            self.params = [rx.tensor(z[f"p{i}"]) for i in range(len(z.files))]
        # Each argument is a one-element shape; page size 16, no sliding window.
        sizes = [max_batch, max_tokens, chunk, 16, 0]
        self.cache = self.vm["create_paged_kv_cache"](*[rx.Shape([s]) for s in sizes])

    def forward(self, seq_ids: list[int], tokens: list[list[int]]) -> np.ndarray:
        """One step: the new tokens of each sequence in; each sequence's last logits out."""
        begin_forward(self.cache, rx.Shape(seq_ids), rx.Shape([len(t) for t in tokens]))
        ids = np.array([t for ts in tokens for t in ts], dtype="int32")
        emb = self.vm["embed"](rx.tensor(ids), self.params).numpy()
        hidden = emb.shape[-1]
        if all(len(t) == 1 for t in tokens) and len(seq_ids) > 1:
            logits, self.cache = self.vm["batch_decode"](
                rx.tensor(emb.reshape(len(seq_ids), 1, hidden)), self.cache, self.params
            )
        elif len(ids) == 1:
            logits, self.cache = self.vm["decode"](rx.tensor(emb.reshape(1, 1, hidden)), self.cache, self.params)
        else:
            logits, self.cache = self.vm["prefill"](
                rx.tensor(emb.reshape(1, len(ids), hidden)), self.cache, self.params
            )
        end_forward(self.cache)
        rows = logits.numpy().reshape(-1, logits.shape[-1])
        ends = np.cumsum([len(t) for t in tokens]) - 1
        return rows[ends]  # the last position of each sequence


def sample(logits: np.ndarray, rng: np.random.Generator, temperature: float = 0.0, top_p: float = 1.0) -> int:
    """A token from one row of logits with TVM's sampler (temperature 0: greedy)."""
    return int(sample_top_p(rx.tensor(np.ascontiguousarray(logits)), temperature, top_p, float(rng.random())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", nargs="?", default="tiny-llama")
    ap.add_argument("--tvm-python", default=os.path.join(HERE, "..", ".venv-tvm", "bin", "python"))
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.model_dir, "model.so")):
        print(f"compiling the model with TVM ({args.tvm_python}) into {args.model_dir}/")
        subprocess.run([args.tvm_python, os.path.join(HERE, "llm_model.py"), args.model_dir], check=True)

    llm = TinyLlama(args.model_dir)
    rng = np.random.default_rng(0)
    prompt = [5, 17, 42, 8, 23, 4, 61, 30, 9, 11, 2, 77, 3, 14, 50, 6, 19, 1]  # 18 tokens: one page and a bit

    # 1. Prefill the prompt of sequence 0, then decode greedily, token by token.
    add_sequence(llm.cache, 0)
    last = llm.forward([0], [prompt])[0]
    greedy = []
    for _ in range(args.steps):
        greedy.append(sample(last, rng))
        last = llm.forward([0], [[greedy[-1]]])[0]
    print("greedy:         ", greedy)
    print(llm.cache)

    # 2. Fork sequence 0 at the end of the prompt (mid-page: position 18) into three sequences
    #    that share the prompt's pages, then decode all four as one batch with top-p sampling.
    seqs = [0, 1, 2, 3]
    for child in seqs[1:]:
        fork_sequence(llm.cache, 0, child, len(prompt))
    lasts = {0: last}
    for child in seqs[1:]:
        lasts[child] = llm.forward([child], [[greedy[0]]])[0]  # each branch's first token
    outputs: dict[int, list[int]] = {s: [] for s in seqs}
    for _ in range(args.steps):
        step = [sample(lasts[s], rng, temperature=0.8, top_p=0.9) for s in seqs]
        rows = llm.forward(seqs, [[t] for t in step])
        for s, t, row in zip(seqs, step, rows):
            outputs[s].append(t)
            lasts[s] = row
    for s in seqs:
        print(f"top-p, sequence {s}:", outputs[s])
    print(llm.cache)
    for s in seqs[1:]:
        remove_sequence(llm.cache, s)
    print(llm.cache)


if __name__ == "__main__":
    main()
