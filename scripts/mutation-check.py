#!/usr/bin/env python3
"""Mutation check of recently changed code: applies each mutant below in turn (one source edit),
runs the tests meant to catch it, restores the file, and prints one JSON line per mutant with the
tests that failed (a mutant no test kills has "rc": 0). Usage: mutation-check.py [INDEX ...].

It edits the working tree while it runs (each file is restored in a `finally`): run it in a
copy of the repository (e.g. `git worktree add`) if you keep working meanwhile. The mutants:
the specialised shape steps (builtins/src/shape_heap/site.rs), the batched and tiled matmul
(builtins/src/tensor_ops/tiled.rs), the trace comparison (tools/src/trace/compare.rs) and the
paged KV cache's bookkeeping (builtins/src/paged_kv_cache/); stop 40's pooled allocation
(builtins/src/site_alloc.rs, core/src/tensor/pooled.rs), the sliding window's first row
(builtins/src/paged_kv_cache/sliding_mask.rs), observed calls (vm/src/vm/mod.rs), compiled mode's
handle cache and cell stamps (tvm/src/vmtir, core/src/registry.rs's located lookups), the
rules of scripts/error-coverage.py and error-coverage-sites.py (whose tests run under pytest),
the TVM readers' field record and count check (tvm/src/vmexec/bytes.rs), and a format reader's
field names (isa/src/format/instructions.rs).
"""

import json
import os
import subprocess
import sys
import time

os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The Python that runs the pytest mutants' tests (the repository's venv, else this one).
PYTHON = ".venv/bin/python" if os.path.exists(".venv/bin/python") else sys.executable
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
        "return a.is_nan() && b.is_nan();",
        "return a.is_nan() || b.is_nan();",
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
    # Stop 40's code: pooled allocation reuse (site_alloc.rs, core's tensor/pooled.rs), the
    # sliding-window first row, observed calls, and the rules of scripts/error-coverage.py (run by
    # pytest: a first argument "pytest").
    (
        "builtins/src/site_alloc.rs",
        "            && Tensor::site_storage_is_free(caches, own)\n",
        "",
        "site alloc: a site hands out its last storage while something else still holds it",
        ["-p", "relaxvm-builtins", "--lib", "site_alloc"],
    ),
    (
        "builtins/src/site_alloc.rs",
        "(reuse == Reuse::AsLeft || s.write_with(|b| b.fill(0)).is_ok())",
        "(reuse == Reuse::AsLeft || s.write_with(|_| ()).is_ok())",
        "site alloc: reused storage is not zeroed",
        ["-p", "relaxvm-builtins", "--lib", "site_alloc"],
    ),
    (
        "builtins/src/shape_heap.rs",
        "if same && t.is_sole() && s.is_sole() {",
        "if same && t.is_sole() {",
        "shape heap: a site's own heap is reused while its storage is held elsewhere",
        ["-p", "relaxvm-builtins", "--lib", "shape_heap"],
    ),
    (
        "core/src/tensor/pooled.rs",
        "                check_view(storage, byte_offset, shape, None, dtype)?;\n",
        "",
        "pooled header: a kept header is made into a view without the checks from_parts makes",
        ["-p", "relaxvm-core", "--lib", "tensor::pooled"],
    ),
    (
        "core/src/tensor/pooled.rs",
        "        && inner.byte_offset == byte_offset\n",
        "",
        "pooled header: the same-view fast path ignores a changed offset (an unchecked view)",
        ["-p", "relaxvm-core", "--lib", "tensor::pooled"],
    ),
    (
        "core/src/tensor/pooled.rs",
        "        && inner.dtype == dtype\n",
        "",
        "pooled header: the same-view fast path ignores a changed dtype (an unchecked view)",
        ["-p", "relaxvm-core", "--lib", "tensor::pooled"],
    ),
    (
        "core/src/tensor/pooled.rs",
        "        if inner.storage.is_sole() {\n            return;",
        "        if !inner.storage.is_sole() {\n            return;",
        "pooled header: a free header lets go of its own storage and keeps shared storage",
        ["-p", "relaxvm-core", "--lib", "tensor::pooled"],
    ),
    (
        "core/src/value/site_views.rs",
        "if i == u16::MAX || last.is_some_and(|l| i <= l) || !views(usize::from(i)) {",
        "if i == u16::MAX || !views(usize::from(i)) {",
        "site views hint: a site the hint names twice counts as two of the storage's holders",
        ["-p", "relaxvm-core", "--lib", "value::site_views"],
    ),
    (
        "builtins/src/paged_kv_cache/sliding_mask.rs",
        "let shift = c.kv_len(b, ps) - window + 1;",
        "let shift = c.kv_len(b, ps) - window;",
        "sliding first row: the shift one column short (row 0's first column stays masked)",
        ["-p", "relaxvm-builtins", "--lib", "sliding_mask"],
    ),
    (
        "builtins/src/paged_kv_cache/sliding_mask.rs",
        "    c.k_rope_pos_offset[b] += shift;\n",
        "",
        "sliding first row: the window moves but the RoPE offset does not",
        ["-p", "relaxvm-builtins", "--lib", "sliding_mask"],
    ),
    (
        "builtins/src/paged_kv_cache/sliding_mask.rs",
        "c.qo_indptr[b + 1] > c.qo_indptr[b] && c.kv_len(b, ps) > 0)",
        "c.qo_indptr[b + 1] > c.qo_indptr[b])",
        "sliding first row: a row without cached columns is taken as the first visited",
        ["-p", "relaxvm-builtins", "--lib", "sliding_mask"],
    ),
    (
        "builtins/src/paged_kv_cache/sliding_mask.rs",
        "if shift <= 0 || c.sink_size[b] > 0 {",
        "if shift <= 0 {",
        "sliding first row: a row with an attention sink is moved (skipping tokens after the sink)",
        ["-p", "relaxvm-builtins", "--lib", "sliding_mask"],
    ),
    (
        "vm/src/vm/mod.rs",
        "Result<Value> {\n        self.native_call(name, f, args, None)\n    }\n\n    fn program_lists",
        "Result<Value> {\n        self.call_closure(f, args)\n    }\n\n    fn program_lists",
        "observed calls: a builtin's observed call is not seen by the profiler and the instrument",
        ["-p", "relaxvm", "--test", "builtin_calls"],
    ),
    # Compiled mode's handle cache and its recycled cells (tvm/src/vmtir).
    (
        "tvm/src/vmtir/handles.rs",
        "            if r.generation == generation {",
        "            if r.generation <= generation {",
        "compiled mode: a handle resolved before the registry changed is used after the change",
        ["-p", "relaxvm-tvm", "--lib", "vmtir"],
    ),
    (
        "tvm/src/vmtir/cells.rs",
        "        self.live && self.stamp == a.small_str_len\n",
        "        self.live\n",
        "compiled mode: a cell is found by its address alone, whatever run's stamp the value carries",
        ["-p", "relaxvm-tvm", "--lib", "vmtir"],
    ),
    (
        "tvm/src/vmtir/cells.rs",
        "        self.live && self.stamp == a.small_str_len\n",
        "        self.stamp == a.small_str_len\n",
        "compiled mode: a released cell is still found at its address",
        ["-p", "relaxvm-tvm", "--lib", "vmtir::cells"],
    ),
    (
        "tvm/src/vmtir/cells.rs",
        "offset.is_multiple_of(size).then_some(",
        "true.then_some(",
        "compiled mode: an address inside a cell is taken for the cell",
        ["-p", "relaxvm-tvm", "--lib", "vmtir::cells"],
    ),
    (
        "core/src/registry.rs",
        "    if generation() != at.generation {\n        return None;",
        "    if false {\n        return None;",
        "registry: a located function is found at its old position after the registry changed",
        ["-p", "relaxvm-core", "--lib", "registry"],
    ),
    (
        "scripts/error-coverage.py",
        "return [group for group in sites.values() if len(group) > 1]",
        "return [group for group in sites.values() if len(group) > 2]",
        "error coverage: one message text at two sites of a crate is not a finding",
        ["pytest", "tests/test_error_coverage_rules.py"],
    ),
    (
        "scripts/error-coverage.py",
        "        unique.setdefault(at, msg)",
        "        unique.setdefault((msg.line, msg.fragment), msg)",
        "error coverage: a message wrapped in two calls on two lines counts as two sites",
        ["pytest", "tests/test_error_coverage_rules.py"],
    ),
    (
        "scripts/error-coverage.py",
        'sites.setdefault((m.path.split("/", 1)[0], printed(m.text)), []).append(m)',
        'sites.setdefault((m.path.split("/", 1)[0], m.text), []).append(m)',
        "error coverage: two sites whose texts differ only in a placeholder's name are not a finding",
        ["pytest", "tests/test_error_coverage_rules.py"],
    ),
    (
        "scripts/error-coverage.py",
        "if everything.count(w.strip()) == mine.count(w.strip())}",
        "if everything.count(w) == mine.count(w)}",
        "error coverage: a window is compared with its end spaces (a shared phrase after a placeholder counts)",
        ["pytest", "tests/test_error_coverage_rules.py"],
    ),
    (
        "scripts/error-coverage-sites.py",
        "    missing = [s for s in untested if not exempt.get((s.path, s.text), NOT_YET).startswith(REASONS)]",
        "    missing = [s for s in untested if (s.path, s.text) not in exempt]",
        "error coverage sites: a line still 'not yet tested' passes the check",
        ["pytest", "tests/test_error_coverage_rules.py"],
    ),
    (
        "scripts/error-coverage-sites.py",
        "if k not in listed and not (why.startswith(SAME) and k in shared)]",
        "if False]",
        "error coverage sites: the line of a site a test now causes is not stale",
        ["pytest", "tests/test_error_coverage_rules.py"],
    ),
    (
        "scripts/error-coverage-sites.py",
        "            if path != h.path and defines_own(code, h.function):",
        "            if False:",
        "error coverage sites: a file's own function of a helper's name makes sites",
        ["pytest", "tests/test_error_coverage_rules.py"],
    ),
    (
        "tvm/src/vmexec/bytes.rs",
        "        mark_last(FieldKind::Text);",
        "",
        "field record: a string's bytes are not marked as text (its UTF-8 break is never tried)",
        ["-p", "relaxvm-tvm", "--test", "vmexec_fields"],
    ),
    (
        "tvm/src/vmexec/bytes.rs",
        ".filter(|n| n.saturating_mul(item_size.max(1)) <= self.remaining());",
        ".filter(|n| n.saturating_mul(item_size.max(1)) < self.remaining());",
        "TVM reader: a count that exactly fills the bytes left is refused",
        ["-p", "relaxvm-tvm", "--test", "vmexec_fields"],
    ),
    (
        "scripts/error-coverage-sites.py",
        "for g in groups.values() if len(g) > 1]",
        "for g in groups.values() if len(g) > 2]",
        "error coverage sites: one text at two reader sites is not a finding (errs/01)",
        ["pytest", "tests/test_error_coverage_rules.py"],
    ),
    (
        "isa/src/format/instructions.rs",
        'IF => Instruction::If { cond: c.u32("condition register")?',
        'IF => Instruction::If { cond: c.u32("result register")?',
        "isa reader: two reads named alike (errs/01)",
        ["-p", "relaxvm-builder", "--test", "integration", "isa_fields"],
    ),
    # Stop 44: compiled-mode sites reuse storage as left (perfcomp).
    (
        "builtins/src/site_alloc.rs",
        "(reuse == Reuse::AsLeft || s.write_with(|b| b.fill(0)).is_ok())",
        "s.write_with(|b| b.fill(0)).is_ok()",
        "site alloc: a compiled-mode site's reused storage is zeroed again (perfcomp, #35 block row)",
        ["-p", "relaxvm-builtins", "--lib", "site_alloc"],
    ),
    # Review R-shape-5: a door's partial-word write keeps a racing slot store.
    (
        "core/src/storage/words.rs",
        "let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, patch);",
        "word.store(patch(word.load(Ordering::Relaxed)).unwrap(), Ordering::Relaxed);",
        "word storage: a partial-word write stores back the word as it loaded it (undoing a racing slot store)",
        ["-p", "relaxvm-core", "--lib", "storage::words"],
    ),
]
only = [int(a) for a in sys.argv[1:]] or range(len(MUTANTS))
stale = []
for i in only:
    path, old, new, what, args = MUTANTS[i]
    src = open(path).read()
    if src.count(old) != 1:
        # One stale text must not hide the other mutants: report it as a failure and go on.
        print(f"mutant {i} ({what}): its text occurs {src.count(old)} times in {path}, not once: update it")
        stale.append(i)
        continue
    open(path, "w").write(src.replace(old, new))
    t = time.time()
    try:
        if args[0] == "pytest":
            cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args[1:]]
        else:
            cmd = ["cargo", "test", "--quiet", *args]
        r = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True)
    finally:
        open(path, "w").write(src)
    out = r.stdout + r.stderr
    failed = [
        line.split()[1] for line in out.splitlines() if line.startswith("test ") and line.rstrip().endswith("FAILED")
    ] + [line.split()[1] for line in out.splitlines() if line.startswith("FAILED ")]
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
if stale:
    sys.exit(f"mutants whose text is stale: {stale}")
