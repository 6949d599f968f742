//! Kyverno's `hash` library: `sha1(s)`, `sha256(s)`, `md5(s)` and, as
//! Kyverno 1.18 also declares them, `hash.sha1(s)`, `hash.sha256(s)`,
//! `hash.md5(s)`. Each digests the string's UTF-8 bytes and gives the digest
//! as lowercase hex, as Go's `hex.EncodeToString` writes it.

use ::cel::common::value::CowVal;
use ::cel::{Env, ExecutionError};
use sha2::Digest;

use super::{Function, global, string, string_arg, string_type};

/// Declares the library.
pub fn register(env: &mut Env) {
    let functions: [(&str, Function); 3] = [("sha1", sha1), ("sha256", sha256), ("md5", md5)];
    for (name, op) in functions {
        global(
            env,
            name,
            &format!("{name}_string_non_prefixed"),
            vec![string_type()],
            op,
        );
        global(
            env,
            &format!("hash.{name}"),
            &format!("{name}_string_prefixed"),
            vec![string_type()],
            op,
        );
    }
}

/// The digest of `text` as lowercase hex.
fn hex_digest<D: Digest>(text: &str) -> String {
    D::digest(text.as_bytes())
        .iter()
        .flat_map(|byte| [byte >> 4, byte & 0xf])
        .filter_map(|nibble| char::from_digit(u32::from(nibble), 16))
        .collect()
}

fn sha1<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(hex_digest::<sha1::Sha1>(string_arg(&args, 0, "sha1")?))
}

fn sha256<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(hex_digest::<sha2::Sha256>(string_arg(&args, 0, "sha256")?))
}

fn md5<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(hex_digest::<md5::Md5>(string_arg(&args, 0, "md5")?))
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{annotated, b, s, table};
    use serde_json::json;

    /// Kyverno's `hash` tests (kyverno/sdk `extensions/cel/libs/hash` with
    /// the `hash.` names, kyverno/kyverno `pkg/cel/libs/hash` without), and
    /// the digests of the empty string.
    #[test]
    fn digests_are_those_kyverno_gives() {
        table(&[
            (
                "hash.sha1('ghcr.io/kyverno/kyverno:latest')",
                s("98f68a84cd3ada3a25bc42bf69ed8e0297e13022"),
            ),
            (
                "hash.sha256('ghcr.io/kyverno/kyverno:latest')",
                s("e98de8e3a54bcb921de9cc72741522823cb30ef9dda17cfd228416ead4ce3760"),
            ),
            (
                "hash.md5('ghcr.io/kyverno/kyverno:latest')",
                s("16dc16f633974d1015cad2ffe81e7365"),
            ),
            (
                "sha1('ghcr.io/kyverno/kyverno:latest')",
                s("98f68a84cd3ada3a25bc42bf69ed8e0297e13022"),
            ),
            (
                "sha256('ghcr.io/kyverno/kyverno:latest')",
                s("e98de8e3a54bcb921de9cc72741522823cb30ef9dda17cfd228416ead4ce3760"),
            ),
            (
                "md5('ghcr.io/kyverno/kyverno:latest')",
                s("16dc16f633974d1015cad2ffe81e7365"),
            ),
            ("md5('')", s("d41d8cd98f00b204e9800998ecf8427e")),
            ("sha1('')", s("da39a3ee5e6b4b0d3255bfef95601890afd80709")),
            (
                "sha256('')",
                s("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ),
            ("sha256('x') == hash.sha256('x')", b(true)),
            ("hash.sha256(1)", None),
        ]);
    }

    #[test]
    fn a_mutating_policy_annotates_with_a_digest() {
        assert_eq!(
            annotated("hash.md5(object.target.name)"),
            json!({"result": "d50164b9587cab73e417e5ce616bea4e"})
        );
    }
}
