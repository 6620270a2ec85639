//! Text primitives shared by `@mention` parsing (protocol §7), plain-name
//! addressing (§4) and the ROUTER policy's keyword matcher.
//!
//! Matching is done on a *folded* copy of the text: every character is
//! lower-cased with Rust's full Unicode `to_lowercase` (so `Ë` matches `ë`,
//! `Ü` matches `ü`), and every run of whitespace becomes one space (so
//! `@Bay  Brain` and `@Bay\nBrain` still name "Bay Brain"). Each folded
//! character remembers the original character it came from, so word
//! boundaries are always judged on the text as written.
//!
//! No Unicode normalisation is applied: a name typed in NFC (`ë` as one code
//! point) does not match the same name typed in NFD (`e` + combining
//! diaeresis). Clients send NFC in practice.

/// A "word character": a Unicode letter or digit, `_`, or a combining mark
/// (so a decomposed accent never splits a word).
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || is_combining_mark(c)
}

/// The combining-diacritics blocks. Not exhaustive, but covers what names use.
fn is_combining_mark(c: char) -> bool {
    matches!(
        c as u32,
        0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F
    )
}

/// Characters that glue two words into one token when they sit *between*
/// word characters: `Rex-Bot`, `t-rex`, `rex.io`. They end a name only when
/// no word character follows (`@Rex.` at the end of a sentence is Rex).
fn is_joiner(c: char) -> bool {
    matches!(c, '-' | '.')
}

/// Characters that, directly before `@`, make the `@` part of an e-mail
/// address, a URL or another handle rather than a mention (`adam@Rex`,
/// `a.b@Rex`, `x.com/@Rex`, `@@Rex`).
fn is_address_char(c: char) -> bool {
    matches!(c, '.' | '+' | '-' | '%' | '@' | '/' | '\\' | '=')
}

/// A folded view of a string (see the module docs).
pub(crate) struct Folded {
    /// The original characters.
    orig: Vec<char>,
    /// Folded characters: lower-cased, whitespace runs collapsed to `' '`.
    chars: Vec<char>,
    /// For each folded character, the index in `orig` it came from.
    src: Vec<usize>,
}

impl Folded {
    pub(crate) fn new(s: &str) -> Self {
        let orig: Vec<char> = s.chars().collect();
        let mut chars = Vec::with_capacity(orig.len());
        let mut src = Vec::with_capacity(orig.len());
        let mut in_space = false;
        for (i, &c) in orig.iter().enumerate() {
            if c.is_whitespace() {
                if !in_space {
                    chars.push(' ');
                    src.push(i);
                }
                in_space = true;
                continue;
            }
            in_space = false;
            for l in c.to_lowercase() {
                chars.push(l);
                src.push(i);
            }
        }
        Folded { orig, chars, src }
    }

    /// The folded characters.
    pub(crate) fn chars(&self) -> &[char] {
        &self.chars
    }

    pub(crate) fn len(&self) -> usize {
        self.chars.len()
    }

    /// Whether folded position `p` is the first folded character of an
    /// original character (a match may only start there).
    pub(crate) fn starts_char(&self, p: usize) -> bool {
        p == 0 || p >= self.chars.len() || self.src[p] != self.src[p - 1]
    }

    /// Whether folded position `end` (exclusive) is the end of an original
    /// character (a match may only end there).
    fn ends_char(&self, end: usize) -> bool {
        end == 0 || end >= self.chars.len() || self.src[end] != self.src[end - 1]
    }

    /// Whether `needle` (already folded) occurs at folded position `p`,
    /// covering whole original characters.
    pub(crate) fn occurs_at(&self, p: usize, needle: &[char]) -> bool {
        let end = p + needle.len();
        !needle.is_empty()
            && end <= self.chars.len()
            && self.chars[p..end] == *needle
            && self.starts_char(p)
            && self.ends_char(end)
    }

    fn orig_at(&self, i: Option<usize>) -> Option<char> {
        i.and_then(|i| self.orig.get(i).copied())
    }

    /// Original index of the first character of folded span `[p, end)`.
    fn orig_start(&self, p: usize) -> usize {
        self.src[p]
    }

    /// Original index just past the last character of folded span `[p, end)`.
    fn orig_end(&self, end: usize) -> usize {
        self.src[end - 1] + 1
    }

    /// Right-hand word boundary after the folded span ending at `end`
    /// (exclusive): if the span ends in a word character, the next original
    /// character must not be one, nor a joiner followed by one. Punctuation,
    /// spaces, apostrophes (`@Rex's`) and the end of text all qualify.
    pub(crate) fn boundary_after(&self, end: usize) -> bool {
        let last_i = self.orig_end(end) - 1;
        if !is_word_char(self.orig[last_i]) {
            return true;
        }
        match self.orig_at(Some(last_i + 1)) {
            None => true,
            Some(c) if is_word_char(c) => false,
            Some(c) if is_joiner(c) => !self.orig_at(Some(last_i + 2)).is_some_and(is_word_char),
            Some(_) => true,
        }
    }

    /// Left-hand word boundary for a *plain* (un-`@`ed) word starting at
    /// folded position `p`: if the word starts with a word character, the
    /// previous original character must not be a word character, not `@`
    /// (that is a mention, or an e-mail address), and not a joiner preceded
    /// by a word character (`t-rex`, `foo.rex`).
    pub(crate) fn boundary_before(&self, p: usize) -> bool {
        let first_i = self.orig_start(p);
        if !is_word_char(self.orig[first_i]) {
            return true;
        }
        let prev = first_i.checked_sub(1);
        match self.orig_at(prev) {
            None => true,
            Some(c) if is_word_char(c) || c == '@' => false,
            Some(c) if is_joiner(c) => !self
                .orig_at(first_i.checked_sub(2))
                .is_some_and(is_word_char),
            Some(_) => true,
        }
    }

    /// Whether the `@` at folded position `p` can open a mention: it must
    /// start the text or follow a character that is neither a word character
    /// nor part of an address (see [`is_address_char`]).
    pub(crate) fn mention_can_start(&self, p: usize) -> bool {
        let at = self.orig_start(p);
        match self.orig_at(at.checked_sub(1)) {
            None => true,
            Some(c) => !is_word_char(c) && !is_address_char(c),
        }
    }
}

/// Folds a name or phrase the same way [`Folded`] folds text, after trimming.
pub(crate) fn fold(s: &str) -> Vec<char> {
    Folded::new(s.trim()).chars
}

/// Splits folded text into maximal runs of word characters (the router's
/// tokens). `"Ships releases, fast!"` → `["ships", "releases", "fast"]`.
pub(crate) fn word_tokens(s: &str) -> Vec<String> {
    let folded = Folded::new(s);
    let mut out = Vec::new();
    let mut cur = String::new();
    for &c in folded.chars() {
        if is_word_char(c) {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether a folded word is long and specific enough to stand for something:
/// at least 3 characters, at least one letter, and not in `stop_words`.
pub(crate) fn is_significant(word: &str, stop_words: &[&str]) -> bool {
    word.chars().count() >= 3
        && word.chars().any(char::is_alphabetic)
        && !stop_words.contains(&word)
}
