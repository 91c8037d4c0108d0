//! Opening an ELF file: its DWARF sections (decompressed, and relocated for
//! relocatable objects), its executable sections and its function symbols.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;

use memmap2::{Mmap, UncheckedAdvice};
use object::{
    Object, ObjectSection, ObjectSymbol, RelocationKind, RelocationTarget, SectionFlags,
    SectionIndex, SymbolKind,
};

use crate::ranges::{CodeFilter, Span};

/// Where the synthetic layout of a relocatable object's sections begins.
const REL_BASE: u64 = 0x1000;

/// An ELF file mapped into memory.
pub struct Mapped {
    map: Mmap,
}

impl Mapped {
    pub fn open(path: &str) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
        // SAFETY: the file is only read; a concurrent writer would be a user error.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| format!("cannot map {path}: {e}"))?;
        Ok(Mapped { map })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Give back the pages read so far (`MADV_DONTNEED`): they leave this
    /// process's resident set and stay in the page cache, so a later read
    /// of them faults them back in with the same bytes.
    pub fn release(&self) {
        // SAFETY: the mapping is private and read-only; dropping its pages
        // loses nothing, every later access reads the file again.
        let _ = unsafe { self.map.unchecked_advise(UncheckedAdvice::DontNeed) };
    }
}

/// Everything the DWARF walk needs from the container file.
pub struct Loaded<'data> {
    pub sections: HashMap<&'static str, Cow<'data, [u8]>>,
    pub little_endian: bool,
    pub code: CodeFilter,
    pub symbols: HashMap<u64, &'data [u8]>,
}

/// The DWARF sections gimli may ask for.
pub const DEBUG_SECTIONS: &[&str] = &[
    ".debug_abbrev",
    ".debug_addr",
    ".debug_aranges",
    ".debug_info",
    ".debug_line",
    ".debug_line_str",
    ".debug_ranges",
    ".debug_rnglists",
    ".debug_str",
    ".debug_str_offsets",
];

/// Open `data` as ELF/DWARF.  `chosen` names the `.symtab` indices whose
/// addresses and names go into `Loaded::symbols`; `None`: every function symbol.
pub fn load<'data>(data: &'data [u8], chosen: Option<&[usize]>) -> Result<Loaded<'data>, String> {
    let file = object::File::parse(data).map_err(|e| format!("not an ELF/object file: {e}"))?;
    let relocatable = file.kind() == object::ObjectKind::Relocatable;
    let bases = if relocatable {
        rel_layout(&file)
    } else {
        HashMap::new()
    };
    let mut sections = HashMap::new();
    for &name in DEBUG_SECTIONS {
        let Some(section) = file.section_by_name(name) else {
            continue;
        };
        let mut bytes = section
            .uncompressed_data()
            .map_err(|e| format!("cannot decompress {name}: {e}"))?;
        if relocatable {
            relocate(&file, &section, &bases, bytes.to_mut())?;
        }
        sections.insert(name, bytes);
    }
    Ok(Loaded {
        sections,
        little_endian: file.is_little_endian(),
        code: CodeFilter::new(code_sections(&file, &bases)),
        symbols: match chosen {
            None => function_symbols(&file, &bases),
            Some(indices) => chosen_symbols(&file, &bases, indices),
        },
    })
}

fn is_alloc(section: &object::Section<'_, '_>) -> bool {
    match section.flags() {
        SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_ALLOC) != 0,
        _ => section.address() != 0,
    }
}

fn is_exec(section: &object::Section<'_, '_>) -> bool {
    match section.flags() {
        SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0,
        _ => section.kind() == object::SectionKind::Text,
    }
}

/// Distinct addresses for the allocated sections of a relocatable object,
/// whose sections all start at 0 (hot `.text` and `.text.unlikely` would
/// otherwise overlap).
fn rel_layout(file: &object::File<'_>) -> HashMap<SectionIndex, u64> {
    let mut next = REL_BASE;
    let mut bases = HashMap::new();
    for section in file.sections().filter(is_alloc) {
        let align = section.align().max(1);
        next = next.div_ceil(align) * align;
        bases.insert(section.index(), next);
        next += section.size().max(1);
    }
    bases
}

fn section_base(bases: &HashMap<SectionIndex, u64>, index: Option<SectionIndex>) -> u64 {
    index.and_then(|i| bases.get(&i).copied()).unwrap_or(0)
}

fn code_sections(file: &object::File<'_>, bases: &HashMap<SectionIndex, u64>) -> Vec<Span> {
    file.sections()
        .filter(is_exec)
        .map(|s| {
            let begin = s.address() + section_base(bases, Some(s.index()));
            (begin, begin + s.size())
        })
        .collect()
}

fn function_symbols<'data>(
    file: &object::File<'data>,
    bases: &HashMap<SectionIndex, u64>,
) -> HashMap<u64, &'data [u8]> {
    let mut out = HashMap::new();
    for sym in file.symbols().filter(|s| s.kind() == SymbolKind::Text) {
        add_symbol(&mut out, &sym, bases);
    }
    out
}

/// The symbols at `indices` of `.symtab`, by address (indices past the table are ignored).
fn chosen_symbols<'data>(
    file: &object::File<'data>,
    bases: &HashMap<SectionIndex, u64>,
    indices: &[usize],
) -> HashMap<u64, &'data [u8]> {
    let mut out = HashMap::new();
    for &i in indices {
        if let Ok(sym) = file.symbol_by_index(object::SymbolIndex(i)) {
            add_symbol(&mut out, &sym, bases);
        }
    }
    out
}

/// Name `sym`'s address after it, a global name replacing a local one.
fn add_symbol<'data>(
    out: &mut HashMap<u64, &'data [u8]>,
    sym: &object::Symbol<'data, '_>,
    bases: &HashMap<SectionIndex, u64>,
) {
    let Ok(name) = sym.name_bytes() else { return };
    if name.is_empty() {
        return;
    }
    let addr = sym.address() + section_base(bases, sym.section_index());
    let global = sym.is_global();
    out.entry(addr)
        .and_modify(|n: &mut &[u8]| {
            if global {
                *n = name
            }
        })
        .or_insert(name);
}

/// Apply a relocatable object's absolute relocations to one debug section.
fn relocate(
    file: &object::File<'_>,
    section: &object::Section<'_, '_>,
    bases: &HashMap<SectionIndex, u64>,
    bytes: &mut [u8],
) -> Result<(), String> {
    let little = file.is_little_endian();
    for (offset, reloc) in section.relocations() {
        if reloc.kind() != RelocationKind::Absolute {
            continue;
        }
        let RelocationTarget::Symbol(index) = reloc.target() else {
            continue;
        };
        let sym = file
            .symbol_by_index(index)
            .map_err(|e| format!("bad relocation symbol: {e}"))?;
        let width = usize::from(reloc.size() / 8);
        let at = offset as usize;
        let Some(slot) = bytes.get_mut(at..at + width) else {
            continue;
        };
        let implicit = if reloc.has_implicit_addend() {
            read_uint(slot, little)
        } else {
            0
        };
        let value = sym
            .address()
            .wrapping_add(section_base(bases, sym.section_index()))
            .wrapping_add(reloc.addend() as u64)
            .wrapping_add(implicit);
        write_uint(slot, value, little);
    }
    Ok(())
}

fn read_uint(slot: &[u8], little: bool) -> u64 {
    let mut buf = [0u8; 8];
    if little {
        buf[..slot.len()].copy_from_slice(slot);
        u64::from_le_bytes(buf)
    } else {
        buf[8 - slot.len()..].copy_from_slice(slot);
        u64::from_be_bytes(buf)
    }
}

fn write_uint(slot: &mut [u8], value: u64, little: bool) {
    let n = slot.len();
    if little {
        slot.copy_from_slice(&value.to_le_bytes()[..n]);
    } else {
        slot.copy_from_slice(&value.to_be_bytes()[8 - n..]);
    }
}
