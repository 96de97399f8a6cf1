"""Builds the suite ``lm_support``: TVM's sampling and logit builtins (``lm_support.cc``) on seeded
random inputs, with TVM's results, for ``tests/test_tvm_lm_support.py`` to compare bit for bit.

Run with Apache TVM 0.27 (``.venv-tvm``): ``build_lm_support.py OUT_DIR`` writes
``OUT_DIR/lm_support/``. A case is one call: the builtin's name, its arguments, and TVM's outcome —
the returned value and every tensor argument after the call (the penalties and the softmax write
in place), or TVM's error. Inputs cover ties (small integers as logits, equal probabilities), ±inf,
NaN, extreme and zero temperatures, vocabularies of 1 to 32,000 and several leading shapes.

A NaN scalar argument keeps its bits in the case's ``nan_args`` (the corpus format writes NaN as
"nan"). Calls whose inputs hold NaN run in a child process, one after the other, because libstdc++'s
``std::sort`` with ``>`` on NaN may read outside the vector: a case that kills the child is
recorded as ``"crashed"`` and the child starts again at the next case. Calls where TVM reads outside
its inputs by construction (token ids past the logits, float64 samples, 0-d tensors) are not run on
TVM: relaxvm refuses them (docs/tvm-compat.md), which ``tests/test_tvm_lm_support.py`` checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

SUITE = "lm_support"
RNG = np.random.default_rng(20261127)
F = np.float32


def logits_of(kind: str, v: int) -> np.ndarray:
    """A logit row of `v` entries of one kind."""
    if kind == "normal":
        return RNG.standard_normal(v).astype(F) * F(3)
    if kind == "ties":
        return RNG.integers(-2, 3, size=v).astype(F)
    if kind == "equal":
        return np.full(v, 0.5, F)
    if kind == "inf":
        x = RNG.standard_normal(v).astype(F)
        x[RNG.integers(0, v, size=max(1, v // 8))] = np.inf
        x[RNG.integers(0, v, size=max(1, v // 8))] = -np.inf
        return x
    if kind == "neginf":
        x = np.full(v, -np.inf, F)
        x[RNG.integers(0, v)] = 0.0
        return x
    if kind == "nan":
        x = RNG.standard_normal(v).astype(F)
        x[RNG.integers(0, v, size=max(1, v // 6))] = np.nan
        return x
    if kind == "nans":
        # NaNs of both signs, with payloads, quiet and signalling, among infinities and numbers:
        # which NaN an operation returns is x86's rule, which the builtins must follow.
        x = RNG.standard_normal(v).astype(F)
        special = np.array([0x7FC00000, 0xFFC00000, 0x7FA00001, 0xFFC12345, 0x7F800000, 0xFF800000], "uint32")
        where = RNG.random(v) < 0.4
        x[where] = special[RNG.integers(0, len(special), size=int(where.sum()))].view(F)
        return x
    if kind == "negative":
        return -np.abs(RNG.standard_normal(v).astype(F)) * F(1e-30)
    if kind == "huge":
        return RNG.standard_normal(v).astype(F) * F(1e30)
    raise ValueError(kind)


def prob_of(kind: str, v: int) -> np.ndarray:
    """A probability row of `v` entries of one kind."""
    if kind == "softmax":
        x = RNG.standard_normal(v).astype(F) * F(2)
        e = np.exp(x - x.max())
        return (e / e.sum()).astype(F)
    if kind == "ties":
        x = RNG.integers(1, 4, size=v).astype(F)
        return (x / x.sum()).astype(F)
    if kind == "uniform":
        return np.full(v, F(1) / F(v), F)
    if kind == "peaked":
        x = np.full(v, F(1e-7), F)
        x[RNG.integers(0, v)] = F(1) - F(1e-7) * F(v - 1)
        return x
    if kind == "zeros":
        x = np.zeros(v, F)
        x[RNG.integers(0, v)] = F(0.5)
        return x
    if kind == "negative":
        return -np.abs(RNG.standard_normal(v).astype(F))
    if kind == "nan":
        x = prob_of("softmax", v)
        x[RNG.integers(0, v, size=max(1, v // 5))] = np.nan
        return x
    if kind == "allnan":
        return np.full(v, np.nan, F)
    raise ValueError(kind)


VOCABS = [1, 2, 3, 5, 16, 17, 31, 64, 100, 257, 1000]
LEAD = [(), (1,), (1, 1)]


def cases() -> list[tuple[str, list[Any]]]:
    """Every call of the suite: (builtin, args) with numpy arrays for tensors."""
    out: list[tuple[str, list[Any]]] = []
    temps = [0.0, 1e-7, float(F(1e-6)), 1e-6, 1e-3, 0.5, 0.7, 1.0, 2.0, 100.0, 1e30, -1.0, float("nan")]
    top_ps = [0.0, 0.1, 0.5, 0.9, 0.95, 1.0, 1.5]
    kinds = ["normal", "ties", "equal", "inf", "neginf", "negative", "huge", "nan"]
    for v in VOCABS + [32000]:
        for kind in kinds:
            for _ in range(3 if v < 32000 else 1):
                lead = LEAD[RNG.integers(0, 3)]
                x = logits_of(kind, v).reshape(lead + (v,))
                t = temps[RNG.integers(0, len(temps))]
                p = top_ps[RNG.integers(0, len(top_ps))]
                u = float(RNG.choice([RNG.random(), 0.0, 0.999999, 1.0, 0.5]))
                out.append(("vm.builtin.sample_top_p_from_logits", [x, t, p, u]))
    # TVM's own refusal: leading dimensions other than 1.
    out.append(("vm.builtin.sample_top_p_from_logits", [logits_of("normal", 8).reshape(2, 4), 1.0, 0.9, 0.5]))

    pkinds = ["softmax", "ties", "uniform", "peaked", "zeros", "negative", "nan", "allnan"]
    for v in VOCABS + [32000]:
        for kind in pkinds:
            for _ in range(3 if v < 32000 else 1):
                lead = LEAD[RNG.integers(0, 3)]
                x = prob_of(kind, v).reshape(lead + (v,))
                p = top_ps[RNG.integers(0, len(top_ps))]
                u = float(RNG.choice([RNG.random(), 0.0, 0.999999, 0.3]))
                out.append(("vm.builtin.sample_top_p_from_prob", [x, p, u]))
    out.append(("vm.builtin.sample_top_p_from_prob", [np.zeros(0, F), 0.9, 0.5]))
    out.append(("vm.builtin.sample_top_p_from_prob", [prob_of("softmax", 8).reshape(2, 4), 0.9, 0.5]))

    for batch in [0, 1, 2, 4]:
        for v in [1, 3, 17, 1000]:
            for kind in ["softmax", "ties", "zeros", "nan"]:
                x = np.stack([prob_of(kind, v) for _ in range(batch)]) if batch else np.zeros((0, v), F)
                u = RNG.random((batch, 1)).astype(F)
                if batch:
                    u[0, 0] = F(RNG.choice([0.0, 0.999999, 1.0, u[0, 0]]))
                out.append(("vm.builtin.multinomial_from_uniform", [x, u]))

    neg_nan = float(np.array([0xFFF8000000000123], "uint64").view("float64")[0])
    penalties = [1.0, 1.1, 2.0, 0.5, 0.0, -1.5, float("inf"), float("nan"), neg_nan]
    for v in [1, 5, 100, 32000]:
        for kind in ["normal", "ties", "inf", "nan", "negative", "nans", "nans"]:
            n = int(RNG.integers(0, min(v, 20) + 1))
            ids = RNG.integers(0, v, size=n).astype("int32")  # duplicates included
            lead = LEAD[RNG.integers(0, 2)]
            x = logits_of(kind, v).reshape(LEAD[RNG.integers(0, 3)] + (v,))
            out.append(
                (
                    "vm.builtin.apply_repetition_penalty",
                    [x, ids.reshape(lead + (n,)), penalties[RNG.integers(0, len(penalties))]],
                )
            )
            freqs = RNG.integers(1, 5, size=n).astype("int32")
            pres = float(RNG.choice([0.0, 0.5, -0.25, 1e-3, 1e10, float("inf"), float("nan"), neg_nan]))
            freq = float(RNG.choice([0.0, 0.1, 1.0, -2.0, 1.5e-7, float("-inf"), float("nan"), neg_nan]))
            out.append(
                (
                    "vm.builtin.apply_presence_and_frequency_penalty",
                    [logits_of(kind, v), ids.reshape(lead + (n,)), freqs.reshape(lead + (n,)), pres, freq],
                )
            )
    # Both operands NaN, of opposite signs: which one the result carries is the operand order.
    pos_nan = float("nan")
    for logit_bits in [0x7FC00000, 0xFFC00000, 0x7FA00001, 0x3F800000, 0xBF800000]:
        for p in [pos_nan, neg_nan, 2.0]:
            x = np.array([logit_bits] * 4, "uint32").view(F).copy()
            ids = np.array([0, 2, 3], "int32")
            out.append(("vm.builtin.apply_repetition_penalty", [x, ids, p]))
            for pres in [pos_nan, neg_nan, 0.5]:
                freqs = np.array([1, 2, 3], "int32")
                out.append(("vm.builtin.apply_presence_and_frequency_penalty", [x.copy(), ids, freqs, pres, p]))
    for v in [0, 1, 2, 7, 100, 1000, 32000]:
        for kind in kinds + ["nans", "nans"]:
            if v == 0 and kind != "normal":
                continue
            for t in [1.0, 0.5, 2.0, 1e-3, 0.0, 1e6, -1.0, 0.7, float("inf"), neg_nan]:
                if v >= 1000 and t not in (1.0, 0.7):
                    continue
                x = logits_of(kind, v) if v else np.zeros(0, F)
                out.append(
                    ("vm.builtin.apply_softmax_with_temperature", [x.reshape(LEAD[RNG.integers(0, 3)] + (v,)), t])
                )
    return out


def nan_bits(args: list[Any]) -> dict[str, str]:
    """The bits of the NaN scalars among `args`, by position: the corpus stores a NaN float as
    "nan", losing its sign and payload, which the builtins must propagate as TVM does."""
    return {
        str(i): hex(int(np.array(a, "float64").view("uint64")))
        for i, a in enumerate(args)
        if isinstance(a, float) and a != a
    }


def with_nan_bits(args: list[Any], bits: dict[str, str]) -> list[Any]:
    """`args` with the NaN scalars of `bits` (see `nan_bits`) restored."""
    args = list(args)
    for i, b in bits.items():
        args[int(i)] = float(np.array(int(b, 16), "uint64").view("float64"))
    return args


def has_nan(args: list[Any]) -> bool:
    return any(isinstance(a, np.ndarray) and a.dtype.kind == "f" and np.isnan(a).any() for a in args)


def run_case(name: str, args: list[Any]) -> dict:
    """Calls the builtin on TVM; returns the outcome as stored in the manifest (plus arrays)."""
    import tvm

    tensors = [tvm.runtime.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    try:
        ret = tvm.get_global_func(name)(*tensors)
    except Exception as e:  # noqa: BLE001 - TVM's error is the recorded outcome
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[-1][:300]}"}
    if hasattr(ret, "numpy"):
        ret = ret.numpy()
    after = tuple(t.numpy() for t in tensors if hasattr(t, "numpy"))
    return {"result": (ret, after)}


def child(path: str) -> None:
    """Runs the cases in `path` (an npz of arguments per case, indexed), appending one line of
    JSON per finished case to `path + '.out'` and the arrays to `path + '.<k>.npz'`."""
    with open(path + ".json") as f:
        todo = json.load(f)
    with open(path + ".out", "a") as log:
        for k, entry in todo:
            with np.load(f"{path}.{k}.in.npz") as z:
                tensors = [z[f"t{i}"] for i in range(len(z.files))]
            args = with_nan_bits(list(corpus.unflatten(entry["args"], tensors)), entry["nan_args"])
            outcome = run_case(entry["function"], args)
            if "result" in outcome:
                arrays: list[np.ndarray] = []
                outcome["result"] = corpus.flatten(outcome["result"], arrays)
                np.savez(f"{path}.{k}.out.npz", **{f"t{i}": a for i, a in enumerate(arrays)})
            log.write(json.dumps([k, outcome]) + "\n")
            log.flush()


def run_isolated(workdir: str, items: list[tuple[int, str, list[Any]]]) -> dict[int, dict]:
    """Runs `items` in child processes; a child that dies leaves its case "crashed"."""
    base = os.path.join(workdir, "nan")
    todo = []
    for k, name, args in items:
        arrays: list[np.ndarray] = []
        todo.append([k, {"function": name, "args": corpus.flatten(list(args), arrays), "nan_args": nan_bits(args)}])
        np.savez(f"{base}.{k}.in.npz", **{f"t{i}": a for i, a in enumerate(arrays)})
    results: dict[int, dict] = {}
    while todo:
        with open(base + ".json", "w") as f:
            json.dump(todo, f)
        if os.path.exists(base + ".out"):
            os.remove(base + ".out")
        subprocess.run([sys.executable, __file__, "--child", base], check=False, timeout=600)
        done = []
        if os.path.exists(base + ".out"):
            with open(base + ".out") as f:
                done = [json.loads(line) for line in f]
        for k, outcome in done:
            if "result" in outcome:
                with np.load(f"{base}.{k}.out.npz") as z:
                    arrays = [z[f"t{i}"] for i in range(len(z.files))]
                outcome = {"result": corpus.unflatten(outcome["result"], arrays)}
            results[k] = outcome
        finished = {k for k, _ in done}
        rest = [t for t in todo if t[0] not in finished]
        if rest and len(done) < len(todo):
            results[rest[0][0]] = {"crashed": True}
            rest = rest[1:]
        todo = rest
    return results


def main() -> None:
    if sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    import tvm

    out_dir = os.path.join(sys.argv[1], SUITE)
    os.makedirs(out_dir, exist_ok=True)
    all_cases = cases()
    outcomes: dict[int, dict] = {}
    nan_items = []
    for k, (name, args) in enumerate(all_cases):
        if has_nan(args):
            nan_items.append((k, name, args))
        else:
            outcomes[k] = run_case(name, args)
    outcomes.update(run_isolated(out_dir, nan_items))
    for f in os.listdir(out_dir):
        if f.startswith("nan."):
            os.remove(os.path.join(out_dir, f))
    entries = []
    for k, (name, args) in enumerate(all_cases):
        o = outcomes[k]
        file = f"cases/{k}.npz"
        if "crashed" in o:
            entry = corpus.save_case(out_dir, file, name, args, error="crashed")
            entry["crashed"] = True
        elif "error" in o:
            entry = corpus.save_case(out_dir, file, name, args, error=o["error"])
        else:
            entry = corpus.save_case(out_dir, file, name, args, result=o["result"])
        if nan_bits(args):
            entry["nan_args"] = nan_bits(args)
        entries.append(entry)
    counts: dict[str, int] = {}
    for e in entries:
        counts[e["function"]] = counts.get(e["function"], 0) + 1
    corpus.write_manifest(out_dir, {"suite": SUITE, "tvm_version": tvm.__version__, "cases": entries, "counts": counts})
    crashed = sum(1 for e in entries if e.get("crashed"))
    errors = sum(1 for e in entries if "error" in e and not e.get("crashed"))
    print(f"{SUITE}: {len(entries)} calls ({errors} TVM errors, {crashed} TVM crashes) into {out_dir}")


if __name__ == "__main__":
    main()
