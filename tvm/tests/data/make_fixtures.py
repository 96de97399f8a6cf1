"""Writes the TVM-compiled fixtures the Rust tests of relaxvm-tvm read (committed, so those tests
need no TVM). Run from this folder with Apache TVM 0.27 (the repository's .venv-tvm):

    ../../../.venv-tvm/bin/python make_fixtures.py

mlp.so / mlp.vmexec: y = relu(x @ w + b) with x: (n, 8) float32 (symbolic batch), w: (8, 4) and
b: (4,) constants; mlp_x.bin holds a sample x of shape (3, 8) and mlp_y.bin TVM's output for it
(raw little-endian float32).
"""

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I  # noqa: E741
from tvm.script import relax as R

rng = np.random.default_rng(0)
w = rng.standard_normal((8, 4), dtype="float32")
b = rng.standard_normal((4,), dtype="float32")
wc, bc = relax.const(w), relax.const(b)


@I.ir_module
class Mlp:
    @R.function
    def main(x: R.Tensor(("n", 8), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.add(R.matmul(x, wc), bc))
            R.output(y)
        return y


ex = tvm.compile(Mlp, target="llvm")
ex.export_library("mlp.so")
ex.mod.write_to_file("mlp.vmexec")
x = rng.standard_normal((3, 8), dtype="float32")
vm = relax.VirtualMachine(ex, tvm.cpu())
y = vm["main"](tvm.runtime.tensor(x)).numpy()
x.astype("<f4").tofile("mlp_x.bin")
y.astype("<f4").tofile("mlp_y.bin")
