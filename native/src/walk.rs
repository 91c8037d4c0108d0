//! One compilation unit's walk: concrete functions and the inline sites
//! nested in them, each site's bytes split into exclusive and inclusive.
//!
//! The walk streams the unit's DIEs once (`EntriesRaw`), keeping only the
//! chain of open functions and inline sites; nothing else is held.

use std::collections::HashMap;

use gimli::constants as dw;
use gimli::{AttributeValue, EndianSlice, RunTimeEndian, UnitOffset};

use crate::names::{source_path, Interner};
use crate::ranges::{measure, measure_minus, normalize, CodeFilter, Span};

pub type R<'a> = EndianSlice<'a, RunTimeEndian>;
type Unit<'a> = gimli::Unit<R<'a>>;
type Value<'a> = AttributeValue<R<'a>>;

/// What every unit's walk shares.
pub struct Ctx<'a> {
    pub dwarf: gimli::Dwarf<R<'a>>,
    pub headers: Vec<gimli::UnitHeader<R<'a>>>,
    pub starts: Vec<usize>,
    pub code: &'a CodeFilter,
}

/// A concrete function: a subprogram with code.
pub struct Func {
    pub name: u32,
    pub linkage: u32,
    pub entry: u64,
    pub bytes: u64,
}

/// One `DW_TAG_inlined_subroutine` inside a concrete function.
pub struct Site {
    pub callee: u32,
    pub linkage: u32,
    pub func: u32,
    pub parent: i32,
    pub file: u32,
    pub line: u32,
    pub exclusive: u64,
    pub inclusive: u64,
}

/// A unit's result; string ids index `strings`.
pub struct CuOut {
    pub strings: Vec<Vec<u8>>,
    pub funcs: Vec<Func>,
    pub sites: Vec<Site>,
    pub covered_bytes: u64,
    pub function_bytes: u64,
    pub version: u16,
}

enum Kind {
    Func {
        idx: usize,
        spans: Vec<Span>,
        inline: Vec<Span>,
    },
    Site {
        idx: usize,
        own: Vec<Span>,
        kids: Vec<Span>,
    },
    Skip,
}

struct Frame {
    depth: isize,
    kind: Kind,
}

#[derive(Default)]
struct Die<'a> {
    low: Option<Value<'a>>,
    high: Option<Value<'a>>,
    ranges: Option<Value<'a>>,
    name: Option<Value<'a>>,
    linkage: Option<Value<'a>>,
    origin: Option<Value<'a>>,
    call_file: Option<u64>,
    call_line: u64,
}

impl Die<'_> {
    fn has_code(&self) -> bool {
        self.low.is_some() || self.ranges.is_some()
    }
}

struct Walker<'c, 'a> {
    ctx: &'c Ctx<'a>,
    unit: &'c Unit<'a>,
    index: usize,
    strings: Interner,
    names: HashMap<usize, (u32, u32)>,
    files: HashMap<u64, u32>,
    others: HashMap<usize, Unit<'a>>,
    out: CuOut,
}

pub fn walk_unit(ctx: &Ctx<'_>, index: usize) -> gimli::Result<CuOut> {
    let unit = ctx.dwarf.unit(ctx.headers[index])?;
    let out = CuOut {
        strings: Vec::new(),
        funcs: Vec::new(),
        sites: Vec::new(),
        covered_bytes: 0,
        function_bytes: 0,
        version: unit.header.version(),
    };
    let mut w = Walker {
        ctx,
        unit: &unit,
        index,
        strings: Interner::new(),
        names: HashMap::new(),
        files: HashMap::new(),
        others: HashMap::new(),
        out,
    };
    w.walk()?;
    w.out.strings = std::mem::take(&mut w.strings.strings);
    Ok(w.out)
}

fn read_die<'a>(
    raw: &mut gimli::EntriesRaw<'_, '_, R<'a>>,
    abbrev: &gimli::Abbreviation,
) -> gimli::Result<Die<'a>> {
    let mut d = Die::default();
    for spec in abbrev.attributes() {
        let attr = raw.read_attribute(*spec)?;
        match attr.name() {
            dw::DW_AT_low_pc => d.low = Some(attr.value()),
            dw::DW_AT_high_pc => d.high = Some(attr.value()),
            dw::DW_AT_ranges => d.ranges = Some(attr.value()),
            dw::DW_AT_name => d.name = Some(attr.value()),
            dw::DW_AT_linkage_name | dw::DW_AT_MIPS_linkage_name => d.linkage = Some(attr.value()),
            dw::DW_AT_abstract_origin | dw::DW_AT_specification => d.origin = Some(attr.value()),
            dw::DW_AT_call_file => match attr.value() {
                AttributeValue::FileIndex(i) => d.call_file = Some(i),
                v => d.call_file = v.udata_value(),
            },
            dw::DW_AT_call_line => d.call_line = attr.udata_value().unwrap_or(0),
            _ => {}
        }
    }
    Ok(d)
}

impl<'c, 'a> Walker<'c, 'a> {
    fn walk(&mut self) -> gimli::Result<()> {
        let unit = self.unit;
        let mut raw = unit.entries_raw(None)?;
        let mut stack: Vec<Frame> = Vec::new();
        while !raw.is_empty() {
            let depth = raw.next_depth();
            let Some(abbrev) = raw.read_abbreviation()? else {
                continue;
            };
            while stack.last().is_some_and(|f| f.depth >= depth) {
                let frame = stack.pop().unwrap();
                self.close(frame, &mut stack);
            }
            let kind = match abbrev.tag() {
                dw::DW_TAG_subprogram => {
                    let die = read_die(&mut raw, abbrev)?;
                    self.subprogram(&die)?
                }
                dw::DW_TAG_inlined_subroutine => {
                    let die = read_die(&mut raw, abbrev)?;
                    self.inlined(&die, &stack)?
                }
                _ => {
                    raw.skip_attributes(abbrev.attributes())?;
                    continue;
                }
            };
            let frame = Frame { depth, kind };
            if abbrev.has_children() {
                stack.push(frame);
            } else {
                self.close(frame, &mut stack);
            }
        }
        while let Some(frame) = stack.pop() {
            self.close(frame, &mut stack);
        }
        Ok(())
    }

    fn subprogram(&mut self, die: &Die<'a>) -> gimli::Result<Kind> {
        if !die.has_code() {
            return Ok(Kind::Skip);
        }
        let (spans, entry) = self.spans(die)?;
        if spans.is_empty() {
            return Ok(Kind::Skip);
        }
        let (name, linkage) = self.names_of(die)?;
        let idx = self.out.funcs.len();
        self.out.funcs.push(Func {
            name,
            linkage,
            entry,
            bytes: measure(&spans),
        });
        Ok(Kind::Func {
            idx,
            spans,
            inline: Vec::new(),
        })
    }

    fn inlined(&mut self, die: &Die<'a>, stack: &[Frame]) -> gimli::Result<Kind> {
        let Some((func, parent)) = context(stack) else {
            return Ok(Kind::Skip);
        };
        let (own, _) = self.spans(die)?;
        let (callee, linkage) = self.names_of(die)?;
        let file = match die.call_file {
            Some(i) => self.file_id(i),
            None => 0,
        };
        let idx = self.out.sites.len();
        self.out.sites.push(Site {
            callee,
            linkage,
            func: func as u32,
            parent,
            file,
            line: die.call_line as u32,
            exclusive: 0,
            inclusive: 0,
        });
        Ok(Kind::Site {
            idx,
            own,
            kids: Vec::new(),
        })
    }

    fn close(&mut self, frame: Frame, stack: &mut [Frame]) {
        match frame.kind {
            Kind::Site { idx, own, mut kids } => {
                let site = &mut self.out.sites[idx];
                site.inclusive = measure(&own);
                site.exclusive = measure_minus(&own, &mut kids);
                give_to_ancestors(stack, &own);
            }
            Kind::Func {
                spans, mut inline, ..
            } => {
                normalize(&mut inline);
                self.out.covered_bytes += measure(&inline);
                self.out.function_bytes += measure(&spans);
            }
            Kind::Skip => {}
        }
    }

    /// The DIE's code spans (clipped to executable sections, normalised)
    /// and its entry address.
    fn spans(&self, die: &Die<'a>) -> gimli::Result<(Vec<Span>, u64)> {
        let (dwarf, unit) = (&self.ctx.dwarf, self.unit);
        let mut raw = Vec::new();
        if let Some(value) = die.ranges {
            if let Some(mut iter) = dwarf.attr_ranges(unit, value)? {
                while let Some(r) = iter.next()? {
                    raw.push((r.begin, r.end));
                }
            }
        } else if let Some(value) = die.low {
            if let Some(begin) = dwarf.attr_address(unit, value)? {
                let end = match die.high {
                    Some(AttributeValue::Udata(n)) => begin.wrapping_add(n),
                    Some(v) => dwarf.attr_address(unit, v)?.unwrap_or(begin),
                    None => begin,
                };
                raw.push((begin, end));
            }
        }
        let entry = raw.first().map_or(0, |s| s.0);
        let mut spans: Vec<Span> = raw
            .into_iter()
            .filter_map(|s| self.ctx.code.clip(s))
            .collect();
        normalize(&mut spans);
        Ok((spans, entry))
    }

    fn string_id(&mut self, unit_index: usize, value: Value<'a>) -> gimli::Result<u32> {
        let unit = if unit_index == self.index {
            self.unit
        } else {
            &self.others[&unit_index]
        };
        let s = self.ctx.dwarf.attr_string(unit, value)?;
        Ok(self.strings.intern(s.slice()))
    }

    /// (name, linkage name) of a DIE, through its abstract origin or
    /// specification when it has none of its own.
    fn names_of(&mut self, die: &Die<'a>) -> gimli::Result<(u32, u32)> {
        let mut name = match die.name {
            Some(v) => self.string_id(self.index, v)?,
            None => 0,
        };
        let mut linkage = match die.linkage {
            Some(v) => self.string_id(self.index, v)?,
            None => 0,
        };
        if name == 0 || linkage == 0 {
            if let Some(at) = die.origin.and_then(|v| global_ref(self.unit, v)) {
                let (n, l) = self.lookup(at)?;
                name = if name == 0 { n } else { name };
                linkage = if linkage == 0 { l } else { linkage };
            }
        }
        Ok((name, linkage))
    }

    /// Follow a chain of origin/specification references from the DIE at
    /// `.debug_info` offset `start`, collecting the first name and linkage name.
    fn lookup(&mut self, start: usize) -> gimli::Result<(u32, u32)> {
        if let Some(&hit) = self.names.get(&start) {
            return Ok(hit);
        }
        let (mut name, mut linkage) = (0, 0);
        let mut at = Some(start);
        for _ in 0..16 {
            let Some(offset) = at.take() else { break };
            let ui = self
                .ctx
                .starts
                .partition_point(|&s| s <= offset)
                .saturating_sub(1);
            self.load_other(ui)?;
            let unit = if ui == self.index {
                self.unit
            } else {
                &self.others[&ui]
            };
            let entry = unit.entry(UnitOffset(offset - self.ctx.starts[ui]))?;
            let mut values = Vec::new();
            let mut attrs = entry.attrs();
            while let Some(a) = attrs.next()? {
                match a.name() {
                    dw::DW_AT_name if name == 0 => values.push((true, a.value())),
                    dw::DW_AT_linkage_name | dw::DW_AT_MIPS_linkage_name if linkage == 0 => {
                        values.push((false, a.value()))
                    }
                    dw::DW_AT_abstract_origin | dw::DW_AT_specification => {
                        at = global_ref(unit, a.value())
                    }
                    _ => {}
                }
            }
            for (is_name, v) in values {
                let id = self.string_id(ui, v)?;
                if is_name {
                    name = id
                } else {
                    linkage = id
                }
            }
            if name != 0 && linkage != 0 {
                break;
            }
        }
        self.names.insert(start, (name, linkage));
        Ok((name, linkage))
    }

    fn load_other(&mut self, ui: usize) -> gimli::Result<()> {
        if ui != self.index && !self.others.contains_key(&ui) {
            let unit = self.ctx.dwarf.unit(self.ctx.headers[ui])?;
            self.others.insert(ui, unit);
        }
        Ok(())
    }

    /// Interned source path of a line-program file index.
    fn file_id(&mut self, index: u64) -> u32 {
        if let Some(&id) = self.files.get(&index) {
            return id;
        }
        let path = self.file_path(index).unwrap_or_default();
        let id = self.strings.intern(&path);
        self.files.insert(index, id);
        id
    }

    fn file_path(&self, index: u64) -> Option<Vec<u8>> {
        let (dwarf, unit) = (&self.ctx.dwarf, self.unit);
        let header = unit.line_program.as_ref()?.header();
        let file = header.file(index)?;
        let name = dwarf.attr_string(unit, file.path_name()).ok()?;
        let dir = match file.directory(header) {
            Some(v) => dwarf
                .attr_string(unit, v)
                .ok()
                .map(|s| s.slice())
                .unwrap_or(b""),
            None => b"",
        };
        let comp_dir = unit.comp_dir.map(|s| s.slice()).unwrap_or(b"");
        Some(source_path(comp_dir, dir, name.slice()))
    }
}

/// The innermost concrete function and the directly enclosing inline site
/// (-1: none) of a DIE about to open, or `None` outside live code.
fn context(stack: &[Frame]) -> Option<(usize, i32)> {
    let mut parent = -1;
    for frame in stack.iter().rev() {
        match frame.kind {
            Kind::Site { idx, .. } if parent < 0 => parent = idx as i32,
            Kind::Site { .. } => {}
            Kind::Func { idx, .. } => return Some((idx, parent)),
            Kind::Skip => return None,
        }
    }
    None
}

/// Hand a closed site's spans to its enclosing site (as a child) and to its
/// function (as inline-covered code).
fn give_to_ancestors(stack: &mut [Frame], own: &[Span]) {
    let mut parent_done = false;
    for frame in stack.iter_mut().rev() {
        match &mut frame.kind {
            Kind::Site { kids, .. } if !parent_done => {
                kids.extend_from_slice(own);
                parent_done = true;
            }
            Kind::Site { .. } => {}
            Kind::Func { inline, .. } => {
                inline.extend_from_slice(own);
                return;
            }
            Kind::Skip => return,
        }
    }
}

/// `.debug_info` offset of a DIE reference, if it is one this reader follows.
fn global_ref(unit: &Unit<'_>, value: Value<'_>) -> Option<usize> {
    match value {
        AttributeValue::UnitRef(o) => {
            let start = unit.header.offset().as_debug_info_offset()?.0;
            Some(start + o.0)
        }
        AttributeValue::DebugInfoRef(o) => Some(o.0),
        _ => None,
    }
}
