//! The tensor cache builtins (`vm.builtin.tensor_cache.*`) against caches TVM 0.27 wrote (the
//! fixtures under `tests/data/tensor_cache/`), hand-written ones and hostile ones.

#[path = "support/tvm_compat.rs"]
mod tvm_compat;

use relaxvm::{DataType, ErrorKind, Result, Value};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use tvm_compat::{call, err, parts, t};

/// Serializes the tests that use the process-wide cache (they clear and reload it).
fn cache_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn fixture(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tensor_cache").join(sub)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn load(path: &Path) -> Result<Value> {
    call("vm.builtin.tensor_cache.load", &[Value::str(path.to_str().unwrap()), 1.into(), 0.into()])
}

fn get(name: &str) -> Value {
    call("vm.builtin.tensor_cache.get", &[Value::str(name)]).unwrap()
}

#[test]
fn tvm_written_caches_load_like_tvm() {
    let _g = cache_lock();
    for sub in ["raw", "bf16"] {
        call("vm.builtin.tensor_cache.clear", &[]).unwrap();
        load(&fixture(sub)).unwrap();
        let expected = std::fs::read_to_string(fixture(&format!("expected_{sub}.txt"))).unwrap();
        let mut n = 0;
        for line in expected.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let got = get(f[0]);
            let t = got.as_tensor().unwrap_or_else(|_| panic!("{sub}: {} missing", f[0]));
            assert_eq!(t.dtype().name(), f[1], "{sub} {}", f[0]);
            let dims: Vec<i64> =
                if f[2] == "scalar" { vec![] } else { f[2].split('x').map(|d| d.parse().unwrap()).collect() };
            assert_eq!(t.shape().to_vec(), dims, "{sub} {}", f[0]);
            assert_eq!(hex(&t.contiguous_bytes().unwrap()), f[3], "{sub} {}", f[0]);
            n += 1;
        }
        assert_eq!(n, 6);
        let all = call("vm.builtin.param_array_from_cache", &[Value::str("param"), Value::Int(-1)]).unwrap();
        assert_eq!(all.as_tuple().unwrap().len(), 6);
    }
}

/// A cache directory written by the test: `records` is the JSON of the shard records.
fn write_cache(tag: &str, shard: &[u8], records: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tensor_cache_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("s0.bin"), shard).unwrap();
    std::fs::write(dir.join("tensor-cache.json"), format!("{{\"metadata\": {{}}, \"records\": {records}}}")).unwrap();
    dir
}

fn shard_json(nbytes: usize, recs: &str) -> String {
    format!("[{{\"dataPath\": \"s0.bin\", \"format\": \"raw-shard\", \"nbytes\": {nbytes}, \"records\": [{recs}]}}]")
}

fn rec(name: &str, shape: &str, dtype: &str, format: &str, nbytes: i64, off: i64) -> String {
    format!("{{\"name\": \"{name}\", \"shape\": {shape}, \"dtype\": \"{dtype}\", \"format\": \"{format}\", \"nbytes\": {nbytes}, \"byteOffset\": {off}}}")
}

#[test]
fn hand_written_cache_loads() {
    let _g = cache_lock();
    let mut shard = Vec::new();
    for x in [1.0f32, -2.5] {
        shard.extend_from_slice(&x.to_ne_bytes());
    }
    shard.extend_from_slice(&0x3fc0u16.to_ne_bytes()); // bf16 1.5, stored as f32-to-bf16
    let recs = [
        rec("hw_a", "[2]", "float32", "raw", 8, 0),
        rec("hw_b", "[1, 1]", "float32", "f32-to-bf16", 2, 8),
        rec("hw_empty", "[0, 3]", "float32", "raw", 0, 10),
    ]
    .join(", ");
    let dir = write_cache("ok", &shard, &shard_json(shard.len(), &recs));
    load(&dir).unwrap();
    assert_eq!(parts(&get("hw_a")).2, vec![1.0, -2.5]);
    assert_eq!(parts(&get("hw_b")), (vec![1, 1], DataType::F32, vec![1.5]));
    assert_eq!(parts(&get("hw_empty")).0, vec![0, 3]);
    let by_name = call(
        "vm.builtin.param_array_from_cache_by_name",
        &[Value::tuple(vec![Value::str("hw_b"), Value::str("hw_a")])],
    )
    .unwrap();
    assert_eq!(parts(&by_name.as_tuple().unwrap()[1]).2, vec![1.0, -2.5]);
    let unpacked = call("vm.builtin.param_array_from_cache_by_name_unpacked", &[Value::str("hw_a")]).unwrap();
    assert!(
        unpacked.as_tuple().unwrap()[0].same_object(&get("hw_a"))
            || unpacked.as_tuple().unwrap()[0].content_eq(&get("hw_a"))
    );
}

#[test]
fn hostile_caches_are_clean_errors() {
    let _g = cache_lock();
    let shard = vec![0u8; 16];
    let cases: Vec<(&str, String, &str)> = vec![
        ("bad_json", "[{".to_string(), "malformed"),
        ("not_list", "3".to_string(), "malformed"),
        ("outside", shard_json(16, &rec("x", "[4]", "float32", "raw", 16, 8)), "outside the shard"),
        ("neg_off", shard_json(16, &rec("x", "[1]", "float32", "raw", 4, -4)), "negative byteOffset"),
        ("nbytes", shard_json(16, &rec("x", "[3]", "float32", "raw", 16, 0)), "needs 12"),
        ("huge", shard_json(16, &rec("x", "[4611686018427387904, 2]", "float32", "raw", 16, 0)), "too large"),
        ("neg_dim", shard_json(16, &rec("x", "[-1]", "float32", "raw", 0, 0)), "invalid shape"),
        ("odd_bf16", shard_json(16, &rec("x", "[2]", "float32", "f32-to-bf16", 3, 0)), "needs 4"),
        ("dtype", shard_json(16, &rec("x", "[1]", "float7", "raw", 4, 0)), "float7"),
        (
            "shard_len",
            shard_json(99, &rec("x", "[1]", "float32", "raw", 4, 0)),
            "Encountered an corrupted parameter shard: the record says 99 bytes but the file has 16. It means it is \
             not downloaded completely or downloading is interrupted. Please try to download again.",
        ),
        ("shard_fmt", shard_json(16, "").replace("raw-shard", "zip"), "Only `raw-shard` format is supported, found \"zip\""),
        ("missing_file", shard_json(16, "").replace("s0.bin", "nope.bin"), "nope.bin"),
        (
            "overlap",
            shard_json(16, &[rec("x", "[8]", "uint8", "raw", 8, 0), rec("y", "[8]", "uint8", "raw", 8, 4)].join(", ")),
            "parameter \"y\" (bytes 4..12) overlaps parameter \"x\" (bytes 0..8): the records of a shard must not share \
             bytes",
        ),
        (
            "same_file",
            {
                // One shard file named twice: what the load keeps would no longer be bounded by
                // the files' sizes.
                let one = shard_json(16, &rec("x", "[4]", "uint8", "raw", 4, 0));
                let one = &one[1..one.len() - 1];
                format!("[{one}, {}]", one.replace("\"x\"", "\"z\""))
            },
            "\"s0.bin\" is the same file as the earlier shard \"s0.bin\"",
        ),
        (
            "bool_bytes",
            shard_json(16, &rec("x", "[1]", "bool", "raw", 1, 0)),
            // TVM copies such a byte as is; a Rust bool must be 0 or 1.
            "0 or 1",
        ),
    ];
    for (tag, json, want) in cases {
        let mut data = shard.clone();
        if tag == "bool_bytes" {
            data[0] = 7;
        }
        let dir = write_cache(tag, &data, &json);
        let e = load(&dir).map(|_| ()).unwrap_err();
        assert!(!matches!(e.kind(), ErrorKind::Panic(_)), "{tag}: {e}");
        let s = e.to_string();
        assert!(s.contains("vm.builtin.tensor_cache.load") && s.contains(want), "{tag}: {s}");
    }
    let e = load(Path::new("/nonexistent/relaxvm/cache")).unwrap_err().to_string();
    assert!(e.contains("tensor-cache.json"), "{e}");
    let n = "vm.builtin.tensor_cache.load";
    let unsupported = |code: i64| format!("{n}: unsupported device type code {code}: only cpu (1) is available");
    assert_eq!(err(n, &[Value::str("."), 2.into(), 0.into()]), unsupported(2));
    assert_eq!(err(n, &[Value::str("."), (1i64 << 40).into(), 0.into()]), unsupported(1 << 40));
    assert!(err(n, &[Value::str("."), 1.into(), (-1).into()]).contains("device id"));
    assert!(err(n, &[Value::Int(1), 1.into(), 0.into()]).contains(n));
}

#[test]
fn later_shard_failure_keeps_earlier_shards() {
    let _g = cache_lock();
    call("vm.builtin.tensor_cache.clear", &[]).unwrap();
    let data = 9i32.to_ne_bytes();
    let first = format!(
        "{{\"dataPath\": \"s0.bin\", \"format\": \"raw-shard\", \"nbytes\": 4, \"records\": [{}]}}",
        rec("ks_a", "[1]", "int32", "raw", 4, 0)
    );
    let second = format!(
        "{{\"dataPath\": \"s0.bin\", \"format\": \"raw-shard\", \"nbytes\": 4, \"records\": [{}]}}",
        rec("ks_b", "[2]", "int32", "raw", 8, 0)
    );
    let dir = write_cache("partial", &data, &format!("[{first}, {second}]"));
    let e = load(&dir).unwrap_err().to_string();
    assert!(e.contains("Error when loading parameters from s0.bin"), "{e}");
    assert_eq!(parts(&get("ks_a")).2, vec![9.0]);
    assert!(matches!(get("ks_b"), Value::Null));
}

#[test]
fn cache_update_get_remove_and_param_arrays() {
    let _g = cache_lock();
    let upd = "vm.builtin.tensor_cache.update";
    let x = t(&[1], vec![1i32]);
    let y = t(&[1], vec![2i32]);
    call(upd, &[Value::str("cu_0"), x.clone()]).unwrap();
    let e = err(upd, &[Value::str("cu_0"), y.clone()]);
    assert!(e.contains("Name cu_0 already exists in the cache"), "{e}");
    assert!(err(upd, &[Value::str("cu_0"), y.clone(), Value::Bool(false)]).contains("already exists"));
    call(upd, &[Value::str("cu_0"), y.clone(), Value::Bool(true)]).unwrap();
    assert!(get("cu_0").same_object(&y));
    call(upd, &[Value::str("cu_1"), x.clone()]).unwrap();
    let pa = "vm.builtin.param_array_from_cache";
    assert_eq!(call(pa, &[Value::str("cu"), 2.into()]).unwrap().as_tuple().unwrap().len(), 2);
    assert_eq!(call(pa, &[Value::str("cu"), (-1).into()]).unwrap().as_tuple().unwrap().len(), 2);
    assert_eq!(call(pa, &[Value::str("cu"), (-5).into()]).unwrap().as_tuple().unwrap().len(), 0);
    assert!(err(pa, &[Value::str("cu"), 3.into()]).contains("Cannot find cu_2 in cache"));
    let bn = "vm.builtin.param_array_from_cache_by_name";
    assert!(err(bn, &[Value::tuple(vec![Value::str("cu_9")])]).contains("Cannot find parameter in cache: cu_9"));
    assert!(err(bn, &[Value::tuple(vec![Value::Int(1)])]).contains(bn));
    assert!(err(bn, &[Value::str("cu_0")]).contains(bn));
    let un = "vm.builtin.param_array_from_cache_by_name_unpacked";
    assert_eq!(call(un, &[]).unwrap().as_tuple().unwrap().len(), 0);
    assert!(err(un, &[Value::str("cu_0"), Value::Int(1)]).contains("argument 1"));
    call("vm.builtin.tensor_cache.remove", &[Value::str("cu_0")]).unwrap();
    call("vm.builtin.tensor_cache.remove", &[Value::str("cu_0")]).unwrap();
    assert!(matches!(get("cu_0"), Value::Null));
    assert!(err(upd, &[Value::str("z"), Value::Int(1)]).contains(upd));
    assert!(err("vm.builtin.tensor_cache.get", &[Value::Int(1)]).contains("tensor_cache.get"));
    call("vm.builtin.tensor_cache.clear", &[]).unwrap();
    assert!(matches!(get("cu_1"), Value::Null));
    assert!(err("vm.builtin.tensor_cache.clear", &[Value::Null]).contains("tensor_cache.clear"));
}
