//! String interning and source-path normalisation.

use std::collections::HashMap;

/// A table of distinct byte strings; id 0 is always the empty string.
#[derive(Default)]
pub struct Interner {
    ids: HashMap<Vec<u8>, u32>,
    pub strings: Vec<Vec<u8>>,
}

impl Interner {
    pub fn new() -> Self {
        let mut t = Interner::default();
        t.intern(b"");
        t
    }

    pub fn intern(&mut self, s: &[u8]) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.ids.insert(s.to_vec(), id);
        self.strings.push(s.to_vec());
        id
    }
}

/// `dir/name` made comparable across builds: relative to `comp_dir` when it
/// lies below it, with `.` and `..` components folded.
pub fn source_path(comp_dir: &[u8], dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut joined = Vec::with_capacity(dir.len() + name.len() + 1);
    if name.starts_with(b"/") || dir.is_empty() {
        joined.extend_from_slice(name);
    } else {
        joined.extend_from_slice(dir);
        joined.push(b'/');
        joined.extend_from_slice(name);
    }
    if !joined.starts_with(b"/") && comp_dir.starts_with(b"/") {
        let mut abs = comp_dir.to_vec();
        abs.push(b'/');
        abs.extend_from_slice(&joined);
        joined = abs;
    }
    let folded = fold(&joined);
    let root = fold(comp_dir);
    let below = folded.len() > root.len() + 1 && folded.starts_with(&root);
    if !root.is_empty() && below && folded[root.len()] == b'/' {
        return folded[root.len() + 1..].to_vec();
    }
    folded
}

/// Fold `.`, `..` and repeated separators out of a path.
fn fold(path: &[u8]) -> Vec<u8> {
    let absolute = path.starts_with(b"/");
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in path.split(|&c| c == b'/') {
        match part {
            b"" | b"." => {}
            b".." if parts.last().is_some_and(|p| *p != b"..") => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    if absolute {
        out.push(b'/');
    }
    out.extend_from_slice(&parts.join(&b'/'));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_to_build_dir() {
        let p = source_path(b"/build/linux", b"./include/linux", b"spinlock.h");
        assert_eq!(p, b"include/linux/spinlock.h");
        let p = source_path(b"/build/linux", b"/build/linux/kernel", b"fork.c");
        assert_eq!(p, b"kernel/fork.c");
        let p = source_path(b"/build/linux", b"", b"kernel/../mm/slab.c");
        assert_eq!(p, b"mm/slab.c");
        let p = source_path(b"/tmp/x", b"/usr/include", b"stdio.h");
        assert_eq!(p, b"/usr/include/stdio.h");
    }
}
