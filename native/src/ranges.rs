//! Half-open address spans `[begin, end)` and the set operations the
//! inline attribution needs: normalise, measure, subtract.

/// One address span, `begin` inclusive, `end` exclusive.
pub type Span = (u64, u64);

/// Sort, drop empty spans and merge overlapping or touching ones.
pub fn normalize(spans: &mut Vec<Span>) {
    spans.retain(|s| s.0 < s.1);
    if spans.len() < 2 {
        return;
    }
    spans.sort_unstable();
    let mut out = 0;
    for i in 1..spans.len() {
        if spans[i].0 <= spans[out].1 {
            spans[out].1 = spans[out].1.max(spans[i].1);
        } else {
            out += 1;
            spans[out] = spans[i];
        }
    }
    spans.truncate(out + 1);
}

/// Bytes covered by normalised spans.
pub fn measure(spans: &[Span]) -> u64 {
    spans.iter().map(|s| s.1 - s.0).sum()
}

/// Bytes of `own` (normalised) not covered by `sub` (normalised here).
pub fn measure_minus(own: &[Span], sub: &mut Vec<Span>) -> u64 {
    normalize(sub);
    let mut total = 0;
    let mut j = 0;
    for &(begin, end) in own {
        let mut cur = begin;
        while j < sub.len() && sub[j].1 <= cur {
            j += 1;
        }
        let mut k = j;
        while cur < end && k < sub.len() && sub[k].0 < end {
            if sub[k].0 > cur {
                total += sub[k].0 - cur;
            }
            cur = cur.max(sub[k].1);
            k += 1;
        }
        if cur < end {
            total += end - cur;
        }
    }
    total
}

/// The executable sections of the file: a span survives only inside one.
///
/// Linked files keep DWARF for code the linker discarded (functions in
/// `.exit.text` of vmlinux, `--gc-sections`), with addresses resolved to 0
/// or a tombstone; clipping to executable sections drops them.
pub struct CodeFilter {
    sections: Vec<Span>,
}

impl CodeFilter {
    pub fn new(mut sections: Vec<Span>) -> Self {
        normalize(&mut sections);
        CodeFilter { sections }
    }

    /// The part of `span` inside the executable section holding its start.
    pub fn clip(&self, span: Span) -> Option<Span> {
        let idx = self.sections.partition_point(|s| s.1 <= span.0);
        let sec = self.sections.get(idx)?;
        if sec.0 > span.0 || span.0 >= span.1 {
            return None;
        }
        Some((span.0, span.1.min(sec.1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtract_children() {
        let own = vec![(0, 100), (200, 250)];
        let mut kids = vec![(10, 20), (15, 30), (90, 210)];
        assert_eq!(measure_minus(&own, &mut kids), 100 - 20 - 10 + 40);
    }

    #[test]
    fn normalize_merges() {
        let mut v = vec![(5, 9), (0, 3), (3, 4), (8, 8)];
        normalize(&mut v);
        assert_eq!(v, vec![(0, 4), (5, 9)]);
        assert_eq!(measure(&v), 8);
    }

    #[test]
    fn clip_to_code() {
        let f = CodeFilter::new(vec![(100, 200), (300, 400)]);
        assert_eq!(f.clip((0, 10)), None);
        assert_eq!(f.clip((150, 250)), Some((150, 200)));
        assert_eq!(f.clip((300, 310)), Some((300, 310)));
    }
}
