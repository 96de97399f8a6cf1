"""Native code only with consent (issue 31, class 1).

A `.rvx` names its libraries by a path and an unkeyed hash that whoever wrote the file chose, so a
crafted file can name any library: one placed beside it, or one on the system whose hash the
author computed. Loading such a file must open nothing unless the caller allows it, and must
open what is allowed. A library whose initializer creates a marker file proves which happened."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from attack import run_attack
from crafted_rvx import compile_marker_library, file_hash, relaxvm_cli, repeat_reference, write_reference


@pytest.fixture
def beside(tmp_path):
    """A crafted `model.rvx` whose library is found beside it (the recorded path is gone), a
    `model.so` that marks when opened, and the marker's path."""
    marker = tmp_path / "opened"
    models = tmp_path / "models"
    models.mkdir()
    so = models / "model.so"
    compile_marker_library(so, marker)
    rvx = models / "model.rvx"
    # The recorded path does not exist: the loader falls back to the file name beside the .rvx.
    write_reference(rvx, str(tmp_path / "gone" / "model.so"), file_hash(so))
    assert not marker.exists()
    return rvx, so, marker


def test_a_library_beside_the_file_is_not_opened_without_consent(beside):
    rvx, so, marker = beside
    for call in [
        f"rx.load_executable({str(rvx)!r})",
        f"rx.load_module({str(rvx)!r})",
        f"rx.load_executable(open({str(rvx)!r}, 'rb').read())",
        f"rx.load_executable({str(rvx)!r}, native_libraries=[])",
        f"rx.load_executable({str(rvx)!r}, native_libraries=False)",
        f"rx.load_executable({str(rvx)!r}, mmap=True)",
    ]:
        run_attack(f"import relaxvm as rx\n{call}").assert_raises(
            "VMValueError", r"references 1 native library: .*model\.so.*XXH3-64 0x[0-9a-f]{16}.*native_libraries="
        )
        assert not marker.exists(), call
    # Another folder, or another file, is no consent for it.
    other = rvx.parent.parent / "elsewhere"
    other.mkdir()
    for allowed in [[str(other)], [str(rvx)], [str(rvx.parent.parent)]]:
        run_attack(
            f"import relaxvm as rx; rx.load_executable({str(rvx)!r}, native_libraries={allowed!r})"
        ).assert_raises("VMValueError", "is not among the allowed native libraries")
        assert not marker.exists(), allowed


@pytest.mark.parametrize("consent", ["folder", "file", "any", "load_module"])
def test_a_library_beside_the_file_is_opened_with_consent(beside, consent):
    rvx, so, marker = beside
    keyword = {
        "folder": f"native_libraries={str(so.parent)!r}",
        "file": f"native_libraries=[{str(so)!r}]",
        "any": "native_libraries=True",
        "load_module": f"native_libraries=[{str(so.parent)!r}]",
    }[consent]
    loader = "load_module" if consent == "load_module" else "load_executable"
    run_attack(f"import relaxvm as rx; rx.{loader}({str(rvx)!r}, {keyword}); print('loaded')").assert_ok("loaded")
    assert marker.exists()


def test_a_system_library_named_by_its_computed_hash_needs_consent(tmp_path):
    # libm is mapped into every Python process; the crafted file names its real path and the
    # hash of its bytes, as an attacker who reads the same system would.
    libm = next(
        (
            line.split()[-1]
            for line in Path("/proc/self/maps").read_text().splitlines()
            if re.search(r"/libm[.-][^/]*$", line)
        ),
        None,
    )
    if libm is None:
        pytest.skip("no libm mapped in this process")
    rvx = tmp_path / "system.rvx"
    try:
        write_reference(rvx, libm, file_hash(Path(libm)))
    except ValueError as e:
        pytest.skip(str(e))
    run_attack(f"import relaxvm as rx; rx.load_executable({str(rvx)!r})").assert_raises(
        "VMValueError", rf"references 1 native library: \"{re.escape(libm)}\" \(XXH3-64 0x"
    )
    # verify and stats list it, with its hash, and say it is found and matches (as data).
    stats = relaxvm_cli("stats", str(rvx))
    assert libm in stats.stdout and "XXH3-64 0x" in stats.stdout, stats
    verify = relaxvm_cli("verify", str(rvx))
    # Found and hashed as data; the system libm is judged by the checks made before loading
    # any library (glibc's libm sets flags a TVM library never has, e.g. DF_STATIC_TLS), so it is
    # either reported usable with its hash matching, or refused with the check that failed.
    assert f'"{libm}"' in verify.stdout, verify
    if "hash matches" in verify.stdout:
        assert "1 native library" in verify.stdout and "--allow-native" in verify.stdout, verify
    else:
        assert "invalid ELF shared library" in verify.stdout and verify.returncode != 0, verify
    # With consent it is read, hashed and handed to the loader (which then judges it as a TVM
    # library): the consent error is gone.
    outcome = run_attack(f"import relaxvm as rx; rx.load_executable({str(rvx)!r}, native_libraries=True)")
    outcome.assert_ended_by_itself()
    assert "native_libraries=" not in outcome.end[1], outcome.end


def test_the_cli_opens_libraries_only_with_allow_native(beside):
    rvx, so, marker = beside
    for sub in [["run", str(rvx)], ["profile", str(rvx)], ["trace", str(rvx), "-q"]]:
        done = relaxvm_cli(*sub)
        assert done.returncode == 1 and "--allow-native" in done.stderr and "model.so" in done.stderr, done
        assert not marker.exists(), sub
    for sub in ["dis", "stats", "verify"]:
        done = relaxvm_cli(sub, str(rvx))
        assert done.returncode in (0, 1), done
        assert not marker.exists(), sub
    verify = relaxvm_cli("verify", str(rvx))
    assert "model.so" in verify.stdout and "hash matches" in verify.stdout, verify
    # Allowed: opened (the run then fails for the model's missing kernels, after the open).
    done = relaxvm_cli("run", str(rvx), "--allow-native", str(so.parent))
    assert "--allow-native" not in done.stderr, done
    assert marker.exists()


def test_unpickling_opens_the_libraries_it_references(beside, tmp_path):
    # Pickle is trust (Python documents that a pickle can run any code): an executable pickled
    # with its libraries loads whole, libraries opened, in the process that unpickles it.
    rvx, so, marker = beside
    pickled = tmp_path / "ex.pickle"
    run_attack(
        f"import pickle, relaxvm as rx\n"
        f"ex = rx.load_executable({str(rvx)!r}, native_libraries=True)\n"
        f"open({str(pickled)!r}, 'wb').write(pickle.dumps(ex))\n"
        f"open({str(pickled)!r} + '.rvx', 'wb').write(ex.save_to_bytes())"
    ).assert_ok()
    assert marker.exists()
    marker.unlink()
    run_attack(f"import pickle; ex = pickle.load(open({str(pickled)!r}, 'rb')); print(ex.function_names)").assert_ok(
        "['main']"
    )
    assert marker.exists()
    marker.unlink()
    # The same bytes given to load_executable open nothing: only unpickling is consent.
    run_attack(f"import relaxvm as rx; rx.load_executable(open({str(pickled)!r} + '.rvx', 'rb').read())").assert_raises(
        "VMValueError", "native_libraries="
    )
    assert not marker.exists()


def test_special_files_as_library_references_are_refused_unread(tmp_path):
    for library, why in [
        ("/proc/self/pagemap", "holds more than the 0 bytes it reports"),
        # /dev/zero, spelled long enough to craft in place of the model's path.
        ("/dev/" + "./" * 6 + "zero", "expected a regular file, found a character device"),
    ]:
        if not os.path.exists(library):
            continue
        rvx = tmp_path / "special.rvx"
        write_reference(rvx, library, 1)
        # Without consent: refused before anything is looked at.
        run_attack(f"import relaxvm as rx; rx.load_executable({str(rvx)!r})").assert_raises(
            "VMValueError", "native_libraries="
        )
        # With consent: read as every input is, so refused without reading it whole.
        run_attack(
            f"import relaxvm as rx; rx.load_executable({str(rvx)!r}, native_libraries=True)", memory=1 << 30
        ).assert_raises("VMValueError", why)
        verify = relaxvm_cli("verify", str(rvx))
        assert verify.returncode == 1 and why in verify.stderr, verify
    # A directory in the library's place.
    rvx = tmp_path / "models" / "model.rvx"
    rvx.parent.mkdir()
    write_reference(rvx, str(tmp_path / "gone" / "model.so"), 1)
    (rvx.parent / "model.so").mkdir()
    run_attack(f"import relaxvm as rx; rx.load_executable({str(rvx)!r}, native_libraries=True)").assert_raises(
        "VMValueError", "expected a regular file, found a directory"
    )
    shutil.rmtree(rvx.parent)


def test_a_link_is_judged_by_the_file_it_opened_and_that_file_is_loaded(tmp_path):
    # The consent judges the real path of the descriptor the library is read through, and the
    # bytes loaded are read through that descriptor (the swap between the two is ordered in
    # the Rust test import::tests::the_admitted_descriptor_is_what_is_read_whatever_the_link_becomes).
    allowed, attacker = tmp_path / "allowed", tmp_path / "attacker"
    allowed.mkdir()
    attacker.mkdir()
    good, evil = allowed / "good.so", attacker / "evil.so"
    compile_marker_library(good, tmp_path / "good-opened")
    compile_marker_library(evil, tmp_path / "evil-opened")
    link = attacker / "lib.so"
    rvx = attacker / "model.rvx"
    os.symlink(evil, link)
    write_reference(rvx, str(link), file_hash(evil))
    run_attack(
        f"import relaxvm as rx; rx.load_executable({str(rvx)!r}, native_libraries=[{str(allowed)!r}])"
    ).assert_raises("VMValueError", re.escape(f"found at {link} (the file {evil.resolve()}), is not among the allowed"))
    assert not (tmp_path / "evil-opened").exists()
    # Pointing into the allowed folder, the link opens the allowed file, recorded by its real path.
    link.unlink()
    os.symlink(good, link)
    write_reference(rvx, str(link), file_hash(good))
    run_attack(
        f"import relaxvm as rx\nexe = rx.load_executable({str(rvx)!r}, native_libraries=[{str(allowed)!r}])\n"
        f"exe.save({str(tmp_path / 'again.rvx')!r}); print('loaded')"
    ).assert_ok("loaded")
    assert (tmp_path / "good-opened").read_text() == "opened\n"
    stats = relaxvm_cli("stats", str(tmp_path / "again.rvx")).stdout
    assert repr(str(good.resolve())).replace("'", '"') in stats, stats


def test_repeated_references_to_one_library_are_read_and_opened_once(tmp_path):
    marker = tmp_path / "opened"
    lib = tmp_path / "lib.so"
    compile_marker_library(lib, marker)
    rvx = tmp_path / "many.rvx"
    write_reference(rvx, str(lib), file_hash(lib))
    repeat_reference(rvx, 20000)
    # Refused: the message counts the library once.
    run_attack(f"import relaxvm as rx; rx.load_executable({str(rvx)!r})").assert_raises(
        "VMValueError", "references 1 native library: "
    )
    # Allowed: one read, one copy, one open (its initializer ran once), in little memory.
    run_attack(
        f"import relaxvm as rx; rx.load_executable({str(rvx)!r}, native_libraries=[{str(tmp_path)!r}])\n"
        "print('loaded')",
        memory=1 << 30,
    ).assert_ok("loaded")
    assert marker.read_text() == "opened\n"
    verify = relaxvm_cli("verify", str(rvx))
    assert verify.stdout.count("native library") == 2 and "calls into 1 native library " in verify.stdout, verify


def test_verify_hashes_a_referenced_file_in_bounded_memory_and_refuses_non_elf(tmp_path):
    # A 2 GiB sparse ELF-looking file: hashing it streaming takes little memory (the cap is 1 GiB).
    big = tmp_path / "big.so"
    with open(big, "wb") as f:
        f.write(b"\x7fELF")
        f.truncate(2 << 30)
    rvx = tmp_path / "model.rvx"
    write_reference(rvx, str(big), 1)
    done = run_attack(
        "import sys\nsys.argv = ['relaxvm', 'verify', " + repr(str(rvx)) + "]\n"
        "from relaxvm.__main__ import main\nmain()",
        memory=1 << 30,
        timeout=300,
    )
    assert "its contents hash to 0x" in done.stderr, done
    # A file that is not ELF is refused after its first bytes.
    (tmp_path / "data.so").write_bytes(b"PK\x03\x04" + bytes(100))
    write_reference(rvx, str(tmp_path / "data.so"), 1)
    verify = relaxvm_cli("verify", str(rvx))
    assert (
        verify.returncode == 1 and "not an ELF shared library (the file starts with bytes 50 4b 03 04" in verify.stderr
    ), verify
