//! Reading an ELF shared object from its bytes: whether it holds every
//! segment its headers declare, and its exported data symbols, so that a
//! `use:` naming a symbol the library lacks can be answered with the
//! provider symbols it does have. Safe code: only the file's bytes are read.

use crate::bytes::{Fields, NotWhole};

/// The first bytes of every ELF file.
pub(crate) const MAGIC: &[u8] = b"\x7fELF";

/// The names of the defined, global or weak data objects of at least
/// `min_size` bytes in the dynamic symbol table (`.dynsym`) of an ELF file
/// (32- or 64-bit, either byte order), in table order. `None` for anything
/// that is not such a file (a Mach-O or PE library) or has no such table.
pub(crate) fn exported_objects(bytes: &[u8], min_size: u64) -> Option<Vec<String>> {
    parse(bytes, min_size)
}

/// Checks that an ELF file's bytes hold its own headers and every loadable
/// segment (`PT_LOAD`: `p_offset + p_filesz` within the file); the error
/// says what is missing and how many bytes it needs. Bytes that do not start
/// with the ELF magic are not ELF: not checked here.
/// Parsed by hand from the bytes: 32- or 64-bit, either byte order.
pub(crate) fn check_whole(bytes: &[u8]) -> Result<(), NotWhole> {
    const EI_NIDENT: usize = 16;
    let Some(ident) = bytes.get(..EI_NIDENT) else {
        return Err(NotWhole::Short(format!("the ELF identification needs {EI_NIDENT} bytes")));
    };
    let wide = match ident[4] {
        1 => false,
        2 => true,
        class => {
            return Err(NotWhole::Damaged(format!(
                "the ELF class byte is {class}, neither 1 (32-bit) nor 2 (64-bit), so the header is damaged"
            )))
        }
    };
    let big = match ident[5] {
        1 => false,
        2 => true,
        data => {
            return Err(NotWhole::Damaged(format!(
                "the ELF data byte is {data}, neither 1 (little-endian) nor 2 (big-endian), so the header is damaged"
            )))
        }
    };
    // A field of `len` bytes at `at`, in the file's byte order; `None` past
    // the end of the bytes.
    let fields = Fields { bytes, big };
    let field = |at: u64, len: usize| fields.get(at, len);
    let word = if wide { 8 } else { 4 };
    let header_size: u64 = if wide { 64 } else { 52 };
    let needs = |what: &str, end: u64| NotWhole::Short(format!("{what} needs {end} bytes"));
    if (bytes.len() as u64) < header_size {
        return Err(needs("the ELF header", header_size));
    }
    // e_phoff follows e_ident, e_type, e_machine, e_version and e_entry.
    let phoff_at = 24 + word as u64;
    let phoff = field(phoff_at, word).unwrap_or_default();
    // e_phentsize and e_phnum follow e_phoff, e_shoff, e_flags and e_ehsize.
    let phentsize_at = phoff_at + 2 * word as u64 + 4 + 2;
    let phentsize = field(phentsize_at, 2).unwrap_or_default();
    let phnum = field(phentsize_at + 2, 2).unwrap_or_default();
    let entry_size: u64 = if wide { 56 } else { 32 };
    if phnum == 0 {
        return Ok(()); // no program headers: nothing to map; the OS loader refuses it
    }
    if phentsize != entry_size {
        return Err(NotWhole::Damaged(format!(
            "its ELF header says program headers are {phentsize} bytes each, not {entry_size}, so the header is damaged"
        )));
    }
    // phnum <= 0xffff and entry_size <= 56: only the sum can overflow.
    let table_end = phoff.saturating_add(phnum * entry_size);
    if table_end > bytes.len() as u64 {
        return Err(needs(
            &format!("the program header table ({phnum} entries at offset {phoff})"),
            table_end,
        ));
    }
    const PT_LOAD: u64 = 1;
    for index in 0..phnum {
        let entry = phoff + index * entry_size;
        let (offset_at, filesz_at) = if wide { (entry + 8, entry + 32) } else { (entry + 4, entry + 16) };
        if field(entry, 4) != Some(PT_LOAD) {
            continue;
        }
        let offset = field(offset_at, word).unwrap_or_default();
        let filesz = field(filesz_at, word).unwrap_or_default();
        let end = offset.saturating_add(filesz);
        if end > bytes.len() as u64 {
            return Err(needs(
                &format!("loadable segment {index} (PT_LOAD, {filesz} bytes at offset {offset})"),
                end,
            ));
        }
    }
    Ok(())
}

fn parse(bytes: &[u8], min_size: u64) -> Option<Vec<String>> {
    if !bytes.starts_with(b"\x7fELF") {
        return None;
    }
    let wide = match bytes.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let big = match bytes.get(5)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let reader = Fields { bytes, big };
    let field = |at: u64, len: usize| reader.get(at, len);
    let word = if wide { 8 } else { 4 };
    // e_shoff follows e_ident, e_type, e_machine, e_version, e_entry, e_phoff.
    let shoff = field(24 + 2 * word as u64, word)?;
    // e_shentsize and e_shnum follow e_flags, e_ehsize, e_phentsize, e_phnum.
    let shentsize_at = 24 + 3 * word as u64 + 4 + 2 + 2 + 2;
    let shentsize = field(shentsize_at, 2)?;
    let shnum = field(shentsize_at + 2, 2)?;
    // A section header: sh_name, sh_type (4 bytes each), sh_flags, sh_addr,
    // sh_offset, sh_size (words), sh_link (4 bytes) ...
    let section = |index: u64| -> Option<(u64, u64, u64, u64, u64)> {
        let at = shoff.checked_add(index.checked_mul(shentsize)?)?;
        let kind = field(at + 4, 4)?;
        let offset = field(at + 8 + 2 * word as u64, word)?;
        let size = field(at + 8 + 3 * word as u64, word)?;
        let link = field(at + 8 + 4 * word as u64, 4)?;
        let entsize = field(at + 8 + 4 * word as u64 + 8 + word as u64, word)?;
        Some((kind, offset, size, link, entsize))
    };
    const SHT_DYNSYM: u64 = 11;
    let (_, symbols_at, symbols_size, strings_index, entry_size) =
        (0..shnum).filter_map(section).find(|(kind, ..)| *kind == SHT_DYNSYM)?;
    let (_, strings_at, strings_size, _, _) = section(strings_index)?;
    let strings =
        bytes.get(usize::try_from(strings_at).ok()?..usize::try_from(strings_at + strings_size).ok()?)?;
    let entry_size = if entry_size == 0 {
        if wide {
            24
        } else {
            16
        }
    } else {
        entry_size
    };
    let mut names = Vec::new();
    for index in 0..symbols_size / entry_size {
        let at = symbols_at + index * entry_size;
        // Elf64_Sym: name, info, other, shndx, value, size;
        // Elf32_Sym: name, value, size, info, other, shndx.
        let (info, shndx, size) = if wide {
            (field(at + 4, 1)?, field(at + 6, 2)?, field(at + 16, 8)?)
        } else {
            (field(at + 12, 1)?, field(at + 14, 2)?, field(at + 8, 4)?)
        };
        const STT_OBJECT: u64 = 1;
        let (binding, kind) = (info >> 4, info & 0xf);
        if kind != STT_OBJECT || !(binding == 1 || binding == 2) || shndx == 0 || size < min_size {
            continue;
        }
        let name_at = usize::try_from(field(at, 4)?).ok()?;
        if let Some(name) = crate::bytes::name_at(strings, name_at) {
            names.push(name.to_owned());
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::{check_whole, exported_objects};
    use crate::bytes::NotWhole;

    #[test]
    fn anything_but_elf_has_no_symbols() {
        assert_eq!(exported_objects(b"not a library", 8), None);
        assert_eq!(exported_objects(b"\x7fELF\x02\x01", 8), None);
        assert_eq!(exported_objects(&[], 8), None);
    }

    /// A 32-bit big-endian ELF file of `len` bytes with one `PT_LOAD`
    /// segment of `filesz` bytes at offset 0x100.
    fn elf32_be(len: usize, filesz: u32) -> Vec<u8> {
        let mut bytes = vec![0u8; len.max(52 + 32)];
        bytes[..6].copy_from_slice(b"\x7fELF\x01\x02");
        bytes[28..32].copy_from_slice(&52u32.to_be_bytes()); // e_phoff
        bytes[42..44].copy_from_slice(&32u16.to_be_bytes()); // e_phentsize
        bytes[44..46].copy_from_slice(&1u16.to_be_bytes()); // e_phnum
        bytes[52..56].copy_from_slice(&1u32.to_be_bytes()); // p_type = PT_LOAD
        bytes[56..60].copy_from_slice(&0x100u32.to_be_bytes()); // p_offset
        bytes[68..72].copy_from_slice(&filesz.to_be_bytes()); // p_filesz
        bytes.truncate(len);
        bytes
    }

    #[test]
    fn the_whole_check_reads_32_bit_big_endian_files() {
        let short = |s: &str| Err(NotWhole::Short(s.into()));
        assert_eq!(check_whole(&elf32_be(0x180, 0x80)), Ok(()));
        assert_eq!(
            check_whole(&elf32_be(0x17f, 0x80)),
            short("loadable segment 0 (PT_LOAD, 128 bytes at offset 256) needs 384 bytes")
        );
        assert_eq!(
            check_whole(&elf32_be(60, 0x80)),
            short("the program header table (1 entries at offset 52) needs 84 bytes")
        );
        assert_eq!(check_whole(&elf32_be(40, 0x80)), short("the ELF header needs 52 bytes"));
        let mut damaged = elf32_be(0x180, 0x80);
        damaged[42] = 1;
        let Err(NotWhole::Damaged(reason)) = check_whole(&damaged) else { panic!("damaged") };
        assert!(reason.contains("program headers are 288 bytes each"), "{reason}");
        damaged[4] = 7;
        let Err(NotWhole::Damaged(reason)) = check_whole(&damaged) else { panic!("damaged") };
        assert!(reason.contains("ELF class byte is 7"), "{reason}");
    }
}
