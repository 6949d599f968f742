//! The types the load-time check works with ([`crate::cel::check::type_check`]): CEL's
//! types as far as they are known, `Unknown` where they are not.

use std::fmt;

/// A type as far as it is known; `Unknown` where it is not.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ty {
    /// cel-go's `dyn`, as it would type the expression too: `object` and
    /// what is selected from it, `dyn(x)`.
    Dyn,
    /// A type this check has not worked out (a function without a signature
    /// here): it fits everything, and a literal's items are compared only
    /// where none is unknown.
    Unknown,
    /// A free type parameter in the signature tables (`optional.none()`):
    /// the check gives each a new [`Ty::Var`] where it meets one.
    Free,
    /// A type parameter of the check's
    /// [`crate::cel::check::type_parameters::Mapping`]: an empty literal's
    /// items, bound by the first overload that takes them.
    Var(u32),
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Optional(Box<Ty>),
    /// The `[index, value]` or `[key, value]` pairs a two-variable
    /// comprehension ranges over after its rewrite
    /// ([`crate::cel::program::comprehensions`]): a list whose items have two types.
    Pair(Box<Ty>, Box<Ty>),
    Timestamp,
    Duration,
    /// A type value (`int`, `type(x)`), of the type it denotes: cel-go's
    /// `type(int)`, so that `[int, string]` mixes two types.
    Type(Box<Ty>),
    /// `Object{...}` and its nested `Object.spec{...}`: its fields are the
    /// object's, not known here.
    Object,
    JsonPatch,
    /// `request`, `namespaceObject` and their parts.
    Declared(Declared),
    /// A value of a library's own type, by cel-go's name for it: Kubernetes'
    /// ([`QUANTITY`], [`URL`], [`IP`], [`CIDR`], [`SEMVER`], [`NAMED_FORMAT`],
    /// [`AUTHORIZER`] and its checks)
    /// and Kyverno's ([`IMAGE`], [`SERVICE_ACCOUNT`]).
    Opaque(&'static str),
    /// `google.protobuf.Any`, the values of the maps Kyverno's `resource`
    /// functions give: like `dyn`, except that a comprehension cannot range
    /// over it (cel-go refuses `resource.List(...).items.map(...)`).
    Any,
}

pub(in crate::cel) const QUANTITY: Ty = Ty::Opaque("kubernetes.Quantity");
pub(in crate::cel) const URL: Ty = Ty::Opaque("kubernetes.URL");
pub(in crate::cel) const IP: Ty = Ty::Opaque("net.IP");
pub(in crate::cel) const CIDR: Ty = Ty::Opaque("net.CIDR");
pub(in crate::cel) const SEMVER: Ty = Ty::Opaque("kubernetes.Semver");
pub(in crate::cel) const NAMED_FORMAT: Ty = Ty::Opaque("kubernetes.NamedFormat");
pub(in crate::cel) const AUTHORIZER: Ty = Ty::Opaque("kubernetes.authorization.Authorizer");
pub(in crate::cel) const PATH_CHECK: Ty = Ty::Opaque("kubernetes.authorization.PathCheck");
pub(in crate::cel) const GROUP_CHECK: Ty = Ty::Opaque("kubernetes.authorization.GroupCheck");
pub(in crate::cel) const RESOURCE_CHECK: Ty = Ty::Opaque("kubernetes.authorization.ResourceCheck");
pub(in crate::cel) const DECISION: Ty = Ty::Opaque("kubernetes.authorization.Decision");
pub(in crate::cel) const IMAGE: Ty = Ty::Opaque("kyverno.image");
pub(in crate::cel) const SERVICE_ACCOUNT: Ty = Ty::Opaque("user.ServiceAccount");

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::List(element) => write!(f, "list({element})"),
            Ty::Map(key, value) => write!(f, "map({key}, {value})"),
            Ty::Optional(value) => write!(f, "optional_type({value})"),
            Ty::Type(denoted) => write!(f, "type({denoted})"),
            Ty::Declared(declared) => write!(f, "kubernetes.{}", declared.name()),
            other => f.write_str(other.kind()),
        }
    }
}

impl Ty {
    pub(in crate::cel) fn list(element: Ty) -> Ty {
        Ty::List(Box::new(element))
    }

    /// The name of the type without its parameters, as messages say it.
    pub(in crate::cel) fn kind(&self) -> &'static str {
        match self {
            Ty::Dyn | Ty::Unknown | Ty::Free | Ty::Var(_) | Ty::Pair(..) => "dyn",
            Ty::Null => "null",
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::Uint => "uint",
            Ty::Double => "double",
            Ty::String => "string",
            Ty::Bytes => "bytes",
            Ty::List(_) => "list",
            Ty::Map(..) => "map",
            Ty::Optional(_) => "optional_type",
            Ty::Timestamp => "timestamp",
            Ty::Duration => "duration",
            Ty::Type(_) => "type",
            Ty::Object => "Object",
            Ty::JsonPatch => "JSONPatch",
            Ty::Declared(_) => "object",
            Ty::Opaque(name) => name,
            Ty::Any => "any",
        }
    }

    pub(in crate::cel) fn is_numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// Whether a value of this type may be of any type: `dyn`, unknown here,
    /// or Kyverno's `google.protobuf.Any`.
    /// The name cel-go's `TypeName()` gives a type, `None` where the type may be
    /// of any kind (`dyn`, or not known here) or its name is not known here.
    pub(in crate::cel) fn cel_go_name(&self) -> Option<String> {
        Some(match self {
            Ty::Null => "null_type".to_string(),
            Ty::Timestamp => "google.protobuf.Timestamp".to_string(),
            Ty::Duration => "google.protobuf.Duration".to_string(),
            Ty::Optional(_) => "optional_type".to_string(),
            // Kyverno declares its own request.
            Ty::Declared(Declared::Request { kyverno: true }) => return None,
            Ty::Declared(_) => self.to_string(),
            Ty::Bool
            | Ty::Int
            | Ty::Uint
            | Ty::Double
            | Ty::String
            | Ty::Bytes
            | Ty::List(_)
            | Ty::Map(..)
            | Ty::Type(_)
            | Ty::Opaque(_) => self.kind().to_string(),
            Ty::Dyn
            | Ty::Unknown
            | Ty::Free
            | Ty::Var(_)
            | Ty::Pair(..)
            | Ty::Any
            | Ty::Object
            | Ty::JsonPatch => {
                return None;
            }
        })
    }

    /// The type a type name (`int`, `list`) denotes.
    pub(in crate::cel) fn denoted_by(name: &str) -> Ty {
        match name {
            "bool" => Ty::Bool,
            "int" => Ty::Int,
            "uint" => Ty::Uint,
            "double" => Ty::Double,
            "string" => Ty::String,
            "bytes" => Ty::Bytes,
            "list" => Ty::list(Ty::Dyn),
            "map" => Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn)),
            "null_type" => Ty::Null,
            "type" => Ty::Type(Box::new(Ty::Dyn)),
            _ => Ty::Dyn,
        }
    }

    /// Whether a value of this type is or holds a type value (`int`,
    /// `[type(x)]`).
    pub(in crate::cel) fn holds_type_value(&self) -> bool {
        match self {
            Ty::Type(_) => true,
            Ty::List(item) | Ty::Optional(item) => item.holds_type_value(),
            Ty::Map(key, value) | Ty::Pair(key, value) => {
                key.holds_type_value() || value.holds_type_value()
            }
            _ => false,
        }
    }

    pub(in crate::cel) fn is_open(&self) -> bool {
        matches!(
            self,
            Ty::Dyn | Ty::Unknown | Ty::Free | Ty::Var(_) | Ty::Any | Ty::Pair(..)
        )
    }
}

/// The type a policy's variable whose expression has type `ty` is declared
/// with: as it is in Kyverno's kinds, [`kubernetes_variable`]'s otherwise.
pub(crate) fn declared_variable(ty: Ty, kyverno: bool) -> Ty {
    if kyverno { ty } else { kubernetes_variable(ty) }
}

/// The type Kubernetes gives a policy's variable of type `ty`: it declares
/// each variable by its checked type converted to its own declaration types
/// (`convertCelTypeToDeclType` in k8s.io/apiserver's CEL composition), which
/// keep the primitive types, timestamps, durations, null, lists and maps,
/// and make everything else `dyn` (an optional, a type, `namespaceObject`).
/// Kyverno declares the checked type as it is.
fn kubernetes_variable(ty: Ty) -> Ty {
    match ty {
        Ty::List(item) => Ty::list(kubernetes_variable(*item)),
        Ty::Map(key, value) => Ty::Map(
            Box::new(kubernetes_variable(*key)),
            Box::new(kubernetes_variable(*value)),
        ),
        Ty::Null
        | Ty::Bool
        | Ty::Int
        | Ty::Uint
        | Ty::Double
        | Ty::String
        | Ty::Bytes
        | Ty::Timestamp
        | Ty::Duration
        | Ty::Any
        | Ty::Unknown => ty,
        Ty::Dyn
        | Ty::Free
        | Ty::Var(_)
        | Ty::Optional(_)
        | Ty::Pair(..)
        | Ty::Type(_)
        | Ty::Object
        | Ty::JsonPatch
        | Ty::Declared(_)
        | Ty::Opaque(_) => Ty::Dyn,
    }
}

/// Whether a value of type `a` may stand where `b` is wanted: `dyn` (or a
/// type not known here) fits everything and everything fits `dyn`.
pub(in crate::cel) fn fits(a: &Ty, b: &Ty) -> bool {
    match (a, b) {
        _ if a.is_open() || b.is_open() => true,
        (Ty::List(a), Ty::List(b)) | (Ty::Optional(a), Ty::Optional(b)) => fits(a, b),
        // cel-go takes any type value for another (`type(1) == string` is
        // `false`); only a literal's items must have one type.
        (Ty::Type(_), Ty::Type(_)) => true,
        (Ty::Map(ka, va), Ty::Map(kb, vb)) => fits(ka, kb) && fits(va, vb),
        _ => a == b,
    }
}

/// The type of a value that is of type `a` or of type `b`: cel-go's most
/// general of two types that fit each other (`dyn` with anything is `dyn`);
/// an empty literal's items take the other's type.
pub(in crate::cel) fn join(a: Ty, b: Ty) -> Ty {
    match (a, b) {
        (a, b) if a == b => a,
        (Ty::Free | Ty::Var(_), other) | (other, Ty::Free | Ty::Var(_)) => other,
        (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
        (Ty::Dyn, _) | (_, Ty::Dyn) => Ty::Dyn,
        (Ty::List(a), Ty::List(b)) => Ty::list(join(*a, *b)),
        (Ty::Optional(a), Ty::Optional(b)) => Ty::Optional(Box::new(join(*a, *b))),
        (Ty::Type(a), Ty::Type(b)) => Ty::Type(Box::new(join(*a, *b))),
        (Ty::Map(ka, va), Ty::Map(kb, vb)) => {
            Ty::Map(Box::new(join(*ka, *kb)), Box::new(join(*va, *vb)))
        }
        _ => Ty::Unknown,
    }
}

/// The types Kubernetes declares for `request` and `namespaceObject`; their
/// fields are in [`crate::cel::check::request_types`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Declared {
    Request { kyverno: bool },
    GroupVersionKind,
    GroupVersionResource,
    UserInfo,
    Namespace,
    NamespaceMetadata,
    NamespaceSpec,
    NamespaceStatus,
    NamespaceCondition,
}

impl Declared {
    /// The type's name after `kubernetes.`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Declared::Request { .. } => "AdmissionRequest",
            Declared::GroupVersionKind => "GroupVersionKind",
            Declared::GroupVersionResource => "GroupVersionResource",
            Declared::UserInfo => "UserInfo",
            Declared::Namespace => "Namespace",
            Declared::NamespaceMetadata => "NamespaceMetadata",
            Declared::NamespaceSpec => "NamespaceSpec",
            Declared::NamespaceStatus => "NamespaceStatus",
            Declared::NamespaceCondition => "NamespaceCondition",
        }
    }
}

/// cel-go's message: `found no matching overload for '_+_' applied to
/// '(string, int)'`, a member call's receiver before a dot.
pub(in crate::cel) fn no_overload(name: &str, receiver: Option<&Ty>, args: &[Ty]) -> String {
    let args: Vec<String> = args.iter().map(Ty::to_string).collect();
    let receiver = receiver.map(|r| format!("{r}.")).unwrap_or_default();
    format!(
        "found no matching overload for '{name}' applied to '{receiver}({})'",
        args.join(", ")
    )
}
