//! Per-callee comparison of two files' inline sites, the counting half of
//! `perfab.size.inline.compare_inlines` done over the reader's columns.
//!
//! Each file's sites are summed per callee name (sites, exclusive and
//! inclusive bytes) and, within a callee, per caller name (inclusive bytes
//! and the caller's largest site, the first in DWARF order on a tie).  Only
//! callees whose three sums differ are returned, each with its callers of
//! largest |inclusive delta| and the call site that shows each one.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::nm::Fx;

type Map<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// One file's inline sites as the reader returns them, names resolved to strings.
pub struct Sites<'a> {
    pub strings: &'a [String], // the file's string table
    pub callee: Vec<u32>,      // string id of each site's callee
    pub caller: Vec<u32>,      // string id of each site's concrete function
    pub file: Vec<u32>,        // string id of each site's call file
    pub line: Vec<u32>,        // call line of each site
    pub exclusive: Vec<u32>,   // exclusive bytes of each site
    pub inclusive: Vec<u32>,   // inclusive bytes of each site
}

/// One callee's sums over one file (sites, exclusive, inclusive bytes; callers).
#[derive(Default)]
struct Tally<'a> {
    sites: u64,
    exclusive: u64,
    inclusive: u64,
    by_caller: Map<&'a str, (u64, usize)>, // caller -> (inclusive bytes, its largest site)
}

/// A callee whose inline sites changed; pairs are (old, new).
pub struct Change<'a> {
    pub callee: &'a str,
    pub sites: (u64, u64),
    pub exclusive: (u64, u64),
    pub inclusive: (u64, u64),
    pub top: Vec<(&'a str, i64, &'a str, u32)>, // (caller, inclusive delta, call file, call line)
}

fn tally<'a>(s: &Sites<'a>) -> Map<&'a str, Tally<'a>> {
    let mut out: Map<&'a str, Tally<'a>> = Map::default();
    for i in 0..s.callee.len() {
        let t = out
            .entry(s.strings[s.callee[i] as usize].as_str())
            .or_default();
        let bytes = s.inclusive[i] as u64;
        t.sites += 1;
        t.exclusive += s.exclusive[i] as u64;
        t.inclusive += bytes;
        let caller = s.strings[s.caller[i] as usize].as_str();
        let slot = t.by_caller.entry(caller).or_insert((0, i));
        slot.0 += bytes;
        if bytes > s.inclusive[slot.1] as u64 {
            slot.1 = i;
        }
    }
    out
}

/// Callees whose site count or byte sums differ between `old` and `new`, unordered,
/// each with at most `top` callers of nonzero delta, largest |delta| first, then by name.
pub fn compare<'a>(old: &Sites<'a>, new: &Sites<'a>, top: usize) -> Vec<Change<'a>> {
    let (a, b) = (tally(old), tally(new));
    let empty = Tally::default();
    let mut callees: Vec<&str> = a.keys().copied().collect();
    callees.extend(b.keys().copied().filter(|c| !a.contains_key(c)));
    let mut out = Vec::new();
    for callee in callees {
        let (x, y) = (
            a.get(callee).unwrap_or(&empty),
            b.get(callee).unwrap_or(&empty),
        );
        if (x.sites, x.exclusive, x.inclusive) == (y.sites, y.exclusive, y.inclusive) {
            continue;
        }
        out.push(Change {
            callee,
            sites: (x.sites, y.sites),
            exclusive: (x.exclusive, y.exclusive),
            inclusive: (x.inclusive, y.inclusive),
            top: top_callers(x, y, old, new, top),
        });
    }
    out
}

fn top_callers<'a>(
    x: &Tally<'a>,
    y: &Tally<'a>,
    old: &Sites<'a>,
    new: &Sites<'a>,
    top: usize,
) -> Vec<(&'a str, i64, &'a str, u32)> {
    let get = |t: &Tally<'a>, c: &str| t.by_caller.get(c).map_or(0, |v| v.0 as i64);
    let mut deltas: Vec<(&'a str, i64)> = x
        .by_caller
        .keys()
        .copied()
        .collect::<Vec<_>>()
        .into_iter()
        .chain(
            y.by_caller
                .keys()
                .copied()
                .filter(|c| !x.by_caller.contains_key(c)),
        )
        .map(|c| (c, get(y, c) - get(x, c)))
        .filter(|&(_, d)| d != 0)
        .collect();
    deltas.sort_unstable_by(|p, q| q.1.abs().cmp(&p.1.abs()).then(p.0.cmp(q.0)));
    deltas.truncate(top);
    deltas
        .into_iter()
        .map(|(caller, d)| {
            let (t, s) = if d > 0 { (y, new) } else { (x, old) };
            let site = t.by_caller[caller].1;
            (
                caller,
                d,
                s.strings[s.file[site] as usize].as_str(),
                s.line[site],
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites<'a>(strings: &'a [String], rows: &[(u32, u32, u32, u32)]) -> Sites<'a> {
        Sites {
            strings,
            callee: rows.iter().map(|r| r.0).collect(),
            caller: rows.iter().map(|r| r.1).collect(),
            file: vec![3; rows.len()],
            line: rows.iter().map(|r| r.3).collect(),
            exclusive: rows.iter().map(|r| r.2).collect(),
            inclusive: rows.iter().map(|r| r.2).collect(),
        }
    }

    #[test]
    fn sums_per_callee_and_names_the_largest_caller() {
        let strings: Vec<String> = ["", "lock", "main", "a.c", "work", "same"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // old: lock in main (4 B, line 1); new: lock in main twice (4 B line 2, 9 B line 3), lock in work (2 B)
        let old = sites(&strings, &[(1, 2, 4, 1), (5, 2, 7, 9)]);
        let new = sites(
            &strings,
            &[(1, 2, 4, 2), (1, 2, 9, 3), (1, 4, 2, 4), (5, 2, 7, 9)],
        );
        let changes = compare(&old, &new, 3);
        assert_eq!(changes.len(), 1, "an unchanged callee is left out");
        let c = &changes[0];
        assert_eq!((c.callee, c.sites, c.inclusive), ("lock", (1, 3), (4, 15)));
        assert_eq!(c.top, vec![("main", 9, "a.c", 3), ("work", 2, "a.c", 4)]);
        let back = compare(&new, &old, 1);
        assert_eq!(back[0].top, vec![("main", -9, "a.c", 3)]);
    }

    #[test]
    fn ties_keep_the_first_site_and_sort_callers_by_name() {
        let strings: Vec<String> = ["", "f", "b", "a.c", "a"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let old = sites(&strings, &[]);
        let new = sites(&strings, &[(1, 2, 5, 1), (1, 2, 5, 2), (1, 4, 10, 7)]);
        let c = &compare(&old, &new, 3)[0];
        assert_eq!(c.top, vec![("a", 10, "a.c", 7), ("b", 10, "a.c", 1)]);
    }
}
