//! Kubernetes' URL library: `url(s)`, `isURL(s)`, and on a URL
//! `getScheme()`, `getHost()`, `getHostname()`, `getPort()`,
//! `getEscapedPath()`, `getQuery()`. URLs are read as Go's `net/url` reads
//! them (Kubernetes checks with `url.ParseRequestURI` and keeps what
//! `url.Parse` gives): no normalisation, the host as written (`[::1]:80`),
//! the port only when written, paths escaped as Go escapes them. A small
//! parser of the parts these functions expose, not a WHATWG URL parser,
//! which reads hosts, ports and paths otherwise.

use std::collections::HashMap;
use std::sync::Arc;

use ::cel::common::types::Type;
use ::cel::common::value::CowVal;
use ::cel::objects::{Key, Map, Opaque};
use ::cel::{Env, ExecutionError, Value};

use super::{Function, boolean, error, global, member, opaque, opaque_arg, owned, string};
use super::{string_arg, string_type};

const TYPE_NAME: &str = "kubernetes.URL";

fn url_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// The parts of a URL these functions read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Url {
    scheme: String,
    /// `host[:port]`, unescaped, brackets kept.
    host: String,
    /// The path, unescaped, and as written when that differs from Go's
    /// default escaping of it.
    path: String,
    raw_path: String,
    raw_query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// How a part is escaped or unescaped (Go's `encoding` modes).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
}

/// Go's `shouldEscape`, for the parts read here.
fn should_escape(c: u8, part: Part) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(part, Part::Host | Part::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match part {
            Part::Path => c == b'?',
            Part::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
            _ => true,
        },
        _ => true,
    }
}

fn hex_value(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Go's `unescape`: `%XX` decoded (and `+` as a space in a query
/// component), refusing what Go refuses.
fn unescape(text: &str, part: Part) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&c) = bytes.get(at) {
        match c {
            b'%' => {
                let escape = text.get(at..at + 3).unwrap_or(text.get(at..).unwrap_or(""));
                let (Some(hi), Some(lo)) = (
                    bytes.get(at + 1).copied().and_then(hex_value),
                    bytes.get(at + 2).copied().and_then(hex_value),
                ) else {
                    return Err(format!("invalid URL escape {escape:?}"));
                };
                let value = hi << 4 | lo;
                let ok = match part {
                    // Hosts may escape only non-ASCII bytes, and `%25`.
                    Part::Host => hi >= 8 || escape == "%25",
                    Part::Zone => {
                        escape == "%25" || value == b' ' || !should_escape(value, Part::Host)
                    }
                    _ => true,
                };
                if !ok {
                    return Err(format!("invalid URL escape {escape:?}"));
                }
                out.push(value);
                at += 3;
            }
            b'+' if part == Part::QueryComponent => {
                out.push(b' ');
                at += 1;
            }
            _ => {
                if matches!(part, Part::Host | Part::Zone) && c < 0x80 && should_escape(c, part) {
                    return Err(format!(
                        "invalid character {:?} in host name",
                        char::from(c)
                    ));
                }
                out.push(c);
                at += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `escape`, for a path.
fn escape_path(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.bytes() {
        if should_escape(c, Part::Path) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(char::from(c));
        }
    }
    out
}

/// Go's `validOptionalPort`: empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `getScheme`: the scheme and the rest, or no scheme.
fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((raw.get(..i).unwrap_or(""), raw.get(i + 1..).unwrap_or(""))),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Go's `parseHost`, with Go 1.26's checks: a bracketed host is an IPv6
/// address, and an unbracketed one has at most one colon, before its port.
fn parse_host(host: &str) -> Result<String, String> {
    if let Some(inside) = host.strip_prefix('[') {
        let close = inside.rfind(']').ok_or("missing ']' in host")?;
        let (literal, after) = (inside.get(..close).unwrap_or(""), inside.get(close + 1..));
        let port = after.unwrap_or("");
        if !valid_optional_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
        let (address, zone) = match literal.find("%25") {
            Some(at) => (literal.get(..at).unwrap_or(""), literal.get(at..)),
            None => (literal, None),
        };
        let address = unescape(address, Part::Host)?;
        if address.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("invalid host: {address:?} is not an IPv6 address"));
        }
        let zone = zone.map(|z| unescape(z, Part::Zone)).transpose()?;
        return Ok(format!("[{address}{}]{port}", zone.unwrap_or_default()));
    }
    if let Some(colon) = host.rfind(':') {
        let port = host.get(colon..).unwrap_or("");
        if !valid_optional_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
        if host.get(..colon).is_some_and(|name| name.contains(':')) {
            return Err(format!("invalid host {host:?}: too many colons"));
        }
    }
    unescape(host, Part::Host)
}

/// Go's `parseAuthority`: the user info is checked and dropped.
fn parse_authority(authority: &str) -> Result<String, String> {
    let Some(at) = authority.rfind('@') else {
        return parse_host(authority);
    };
    let host = parse_host(authority.get(at + 1..).unwrap_or(""))?;
    let user = authority.get(..at).unwrap_or("");
    let valid = user
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c));
    if !valid {
        return Err("net/url: invalid userinfo".into());
    }
    for piece in user.splitn(2, ':') {
        unescape(piece, Part::UserPassword)?;
    }
    Ok(host)
}

/// Go's `url.parse`; `request` is `ParseRequestURI`'s stricter reading.
fn parse(raw: &str, request: bool) -> Result<Url, String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() && request {
        return Err("empty url".into());
    }
    let mut url = Url::default();
    if raw == "*" {
        url.path = "*".into();
        return Ok(url);
    }
    let (scheme, rest) = split_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    let rest = match rest.strip_suffix('?') {
        Some(rest) if !rest.contains('?') => rest,
        _ => match rest.split_once('?') {
            Some((rest, query)) => {
                url.raw_query = query.to_string();
                rest
            }
            None => rest,
        },
    };
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // Opaque: no host, no path.
            return Ok(url);
        }
        if request {
            return Err("invalid URI for request".into());
        }
        if rest.split('/').next().is_some_and(|s| s.contains(':')) {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    let mut path = rest;
    let authority_follows = !url.scheme.is_empty() || (!request && !rest.starts_with("///"));
    if let Some(after) = rest.strip_prefix("//").filter(|_| authority_follows) {
        let (authority, tail) = after.split_at(after.find('/').unwrap_or(after.len()));
        url.host = parse_authority(authority)?;
        path = tail;
    }
    url.path = unescape(path, Part::Path)?;
    if escape_path(&url.path) != path {
        url.raw_path = path.to_string();
    }
    Ok(url)
}

/// Go's `url.ParseRequestURI`, its error as Go words it.
pub(crate) fn parse_request_uri(raw: &str) -> Result<Url, String> {
    parse(raw, true).map_err(|why| format!("parse {raw:?}: {why}"))
}

/// What Kubernetes' `url(s)` keeps: `url.Parse` of a string
/// `url.ParseRequestURI` accepts.
fn parse_url(raw: &str) -> Result<Url, String> {
    parse_request_uri(raw)?;
    let without_fragment = raw.split('#').next().unwrap_or("");
    parse(without_fragment, false).map_err(|why| format!("parse {without_fragment:?}: {why}"))
}

impl Url {
    /// Go's `splitHostPort`.
    fn host_and_port(&self) -> (&str, &str) {
        let mut host = self.host.as_str();
        let mut port = "";
        if let Some(colon) = host.rfind(':')
            && valid_optional_port(host.get(colon..).unwrap_or(""))
        {
            port = host.get(colon + 1..).unwrap_or("");
            host = host.get(..colon).unwrap_or("");
        }
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        (host, port)
    }

    /// Go's `EscapedPath`.
    fn escaped_path(&self) -> String {
        let raw_is_valid = !self.raw_path.is_empty()
            && self
                .raw_path
                .bytes()
                .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, Part::Path))
            && unescape(&self.raw_path, Part::Path).is_ok_and(|p| p == self.path);
        if raw_is_valid {
            self.raw_path.clone()
        } else if self.path == "*" {
            "*".into()
        } else {
            escape_path(&self.path)
        }
    }

    /// Go's `Query()`: each key's values in order; pairs that do not decode,
    /// or hold a `;`, are left out.
    fn query(&self) -> HashMap<Key, Value> {
        let mut values: HashMap<String, Vec<Value>> = HashMap::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Ok(key), Ok(value)) = (
                unescape(key, Part::QueryComponent),
                unescape(value, Part::QueryComponent),
            ) {
                values.entry(key).or_default().push(Value::from(value));
            }
        }
        values
            .into_iter()
            .map(|(k, v)| (Key::from(k), Value::List(Arc::new(v))))
            .collect()
    }
}

/// Declares the library.
pub fn register(env: &mut Env) {
    global(env, "url", "string_to_url", vec![string_type()], to_url);
    global(env, "isURL", "is_url_string", vec![string_type()], is_url);
    let getters: [(&str, &str, Function); 6] = [
        ("getScheme", "url_get_scheme", get_scheme),
        ("getHost", "url_get_host", get_host),
        ("getHostname", "url_get_hostname", get_hostname),
        ("getPort", "url_get_port", get_port),
        ("getEscapedPath", "url_get_escaped_path", get_escaped_path),
        ("getQuery", "url_get_query", get_query),
    ];
    for (name, id, op) in getters {
        member(env, name, id, url_type(), vec![], op);
    }
}

fn to_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "url")?;
    parse_url(text)
        .map_err(|why| {
            error(
                "url",
                format!("URL parse error during conversion from string: {why}"),
            )
        })
        .and_then(opaque)
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(parse_request_uri(string_arg(&args, 0, "isURL")?).is_ok())
}

fn this(args: &[CowVal<'_, '_>], function: &str) -> Result<Url, ExecutionError> {
    opaque_arg::<Url>(args, 0, function)
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "getScheme")?.scheme)
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "getHost")?.host)
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "getHostname")?.host_and_port().0)
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "getPort")?.host_and_port().1)
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "getEscapedPath")?.escaped_path())
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let query = this(&args, "getQuery")?.query();
    owned(Value::Map(Map {
        map: Arc::new(query),
    }))
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{annotated, b, table};
    use serde_json::json;

    /// Kubernetes' URL cases (apiextensions-apiserver's
    /// `TestValidationExpressions`, "URL parsing"), the object's `url`
    /// field written in.
    #[test]
    fn urls_read_as_in_kubernetes() {
        const OBJECT: &str = "'https://user:pass@kubernetes.io:80/docs/home?k1=a&k2=b&k2=c#anchor'";
        let cases = [
            "url('/path').getScheme() == ''",
            "url('https://example.com/').getScheme() == 'https'",
            "url('https://example.com:80/').getHost() == 'example.com:80'",
            "url('https://example.com/').getHost() == 'example.com'",
            "url('https://[::1]:80/').getHost() == '[::1]:80'",
            "url('https://[::1]/').getHost() == '[::1]'",
            "url('/path').getHost() == ''",
            "url('https://example.com:80/').getHostname() == 'example.com'",
            "url('https://127.0.0.1/').getHostname() == '127.0.0.1'",
            "url('https://[::1]/').getHostname() == '::1'",
            "url('/path').getHostname() == ''",
            "url('https://example.com:80/').getPort() == '80'",
            "url('https://example.com/').getPort() == ''",
            "url('/path').getPort() == ''",
            "url('https://example.com/path').getEscapedPath() == '/path'",
            "url('https://example.com/with space/').getEscapedPath() == '/with%20space/'",
            "url('https://example.com').getEscapedPath() == ''",
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == { 'k1': ['a'], 'k2': ['b', 'c']}",
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() == { 'key with spaces': ['value with spaces']}",
            "url('https://example.com/path?').getQuery() == {}",
            "url('https://example.com/path').getQuery() == {}",
            "url(OBJECT).getScheme() == 'https'",
            "url(OBJECT).getHost() == 'kubernetes.io:80'",
            "url(OBJECT).getHostname() == 'kubernetes.io'",
            "url(OBJECT).getPort() == '80'",
            "url(OBJECT).getEscapedPath() == '/docs/home'",
            "url(OBJECT).getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
            "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
            "isURL('/path') == true",
            "isURL('https://a:b:c/') == false",
            "isURL('../relative-path') == false",
            // Kubernetes' cost test parses this one.
            "url('https:://kubernetes.io/').getHostname() != 'test'",
        ]
        .map(|case| case.replace("OBJECT", OBJECT));
        all_true(&cases.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// Go's `net/url` on what Kubernetes' cases leave out.
    #[test]
    fn urls_read_as_go_reads_them() {
        all_true(&[
            "url('HTTPS://Example.com:443/a%2Fb').getScheme() == 'https'",
            "url('HTTPS://Example.com:443/a%2Fb').getHost() == 'Example.com:443'",
            "url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'",
            "url('https://example.com/a%41').getEscapedPath() == '/a%41'",
            "url('https://example.com/a?x=1#f?y').getQuery() == {'x': ['1']}",
            "url('https://example.com/?a=%zz&b=1;c&d=+').getQuery() == {'d': [' ']}",
            "url('https://[fe80::1%25en0]:8080/').getHostname() == 'fe80::1%en0'",
            "url('mailto:someone@example.com').getHost() == ''",
            "isURL('*')",
            "!isURL('')",
            "!isURL('http://exa mple.com/')",
            "!isURL('http://[1.2.3.4]/')",
            "!isURL('http://a/%zz')",
            "!isURL('http://a/\\n')",
            "!isURL('http://a:80:80/')",
            "!isURL(':foo')",
        ]);
        table(&[("url('example.com')", None), ("url('https://a b/')", None)]);
    }

    fn all_true(cases: &[&str]) {
        let cases: Vec<_> = cases.iter().map(|case| (*case, b(true))).collect();
        table(&cases);
    }

    #[test]
    fn a_mutating_policy_annotates_with_a_host() {
        assert_eq!(
            annotated("url('https://' + object.target.name + ':8443/x').getHostname()"),
            json!({"result": "node-1"})
        );
    }
}
