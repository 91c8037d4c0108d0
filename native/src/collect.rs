//! Reading a whole file: units walked in parallel, then merged into one
//! string table and flat columns.

use std::borrow::Cow;

use gimli::{EndianSlice, RunTimeEndian, SectionId};
use rayon::prelude::*;

use crate::load::{load, Loaded, Mapped};
use crate::names::Interner;
use crate::walk::{walk_unit, Ctx, CuOut};

/// The whole file's functions and inline sites, column by column.
/// String ids index `strings` (id 0 is ""); `site_parent` is -1 at top level.
#[derive(Default)]
pub struct Columns {
    pub strings: Vec<Vec<u8>>,
    pub func_name: Vec<u32>,
    pub func_linkage: Vec<u32>,
    pub func_symbol: Vec<u32>,
    pub func_entry: Vec<u64>,
    pub func_bytes: Vec<u32>,
    pub site_callee: Vec<u32>,
    pub site_linkage: Vec<u32>,
    pub site_func: Vec<u32>,
    pub site_parent: Vec<i32>,
    pub site_file: Vec<u32>,
    pub site_line: Vec<u32>,
    pub site_exclusive: Vec<u32>,
    pub site_inclusive: Vec<u32>,
    pub covered_bytes: u64,
    pub function_bytes: u64,
    pub units: usize,
    pub unit_errors: Vec<String>,
    pub versions: Vec<u16>,
}

/// `Ok(None)`: the file has no `.debug_info`.
pub fn read_inline_sites(path: &str, threads: usize) -> Result<Option<Columns>, String> {
    let mapped = Mapped::open(path)?;
    let loaded = load(mapped.bytes(), None)?;
    if loaded
        .sections
        .get(".debug_info")
        .is_none_or(|s| s.is_empty())
    {
        return Ok(None);
    }
    let ctx = context(&loaded, None)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| format!("cannot start threads: {e}"))?;
    let outs: Vec<Result<CuOut, String>> = pool.install(|| {
        (0..ctx.headers.len())
            .into_par_iter()
            .map(|i| walk_unit(&ctx, i).map_err(|e| unit_error(&ctx, i, e)))
            .collect()
    });
    Ok(Some(merge(outs, &loaded)))
}

/// Unit headers read between two releases of the mapping's pages (`context`).
const RELEASE_UNITS: usize = 64;

/// The file's DWARF and every unit's header.  With `release`, the pages the
/// headers touched are given back every `RELEASE_UNITS` units: each header
/// sits on its own pages, and the kernel maps a fault's neighbours too
/// (fault-around), so a vmlinux's headers alone would leave 100 MB resident.
pub(crate) fn context<'a>(
    loaded: &'a Loaded<'_>,
    release: Option<&Mapped>,
) -> Result<Ctx<'a>, String> {
    let endian = if loaded.little_endian {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let section = |id: SectionId| -> Result<EndianSlice<'a, RunTimeEndian>, String> {
        let data: &[u8] = loaded
            .sections
            .get(id.name())
            .map_or(&[], |c: &Cow<[u8]>| c);
        Ok(EndianSlice::new(data, endian))
    };
    let dwarf = gimli::Dwarf::load(section)?;
    let mut headers = Vec::new();
    let mut iter = dwarf.units();
    while let Some(h) = iter
        .next()
        .map_err(|e| format!("bad .debug_info unit header: {e}"))?
    {
        headers.push(h);
        if let Some(m) = release.filter(|_| headers.len() % RELEASE_UNITS == 0) {
            m.release();
        }
    }
    let starts = headers
        .iter()
        .map(|h| h.offset().as_debug_info_offset().map_or(0, |o| o.0))
        .collect();
    Ok(Ctx {
        dwarf,
        headers,
        starts,
        code: &loaded.code,
    })
}

pub(crate) fn unit_error(ctx: &Ctx<'_>, index: usize, err: gimli::Error) -> String {
    let text = format!("unit at .debug_info+{:#x}: {err}", ctx.starts[index]);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn merge(outs: Vec<Result<CuOut, String>>, loaded: &Loaded<'_>) -> Columns {
    let mut c = Columns {
        units: outs.len(),
        ..Columns::default()
    };
    let mut strings = Interner::new();
    for out in outs {
        match out {
            Ok(cu) => append(&mut c, &mut strings, cu),
            Err(msg) => c.unit_errors.push(msg),
        }
    }
    c.func_symbol = c
        .func_entry
        .iter()
        .map(|a| loaded.symbols.get(a).map_or(0, |n| strings.intern(n)))
        .collect();
    c.versions.sort_unstable();
    c.versions.dedup();
    c.strings = strings.strings;
    c
}

fn append(c: &mut Columns, strings: &mut Interner, cu: CuOut) {
    let ids: Vec<u32> = cu.strings.iter().map(|s| strings.intern(s)).collect();
    let func_base = c.func_name.len() as u32;
    let site_base = c.site_callee.len() as i32;
    for f in &cu.funcs {
        c.func_name.push(ids[f.name as usize]);
        c.func_linkage.push(ids[f.linkage as usize]);
        c.func_entry.push(f.entry);
        c.func_bytes.push(f.bytes as u32);
    }
    for s in &cu.sites {
        c.site_callee.push(ids[s.callee as usize]);
        c.site_linkage.push(ids[s.linkage as usize]);
        c.site_func.push(func_base + s.func);
        c.site_parent.push(if s.parent < 0 {
            -1
        } else {
            site_base + s.parent
        });
        c.site_file.push(ids[s.file as usize]);
        c.site_line.push(s.line);
        c.site_exclusive.push(s.exclusive as u32);
        c.site_inclusive.push(s.inclusive as u32);
    }
    c.covered_bytes += cu.covered_bytes;
    c.function_bytes += cu.function_bytes;
    c.versions.push(cu.version);
}
