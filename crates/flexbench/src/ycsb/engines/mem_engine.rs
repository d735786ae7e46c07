//! `mem`: a `BTreeMap` behind a lock, the harness's reference engine (for
//! tests of the harness itself; it keeps nothing on disk).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::RwLock;

use crate::ycsb::engine::{Engine, Result};

#[derive(Default)]
struct MemEngine {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

/// A new, empty in-memory engine.
pub fn open() -> Result<Box<dyn Engine>> {
    Ok(Box::<MemEngine>::default())
}

fn poisoned<T>(_: T) -> String {
    "mem: lock poisoned by a panicked thread".into()
}

impl Engine for MemEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.map
            .write()
            .map_err(poisoned)?
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }
    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.map.read().map_err(poisoned)?.get(key).map(Vec::len))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.map.write().map_err(poisoned)?.remove(key);
        Ok(())
    }
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        let mut map = self.map.write().map_err(poisoned)?;
        let doomed: Vec<Vec<u8>> = map
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &doomed {
            map.remove(k);
        }
        Ok(Some(doomed.len() as u64))
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        let map = self.map.read().map_err(poisoned)?;
        Ok(map
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .take(n)
            .count())
    }
    fn scan_back(&self, start: &[u8], n: usize) -> Result<usize> {
        let map = self.map.read().map_err(poisoned)?;
        Ok(map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(start)))
            .rev()
            .take(n)
            .count())
    }
    fn transfer(&self, a: &[u8], b: &[u8], new_a: &[u8], new_b: &[u8], _: bool) -> Result<bool> {
        // One write lock for the whole transaction: serial, never aborts.
        let mut map = self.map.write().map_err(poisoned)?;
        std::hint::black_box((map.get(a).map(Vec::len), map.get(b).map(Vec::len)));
        map.insert(a.to_vec(), new_a.to_vec());
        map.insert(b.to_vec(), new_b.to_vec());
        Ok(true)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}
