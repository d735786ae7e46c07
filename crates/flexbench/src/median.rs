//! The median of repeated measurements, shared by every benchmark that
//! repeats its runs.
//!
//! Invariant: the median of an even count is the mean of the middle two.

/// The median of sorted, non-empty `v`.
pub fn of_sorted(v: &[f64]) -> f64 {
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The median of `v` in any order (`None` when empty). Sorts `v`.
pub fn of(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(of_sorted(v))
}

#[cfg(test)]
mod tests {
    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(super::of(&mut []), None);
        assert_eq!(super::of(&mut [9.0]), Some(9.0));
        assert_eq!(super::of(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(super::of(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(super::of_sorted(&[1.0, 2.0, 9.0]), 2.0);
    }
}
