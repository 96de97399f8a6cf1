//! The damages of the version tables (DT_VERSYM, DT_VERDEF and its names, DT_VERNEED and its
//! versions): in the table's form (see cases.rs), each list misaligned, ended early or going on
//! past its count, and entries that say another version or hash.

use super::library::*;

pub(crate) const VERSION_CASES: &[Case] = &[
    case(
        "a version index past the tables",
        Lib::C,
        |b| vec![(section(b, ".gnu.version").offset + 2, le16(9))],
        &["DT_VERSYM: symbol 1 has version index 9, but the version tables define indices up to"],
    ),
    case(
        "version definitions without DT_VERSYM",
        Lib::C,
        |b| vec![(dyn_entry(b, DT_VERSYM), le64(DT_DEBUG))],
        &["invalid ELF shared library: version definitions or requirements without DT_VERSYM"],
    ),
    case(
        "a misaligned version requirement list",
        Lib::C,
        |b| vec![(dyn_entry(b, DT_VERNEED) + 8, le64(u64_at(b, dyn_entry(b, DT_VERNEED) + 8) + 2))],
        &["DT_VERNEED entry 0 at", "is not 4-byte aligned"],
    ),
    case(
        "a version definition list ending early",
        Lib::C,
        |b| vec![(dyn_entry(b, 0x6fff_fffd) + 8, le64(1))],
        &["DT_VERDEF entry 0 of 1 has next offset", ": the list must end (0) exactly at its last entry"],
    ),
    // Each list of the version tables misaligned, and ended early or late: the definitions
    // (DT_VERDEF, 0x6fff_fffc), their names, the requirements and their versions.
    case(
        "a misaligned version definition list",
        Lib::C,
        |b| vec![(dyn_entry(b, 0x6fff_fffc) + 8, le64(u64_at(b, dyn_entry(b, 0x6fff_fffc) + 8) + 2))],
        &["DT_VERDEF entry 0 at", "is not 4-byte aligned"],
    ),
    case(
        "a misaligned list of a version definition's names",
        Lib::C,
        |b| {
            let d = section(b, ".gnu.version_d").offset;
            vec![(d + 12, le32(u32_at(b, d + 12) + 2))]
        },
        &["DT_VERDEF names entry 0 at", "is not 4-byte aligned"],
    ),
    case(
        "a version definition's names going on past their count",
        Lib::C,
        |b| {
            // The first definition's names: (name, next) pairs from its aux offset; the last
            // one's next made 8.
            let d = section(b, ".gnu.version_d").offset;
            let (count, aux) = (u16_at(b, d + 6) as usize, u32_at(b, d + 12) as usize);
            let mut at = d + aux;
            for _ in 1..count {
                at += u32_at(b, at + 4) as usize;
            }
            vec![(at + 4, le32(8))]
        },
        &["DT_VERDEF names entry", " of ", "has next offset 8: the list must end (0) exactly at its last entry"],
    ),
    case(
        "a version requirement list going on past its count",
        Lib::C,
        |b| {
            // The requirements in order (next at +12); the last one's next made 16.
            let r = section(b, ".gnu.version_r").offset;
            let count = u64_at(b, dyn_entry(b, 0x6fff_ffff) + 8) as usize;
            let mut at = r;
            for _ in 1..count {
                at += u32_at(b, at + 12) as usize;
            }
            vec![(at + 12, le32(16))]
        },
        &["DT_VERNEED entry", " of ", "has next offset 16: the list must end (0) exactly at its last entry"],
    ),
    case(
        "a misaligned list of a requirement's versions",
        Lib::C,
        |b| {
            let r = section(b, ".gnu.version_r").offset;
            vec![(r + 8, le32(u32_at(b, r + 8) + 2))]
        },
        &["DT_VERNEED versions entry 0 at", "is not 4-byte aligned"],
    ),
    case(
        "a requirement's versions going on past their count",
        Lib::C,
        |b| {
            // The first requirement's versions (next at +12); the last one's next made 16.
            let r = section(b, ".gnu.version_r").offset;
            let (count, aux) = (u16_at(b, r + 2) as usize, u32_at(b, r + 8) as usize);
            let mut at = r + aux;
            for _ in 1..count {
                at += u32_at(b, at + 12) as usize;
            }
            vec![(at + 12, le32(16))]
        },
        &["DT_VERNEED versions entry", " of ", "has next offset 16: the list must end (0) exactly at its last entry"],
    ),
    case(
        "a version definition of version 2",
        Lib::C,
        |b| vec![(section(b, ".gnu.version_d").offset, le16(2))],
        &[
            "DT_VERDEF entry at",
            ": version 2, index 1,",
            "names: expected version 1, an index below 0x8000, at least one name",
        ],
    ),
    case(
        "a version definition whose hash is not its name's",
        Lib::C,
        |b| vec![(section(b, ".gnu.version_d").offset + 8, le32(0))],
        &["DT_VERDEF entry at", ": hash 0x0, but its name", "hashes to 0x"],
    ),
];
