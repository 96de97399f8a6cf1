//! The command line against hostile inputs and outputs: closed pipes, full disks, fifos,
//! devices, huge files, outputs that are inputs, and files that are not ours. Each ends with
//! a one-line error (or, for a closed pipe, quietly) — never a panic, a hang or a lost file.

use assert_cmd::cargo::CommandCargoExt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROG: &str =
    ".packed vm.builtin.int.add\n@main inputs=0:\n  call  vm.builtin.int.add  in: i1, i2  dst: %0\n  ret  %0\n";

fn relaxvm() -> Command {
    Command::cargo_bin("relaxvm").unwrap()
}

fn text(dir: &Path) -> PathBuf {
    let p = dir.join("prog.txt");
    std::fs::write(&p, PROG).unwrap();
    p
}

/// Runs `cmd` to the end, killing it after 20 s (a hang fails the test instead of stalling it).
fn finish(mut cmd: Command) -> (Option<i32>, String, String) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let (mut out, mut err) = (String::new(), String::new());
            child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (status.code(), out, err);
        }
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("the command hung: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn one_line_error(code: Option<i32>, err: &str, needle: &str) {
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: ") && err.contains(needle), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let prog = text(dir.path());
    for args in [vec!["run"], vec!["dis"], vec!["verify"], vec!["stats"]] {
        let mut child = relaxvm().args(&args).arg(&prog).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take()); // the reader is gone before the first write
        let status = child.wait().unwrap();
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert_eq!(status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn a_full_disk_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let prog = text(dir.path());
    for sub in ["run", "dis", "verify"] {
        let mut cmd = relaxvm();
        cmd.arg(sub).arg(&prog);
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = cmd.stdout(full).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        one_line_error(out.status.code(), &err, "standard output: No space left on device");
    }
}

#[test]
fn devices_directories_and_fifos_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (input, kind) in [
        (PathBuf::from("/dev/zero"), "a character device"),
        (dir.path().to_path_buf(), "a directory"),
        (fifo.clone(), "a fifo"),
    ] {
        for sub in ["dis", "stats", "verify", "run"] {
            let mut cmd = relaxvm();
            cmd.arg(sub).arg(&input);
            let (code, _, err) = finish(cmd);
            one_line_error(code, &err, &format!("expected a regular file, found {kind}"));
        }
        let mut cmd = relaxvm();
        cmd.args(["run", &text(dir.path()).display().to_string(), "--input"]).arg(&input);
        let (code, _, err) = finish(cmd);
        one_line_error(code, &err, kind);
    }
}

#[test]
fn inputs_over_the_size_limit_are_refused_and_the_limit_can_be_raised() {
    let dir = tempfile::tempdir().unwrap();
    let prog = text(dir.path());
    let mut cmd = relaxvm();
    cmd.args(["dis", "--max-input-size", "10"]).arg(&prog);
    let (code, _, err) = finish(cmd);
    one_line_error(code, &err, "more than the input size limit of 10 bytes (raise it with max_input_size= in Python, --max-input-size on the command line)");
    let mut cmd = relaxvm();
    cmd.args(["dis", "--max-input-size", "1000"]).arg(&prog);
    assert_eq!(finish(cmd).0, Some(0));
}

#[test]
fn an_output_that_is_an_input_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let prog = text(dir.path());
    let alias = dir.path().join("alias.txt");
    std::fs::hard_link(&prog, &alias).unwrap();
    for args in [vec!["asm", "-o"], vec!["dis", "-o"], vec!["link", "-o"]] {
        let mut cmd = relaxvm();
        cmd.args(&args).arg(&alias).arg(&prog);
        let (code, _, err) = finish(cmd);
        one_line_error(code, &err, "the output is the input file");
        assert_eq!(std::fs::read_to_string(&prog).unwrap(), PROG, "{args:?} changed its input");
    }
    let mut cmd = relaxvm();
    cmd.arg("run").arg(&prog).arg("-o").arg(&alias);
    let (code, _, err) = finish(cmd);
    one_line_error(code, &err, "the output is the input file");
    assert_eq!(std::fs::read_to_string(&prog).unwrap(), PROG, "run -o changed its input");
}

#[test]
fn outputs_are_written_whole_or_not_at_all() {
    // A failed write leaves the old file as it was, and no temporary file behind.
    let dir = tempfile::tempdir().unwrap();
    let prog = text(dir.path());
    let out = dir.path().join("out.rvx");
    let mut cmd = relaxvm();
    cmd.arg("asm").arg(&prog).arg("-o").arg(&out);
    assert_eq!(finish(cmd).0, Some(0));
    let before = std::fs::read(&out).unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "@main inputs=0:\n  bogus\n").unwrap();
    let mut cmd = relaxvm();
    cmd.arg("asm").arg(&bad).arg("-o").arg(&out);
    assert_eq!(finish(cmd).0, Some(1));
    assert_eq!(std::fs::read(&out).unwrap(), before);
    let mut cmd = relaxvm();
    cmd.arg("dis").arg(&out).arg("-o").arg(dir.path().join("prog2.txt"));
    assert_eq!(finish(cmd).0, Some(0));
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "temporary files left: {names:?}");
}

#[test]
fn files_that_are_not_ours_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("model.rvx");
    std::fs::write(&garbage, b"just some text\n").unwrap();
    let binary = dir.path().join("blob");
    std::fs::write(&binary, [0u8, 159, 146, 150, 7, 0, 0, 1]).unwrap();
    for input in [&garbage, &binary] {
        for sub in ["dis", "run", "verify"] {
            let mut cmd = relaxvm();
            cmd.arg(sub).arg(input);
            let (code, _, err) = finish(cmd);
            one_line_error(code, &err, "not a relaxvm executable");
        }
    }
}

#[test]
fn a_flipped_bit_in_a_binary_is_refused_before_running() {
    // One flip in the metadata, one in the tensor constant's data: both before anything runs
    // (a mapped load would only check the metadata; `--mmap` is the opt-in for that).
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("prog.txt");
    std::fs::write(
        &prog,
        ".const c[0] = tensor float32 (4,) [1.0, 1.0, 1.0, 1.0]\n\
         .packed vm.builtin.make_tuple\n@main inputs=0:\n  call  vm.builtin.make_tuple  in: c[0]  dst: %0\n  ret  %0\n",
    )
    .unwrap();
    let out = dir.path().join("prog.rvx");
    let mut cmd = relaxvm();
    cmd.arg("asm").arg(&prog).arg("-o").arg(&out);
    assert_eq!(finish(cmd).0, Some(0));
    let good = std::fs::read(&out).unwrap();
    let info = relaxvm::format::inspect(&good).unwrap();
    let data = info.sections.iter().find(|s| s.name == Some("tensor data")).unwrap().data.clone();
    let metadata = info.sections[0].data.start as usize + 1;
    for (at, what) in [(metadata, "checksum mismatch"), (data.start as usize + 1, "data checksum mismatch")] {
        let mut raw = good.clone();
        raw[at] ^= 0x10;
        std::fs::write(&out, raw).unwrap();
        for sub in ["run", "dis", "verify"] {
            let mut cmd = relaxvm();
            cmd.arg(sub).arg(&out);
            let (code, _, err) = finish(cmd);
            one_line_error(code, &err, what);
        }
    }
    // With --mmap, a flip in the data goes unseen by run: the documented trade-off.
    let mut cmd = relaxvm();
    cmd.args(["--mmap", "run"]).arg(&out);
    assert_eq!(finish(cmd).0, Some(0));
}

#[test]
fn outputs_onto_fifos_links_to_devices_and_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let prog = text(dir.path());
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let null = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    for (out, kind) in
        [(&fifo, "there is a fifo"), (&null, "a symbolic link to a character device"), (&sub, "there is a directory")]
    {
        for args in [vec!["asm", "-o"], vec!["dis", "-o"], vec!["run", "-o"]] {
            let mut cmd = relaxvm();
            cmd.arg(args[0]).arg(&prog).arg(args[1]).arg(out);
            let (code, _, err) = finish(cmd);
            one_line_error(code, &err, &format!("{kind}, not a regular file"));
        }
    }
    // Left as they were.
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::symlink_metadata(&null).unwrap().file_type().is_symlink());
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    // A link to a regular file: the file is replaced, the link stays.
    let target = dir.path().join("real.rvx");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.path().join("link.rvx");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut cmd = relaxvm();
    cmd.arg("asm").arg(&prog).arg("-o").arg(&link);
    assert_eq!(finish(cmd).0, Some(0));
    assert!(std::fs::read(&target).unwrap().starts_with(&relaxvm::format::MAGIC));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
}

#[test]
fn dash_writes_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let prog = text(dir.path());
    let mut cmd = relaxvm();
    cmd.arg("asm").arg(&prog).args(["-o", "-"]);
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout.starts_with(&relaxvm::format::MAGIC));
    let mut cmd = relaxvm();
    cmd.arg("run").arg(&prog).args(["main", "-o", "-"]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.starts_with(b"\x93NUMPY"), "{:?}", String::from_utf8_lossy(&out.stdout));
    assert!(!dir.path().join("-").exists());
}
