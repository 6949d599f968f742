//! The overloads of the libraries' functions ([`super::signatures`] asks
//! here for what the standard library does not declare): Kubernetes' regex,
//! URL, IP, CIDR, quantity, semver and format libraries over their own types,
//! Kyverno's libraries, and cel-go's math and encoders extensions that
//! Kyverno's environment has. Each as cel-go declares it, a member's
//! receiver first.

use crate::cel::check::types::{
    AUTHORIZER, CIDR, DECISION, GROUP_CHECK, IMAGE, IP, NAMED_FORMAT, PATH_CHECK, QUANTITY,
    RESOURCE_CHECK, SEMVER, SERVICE_ACCOUNT, Ty, URL,
};

/// `None` for a function declared nowhere here, which gives `dyn`.
pub(in crate::cel) fn signatures(name: &str, member: bool) -> Option<Vec<(Vec<Ty>, Ty)>> {
    use Ty::*;
    let each = |args: &[Ty], result: Ty| -> Vec<(Vec<Ty>, Ty)> {
        args.iter()
            .map(|a| (vec![a.clone()], result.clone()))
            .collect()
    };
    Some(match (name, member) {
        // Kubernetes' regex, URL, IP, CIDR, quantity, semver and format
        // libraries, over their own types.
        ("find", true) => vec![(vec![String, String], String)],
        ("findAll", true) => vec![
            (vec![String, String], Ty::list(String)),
            (vec![String, String, Int], Ty::list(String)),
        ],
        ("quantity", false) => vec![(vec![String], QUANTITY)],
        ("url", false) => vec![(vec![String], URL)],
        ("cidr", false) => vec![(vec![String], CIDR)],
        ("ip", false) => vec![(vec![String], IP)],
        ("ip", true) => vec![(vec![CIDR], IP)],
        ("semver", false) => vec![(vec![String], SEMVER), (vec![String, Bool], SEMVER)],
        ("isQuantity" | "isURL" | "isIP" | "isCIDR" | "ip.isCanonical", false) => {
            vec![(vec![String], Bool)]
        }
        ("isSemver", false) => vec![(vec![String], Bool), (vec![String, Bool], Bool)],
        ("getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath", true) => {
            vec![(vec![URL], String)]
        }
        ("getQuery", true) => vec![(vec![URL], Map(Box::new(String), Box::new(Ty::list(String))))],
        ("add" | "sub", true) => vec![
            (vec![QUANTITY, QUANTITY], QUANTITY),
            (vec![QUANTITY, Int], QUANTITY),
        ],
        ("compareTo", true) => vec![(vec![QUANTITY, QUANTITY], Int), (vec![SEMVER, SEMVER], Int)],
        ("isGreaterThan" | "isLessThan", true) => vec![
            (vec![QUANTITY, QUANTITY], Bool),
            (vec![SEMVER, SEMVER], Bool),
        ],
        ("containsIP", true) => vec![(vec![CIDR, IP], Bool), (vec![CIDR, String], Bool)],
        ("containsCIDR", true) => vec![(vec![CIDR, CIDR], Bool), (vec![CIDR, String], Bool)],
        ("masked", true) => vec![(vec![CIDR], CIDR)],
        ("prefixLength", true) => vec![(vec![CIDR], Int)],
        ("family", true) => vec![(vec![IP], Int)],
        (
            "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast",
            true,
        ) => vec![(vec![IP], Bool)],
        ("major" | "minor" | "patch", true) => vec![(vec![SEMVER], Int)],
        ("asInteger", true) => vec![(vec![QUANTITY], Int)],
        // Kubernetes' quantity library declares `sign(q)` only: a member
        // call is no overload.
        ("sign", false) => vec![(vec![QUANTITY], Int)],
        ("sign", true) => vec![],
        ("asApproximateFloat", true) => vec![(vec![QUANTITY], Double)],
        ("isInteger", true) => vec![(vec![QUANTITY], Bool)],
        ("format.named", false) => vec![(vec![String], Optional(Box::new(NAMED_FORMAT)))],
        (
            "format.dns1123Label"
            | "format.dns1123Subdomain"
            | "format.dns1035Label"
            | "format.qualifiedName"
            | "format.dns1123LabelPrefix"
            | "format.dns1123SubdomainPrefix"
            | "format.dns1035LabelPrefix"
            | "format.labelValue"
            | "format.uri"
            | "format.uuid"
            | "format.byte"
            | "format.date"
            | "format.datetime",
            false,
        ) => vec![(vec![], NAMED_FORMAT)],
        // Kubernetes' authorizer, from `authorizer` to a decision.
        ("serviceAccount", true) => vec![(vec![AUTHORIZER, String, String], AUTHORIZER)],
        ("path", true) => vec![(vec![AUTHORIZER, String], PATH_CHECK)],
        ("group", true) => vec![(vec![AUTHORIZER, String], GROUP_CHECK)],
        ("resource", true) => vec![(vec![GROUP_CHECK, String], RESOURCE_CHECK)],
        ("subresource" | "namespace" | "name" | "fieldSelector" | "labelSelector", true) => {
            vec![(vec![RESOURCE_CHECK, String], RESOURCE_CHECK)]
        }
        ("check", true) => vec![
            (vec![PATH_CHECK, String], DECISION),
            (vec![RESOURCE_CHECK, String], DECISION),
        ],
        ("allowed" | "errored", true) => vec![(vec![DECISION], Bool)],
        ("reason" | "error", true) => vec![(vec![DECISION], String)],
        // Kyverno's libraries, and cel-go's math and encoders extensions
        // Kyverno's environment has.
        ("json.unmarshal" | "yaml.parse", false) => vec![(vec![String], Dyn)],
        ("json.marshal", false) => vec![(vec![Dyn], String)],
        ("user.parseServiceAccount" | "parseServiceAccount", false) => {
            vec![(vec![String], SERVICE_ACCOUNT)]
        }
        ("hash.sha1" | "hash.sha256" | "hash.md5" | "sha1" | "sha256" | "md5", false) => {
            vec![(vec![String], String)]
        }
        ("gzip.compress", false) => vec![(vec![Dyn], Bytes)],
        ("gzip.decompress", false) => vec![(vec![Bytes], String)],
        ("base64.encode", false) => vec![(vec![Bytes], String)],
        ("base64.decode", false) => vec![(vec![String], Bytes)],
        ("image" | "parseImageReference", false) => vec![(vec![String], IMAGE)],
        ("isImage", false) => vec![(vec![String], Bool)],
        ("registry" | "repository" | "identifier" | "tag" | "digest", true) => {
            vec![(vec![IMAGE], String)]
        }
        ("containsDigest", true) => vec![(vec![IMAGE], Bool)],
        ("time.now", false) => vec![(vec![], Timestamp)],
        ("time.truncate", false) => vec![(vec![Timestamp, Duration], Timestamp)],
        ("time.toCron", false) => vec![(vec![Timestamp], String)],
        ("math.round", false) => vec![(vec![Double], Double), (vec![Double, Int], Double)],
        ("math.ceil" | "math.floor" | "math.trunc", false) => vec![(vec![Double], Double)],
        ("math.abs" | "math.sign" | "math.bitNot", false) => {
            vec![(vec![Int], Int), (vec![Uint], Uint), (vec![Double], Double)]
        }
        ("math.isInf" | "math.isNaN" | "math.isFinite", false) => vec![(vec![Double], Bool)],
        ("math.bitAnd" | "math.bitOr" | "math.bitXor", false) => {
            vec![(vec![Int, Int], Int), (vec![Uint, Uint], Uint)]
        }
        ("math.bitShiftLeft" | "math.bitShiftRight", false) => {
            vec![(vec![Int, Int], Int), (vec![Uint, Int], Uint)]
        }
        ("math.sqrt", false) => each(&[Double, Int, Uint], Double),
        ("validate", true) => vec![(
            vec![NAMED_FORMAT, String],
            Optional(Box::new(Ty::list(String))),
        )],
        // Kyverno's reads give `map(string, google.protobuf.Any)`, whatever
        // their arguments (apiVersion, resource, namespace, name; or a GVR).
        (
            "resource.Get" | "resource.get" | "resource.List" | "resource.list" | "resource.Post"
            | "resource.post",
            false,
        ) => (2..=4)
            .map(|n| (vec![Dyn; n], Map(Box::new(String), Box::new(Any))))
            .collect(),
        _ => return None,
    })
}
