//! Maintenance of a space: commits and checkpoints ([`commit`]), garbage
//! collection and room making ([`gc`]), and the background thread that
//! runs them when automatic maintenance is on ([`background`]), and
//! giving free segments back to the file system ([`compact`]).
//!
//! `commit` and `gc` add methods to [`crate::space::SpaceInner`]; they run
//! under the space's `maint` mutex (see `space` for the lock order), so at
//! most one commit, checkpoint or collection round runs at a time.

pub mod background;
pub mod commit;
pub mod compact;
pub mod gc;
