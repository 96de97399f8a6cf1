//! The `relaxvm` command-line tool, run as a process.

use assert_cmd::Command;
use relaxvm::npy;
use relaxvm::Tensor;
use std::path::{Path, PathBuf};

const SUM: &str = "\
.packed vm.builtin.int.add
.packed vm.builtin.int.lt

@sum inputs=1 regs=4 params=(n):
  call  vm.builtin.int.add  in: i0, i0  dst: %1
  call  vm.builtin.int.add  in: i0, i0  dst: %2
  call  vm.builtin.int.lt  in: %2, %0  dst: %3
  if  %3  4
  call  vm.builtin.int.add  in: %1, %2  dst: %1
  call  vm.builtin.int.add  in: %2, i1  dst: %2
  goto  -4
  ret  %1

@scale inputs=2 regs=3:
  call  vm.op.mul  in: %0, %1  dst: %2  loc(\"model.py\":7:3)
  ret  %2
.packed vm.op.mul
";

fn relaxvm() -> Command {
    Command::cargo_bin("relaxvm").unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command that must fail; returns its standard error, which must be one line.
fn failure(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

#[test]
fn help_documents_every_command() {
    let help = stdout(relaxvm().arg("--help"));
    for cmd in ["asm", "dis", "stats", "verify", "run", "profile", "trace", "link"] {
        assert!(help.contains(&format!("  {cmd} ")), "{help}");
    }
    let run = stdout(relaxvm().args(["run", "--help"]));
    assert!(run.contains(".npy") && run.contains("shape:32,16") && run.contains("--output"), "{run}");
    let asm = stdout(relaxvm().args(["asm", "--help"]));
    assert!(asm.contains("--strip") && asm.contains("--check"), "{asm}");
    let out = relaxvm().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn dis_and_stats_of_the_text_form() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(dir.path(), "sum.txt", SUM);
    assert_eq!(stdout(relaxvm().arg("dis").arg(&prog)), SUM);
    let py = stdout(relaxvm().args(["dis", "--python"]).arg(&prog));
    assert!(py.contains("with ib.function(\"sum\", num_inputs=1, param_names=[\"n\"]):"), "{py}");
    let out = dir.path().join("out.txt");
    relaxvm().arg("dis").arg(&prog).arg("-o").arg(&out).assert().success().stdout("");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), SUM);
    let stats = stdout(relaxvm().arg("stats").arg(&prog));
    assert!(stats.contains("Globals (#2): [sum, scale]") && stats.contains("Instructions (#10)"), "{stats}");
}

#[test]
fn run_prints_results_and_saves_npy() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(dir.path(), "sum.txt", SUM);
    assert_eq!(stdout(relaxvm().arg("run").arg(&prog).args(["sum", "10"])), "45\n");
    let x = dir.path().join("x.npy");
    npy::save(&Tensor::from_vec([3], vec![1.0f32, 2.0, -3.0]).unwrap(), &x).unwrap();
    let out = dir.path().join("y.npy");
    let printed = stdout(relaxvm().arg("run").arg(&prog).arg("scale").arg(&x).arg("-2").arg("-o").arg(&out));
    assert_eq!(printed, "tensor([-2.0, -4.0,  6.0], dtype=float32, shape=(3,))\n");
    let y = npy::load(&out).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![-2.0, -4.0, 6.0]);
    // JSON, printed or saved.
    let json = stdout(relaxvm().arg("run").arg(&prog).arg("scale").arg(&x).arg("-2").arg("--json"));
    assert_eq!(json, "{\"data\":[-2.0,-4.0,6.0],\"dtype\":\"float32\",\"shape\":[3]}\n");
    let saved = dir.path().join("y.json");
    relaxvm().arg("run").arg(&prog).args(["sum", "10", "-o"]).arg(&saved).assert().success().stdout("45\n");
    assert_eq!(std::fs::read_to_string(&saved).unwrap(), "45\n");
}

#[test]
fn verify_and_version_speak_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(
        dir.path(),
        "one.txt",
        ".packed vm.builtin.copy\n@main inputs=1:\n  call vm.builtin.copy in: %0 dst: %1\n  ret %1\n",
    );
    let ok = stdout(relaxvm().arg("verify").arg(&prog));
    assert!(ok.ends_with(": ok (1 function, 1 packed function, 0 constants, 2 instructions)\n"), "{ok}");
    assert_eq!(stdout(relaxvm().arg("--version")), format!("relaxvm {}\n", env!("CARGO_PKG_VERSION")));
    let help = stdout(relaxvm().args(["run", "--help"]));
    assert!(help.contains("a step is a call of a bytecode function or a") && help.contains("--json"), "{help}");
    let e = failure(relaxvm().arg("run").arg(&prog));
    assert!(e.contains("main: expected 1 argument, got 0"), "{e}");
}

#[test]
fn run_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(dir.path(), "sum.txt", SUM);
    let e = failure(relaxvm().arg("run").arg(&prog).args(["sum", "str:x"]));
    assert!(e.contains("vm.builtin.int.add") || e.contains("int"), "{e}");
    assert!(e.contains("in function \"sum\""), "{e}");
    let e = failure(relaxvm().arg("run").arg(&prog).args(["nope"]));
    assert!(e.contains(": unknown function \"nope\"; its functions are: "), "{e}");
    let e = failure(relaxvm().arg("run").arg(&prog).args(["sum", "100000000", "--max-steps", "1000"]));
    assert!(e.contains("step budget of 1000"), "{e}");
    let e = failure(relaxvm().arg("run").arg(&prog).args(["scale", "missing.npy", "1"]));
    assert!(e.contains("missing.npy"), "{e}");
    let packed = write(dir.path(), "p.txt", ".packed not.there\n@main inputs=0:\n call not.there dst: %0\n ret %0\n");
    let e = failure(relaxvm().arg("run").arg(&packed));
    assert!(e.contains("not.there"), "{e}");
}

#[test]
fn bad_input_files() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.txt", "@main inputs=1:\n  ret %0\n  bogus\n");
    let e = failure(relaxvm().arg("dis").arg(&bad));
    assert_eq!(e, format!("error: {}:3:3: expected .const, .packed, .entry, a function header `@name inputs=N:` or an instruction (call, ret, goto, if), found \"bogus\"\n", bad.display()));
    let e = failure(relaxvm().arg("stats").arg(dir.path().join("absent.rvx")));
    assert!(e.contains("absent.rvx"), "{e}");
    let binary_junk = dir.path().join("junk.bin");
    std::fs::write(&binary_junk, [0xff, 0xfe, 0x00, 0x01]).unwrap();
    let e = failure(relaxvm().arg("dis").arg(&binary_junk));
    assert!(e.contains("not a relaxvm executable (neither the binary format"), "{e}");
}

#[test]
fn verify_reports_ok_warnings_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(dir.path(), "sum.txt", SUM);
    let out = relaxvm().arg("verify").arg(&prog).output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}: ok (2 functions, 3 packed functions, 0 constants, 10 instructions)\n", prog.display())
    );
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));

    let warn = write(dir.path(), "w.txt", ".packed host.fn\n@main inputs=2:\n call host.fn in: %0 dst: %2\n ret %2\n");
    let out = relaxvm().arg("verify").arg(&warn).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        "warning: function \"main\": input %1 is never used\n\
         warning: packed function \"host.fn\" is not a builtin: the host must register it\n"
    );
    let out = relaxvm().arg("verify").arg("--strict").arg(&warn).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().last().unwrap(), format!("error: {}: 2 warnings with --strict", warn.display()));

    let unassigned = write(dir.path(), "u.txt", ".packed f\n@main inputs=1:\n if %0 2\n call f dst: %1\n ret %1\n");
    let e = failure(relaxvm().arg("verify").arg(&unassigned));
    assert_eq!(
        e,
        "error: function \"main\", instruction 2 (ret  %1): reads %1, which is not written on every path that reaches this instruction\n"
    );
}

#[test]
fn asm_writes_binary_that_every_command_reads() {
    let dir = tempfile::tempdir().unwrap();
    let text = write(dir.path(), "sum.txt", SUM);
    // default output: the input with the extension .rvx
    relaxvm().arg("asm").arg(&text).assert().success().stdout("").stderr("");
    let rvx = dir.path().join("sum.rvx");
    let bytes = std::fs::read(&rvx).unwrap();
    assert!(bytes.starts_with(&relaxvm::format::MAGIC));
    assert_eq!(stdout(relaxvm().arg("dis").arg(&rvx)), SUM);
    assert_eq!(stdout(relaxvm().arg("run").arg(&rvx).args(["sum", "5"])), "10\n");
    let stats = stdout(relaxvm().arg("stats").arg(&rvx));
    assert!(stats.contains("Globals (#2): [sum, scale]"), "{stats}");
    let version = relaxvm::format::CURRENT_VERSION;
    assert!(stats.contains(&format!("File: {} bytes, format version {version}", bytes.len())), "{stats}");
    assert!(stdout(relaxvm().arg("verify").arg(&rvx)).contains(": ok (2 functions"));

    // --strip drops locations and parameter names; --format-version writes older files
    let stripped = dir.path().join("stripped.rvx");
    relaxvm()
        .arg("asm")
        .arg(&text)
        .arg("-o")
        .arg(&stripped)
        .args(["--strip", "--format-version", "1"])
        .assert()
        .success();
    let dis = stdout(relaxvm().arg("dis").arg(&stripped));
    assert!(!dis.contains("loc(") && !dis.contains("params="), "{dis}");
    assert!(stdout(relaxvm().arg("stats").arg(&stripped)).contains("format version 1"));
    let e = failure(relaxvm().arg("asm").arg(&text).arg("-o").arg(&stripped).args(["--format-version", "99"]));
    assert!(e.contains("version") && e.contains("99"), "{e}");

    // dis of the binary is the text, so asm . dis is the identity on files
    let again = dir.path().join("again.txt");
    relaxvm().arg("dis").arg(&rvx).arg("-o").arg(&again).assert().success();
    relaxvm().arg("asm").arg(&again).arg("-o").arg(dir.path().join("again.rvx")).assert().success();
    assert_eq!(std::fs::read(dir.path().join("again.rvx")).unwrap(), bytes);
}

#[test]
fn asm_errors() {
    let dir = tempfile::tempdir().unwrap();
    let rvx_named = write(dir.path(), "prog.rvx", SUM);
    let e = failure(relaxvm().arg("asm").arg(&rvx_named));
    assert!(e.contains("already ends in .rvx: pass -o OUTPUT"), "{e}");
    let bad = write(dir.path(), "bad.txt", "@main inputs=1 regs=1:\n  ret %1\n");
    let e = failure(relaxvm().arg("asm").arg(&bad));
    assert_eq!(e, format!("error: {}:2:7: register %1 is outside the register file of 1 (regs=1)\n", bad.display()));
    assert!(!dir.path().join("bad.rvx").exists());
    // --check runs the dataflow check the assembler alone does not
    let unchecked = write(dir.path(), "u.txt", ".packed f\n@main inputs=2:\n if %0 2\n call f dst: %2\n ret %2\n");
    relaxvm().arg("asm").arg(&unchecked).assert().success();
    let e = failure(relaxvm().arg("asm").arg("--check").arg(&unchecked).arg("-o").arg(dir.path().join("u2.rvx")));
    assert!(e.contains("instruction 2 (ret  %2): reads %2, which is not written on every path"), "{e}");
    let unused = write(dir.path(), "unused.txt", ".packed f\n@main inputs=2:\n call f in: %0 dst: %2\n ret %2\n");
    relaxvm()
        .arg("asm")
        .arg("--check")
        .arg(&unused)
        .assert()
        .success()
        .stderr("warning: function \"main\": input %1 is never used\n");
}

#[test]
fn corrupt_binaries_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let text = write(dir.path(), "sum.txt", SUM);
    let rvx = dir.path().join("sum.rvx");
    relaxvm().arg("asm").arg(&text).arg("-o").arg(&rvx).assert().success();
    let mut bytes = std::fs::read(&rvx).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x5a;
    let corrupt = dir.path().join("corrupt.rvx");
    std::fs::write(&corrupt, &bytes).unwrap();
    let e = failure(relaxvm().arg("verify").arg(&corrupt));
    assert!(e.contains("corrupt.rvx"), "{e}");
    std::fs::write(&corrupt, &bytes[..n / 3]).unwrap();
    let e = failure(relaxvm().arg("dis").arg(&corrupt));
    assert!(e.contains("corrupt.rvx"), "{e}");
}

const MAIN: &str = "\
.entry main
.const c[0] = int 10
.packed helper

@main inputs=0 regs=2:
  call  helper  in: i4  dst: %0
  call  vm.builtin.int.add  in: %0, c[0]  dst: %1
  ret  %1
.packed vm.builtin.int.add

@unused inputs=0 regs=1:
  call  vm.builtin.int.add  in: c[0], c[0]  dst: %0
  ret  %0
";

const HELPER: &str = "\
@helper inputs=1 regs=2 sig=(y: i64) -> i64:
  call  vm.builtin.int.add  in: %0, %0  dst: %1
  ret  %1
.packed vm.builtin.int.add
";

#[test]
fn link_merges_files_and_run_defaults_to_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let main = write(dir.path(), "main.txt", MAIN);
    let helper = write(dir.path(), "helper.txt", HELPER);
    let helper_rvx = dir.path().join("helper.rvx");
    relaxvm().arg("asm").arg(&helper).arg("-o").arg(&helper_rvx).assert().success();
    // Text and binary inputs mix; the declared helper becomes a direct call.
    let out = dir.path().join("out.rvx");
    relaxvm().arg("link").arg(&main).arg(&helper_rvx).arg("-o").arg(&out).assert().success().stdout("");
    let text = stdout(relaxvm().arg("dis").arg(&out));
    assert!(
        text.starts_with(".entry main\n") && text.contains("\n@helper inputs=1 regs=2 sig=(y: i64) -> i64:\n"),
        "{text}"
    );
    assert!(!text.contains(".packed helper"), "{text}");
    assert_eq!(stdout(relaxvm().arg("run").arg(&out)), "18\n");
    assert_eq!(stdout(relaxvm().arg("run").arg(&out).args(["helper", "3"])), "6\n");
    assert!(stdout(relaxvm().arg("verify").arg(&out)).contains(": ok (3 functions, 1 packed function,"));
    // --drop-unreachable, --entry, --keep
    let small = dir.path().join("small.rvx");
    relaxvm().arg("link").arg(&main).arg(&helper).arg("-o").arg(&small).arg("--drop-unreachable").assert().success();
    let text = stdout(relaxvm().arg("dis").arg(&small));
    assert!(!text.contains("@unused"), "{text}");
    assert_eq!(stdout(relaxvm().arg("run").arg(&small)), "18\n");
    let args = ["--entry", "helper", "--drop-unreachable", "--keep", "unused"];
    relaxvm().arg("link").arg(&main).arg(&helper).arg("-o").arg(&small).args(args).assert().success();
    let text = stdout(relaxvm().arg("dis").arg(&small));
    assert!(text.starts_with(".entry helper\n") && text.contains("@unused") && !text.contains("@main"), "{text}");
    // Older format versions cannot hold the signature or the entry: a warning says so.
    let old = dir.path().join("old.rvx");
    let out_old =
        relaxvm().arg("link").arg(&main).arg(&helper).arg("-o").arg(&old).args(["--format-version", "2"]).output();
    let err = String::from_utf8(out_old.unwrap().stderr).unwrap();
    assert!(err.starts_with("warning: format version 2 has no place for signatures or the entry function"), "{err}");
    assert!(!stdout(relaxvm().arg("dis").arg(&old)).contains("sig="));
    // An unresolved declaration stays packed: linking main alone gives a program the host
    // must complete.
    let alone = dir.path().join("alone.rvx");
    relaxvm().arg("link").arg(&main).arg("-o").arg(&alone).assert().success();
    let e = failure(relaxvm().arg("run").arg(&alone));
    assert!(e.contains("helper"), "{e}");
}

#[test]
fn link_errors_name_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let helper = write(dir.path(), "helper.txt", HELPER);
    let again = write(dir.path(), "again.txt", HELPER);
    let out = dir.path().join("out.rvx");
    let e = failure(relaxvm().arg("link").arg(&helper).arg(&again).arg("-o").arg(&out));
    assert_eq!(
        e,
        format!(
            "error: function \"helper\" is defined twice: in module 0 ({:?}) and in module 1 ({:?})\n",
            helper.display().to_string(),
            again.display().to_string()
        )
    );
    assert!(!out.exists());
    let e = failure(relaxvm().arg("link").arg(&helper).arg("-o").arg(&out).args(["--entry", "nope"]));
    assert!(e.contains("the entry function \"nope\" is not a bytecode function of any module"), "{e}");
    let e = failure(relaxvm().arg("link").arg(&helper).arg("-o").arg(&out).arg("--drop-unreachable"));
    assert!(e.contains("needs an entry function"), "{e}");
    let missing = relaxvm().arg("link").arg("-o").arg(&out).output().unwrap();
    assert_eq!(missing.status.code(), Some(2), "inputs are required");
}

#[test]
fn run_reads_arguments_as_the_signature_says() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(
        dir.path(),
        "sig.txt",
        "@half sig=(x: f64, label: str) -> any:\n  ret %0\n@plain inputs=1:\n  ret %0\n@nomain inputs=0:\n  call half in: i1, i2 dst: %0\n  ret %0\n",
    );
    assert_eq!(stdout(relaxvm().arg("run").arg(&prog).args(["half", "2", "5"])), "2.0\n");
    assert_eq!(stdout(relaxvm().arg("run").arg(&prog).args(["plain", "2"])), "2\n");
    let e = failure(relaxvm().arg("run").arg(&prog).args(["half", "2", "int:5"]));
    assert!(e.contains("expected str for parameter \"label\" of half, found int"), "{e}");
    let e = failure(relaxvm().arg("run").arg(&prog).args(["half", "x", "5"]));
    assert!(e.contains("argument \"x\" is not a number (the parameter's type is f64)"), "{e}");
    let e = failure(relaxvm().arg("run").arg(&prog).args(["half", "1"]));
    assert!(e.contains("half: expected 2 arguments, got 1"), "{e}");
    let e = failure(relaxvm().arg("run").arg(&prog));
    assert!(e.contains("no function named and no entry function"), "{e}");
}

#[test]
fn profile_prints_the_calls_as_table_csv_json_and_trace() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(dir.path(), "sum.txt", SUM);
    let table = stdout(relaxvm().arg("profile").arg(&prog).args(["--function", "sum", "--arg", "10", "--repeat", "3"]));
    assert!(table.starts_with("profile of \"sum\": "), "{table}");
    assert!(table.contains("(vm overhead)") && table.contains("vm.builtin.int.add"), "{table}");
    let csv = stdout(relaxvm().arg("profile").arg(&prog).args(["--function", "sum", "--arg", "10", "--csv"]));
    let count = |name: &str| {
        let line = csv.lines().find(|l| l.starts_with(&format!("{name},"))).unwrap_or_else(|| panic!("{csv}"));
        line.split(',').nth(2).unwrap().parse::<u64>().unwrap()
    };
    // two adds before the loop, two per iteration; one comparison per test of the loop
    assert_eq!((count("vm.builtin.int.add"), count("vm.builtin.int.lt")), (22, 11), "{csv}");
    let trace = dir.path().join("trace.json");
    let json = stdout(
        relaxvm()
            .arg("profile")
            .arg(&prog)
            .args(["--function", "scale", "--arg", "float:2", "--arg", "-3", "--json"])
            .arg("--trace")
            .arg(&trace),
    );
    assert!(json.contains("\"function\":\"scale\"") && json.contains("\"name\":\"vm.op.mul\""), "{json}");
    let events = std::fs::read_to_string(&trace).unwrap();
    assert!(events.contains("\"traceEvents\"") && events.contains("\"caller\":\"scale\""), "{events}");
    let e = failure(relaxvm().arg("profile").arg(&prog));
    assert!(e.contains("no function named and no entry function"), "{e}");
    let out = relaxvm().arg("profile").arg(&prog).args(["--function", "sum", "--repeat", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--repeat"));
}

#[test]
fn trace_lists_saves_and_compares_the_steps() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(dir.path(), "sum.txt", SUM);
    let listing = stdout(relaxvm().arg("trace").arg(&prog).args(["--function", "sum", "--arg", "3"]));
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines[0], "trace of \"sum\": 12 steps", "{listing}");
    assert_eq!(lines[1], "     0  sum pc 0: vm.builtin.int.add(0, 0) -> 0", "{listing}");
    assert_eq!(lines[3], "     2  sum pc 2: vm.builtin.int.lt(0, 3) -> True", "{listing}");
    let saved = dir.path().join("run.npz");
    let quiet =
        stdout(relaxvm().arg("trace").arg(&prog).args(["--function", "sum", "--arg", "3", "-q", "--save"]).arg(&saved));
    assert_eq!(quiet, "");
    let same = stdout(
        relaxvm().arg("trace").arg(&prog).args(["--function", "sum", "--arg", "3", "-q", "--compare"]).arg(&saved),
    );
    assert_eq!(same, format!("no step differs from {}\n", saved.display()));
    // One more iteration: the first comparison's result differs (1 < 4 is true both times,
    // but 3 < 3 is false in the saved run, 3 < 4 true in this one).
    let e = failure(
        relaxvm().arg("trace").arg(&prog).args(["--function", "sum", "--arg", "4", "-q", "--compare"]).arg(&saved),
    );
    assert!(e.contains("step 11 (sum pc 2: vm.builtin.int.lt): result differs: bool False vs bool True"), "{e}");
    let e = failure(
        relaxvm().arg("trace").arg(&prog).args(["--function", "sum", "--compare"]).arg(dir.path().join("none.npz")),
    );
    assert!(e.contains("cannot read trace"), "{e}");
    // A failing run prints and saves what it traced, then the error.
    let out = relaxvm()
        .arg("trace")
        .arg(&prog)
        .args(["--function", "scale", "--arg", "str:x", "--arg", "2", "--save"])
        .arg(&saved)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("     0  scale pc 0: vm.op.mul(\"x\", 2) raised"), "{listing}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("vm.op.mul"));
    assert!(saved.exists());
    let e =
        failure(relaxvm().arg("trace").arg(&prog).args(["--function", "sum", "--rtol=-1", "--compare"]).arg(&saved));
    assert!(e.contains("non-negative"), "{e}");
}

#[test]
fn diagnostics_go_to_stderr_at_the_level_relaxvm_log_names() {
    let dir = tempfile::tempdir().unwrap();
    let prog = write(dir.path(), "sum.txt", SUM);
    let old = dir.path().join("old.rvx");
    relaxvm().arg("asm").arg(&prog).arg("-o").arg(&old).args(["--format-version", "3"]).assert().success();
    let out = relaxvm().env("RELAXVM_LOG", "info").arg("run").arg(&old).args(["sum", "4"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "6\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("reading format version 3"), "{err}");
    let quiet = relaxvm().env_remove("RELAXVM_LOG").arg("run").arg(&old).args(["sum", "4"]).output().unwrap();
    assert!(quiet.status.success() && quiet.stderr.is_empty(), "{quiet:?}");
}
