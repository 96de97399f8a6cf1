//! The command-line tool's refusals that no other test causes, one case per line: the files a
//! case writes, the arguments, and the whole one-line error it must print (exit status 1).

use assert_cmd::Command;
use std::path::Path;

/// Functions whose results the tool cannot save or print: a string, the VM context, a tuple
/// nested 65 deep, and a tensor of 65 dimensions (reshaped from a one-element tensor).
fn program() -> String {
    let mut deep = String::from("@deep inputs=0 regs=1:\n  call  vm.builtin.make_tuple  dst: %0\n");
    for _ in 0..65 {
        deep.push_str("  call  vm.builtin.make_tuple  in: %0  dst: %0\n");
    }
    deep.push_str("  ret  %0\n");
    format!(
        ".packed vm.builtin.make_tuple\n.packed vm.builtin.copy\n.packed vm.builtin.reshape\n\
         @same inputs=1 regs=1:\n  ret  %0\n\
         @context inputs=0 regs=1:\n  call  vm.builtin.copy  in: %vm  dst: %0\n  ret  %0\n\
         @many_dims inputs=2 regs=3:\n  call  vm.builtin.reshape  in: %0, %1  dst: %2\n  ret  %2\n\
         {deep}"
    )
}

/// `(file name, contents)` written into the case's directory; `{dir}` in the arguments and
/// the expected message stands for that directory.
type Files = &'static [(&'static str, &'static [u8])];

struct Case {
    files: Files,
    args: &'static [&'static str],
    error: &'static str,
}

const PROG: Files = &[("p.txt", b"")];
const ONES_65: &str = "shape:1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1";

const CASES: &[Case] = &[
    // An input named .rvx that is not the binary format: no fallback to the text form.
    Case {
        files: &[("model.rvx", b"@main inputs=0:\n ret %0\n")],
        args: &["run", "{dir}/model.rvx"],
        error: "{dir}/model.rvx: not a relaxvm executable (a .rvx file starts with the bytes 0x89 R V X)",
    },
    // Assembler source that is not UTF-8: the byte offset of the first bad byte.
    Case {
        files: &[("bad.txt", b"@main inputs=0:\n ret %0 \xff\n")],
        args: &["asm", "{dir}/bad.txt", "-o", "{dir}/bad.rvx"],
        error: "{dir}/bad.txt: expected UTF-8 text, found a byte that is not UTF-8 at offset 24",
    },
    // `-` (standard output) where a second file is written beside the printed report.
    Case {
        files: PROG,
        args: &["profile", "{dir}/p.txt", "--function", "same", "--arg", "1", "--trace", "-"],
        error: "--trace writes a file beside the report: give it a path (- is not one here)",
    },
    Case {
        files: PROG,
        args: &["trace", "{dir}/p.txt", "--function", "same", "--arg", "1", "--save", "-"],
        error: "--save writes a .npz file: give it a path (- is not one here)",
    },
    // Results that .npy or JSON cannot hold.
    Case {
        files: PROG,
        args: &["run", "{dir}/p.txt", "same", "str:hello", "-o", "{dir}/r.npy"],
        error: "the result is a str; only tensors, shapes, ints, floats and bools can be saved as .npy",
    },
    Case {
        files: PROG,
        args: &["run", "{dir}/p.txt", "context", "--json"],
        error: "the result is a vm_state, which has no JSON form",
    },
    Case {
        files: PROG,
        args: &["run", "{dir}/p.txt", "deep", "--json"],
        error: "the result is nested deeper than 64 tuples or holds more than 100000 items: too large for JSON",
    },
    Case {
        files: &[("p.txt", b""), ("one.npy", b"")],
        args: &["run", "{dir}/p.txt", "many_dims", "npy:{dir}/one.npy", ONES_65, "--json"],
        error: "a tensor of shape (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1) is too large for JSON (at most 16777216 elements and 64 dimensions): save it with -o result.npy",
    },
];

fn write_files(dir: &Path, files: Files) {
    for (name, contents) in files {
        let path = dir.join(name);
        match *name {
            // Empty placeholders: the shared program, and a one-element float32 tensor.
            "p.txt" if contents.is_empty() => std::fs::write(&path, program()).unwrap(),
            "one.npy" => relaxvm::npy::save(&relaxvm::Tensor::from_vec([1], vec![2.5f32]).unwrap(), &path).unwrap(),
            _ => std::fs::write(&path, contents).unwrap(),
        }
    }
}

#[test]
fn each_refusal_is_one_line_saying_what_was_expected_and_found() {
    let mut wrong = Vec::new();
    for case in CASES {
        let dir = tempfile::tempdir().unwrap();
        write_files(dir.path(), case.files);
        let d = dir.path().display().to_string();
        let args: Vec<String> = case.args.iter().map(|a| a.replace("{dir}", &d)).collect();
        let out = Command::cargo_bin("relaxvm").unwrap().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("error: {}\n", case.error.replace("{dir}", &d));
        if out.status.code() != Some(1) || err != want {
            wrong.push(format!("{args:?}\n  expected {want}  found    {err}  (status {:?})", out.status.code()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
