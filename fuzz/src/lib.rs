//! Fuzz targets for Switchboard's parsers and validators, on the stable
//! toolchain (how to run them, what each one checks, and what was found:
//! `docs/fuzzing.md`).
//!
//! Every target is a `#[test]` in `src/targets/` built on [`bolero::check!`]:
//! under `cargo test` bolero's test engine feeds it random byte strings for
//! a bounded time ([`DEFAULT_TEST_TIME`], or `BOLERO_RANDOM_TEST_TIME_MS`)
//! or number of inputs (`BOLERO_RANDOM_ITERATIONS`). The bytes do not go to the code under
//! test directly: [`Target::mutate`] reads them as a recipe — which seed of
//! the target's corpus (`fuzz/corpus/<target>/`) to start from and which
//! edits to apply (dictionary tokens, tricky Unicode, byte flips, splices
//! with other seeds) — so most inputs are near-valid cursors, frames, JSON
//! bodies or messages instead of noise. One recipe in sixteen hands the
//! raw bytes over as they are. For targets whose seeds are JSON, half the
//! recipes edit the parsed value instead (replace, drop, add, rename,
//! duplicate or wrap nodes, edge-case numbers, strings at the length caps),
//! so those inputs are always valid JSON.
//!
//! Before the random phase every corpus file is run as it is, so the corpus
//! doubles as a regression suite. A failing input is printed (escaped) and,
//! when `SWITCHBOARD_FUZZ_SAVE=1` (set by `fuzz/run.sh`), written to the
//! target's corpus directory as `crash-<hash>`, where the next
//! `cargo test -p switchboard-fuzz <target>` replays it.

use serde_json::Value;
use std::fmt::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[cfg(test)]
mod targets;

/// How long each target's random phase runs under a plain `cargo test`
/// (CI) when `BOLERO_RANDOM_TEST_TIME_MS` is not set; it also caps a run
/// bounded by `BOLERO_RANDOM_ITERATIONS`.
pub const DEFAULT_TEST_TIME: Duration = Duration::from_secs(2);

/// Longest random recipe bolero generates (`BOLERO_RANDOM_MAX_LEN` overrides).
pub const MAX_RECIPE_LEN: usize = 4096;

/// Longest input a mutation may grow (larger inputs are cut): keeps the
/// quadratic scanners under test fast enough for many executions.
pub const MAX_INPUT_LEN: usize = 16 * 1024;

/// Characters that break naive text handling: case mappings that change
/// length (`İ` → `i̇`, `ß`, `ﬃ`), final sigma, combining marks, zero-width
/// and format characters, every kind of Unicode whitespace, NUL, the last
/// code point, surrogate-adjacent and emoji sequences.
pub const TRICKY_CHARS: &[&str] = &[
    "\u{130}",
    "\u{131}",
    "ß",
    "ẞ",
    "ﬃ",
    "Σ",
    "ς",
    "ǅ",
    "\u{301}",
    "\u{308}",
    "\u{20DD}",
    "\u{200B}",
    "\u{200D}",
    "\u{2060}",
    "\u{FEFF}",
    "\u{85}",
    "\u{A0}",
    "\u{1680}",
    "\u{2028}",
    "\u{3000}",
    "\t",
    "\r\n",
    "\u{0}",
    "\u{7F}",
    "\u{D7FF}",
    "\u{E000}",
    "\u{FFFD}",
    "\u{10FFFF}",
    "🙂",
    "👩‍💻",
    "Ⅻ",
    "٣",
    "\u{1E9E}",
    "K",
    "Å",
];

/// Bytes worth planting anywhere: JSON and cursor syntax, UTF-8 lead bytes
/// without continuation, and the extremes.
const INTERESTING_BYTES: &[u8] = &[
    0, 0x7f, 0x80, 0xbf, 0xc0, 0xdf, 0xe0, 0xef, 0xf0, 0xf4, 0xff, b'"', b'\\', b'{', b'}', b'[',
    b']', b',', b':', b'@', b'.', b'-', b'_', b'+', b'/', b'=', b' ', b'\n', b'0', b'9',
];

/// One fuzz target: its name (also its corpus directory), its seeds and
/// its dictionary, and the executions counted so far.
pub struct Target {
    name: &'static str,
    seeds: Vec<(String, Vec<u8>)>,
    dict: Vec<Vec<u8>>,
    /// Most seeds are JSON objects or arrays: half the recipes then edit
    /// the parsed value (always valid JSON) instead of the bytes.
    json: bool,
    execs: AtomicU64,
    random_execs: AtomicU64,
    saved: AtomicBool,
    started: Instant,
}

/// The directory of `target`'s corpus: `fuzz/corpus/<target>/`.
pub fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

impl Target {
    /// Loads `fuzz/corpus/<name>/` (every file not starting with `.`, in
    /// name order). Panics when the directory is missing or empty: a target
    /// without seeds would silently fuzz noise only.
    pub fn new(name: &'static str, dict: &[&[u8]]) -> Self {
        let dir = corpus_dir(name);
        let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("corpus {} unreadable: {e}", dir.display()))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .filter_map(|p| {
                let file = p.file_name()?.to_str()?.to_owned();
                (!file.starts_with('.')).then(|| (file, std::fs::read(&p).ok()))
            })
            .filter_map(|(file, bytes)| Some((file, bytes?)))
            .collect();
        seeds.sort();
        assert!(!seeds.is_empty(), "corpus {} is empty", dir.display());
        let mut dict: Vec<Vec<u8>> = dict.iter().map(|t| t.to_vec()).collect();
        dict.extend(TRICKY_CHARS.iter().map(|t| t.as_bytes().to_vec()));
        let json = 2 * seeds
            .iter()
            .filter(|(_, b)| {
                serde_json::from_slice::<Value>(b).is_ok_and(|v| v.is_object() || v.is_array())
            })
            .count()
            >= seeds.len();
        Target {
            name,
            seeds,
            dict,
            json,
            execs: AtomicU64::new(0),
            random_execs: AtomicU64::new(0),
            saved: AtomicBool::new(false),
            started: Instant::now(),
        }
    }

    /// The target's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The corpus files, `(file name, bytes)`, in name order.
    pub fn seeds(&self) -> &[(String, Vec<u8>)] {
        &self.seeds
    }

    /// Executions so far (corpus replays plus random inputs).
    pub fn execs(&self) -> u64 {
        self.execs.load(Ordering::Relaxed)
    }

    /// Runs `property` on every corpus file as it is. A failure names the
    /// file (the panic itself is reported by the default hook).
    pub fn replay_corpus(&self, property: &impl Fn(&[u8])) {
        for (file, bytes) in &self.seeds {
            self.execs.fetch_add(1, Ordering::Relaxed);
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| property(bytes))) {
                eprintln!(
                    "fuzz target {}: corpus file {} fails:\n{}",
                    self.name,
                    corpus_dir(self.name).join(file).display(),
                    escape(bytes, 2000)
                );
                panic::resume_unwind(payload);
            }
        }
    }

    /// One random execution: turns bolero's bytes into an input and checks
    /// `property` on it. On a failure the input is printed and, with
    /// `SWITCHBOARD_FUZZ_SAVE=1`, saved to the corpus directory; then the
    /// test fails with the original panic message and location.
    pub fn exec(&self, recipe: &[u8], property: &impl Fn(&[u8])) {
        let input = self.mutate(recipe);
        self.execs.fetch_add(1, Ordering::Relaxed);
        self.random_execs.fetch_add(1, Ordering::Relaxed);
        if panic::catch_unwind(AssertUnwindSafe(|| property(&input))).is_err() {
            // bolero's panic hook kept the message with its location.
            let cause = bolero::bolero_engine::panic::take_panic()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "(panic message unavailable)".into());
            let saved = self.save(&input);
            panic!(
                "fuzz target {} found a failing input ({} bytes){saved}\n\
                 --- cause ---\n{cause}\n--- input (escaped) ---\n{}",
                self.name,
                input.len(),
                escape(&input, 4000)
            );
        }
    }

    fn save(&self, input: &[u8]) -> String {
        if std::env::var("SWITCHBOARD_FUZZ_SAVE").as_deref() != Ok("1")
            || self.saved.swap(true, Ordering::SeqCst)
        {
            return String::new();
        }
        let path = corpus_dir(self.name).join(format!("crash-{:016x}", fnv1a(input)));
        match std::fs::write(&path, input) {
            Ok(()) => format!(", saved to {}", path.display()),
            Err(e) => format!(", NOT saved to {}: {e}", path.display()),
        }
    }

    /// Prints the target's execution count; `fuzz/run.sh` reads this line.
    pub fn report(&self) {
        let secs = self.started.elapsed().as_secs_f64();
        let deep = DEEP.with(|d| d.replace(0));
        let line = format!(
            "fuzz-stats target={} corpus={} execs={} random={} deep={deep} secs={secs:.1} execs_per_sec={:.0}",
            self.name,
            self.seeds.len(),
            self.execs(),
            self.random_execs.load(Ordering::Relaxed),
            self.execs() as f64 / secs.max(1e-9)
        );
        eprintln!("{line}");
    }

    /// Turns a byte recipe into an input: the first byte picks the mode
    /// (raw bytes, dictionary tokens, or a corpus seed, edited as bytes or,
    /// for JSON targets, as a JSON value) and the number of edits (one to
    /// five), the rest drive the edits. Deterministic: the same recipe
    /// gives the same input.
    pub fn mutate(&self, recipe: &[u8]) -> Vec<u8> {
        let mut r = Recipe::new(recipe);
        let mode = r.byte();
        let mut out = match mode % 16 {
            0 => return recipe.get(1..).unwrap_or_default().to_vec(),
            1 => {
                let mut v = Vec::new();
                for _ in 0..=r.below(6) {
                    v.extend_from_slice(&self.dict[r.below(self.dict.len())]);
                }
                v
            }
            _ => self.seeds[r.below(self.seeds.len())].1.clone(),
        };
        // 1 edit half the time, 2 a quarter of the time, … up to 5.
        let rounds = 1 + (mode >> 4).trailing_ones() as usize;
        if self.json && (2..10).contains(&(mode % 16)) {
            if let Ok(mut value) = serde_json::from_slice::<Value>(&out) {
                for _ in 0..rounds {
                    self.json_edit(&mut r, &mut value);
                }
                let mut out = serde_json::to_vec(&value).expect("a JSON value serializes");
                out.truncate(MAX_INPUT_LEN);
                return out;
            }
        }
        for _ in 0..rounds {
            self.edit(&mut r, &mut out);
        }
        out.truncate(MAX_INPUT_LEN);
        out
    }

    /// A dictionary token as a JSON value: the token parsed, or as a string.
    fn json_token(&self, r: &mut Recipe<'_>) -> Value {
        let token = &self.dict[r.below(self.dict.len())];
        serde_json::from_slice(token)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(token).into_owned()))
    }

    /// `text` after one or two byte-level edits.
    fn edit_text(&self, r: &mut Recipe<'_>, text: &str) -> String {
        let mut bytes = text.as_bytes().to_vec();
        for _ in 0..=r.below(2) {
            self.edit(r, &mut bytes);
        }
        bytes.truncate(MAX_INPUT_LEN / 2);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// One structural edit of a JSON value: replace, edit, drop, add,
    /// duplicate or wrap a node, or plant an edge-case number or a long
    /// string, at a node chosen by the recipe.
    fn json_edit(&self, r: &mut Recipe<'_>, root: &mut Value) {
        let mut paths = Vec::new();
        json_paths(root, String::new(), &mut paths);
        let path = paths[r.below(paths.len())].clone();
        let other = root
            .pointer(&paths[r.below(paths.len())])
            .cloned()
            .unwrap_or(Value::Null);
        let token = self.json_token(r);
        let Some(node) = root.pointer_mut(&path) else {
            return;
        };
        match r.byte() % 9 {
            0 => *node = token,
            1 => {
                *node = match node {
                    Value::String(s) => Value::String(self.edit_text(r, s)),
                    Value::Object(m) => {
                        // Rename a key.
                        let Some(key) = m.keys().nth(r.below(m.len())).cloned() else {
                            return;
                        };
                        let v = m.remove(&key).unwrap_or(Value::Null);
                        m.insert(self.edit_text(r, &key), v);
                        return;
                    }
                    _ => Value::String(self.edit_text(r, &node.to_string())),
                }
            }
            2 => match node {
                Value::Object(m) => {
                    if let Some(key) = m.keys().nth(r.below(m.len())).cloned() {
                        m.remove(&key);
                    }
                }
                Value::Array(a) if !a.is_empty() => {
                    a.remove(r.below(a.len()));
                }
                _ => *node = Value::Null,
            },
            3 => match node {
                Value::Object(m) => {
                    let key = match self.json_token(r) {
                        Value::String(k) => k,
                        v => v.to_string(),
                    };
                    m.insert(key, token);
                }
                Value::Array(a) => {
                    let at = r.below(a.len() + 1);
                    a.insert(at, if r.byte() % 2 == 0 { other } else { token });
                }
                _ => *node = other,
            },
            4 => {
                const NUMBERS: &[&str] = &[
                    "0",
                    "-1",
                    "1",
                    "2",
                    "9",
                    "10",
                    "11",
                    "255",
                    "256",
                    "65535",
                    "4294967296",
                    "9223372036854775807",
                    "-9223372036854775808",
                    "18446744073709551615",
                    "1e308",
                    "-0.0",
                    "0.5",
                ];
                let n = NUMBERS[r.below(NUMBERS.len())];
                *node = serde_json::from_str(n).unwrap_or(Value::Null);
            }
            5 => *node = Value::Array(vec![node.take()]),
            6 => *node = other,
            7 => {
                let token = self.dict[r.below(self.dict.len())].clone();
                let unit = String::from_utf8_lossy(&token).into_owned();
                let chars = unit.chars().count().max(1);
                let target =
                    [199, 200, 201, 499, 500, 501, 1999, 2000, 2001, 2048, 2049][r.below(11)];
                let times = (target / chars).max(1) + r.below(2);
                *node = Value::String(unit.repeat(times));
            }
            _ => {
                *node = match node {
                    Value::Bool(b) => Value::Bool(!*b),
                    Value::Null => Value::Bool(true),
                    _ => Value::Null,
                }
            }
        }
    }

    fn edit(&self, r: &mut Recipe<'_>, out: &mut Vec<u8>) {
        let pos = r.below(out.len() + 1);
        match r.byte() % 11 {
            0 | 1 => {
                let token = &self.dict[r.below(self.dict.len())];
                out.splice(pos..pos, token.iter().copied());
            }
            2 => {
                let n = 1 + r.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| r.byte()).collect();
                out.splice(pos..pos, bytes);
            }
            3 => {
                let end = (pos + 1 + r.below(16)).min(out.len());
                if pos < end {
                    out.drain(pos..end);
                }
            }
            4 => {
                if pos < out.len() {
                    out[pos] = INTERESTING_BYTES[r.below(INTERESTING_BYTES.len())];
                }
            }
            5 => {
                let c = char::from_u32(r.u32() % 0x11_0000).unwrap_or('\u{FFFD}');
                let mut buf = [0u8; 4];
                out.splice(pos..pos, c.encode_utf8(&mut buf).bytes());
            }
            6 => {
                let from = r.below(out.len() + 1);
                let end = (from + 1 + r.below(32)).min(out.len());
                let piece = out[from..end].to_vec();
                out.splice(pos..pos, piece);
            }
            7 => {
                let other = &self.seeds[r.below(self.seeds.len())].1;
                let from = r.below(other.len() + 1);
                out.truncate(pos);
                out.extend_from_slice(&other[from..]);
            }
            8 => {
                let end = (pos + r.below(8)).min(out.len());
                let token = &self.dict[r.below(self.dict.len())];
                out.splice(pos..end, token.iter().copied());
            }
            9 => {
                // Long runs reach the length caps (200, 500, 2,000 chars…).
                let token = &self.dict[r.below(self.dict.len())];
                let times = 1 + r.below(600);
                let run: Vec<u8> = token
                    .iter()
                    .copied()
                    .cycle()
                    .take(token.len() * times)
                    .collect();
                out.splice(pos..pos, run);
            }
            _ => {
                if pos < out.len() {
                    out[pos] ^= 1 << (r.byte() % 8);
                }
            }
        }
    }
}

/// JSON pointers of `v` and its descendants (at most 256).
fn json_paths(v: &Value, path: String, out: &mut Vec<String>) {
    if out.len() >= 256 {
        return;
    }
    out.push(path.clone());
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let key = k.replace('~', "~0").replace('/', "~1");
                json_paths(child, format!("{path}/{key}"), out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                json_paths(child, format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Reads a byte recipe; zeros once it runs out.
struct Recipe<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Recipe<'a> {
    fn new(data: &'a [u8]) -> Self {
        Recipe { data, pos: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// A number below `n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let v = if n <= 256 {
            usize::from(self.byte())
        } else {
            self.u32() as usize
        };
        v % n
    }
}

thread_local! {
    static DEEP: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one input that got past the target's first gate (valid JSON, an
/// accepted cursor or poll, a mention found…); reported as `deep=` so a
/// run shows how much of it reached the interesting properties.
pub fn deep() {
    DEEP.with(|d| d.set(d.get() + 1));
}

/// FNV-1a, 64 bits: names saved findings and derives per-input choices.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `bytes` as printable text: valid UTF-8 with control characters and
/// invisible code points escaped as `\u{…}`, invalid bytes as `\xNN`, cut
/// after `max` bytes.
pub fn escape(bytes: &[u8], max: usize) -> String {
    let mut out = String::new();
    for chunk in bytes[..bytes.len().min(max)].utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else if c.is_control() || (c.is_whitespace() && c != ' ') || is_invisible(c) {
                let _ = write!(out, "\\u{{{:X}}}", c as u32);
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
    if bytes.len() > max {
        let _ = write!(out, "… ({} more bytes)", bytes.len() - max);
    }
    out
}

fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{AD}')
        || ('\u{300}'..='\u{36F}').contains(&c)
}

/// Runs one fuzz target: replays its corpus, then bolero's random phase
/// (see the crate docs), then prints its `fuzz-stats` line.
///
/// `$name` is the target's name and corpus directory; `$dict` its
/// dictionary (`&[&[u8]]`); `$property` a `Fn(&[u8])` that panics on a
/// violated property.
#[macro_export]
macro_rules! fuzz_target {
    ($name:expr, $dict:expr, $property:expr) => {{
        let target = $crate::Target::new($name, $dict);
        let property = $property;
        target.replay_corpus(&property);
        bolero::check!(name = $name)
            .with_test_time($crate::DEFAULT_TEST_TIME)
            .with_max_len($crate::MAX_RECIPE_LEN)
            .with_shrink_time(::std::time::Duration::ZERO)
            .for_each(|recipe: &[u8]| target.exec(recipe, &property));
        target.report();
    }};
}
