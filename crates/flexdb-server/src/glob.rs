//! Glob patterns as KEYS and SCAN MATCH read them: `*`, `?`, `[abc]`,
//! `[^a]`, `[a-z]`, and `\` to take the next byte literally.
//!
//! Invariants: matching never panics and takes time bounded by the
//! product of the two lengths (no backtracking blow-up): `*` is matched
//! by remembering only the last star.

/// Whether `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p, i));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((ok, next)) = class(pattern, p, s[i]) {
                        if ok {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == s[i] {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if c == s[i] {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp + 1;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Whether byte `c` is in the class opening at `pattern[p]` (`[`), and
/// where the pattern goes on after it; `None` for an unclosed class
/// (then `[` is matched literally as Redis does... approximately: as a
/// failed match).
fn class(pattern: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let negate = pattern.get(j) == Some(&b'^');
    if negate {
        j += 1;
    }
    let mut hit = false;
    loop {
        let &b = pattern.get(j)?;
        match b {
            b']' => break,
            b'\\' => {
                let &e = pattern.get(j + 1)?;
                hit |= e == c;
                j += 2;
            }
            _ if pattern.get(j + 1) == Some(&b'-')
                && pattern.get(j + 2).is_some_and(|&e| e != b']') =>
            {
                let (lo, hi) = (b.min(pattern[j + 2]), b.max(pattern[j + 2]));
                hit |= (lo..=hi).contains(&c);
                j += 3;
            }
            _ => {
                hit |= b == c;
                j += 1;
            }
        }
    }
    Some((hit != negate, j + 1))
}

/// The literal bytes every match starts with (up to the first special
/// byte), to seek instead of scanning everything.
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'*' | b'?' | b'[' => break,
            b'\\' => match pattern.get(i + 1) {
                Some(&c) => {
                    out.push(c);
                    i += 2;
                }
                None => break,
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(matches(b"*", b""));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h*llo", b"heeeello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-b]llo", b"hbllo"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
        assert!(matches(b"*a*b*c*", b"xxaxxbxxc"));
        assert!(!matches(b"*a*b*c*d", b"xxaxxbxxc"));
        assert!(!matches(b"[abc", b"a"));
        assert_eq!(literal_prefix(b"user:\\*x*"), b"user:*x");
        let long = vec![b'a'; 5000];
        assert!(!matches(b"*a*a*a*a*a*b", &long));
    }
}
