"""The paged KV cache attacked (each attack in a child process with a memory cap and a timeout):

- creation arguments: wrong counts and types, capacities and head counts that overflow or do not
  fit in memory, unsupported backends and layer kinds: clear errors, never a crash;
- bookkeeping calls with hostile ids, positions and lengths (int64 extremes, negative, past the
  length), a missing sequence in a batch, too many tokens: refused, the cache unchanged;
- kernels (here Python callables standing in for the .so's kernels) that fail, or that call back
  into the cache they run for (re-entry): an error, not a deadlock, and the cache stays usable;
- calls from several threads: serialised by the cache's lock, the bookkeeping consistent.
"""

from __future__ import annotations

from attack import run_attack

# A cache whose kernels are Python functions: `calls` records them; `hooks[name]` may replace
# one. 2 layers, 4 query heads, 2 KV heads, head dim 8, float32, pages of 16, 8 sequences,
# 256 tokens, chunks of 64.
PRELUDE = """
import threading, numpy as np, relaxvm as rx
f = rx.get_global_func
calls, hooks = [], {}
def kernel(name):
    def k(*args):
        calls.append(name)
        if name in hooks:
            return hooks[name](*args)
    return k
def create(config=(8, 256, 64, 16, 0), qo=4, kv=2, dim=8, kinds=(0, 0), extra=None):
    args = [rx.Shape(list(config)), rx.Shape([0, len(kinds)]), qo, kv, dim, dim, rx.Shape(list(kinds)),
            False, 1, 1.0, 10000.0, None, rx.tensor(np.zeros((), "float32")), kernel("transpose_append"), None]
    names = ["ragged", "prefill", "decode", "prefill_sw", "decode_sw", "tree_paged", "tree_ragged"]
    args += [("tirx", kernel(n)) for n in names]
    args += [(), (kernel("merge"),), kernel("split_rotary"), kernel("copy_single_page")]
    args += [kernel("debug_get_kv"), kernel("compact_copy")]
    if extra:
        extra(args)
    return f("vm.builtin.paged_attention_kv_cache_create")(*args)
def zeros(*shape):
    return rx.tensor(np.zeros(shape, "float32"))
attention = f("vm.builtin.attention_kv_cache_attention_with_fused_qkv")
def step(cache, seqs, lens):
    f("vm.builtin.kv_state_begin_forward")(cache, rx.Shape(seqs), rx.Shape(lens), None)
    n = sum(lens)
    for layer in range(2):
        attention(cache, layer, 0.35, zeros(n, 8, 8), zeros(n, 4, 8))
    f("vm.builtin.kv_state_end_forward")(cache)
"""


def test_creation_arguments_are_checked() -> None:
    out = run_attack(
        PRELUDE
        + """
def refused(**kw):
    try:
        create(**kw)
    except rx.VMError as e:
        return str(e)
    return "ACCEPTED"
msgs = [
    refused(config=(8, 256, 64, 0, 0)),
    refused(config=(8, 2**62, 64, 16, 0)),
    refused(config=(2**40, 256, 64, 16, 1)),
    refused(config=(2**30, 256, 64, 16, 1)),
    refused(config=(8, 256, 64)),
    refused(qo=5, kv=2),
    refused(dim=0),
    refused(kinds=(0, 1)),
    refused(kinds=(0, 7)),
    refused(extra=lambda a: a.__setitem__(15, ("flashinfer", kernel("x"), kernel("y")))),
    refused(extra=lambda a: a.__setitem__(16, ())),
    refused(extra=lambda a: a.__setitem__(23, ())),
    refused(extra=lambda a: a.__setitem__(7, True)),
    refused(extra=lambda a: a.pop()),
    refused(extra=lambda a: a.__setitem__(24, 5)),
]
for m in msgs:
    assert m != "ACCEPTED", msgs
print("\\n".join(msgs))
try:
    create(config=(8, 2**31 - 1, 2**31 - 1, 16, 0), qo=64, kv=64, dim=1 << 20)
except (rx.VMError, MemoryError) as e:
    print("huge:", type(e).__name__)
"""
    )
    out.assert_ok()
    text = out.stdout
    for phrase in [
        "page_size must be between 1",
        "total_token_capacity must be between 1",
        "the number of pages",
        "reserved_num_seqs must be between 1",
        "the cache config must have 5 or 6 fields",
        "a multiple of num_kv_heads",
        "MLA layers are not supported",
        "unknown attention kind 7",
        'backend "flashinfer" is not supported on the CPU',
        "argument 16 (paged prefill) is required",
        "merge functions",
        "KV transfer",
        "28 or 29",
        "split_rotary",
        "huge:",
    ]:
        assert phrase in text, f"{phrase!r} missing from\n{text}"


def test_hostile_bookkeeping_calls_are_refused_and_change_nothing() -> None:
    out = run_attack(
        PRELUDE
        + """
c = create()
f("vm.builtin.kv_state_add_sequence")(c, 0)
step(c, [0], [20])
before = repr(c)
big, small = 2**63 - 1, -2**63
bad = [
    ("vm.builtin.kv_state_add_sequence", (c, 0)),
    ("vm.builtin.kv_state_remove_sequence", (c, big)),
    ("vm.builtin.kv_state_popn", (c, 0, 21)),
    ("vm.builtin.kv_state_popn", (c, 0, -1)),
    ("vm.builtin.kv_state_popn", (c, 0, big)),
    ("vm.builtin.kv_state_popn", (c, small, 1)),
    ("vm.builtin.kv_state_fork_sequence", (c, 0, 1, 21)),
    ("vm.builtin.kv_state_fork_sequence", (c, 0, 1, small)),
    ("vm.builtin.kv_state_fork_sequence", (c, big, 1, -1)),
    ("vm.builtin.kv_state_fork_sequence", (c, 0, 0, -1)),
    ("vm.builtin.kv_state_begin_forward", (c, rx.Shape([0, big]), rx.Shape([1, 1]), None)),
    ("vm.builtin.kv_state_begin_forward", (c, rx.Shape([0]), rx.Shape([big]), None)),
    ("vm.builtin.kv_state_begin_forward", (c, rx.Shape([0]), rx.Shape([small]), None)),
    ("vm.builtin.kv_state_begin_forward", (c, rx.Shape([0, 0]), rx.Shape([1, 1]), None)),
    ("vm.builtin.kv_state_begin_forward", (c, rx.Shape([]), rx.Shape([]), None)),
    ("vm.builtin.kv_state_begin_forward", (c, rx.Shape([0]), rx.Shape([1]), rx.Shape([5]))),
    ("vm.builtin.kv_state_begin_forward", (c, rx.Shape(list(range(9))), rx.Shape([1] * 9), None)),
    ("vm.builtin.attention_kv_cache_enable_sliding_window_for_seq", (c, 0, 8, 2)),
    ("vm.builtin.attention_kv_cache_debug_get_kv", (c, 0, small, big, zeros(1), zeros(1))),
    ("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes", (c, rx.Shape([0]), rx.Shape([3]))),
    ("vm.builtin.attention_kv_cache_merge_attn_output_inplace", (c, None, None, None, None)),
    ("vm.builtin.kv_state_clear", (rx.tensor(np.zeros(1)),)),
]
for name, args in bad:
    try:
        f(name)(*args)
    except rx.VMError as e:
        assert repr(c) == before, (name, repr(c), before)
    else:
        raise AssertionError(f"{name}{args[1:]} was accepted")
# Fill the cache: the step that does not fit is refused midway and undone.
for s in range(1, 8):
    f("vm.builtin.kv_state_add_sequence")(c, s)
before = repr(c)
try:
    step(c, list(range(1, 5)), [64 // 4] * 4)
    step(c, list(range(1, 5)), [60 // 4] * 4)
    step(c, list(range(1, 5)), [60 // 4] * 4)
    step(c, list(range(1, 5)), [60 // 4] * 4)
    step(c, list(range(1, 5)), [60 // 4] * 4)
except rx.VMError as e:
    assert "the KV cache is full" in str(e), e
    print("full")
f("vm.builtin.kv_state_popn")(c, 1, 1)
step(c, [0], [1])
print(f("vm.builtin.attention_kv_cache_get_sequence_length")(c, 0))
"""
    )
    out.assert_ok("full\n21")


def test_failing_kernels_leave_the_cache_usable() -> None:
    out = run_attack(
        PRELUDE
        + """
c = create()
f("vm.builtin.kv_state_add_sequence")(c, 0)
step(c, [0], [20])
def boom(*a):
    raise ValueError("kernel failed on purpose")
hooks["copy_single_page"] = boom
before = repr(c)
try:
    f("vm.builtin.kv_state_fork_sequence")(c, 0, 1, 5)
except ValueError as e:
    print("fork:", e)
assert repr(c) == before, (repr(c), before)
del hooks["copy_single_page"]
f("vm.builtin.kv_state_fork_sequence")(c, 0, 1, 5)
hooks["decode"] = boom
f("vm.builtin.kv_state_begin_forward")(c, rx.Shape([0, 1]), rx.Shape([1, 1]), None)
try:
    attention(c, 0, 0.35, zeros(2, 8, 8), zeros(2, 4, 8))
except ValueError as e:
    print("attention:", e)
del hooks["decode"]
f("vm.builtin.kv_state_end_forward")(c)
step(c, [0, 1], [1, 1])
print(f("vm.builtin.attention_kv_cache_get_total_sequence_length")(c))
"""
    )
    # The failed step still stands (as in TVM): 20 + 1 + 1 and 5 + 1 + 1.
    out.assert_ok("fork: kernel failed on purpose\nattention: kernel failed on purpose\n29")


def test_a_kernel_calling_back_into_its_cache_gets_an_error_not_a_deadlock() -> None:
    out = run_attack(
        PRELUDE
        + """
c = create()
f("vm.builtin.kv_state_add_sequence")(c, 0)
seen = []
def reenter(*a):
    try:
        f("vm.builtin.kv_state_add_sequence")(c, 5)
    except rx.VMError as e:
        seen.append(str(e))
    try:
        repr(c)  # describing a busy cache neither waits nor fails
        seen.append(repr(c))
    except Exception as e:
        seen.append("repr failed: " + str(e))
hooks["ragged"] = reenter
step(c, [0], [3])
print("already in use" in seen[0], "busy" in seen[1])
del hooks["ragged"]
step(c, [0], [3])
print(f("vm.builtin.attention_kv_cache_get_sequence_length")(c, 0))
"""
    )
    out.assert_ok("True True\n6")


def test_calls_from_several_threads_keep_the_table_consistent() -> None:
    out = run_attack(
        PRELUDE
        + """
# Each k holds 2 pages until the removals (its 14 tokens and its fork's copied partial page), so
# 4 threads x 50 need up to 400 pages when the scheduler runs every add before any removal:
# 8192 tokens are 512 pages, enough for any interleaving.
c = create(config=(64, 8192, 64, 16, 0))
errors = []
# A step is several calls (begin, attention per layer, end): threads take turns for it, while
# the single calls around it race.
step_lock = threading.Lock()
def work(base):
    try:
        for k in range(50):
            f("vm.builtin.kv_state_add_sequence")(c, base + k)
            with step_lock:
                step(c, [base + k], [17])
            f("vm.builtin.kv_state_fork_sequence")(c, base + k, base + k + 10_000, 9)
            f("vm.builtin.kv_state_popn")(c, base + k, 3)
        for k in range(50):
            f("vm.builtin.kv_state_remove_sequence")(c, base + k + 10_000)
            f("vm.builtin.kv_state_remove_sequence")(c, base + k)
    except BaseException as e:
        errors.append(e)
threads = [threading.Thread(target=work, args=(1000 * t,)) for t in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(errors, f("vm.builtin.attention_kv_cache_empty")(c))
"""
    )
    out.assert_ok("[] True")


def test_hostile_token_trees_and_commits_are_refused() -> None:
    out = run_attack(
        PRELUDE
        + """
c = create()
f("vm.builtin.kv_state_add_sequence")(c, 0)
step(c, [0], [10])
begin = f("vm.builtin.kv_state_begin_forward")
before = repr(c)
msgs = []
for lens, tree in [
    ([3], [-1, 2, 0]),             # a parent after its node
    ([3], [-1, -5, 0]),            # a parent below -1
    ([3], [-1, 0]),                # fewer pointers than tokens
    ([2], [-1, 0, 1]),             # more pointers than tokens
    ([3], [2**63 - 1, 0, 0]),      # int64 extremes
    ([60], [-1] * 60),             # fine (a forest of roots), then ...
]:
    try:
        begin(c, rx.Shape([0]), rx.Shape(lens), rx.Shape(tree))
    except rx.VMError as e:
        msgs.append(str(e).split(": ", 1)[1][:60])
        assert repr(c) == before, (repr(c), before)
    else:
        msgs.append("accepted")
print(msgs[-1])
f("vm.builtin.kv_state_end_forward")(c)
# ... an uncommitted tree blocks plain steps and forks until committed.
for call in [lambda: begin(c, rx.Shape([0]), rx.Shape([1]), None),
             lambda: f("vm.builtin.kv_state_fork_sequence")(c, 0, 1, -1)]:
    try:
        call()
    except rx.VMError as e:
        print("refused:", "commit" in str(e))
commit = f("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes")
for seqs, leaves in [([0], [60]), ([0], [-2]), ([0, 0], [1]), ([5], [0])]:
    try:
        commit(c, rx.Shape(seqs), rx.Shape(leaves))
    except rx.VMError as e:
        print("commit refused")
commit(c, rx.Shape([0]), rx.Shape([3]))
print(f("vm.builtin.attention_kv_cache_get_sequence_length")(c, 0))
# Trees past 256 nodes (accumulated over uncommitted steps) are refused.
try:
    for _ in range(6):
        begin(c, rx.Shape([0]), rx.Shape([50]), rx.Shape([-1] * 50))
        f("vm.builtin.kv_state_end_forward")(c)
except rx.VMError as e:
    print("limit:", "256" in str(e))
print(len(msgs))
"""
    )
    out.assert_ok(
        "accepted\nrefused: True\nrefused: True\n"
        "commit refused\ncommit refused\ncommit refused\ncommit refused\n11\nlimit: True\n6"
    )


def test_hostile_checkpoints_are_refused_and_change_nothing() -> None:
    out = run_attack(
        PRELUDE
        + """
import json
c = create()
f("vm.builtin.kv_state_add_sequence")(c, 0)
step(c, [0], [20])
meta = f("vm.builtin.attention_kv_cache_get_checkpoint_metadata")(c, 0)
m = json.loads(meta)
before = repr(c)
prepare = f("vm.builtin.attention_kv_cache_prepare_import")
bad = ["not json", "[]", "{}", json.dumps({**m, "page_size": 8}), json.dumps({**m, "seq_length": -1}),
       json.dumps({**m, "seq_length": 2**40}), json.dumps({**m, "layout_hash": "0" * 16}),
       json.dumps({**m, "logical_pages": m["logical_pages"][:1]}), json.dumps({**m, "groups": []}),
       json.dumps({**m, "rotary_theta": "x"}), json.dumps({**m, "seq_id": 3})]
for text in bad:
    try:
        prepare(c, 0, text)
    except rx.VMError as e:
        assert repr(c) == before, (text, repr(c))
    else:
        raise AssertionError("accepted " + text[:80])
export = f("vm.builtin.attention_kv_cache_export_page_group")
for args, want in [
    ((0, 2, zeros(1, 2, 2, 2, 16, 8)), "group 2 is out of range: expected 0 to 1"),
    ((0, -1, zeros(1, 2, 2, 2, 16, 8)), "group -1 is out of range: expected 0 to 1"),
    ((0, 0, zeros(1, 3, 2, 2, 16, 8)), "dst: expected shape (1, 2, 2, 2, 16, 8), found (1, 3, 2, 2, 16, 8)"),
    ((0, 0, rx.tensor(np.zeros((1, 2, 2, 2, 16, 8), "float64"))), "dst: expected dtype float32, found float64"),
    ((1, 0, zeros(1, 2, 2, 2, 16, 8)), "checkpoints support sequence id 0 only, found 1"),
]:
    try:
        export(c, *args)
    except rx.VMValueError as e:
        assert want in str(e) and "export_page_group" in str(e), (want, str(e))
        assert repr(c) == before, (args[:2], repr(c))
    else:
        raise AssertionError(f"export accepted {args[:2]}")
groups = []
for g in range(2):
    dst = zeros(1, 2, 2, 2, 16, 8)
    export(c, 0, g, dst)
    groups.append(dst)
imp = f("vm.builtin.attention_kv_cache_import_page_group")
finish = f("vm.builtin.attention_kv_cache_finish_import")
try:
    imp(c, 0, 0, groups[0])
except rx.VMError as e:
    print("import before prepare:", "prepare_import" in str(e))
prepare(c, 0, meta)
for call in [lambda: f("vm.builtin.attention_kv_cache_get_sequence_length")(c, 0),
             lambda: f("vm.builtin.kv_state_begin_forward")(c, rx.Shape([0]), rx.Shape([1]), None),
             lambda: finish(c, 0)]:
    try:
        call()
    except rx.VMError as e:
        print("refused during import")
imp(c, 0, 0, groups[0])
try:
    imp(c, 0, 0, groups[0])
except rx.VMError as e:
    print("twice:", "already imported" in str(e))
imp(c, 0, 1, groups[1])
finish(c, 0)
print(f("vm.builtin.attention_kv_cache_get_sequence_length")(c, 0), "{0: 20}" in repr(c))
"""
    )
    out.assert_ok(
        "import before prepare: True\nrefused during import\nrefused during import\nrefused during import\n"
        "twice: True\n20 True"
    )


def test_findings_kvcache_01_a_huge_capacity_is_a_memory_error_not_an_abort() -> None:
    """kvcache/01: the page table's free list (4 bytes a page) was allocated infallibly after the
    page tensors; 2^28 one-token pages of one int8 element fit the tensors under the cap but not
    the list. Now a MemoryError-kind error, and the process goes on."""
    out = run_attack(
        PRELUDE
        + """
def tiny(cap):
    args = [rx.Shape([1, cap, 1, 1, 0]), rx.Shape([0, 1]), 1, 1, 1, 1, rx.Shape([0]), False, 1, 1.0, 1e4, None,
            rx.tensor(np.zeros((), "int8")), kernel("t"), None]
    args += [("tirx", kernel(n)) for n in ["r", "p", "d", "ps", "ds", "tp", "tr"]]
    args += [(), (kernel("m"),), kernel("s"), kernel("c"), kernel("g"), kernel("cc")]
    return f("vm.builtin.paged_attention_kv_cache_create")(*args)
for cap in [2**28, 2**30]:
    # 2^28: the tensor (512 MB) and the list (1 GB) may both fit; 2^30: the tensor (2 GB) fits,
    # the list (4 GB) does not.
    try:
        tiny(cap)
        outcome = "created"
    except (rx.VMError, MemoryError) as e:
        outcome = type(e).__name__
print(outcome)
c = tiny(1000)
f("vm.builtin.kv_state_add_sequence")(c, 0)
print(f("vm.builtin.attention_kv_cache_get_num_available_pages")(c))
""",
        memory=2_600_000_000,
    )
    out.assert_ok("VMMemoryError\n1001")


def test_findings_kvcache_03_read_only_outputs_are_refused_before_any_kernel() -> None:
    """kvcache/03: a read-only output was refused by the second kernel of a layer, after
    split_rotary and before the K/V append: the layer's keys stayed zero. Now every output is
    checked first, no kernel runs, and the layer's attention can be retried."""
    out = run_attack(
        PRELUDE
        + """
c = create()
f("vm.builtin.kv_state_add_sequence")(c, 0)
f("vm.builtin.kv_state_begin_forward")(c, rx.Shape([0]), rx.Shape([8]), None)
ro = np.zeros((8, 4, 8), "float32"); ro.setflags(write=False)
calls.clear()
try:
    attention(c, 0, 0.35, zeros(8, 8, 8), rx.from_dlpack(ro))
except rx.VMError as e:
    print("refused:", "read-only" in str(e), calls)
attention(c, 0, 0.35, zeros(8, 8, 8), zeros(8, 4, 8))
print(calls)
"""
    )
    out.assert_ok("refused: True []\n['split_rotary', 'ragged', 'transpose_append']")


def test_findings_kvcache_05_the_running_steps_sequences_cannot_change_under_it() -> None:
    """kvcache/05: removing (or popping, forking, windowing) a sequence of the running step let
    its planned appends land in pages given to another sequence. Now refused until end_forward;
    after it, the changes are allowed and a commit by the stale positions is refused."""
    out = run_attack(
        PRELUDE
        + """
c = create()
for s in (0, 2):
    f("vm.builtin.kv_state_add_sequence")(c, s)
step(c, [2], [20])
f("vm.builtin.kv_state_begin_forward")(c, rx.Shape([0]), rx.Shape([5]), None)
for name, args in [("kv_state_remove_sequence", (0,)), ("kv_state_popn", (0, 1)),
                   ("kv_state_fork_sequence", (0, 3, -1))]:
    try:
        f("vm.builtin." + name)(c, *args)
    except rx.VMError as e:
        print("refused:", "running forward step" in str(e))
f("vm.builtin.kv_state_fork_sequence")(c, 2, 3, 18)   # not in the step: fine
f("vm.builtin.kv_state_end_forward")(c)
f("vm.builtin.kv_state_popn")(c, 0, 2)
try:
    f("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes")(c, rx.Shape([0]), rx.Shape([-1]))
except rx.VMError as e:
    print("commit refused:", "stale" in str(e))
print(f("vm.builtin.attention_kv_cache_get_sequence_length")(c, 0))
"""
    )
    out.assert_ok("refused: True\nrefused: True\nrefused: True\ncommit refused: True\n3")


def test_findings_kvcache_01_round_2_query_positions_never_change_after_the_next_step() -> None:
    """kvcache/01 (second round): a step's arrays are refilled in place by the next step with
    the same layout, and get_query_positions returned a view of them, so the positions a caller
    held changed at the next step (and writing into them rewrote the cache's own array). It
    returns a copy now."""
    out = run_attack(
        PRELUDE
        + """
c = create()
f("vm.builtin.kv_state_add_sequence")(c, 0)
def positions(n):
    f("vm.builtin.kv_state_begin_forward")(c, rx.Shape([0]), rx.Shape([n]), None)
    p = f("vm.builtin.attention_kv_cache_get_query_positions")(c)
    f("vm.builtin.kv_state_end_forward")(c)
    return p
p1 = positions(1)
p2 = positions(1)
p3 = positions(1)
print(p1.numpy().tolist(), p2.numpy().tolist(), p3.numpy().tolist())
f("vm.builtin.kv_state_begin_forward")(c, rx.Shape([0]), rx.Shape([1]), None)
mine = f("vm.builtin.attention_kv_cache_get_query_positions")(c)
np.copyto(mine.numpy(), np.array([99], "int32")) if mine.numpy().flags.writeable else None
print(f("vm.builtin.attention_kv_cache_get_query_positions")(c).numpy().tolist())
"""
    )
    out.assert_ok("[0] [1] [2]\n[3]")
