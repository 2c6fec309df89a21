//! Reading a PE file (a Windows `.dll`) from its bytes: whether it holds
//! every part its headers declare, and its exported data symbols, so that a
//! `use:` naming a symbol the library lacks can be answered with the
//! provider symbols it does have. The Windows counterpart of
//! [`crate::elf`]. Safe code: only the file's bytes are read.
//!
//! The layout read here: the DOS header (`MZ`, and at offset 0x3c the
//! offset of the PE header), the signature `PE\0\0`, the COFF file header
//! (20 bytes), the optional header (PE32 or PE32+; its size in the COFF
//! header) with its data directories, then the section table (40 bytes a
//! section).

use crate::bytes::{Fields, NotWhole as Problem};

/// A little-endian field of `len` bytes at `at`; `None` past the end.
fn field(bytes: &[u8], at: u64, len: usize) -> Option<u64> {
    Fields { bytes, big: false }.get(at, len)
}

/// Whether the bytes start with the DOS magic every PE file has.
pub(crate) fn is_pe(bytes: &[u8]) -> bool {
    bytes.starts_with(b"MZ")
}

/// One entry of the section table.
#[derive(Debug, Clone)]
struct Section {
    /// Its name as written (8 bytes, NUL-padded), e.g. `.text`.
    name: String,
    /// Its address in memory, relative to the image base.
    virtual_address: u64,
    /// Its size in memory.
    virtual_size: u64,
    /// Its size in the file.
    raw_size: u64,
    /// Its offset in the file.
    raw_offset: u64,
    /// `IMAGE_SCN_*` flags.
    characteristics: u64,
}

/// The headers of a PE file whose header parts are all present.
struct Headers {
    /// Where the optional header starts.
    optional_at: u64,
    /// PE32+ (64-bit) rather than PE32.
    wide: bool,
    sections: Vec<Section>,
}

/// Reads the headers, checking that every header part is inside `bytes`.
fn headers(bytes: &[u8]) -> Result<Headers, Problem> {
    let len = bytes.len() as u64;
    let needs = |what: &str, end: u64| Problem::Short(format!("{what} needs {end} bytes"));
    if len < 0x40 {
        return Err(needs("the DOS header", 0x40));
    }
    let pe_at = field(bytes, 0x3c, 4).unwrap_or_default();
    // The signature, then the COFF file header.
    let coff_at = pe_at + 4;
    if len < coff_at + 20 {
        return Err(needs(&format!("the PE header at offset {pe_at}"), coff_at + 20));
    }
    if bytes.get(pe_at as usize..coff_at as usize) != Some(&b"PE\0\0"[..]) {
        return Err(Problem::Damaged(format!(
            "there is no PE signature at offset {pe_at}, where its DOS header says, so the header is damaged"
        )));
    }
    let section_count = field(bytes, coff_at + 2, 2).unwrap_or_default();
    let optional_size = field(bytes, coff_at + 16, 2).unwrap_or_default();
    let optional_at = coff_at + 20;
    let table_at = optional_at + optional_size;
    let table_end = table_at + section_count * 40;
    if len < table_end {
        return Err(needs(
            &format!("the optional header and section table ({section_count} sections at offset {table_at})"),
            table_end,
        ));
    }
    let wide = match field(bytes, optional_at, 2) {
        Some(0x10b) => false,
        Some(0x20b) => true,
        Some(magic) => {
            return Err(Problem::Damaged(format!(
                "the optional header's magic is {magic:#x}, neither 0x10b (PE32) nor 0x20b (PE32+), so the header is damaged"
            )))
        }
        None => return Err(needs("the optional header", optional_at + 2)),
    };
    let sections = (0..section_count)
        .map(|index| {
            let at = table_at + index * 40;
            let get = |offset: u64| field(bytes, at + offset, 4).unwrap_or_default();
            let raw = bytes.get(at as usize..at as usize + 8).unwrap_or_default();
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            Section {
                name: String::from_utf8_lossy(&raw[..end]).into_owned(),
                virtual_size: get(8),
                virtual_address: get(12),
                raw_size: get(16),
                raw_offset: get(20),
                characteristics: get(36),
            }
        })
        .collect();
    Ok(Headers { optional_at, wide, sections })
}

/// Checks that a PE file's bytes hold its headers (`SizeOfHeaders`) and
/// every section's data (`PointerToRawData + SizeOfRawData` within the
/// file); the error says what is missing and how many bytes it needs.
pub(crate) fn check_whole(bytes: &[u8]) -> Result<(), Problem> {
    let headers = headers(bytes)?;
    let len = bytes.len() as u64;
    // SizeOfHeaders is at the same offset in PE32 and PE32+.
    let header_size = field(bytes, headers.optional_at + 60, 4).unwrap_or_default();
    if header_size > len {
        return Err(Problem::Short(format!("the headers (SizeOfHeaders) need {header_size} bytes")));
    }
    for (index, section) in headers.sections.iter().enumerate() {
        if section.raw_size == 0 {
            continue; // uninitialised data only: nothing in the file
        }
        let end = section.raw_offset.saturating_add(section.raw_size);
        if end > len {
            return Err(Problem::Short(format!(
                "section {index} ({}, {} bytes at offset {}) needs {end} bytes",
                section.name, section.raw_size, section.raw_offset
            )));
        }
    }
    Ok(())
}

/// The names the export table of a PE file gives to data: exports whose
/// address lies in a section that is not executable, with at least
/// `min_size` bytes of that section from it, in the table's (sorted)
/// order. `None` for anything that is not a whole PE file with an export
/// table.
pub(crate) fn exported_objects(bytes: &[u8], min_size: u64) -> Option<Vec<String>> {
    if !is_pe(bytes) {
        return None;
    }
    let headers = headers(bytes).ok()?;
    let get = |at: u64, len: usize| field(bytes, at, len);
    // The data directories follow the optional header's fixed part.
    let (count_at, directories_at) =
        if headers.wide { (headers.optional_at + 108, 112) } else { (headers.optional_at + 92, 96) };
    if get(count_at, 4)? == 0 {
        return None;
    }
    let export_rva = get(headers.optional_at + directories_at, 4)?;
    let export_size = get(headers.optional_at + directories_at + 4, 4)?;
    if export_rva == 0 {
        return None;
    }
    let section_of = |rva: u64| {
        headers
            .sections
            .iter()
            .find(|s| rva >= s.virtual_address && rva < s.virtual_address + s.virtual_size.max(s.raw_size))
    };
    let offset_of = |rva: u64| {
        let section = section_of(rva)?;
        let offset = rva - section.virtual_address;
        (offset < section.raw_size).then_some(section.raw_offset + offset)
    };
    let directory = offset_of(export_rva)?;
    let name_count = get(directory + 24, 4)?;
    let functions = offset_of(get(directory + 28, 4)?)?;
    let names = offset_of(get(directory + 32, 4)?)?;
    let ordinals = offset_of(get(directory + 36, 4)?)?;
    const IMAGE_SCN_MEM_EXECUTE: u64 = 0x2000_0000;
    let mut found = Vec::new();
    for index in 0..name_count {
        let ordinal = get(ordinals + index * 2, 2)?;
        let rva = get(functions + ordinal * 4, 4)?;
        // An address inside the export directory forwards to another DLL.
        if rva >= export_rva && rva < export_rva + export_size {
            continue;
        }
        let Some(section) = section_of(rva) else { continue };
        if section.characteristics & IMAGE_SCN_MEM_EXECUTE != 0
            || rva + min_size > section.virtual_address + section.virtual_size
        {
            continue;
        }
        let Some(at) = offset_of(get(names + index * 4, 4)?) else { continue };
        if let Some(name) = crate::bytes::name_at(bytes, at as usize) {
            found.push(name.to_owned());
        }
    }
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::{check_whole, exported_objects};
    use crate::bytes::NotWhole as Problem;

    /// A PE32+ file of two sections: `.text` (executable, 0x200 bytes at
    /// 0x200) and `.data` (0x200 bytes at 0x400), whose export table (in
    /// `.data`) names `Code` (in `.text`), `Descriptor` (16 bytes of
    /// `.data`) and `Tail` (4 bytes before the end of `.data`).
    fn dll() -> Vec<u8> {
        let mut b = vec![0u8; 0x600];
        let put = |b: &mut Vec<u8>, at: usize, value: u64, len: usize| {
            b[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
        };
        b[..2].copy_from_slice(b"MZ");
        put(&mut b, 0x3c, 0x80, 4);
        b[0x80..0x84].copy_from_slice(b"PE\0\0");
        let coff = 0x84;
        put(&mut b, coff + 2, 2, 2); // two sections
        put(&mut b, coff + 16, 240, 2); // SizeOfOptionalHeader
        let optional = coff + 20;
        put(&mut b, optional, 0x20b, 2);
        put(&mut b, optional + 60, 0x200, 4); // SizeOfHeaders
        put(&mut b, optional + 108, 16, 4); // NumberOfRvaAndSizes
        put(&mut b, optional + 112, 0x2000, 4); // export table RVA
        put(&mut b, optional + 116, 0x100, 4); // and size
        let table = optional + 240;
        for (i, (name, rva, offset, flags)) in
            [(&b".text"[..], 0x1000u64, 0x200u64, 0x6000_0020u64), (b".data", 0x2000, 0x400, 0xc000_0040)]
                .into_iter()
                .enumerate()
        {
            let at = table + i * 40;
            b[at..at + name.len()].copy_from_slice(name);
            put(&mut b, at + 8, 0x200, 4); // VirtualSize
            put(&mut b, at + 12, rva, 4);
            put(&mut b, at + 16, 0x200, 4); // SizeOfRawData
            put(&mut b, at + 20, offset, 4);
            put(&mut b, at + 36, flags, 4);
        }
        // The export directory at .data+0 (file 0x400): three names.
        let dir = 0x400;
        put(&mut b, dir + 20, 3, 4); // NumberOfFunctions
        put(&mut b, dir + 24, 3, 4); // NumberOfNames
        put(&mut b, dir + 28, 0x2100, 4); // AddressOfFunctions
        put(&mut b, dir + 32, 0x2120, 4); // AddressOfNames
        put(&mut b, dir + 36, 0x2140, 4); // AddressOfNameOrdinals
        let functions = [0x1010u64, 0x2180, 0x21fc];
        let names: [&[u8]; 3] = [b"Code\0", b"Descriptor\0", b"Tail\0"];
        let mut name_rva = 0x2150u64;
        for (i, (function, name)) in functions.iter().zip(names).enumerate() {
            put(&mut b, 0x500 + i * 4, *function, 4);
            put(&mut b, 0x520 + i * 4, name_rva, 4);
            put(&mut b, 0x540 + i * 2, i as u64, 2);
            let at = (name_rva - 0x2000 + 0x400) as usize;
            b[at..at + name.len()].copy_from_slice(name);
            name_rva += name.len() as u64;
        }
        b
    }

    #[test]
    fn data_exports_are_listed_code_and_short_ones_are_not() {
        assert_eq!(exported_objects(&dll(), 8), Some(vec!["Descriptor".to_owned()]));
        assert_eq!(exported_objects(&dll(), 4), Some(vec!["Descriptor".to_owned(), "Tail".to_owned()]));
        assert_eq!(exported_objects(b"\x7fELF\x02\x01", 8), None);
        assert_eq!(exported_objects(b"MZ", 8), None);
    }

    #[test]
    fn a_pe_file_cut_short_says_which_part_is_missing() {
        let whole = dll();
        assert_eq!(check_whole(&whole), Ok(()));
        let short = |s: &str| Err(Problem::Short(s.into()));
        assert_eq!(
            check_whole(&whole[..0x5ff]),
            short("section 1 (.data, 512 bytes at offset 1024) needs 1536 bytes")
        );
        assert_eq!(
            check_whole(&whole[..0x3ff]),
            short("section 0 (.text, 512 bytes at offset 512) needs 1024 bytes")
        );
        assert_eq!(check_whole(&whole[..0x1ff]), short("the headers (SizeOfHeaders) need 512 bytes"));
        assert_eq!(
            check_whole(&whole[..0x100]),
            short("the optional header and section table (2 sections at offset 392) needs 472 bytes")
        );
        assert_eq!(check_whole(&whole[..0x86]), short("the PE header at offset 128 needs 152 bytes"));
        assert_eq!(check_whole(&whole[..0x20]), short("the DOS header needs 64 bytes"));
        let mut damaged = whole.clone();
        damaged[0x80] = b'X';
        let Err(Problem::Damaged(reason)) = check_whole(&damaged) else { panic!("damaged") };
        assert!(reason.contains("no PE signature at offset 128"), "{reason}");
        let mut damaged = whole;
        damaged[0x98] = 7;
        let Err(Problem::Damaged(reason)) = check_whole(&damaged) else { panic!("damaged") };
        assert!(reason.contains("magic is 0x207"), "{reason}");
    }
}
