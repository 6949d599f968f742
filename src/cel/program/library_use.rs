//! Which libraries an evaluation's environment is given, read from the
//! names in the expressions' trees ([`crate::cel::program::names`]): building an
//! environment is most of what a small policy costs, so only the libraries
//! an expression calls into are added ([`crate::cel::eval::environment`]).

use std::collections::BTreeSet;

use ::cel::IdedExpr;

use crate::cel::program::metering::Interpreter;

/// What a name is in an expression's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Identifier,
    /// A function called on a receiver (`x.lowerAscii()`, `math.abs(x)`).
    Member,
    /// A function called without one (`image(x)`).
    Global,
}

/// Declares [`Libraries`], one flag a library, with [`Libraries::every`]
/// and [`Libraries::union`] over the same list of fields.
macro_rules! libraries {
    ($($(#[$doc:meta])* $field:ident,)*) => {
        /// The libraries an environment is given. Building an environment is most
        /// of what a small policy costs per request (policy-server starts every
        /// evaluation afresh): the standard library alone is ~19 µs natively, the
        /// strings, lists and math extensions another ~45 µs. So each is added only
        /// when a policy's expressions name one of its functions.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Libraries {
            $($(#[$doc])* pub $field: bool,)*
        }

        impl Libraries {
            /// Every library: the environment load-time checks ask whether a
            /// function is declared (see [`crate::cel::check::type_check`]).
            pub fn every() -> Libraries {
                Libraries { $($field: true,)* }
            }

            /// Both sets of libraries (`|`, without branches: `||` puts 78 bytes
            /// more in the module).
            pub fn union(self, other: Libraries) -> Libraries {
                Libraries { $($field: self.$field | other.$field,)* }
            }
        }
    };
}

libraries! {
    strings,
    lists,
    math,
    jsonpatch,
    regex,
    resource,
    /// Kubernetes' lists library (`indexOf`, `lastIndexOf` on lists).
    kubernetes_lists,
    /// Kyverno's `image` library (see [`libraries::image`]).
    image,
    /// The `regex.` namespace (see [`libraries::regex`]).
    regex_namespace,
    /// Kyverno's `json`, `yaml` and `user` libraries (see [`libraries::data`]).
    json,
    yaml,
    user,
    /// Kubernetes' quantity and semver libraries (see [`libraries::quantity`],
    /// [`libraries::semver`]).
    quantity,
    semver,
    /// Kubernetes' `isSorted`, `sum`, `min`, `max`, and the optional
    /// library's `first` and `last` (see [`libraries::lists`]).
    list_functions,
    /// cel-go's sets extension (see [`libraries::lists`]).
    sets,
    /// Kubernetes' IP and CIDR libraries (see [`libraries::ip`]).
    ip,
    /// Kyverno's `imagedata` library (`image.GetMetadata`, see
    /// [`ImageDataLibrary`]).
    imagedata,
    /// What two-variable comprehensions call (see
    /// [`comprehensions`](crate::cel::program::comprehensions)).
    comprehensions,
    /// Kubernetes' `authorizer` (see [`libraries::authorizer`]).
    authorizer,
    /// Kyverno's `hash` library (see [`libraries::hash`]).
    hash,
    /// Kubernetes' URL and format libraries (see [`libraries::url`],
    /// [`libraries::format`]).
    url,
    format,
    /// Kyverno's `gzip` library (see [`libraries::gzip`]) and cel-go's
    /// `base64` encoders the `cel` crate has.
    gzip,
    base64,
    /// Timestamps, durations and Kyverno's `time` library (see
    /// [`libraries::time`]).
    time,
}

/// The functions of the crate's strings and lists extensions.
const STRINGS: &[&str] = &[
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "format",
    "quote",
];
const LISTS: &[&str] = &[
    "slice", "flatten", "distinct", "reverse", "sort", "sortBy", "range",
];

impl Libraries {
    /// Readies a parsed expression to run in an environment with these
    /// libraries: what cel-go's optimizer folds, `string(double)` as cel-go writes it, `format` as
    /// Kubernetes' and Kyverno's strings library writes it, and, where the
    /// policy uses time, the operators over timestamps and durations, which
    /// are opaque to the crate's own.
    pub fn prepare(self, expression: &mut IdedExpr) {
        let _ = self.prepare_counting(expression, false, Interpreter::default(), &BTreeSet::new());
    }

    /// [`Libraries::prepare`], and the expression counts its cost in cel-go's
    /// runtime cost model where it can come near the limit, or `always`, as
    /// `interpreter` counts it, the calls of `open_overloads` charged 1;
    /// otherwise gives the most it can cost.
    pub fn prepare_counting(
        self,
        expression: &mut IdedExpr,
        always: bool,
        interpreter: Interpreter,
        open_overloads: &BTreeSet<u64>,
    ) -> Option<u64> {
        crate::cel::program::optimizer::fold_empty_membership(expression);
        crate::cel::libraries::double_text::rewrite(expression);
        let renames = [
            self.strings
                .then_some(&crate::cel::libraries::string_format::RENAME),
            self.lists.then_some(&crate::cel::libraries::lists::REVERSE),
        ];
        let renames: Vec<_> = renames.into_iter().flatten().collect();
        crate::cel::libraries::rename_member_calls(expression, &renames);
        if self.time {
            crate::cel::libraries::time::rewrite_for_times(expression);
        }
        crate::cel::program::metering::meter(expression, always, interpreter, open_overloads)
    }

    /// Adds what one name of an expression's tree brings in: an identifier
    /// (`math`, `ip`), or a function called on a receiver or globally. A
    /// name in a string or a comment is not in the tree.
    pub fn note(&mut self, name: &str, role: Role) {
        let global = role == Role::Global;
        let function = role != Role::Identifier;
        match name {
            "math" => self.math = true,
            "jsonpatch" => self.jsonpatch = true,
            "matches" | "find" | "findAll" => self.regex = true,
            "resource" => self.resource = true,
            "indexOf" | "lastIndexOf" => self.kubernetes_lists = true,
            // `image` is also a container's field: only a global call counts.
            "parseImageReference" | "isImage" => self.image = true,
            "image" if global => self.image = true,
            "regex" => self.regex_namespace = true,
            "json" => self.json = true,
            "yaml" => self.yaml = true,
            "parseServiceAccount" => self.user = true,
            "quantity" | "isQuantity" => self.quantity = true,
            "semver" | "isSemver" => self.semver = true,
            "isSorted" | "sum" | "min" | "max" | "first" | "last" => self.list_functions = true,
            "sets" => self.sets = true,
            "ip" | "isIP" | "cidr" | "isCIDR" => self.ip = true,
            "GetMetadata" | "getMetadata" => self.imagedata = true,
            "authorizer" => self.authorizer = true,
            "hash" => self.hash = true,
            "sha1" | "sha256" | "md5" if global => self.hash = true,
            // `url` is a common field name, and `format` a strings function:
            // the URL library is a global call, the format one a namespace.
            "isURL" => self.url = true,
            "url" if global => self.url = true,
            "format" if !function => self.format = true,
            "gzip" => self.gzip = true,
            "base64" => self.base64 = true,
            _ => {}
        }
        self.strings |= STRINGS.contains(&name);
        self.lists |= LISTS.contains(&name);
        self.comprehensions |= function && crate::cel::program::comprehensions::named(name);
        self.time |= names_time(name);
    }
}

/// Whether a name brings in the time library (and with it the operator
/// rewrite of [`Libraries::prepare`]).
fn names_time(word: &str) -> bool {
    matches!(word, "timestamp" | "duration" | "time")
}
