//! Names and source files of the DIEs a walk meets: callee names through
//! chains of `DW_AT_abstract_origin` / `DW_AT_specification` (also into
//! other units), call files through the unit's line-program header.

use gimli::constants as dw;
use gimli::{AttributeValue, UnitOffset};

use crate::names::source_path;
use crate::walk::{Die, Unit, Value, Walker};

impl<'a> Walker<'_, 'a> {
    pub(crate) fn string_id(&mut self, unit_index: usize, value: Value<'a>) -> gimli::Result<u32> {
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
    pub(crate) fn names_of(&mut self, die: &Die<'a>) -> gimli::Result<(u32, u32)> {
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
        let mut found = (0, 0);
        let mut at = Some(start);
        for _ in 0..16 {
            let Some(offset) = at else { break };
            at = self.step(offset, &mut found)?;
            if found.0 != 0 && found.1 != 0 {
                break;
            }
        }
        self.names.insert(start, found);
        Ok(found)
    }

    /// Read the DIE at `offset` into the still-missing parts of `found`
    /// (name, linkage name); return the DIE it refers on to, if any.
    fn step(&mut self, offset: usize, found: &mut (u32, u32)) -> gimli::Result<Option<usize>> {
        let starts = &self.ctx.starts;
        let ui = starts.partition_point(|&s| s <= offset).saturating_sub(1);
        self.load_other(ui)?;
        let unit = if ui == self.index {
            self.unit
        } else {
            &self.others[&ui]
        };
        let entry = unit.entry(UnitOffset(offset - starts[ui]))?;
        let (mut name, mut linkage, mut next) = (None, None, None);
        let mut attrs = entry.attrs();
        while let Some(a) = attrs.next()? {
            match a.name() {
                dw::DW_AT_name => name = Some(a.value()),
                dw::DW_AT_linkage_name | dw::DW_AT_MIPS_linkage_name => linkage = Some(a.value()),
                dw::DW_AT_abstract_origin | dw::DW_AT_specification => {
                    next = global_ref(unit, a.value())
                }
                _ => {}
            }
        }
        if let (0, Some(v)) = (found.0, name) {
            found.0 = self.string_id(ui, v)?;
        }
        if let (0, Some(v)) = (found.1, linkage) {
            found.1 = self.string_id(ui, v)?;
        }
        Ok(next)
    }

    fn load_other(&mut self, ui: usize) -> gimli::Result<()> {
        if ui != self.index && !self.others.contains_key(&ui) {
            let unit = self.ctx.dwarf.unit(self.ctx.headers[ui])?;
            self.others.insert(ui, unit);
        }
        Ok(())
    }

    /// Interned source path of a line-program file index.
    pub(crate) fn file_id(&mut self, index: u64) -> u32 {
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
