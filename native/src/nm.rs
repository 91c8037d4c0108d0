//! The symbol table as `nm --size-sort` lists it, summed by name the way the
//! kernel's `scripts/bloat-o-meter` sums it, read straight from `.symtab`.
//!
//! The rules are those of `perfab.size.compat` (the numpy reader): the same
//! symbols are kept, each given the letter GNU nm (BFD) prints, names with a
//! `:` or a generated prefix are dropped and every `.NUMBER` is stripped.
//! The file is checked as strictly as `perfab.size.elf` checks it: whatever
//! that reader refuses is an error here too, so the caller can fall back to
//! it for the exact message.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SHT_NULL: u32 = 0;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_NOBITS: u32 = 8;
const SHT_SYMTAB_SHNDX: u32 = 18;
const SHF_WRITE: u64 = 0x1;
const SHF_ALLOC: u64 = 0x2;
const SHF_EXECINSTR: u64 = 0x4;
const SHN_UNDEF: u32 = 0;
const SHN_LORESERVE: u32 = 0xff00;
const SHN_ABS: u32 = 0xfff1;
const SHN_COMMON: u32 = 0xfff2;
const SHN_XINDEX: u32 = 0xffff;
const STT_OBJECT: u8 = 1;
const STT_SECTION: u8 = 3;
const STT_FILE: u8 = 4;
const STT_GNU_IFUNC: u8 = 10;
const STB_LOCAL: u8 = 0;
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;
const STB_GNU_UNIQUE: u8 = 10;
const MAX_SIZE: u64 = 1 << 63;
const SKIP_PREFIXES: [&[u8]; 4] = [b"__mod_", b"__se_sys", b"__se_compat_sys", b"__addressable_"];
const SKIP_NAMES: [&[u8]; 2] = [b"linux_banner", b"vermagic"];
const DEBUG_PREFIXES: [&[u8]; 6] = [
    b".debug",
    b".gnu.debuglto_.debug_",
    b".gnu.linkonce.wi.",
    b".zdebug",
    b".line",
    b".stab",
];

/// What the ELF header says the file was built for.
pub struct Target {
    pub class: u8,        // 32 or 64
    pub big_endian: bool, // EI_DATA == ELFDATA2MSB
    pub machine: u16,     // e_machine
    pub has_symtab: bool, // a SHT_SYMTAB section is present
}

/// FxHash (rustc's): eight bytes per step; names are short and not chosen by an attacker,
/// and SipHash cost a third of the read.
#[derive(Default)]
pub struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let mut tail = [0u8; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.add(u64::from_le_bytes(tail));
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// Bytes per stripped name (borrowed from the file where nothing was stripped).
pub type Sums<'a> = HashMap<Cow<'a, [u8]>, u64, BuildHasherDefault<Fx>>;

/// One bloat-o-meter table: counts, totals and the changed names (unordered).
pub struct Table {
    pub add: u64,                                        // names only in the new file
    pub remove: u64,                                     // names only in the old file
    pub grow: u64,                                       // common names that grew
    pub shrink: u64,                                     // common names that shrank
    pub up: u64,                                         // bytes of added names and growth
    pub down: u64,                                       // bytes of removed names and shrinkage
    pub old_total: u64,                                  // all kept bytes, old file
    pub new_total: u64,                                  // all kept bytes, new file
    pub rows: Vec<(Vec<u8>, Option<u64>, Option<u64>)>, // (name, old bytes, new bytes) of changed names
}

/// bloat-o-meter's counts between two files' sums (its `calc` over `getsizes`).
pub fn compare(old: &Sums, new: &Sums) -> Table {
    let mut t = Table { add: 0, remove: 0, grow: 0, shrink: 0, up: 0, down: 0, old_total: 0, new_total: 0, rows: Vec::new() };
    for (name, &o) in old {
        t.old_total += o;
        match new.get(name) {
            None => {
                t.remove += 1;
                t.down += o;
                t.rows.push((name.to_vec(), Some(o), None));
            }
            Some(&n) if n != o => {
                if n > o {
                    t.grow += 1;
                    t.up += n - o;
                } else {
                    t.shrink += 1;
                    t.down += o - n;
                }
                t.rows.push((name.to_vec(), Some(o), Some(n)));
            }
            Some(_) => {}
        }
    }
    for (name, &n) in new {
        t.new_total += n;
        if !old.contains_key(name) {
            t.add += 1;
            t.up += n;
            t.rows.push((name.to_vec(), None, Some(n)));
        }
    }
    t
}

/// Endian-aware fixed-width reads with bounds checks.
struct Reader<'a> {
    data: &'a [u8],
    big: bool,
}

impl<'a> Reader<'a> {
    fn bytes(&self, off: u64, len: u64, what: &str) -> Result<&'a [u8], String> {
        let n = self.data.len() as u64;
        if off > n || len > n - off {
            return Err(format!("{what} lies outside the file"));
        }
        Ok(&self.data[off as usize..(off + len) as usize])
    }
    fn uint(&self, off: u64, width: u64) -> Result<u64, String> {
        let b = self.bytes(off, width, "a header field")?;
        let mut v: u64 = 0;
        for i in 0..width as usize {
            let byte = if self.big { b[i] } else { b[width as usize - 1 - i] };
            v = (v << 8) | byte as u64;
        }
        Ok(v)
    }
}

/// One section header.
struct Shdr {
    name: u32,
    kind: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

fn section_headers(r: &Reader, wide: bool) -> Result<Vec<Shdr>, String> {
    let (shoff, entsize, shnum) = if wide {
        (r.uint(0x28, 8)?, r.uint(0x3a, 2)?, r.uint(0x3c, 2)?)
    } else {
        (r.uint(0x20, 4)?, r.uint(0x2e, 2)?, r.uint(0x30, 2)?)
    };
    let want = if wide { 64 } else { 40 };
    if shoff == 0 {
        return Ok(Vec::new());
    }
    if entsize != want {
        return Err("section header entry size".into());
    }
    let read = |off: u64| -> Result<Shdr, String> {
        let w = if wide { 8 } else { 4 };
        let (flags, offset, size, link, entsz) = if wide {
            (off + 8, off + 24, off + 32, off + 40, off + 56)
        } else {
            (off + 8, off + 16, off + 20, off + 24, off + 36)
        };
        Ok(Shdr {
            name: r.uint(off, 4)? as u32,
            kind: r.uint(off + 4, 4)? as u32,
            flags: r.uint(flags, w)?,
            offset: r.uint(offset, w)?,
            size: r.uint(size, w)?,
            link: r.uint(link, 4)? as u32,
            entsize: r.uint(entsz, w)?,
        })
    };
    let mut count = shnum;
    if count == 0 {
        count = read(shoff)?.size;
    }
    r.bytes(shoff, count.saturating_mul(want), "section header table")?;
    (0..count).map(|i| read(shoff + i * want)).collect()
}

/// The NUL-terminated string at `off` of `table`; an error if it runs off the end.
fn c_str(table: &[u8], off: u64) -> Result<&[u8], String> {
    let rest = table.get(off as usize..).ok_or("a name lies outside its string table")?;
    let end = rest.iter().position(|&b| b == 0).ok_or("unterminated string")?;
    Ok(&rest[..end])
}

/// nm's lower-case letter for a symbol defined in each section (`section_letters`).
fn section_letters(r: &Reader, shdrs: &[Shdr], shstrndx: u64) -> Result<Vec<u8>, String> {
    let mut names: &[u8] = b"";
    if !shdrs.is_empty() && shstrndx != SHN_UNDEF as u64 {
        let sh = shdrs.get(shstrndx as usize).ok_or("e_shstrndx")?;
        if sh.kind == SHT_NOBITS || sh.kind == SHT_NULL {
            return Err("section name table has no contents".into());
        }
        names = r.bytes(sh.offset, sh.size, "section name table")?;
        if names.last().is_some_and(|&b| b != 0) {
            return Err("section name table does not end in NUL".into());
        }
    }
    let mut out = Vec::with_capacity(shdrs.len());
    for sh in shdrs {
        let name = if names.is_empty() {
            &b""[..]
        } else {
            if sh.name as usize >= names.len() {
                return Err("section name outside the section name table".into());
            }
            c_str(names, sh.name as u64)?
        };
        let contents = sh.kind != SHT_NOBITS;
        if sh.kind == SHT_NOBITS || sh.kind == SHT_NULL {
            if sh.size >= MAX_SIZE {
                return Err("section larger than any address space".into());
            }
        } else {
            r.bytes(sh.offset, sh.size, "a section")?;
        }
        let alloc = sh.flags & SHF_ALLOC != 0;
        out.push(if sh.flags & SHF_EXECINSTR != 0 {
            b't'
        } else if alloc && contents {
            if sh.flags & SHF_WRITE != 0 { b'd' } else { b'r' }
        } else if !contents {
            b'b'
        } else if !alloc && DEBUG_PREFIXES.iter().any(|p| name.starts_with(p)) {
            b'N'
        } else if sh.flags & SHF_WRITE == 0 {
            b'n'
        } else {
            b'?'
        });
    }
    Ok(out)
}

/// The letter nm prints for one kept symbol.
fn letter(by_section: &[u8], shndx: u32, typ: u8, bind: u8) -> u8 {
    if shndx == SHN_COMMON {
        return b'C';
    }
    if typ == STT_GNU_IFUNC {
        return b'i';
    }
    if bind == STB_WEAK {
        return if typ == STT_OBJECT { b'V' } else { b'W' };
    }
    if bind == STB_GNU_UNIQUE {
        return b'u';
    }
    if bind != STB_LOCAL && bind != STB_GLOBAL {
        return b'?';
    }
    let lower = by_section.get(shndx as usize).copied().unwrap_or(b'?');
    if bind == STB_GLOBAL { lower.to_ascii_uppercase() } else { lower }
}

/// Whether bloat-o-meter drops this name (empty, with ':', generated).
fn skipped(name: &[u8]) -> bool {
    name.is_empty()
        || name.contains(&b':')
        || SKIP_PREFIXES.iter().any(|p| name.starts_with(p))
        || SKIP_NAMES.iter().any(|n| name == *n)
}

/// `name` with every `.NUMBER` removed (the regex `\.[0-9]+`, left to right).
pub fn strip_numbers(name: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = name.windows(2).position(|w| w[0] == b'.' && w[1].is_ascii_digit()) else {
        return Cow::Borrowed(name);
    };
    let mut out = name[..first].to_vec();
    let mut i = first;
    while i < name.len() {
        if name[i] == b'.' && name.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            while name.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        } else {
            out.push(name[i]);
            i += 1;
        }
    }
    Cow::Owned(out)
}

/// Read the file's target and, for each group of nm letters, bytes per stripped name.
pub fn nm_sums<'a>(data: &'a [u8], groups: &[&[u8]]) -> Result<(Target, Vec<Sums<'a>>), String> {
    if data.len() < 16 || &data[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let (cls, enc) = (data[4], data[5]);
    if !(cls == 1 || cls == 2) || !(enc == 1 || enc == 2) {
        return Err("unknown ELF class or data encoding".into());
    }
    let wide = cls == 2;
    let r = Reader { data, big: enc == 2 };
    r.bytes(0, if wide { 64 } else { 52 }, "ELF header")?;
    let machine = r.uint(18, 2)? as u16;
    let shdrs = section_headers(&r, wide)?;
    let mut shstrndx = r.uint(if wide { 0x3e } else { 0x32 }, 2)?;
    if shstrndx == SHN_XINDEX as u64 && !shdrs.is_empty() {
        shstrndx = shdrs[0].link as u64;
    }
    let by_section = section_letters(&r, &shdrs, shstrndx)?;
    let target = |has_symtab| Target { class: if wide { 64 } else { 32 }, big_endian: enc == 2, machine, has_symtab };
    let Some(index) = shdrs.iter().position(|s| s.kind == SHT_SYMTAB) else {
        return Ok((target(false), groups.iter().map(|_| Sums::default()).collect()));
    };
    let st = &shdrs[index];
    let entsize: u64 = if wide { 24 } else { 16 };
    if st.entsize != 0 && st.entsize != entsize {
        return Err("symbol table entry size".into());
    }
    let table = r.bytes(st.offset, st.size, "symbol table")?;
    let strsh = shdrs.get(st.link as usize).ok_or("symbol table's string table index")?;
    if strsh.kind != SHT_STRTAB {
        return Err("symbol table links to a section that is not a string table".into());
    }
    let strings = r.bytes(strsh.offset, strsh.size, "string table")?;
    let count = st.size / entsize;
    let ext = extended_indices(&r, &shdrs, index, count)?;
    let room = (count / 2) as usize;
    let mut sums: Vec<Sums> = groups.iter().map(|_| Sums::with_capacity_and_hasher(room, Default::default())).collect();
    let mut wanted = [0u64; 128]; // per letter: a bit for each group holding it
    for (g, letters) in groups.iter().enumerate().take(64) {
        for &c in letters.iter() {
            wanted[(c & 0x7f) as usize] |= 1 << g;
        }
    }
    let sym = Reader { data: table, big: r.big };
    for i in 1..count {
        let off = i * entsize;
        let (name, info, shndx16, size) = if wide {
            (sym.uint(off, 4)?, sym.uint(off + 4, 1)? as u8, sym.uint(off + 6, 2)? as u32, sym.uint(off + 16, 8)?)
        } else {
            (sym.uint(off, 4)?, sym.uint(off + 12, 1)? as u8, sym.uint(off + 14, 2)? as u32, sym.uint(off + 8, 4)?)
        };
        if name != 0 && name >= strings.len() as u64 {
            return Err("a symbol name lies outside its string table".into());
        }
        if size >= MAX_SIZE {
            return Err("a symbol larger than any address space".into());
        }
        let shndx = if shndx16 == SHN_XINDEX {
            *ext.as_ref().ok_or("SHN_XINDEX without SHT_SYMTAB_SHNDX")?.get(i as usize).ok_or("short SHT_SYMTAB_SHNDX")?
        } else {
            shndx16
        };
        let (typ, bind) = (info & 0xf, info >> 4);
        if size == 0 || shndx == SHN_UNDEF || shndx == SHN_ABS || typ == STT_SECTION || typ == STT_FILE {
            continue;
        }
        if shndx >= SHN_LORESERVE && shndx != SHN_COMMON {
            continue;
        }
        let c = letter(&by_section, shndx, typ, bind);
        let hits = wanted[(c & 0x7f) as usize];
        if hits == 0 || name == 0 {
            continue;
        }
        let raw = name_to_end(strings, name);
        if skipped(raw) {
            continue;
        }
        let key = strip_numbers(raw);
        for (g, sum) in sums.iter_mut().enumerate() {
            if hits & (1 << g) != 0 {
                *sum.entry(key.clone()).or_insert(0) += size;
            }
        }
    }
    Ok((target(true), sums))
}

/// The name at `off`, to its NUL or to the end of an unterminated table (as the numpy reader reads it).
fn name_to_end(strings: &[u8], off: u64) -> &[u8] {
    let rest = &strings[off as usize..];
    &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
}

/// Section indices of the SHT_SYMTAB_SHNDX section linked to the symbol table, if any.
fn extended_indices(r: &Reader, shdrs: &[Shdr], symtab: usize, count: u64) -> Result<Option<Vec<u32>>, String> {
    let Some(sh) = shdrs.iter().find(|s| s.kind == SHT_SYMTAB_SHNDX && s.link as usize == symtab) else {
        return Ok(None);
    };
    if sh.size < 4 * count {
        return Ok(None); // an error only if a symbol needs it
    }
    let b = r.bytes(sh.offset, 4 * count, "SHT_SYMTAB_SHNDX")?;
    let rd = Reader { data: b, big: r.big };
    (0..count).map(|i| rd.uint(4 * i, 4).map(|v| v as u32)).collect::<Result<Vec<_>, _>>().map(Some)
}

#[cfg(test)]
mod tests {
    use super::{compare, skipped, strip_numbers, Sums};
    use std::borrow::Cow;

    #[test]
    fn numbers_are_stripped_like_the_regex() {
        assert_eq!(&*strip_numbers(b"foo.isra.0"), b"foo.isra");
        assert_eq!(&*strip_numbers(b"a.1.2"), b"a");
        assert_eq!(&*strip_numbers(b"a..1"), b"a.");
        assert_eq!(&*strip_numbers(b"x.12y.3"), b"xy");
        assert_eq!(&*strip_numbers(b"end."), b"end.");
        assert_eq!(&*strip_numbers(b"plain"), b"plain");
    }

    #[test]
    fn generated_names_are_skipped() {
        assert!(skipped(b"__mod_x"));
        assert!(skipped(b"a:b"));
        assert!(skipped(b"vermagic"));
        assert!(!skipped(b"vermagic2"));
        assert!(!skipped(b"foo"));
    }

    #[test]
    fn counts_follow_bloat_o_meter() {
        let side = |items: &[(&'static [u8], u64)]| -> Sums<'static> {
            items.iter().map(|&(k, v)| (Cow::Borrowed(k), v)).collect()
        };
        let old = side(&[(b"gone", 5), (b"grew", 10), (b"shrank", 9), (b"same", 3)]);
        let new = side(&[(b"grew", 12), (b"shrank", 4), (b"same", 3), (b"born", 7)]);
        let t = compare(&old, &new);
        assert_eq!((t.add, t.remove, t.grow, t.shrink), (1, 1, 1, 1));
        assert_eq!((t.up, t.down, t.old_total, t.new_total), (9, 10, 27, 26));
        assert_eq!(t.rows.len(), 4);
    }
}
