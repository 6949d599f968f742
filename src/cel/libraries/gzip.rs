//! Kyverno's `gzip` library: `gzip.compress(s)` (bytes: a gzip stream of
//! the string, its header as Go writes it, modification time 0) and
//! `gzip.decompress(b)` (the text of a gzip stream, its members read one
//! after another as Go's reader does). Used with `base64.encode` and
//! `base64.decode` (cel-go's encoders, which Kyverno's environment has).
//! Deflate is miniz_oxide's at level 6, Go's default: the stream decodes
//! to the same text, but its bytes are not Go's (Go's compressor chooses
//! its own blocks).

use ::cel::common::types::{BYTES_TYPE, CelBytes};
use ::cel::common::value::CowVal;
use ::cel::{Env, ExecutionError};

use super::{dyn_type, error, global, string, string_arg};

/// Most bytes `gzip.decompress` gives: a small stream may expand a
/// thousandfold, and the module's memory is bounded.
const MAX_OUTPUT: usize = 8 << 20;

/// Go's header: magic, deflate, no flags, time 0, no extra flags, OS
/// unknown.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// Declares the library.
pub fn register(env: &mut Env) {
    global(
        env,
        "gzip.decompress",
        "decompress_bytes_string",
        vec![BYTES_TYPE.to_owned()],
        decompress,
    );
    global(
        env,
        "gzip.compress",
        "compress_any_bytes",
        vec![dyn_type()],
        compress,
    );
}

fn compressed(text: &[u8]) -> Vec<u8> {
    let mut out = HEADER.to_vec();
    out.extend(miniz_oxide::deflate::compress_to_vec(text, 6));
    out.extend(crc32fast::hash(text).to_le_bytes());
    // ISIZE is the length modulo 2^32.
    out.extend((text.len() as u32).to_le_bytes());
    out
}

/// The length of a member's header (RFC 1952 §2.3), checked.
fn header_length(stream: &[u8]) -> Result<usize, String> {
    let byte = |at: usize| stream.get(at).copied().ok_or("unexpected EOF");
    if byte(0)? != 0x1f || byte(1)? != 0x8b || byte(2)? != 8 {
        return Err("gzip: invalid header".into());
    }
    let flags = byte(3)?;
    let mut at = HEADER.len();
    if flags & 0x04 != 0 {
        // FEXTRA: a length, then that many bytes.
        at += 2 + usize::from(u16::from_le_bytes([byte(at)?, byte(at + 1)?]));
    }
    for flag in [0x08, 0x10] {
        // FNAME, FCOMMENT: zero-terminated.
        if flags & flag != 0 {
            let rest = stream.get(at..).ok_or("unexpected EOF")?;
            at += 1 + rest.iter().position(|b| *b == 0).ok_or("unexpected EOF")?;
        }
    }
    if flags & 0x02 != 0 {
        at += 2; // FHCRC
    }
    if flags & 0xe0 != 0 {
        return Err("gzip: invalid header".into());
    }
    Ok(at)
}

/// Inflates one raw deflate stream onto the end of `out`, to at most `limit`
/// bytes in all; the bytes of `stream` it took. The time zone table is
/// inflated here too.
pub(crate) fn inflate(stream: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<usize, String> {
    use miniz_oxide::inflate::TINFLStatus;
    use miniz_oxide::inflate::core::{DecompressorOxide, decompress, inflate_flags};
    let mut state = DecompressorOxide::new();
    let (mut read, mut written) = (0, out.len());
    loop {
        out.resize((written + 64 * 1024).min(limit + 1), 0);
        let input = stream.get(read..).unwrap_or_default();
        let (status, consumed, produced) = decompress(
            &mut state,
            input,
            out,
            written,
            inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
        );
        read += consumed;
        written += produced;
        if written > limit {
            return Err(format!("more than {limit} bytes decompressed"));
        }
        match status {
            TINFLStatus::Done => break,
            TINFLStatus::HasMoreOutput => {}
            _ => return Err("flate: corrupt input".into()),
        }
    }
    out.truncate(written);
    Ok(read)
}

fn decompressed(mut stream: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let body = stream
            .get(header_length(stream)?..)
            .ok_or("unexpected EOF")?;
        // One member: inflate until its end, growing the output as needed.
        let start = out.len();
        let read = inflate(body, &mut out, MAX_OUTPUT)?;
        let trailer = body.get(read..read + 8).ok_or("unexpected EOF")?;
        let (crc, size) = trailer.split_at(4);
        let member = out.get(start..).unwrap_or_default();
        if crc != crc32fast::hash(member).to_le_bytes()
            || size != (member.len() as u32).to_le_bytes()
        {
            return Err("gzip: invalid checksum".into());
        }
        stream = body.get(read + 8..).unwrap_or_default();
        if stream.is_empty() {
            return Ok(out);
        }
    }
}

fn decompress<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "gzip.decompress";
    let stream = args
        .first()
        .and_then(|arg| arg.downcast_ref::<CelBytes>())
        .ok_or_else(|| error(F, "argument 0 must be bytes"))?;
    let text = decompressed(stream.inner()).map_err(|why| error(F, why))?;
    string(String::from_utf8(text).map_err(|_| error(F, "the text is not UTF-8"))?)
}

fn compress<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "gzip.compress")?;
    Ok(CowVal::owned(CelBytes::from(compressed(text.as_bytes()))))
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{annotated, s, table};
    use serde_json::json;

    /// Kyverno's `gzip` tests (kyverno/sdk `extensions/cel/libs/gzip`): the
    /// stream Go wrote decodes; ours decodes to the same text (its bytes
    /// differ from Go's, see the module's note).
    #[test]
    fn streams_round_trip_as_in_kyverno() {
        table(&[
            (
                "gzip.decompress(base64.decode('H4sIADP4umkAA8uuLEstyssHAOgPnDMHAAAA'))",
                s("kyverno"),
            ),
            (
                "gzip.decompress(base64.decode('H4sIAAAAAAAA/8quLEstyssHBAAA///oD5wzBwAAAA=='))",
                s("kyverno"),
            ),
            ("gzip.decompress(gzip.compress('kyverno'))", s("kyverno")),
            (
                "base64.encode(gzip.compress(''))",
                s("H4sIAAAAAAAA/wMAAAAAAAAAAAA="),
            ),
            (
                "gzip.decompress(gzip.compress('a') + gzip.compress('b'))",
                s("ab"),
            ),
            ("gzip.decompress(b'')", None),
            ("gzip.decompress(b'not gzip')", None),
            // A damaged checksum.
            (
                "gzip.decompress(base64.decode('H4sIADP4umkAA8uuLEstyssHAOgPnDMHAAAB'))",
                None,
            ),
            ("gzip.compress(1)", None),
        ]);
    }

    /// kyverno/kyverno's chainsaw test `mutating-policies/gzip`: the
    /// ConfigMap's data (written by the gzip command) and the text the Pod's
    /// annotation gets.
    #[test]
    fn the_chainsaw_configmap_decodes() {
        const DATA: &str = "H4sIAP7jhGkAA5WOSQ7CMAxF9z5F5QOEIlhUlTgJqiqTuoOaxFXiMtyeRIgFSxZe+P/nJ985pkVCdamwNkdTI5CbJC46+5KlmU7NGQGuAyl1gJu4xb5M5EmwAIiwkV1p4ipP0P4DwMAj7U4rck4eGdS4MxQakMioePc9v6qsHHorYVymZNZb6mCPrrSz6pbawyFnhp/kN8fGim+busmPfmx2mH916812EMhzCazt845/CN915//aEQEAAA==";
        let text = r#"version = "0.1.0"
algorithm = "sha384"

[data]
"policy.rego" = """
package agent_policy
default allow = true
"""

"aa.toml" = """
[token_configs.kbs]
url = "https://kbs.example.com:8080"
"""

"cdh.toml" = """
[kbc]
name = "cc_kbc"
url = "https://kbs.example.com:8080"
"""

"#;
        table(&[(
            &format!("gzip.decompress(base64.decode('{DATA}'))"),
            s(text),
        )]);
    }

    #[test]
    fn large_streams_are_bounded() {
        let large = "kyverno ".repeat(100_000);
        let stream = super::compressed(large.as_bytes());
        assert_eq!(super::decompressed(&stream), Ok(large.into_bytes()));
        let bomb = super::compressed(&vec![0; super::MAX_OUTPUT + 1]);
        assert!(bomb.len() < 20_000);
        assert!(super::decompressed(&bomb).is_err_and(|e| e.contains("more than")));
    }

    #[test]
    fn a_mutating_policy_annotates_with_a_compressed_name() {
        assert_eq!(
            annotated(
                "gzip.decompress(base64.decode(base64.encode(gzip.compress(object.target.name))))"
            ),
            json!({"result": "node-1"})
        );
    }
}
