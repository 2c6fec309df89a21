//! Reading an ELF shared object's exported data symbols from its bytes, so
//! that a `use:` naming a symbol the library lacks can be answered with the
//! provider symbols it does have. Safe code: only the file's bytes are read.

/// The names of the defined, global or weak data objects of at least
/// `min_size` bytes in the dynamic symbol table (`.dynsym`) of an ELF file
/// (32- or 64-bit, either byte order), in table order. `None` for anything
/// that is not such a file (a Mach-O or PE library) or has no such table.
pub(crate) fn exported_objects(bytes: &[u8], min_size: u64) -> Option<Vec<String>> {
    parse(bytes, min_size)
}

/// The fixed-size fields of an ELF file, in its byte order.
pub(crate) struct Fields<'a> {
    /// The file's bytes.
    pub(crate) bytes: &'a [u8],
    /// Big-endian (`EI_DATA` 2).
    pub(crate) big: bool,
}

impl Fields<'_> {
    /// The field of `len` bytes at `at`; `None` past the end of the bytes.
    pub(crate) fn get(&self, at: u64, len: usize) -> Option<u64> {
        let start = usize::try_from(at).ok()?;
        let raw = self.bytes.get(start..start.checked_add(len)?)?;
        let mut value = 0u64;
        for i in 0..len {
            let byte = if self.big { raw[i] } else { raw[len - 1 - i] };
            value = value << 8 | u64::from(byte);
        }
        Some(value)
    }
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
        let Some(rest) = strings.get(name_at..) else { continue };
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        if let Ok(name) = std::str::from_utf8(&rest[..end]) {
            if !name.is_empty() {
                names.push(name.to_owned());
            }
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::exported_objects;

    #[test]
    fn anything_but_elf_has_no_symbols() {
        assert_eq!(exported_objects(b"not a library", 8), None);
        assert_eq!(exported_objects(b"\x7fELF\x02\x01", 8), None);
        assert_eq!(exported_objects(&[], 8), None);
    }
}
