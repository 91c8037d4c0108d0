//! One compilation unit's walk: concrete functions and the inline sites
//! nested in them, each site's bytes split into exclusive and inclusive.
//!
//! The walk streams the unit's DIEs once (`EntriesRaw`), keeping only the
//! chain of open functions and inline sites; nothing else is held.

use std::collections::HashMap;

use gimli::constants as dw;
use gimli::{AttributeValue, EndianSlice, RunTimeEndian};

use crate::names::Interner;
use crate::ranges::{measure, measure_minus, normalize, CodeFilter, Span};

pub type R<'a> = EndianSlice<'a, RunTimeEndian>;
pub(crate) type Unit<'a> = gimli::Unit<R<'a>>;
pub(crate) type Value<'a> = AttributeValue<R<'a>>;

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
pub(crate) struct Die<'a> {
    pub(crate) low: Option<Value<'a>>,
    pub(crate) high: Option<Value<'a>>,
    pub(crate) ranges: Option<Value<'a>>,
    pub(crate) name: Option<Value<'a>>,
    pub(crate) linkage: Option<Value<'a>>,
    pub(crate) origin: Option<Value<'a>>,
    pub(crate) call_file: Option<u64>,
    pub(crate) call_line: u64,
    pub(crate) sibling: Option<gimli::UnitOffset>,
}

impl Die<'_> {
    pub(crate) fn has_code(&self) -> bool {
        self.low.is_some() || self.ranges.is_some()
    }
}

pub(crate) struct Walker<'c, 'a> {
    pub(crate) ctx: &'c Ctx<'a>,
    pub(crate) unit: &'c Unit<'a>,
    pub(crate) index: usize,
    pub(crate) strings: Interner,
    pub(crate) names: HashMap<usize, (u32, u32)>,
    pub(crate) files: HashMap<u64, u32>,
    pub(crate) others: HashMap<usize, Unit<'a>>,
    pub(crate) out: CuOut,
}

pub fn walk_unit(ctx: &Ctx<'_>, index: usize) -> gimli::Result<CuOut> {
    let unit = ctx.dwarf.unit(ctx.headers[index])?;
    let mut w = Walker::new(ctx, &unit, index);
    w.walk(None)?;
    Ok(w.finish())
}

pub(crate) fn read_die<'a>(
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
            dw::DW_AT_sibling => {
                if let AttributeValue::UnitRef(o) = attr.value() {
                    d.sibling = Some(o)
                }
            }
            _ => {}
        }
    }
    Ok(d)
}

impl<'c, 'a> Walker<'c, 'a> {
    pub(crate) fn new(ctx: &'c Ctx<'a>, unit: &'c Unit<'a>, index: usize) -> Self {
        let out = CuOut {
            strings: Vec::new(),
            funcs: Vec::new(),
            sites: Vec::new(),
            covered_bytes: 0,
            function_bytes: 0,
            version: unit.header.version(),
        };
        Walker {
            ctx,
            unit,
            index,
            strings: Interner::new(),
            names: HashMap::new(),
            files: HashMap::new(),
            others: HashMap::new(),
            out,
        }
    }

    /// The unit's result, with the strings its ids index.
    pub(crate) fn finish(mut self) -> CuOut {
        self.out.strings = std::mem::take(&mut self.strings.strings);
        self.out
    }

    /// Walk the whole unit (`start` None), or only the subtree of the DIE at
    /// `start`; returns the offset just past what was walked.
    pub(crate) fn walk(
        &mut self,
        start: Option<gimli::UnitOffset>,
    ) -> gimli::Result<gimli::UnitOffset> {
        let unit = self.unit;
        let mut raw = unit.entries_raw(start)?;
        let mut stack: Vec<Frame> = Vec::new();
        let mut first = true;
        while !raw.is_empty() {
            let depth = raw.next_depth();
            if start.is_some() && !first && depth <= 0 {
                break; // the subtree ended: the DIE's sibling or its parent's end comes next
            }
            first = false;
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
        Ok(raw.next_offset())
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
    pub(crate) fn spans(&self, die: &Die<'a>) -> gimli::Result<(Vec<Span>, u64)> {
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
