//! The commands, each over an open store and an output, shared by the
//! command line (main.rs) and the shell.
//!
//! Invariants: a command never opens or closes the store itself (but
//! `repair`, which works on a closed store's directory) and never prints
//! an error: it returns a [`crate::exit::CliError`]; it writes its
//! regular output only to the writer it is given. A command on pairs
//! works on the one keyspace it is given (`crate::keyspace` picks it);
//! only `keyspaces` and `drop-keyspace` see more than one.

pub mod backup;
pub mod check;
pub mod compact;
pub mod delete_range;
pub mod drop_keyspace;
pub mod dump;
pub mod keyspaces;
pub mod kv;
pub mod load;
pub mod repair;
pub mod scan;
pub mod stats;

use std::path::Path;

use crate::encoding::Encoding;
use crate::exit::CliError;

/// Decodes the argument `arg` named `what` ("key", "value", "--from").
pub fn decode_arg(enc: Encoding, what: &str, arg: &str) -> Result<Vec<u8>, CliError> {
    enc.decode(arg).map_err(|e| {
        let shown = shown_arg(arg);
        CliError::bad_input(format!("{what} {shown:?}: {e}"))
    })
}

/// An argument as a message shows it: its first 40 characters, and `…`
/// when there are more.
pub fn shown_arg(arg: &str) -> String {
    let mut shown: String = arg.chars().take(40).collect();
    if shown.len() < arg.len() {
        shown.push('…');
    }
    shown
}

/// Counts the pairs `pairs` yields (reading the store in `dir`), with a
/// spinner drawn by `template` on stderr (only on a terminal and when not
/// `quiet`). A read error fails the count: an error is never counted as
/// a pair.
pub fn count(
    pairs: flexdb::Iter<'_>,
    dir: &Path,
    quiet: bool,
    template: &str,
) -> Result<u64, CliError> {
    crate::progress::with_bar(quiet, template, |tick| {
        let mut n = 0u64;
        for item in pairs {
            item.map_err(|e| CliError::db(dir, e))?;
            n += 1;
            if n.is_multiple_of(4096) {
                tick(n, n);
            }
        }
        Ok(n)
    })
}

/// Writes to stdout, mapping failures (a broken pipe exits quietly).
pub fn stdout_err(e: std::io::Error) -> CliError {
    CliError::io("stdout", e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Code;

    #[test]
    fn bad_arguments_are_bad_input_naming_the_argument() {
        let e = decode_arg(Encoding::Hex, "key", "xyz").unwrap_err();
        assert_eq!(e.code, Code::BadInput);
        assert_eq!(
            e.message.as_deref(),
            Some("key \"xyz\": invalid hex: 'x' is not a hex digit (at position 0)")
        );
        let long = "!".repeat(100);
        let e = decode_arg(Encoding::Base64, "value", &long).unwrap_err();
        assert!(e
            .message
            .unwrap()
            .starts_with(&format!("value \"{}…\": invalid base64", "!".repeat(40))));
        assert_eq!(decode_arg(Encoding::Text, "key", "a b").unwrap(), b"a b");
    }
}
