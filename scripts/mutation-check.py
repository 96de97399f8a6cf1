#!/usr/bin/env python3
"""Mutation check of recently changed code: applies each mutant below in turn (one source edit),
runs the tests meant to catch it, restores the file, and prints one JSON line per mutant with the
tests that failed (a mutant no test kills has "rc": 0). Usage: mutation-check.py [INDEX ...].

It edits the working tree while it runs (each file is restored in a `finally`): run it in a
copy of the repository (e.g. `git worktree add`) if you keep working meanwhile. The mutants:
the specialised shape steps (builtins/src/shape_heap/site.rs), the batched and tiled matmul
(builtins/src/tensor_ops/tiled.rs), the trace comparison (tools/src/trace/compare.rs) and the
paged KV cache's bookkeeping (builtins/src/paged_kv_cache/).
"""

import json
import os
import subprocess
import sys
import time

os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MUTANTS = [
    (
        "builtins/src/shape_heap/site.rs",
        "steps.iter().filter_map(slot).map(|s| s + 1).max()",
        "steps.iter().filter_map(slot).map(|s| s).max()",
        "reach: one past the highest slot -> the highest slot",
        ["-p", "relaxvm-builtins", "--lib", "shape_heap"],
    ),
    (
        "builtins/src/shape_heap/site.rs",
        "3 => slot(v).map(Check::EqualSlot),",
        "3 => slot(v).map(Check::Store),",
        "checks: code 3 (assert equal to slot) becomes a store",
        ["-p", "relaxvm-builtins", "--lib", "shape_heap"],
    ),
    (
        "builtins/src/shape_heap/site.rs",
        "                if expected != actual {\n                    return Err(Mismatch { dim, expected });",
        "                if expected != actual {\n                    return Err(Mismatch { dim, expected: actual });",
        "check_all: a slot mismatch reports the actual dimension as expected",
        ["-p", "relaxvm-builtins", "--lib", "shape_heap"],
    ),
    (
        "builtins/src/shape_heap/site.rs",
        "Some(Value::Shape(s)) if s.has_dims(dims) => Value::Shape(s.clone()),",
        "Some(Value::Shape(s)) => Value::Shape(s.clone()),",
        "recent_or_last: the cached shape is returned without comparing its dimensions",
        ["-p", "relaxvm-builtins", "--test", "integration", "make_shape"],
    ),
    (
        "builtins/src/tensor_ops/tiled.rs",
        "let rows = ndarray::Slice::from(row..row + c.nrows());",
        "let rows = ndarray::Slice::from(0..c.nrows());",
        "batched: a tile's rows of the left operand ignore the tile's row offset",
        ["-p", "relaxvm-builtins", "--lib", "tensor_ops"],
    ),
    (
        "builtins/src/tensor_ops/tiled.rs",
        ".map(|(i, data)| Ok(Piece::Whole { first: i * group, data }));",
        ".map(|(i, data)| Ok(Piece::Whole { first: i, data }));",
        "batched: a group of whole results starts at batch i, not i * group",
        ["-p", "relaxvm-builtins", "--lib", "tensor_ops"],
    ),
    (
        "builtins/src/tensor_ops/tiled.rs",
        "for (axis, d) in plan.batch.iter().enumerate().rev() {",
        "for (axis, d) in plan.batch.iter().enumerate() {",
        "batched: batch index decoded from the first axis instead of the last",
        ["-p", "relaxvm-builtins", "--lib", "tensor_ops"],
    ),
    (
        "tools/src/trace/compare.rs",
        "a == b || (a.is_nan() && b.is_nan()) ||",
        "a == b || (a.is_nan() || b.is_nan()) ||",
        "close: NaN agrees with any number",
        ["-p", "relaxvm-builtins", "--test", "integration", "trace::"],
    ),
    (
        "tools/src/trace/compare.rs",
        "let agree = if exact { p == q } else { close(pf, qf, tol) };",
        "let agree = close(pf, qf, tol);",
        "tensor_difference: integers compared with the float tolerance",
        ["-p", "relaxvm-builtins", "--test", "integration", "trace::"],
    ),
    (
        "tools/src/trace/compare.rs",
        "for (slot, d) in at.iter_mut().zip(dims).rev() {",
        "for (slot, d) in at.iter_mut().zip(dims) {",
        "position: the flat index decoded from the first axis",
        ["-p", "relaxvm-builtins", "--test", "integration", "trace::"],
    ),
    (
        "tools/src/trace/compare.rs",
        "returned.sort_by_key(|s| (s.end, std::cmp::Reverse(s.depth)));",
        "returned.sort_by_key(|s| s.index);",
        "first_difference: steps compared in start order instead of return order",
        ["-p", "relaxvm-builtins", "--test", "integration", "trace::"],
    ),
    (
        "builtins/src/paged_kv_cache/pool.rs",
        "free_pages.extend((0..num_total_pages).rev());",
        "free_pages.extend(0..num_total_pages);",
        "paged KV cache: pages handed out from the highest id down instead of from 0 up (TVM's order)",
        ["-p", "relaxvm-builtins", "--lib", "paged_kv_cache"],
    ),
    (
        "builtins/src/paged_kv_cache/pool.rs",
        "self.block_mut(b).refs -= 1;",
        "self.block_mut(b).refs -= 0;",
        "paged KV cache: removing a sequence keeps its reference to the block it shares",
        ["-p", "relaxvm-builtins", "--lib", "paged_kv_cache"],
    ),
    (
        "builtins/src/paged_kv_cache/pool.rs",
        "copy = Some(PageCopy { src, dst, len: in_page });",
        "copy = Some(PageCopy { src, dst, len: self.page_size });",
        "paged KV cache: a mid-page fork copies the whole page instead of its head",
        ["-p", "relaxvm-builtins", "--lib", "paged_kv_cache"],
    ),
    (
        "builtins/src/paged_kv_cache/pool.rs",
        "let tgt = ((len - n + ps - 1) / ps) as usize;",
        "let tgt = ((len - n) / ps) as usize;",
        "paged KV cache: popn frees the partly used last page",
        ["-p", "relaxvm-builtins", "--lib", "paged_kv_cache"],
    ),
    (
        "builtins/src/paged_kv_cache/forward.rs",
        "k_ragged.push(s.seq_length - tree_len);",
        "k_ragged.push(s.seq_length - tree_len + len);",
        "paged KV cache: a step's RoPE offsets taken after the lengths grew",
        ["-p", "relaxvm-builtins", "--lib", "paged_kv_cache"],
    ),
    (
        "builtins/src/paged_kv_cache/tree.rs",
        ".max(order[node].0 + 1);",
        ".max(order[node].0);",
        "paged KV cache: a leaf's mask interval is empty instead of covering itself",
        ["-p", "relaxvm-builtins", "--lib", "paged_kv_cache"],
    ),
    (
        "builtins/src/paged_kv_cache/tree.rs",
        "while !path.is_empty() && path.last() == to.last() {",
        "while !path.is_empty() && path.first() == to.first() {",
        "paged KV cache: a commit keeps copies of nodes already in place (compares the wrong end)",
        ["-p", "relaxvm-builtins", "--lib", "paged_kv_cache"],
    ),
]
only = [int(a) for a in sys.argv[1:]] or range(len(MUTANTS))
for i in only:
    path, old, new, what, args = MUTANTS[i]
    src = open(path).read()
    assert src.count(old) == 1, (i, path, old)
    open(path, "w").write(src.replace(old, new))
    t = time.time()
    try:
        r = subprocess.run(["nice", "-n", "10", "cargo", "test", "--quiet", *args], capture_output=True, text=True)
    finally:
        open(path, "w").write(src)
    out = r.stdout + r.stderr
    failed = [
        line.split()[1] for line in out.splitlines() if line.startswith("test ") and line.rstrip().endswith("FAILED")
    ]
    if not failed:
        failed = [line.strip() for line in out.splitlines() if line.startswith("    ") and "::" in line][:8]
    rec = {
        "i": i,
        "place": path,
        "mutation": what,
        "rc": r.returncode,
        "failing": failed,
        "secs": round(time.time() - t),
    }
    if r.returncode == 0 or (r.returncode != 0 and not failed):
        rec["tail"] = out[-1500:]
    print(json.dumps(rec), flush=True)
