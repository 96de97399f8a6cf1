"""Regenerates the TVM tensor-cache fixtures and TVM's own loaded values.

Run from this directory with the TVM test venv:  ../../../../.venv-tvm/bin/python gen.py
Writes raw/ (format "raw", one shard per tensor: shard_cap_mb=0), bf16/ (the default
"f32-to-bf16", one shard) and expected_{raw,bf16}.txt: one line per tensor as TVM 0.27's
vm.builtin.tensor_cache.load + .get give it: "name dtype shape hex-of-the-bytes".
"""

import contextlib
import io
import os

import ml_dtypes
import numpy as np
import tvm
from tvm.contrib import tvmjs

PARAMS = {
    "param_0": np.array([[1.0, 1 / 3, -0.0], [1e-3, 3.0e38, -65504.5]], dtype="float32"),
    "param_1": np.arange(-3, 3, dtype="int8").reshape(2, 3),
    "param_2": np.array([0.5, -2.25, 1e-4], dtype="float16"),
    "param_3": np.array([True, False, True]),
    "param_4": np.array(1234567890123, dtype="int64"),
    "param_5": np.array([1.5, -0.1], dtype=ml_dtypes.bfloat16),
}


def main():
    load = tvm.get_global_func("vm.builtin.tensor_cache.load")
    get = tvm.get_global_func("vm.builtin.tensor_cache.get")
    clear = tvm.get_global_func("vm.builtin.tensor_cache.clear")
    for sub, fmt, cap in [("raw", "raw", 0), ("bf16", "f32-to-bf16", 32)]:
        with contextlib.redirect_stdout(io.StringIO()):
            tvmjs.dump_tensor_cache(PARAMS, sub, encode_format=fmt, shard_cap_mb=cap, show_progress=False)
        clear()
        load(sub, 1, 0)
        with open(f"expected_{sub}.txt", "w") as out:
            for name in PARAMS:
                t = get(name)
                shape = "x".join(str(d) for d in t.shape) or "scalar"
                out.write(f"{name} {t.dtype} {shape} {t.numpy().tobytes().hex()}\n")
        b16 = os.path.join(sub, "tensor-cache-b16.json")
        if os.path.exists(b16):
            os.remove(b16)  # not read by the runtime loader


if __name__ == "__main__":
    main()
