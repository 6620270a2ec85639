//! What a file is, from its bytes (protocol §10: the type is the server's,
//! "not from anything the sender claimed"), and the allow-list.
//!
//! Binary formats are recognised by their signatures (the `infer` crate;
//! Office documents by the parts inside the zip or the compound file).
//! Text has no signature: a head that is UTF-8 without NUL bytes is text,
//! and only then does the filename choose between `text/csv` (a `.csv`
//! name) and `text/plain`, since no byte tells the two apart. Text that
//! `infer` names by its opening (HTML, XML, a `#!` script) is text like
//! any other and is stored as `text/plain`: downloads carry `nosniff` and
//! `Content-Disposition: attachment`, so no browser renders or runs it.
//! An empty file is not sniffed at all (the upload refuses it first).

/// Bytes read before deciding: enough for `infer` to see the first
/// entries of an Office document's zip.
pub const SNIFF_BYTES: usize = 64 * 1024;

/// The MIME types an upload may have (protocol §10: jpg, jpeg, png, gif,
/// webp, pdf, doc, docx, xlsx, pptx, txt, csv, zip).
pub const ALLOWED: [&str; 12] = [
    "image/jpeg",
    "image/png",
    "image/gif",
    "image/webp",
    "application/pdf",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "text/plain",
    "text/csv",
    "application/zip",
];

/// The allowed MIME type of a file whose first bytes are `head` (the
/// whole file when shorter than [`SNIFF_BYTES`]) and whose name is
/// `name`; `None` when it is not one of [`ALLOWED`].
pub fn sniff(head: &[u8], name: &str, complete: bool) -> Option<&'static str> {
    if let Some(kind) = infer::get(head).filter(|k| k.matcher_type() != infer::MatcherType::Text) {
        return ALLOWED.iter().copied().find(|m| *m == kind.mime_type());
    }
    is_text(head, complete).then(|| {
        if name.to_ascii_lowercase().ends_with(".csv") {
            "text/csv"
        } else {
            "text/plain"
        }
    })
}

/// Whether `head` reads as UTF-8 text: no NUL byte, and valid UTF-8 but
/// for a character cut at the end of an incomplete head.
fn is_text(head: &[u8], complete: bool) -> bool {
    if head.is_empty() || head.contains(&0) {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        // A multi-byte character cut by the sniff window.
        Err(e) => !complete && e.error_len().is_none() && head.len() - e.valid_up_to() < 4,
    }
}

/// `image` for images (shown inline), `file` for everything else
/// (protocol §10: derived from the stored MIME type).
pub fn kind_of(mime: &str) -> &'static str {
    if mime.starts_with("image/") {
        "image"
    } else {
        "file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_win_over_names() {
        let png = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0];
        assert_eq!(sniff(&png, "notes.txt", true), Some("image/png"));
        assert_eq!(
            sniff(b"%PDF-1.7\n...", "a.png", true),
            Some("application/pdf")
        );
        // An executable is refused whatever it is called.
        assert_eq!(sniff(b"MZ\x90\x00\x03\x00\x00\x00", "a.txt", true), None);
        assert_eq!(sniff(b"\x7fELF\x02\x01\x01\x00", "a.pdf", true), None);
    }

    #[test]
    fn text_is_plain_or_csv_by_name_only() {
        assert_eq!(sniff(b"a,b\n1,2\n", "t.csv", true), Some("text/csv"));
        assert_eq!(sniff(b"a,b\n1,2\n", "t.txt", true), Some("text/plain"));
        assert_eq!(sniff("héllo".as_bytes(), "x", true), Some("text/plain"));
        assert_eq!(sniff(b"bin\x00ary", "x.txt", true), None);
        assert_eq!(sniff(b"", "x.txt", true), None);
        // Text infer names by its opening is still text.
        for t in [
            &b"<b>bold</b>"[..],
            b"<p>x",
            b"<a href=x>",
            b"<?xml version=\"1.0\"?><r/>",
            b"<html><body>",
            b"#!/bin/sh\necho hi\n",
        ] {
            assert_eq!(sniff(t, "x", true), Some("text/plain"), "{t:?}");
        }
        assert_eq!(sniff(b"<r/>\x00", "x", true), None);
        // A character cut at the end of the window is still text.
        let cut = &"aé".as_bytes()[..2];
        assert_eq!(sniff(cut, "x", false), Some("text/plain"));
        assert_eq!(sniff(cut, "x", true), None);
    }

    #[test]
    fn kinds() {
        assert_eq!(kind_of("image/webp"), "image");
        assert_eq!(kind_of("application/pdf"), "file");
    }
}
