//! COMMAND, COMMAND COUNT, INFO, LIST and DOCS: the command table as
//! clients read it (redis-cli's hints, cluster-aware clients' key
//! positions).
//!
//! Invariants: what it reports comes from the table `commands::COMMANDS`
//! itself, so it never disagrees with what the server runs.

use super::args::{is, show, CmdResult};
use super::{Cx, COMMANDS};
use crate::resp::Reply;

fn command_info(spec: &super::Spec) -> Reply {
    let mut flags = Vec::new();
    if spec.flags & super::WRITE != 0 {
        flags.push(Reply::Simple("write".into()));
    }
    if spec.flags & super::READONLY != 0 {
        flags.push(Reply::Simple("readonly".into()));
    }
    if spec.flags & super::NOAUTH != 0 {
        flags.push(Reply::Simple("no_auth".into()));
    }
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Int(spec.arity.into()),
        Reply::Array(flags),
        Reply::Int(spec.first.into()),
        Reply::Int(spec.last.into()),
        Reply::Int(spec.step.into()),
    ])
}

/// COMMAND [COUNT | INFO name... | DOCS [name...] | LIST].
pub fn command(_: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_info).collect()));
    };
    if is(sub, "count") && args.len() == 2 {
        return Ok(Reply::Int(COMMANDS.len() as i64));
    }
    if is(sub, "list") && args.len() == 2 {
        return Ok(Reply::Array(
            COMMANDS.iter().map(|c| Reply::bulk(c.name)).collect(),
        ));
    }
    if is(sub, "info") {
        if args.len() == 2 {
            return Ok(Reply::Array(COMMANDS.iter().map(command_info).collect()));
        }
        let out = args[2..]
            .iter()
            .map(|n| super::lookup(n).map_or(Reply::NilArray, command_info))
            .collect();
        return Ok(Reply::Array(out));
    }
    if is(sub, "docs") {
        // No documentation is served: clients then show no hints.
        return Ok(Reply::Map(Vec::new()));
    }
    Err(Reply::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try COMMAND HELP.",
        show(sub)
    )))
}
