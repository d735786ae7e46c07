//! One module per engine; peers compile only with their cargo feature
//! (without it, `open` explains how to get it).

pub mod flexdb_engine;
pub mod mem_engine;

#[cfg(feature = "fjall")]
pub mod fjall_engine;
#[cfg(feature = "lmdb")]
pub mod lmdb_engine;
#[cfg(feature = "rocksdb")]
pub mod rocksdb_engine;

/// Stand-ins for the peers that were not compiled in.
macro_rules! missing_peer {
    ($module:ident, $name:literal) => {
        #[doc = concat!("`", $name, "` without its cargo feature.")]
        pub mod $module {
            use std::path::Path;

            use crate::ycsb::engine::{compiled_in, Engine, EngineConfig, Result};

            /// Refuses, naming the feature to build.
            pub fn open(_dir: &Path, _cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
                Err(compiled_in($name).err().unwrap_or_default())
            }
        }
    };
}

#[cfg(not(feature = "fjall"))]
missing_peer!(fjall_engine, "fjall");
#[cfg(not(feature = "lmdb"))]
missing_peer!(lmdb_engine, "lmdb");
#[cfg(not(feature = "rocksdb"))]
missing_peer!(rocksdb_engine, "rocksdb");
