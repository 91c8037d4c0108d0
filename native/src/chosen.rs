//! Reading the DWARF of chosen functions only.
//!
//! A size diff explains the functions that changed: in a vmlinux, a few
//! thousand of 45,000, whose DWARF sits in a fifth of the units and, within
//! those, in a small share of the DIEs (most are types).  Each chosen
//! symbol's address is looked up in `.debug_aranges` (units that section
//! does not list are found by their own ranges); in each unit so found, the
//! DIEs are passed over, whole subtrees at a time through `DW_AT_sibling`,
//! up to each subprogram whose code holds a chosen address, and that
//! subprogram's subtree is walked as the whole-file reader walks it.
//!
//! The file stays mapped, and the pages a unit touched are given back when
//! its walk ends (`Mapped::release`): the resident set does not grow with
//! the size of the DWARF.

use std::collections::{BTreeMap, HashSet};

use gimli::constants as dw;
use gimli::Reader;

use crate::collect::{context, merge, unit_error, Columns};
use crate::load::{load, Mapped};
use crate::walk::{read_die, Ctx, CuOut, Die, Walker, R};

/// Bytes of units walked between two releases of the mapping's pages.  A
/// release makes the next units fault in again the pages of `.debug_str`,
/// `.debug_line` and `.debug_abbrev` they share; on a vmlinux, releasing
/// every 8 MiB instead of after every unit costs about 12 MB more resident
/// memory and saves a quarter of the read's CPU time.
const RELEASE_BYTES: usize = 8 << 20;

/// The functions and inline sites of the concrete functions whose code
/// holds the address of one of the `.symtab` entries `symbols`, in the
/// whole-file reader's columns; `Ok(None)`: the file has no `.debug_info`.
/// `Columns::units` counts the units read.
pub fn read_function_sites(path: &str, symbols: &[usize]) -> Result<Option<Columns>, String> {
    let mapped = Mapped::open(path)?;
    let loaded = load(mapped.bytes(), Some(symbols))?;
    if loaded
        .sections
        .get(".debug_info")
        .is_none_or(|s| s.is_empty())
    {
        return Ok(None);
    }
    let ctx = context(&loaded, Some(&mapped))?;
    let mut wanted: Vec<u64> = loaded.symbols.keys().copied().collect();
    wanted.sort_unstable();
    let (units, mut errors, looked) = units_holding(&ctx, &wanted);
    mapped.release();
    let mut outs = Vec::with_capacity(units.len());
    let mut walked = 0;
    for (index, addresses) in units {
        outs.push(walk_chosen(&ctx, index, &addresses).map_err(|e| unit_error(&ctx, index, e)));
        walked += ctx.headers[index].length_including_self();
        if walked >= RELEASE_BYTES {
            mapped.release();
            walked = 0;
        }
    }
    mapped.release();
    let mut columns = merge(outs, &loaded);
    errors.append(&mut columns.unit_errors);
    columns.unit_errors = errors;
    columns.units = looked;
    Ok(Some(columns))
}

/// The units whose code holds one of `wanted` (sorted addresses), in
/// `.debug_info` order, each with the addresses it holds; the units whose
/// ranges could not be read, one line each; and how many units were looked
/// at (those, and those that hold a wanted address).
fn units_holding(ctx: &Ctx<'_>, wanted: &[u64]) -> (Vec<(usize, Vec<u64>)>, Vec<String>, usize) {
    let mut spans = aranges(ctx);
    let mut errors = Vec::new();
    let mut looked = HashSet::new();
    if wanted.iter().any(|&a| !covers(&spans, a)) {
        let listed: HashSet<usize> = spans.iter().map(|s| s.2).collect();
        for index in (0..ctx.headers.len()).filter(|i| !listed.contains(i)) {
            looked.insert(index);
            match own_ranges(ctx, index) {
                Ok(mut own) => spans.append(&mut own),
                Err(e) => errors.push(unit_error(ctx, index, e)),
            }
        }
        spans.sort_unstable();
    }
    let reach = reach(&spans);
    let mut by_unit: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for &address in wanted {
        let mut j = spans.partition_point(|s| s.0 <= address);
        while j > 0 && reach[j - 1] > address {
            j -= 1;
            if spans[j].1 > address {
                by_unit.entry(spans[j].2).or_default().push(address);
            }
        }
    }
    looked.extend(by_unit.keys());
    let units = by_unit
        .into_iter()
        .map(|(index, mut addresses)| {
            addresses.dedup();
            (index, addresses)
        })
        .collect();
    (units, errors, looked.len())
}

/// `(begin, end, unit index)` of every non-empty `.debug_aranges` entry,
/// sorted; empty when the section is absent or unreadable.
fn aranges(ctx: &Ctx<'_>) -> Vec<(u64, u64, usize)> {
    let mut spans = Vec::new();
    let mut headers = ctx.dwarf.debug_aranges.headers();
    while let Ok(Some(header)) = headers.next() {
        let start = header.debug_info_offset().0;
        let Ok(index) = ctx.starts.binary_search(&start) else {
            continue;
        };
        let mut entries = header.entries();
        while let Ok(Some(entry)) = entries.next() {
            let range = entry.range();
            if range.begin < range.end {
                spans.push((range.begin, range.end, index));
            }
        }
    }
    spans.sort_unstable();
    spans
}

/// `(begin, end, index)` of the unit's own root ranges.
fn own_ranges(ctx: &Ctx<'_>, index: usize) -> gimli::Result<Vec<(u64, u64, usize)>> {
    let unit = ctx.dwarf.unit(ctx.headers[index])?;
    let mut iter = ctx.dwarf.unit_ranges(&unit)?;
    let mut out = Vec::new();
    while let Some(r) = iter.next()? {
        if r.begin < r.end {
            out.push((r.begin, r.end, index));
        }
    }
    Ok(out)
}

fn covers(spans: &[(u64, u64, usize)], address: u64) -> bool {
    let j = spans.partition_point(|s| s.0 <= address);
    spans[..j].iter().rev().any(|s| s.1 > address)
}

/// The furthest end among each span and those before it (spans sorted by begin).
fn reach(spans: &[(u64, u64, usize)]) -> Vec<u64> {
    let mut furthest = 0;
    spans
        .iter()
        .map(|s| {
            furthest = furthest.max(s.1);
            furthest
        })
        .collect()
}

fn walk_chosen(ctx: &Ctx<'_>, index: usize, wanted: &[u64]) -> gimli::Result<CuOut> {
    let unit = ctx.dwarf.unit(ctx.headers[index])?;
    let mut w = Walker::new(ctx, &unit, index);
    w.walk_chosen(wanted)?;
    Ok(w.finish())
}

/// How the scan passes over the DIEs of one abbreviation (worked out once per unit and code).
#[derive(Clone, Copy)]
enum Pass {
    /// No children, and attributes of this many bytes in all: stepped over unread.
    Over(usize),
    /// Children, and a 4-byte `DW_AT_sibling` after this many bytes of attributes: jumped over.
    Jump(usize),
    /// A unit, namespace or module, a subprogram that may have code, or attributes whose sizes
    /// vary: read through gimli (`Walker::read_one`).
    Read,
}

fn pass_of(abbrev: &gimli::Abbreviation, header: &gimli::UnitHeader<R<'_>>) -> Pass {
    match abbrev.tag() {
        dw::DW_TAG_compile_unit
        | dw::DW_TAG_partial_unit
        | dw::DW_TAG_namespace
        | dw::DW_TAG_module => return Pass::Read,
        dw::DW_TAG_subprogram if may_have_code(abbrev) => return Pass::Read,
        _ => {}
    }
    let mut bytes = 0;
    for spec in abbrev.attributes() {
        if abbrev.has_children() && spec.name() == dw::DW_AT_sibling {
            return if spec.form() == dw::DW_FORM_ref4 {
                Pass::Jump(bytes)
            } else {
                Pass::Read
            };
        }
        match spec.size(header) {
            Some(n) => bytes += n,
            None => return Pass::Read,
        }
    }
    if abbrev.has_children() {
        Pass::Read
    } else {
        Pass::Over(bytes)
    }
}

/// Abbreviation codes up to this get their `Pass` remembered (gcc numbers them from 1 up).
const PASSES: u64 = 1 << 16;

impl<'a> Walker<'_, 'a> {
    /// Walk the subtrees of the subprograms whose code holds one of
    /// `wanted` (sorted); pass over every other DIE.  The children of the
    /// unit, of namespaces and of modules are looked at; other subtrees are
    /// skipped whole, through `DW_AT_sibling` where the DIE has one.  Most
    /// DIEs are types and declarations: their bytes are stepped over by the
    /// sizes their abbreviation fixes (`Pass`), without decoding them.
    fn walk_chosen(&mut self, wanted: &[u64]) -> gimli::Result<()> {
        let header = &self.unit.header;
        let base = header.header_size();
        let entries = header.range_from(gimli::UnitOffset(base)..)?;
        let (data, end) = (entries.slice(), base + entries.len());
        let mut passes: Vec<Option<Pass>> = Vec::new();
        let mut at = base; // unit offset of the next DIE
        while at < end {
            let mut input = R::new(&data[at - base..], entries.endian());
            let code = input.read_uleb128()?;
            let attrs = end - input.len(); // where its attributes start
            let pass = match code {
                0 => Pass::Over(0), // a null entry: the end of some DIE's children
                c if c < PASSES => self.pass(&mut passes, c)?,
                _ => Pass::Read,
            };
            at = match pass {
                Pass::Over(n) => attrs + n,
                Pass::Jump(n) => {
                    input.skip(n)?;
                    match input.read_u32()? as usize {
                        to if to > at && to <= end => to,
                        _ => self.read_one(at, wanted)?,
                    }
                }
                Pass::Read => self.read_one(at, wanted)?,
            };
        }
        Ok(())
    }

    /// The `Pass` of abbreviation `code`, worked out on first use.
    fn pass(&self, passes: &mut Vec<Option<Pass>>, code: u64) -> gimli::Result<Pass> {
        let i = code as usize;
        if let Some(Some(p)) = passes.get(i) {
            return Ok(*p);
        }
        let abbrev = self
            .unit
            .abbreviations
            .get(code)
            .ok_or(gimli::Error::UnknownAbbreviation(code))?;
        let p = pass_of(abbrev, &self.unit.header);
        if passes.len() <= i {
            passes.resize(i + 1, None);
        }
        passes[i] = Some(p);
        Ok(p)
    }

    /// Read the DIE at `at` through gimli: walk it if it is a subprogram
    /// holding a wanted address, else pass over it (into the children of a
    /// unit, namespace or module).  Returns where the scan goes on.
    fn read_one(&mut self, at: usize, wanted: &[u64]) -> gimli::Result<usize> {
        let offset = gimli::UnitOffset(at);
        let mut raw = self.unit.entries_raw(Some(offset))?;
        let Some(abbrev) = raw.read_abbreviation()? else {
            return Ok(raw.next_offset().0);
        };
        let next = match abbrev.tag() {
            dw::DW_TAG_compile_unit
            | dw::DW_TAG_partial_unit
            | dw::DW_TAG_namespace
            | dw::DW_TAG_module => {
                raw.skip_attributes(abbrev.attributes())?;
                return Ok(raw.next_offset().0);
            }
            dw::DW_TAG_subprogram if may_have_code(abbrev) => {
                let die = read_die(&mut raw, abbrev)?;
                if self.holds(&die, wanted)? {
                    return Ok(self.walk(Some(offset))?.0);
                }
                die.sibling
            }
            _ if abbrev.has_children() => sibling(&mut raw, abbrev)?,
            _ => {
                raw.skip_attributes(abbrev.attributes())?;
                return Ok(raw.next_offset().0);
            }
        };
        if !abbrev.has_children() {
            return Ok(raw.next_offset().0);
        }
        match next {
            Some(to) if to > offset => Ok(to.0),
            _ => {
                skip_subtree(&mut raw)?;
                Ok(raw.next_offset().0)
            }
        }
    }

    /// Whether the DIE's code holds one of `wanted` (sorted).
    fn holds(&self, die: &Die<'a>, wanted: &[u64]) -> gimli::Result<bool> {
        if !die.has_code() {
            return Ok(false);
        }
        let (spans, _) = self.spans(die)?;
        Ok(spans.iter().any(|&(begin, end)| {
            let i = wanted.partition_point(|&a| a < begin);
            i < wanted.len() && wanted[i] < end
        }))
    }
}

/// Whether DIEs of this abbreviation can have code (declarations and
/// abstract instances cannot: they have no address attribute).
fn may_have_code(abbrev: &gimli::Abbreviation) -> bool {
    abbrev
        .attributes()
        .iter()
        .any(|s| matches!(s.name(), dw::DW_AT_low_pc | dw::DW_AT_ranges))
}

/// The `DW_AT_sibling` of a DIE whose abbreviation was just read; the
/// attributes before it are skipped unparsed, those after it left unread
/// (the caller jumps to the sibling).  Without one, all are read past.
fn sibling(
    raw: &mut gimli::EntriesRaw<'_, '_, R<'_>>,
    abbrev: &gimli::Abbreviation,
) -> gimli::Result<Option<gimli::UnitOffset>> {
    let specs = abbrev.attributes();
    let Some(k) = specs.iter().position(|s| s.name() == dw::DW_AT_sibling) else {
        raw.skip_attributes(specs)?;
        return Ok(None);
    };
    raw.skip_attributes(&specs[..k])?;
    match raw.read_attribute(specs[k])?.value() {
        gimli::AttributeValue::UnitRef(o) => Ok(Some(o)),
        _ => {
            raw.skip_attributes(&specs[k + 1..])?;
            Ok(None)
        }
    }
}

/// Read past the children of the DIE whose attributes were just read.
fn skip_subtree(raw: &mut gimli::EntriesRaw<'_, '_, R<'_>>) -> gimli::Result<()> {
    let parent = raw.next_depth() - 1;
    while raw.next_depth() > parent && !raw.is_empty() {
        if let Some(abbrev) = raw.read_abbreviation()? {
            raw.skip_attributes(abbrev.attributes())?;
        }
    }
    Ok(())
}
