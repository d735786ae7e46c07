//! Declares the `loom` cfg, under which the write order's model tests run
//! (`RUSTFLAGS="--cfg loom" cargo test -p flexdb --lib --release write_order`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
