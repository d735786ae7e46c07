//! The store's tracing events (the library never prints): with a
//! subscriber installed, opening, committing and publishing a view each
//! report under their `flexdb::` target, with the fields flexbench shows.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use flexdb::{Db, Options};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// An event seen: its target, message and other field names.
type Seen = (String, String, Vec<String>);

/// A subscriber that keeps every `flexdb` event.
struct Collect(Arc<Mutex<Vec<Seen>>>);

#[derive(Default)]
struct Fields {
    message: String,
    names: Vec<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.names.push(field.name().to_string());
        }
    }
}

impl Subscriber for Collect {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("flexdb")
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0.lock().unwrap().push((
            event.metadata().target().to_string(),
            fields.message,
            fields.names,
        ));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

#[test]
fn a_store_reports_its_recovery_commits_and_views() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    tracing::subscriber::set_global_default(Collect(seen.clone())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::new().create_if_missing(true)).unwrap();
    for i in 0..2000 {
        db.put(format!("key{i:05}"), [7u8; 50]).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.get("key00042").unwrap(), Some(vec![7u8; 50]));
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::new()).unwrap();
    assert_eq!(db.iter().count(), 2000);
    db.close().unwrap();

    let seen = seen.lock().unwrap();
    let find = |target: &str, message: &str| {
        seen.iter()
            .find(|(t, m, _)| t == target && m == message)
            .unwrap_or_else(|| panic!("no {message:?} event under {target}: {seen:?}"))
    };
    let has = |event: &Seen, fields: &[&str]| {
        for f in fields {
            assert!(event.2.iter().any(|n| n == f), "{f} missing in {event:?}");
        }
    };
    has(
        find("flexdb::commit", "commit"),
        &[
            "gens",
            "updates",
            "groups",
            "time",
            "cpu",
            "us_per_update",
            "committer_reads",
            "longest_index_hold",
            "longest_reader_wait",
            "reader_waits_over_100us",
            "reader_waits_over_1ms",
        ],
    );
    has(
        find("flexdb::commit", "commit space"),
        &[
            "gc_runs",
            "gc_relocated_kib",
            "checkpoints",
            "tree_written_mib",
            "data_written_mib",
        ],
    );
    has(
        find("flexdb::view", "view published"),
        &["carry_installs", "copy", "replace"],
    );
    has(
        find("flexdb::recovery", "store recovered"),
        &[
            "space",
            "log_replay",
            "new_log",
            "sparse_index",
            "sparse_index_time",
            "intervals",
        ],
    );
}
