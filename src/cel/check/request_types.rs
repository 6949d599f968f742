//! The types Kubernetes declares for `request` (`kubernetes.AdmissionRequest`)
//! and `namespaceObject` (`kubernetes.Namespace`, the fields it keeps of a
//! Namespace), which its checker, and Kyverno's, use to refuse a field that
//! is not there: `request.operaton` is `undefined field 'operaton'` when the
//! policy is created. Kyverno's request also has `object` and `oldObject`.
//! Timestamps are `dyn` here: the evaluator reads them as the text the
//! request carries.

use crate::cel::check::types::{Declared, Ty};

impl Declared {
    /// The type of `field`; `None` when the type has no such field.
    pub(crate) fn field(self, field: &str) -> Option<Ty> {
        use Declared::*;
        let strings = || Ty::List(Box::new(Ty::String));
        let string_map = || Ty::Map(Box::new(Ty::String), Box::new(Ty::String));
        Some(match (self, field) {
            (Request { .. }, "kind" | "requestKind") => Ty::Declared(GroupVersionKind),
            (Request { .. }, "resource" | "requestResource") => Ty::Declared(GroupVersionResource),
            (
                Request { .. },
                "subResource" | "requestSubResource" | "name" | "namespace" | "operation",
            ) => Ty::String,
            (Request { .. }, "userInfo") => Ty::Declared(UserInfo),
            (Request { .. }, "dryRun") => Ty::Bool,
            (Request { .. }, "options") => Ty::Dyn,
            (Request { kyverno: true }, "object" | "oldObject") => Ty::Dyn,
            (GroupVersionKind, "group" | "version" | "kind") => Ty::String,
            (GroupVersionResource, "group" | "version" | "resource") => Ty::String,
            (UserInfo, "username" | "uid") => Ty::String,
            (UserInfo, "groups") => strings(),
            (UserInfo, "extra") => Ty::Map(Box::new(Ty::String), Box::new(strings())),
            (Namespace, "metadata") => Ty::Declared(NamespaceMetadata),
            (Namespace, "spec") => Ty::Declared(NamespaceSpec),
            (Namespace, "status") => Ty::Declared(NamespaceStatus),
            (
                NamespaceMetadata,
                "name" | "generateName" | "namespace" | "UID" | "resourceVersion",
            ) => Ty::String,
            (NamespaceMetadata, "labels" | "annotations") => string_map(),
            (NamespaceMetadata, "creationTimestamp" | "deletionTimestamp") => Ty::Dyn,
            (NamespaceMetadata, "deletionGracePeriodSeconds" | "generation") => Ty::Int,
            (NamespaceMetadata | NamespaceSpec, "finalizers") => strings(),
            (NamespaceStatus, "conditions") => Ty::List(Box::new(Ty::Declared(NamespaceCondition))),
            (NamespaceStatus, "phase") => Ty::String,
            (NamespaceCondition, "status" | "type" | "message" | "reason") => Ty::String,
            (NamespaceCondition, "lastTransitionTime") => Ty::Dyn,
            _ => return None,
        })
    }
}
