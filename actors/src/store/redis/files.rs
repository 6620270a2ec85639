//! Attachments: the Redis engine's [`FileStore`].
//!
//! A file is two fields in the Bay's slot: its fixed record (JSON) in
//! `files`, and its state in `file-links` as space-separated words (ids
//! and tokens never hold a space), so the scripts read it without a JSON
//! round trip:
//!
//! | state | words |
//! |---|---|
//! | unsent | `u <uploader>` |
//! | claimed | `c <uploader> <token> <until ms>` |
//! | sent | `s <uploader> <size> <cid> <mid> <seq> <sent ms> <token>` |
//! | gone | `g <uploader>` |
//!
//! Each change is one script on the Bay's slot (`files/*.lua`). The sweep
//! index `sb:files-pending` spans Bays, so it is written beside the scripts,
//! not inside them: an entry left behind by a crash is dropped when the
//! sweep finds its file sent or gone.

use super::codec::{bytes, corrupt, decode, encode, status, ScriptStatus};
use super::keys::{self, BayKeys};
use super::lua::{lua_params, LuaScript};
use super::RedisStore;
use crate::store::{
    Claim, Created, FileEntry, FileLink, FilePage, FileStore, StoreError, StoredFile,
};
use ::redis::{cmd, Value};
use async_trait::async_trait;
use std::sync::LazyLock;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

/// Stores an upload unsent (KEYS: files, links; ARGV: id, JSON, uploader).
static PUT: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("files/put.lua")]));
/// Claims files all or none (KEYS: files, links; ARGV: uploader, token,
/// now, until, ids…).
static CLAIM: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("files/claim.lua")]));
/// Links claimed files to a message ([`LinkKeys`]; ARGV: token, cid, mid,
/// now, then id and size pairs).
static LINK: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("files/link.lua")]));
/// Frees claims (KEYS: links; ARGV: token, ids…).
static RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("files/release.lua")]));
/// Marks a deleted message's files gone ([`DropKeys`]; ARGV: mid).
static DROP: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("files/drop.lua")]));
/// Deletes an unsent upload (KEYS: files, links; ARGV: id, now).
static DELETE_UPLOAD: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("files/delete_upload.lua")]));

lua_params! {
    /// KEYS of `files/link.lua`.
    struct LinkKeys of String { links, library, totals, message_files }
}

lua_params! {
    /// KEYS of `files/drop.lua`.
    struct DropKeys of String { files, links, library, totals, message_files }
}

/// The member of `sb:files-pending` for a file.
fn pending_member(bay: &BayId, id: &str) -> String {
    format!("{bay} {id}")
}

/// Reads a state string (see the module docs).
fn parse_link(doing: &'static str, key: &str, state: &str) -> Result<FileLink, StoreError> {
    let words: Vec<&str> = state.split(' ').collect();
    let bad = || corrupt(doing, key, format!("file state {state:?}"));
    let num = |w: &str| w.parse::<u64>().map_err(|_| bad());
    Ok(match words.as_slice() {
        ["u", _] => FileLink::Unlinked,
        ["c", _, token, until] => FileLink::Claimed {
            token: (*token).to_owned(),
            until_ms: num(until)?,
        },
        ["s", _, _, cid, mid, seq, sent, token] => FileLink::Sent {
            conversation: ConversationId((*cid).to_owned()),
            message: MessageId((*mid).to_owned()),
            seq: num(seq)?,
            sent_at_ms: num(sent)?,
            token: (*token).to_owned(),
        },
        ["g", _] => FileLink::Gone,
        _ => return Err(bad()),
    })
}

/// The records after a script's status word.
fn records(doing: &'static str, key: &str, reply: &[Value]) -> Result<Vec<StoredFile>, StoreError> {
    reply[1..]
        .iter()
        .map(|raw| decode(doing, key, bytes(doing, key, raw)?))
        .collect()
}

#[async_trait]
impl FileStore for RedisStore {
    async fn put_file(&self, file: StoredFile) -> Result<Created<()>, StoreError> {
        const DOING: &str = "storing an upload";
        let k = BayKeys::new(&file.bay);
        let (files, links) = (k.files(), k.file_links());
        let json = encode(DOING, &files, &file)?;
        let reply = self
            .invoke_status(
                DOING,
                &PUT,
                &[&files, &links],
                &[&file.id, &json, file.uploader.as_str()],
            )
            .await?;
        match status(DOING, &files, &reply)? {
            ScriptStatus::Ok => {}
            ScriptStatus::Exists => return Ok(Created::AlreadyExists),
            other => return Err(corrupt(DOING, &files, format!("script said {other:?}"))),
        }
        let pending = keys::files_pending();
        let _: i64 = self
            .query(
                DOING,
                &pending,
                cmd("ZADD")
                    .arg(&pending)
                    .arg(file.expires_at_ms)
                    .arg(pending_member(&file.bay, &file.id)),
            )
            .await?;
        Ok(Created::Created(()))
    }

    async fn file(&self, bay: &BayId, id: &str) -> Result<Option<FileEntry>, StoreError> {
        const DOING: &str = "reading a file";
        let k = BayKeys::new(bay);
        let files = k.files();
        let Some(file) = self.hash_record::<StoredFile>(DOING, &files, id).await? else {
            return Ok(None);
        };
        let links = k.file_links();
        let state: Option<String> = self
            .query(DOING, &links, cmd("HGET").arg(&links).arg(id))
            .await?;
        let Some(state) = state else {
            return Ok(None);
        };
        let link = parse_link(DOING, &links, &state)?;
        Ok(Some(FileEntry { file, link }))
    }

    async fn claim_files(
        &self,
        bay: &BayId,
        uploader: &ParticipantId,
        ids: &[String],
        token: &str,
        until_ms: u64,
    ) -> Result<Claim, StoreError> {
        const DOING: &str = "claiming files for a send";
        let k = BayKeys::new(bay);
        let (files, links) = (k.files(), k.file_links());
        let (now, until) = (crate::store::now_ms().to_string(), until_ms.to_string());
        let mut args: Vec<&str> = vec![uploader.as_str(), token, &now, &until];
        args.extend(ids.iter().map(String::as_str));
        let reply = self
            .invoke_status(DOING, &CLAIM, &[&files, &links], &args)
            .await?;
        Ok(match status(DOING, &files, &reply)? {
            ScriptStatus::Ok => Claim::Claimed(records(DOING, &files, &reply)?),
            ScriptStatus::Conflict => Claim::Conflict,
            other => return Err(corrupt(DOING, &files, format!("script said {other:?}"))),
        })
    }

    async fn link_files(
        &self,
        bay: &BayId,
        ids: &[String],
        token: &str,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<usize, StoreError> {
        const DOING: &str = "linking files to a message";
        let k = BayKeys::new(bay);
        let keys = LinkKeys {
            links: k.file_links(),
            library: k.library(conversation),
            totals: k.library_totals(conversation),
            message_files: k.message_files(),
        };
        // Sizes come from the records: the script adds them to the totals.
        let mut sizes = Vec::with_capacity(ids.len());
        for id in ids {
            let size = self
                .hash_record::<StoredFile>(DOING, &k.files(), id)
                .await?
                .map_or(0, |f| f.size);
            sizes.push(size.to_string());
        }
        let now = crate::store::now_ms().to_string();
        let mut args: Vec<&str> = vec![token, conversation.as_str(), message.as_str(), &now];
        for (id, size) in ids.iter().zip(&sizes) {
            args.push(id);
            args.push(size);
        }
        let reply = self
            .invoke_status(DOING, &LINK, &keys.in_order(), &args)
            .await?;
        let linked = match reply.get(1) {
            Some(Value::Int(n)) => *n as usize,
            other => return Err(corrupt(DOING, &keys.links, format!("reply {other:?}"))),
        };
        let pending = keys::files_pending();
        let mut zrem = cmd("ZREM");
        zrem.arg(&pending);
        for id in ids {
            zrem.arg(pending_member(bay, id));
        }
        // The sweep skips sent files anyway: a failure here costs nothing.
        let _: Result<i64, _> = self.query(DOING, &pending, &zrem).await;
        Ok(linked)
    }

    async fn release_files(
        &self,
        bay: &BayId,
        ids: &[String],
        token: &str,
    ) -> Result<(), StoreError> {
        const DOING: &str = "releasing claimed files";
        let links = BayKeys::new(bay).file_links();
        let mut args: Vec<&str> = vec![token];
        args.extend(ids.iter().map(String::as_str));
        self.invoke_status(DOING, &RELEASE, &[&links], &args)
            .await?;
        Ok(())
    }

    async fn drop_message_files(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Vec<StoredFile>, StoreError> {
        const DOING: &str = "dropping a deleted message's files";
        let k = BayKeys::new(bay);
        let keys = DropKeys {
            files: k.files(),
            links: k.file_links(),
            library: k.library(conversation),
            totals: k.library_totals(conversation),
            message_files: k.message_files(),
        };
        let reply = self
            .invoke_status(DOING, &DROP, &keys.in_order(), &[message.as_str()])
            .await?;
        records(DOING, &keys.files, &reply)
    }

    async fn conversation_files(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<FilePage, StoreError> {
        const DOING: &str = "listing a conversation's files";
        let k = BayKeys::new(bay);
        let library = k.library(conversation);
        let max = before.map_or("+inf".to_owned(), |b| format!("({b}"));
        let listed: Vec<(String, f64)> = self
            .query(
                DOING,
                &library,
                cmd("ZRANGE")
                    .arg(&library)
                    .arg(&max)
                    .arg("-inf")
                    .arg("BYSCORE")
                    .arg("REV")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit)
                    .arg("WITHSCORES"),
            )
            .await?;
        let mut files = Vec::with_capacity(listed.len());
        if !listed.is_empty() {
            let (key, links) = (k.files(), k.file_links());
            let mut records = cmd("HMGET");
            records.arg(&key);
            let mut states = cmd("HMGET");
            states.arg(&links);
            for (id, _) in &listed {
                records.arg(id);
                states.arg(id);
            }
            let raw: Vec<Option<Vec<u8>>> = self.query(DOING, &key, &records).await?;
            let states: Vec<Option<String>> = self.query(DOING, &links, &states).await?;
            for (raw, state) in raw.into_iter().zip(states) {
                if let (Some(raw), Some(state)) = (raw, state) {
                    let link = parse_link(DOING, &links, &state)?;
                    if matches!(link, FileLink::Sent { .. }) {
                        let file = decode::<StoredFile>(DOING, &key, &raw)?;
                        files.push(FileEntry { file, link });
                    }
                }
            }
        }
        let totals = k.library_totals(conversation);
        let (count, size): (Option<u64>, Option<u64>) = self
            .query(
                DOING,
                &totals,
                cmd("HMGET").arg(&totals).arg("files").arg("bytes"),
            )
            .await?;
        Ok(FilePage {
            files,
            total_files: count.unwrap_or(0),
            total_bytes: size.unwrap_or(0),
        })
    }

    async fn expired_uploads(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<StoredFile>, StoreError> {
        const DOING: &str = "finding expired uploads";
        let pending = keys::files_pending();
        let members: Vec<String> = self
            .query(
                DOING,
                &pending,
                cmd("ZRANGE")
                    .arg(&pending)
                    .arg("-inf")
                    .arg(now_ms)
                    .arg("BYSCORE")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit),
            )
            .await?;
        let mut out = Vec::new();
        for member in members {
            let Some((bay, id)) = member.split_once(' ') else {
                continue;
            };
            let bay = BayId(bay.to_owned());
            match self.file(&bay, id).await? {
                Some(e) if matches!(e.link, FileLink::Unlinked | FileLink::Claimed { .. }) => {
                    out.push(e.file)
                }
                // Sent, gone or already deleted: the index entry is stale.
                _ => {
                    let _: i64 = self
                        .query(DOING, &pending, cmd("ZREM").arg(&pending).arg(&member))
                        .await?;
                }
            }
        }
        Ok(out)
    }

    async fn delete_upload(&self, bay: &BayId, id: &str, now_ms: u64) -> Result<bool, StoreError> {
        const DOING: &str = "deleting an expired upload";
        let k = BayKeys::new(bay);
        let (files, links) = (k.files(), k.file_links());
        let reply = self
            .invoke_status(
                DOING,
                &DELETE_UPLOAD,
                &[&files, &links],
                &[id, &now_ms.to_string()],
            )
            .await?;
        let deleted = match status(DOING, &files, &reply)? {
            ScriptStatus::Ok => true,
            ScriptStatus::Missing | ScriptStatus::Exists => false,
            other => return Err(corrupt(DOING, &files, format!("script said {other:?}"))),
        };
        if !matches!(status(DOING, &files, &reply)?, ScriptStatus::Exists) {
            let pending = keys::files_pending();
            let _: i64 = self
                .query(
                    DOING,
                    &pending,
                    cmd("ZREM").arg(&pending).arg(pending_member(bay, id)),
                )
                .await?;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::super::lua::bound;
    use super::*;

    #[test]
    fn scripts_bind_their_named_keys_in_order() {
        assert_eq!(
            bound(include_str!("files/link.lua"), "KEYS"),
            LinkKeys::NAMES
        );
        assert_eq!(
            bound(include_str!("files/drop.lua"), "KEYS"),
            DropKeys::NAMES
        );
    }

    #[test]
    fn states_parse() {
        let s = parse_link("t", "k", "s ag_1 10 c_1 msg_1 3 99 tok").unwrap();
        assert!(matches!(s, FileLink::Sent { seq: 3, .. }));
        assert_eq!(parse_link("t", "k", "u ag_1").unwrap(), FileLink::Unlinked);
        assert!(parse_link("t", "k", "x").is_err());
    }
}
