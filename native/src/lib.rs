//! `perfab_native`: the compiled DWARF reader behind `perfab size`.
//!
//! `inline_sites(path, threads=0)` walks every compilation unit of an ELF
//! file in parallel and returns, as packed little-endian columns, every
//! concrete function and every `DW_TAG_inlined_subroutine` with its callee,
//! caller, enclosing inline, call site and bytes.  Each code byte belongs to
//! its innermost inline site: a site's exclusive bytes are its ranges minus
//! its children's; its inclusive bytes are all its ranges.

mod chosen;
mod collect;
mod hashes;
mod load;
mod names;
mod nm;
mod ranges;
mod resolve;
mod tally;
mod walk;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::tally::Sites;

pub use collect::{read_inline_sites, Columns};

/// Read the inline sites of the ELF file at `path`.
///
/// Returns `None` when the file has no `.debug_info`; raises `ValueError`
/// with a one-line reason when the file cannot be read as ELF/DWARF, a
/// panic of the reader included (see `guarded`).
/// `threads=0` uses one thread per CPU.
#[pyfunction]
#[pyo3(signature = (path, threads = 0))]
fn inline_sites(py: Python<'_>, path: &str, threads: usize) -> PyResult<PyObject> {
    let result = py.allow_threads(|| guarded(|| read_inline_sites(path, threads)));
    match result {
        Ok(Some(cols)) => Ok(to_dict(py, &cols)?.into_any().unbind()),
        Ok(None) => Ok(py.None()),
        Err(msg) => Err(PyValueError::new_err(msg)),
    }
}

/// The inline sites of chosen functions only: those whose code holds the
/// address of one of the `.symtab` entries `symbols` (indices into the
/// table, the null symbol being 0).  Returns the dict `inline_sites` does,
/// over those functions and the units holding them (`units` counts the units
/// read), or `None` when the file has no `.debug_info`; raises `ValueError`
/// as `inline_sites` does.
#[pyfunction]
fn function_sites(py: Python<'_>, path: &str, symbols: Vec<usize>) -> PyResult<PyObject> {
    let result = py.allow_threads(|| guarded(|| chosen::read_function_sites(path, &symbols)));
    match result {
        Ok(Some(cols)) => Ok(to_dict(py, &cols)?.into_any().unbind()),
        Ok(None) => Ok(py.None()),
        Err(msg) => Err(PyValueError::new_err(msg)),
    }
}

/// bloat-o-meter's tables between the `.symtab`s of two ELF files.
///
/// For each string of nm letters in `groups` (e.g. "tTdDbBrR"), sizes are
/// summed per name with every `.NUMBER` stripped and the two files compared.
/// The files are read at once, one thread each.  Returns `(old target, new
/// target, tables)`: a target is `(class, big_endian, machine, has_symtab)`,
/// a table `(add, remove, grow, shrink, up, down, old_total, new_total,
/// rows)` with rows `(name, old bytes or None, new bytes or None)`, unordered.
/// Raises `ValueError` when a file is not ELF or fails a check of
/// `perfab.size.elf` (which then names the cause).
#[pyfunction]
fn nm_diff(py: Python<'_>, old: &str, new: &str, groups: Vec<String>) -> PyResult<PyObject> {
    let letters: Vec<&[u8]> = groups.iter().map(|g| g.as_bytes()).collect();
    let result = py.allow_threads(|| {
        guarded(|| {
            let (a, b) = (load::Mapped::open(old)?, load::Mapped::open(new)?);
            let (ra, rb) = std::thread::scope(|scope| {
                let other = scope.spawn(|| nm::nm_sums(b.bytes(), &letters));
                let mine = nm::nm_sums(a.bytes(), &letters);
                (mine, other.join().unwrap_or_else(|_| Err("the reader thread failed".into())))
            });
            let ((ta, sa), (tb, sb)) = (ra?, rb?);
            let tables: Vec<nm::Table> = sa.iter().zip(sb.iter()).map(|(x, y)| nm::compare(x, y)).collect();
            Ok((ta, tb, tables))
        })
    });
    let (ta, tb, tables) = result.map_err(PyValueError::new_err)?;
    let target = |t: &nm::Target| (t.class, t.big_endian, t.machine, t.has_symtab);
    let out = PyList::empty_bound(py);
    for t in tables {
        let rows = PyList::empty_bound(py);
        for (name, o, n) in t.rows {
            rows.append((PyBytes::new_bound(py, &name), o, n))?;
        }
        out.append((t.add, t.remove, t.grow, t.shrink, t.up, t.down, t.old_total, t.new_total, rows))?;
    }
    Ok((target(&ta), target(&tb), out).into_py(py))
}

/// Compare two files' inline sites per callee: the dicts `inline_sites`
/// returned for the old and the new file.
///
/// Returns one tuple per callee whose site count or byte sums differ,
/// unordered: `(callee, sites old, sites new, exclusive old, exclusive new,
/// inclusive old, inclusive new, callers)`, callers being at most `top`
/// `(caller, inclusive delta, call file, call line)` of nonzero delta,
/// largest |delta| first, the line that of the caller's largest site on the
/// side that grew.  Names compare as strings, as in the Python tally.
#[pyfunction]
#[pyo3(signature = (old, new, top = 3))]
fn compare_sites(py: Python<'_>, old: &Bound<'_, PyDict>, new: &Bound<'_, PyDict>, top: usize) -> PyResult<PyObject> {
    let (so, sn): (Vec<String>, Vec<String>) = (item(old, "strings")?.extract()?, item(new, "strings")?.extract()?);
    let (a, b) = (sites_of(old, &so)?, sites_of(new, &sn)?);
    let changes = py.allow_threads(|| tally::compare(&a, &b, top));
    let out = PyList::empty_bound(py);
    for c in changes {
        out.append((c.callee, c.sites.0, c.sites.1, c.exclusive.0, c.exclusive.1, c.inclusive.0, c.inclusive.1, c.top))?;
    }
    Ok(out.into_any().unbind())
}

fn item<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("the column {key} is missing")))
}

fn u32s(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Vec<u32>> {
    let any = item(d, key)?;
    let bytes = any.downcast::<PyBytes>()?.as_bytes();
    Ok(bytes.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect())
}

fn sites_of<'a>(d: &Bound<'_, PyDict>, strings: &'a [String]) -> PyResult<Sites<'a>> {
    let func_name = u32s(d, "func_name")?;
    let caller = u32s(d, "site_func")?.iter().map(|&f| func_name[f as usize]).collect();
    let sites = Sites {
        strings,
        callee: u32s(d, "site_callee")?,
        caller,
        file: u32s(d, "site_file")?,
        line: u32s(d, "site_line")?,
        exclusive: u32s(d, "site_exclusive")?,
        inclusive: u32s(d, "site_inclusive")?,
    };
    let n = sites.callee.len();
    let ok = [&sites.caller, &sites.file, &sites.line, &sites.exclusive, &sites.inclusive].iter().all(|c| c.len() == n)
        && [&sites.callee, &sites.file].iter().all(|c| c.iter().all(|&i| (i as usize) < strings.len()))
        && sites.caller.iter().all(|&i| (i as usize) < strings.len());
    if !ok {
        return Err(PyValueError::new_err("the site columns do not match each other or the string table"));
    }
    Ok(sites)
}

/// `perfab.size.keys.name_hashes` compiled: the hashes of the NUL-terminated
/// names at `offsets` (native-endian int64 bytes) in `strtab`.  Returns
/// `(name, head, odd)` as bytes: two uint64 columns and one of 0/1 bytes,
/// native-endian, one entry per offset.
#[pyfunction]
fn name_hashes(
    py: Python<'_>,
    strtab: &[u8],
    offsets: &[u8],
    fold_counters: bool,
    heads: bool,
) -> PyResult<(PyObject, PyObject, PyObject)> {
    let offsets: Vec<i64> = offsets
        .chunks_exact(8)
        .map(|w| i64::from_ne_bytes(w.try_into().unwrap()))
        .collect();
    let h = py.allow_threads(|| hashes::name_hashes(strtab, &offsets, fold_counters, heads));
    let bytes = |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_ne_bytes()).collect() };
    let odd: Vec<u8> = h.odd.iter().map(|&b| u8::from(b)).collect();
    Ok((
        PyBytes::new_bound(py, &bytes(&h.name)).into_any().unbind(),
        PyBytes::new_bound(py, &bytes(&h.head)).into_any().unbind(),
        PyBytes::new_bound(py, &odd).into_any().unbind(),
    ))
}

/// Run `read`, turning a panic (a bug met on some corrupt input) into a
/// one-line error instead of a `PanicException` and a backtrace on stderr.
pub fn guarded<T>(read: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        let line = what.split_whitespace().collect::<Vec<_>>().join(" ");
        Err(format!("the DWARF reader failed on this file (internal error: {line})"))
    })
}

fn to_dict<'py>(py: Python<'py>, c: &Columns) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    let strings: Vec<String> = c
        .strings
        .iter()
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    d.set_item("strings", PyList::new_bound(py, strings))?;
    let u32s: [(&str, &Vec<u32>); 11] = [
        ("func_name", &c.func_name),
        ("func_linkage", &c.func_linkage),
        ("func_symbol", &c.func_symbol),
        ("site_callee", &c.site_callee),
        ("site_linkage", &c.site_linkage),
        ("site_func", &c.site_func),
        ("site_file", &c.site_file),
        ("site_line", &c.site_line),
        ("site_exclusive", &c.site_exclusive),
        ("site_inclusive", &c.site_inclusive),
        ("func_bytes", &c.func_bytes),
    ];
    for (key, col) in u32s {
        let bytes: Vec<u8> = col.iter().flat_map(|v| v.to_le_bytes()).collect();
        d.set_item(key, PyBytes::new_bound(py, &bytes))?;
    }
    let parent: Vec<u8> = c.site_parent.iter().flat_map(|v| v.to_le_bytes()).collect();
    d.set_item("site_parent", PyBytes::new_bound(py, &parent))?;
    let entry: Vec<u8> = c.func_entry.iter().flat_map(|v| v.to_le_bytes()).collect();
    d.set_item("func_entry", PyBytes::new_bound(py, &entry))?;
    d.set_item("covered_bytes", c.covered_bytes)?;
    d.set_item("function_bytes", c.function_bytes)?;
    d.set_item("units", c.units)?;
    d.set_item("unit_errors", c.unit_errors.clone())?;
    d.set_item("versions", c.versions.clone())?;
    Ok(d)
}

#[pymodule]
fn perfab_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // `guarded` reports a panic as one line; the default hook would also print
    // a multi-line message on stderr.  The hook belongs to this library's copy
    // of std, so other extension modules keep theirs.
    std::panic::set_hook(Box::new(|_| {}));
    m.add_function(wrap_pyfunction!(inline_sites, m)?)?;
    m.add_function(wrap_pyfunction!(function_sites, m)?)?;
    m.add_function(wrap_pyfunction!(nm_diff, m)?)?;
    m.add_function(wrap_pyfunction!(compare_sites, m)?)?;
    m.add_function(wrap_pyfunction!(name_hashes, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::guarded;

    #[test]
    fn a_panic_becomes_one_line() {
        let err = guarded::<()>(|| panic!("index out of bounds:\n the len is 3")).unwrap_err();
        assert_eq!(
            err,
            "the DWARF reader failed on this file (internal error: index out of bounds: the len is 3)"
        );
        assert_eq!(guarded(|| Ok::<_, String>(7)), Ok(7));
    }
}
