//! The commonest request this policy sees, decided from the bytes received.
//!
//! Every Pod the API server creates comes here before it is scheduled, and
//! almost none has `spec.nodeName` yet: the policy lets it through untouched.
//! Decoding the payload to find that out (every field of the request, the
//! Pod twice) was most of what such a request cost in policy-server, where
//! each evaluation runs in a fresh instance with cold caches. This reader
//! walks the bytes once, looks only at the fields classification reads, and
//! answers only when the answer is certain; anything unusual (escapes in a
//! name it compares, a repeated field serde would refuse, an unexpected type)
//! goes to the full decode, which decides and explains as before.
//!
//! It does not validate the JSON it skips: policy-server and kwctl only ever
//! send JSON they have encoded themselves. Brackets are matched, so a
//! truncated or garbled payload is not mistaken for a finished one.

/// True when the payload (`validate`'s input) is certainly a request that
/// [`crate::decide`] lets through without a word: not a `CREATE`, not a Pod
/// or Binding, or a Pod with no `spec.nodeName`, under settings that have no
/// rules or CEL mutations. False means "decode it and see".
pub fn certain(payload: &[u8]) -> bool {
    let mut reader = Reader {
        bytes: payload,
        at: 0,
    };
    reader.passes().is_some()
}

/// Where a value starts and ends in the payload.
type Span = (usize, usize);

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// The fields of the request classification reads (the first of each, as
/// [`crate::shared::json_fields::JsonFields::raw`] finds them).
#[derive(Default)]
struct RequestFields {
    operation: Option<Span>,
    kind: Option<Span>,
    resource: Option<Span>,
    sub_resource: Option<Span>,
    /// Whether the object is certainly a Pod not placed yet (as far as its
    /// `spec.nodeName` tells).
    object: Option<bool>,
}

impl<'a> Reader<'a> {
    /// `Some` when the payload certainly passes; `None` as soon as it is
    /// known that it may not.
    fn passes(&mut self) -> Option<()> {
        let (mut request, mut settings) = (false, None);
        let mut members = self.members()?;
        while let Some(key) = members.next_key(self)? {
            match key {
                // serde refuses a repeated field of the payload.
                b"request" if !request => {
                    let fields = self.request()?;
                    // A Binding or a placed Pod is decoded whatever the
                    // settings say: no need to read on.
                    self.classify(&fields)?;
                    request = true;
                }
                b"settings" if settings.is_none() => settings = Some(self.value()?),
                b"request" | b"settings" => return None,
                _ => {
                    self.value()?;
                }
            }
        }
        self.end()?;
        if !request {
            return None;
        }
        match settings.and_then(|span| self.slice(span)) {
            // The test `decide` makes on the settings' text.
            Some(text) => {
                let text = std::str::from_utf8(text).ok()?;
                (!crate::settings::may_have_rules(text)).then_some(())
            }
            None => Some(()),
        }
    }

    fn request(&mut self) -> Option<RequestFields> {
        let mut fields = RequestFields::default();
        let mut members = self.members()?;
        while let Some(key) = members.next_key(self)? {
            if key == b"object" && fields.object.is_none() {
                fields.object = Some(self.unplaced_pod()?);
                continue;
            }
            let span = self.value()?;
            let slot = match key {
                b"operation" => &mut fields.operation,
                b"kind" => &mut fields.kind,
                b"resource" => &mut fields.resource,
                b"subResource" => &mut fields.sub_resource,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(span);
                // A Binding names its subresource before its object: known
                // to need the full decode without reading on.
                if fields.sub_resource.is_some()
                    && fields.operation.is_some()
                    && fields.kind.is_some()
                    && fields.resource.is_some()
                    && fields.object.is_none()
                {
                    self.classify(&fields)?;
                }
            }
        }
        Some(fields)
    }

    /// The same decision as [`crate::admission::classify`], where it is a
    /// silent pass; `None` for everything else.
    fn classify(&self, request: &RequestFields) -> Option<()> {
        match self.optional_text(request.operation)? {
            Some(b"CREATE") => {}
            _ => return Some(()),
        }
        let (resource_group, resource) = self.group_and(request.resource, b"resource")?;
        let (kind_group, kind) = self.group_and(request.kind, b"kind")?;
        let sub_resource = self
            .optional_text(request.sub_resource)?
            .unwrap_or_default();
        let core_pods = resource_group.is_empty() && resource == b"pods" && kind_group.is_empty();
        let is_binding = core_pods && sub_resource == b"binding" && kind == b"Binding";
        let is_pod = core_pods && sub_resource.is_empty() && kind == b"Pod";
        if is_binding {
            return None;
        }
        if !is_pod {
            return Some(());
        }
        request.object?.then_some(())
    }

    /// Skips the request's object, telling whether it is certainly a Pod not
    /// placed yet: an object whose `spec` is absent or null, or whose
    /// `spec.nodeName` is absent, null or empty. Read in the one pass that
    /// skips it: the Pod is most of the request.
    fn unplaced_pod(&mut self) -> Option<bool> {
        if self.peek()? != b'{' {
            self.value()?;
            return Some(false);
        }
        let (mut spec, mut repeated) = (None, false);
        let mut members = self.members()?;
        while let Some(key) = members.next_key(self)? {
            if key == b"spec" {
                // serde refuses a repeated field, and explains.
                repeated |= spec.is_some();
                spec = Some(self.unplaced_spec()?);
            } else {
                self.value()?;
            }
        }
        Some(!repeated && spec.unwrap_or(true))
    }

    fn unplaced_spec(&mut self) -> Option<bool> {
        if self.peek()? != b'{' {
            let span = self.value()?;
            return Some(self.slice(span)? == b"null");
        }
        let (mut node_name, mut repeated) = (None, false);
        let mut members = self.members()?;
        while let Some(key) = members.next_key(self)? {
            let span = self.value()?;
            if key == b"nodeName" {
                repeated |= node_name.replace(span).is_some();
            }
        }
        Some(!repeated && matches!(self.optional_text(node_name), Some(None | Some(b""))))
    }

    /// `group` and one other name of a `kind` or `resource` object; both
    /// empty when the field is absent or null (as classification reads it).
    fn group_and(&self, span: Option<Span>, name: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
        let Some(span) = span else {
            return Some((b"", b""));
        };
        let mut reader = self.sub_reader(span)?;
        if reader.is_null() {
            return Some((b"", b""));
        }
        let (mut group, mut other) = (None, None);
        let mut members = reader.members()?;
        while let Some(key) = members.next_key(&mut reader)? {
            let span = reader.value()?;
            let slot = if key == b"group" {
                &mut group
            } else if key == name {
                &mut other
            } else {
                continue;
            };
            // serde refuses a repeated field.
            if slot.replace(span).is_some() {
                return None;
            }
        }
        Some((
            reader.optional_text(group)?.unwrap_or_default(),
            reader.optional_text(other)?.unwrap_or_default(),
        ))
    }

    /// A string value without escapes, or `Some(None)` for absent or null;
    /// `None` for anything else (the full decode reads it).
    fn optional_text(&self, span: Option<Span>) -> Option<Option<&'a [u8]>> {
        let Some(span) = span else {
            return Some(None);
        };
        let value = self.slice(span)?;
        if value == b"null" {
            return Some(None);
        }
        let text = value.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        (!text.contains(&b'\\')).then_some(Some(text))
    }

    fn sub_reader(&self, (start, end): Span) -> Option<Reader<'a>> {
        Some(Reader {
            bytes: self.bytes.get(..end)?,
            at: start,
        })
    }

    fn slice(&self, (start, end): Span) -> Option<&'a [u8]> {
        self.bytes.get(start..end)
    }

    fn is_null(&mut self) -> bool {
        self.skip_space();
        self.bytes
            .get(self.at..)
            .is_some_and(|rest| rest.starts_with(b"null"))
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_space();
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.at).copied()
    }

    /// Nothing but white space is left.
    fn end(&mut self) -> Option<()> {
        self.skip_space();
        (self.at == self.bytes.len()).then_some(())
    }

    fn members(&mut self) -> Option<Members> {
        self.eat(b'{')?;
        Some(Members { first: true })
    }

    /// A string with no escapes (a key this reader compares), its bytes.
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = self.bytes.get(self.at..)?;
        let length = quote_or_backslash(rest)?;
        let text = rest.get(..length)?;
        if rest.get(length) != Some(&b'"') {
            return None;
        }
        self.at += length + 1;
        Some(text)
    }

    /// Skips one value, returning where it is. Strings may hold escapes;
    /// brackets must match (at most 128 deep, serde_json's own limit).
    fn value(&mut self) -> Option<Span> {
        self.skip_space();
        let start = self.at;
        match *self.bytes.get(self.at)? {
            b'"' => self.skip_string()?,
            b'{' | b'[' => self.skip_brackets()?,
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                while let Some(byte) = self.bytes.get(self.at) {
                    if matches!(byte, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                        break;
                    }
                    self.at += 1;
                }
            }
            _ => return None,
        }
        Some((start, self.at))
    }

    /// An object or array, to its matching bracket.
    fn skip_brackets(&mut self) -> Option<()> {
        // One bit per open bracket: 1 for `{`, 0 for `[`.
        let mut open: u128 = 0;
        let mut depth = 0u32;
        loop {
            // Numbers, literals and separators between strings and brackets.
            let rest = self.bytes.get(self.at..)?;
            self.at += rest
                .iter()
                .position(|byte| matches!(byte, b'"' | b'{' | b'}' | b'[' | b']'))?;
            let byte = *self.bytes.get(self.at)?;
            match byte {
                b'"' => {
                    self.skip_string()?;
                    continue;
                }
                b'{' | b'[' => {
                    if depth == 128 {
                        return None;
                    }
                    open = (open << 1) | u128::from(byte == b'{');
                    depth += 1;
                }
                _ => {
                    if depth == 0 || (open & 1 == 1) != (byte == b'}') {
                        return None;
                    }
                    open >>= 1;
                    depth -= 1;
                }
            }
            self.at += 1;
            if depth == 0 {
                return Some(());
            }
        }
    }

    /// A string, escapes and all.
    fn skip_string(&mut self) -> Option<()> {
        self.at += 1;
        loop {
            let rest = self.bytes.get(self.at..)?;
            self.at += quote_or_backslash(rest)?;
            if self.bytes.get(self.at) == Some(&b'"') {
                self.at += 1;
                return Some(());
            }
            self.at += 2;
        }
    }
}

/// Walks an object's members: `next_key` reads the separator and the key,
/// leaving the reader at the value, which the caller then reads or skips.
struct Members {
    first: bool,
}

impl Members {
    fn next_key<'a>(&mut self, reader: &mut Reader<'a>) -> Option<Option<&'a [u8]>> {
        match reader.peek()? {
            b'}' => {
                reader.at += 1;
                return Some(None);
            }
            b',' if !self.first => reader.at += 1,
            _ if self.first => {}
            _ => return None,
        }
        self.first = false;
        let key = reader.plain_string()?;
        reader.eat(b':')?;
        Some(Some(key))
    }
}

/// Where the first `"` or `\\` is. Eight bytes at a time: most of a request
/// is the inside of strings, and a byte at a time cost about as much as
/// decoding the request did.
fn quote_or_backslash(text: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    // The high bit of each zero byte (the lowest one is always right; a
    // borrow can only mark bytes above it).
    let zero_bytes = |word: u64| word.wrapping_sub(ONES) & !word & HIGHS;
    let mut chunks = text.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).ok()?);
        let found = zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES);
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    let tail = chunks
        .remainder()
        .iter()
        .position(|byte| matches!(byte, b'"' | b'\\'))?;
    Some(offset + tail)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::certain;
    use crate::host::node_lookup::{NodeFields, NodeLookup};

    /// A host with nothing to read: a request the shortcut lets through must
    /// not need one.
    struct NoHost;

    impl NodeLookup for NoHost {
        fn fetch_node(&self, name: &str, _fields: NodeFields) -> Result<Vec<u8>, String> {
            Err(format!("no Node {name} here"))
        }
    }

    impl crate::host::cluster::Cluster for NoHost {
        fn read(&self, _read: &crate::host::cluster::Read) -> Result<Vec<u8>, String> {
            Err("no cluster here".to_string())
        }
    }

    /// What the full decode answers: (accepted, mutated, warnings).
    fn decoded(payload: &[u8]) -> (bool, bool, usize) {
        let response = crate::decide_decoded(payload, &NoHost, &NoHost).into_response();
        let warnings = response.warnings.map_or(0, |w| w.len());
        (
            response.accepted,
            response.mutated_object.is_some(),
            warnings,
        )
    }

    /// The shortcut's answer, checked against the full decode's whenever the
    /// shortcut is sure.
    fn shortcut(payload: &[u8]) -> bool {
        let sure = certain(payload);
        if sure {
            assert_eq!(
                decoded(payload),
                (true, false, 0),
                "the shortcut let through what the full decode does not let through silently: {}",
                String::from_utf8_lossy(payload)
            );
        }
        sure
    }

    fn request_file(name: &str) -> Value {
        serde_json::from_slice(&std::fs::read(format!("test_data/{name}")).unwrap()).unwrap()
    }

    fn payload(request: &Value, settings: &Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap()
    }

    fn pod(spec: Value) -> Value {
        json!({
            "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {"metadata": {"name": "p", "annotations": {"a\"}]": "{["}}, "spec": spec},
        })
    }

    #[test]
    fn the_load_tests_pod_is_let_through_without_decoding() {
        let request = request_file("pod-without-node-name.json");
        assert!(shortcut(&payload(&request, &json!({}))));
        // As policy-server and kwctl write it: pretty or not, keys in any order.
        let pretty =
            serde_json::to_vec_pretty(&json!({"settings": {}, "request": request})).unwrap();
        assert!(shortcut(&pretty));
        assert!(shortcut(
            &serde_json::to_vec(&json!({"request": request})).unwrap()
        ));
    }

    #[test]
    fn requests_with_work_to_do_are_decoded() {
        let settings = json!({});
        for file in [
            "binding.json",
            "binding-large-node.json",
            "pod-with-node-name.json",
        ] {
            let payload = payload(&request_file(file), &settings);
            assert!(!shortcut(&payload), "{file}");
        }
        // Settings with rules or CEL mutations may match any request.
        let pod = request_file("pod-without-node-name.json");
        for settings in [
            json!({"rules": []}),
            json!({"policies": [{"spec": {"mutations": []}}]}),
        ] {
            assert!(!shortcut(&payload(&pod, &settings)), "{settings}");
        }
    }

    #[test]
    fn silent_passes() {
        let settings = json!({"annotations": ["topology.kubernetes.io/zone"]});
        let cases = [
            pod(json!({"containers": [{"name": "c", "args": ["\\\"", "]"]}]})),
            pod(json!({"nodeName": ""})),
            pod(json!({"nodeName": null, "x": [1.5e3, -2, true, false, null]})),
            pod(Value::Null),
            json!({"operation": "UPDATE", "kind": {"kind": "Pod"}, "resource": {"resource": "pods"},
                   "object": {"spec": {"nodeName": "n"}}}),
            json!({"operation": "DELETE"}),
            json!({"kind": {"kind": "Pod"}}),
            json!({"operation": "CREATE", "kind": {"group": "apps", "kind": "Deployment"},
                   "resource": {"group": "apps", "resource": "deployments"}, "object": {}}),
            json!({"operation": "CREATE", "kind": {"kind": "Pod"}, "resource": {"resource": "pods"},
                   "subResource": "status", "object": {"spec": {"nodeName": "n"}}}),
        ];
        for request in cases {
            assert!(shortcut(&payload(&request, &settings)), "{request}");
        }
    }

    #[test]
    fn anything_unusual_goes_to_the_full_decode() {
        let settings = br#"{}"#;
        let cases: [&[u8]; 14] = [
            // Placed, or placed in a way only the full decode reads.
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"spec":{"nodeName":"n"}}}"#,
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"spec":{"nodeName":"\u006e"}}}"#,
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"spec":{"nodeName":5}}}"#,
            // Repeated fields serde refuses (the full decode explains).
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"spec":{},"spec":{}}}"#,
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"spec":{"nodeName":"","nodeName":""}}}"#,
            br#"{"operation":"CREATE","kind":{"kind":"Pod","kind":"Pod"},"resource":{"resource":"pods"},"object":{}}"#,
            // No object, or not an object: the full decode says so.
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"}}"#,
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":null}"#,
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"spec":[]}}"#,
            // Escapes in a compared name or key.
            br#"{"operation":"CR\u0045ATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{}}"#,
            br#"{"operation":"CREATE","kind":{"k\u0069nd":"Pod"},"resource":{"resource":"pods"},"object":{}}"#,
            br#"{"operation":"CREATE","kind":{"kind":"Binding"},"resource":{"resource":"pods"},"subResource":"binding","object":{}}"#,
            // Truncated, or brackets that do not match.
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"spec":{]}"#,
            br#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"metadata":{"#,
        ];
        for request in cases {
            let mut payload = b"{\"request\":".to_vec();
            payload.extend_from_slice(request);
            payload.extend_from_slice(b",\"settings\":");
            payload.extend_from_slice(settings);
            payload.push(b'}');
            assert!(!shortcut(&payload), "{}", String::from_utf8_lossy(request));
        }
        // The payload itself: a repeated request, trailing bytes, nothing.
        for payload in [
            &br#"{"request":{"operation":"DELETE"},"request":{"operation":"DELETE"}}"#[..],
            br#"{"request":{"operation":"DELETE"}} x"#,
            br#"{"request":{"operation":"DELETE"},}"#,
            br#"{"settings":{}}"#,
            b"",
        ] {
            assert!(!shortcut(payload), "{}", String::from_utf8_lossy(payload));
        }
    }

    /// Byte-level edits of real requests (a fixed pseudo-random sequence):
    /// wherever the edit leaves JSON the shortcut is sure of, the full decode
    /// agrees.
    #[test]
    fn edited_requests_agree_with_the_full_decode() {
        let alphabet: &[&[u8]] = &[
            b"\"",
            b"\\",
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"null",
            b"\"\"",
            b"\"spec\":",
            b"\"nodeName\":\"n\",",
            b"\"object\":",
            b"\"kind\":",
            b"\\u0041",
            b" ",
            b"0",
        ];
        let seeds: Vec<Vec<u8>> = [
            "pod-without-node-name.json",
            "pod-with-node-name.json",
            "binding.json",
        ]
        .iter()
        .map(|file| payload(&request_file(file), &json!({})))
        .collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |bound: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) as usize % bound.max(1)
        };
        let (mut sure, mut edited_json) = (0, 0);
        for round in 0..6000 {
            let mut bytes = seeds[round % seeds.len()].clone();
            for _ in 0..1 + next(3) {
                let at = next(bytes.len());
                match next(3) {
                    0 => {
                        let end = (at + 1 + next(12)).min(bytes.len());
                        bytes.drain(at..end);
                    }
                    1 => {
                        let piece = alphabet[next(alphabet.len())];
                        bytes.splice(at..at, piece.iter().copied());
                    }
                    _ => {
                        let end = (at + 1 + next(40)).min(bytes.len());
                        let span = bytes[at..end].to_vec();
                        bytes.splice(end..end, span);
                    }
                }
            }
            if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok() {
                edited_json += 1;
                sure += usize::from(shortcut(&bytes));
            }
        }
        // The edits reach both answers often enough to mean something.
        assert!(
            edited_json > 500 && sure > 100,
            "{edited_json} JSON edits, {sure} sure"
        );
    }

    /// `BENCH_SHORTCUT=N cargo test --release --lib shortcut_cost -- --ignored --nocapture`:
    /// the shortcut against the full decode, natively, on the load test's
    /// Pod and on a Binding (which pays for the shortcut's try).
    #[test]
    #[ignore]
    fn shortcut_cost() {
        let runs: u32 = std::env::var("BENCH_SHORTCUT").map_or(10_000, |n| n.parse().unwrap());
        for file in ["pod-without-node-name.json", "binding.json"] {
            let payload = payload(&request_file(file), &json!({}));
            let start = std::time::Instant::now();
            for _ in 0..runs {
                std::hint::black_box(certain(std::hint::black_box(&payload)));
            }
            let shortcut = start.elapsed() / runs;
            let start = std::time::Instant::now();
            for _ in 0..runs {
                std::hint::black_box(crate::decide_decoded(&payload, &NoHost, &NoHost));
            }
            let full = start.elapsed() / runs;
            eprintln!("{file}: shortcut {shortcut:?}, full decode {full:?}");
        }
    }

    #[test]
    fn finds_the_first_quote_or_backslash() {
        for text in [
            &b"\""[..],
            b"abc\\",
            b"0123456\"",
            b"01234567\\",
            b"0123456789abcdef\"x\\",
        ] {
            let expected = text.iter().position(|b| *b == b'"' || *b == b'\\');
            assert_eq!(super::quote_or_backslash(text), expected, "{text:?}");
        }
        assert_eq!(super::quote_or_backslash(b"0123456789abcdefg"), None);
        // A byte just below either, and every position in a word.
        for at in 0..20 {
            let mut text = vec![b'!'; 24];
            text[at] = b'\\';
            text[at + 1] = b'"';
            assert_eq!(super::quote_or_backslash(&text), Some(at));
        }
    }

    #[test]
    fn nesting_deeper_than_serde_reads_is_decoded() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let payload =
            format!(r#"{{"request":{{"operation":"DELETE","options":{deep}}},"settings":{{}}}}"#);
        assert!(!shortcut(payload.as_bytes()));
    }
}
