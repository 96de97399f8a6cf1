//! The error codes' numbers and names: what `rvm_error_code_name` and `rvm_error_new` answer
//! for every number agrees with the enum that include/relaxvm.h declares (the C side's list).

use relaxvm_capi::error::{rvm_error_code_name, rvm_error_free, rvm_error_get_code, rvm_error_message, rvm_error_new};
use std::ffi::CStr;

/// The `NAME = NUMBER,` lines of `enum rvm_error_code` in include/relaxvm.h.
fn header_codes() -> Vec<(String, u32)> {
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../include/relaxvm.h")).unwrap();
    let start = header.find("enum rvm_error_code {").expect("the enum in the header");
    let body = &header[start..start + header[start..].find('}').unwrap()];
    body.lines()
        .filter_map(|l| l.trim().strip_suffix(','))
        .filter_map(|l| l.split_once(" = "))
        .map(|(name, n)| (name.to_string(), n.parse().unwrap()))
        .collect()
}

fn name(code: u32) -> String {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(rvm_error_code_name(code)) }.to_str().unwrap().to_string()
}

#[test]
fn every_code_of_the_header_has_its_name_and_number() {
    let codes = header_codes();
    assert_eq!(codes.len(), 22, "{codes:?}");
    for (n, (header_name, number)) in codes.iter().enumerate() {
        assert_eq!(*number as usize, n, "the header numbers the codes 0, 1, 2...");
        assert_eq!(&name(*number), header_name);
        if *number == 0 {
            continue;
        }
        // An error object made with the number keeps it.
        // SAFETY: a NUL-terminated message; the object is freed once.
        unsafe {
            let e = rvm_error_new(*number, c"m".as_ptr());
            assert_eq!(rvm_error_get_code(e) as u32, *number);
            assert_eq!(CStr::from_ptr(rvm_error_message(e)).to_str().unwrap(), "m");
            rvm_error_free(e);
        }
    }
    for unknown in [22, 100, u32::MAX] {
        assert_eq!(name(unknown), "RVM_ERROR_UNKNOWN_CODE");
        // SAFETY: as above.
        unsafe {
            let e = rvm_error_new(unknown, std::ptr::null());
            assert_eq!(name(rvm_error_get_code(e) as u32), "RVM_ERROR_OTHER");
            rvm_error_free(e);
        }
    }
    // RVM_OK is not an error's code: an error made with it is "other".
    // SAFETY: as above.
    unsafe {
        let e = rvm_error_new(0, std::ptr::null());
        assert_eq!(name(rvm_error_get_code(e) as u32), "RVM_ERROR_OTHER");
        rvm_error_free(e);
    }
}
