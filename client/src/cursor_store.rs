//! Where a listener keeps its position between runs.
//!
//! A [`Checkpoint`] is saved only after every event before it was handed
//! to the caller (see [`crate::Listener`]), so a process that dies and
//! restarts from its store loses nothing (delivery is at-least-once across
//! process restarts; inside one process the listener dedupes).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use switchboard_protocol::cursor::LogPosition;

/// A saved position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The opaque cursor of the last `cursor` frame, `/updates` answer or
    /// SSE `id:` (one cursor across all three transports, protocol §11).
    pub cursor: String,
    /// RFC 3339: where a REST catch-up (`?since=`) starts, if this cursor
    /// turns out expired, in a conversation with no entry in
    /// [`Checkpoint::delivered`]: the client's clock at the last cursor
    /// minus [`crate::ListenerConfig::catch_up_margin`], never before
    /// [`Checkpoint::start`].
    pub since: String,
    /// RFC 3339, client clock: when the listener that wrote this first
    /// started without a checkpoint (at "now"). A catch-up never reaches
    /// back before it: what came earlier was never the caller's. Absent
    /// in checkpoints written by older versions (then there is no floor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Per conversation id, the newest message the caller took (from a
    /// `message` or `message.completed` event, live or recovered). A
    /// catch-up in that conversation starts right after it, so a restart
    /// whose cursor expired hands over nothing the caller already took
    /// (protocol §11: "catch up over REST using your own per-conversation
    /// `since` watermarks"). Absent in older checkpoints.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub delivered: BTreeMap<String, Delivered>,
}

/// The newest message taken in one conversation ([`Checkpoint::delivered`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    /// The message's `createdAt` (RFC 3339, UTC, milliseconds: the
    /// server's clock, as REST's `?since=` compares it).
    pub at: String,
    /// The ids taken whose `createdAt` is exactly `at` (usually one):
    /// messages of the same millisecond are told apart by id.
    pub ids: Vec<String>,
}

impl Checkpoint {
    /// Checks the times a catch-up would start from: `since`, `start` and
    /// each watermark's `at` must be RFC 3339. A corrupt time is refused
    /// rather than replaced, so a catch-up never silently starts elsewhere.
    ///
    /// # Errors
    /// What is wrong, naming the field.
    pub fn check(&self) -> Result<(), String> {
        let time = |field: &str, t: &str| {
            chrono::DateTime::parse_from_rfc3339(t)
                .map(|_| ())
                .map_err(|e| format!("{field} {t:?} is not an RFC 3339 time: {e}"))
        };
        time("since", &self.since)?;
        if let Some(start) = &self.start {
            time("start", start)?;
        }
        for (conversation, mark) in &self.delivered {
            time(&format!("delivered[{conversation:?}].at"), &mark.at)?;
        }
        Ok(())
    }

    /// A checkpoint with only a cursor and a catch-up start.
    pub fn new(cursor: impl Into<String>, since: impl Into<String>) -> Self {
        Checkpoint {
            cursor: cursor.into(),
            since: since.into(),
            start: None,
            delivered: BTreeMap::new(),
        }
    }
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
    /// The open `<path>.lock` whose advisory lock this store holds.
    _lock: Option<std::fs::File>,
}

impl FileCursorStore {
    /// A store at `path` (created on the first save; its directory must exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileCursorStore {
            path: path.into(),
            _lock: None,
        }
    }

    /// A store at `path` that only this process uses: takes an exclusive
    /// advisory lock (`flock`) on `<path>.lock`, created if needed and
    /// held until the store is dropped. The lock is on a file of its own
    /// because saving replaces the cursor file, and a lock on the replaced
    /// file would no longer keep anyone out.
    ///
    /// # Errors
    /// `WouldBlock` ("cursor file in use by another listener") when another
    /// process holds the lock; I/O failures (a missing directory). Errors
    /// name the file.
    #[cfg(unix)]
    pub fn locked(path: impl Into<PathBuf>) -> io::Result<Self> {
        use rustix::fs::{flock, FlockOperation};
        let path = path.into();
        let mut lock_path = path.clone().into_os_string();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| at_path(&path, e))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "{}: cursor file in use by another listener (it holds {})",
                        path.display(),
                        lock_path.display()
                    ),
                ))
            }
            Err(e) => return Err(at_path(&lock_path, e.into())),
        }
        Ok(FileCursorStore {
            path,
            _lock: Some(file),
        })
    }

    /// A store at `path`; without `flock` here, no lock is taken.
    ///
    /// # Errors
    /// None on this platform.
    #[cfg(not(unix))]
    pub fn locked(path: impl Into<PathBuf>) -> io::Result<Self> {
        Ok(Self::new(path))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// An I/O error that names the file it happened on.
fn at_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl FileCursorStore {
    /// Whether the file exists but holds nothing (or only whitespace),
    /// which [`CursorStore::load`] reads as "no checkpoint": a caller may
    /// want to say so.
    pub fn is_blank(&self) -> bool {
        std::fs::read(&self.path).is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace))
    }
}

impl CursorStore for FileCursorStore {
    /// Reads the file. Besides this store's JSON checkpoint it accepts, for
    /// files written by hand or by older clients, a bare cursor (the text
    /// alone, or a JSON string: the catch-up then starts a minute before
    /// the file's modification time) and an empty file (no checkpoint).
    /// A bare cursor must have the server's cursor format, and a JSON
    /// checkpoint valid times ([`Checkpoint::check`]); anything else is
    /// an error. Errors name the file.
    fn load(&self) -> io::Result<Option<Checkpoint>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(at_path(&self.path, e)),
        };
        let invalid = |why: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a checkpoint: {why}", self.path.display()),
            )
        };
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| invalid(e.to_string()))?
            .trim();
        if text.is_empty() {
            return Ok(None);
        }
        let bare = match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(_)) => {
                let checkpoint: Checkpoint =
                    serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
                checkpoint.check().map_err(invalid)?;
                return Ok(Some(checkpoint));
            }
            Ok(serde_json::Value::String(cursor)) => cursor,
            Ok(other) => return Err(invalid(format!("unexpected JSON {other}"))),
            Err(_) => text.to_owned(),
        };
        if bare.is_empty() {
            return Ok(None);
        }
        // Only what the server issues: anything else would be answered
        // with a reset and a catch-up from the file's age, handing over
        // old messages again.
        if LogPosition::decode(&bare).is_err() {
            let shown: String = bare.chars().take(40).collect();
            return Err(invalid(format!(
                "{shown:?} is neither this client's JSON checkpoint nor a cursor the server issues"
            )));
        }
        let written: chrono::DateTime<chrono::Utc> = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .map(Into::into)
            .unwrap_or_else(|_| chrono::Utc::now());
        let since = (written - chrono::Duration::seconds(60))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        Ok(Some(Checkpoint::new(bare, since)))
    }

    fn save(&self, checkpoint: &Checkpoint) -> io::Result<()> {
        use std::io::Write;
        // A name of this process and this save: two writers never share
        // (or remove) each other's temporary file.
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(format!(
            ".{}.{:016x}.tmp",
            std::process::id(),
            rand::random::<u64>()
        ));
        let tmp = PathBuf::from(tmp);
        let write = || -> io::Result<()> {
            let mut file = std::fs::File::create(&tmp)?;
            // Strings and maps of strings: serializing cannot fail.
            file.write_all(&serde_json::to_vec(checkpoint).expect("checkpoints serialize"))?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&tmp, &self.path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            at_path(&self.path, e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cp(c: &str) -> Checkpoint {
        Checkpoint::new(c, "2026-12-01T00:00:00.000Z")
    }

    #[test]
    fn watermarks_round_trip_and_old_files_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cursor.json");
        let store = FileCursorStore::new(&path);
        let mut full = cp("a");
        full.start = Some("2026-12-01T00:00:00.000Z".into());
        full.delivered.insert(
            "launch".into(),
            Delivered {
                at: "2026-12-01T00:00:01.000Z".into(),
                ids: vec!["msg_1".into()],
            },
        );
        store.save(&full).unwrap();
        assert_eq!(store.load().unwrap(), Some(full));
        // The two-field JSON of earlier versions.
        std::fs::write(
            &path,
            r#"{"cursor":"b","since":"2026-12-01T00:00:00.000Z"}"#,
        )
        .unwrap();
        assert_eq!(store.load().unwrap(), Some(cp("b")));
        // A bare cursor, as text or as a JSON string.
        for text in [
            "MS5rM3g5LjE3NjQ1MDAwMDAwMDAtMA\n",
            "\"MS5rM3g5LjE3NjQ1MDAwMDAwMDAtMA\"",
        ] {
            std::fs::write(&path, text).unwrap();
            let got = store.load().unwrap().unwrap();
            assert_eq!(got.cursor, "MS5rM3g5LjE3NjQ1MDAwMDAwMDAtMA");
            assert!(chrono::DateTime::parse_from_rfc3339(&got.since).is_ok());
        }
    }

    #[test]
    fn an_empty_file_is_no_checkpoint_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cursor.json");
        std::fs::write(&path, " \n").unwrap();
        let store = FileCursorStore::new(&path);
        assert!(store.is_blank());
        assert_eq!(store.load().unwrap(), None);
        let missing = FileCursorStore::new(dir.path().join("no/such/dir/cursor.json"));
        let err = missing.save(&cp("a")).unwrap_err();
        assert!(err.to_string().contains("no/such/dir/cursor.json"), "{err}");
        std::fs::write(&path, "two words").unwrap();
        let err = store.load().unwrap_err();
        assert!(err.to_string().contains("cursor.json"), "{err}");
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
    fn garbage_and_corrupt_times_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.cursor");
        let store = FileCursorStore::new(&path);
        for text in [
            "garbage!!\n",
            "\"garbage\"",
            "MS5hYmMuMTIz",
            r#"{"cursor":"b","since":"yesterday"}"#,
            r#"{"cursor":"b","since":"2026-12-01T00:00:00.000Z","start":"?"}"#,
            r#"{"cursor":"b","since":"2026-12-01T00:00:00.000Z","delivered":{"c":{"at":"x","ids":[]}}}"#,
        ] {
            std::fs::write(&path, text).unwrap();
            let err = store.load().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{text}");
            assert!(err.to_string().contains("g.cursor"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_locked_store_keeps_a_second_one_out_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rex.cursor");
        let first = FileCursorStore::locked(&path).unwrap();
        // flock locks belong to the open file: a second open in this
        // process is refused like another process would be.
        let err = FileCursorStore::locked(&path).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(
            err.to_string().contains("in use by another listener"),
            "{err}"
        );
        assert!(err.to_string().contains("rex.cursor"), "{err}");
        first.save(&cp("a")).unwrap();
        drop(first);
        let second = FileCursorStore::locked(&path).unwrap();
        assert_eq!(second.load().unwrap(), Some(cp("a")));
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
