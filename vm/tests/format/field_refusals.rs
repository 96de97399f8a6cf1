//! Refusals of single fields of crafted files, each with its whole message: messages built by
//! one helper of the decoder for several fields (a 32-bit field, a string index) or shared in
//! their words with another message, caused here through a file so that a test names the field
//! and the place, not only the helper's words.

use super::common::*;

// The bytes named are offsets in the file: in `craft(_, &minimal())` the strings section's data
// starts at byte 13 and the functions section's at byte 23.
const STRINGS_AT: usize = 13;
const FUNCTIONS_AT: usize = 23;

/// `minimal()` with its functions section replaced.
fn with_functions(functions: Vec<u8>) -> Vec<(u8, Vec<u8>)> {
    let mut sections = minimal();
    sections[1] = (FUNCTIONS, functions);
    sections
}

#[test]
fn a_32_bit_field_of_a_function_past_2_32_names_the_field() {
    // main's start instruction is 2^32.
    let start = cat(&[&vint(2), &vint(1), &vint(1 << 32), &vint(1), &vint(1), &vint(1), &vint(1 << 1)]);
    // main's argument count is 2^32.
    let args = cat(&[&vint(2), &vint(1), &vint(0), &vint(1), &vint(1 << 32), &vint(1), &vint(1 << 1)]);
    // main's register count is 2^32 + 5.
    let regs = cat(&[&vint(2), &vint(1), &vint(0), &vint(1), &vint(1), &vint((1 << 32) + 5), &vint(1 << 1)]);
    assert_eq!(
        [
            load_err(&craft(2, &with_functions(start))),
            load_err(&craft(2, &with_functions(args))),
            load_err(&craft(2, &with_functions(regs))),
        ],
        [
            "malformed executable file: functions section at byte 25: start instruction 4294967296 does not fit in 32 bits",
            "malformed executable file: functions section at byte 27: argument count 4294967296 does not fit in 32 bits",
            "malformed executable file: functions section at byte 28: register count 4294967301 does not fit in 32 bits",
        ]
    );
}

#[test]
fn a_function_name_past_the_strings_names_the_index() {
    // main's name is string 5 of 2.
    let functions = cat(&[&vint(2), &vint(5 << 1 | 1), &vint(0), &vint(1), &vint(1), &vint(1), &vint(1 << 1)]);
    assert_eq!(
        load_err(&craft(2, &with_functions(functions))),
        "malformed executable file: functions section at byte 24: string index 5 out of range (there are 2)"
    );
}

#[test]
fn a_string_that_is_not_utf8_names_its_byte() {
    let mut sections = minimal();
    // "main" and "f", with main's third byte not UTF-8.
    let mut bytes = strings(&["main", "f"]);
    let last = bytes.len() - 3;
    bytes[last] = 0xFF;
    sections[0] = (STRINGS, bytes);
    assert_eq!(
        load_err(&craft(2, &sections)),
        format!("malformed executable file: strings section at byte {}: string is not UTF-8", STRINGS_AT + last)
    );
}

#[test]
fn a_signature_nesting_past_the_limit_is_refused_at_its_byte() {
    // main: no parameters, a result of 64 nested lists of any: the 65th level (the last byte)
    // is one too deep.
    let mut signature = cat(&[&vint(1), &vint(0), &vint(0)]);
    // After the functions (7 bytes): the constants (a 2-byte header, 1 byte), the instructions
    // (2 and 2), then the signatures' own 2-byte header.
    let deepest = FUNCTIONS_AT + 7 + (2 + 1) + (2 + 2) + 2 + signature.len() + 64;
    signature.extend(std::iter::repeat_n(0x07, 64));
    signature.push(0x00);
    let mut sections = minimal();
    sections.push((SIGNATURES, signature));
    assert_eq!(
        load_err(&craft(3, &sections)),
        format!("malformed executable file: signatures section at byte {deepest}: types nest more than 64 deep")
    );
}

/// Counts read by the cursor's one `count` helper, through the fields of several sections: each
/// names its field (the helper's message alone cannot tell which caller a test reached).
#[test]
fn counts_past_their_section_name_the_field() {
    // A functions section claiming 50 functions in its 6 remaining bytes.
    let functions_count =
        with_functions(cat(&[&vint(50), &vint(1), &vint(0), &vint(1), &vint(1), &vint(1), &vint(1 << 1)]));
    // A strings section claiming 9 strings in its 7 remaining bytes.
    let mut strings_count = minimal();
    strings_count[0] = (STRINGS, cat(&[&vint(9), &strings(&["main", "f"])[1..]]));
    // main's instruction count is 2^32.
    let instructions =
        with_functions(cat(&[&vint(2), &vint(1), &vint(0), &vint(1 << 32), &vint(1), &vint(1), &vint(1 << 1)]));
    // Version 3 signatures: 50 of them in 2 bytes; then one with 40 parameters in 1 byte.
    let mut signatures = minimal();
    signatures.push((SIGNATURES, cat(&[&vint(50), &vint(0), &vint(0)])));
    let mut parameters = minimal();
    parameters.push((SIGNATURES, cat(&[&vint(1), &vint(0), &vint(40), &[0x00]])));
    let sig_at = FUNCTIONS_AT + 7 + (2 + 1) + (2 + 2) + 2;
    assert_eq!(
        [
            load_err(&craft(2, &functions_count)),
            load_err(&craft(2, &strings_count)),
            load_err(&craft(2, &instructions)),
            load_err(&craft(3, &signatures)),
            load_err(&craft(3, &parameters)),
        ],
        [
            format!(
                "malformed executable file: functions section at byte {FUNCTIONS_AT}: function count 50 cannot fit in the 6 bytes left in the section"
            ),
            format!(
                "malformed executable file: strings section at byte {STRINGS_AT}: string count 9 cannot fit in the 7 bytes left in the section"
            ),
            "malformed executable file: functions section at byte 26: instruction count 4294967296 does not fit in 32 bits"
                .to_string(),
            format!(
                "malformed executable file: signatures section at byte {sig_at}: signature count 50 cannot fit in the 2 bytes left in the section"
            ),
            format!(
                "malformed executable file: signatures section at byte {}: parameter count 40 cannot fit in the 1 bytes left in the section",
                sig_at + 2
            ),
        ]
    );
}
