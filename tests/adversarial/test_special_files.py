"""Special files as inputs and outputs (issue 31, classes 2 and 3).

Inputs: every file relaxvm opens is a regular file (checked on the opened descriptor, opened
without blocking), within a size limit checked before reading, and read in chunks that Ctrl-C
interrupts. Outputs: an existing destination that is not a regular file is refused, never replaced
by one; a symbolic link is followed to the regular file it names."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import textwrap

import pytest
from attack import TIMEOUT, run_attack

import relaxvm as rx

LOADERS = [
    "rx.load_module({p!r})",
    "rx.load_executable({p!r})",
    "rx.load_executable({p!r}, mmap=True)",
    "rx.Trace.load({p!r})",
]


def small_program() -> rx.Executable:
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_ret(ib.r(0))
    return ib.get()


@pytest.mark.parametrize("loader", LOADERS)
def test_devices_are_refused_before_reading(loader):
    # /dev/zero never ends: reading it whole would run out of memory (the cap is 1 GiB).
    run_attack(f"import relaxvm as rx; {loader.format(p='/dev/zero')}", memory=1 << 30).assert_raises(
        ("VMValueError", "ValueError"), "/dev/zero: expected a regular file, found a character device"
    )


@pytest.mark.parametrize("loader", LOADERS)
def test_procfs_files_are_refused_after_a_few_bytes(loader):
    # pagemap reports 0 bytes and holds 8 per page of the address space (gigabytes).
    run_attack(f"import relaxvm as rx; {loader.format(p='/proc/self/pagemap')}", memory=1 << 30).assert_raises(
        ("VMValueError", "ValueError"), "holds more than the 0 bytes it reports"
    )


@pytest.mark.parametrize("loader", LOADERS)
def test_directories_are_refused(loader, tmp_path):
    run_attack(f"import relaxvm as rx; {loader.format(p=str(tmp_path))}").assert_raises(
        ("VMValueError", "ValueError"), "expected a regular file, found a directory"
    )


@pytest.mark.parametrize("loader", LOADERS)
def test_a_fifo_without_a_writer_is_refused_not_waited_for(loader, tmp_path):
    # A blocking open of a fifo waits for a writer, here forever (and Python's Ctrl-C handler
    # only sets a flag): the loaders open without blocking and refuse it.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    run_attack(f"import relaxvm as rx; {loader.format(p=str(fifo))}").assert_raises(
        ("VMValueError", "ValueError"), "expected a regular file, found a fifo"
    )


def test_ctrl_c_during_a_fifo_load_ends_it(tmp_path):
    # Event-ordered: the child says it is about to load, then the parent sends SIGINT. Whether
    # the signal comes before or during the load, the child ends by itself (refused or
    # interrupted), never hangs.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code = textwrap.dedent(f"""
        import relaxvm as rx, sys
        print("READY", flush=True)
        try:
            rx.load_module({str(fifo)!r})
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
        except ValueError as e:
            print("REFUSED", e, flush=True)
            sys.stdin.readline()  # the parent's signal may still be on its way: wait for it
        """)
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "READY"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate("\n", timeout=TIMEOUT)
    finally:
        child.kill()
    assert "REFUSED" in out and "found a fifo" in out or "INTERRUPTED" in out or "KeyboardInterrupt" in err, (out, err)


def test_the_size_limit_is_checked_before_reading(tmp_path):
    big = tmp_path / "big.rvx"
    with open(big, "wb") as f:
        f.truncate(1 << 40)  # sparse: 1 TiB that costs nothing
    for call in [f"rx.load_executable({str(big)!r})", f"rx.load_module({str(big)!r})"]:
        run_attack(f"import relaxvm as rx; {call}", memory=1 << 30).assert_raises(
            "VMValueError", "1099511627776 bytes, more than the input size limit of 17179869184 bytes"
        )
    small = tmp_path / "small.rvx"
    small_program().save(str(small))
    size = small.stat().st_size
    run_attack(f"import relaxvm as rx; rx.load_executable({str(small)!r}, max_input_size={size - 1})").assert_raises(
        "VMValueError", f"more than the input size limit of {size - 1} bytes"
    )
    run_attack(
        f"import relaxvm as rx; print(rx.load_executable({str(small)!r}, max_input_size={size}).function_names)"
    ).assert_ok("['main']")
    for bad in ["-1", "'big'", "1.5"]:
        run_attack(f"import relaxvm as rx; rx.load_executable({str(small)!r}, max_input_size={bad})").assert_raises(
            ("TypeError", "OverflowError")
        )


def test_ctrl_c_stops_a_long_read(tmp_path):
    # A 1 GiB file (sparse) read whole by load_module. A thread of the child waits until the
    # main thread has the file open (its descriptor appears in /proc/self/fd), then sends
    # SIGINT: the read, which polls for signals between chunks, ends with KeyboardInterrupt.
    big = tmp_path / "big.so"
    with open(big, "wb") as f:
        f.write(b"\x7fELF")  # an ELF file by its magic number, so it is read whole
        f.truncate(1 << 30)
    run_attack(
        f"""
import os, signal, threading, relaxvm as rx
path = {str(big)!r}
def watch():
    while True:
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{{fd}}") == path:
                    os.kill(os.getpid(), signal.SIGINT)
                    return
            except OSError:
                pass
threading.Thread(target=watch, daemon=True).start()
try:
    rx.load_module(path)
except KeyboardInterrupt:
    print("interrupted in the read")
""",
        memory=3 << 30,
    ).assert_ok("interrupted in the read")


def test_load_executable_refuses_what_is_neither_a_path_nor_bytes():
    # bytes(1000) is 1000 zero bytes: an int must not become a file's contents.
    for bad in ["1000", "True", "None", "2.5", "object()", "[b'x']"]:
        run_attack(f"import relaxvm as rx; rx.load_executable({bad})").assert_raises(
            "TypeError", "expects a path .* or a bytes-like object"
        )
        run_attack(f"import relaxvm as rx; rx.load_module({bad})").assert_raises("TypeError", "expects a path")
    for bad in ["1", "2.5", "b'/tmp'", "[1]", "{'a': 1}"]:
        run_attack(f"import relaxvm as rx; rx.load_executable(b'', native_libraries={bad})").assert_raises(
            "TypeError", "native_libraries must be None, True, a path, or a list of paths"
        )
    # Buffers are bytes.
    data = small_program().save_to_bytes()
    run_attack(
        f"import relaxvm as rx; d = {data!r}\n"
        "for b in [d, bytearray(d), memoryview(d)]: print(rx.load_executable(b).function_names)"
    ).assert_ok("['main']\n['main']\n['main']")


def save_calls(p: str) -> list[str]:
    return [
        f"ex.save({p!r})",
        f"ex.export_library({p!r})",
        f"vm.trace('main', 1).save({p!r})",
        f"vm.profile('main', 1).save_trace({p!r})",
    ]


SETUP = """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("main", num_inputs=1):
    ib.emit_ret(ib.r(0))
ex = ib.get()
vm = rx.VirtualMachine(ex, profile=True)
"""


@pytest.mark.parametrize("what", ["fifo", "link to a fifo", "directory", "link to a directory"])
def test_outputs_onto_special_files_are_refused_and_left_alone(tmp_path, what):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    target = {"fifo": fifo, "link to a fifo": fifo, "directory": folder, "link to a directory": folder}[what]
    dest = target
    if what.startswith("link"):
        dest = tmp_path / "link"
        dest.symlink_to(target)
    kind = "a fifo" if "fifo" in what else "a directory"
    for call in save_calls(str(dest)):
        run_attack(SETUP + call).assert_raises(("OSError", "VMError", "VMValueError"), f"{kind}, not a regular file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and folder.is_dir() and os.listdir(folder) == []
    if what.startswith("link"):
        assert dest.is_symlink()
    # The command line too.
    prog = tmp_path / "prog.rvx"
    small_program().save(str(prog))
    for args in [["run", str(prog), "main", "1", "-o", str(dest)], ["dis", str(prog), "-o", str(dest)]]:
        done = subprocess.run([sys.executable, "-m", "relaxvm", *args], capture_output=True, text=True, timeout=TIMEOUT)
        assert done.returncode == 1 and f"{kind}, not a regular file" in done.stderr, done
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_link_to_a_regular_file_is_followed_and_stays_a_link(tmp_path):
    real = tmp_path / "models" / "v1.rvx"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "current.rvx"
    link.symlink_to("models/v1.rvx")
    run_attack(SETUP + f"ex.save({str(link)!r}); print(rx.load_executable({str(real)!r}).function_names)").assert_ok(
        "['main']"
    )
    assert link.is_symlink() and os.readlink(link) == "models/v1.rvx"


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a character device needs root")
def test_as_root_a_device_node_is_not_replaced(tmp_path):
    # A private /dev/null (same device numbers), so the real one is never at risk.
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    for call in save_calls(str(null)):
        run_attack(SETUP + call).assert_raises(
            ("OSError", "VMError", "VMValueError"), "a character device, not a regular file"
        )
    prog = tmp_path / "prog.rvx"
    small_program().save(str(prog))
    done = subprocess.run(
        [sys.executable, "-m", "relaxvm", "run", str(prog), "main", "1", "-o", str(null)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "a character device, not a regular file" in done.stderr, done
    assert stat.S_ISCHR(os.stat(null).st_mode)


def test_replacing_a_file_keeps_its_permission_bits(tmp_path):
    # A private output stays private after every kind of save (a new file follows the umask).
    prog = tmp_path / "prog.rvx"
    small_program().save(str(prog))
    for i, call in enumerate(save_calls(str(tmp_path / "out"))):
        out = tmp_path / f"out{i}"
        out.write_bytes(b"old")
        os.chmod(out, 0o600)
        run_attack(SETUP + call.replace(repr(str(tmp_path / "out")), repr(str(out)))).assert_ok()
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o600, call
    out = tmp_path / "cli.txt"
    out.write_bytes(b"old")
    os.chmod(out, 0o640)
    done = subprocess.run(
        [sys.executable, "-m", "relaxvm", "dis", str(prog), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0 and stat.S_IMODE(os.stat(out).st_mode) == 0o640, done


def test_output_errors_name_the_path_given_and_the_links_target(tmp_path):
    missing = tmp_path / "nowhere" / "out.rvx"
    link = tmp_path / "dangling"
    link.symlink_to(missing)
    for call in save_calls(str(missing)):
        run_attack(SETUP + call).assert_raises(
            ("FileNotFoundError", "OSError", "VMError"),
            re.escape(f"{missing}: cannot create the output: folder {missing.parent} does not exist"),
        )
    for call in save_calls(str(link)):
        run_attack(SETUP + call).assert_raises(
            ("FileNotFoundError", "OSError", "VMError"),
            re.escape(
                f"{link} (a symbolic link to {missing}): cannot create the output: "
                f"folder {missing.parent} does not exist"
            ),
        )
    prog = tmp_path / "prog.rvx"
    small_program().save(str(prog))
    done = subprocess.run(
        [sys.executable, "-m", "relaxvm", "dis", str(prog), "-o", str(link)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 1 and f"{link} (a symbolic link to {missing}): cannot create the output" in done.stderr, (
        done
    )
