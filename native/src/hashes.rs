//! Symbol-name hashes for the size diff: the compiled twin of
//! `perfab.size.keys.name_hashes`, which documents the hash (Horner's rule
//! over the name's bytes, modulo 2**64, after removing every `.NUMBER`).
//! Both must give the same numbers; the tests compare them.
//!
//! As there, the bytes `\.[0-9]+` removes are marked over the whole string
//! table first, then the counters of `__UNIQUE_ID_<prefix><N>` names, and
//! only then is each name hashed: a name sharing its tail with another in
//! the table (the linker merges suffixes) sees the same marks.

/// The 64-bit FNV prime, the multiplier of `keys.P`.
const P: u64 = 0x100000001B3;
const UNIQUE_ID: &[u8] = b"__UNIQUE_ID_";
const PREFIXES: [&[u8]; 2] = [b"__pfx_", b"__cfi_"];

/// Per name: the hash with `.NUMBER`s (and counters) removed, the hash of
/// its head (no `__pfx_`/`__cfi_`, cut at the first '.'), and whether it
/// starts inside a `.NUMBER` run of a longer string (hashed by the caller).
pub struct Hashes {
    pub name: Vec<u64>,
    pub head: Vec<u64>,
    pub odd: Vec<bool>,
}

pub fn name_hashes(c: &[u8], offsets: &[i64], fold_counters: bool, heads: bool) -> Hashes {
    let n = offsets.len();
    let mut out = Hashes {
        name: vec![0; n],
        head: vec![0; n],
        odd: vec![false; n],
    };
    if n == 0 || c.is_empty() {
        return out;
    }
    let mut removed = removed_bytes(c);
    let last = c.len() as i64 - 1;
    let spans: Vec<(usize, usize)> = offsets
        .iter()
        .map(|&o| {
            let a = o.clamp(0, last) as usize;
            (a, c[a..].iter().position(|&b| b == 0).map_or(a, |k| a + k))
        })
        .collect();
    if fold_counters {
        for &(a, end) in &spans {
            remove_counter(c, a, end, &mut removed);
        }
    }
    for (i, &(a, end)) in spans.iter().enumerate() {
        let (hs, he) = if heads { head_span(c, a, end) } else { (a, a) };
        let (mut name, mut head) = (0u64, 0u64);
        for pos in a..end {
            if removed[pos] {
                continue;
            }
            let ch = u64::from(c[pos]);
            name = name.wrapping_mul(P).wrapping_add(ch);
            if pos >= hs && pos < he {
                head = head.wrapping_mul(P).wrapping_add(ch);
            }
        }
        out.name[i] = name;
        out.head[i] = head;
        out.odd[i] = removed[a] && c[a] != b'.';
    }
    out
}

/// The bytes `\.[0-9]+` removes: a '.' before a digit, and the digits after it.
fn removed_bytes(c: &[u8]) -> Vec<bool> {
    let mut removed = vec![false; c.len()];
    let mut i = 0;
    while i + 1 < c.len() {
        if c[i] == b'.' && c[i + 1].is_ascii_digit() {
            removed[i] = true;
            i += 1;
            while i < c.len() && c[i].is_ascii_digit() {
                removed[i] = true;
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    removed
}

/// Mark the trailing counter of a `__UNIQUE_ID_<prefix><N>` name at `[a, end)`:
/// back from its end over digits and bytes already removed.
fn remove_counter(c: &[u8], a: usize, end: usize, removed: &mut [bool]) {
    if end - a <= UNIQUE_ID.len() || !c[a..].starts_with(UNIQUE_ID) {
        return;
    }
    let mut tail = end;
    while tail > a && (removed[tail - 1] || c[tail - 1].is_ascii_digit()) {
        removed[tail - 1] = true;
        tail -= 1;
    }
}

/// `[start, stop)` of the head of the name at `[a, end)`.
fn head_span(c: &[u8], a: usize, end: usize) -> (usize, usize) {
    let prefixed = end - a > 6 && PREFIXES.iter().any(|p| c[a..].starts_with(p));
    let start = if prefixed { a + 6 } else { a };
    let stop = c[start..end]
        .iter()
        .position(|&b| b == b'.')
        .map_or(end, |k| start + k);
    (start, stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(s: &[u8]) -> u64 {
        s.iter()
            .fold(0u64, |h, &b| h.wrapping_mul(P).wrapping_add(u64::from(b)))
    }

    #[test]
    fn numbers_and_counters_are_removed() {
        let tab = b"\0foo.isra.0\0__UNIQUE_ID_ddebug503.14\0__pfx_bar.cold\0";
        let h = name_hashes(tab, &[1, 12, 37], true, true);
        assert_eq!(
            h.name,
            vec![
                hash(b"foo.isra"),
                hash(b"__UNIQUE_ID_ddebug"),
                hash(b"__pfx_bar.cold")
            ]
        );
        assert_eq!(
            h.head,
            vec![hash(b"foo"), hash(b"__UNIQUE_ID_ddebug"), hash(b"bar")]
        );
        assert_eq!(h.odd, vec![false; 3]);
    }

    #[test]
    fn a_name_inside_a_number_run_is_odd() {
        let h = name_hashes(b"\0x.12\0", &[4], true, true);
        assert_eq!(h.odd, vec![true]);
    }
}
