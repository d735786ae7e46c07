//! Declares the `loom` cfg (set by `RUSTFLAGS="--cfg loom"` for the loom
//! tests of the lock-free modules) so that `cfg(loom)` is not reported as
//! unexpected.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
