//! Where a listener keeps its position between runs.
//!
//! A [`Checkpoint`] is saved only after every event before it was handed
//! to the caller (see [`crate::Listener`]), so a process that dies and
//! restarts from its store loses nothing (delivery is at-least-once across
//! process restarts; inside one process the listener dedupes).

use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A saved position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The opaque cursor of the last `cursor` frame, `/updates` answer or
    /// SSE `id:` (one cursor across all three transports, protocol §11).
    pub cursor: String,
    /// RFC 3339: where a REST catch-up (`?since=`) starts if this cursor
    /// turns out expired: the newest `createdAt` delivered so far, or the
    /// client's clock when nothing was delivered yet.
    pub since: String,
}

/// Loads and saves a listener's [`Checkpoint`]. Called from the listener's
/// `poll_next`, so implementations should be quick (a small file write).
pub trait CursorStore: Send + Sync {
    /// The last saved checkpoint, `None` when nothing was saved yet.
    ///
    /// # Errors
    /// I/O failures; a corrupt store is an error, not `None`, so a listener
    /// never silently restarts at "now".
    fn load(&self) -> io::Result<Option<Checkpoint>>;

    /// Replaces the saved checkpoint.
    ///
    /// # Errors
    /// I/O failures; the listener stops with [`crate::ClientError::Store`].
    fn save(&self, checkpoint: &Checkpoint) -> io::Result<()>;
}

/// Keeps the checkpoint in memory: for tests and for processes that
/// resume through other means.
#[derive(Default)]
pub struct MemoryCursorStore {
    saved: Mutex<Option<Checkpoint>>,
}

impl MemoryCursorStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl CursorStore for MemoryCursorStore {
    fn load(&self) -> io::Result<Option<Checkpoint>> {
        // A poisoned lock still holds a whole checkpoint (assignment is atomic).
        Ok(self.saved.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    fn save(&self, checkpoint: &Checkpoint) -> io::Result<()> {
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(checkpoint.clone());
        Ok(())
    }
}

/// Keeps the checkpoint in a JSON file, replaced atomically: the new
/// content goes to a temporary file in the same directory, is flushed to
/// disk, and is renamed over the old one, so a crash leaves either the old
/// or the new checkpoint, never a torn one.
pub struct FileCursorStore {
    path: PathBuf,
}

impl FileCursorStore {
    /// A store at `path` (created on the first save; its directory must exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileCursorStore { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl CursorStore for FileCursorStore {
    fn load(&self) -> io::Result<Option<Checkpoint>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a checkpoint: {e}", self.path.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn save(&self, checkpoint: &Checkpoint) -> io::Result<()> {
        use std::io::Write;
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut file = std::fs::File::create(&tmp)?;
        // Serializing two strings cannot fail.
        file.write_all(&serde_json::to_vec(checkpoint).expect("checkpoints serialize"))?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cp(c: &str) -> Checkpoint {
        Checkpoint {
            cursor: c.into(),
            since: "2026-12-01T00:00:00.000Z".into(),
        }
    }

    #[test]
    fn file_store_round_trips_and_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCursorStore::new(dir.path().join("cursor.json"));
        assert_eq!(store.load().unwrap(), None);
        store.save(&cp("a")).unwrap();
        store.save(&cp("b")).unwrap();
        assert_eq!(store.load().unwrap(), Some(cp("b")));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["cursor.json"], "no temporary file is left");
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cursor.json");
        std::fs::write(&path, "{not json").unwrap();
        assert!(FileCursorStore::new(path).load().is_err());
    }

    #[test]
    fn memory_store_round_trips() {
        let store = MemoryCursorStore::new();
        store.save(&cp("x")).unwrap();
        assert_eq!(store.load().unwrap(), Some(cp("x")));
    }
}
