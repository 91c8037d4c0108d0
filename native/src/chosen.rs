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

impl<'a> Walker<'_, 'a> {
    /// Walk the subtrees of the subprograms whose code holds one of
    /// `wanted` (sorted); pass over every other DIE.  The children of the
    /// unit, of namespaces and of modules are looked at; other subtrees are
    /// skipped whole, through `DW_AT_sibling` where the DIE has one.
    fn walk_chosen(&mut self, wanted: &[u64]) -> gimli::Result<()> {
        let unit = self.unit;
        let mut raw = unit.entries_raw(None)?;
        while !raw.is_empty() {
            let offset = raw.next_offset();
            let Some(abbrev) = raw.read_abbreviation()? else {
                continue;
            };
            let next = match abbrev.tag() {
                dw::DW_TAG_compile_unit
                | dw::DW_TAG_partial_unit
                | dw::DW_TAG_namespace
                | dw::DW_TAG_module => {
                    raw.skip_attributes(abbrev.attributes())?;
                    continue;
                }
                dw::DW_TAG_subprogram if may_have_code(abbrev) => {
                    let die = read_die(&mut raw, abbrev)?;
                    if self.holds(&die, wanted)? {
                        Some(self.walk(Some(offset))?)
                    } else {
                        die.sibling
                    }
                }
                _ if abbrev.has_children() => sibling(&mut raw, abbrev)?,
                _ => {
                    raw.skip_attributes(abbrev.attributes())?;
                    continue;
                }
            };
            if !abbrev.has_children() {
                continue;
            }
            match next {
                Some(at) => raw = unit.entries_raw(Some(at))?,
                None => skip_subtree(&mut raw)?,
            }
        }
        Ok(())
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
