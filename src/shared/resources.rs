//! Resource names (plural, as in URLs and admission requests) to kinds, for
//! the core group and the common `apis/` groups. Other resources are named in
//! the `resourceKinds` setting.

/// `(group, plural, kind, namespaced)`.
const KNOWN: &[(&str, &str, &str, bool)] = &[
    ("", "bindings", "Binding", true),
    ("", "configmaps", "ConfigMap", true),
    ("", "endpoints", "Endpoints", true),
    ("", "events", "Event", true),
    ("", "limitranges", "LimitRange", true),
    ("", "namespaces", "Namespace", false),
    ("", "nodes", "Node", false),
    ("", "persistentvolumeclaims", "PersistentVolumeClaim", true),
    ("", "persistentvolumes", "PersistentVolume", false),
    ("", "pods", "Pod", true),
    ("", "podtemplates", "PodTemplate", true),
    ("", "replicationcontrollers", "ReplicationController", true),
    ("", "resourcequotas", "ResourceQuota", true),
    ("", "secrets", "Secret", true),
    ("", "serviceaccounts", "ServiceAccount", true),
    ("", "services", "Service", true),
    ("apps", "daemonsets", "DaemonSet", true),
    ("apps", "deployments", "Deployment", true),
    ("apps", "replicasets", "ReplicaSet", true),
    ("apps", "statefulsets", "StatefulSet", true),
    ("apps", "controllerrevisions", "ControllerRevision", true),
    ("batch", "jobs", "Job", true),
    ("batch", "cronjobs", "CronJob", true),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
    ),
    (
        "policy",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
    ),
    ("networking.k8s.io", "ingresses", "Ingress", true),
    ("networking.k8s.io", "ingressclasses", "IngressClass", false),
    (
        "networking.k8s.io",
        "networkpolicies",
        "NetworkPolicy",
        true,
    ),
    ("rbac.authorization.k8s.io", "roles", "Role", true),
    (
        "rbac.authorization.k8s.io",
        "rolebindings",
        "RoleBinding",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "clusterroles",
        "ClusterRole",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
    ),
    ("storage.k8s.io", "storageclasses", "StorageClass", false),
    ("storage.k8s.io", "csidrivers", "CSIDriver", false),
    ("storage.k8s.io", "csinodes", "CSINode", false),
    (
        "storage.k8s.io",
        "volumeattachments",
        "VolumeAttachment",
        false,
    ),
    (
        "scheduling.k8s.io",
        "priorityclasses",
        "PriorityClass",
        false,
    ),
    ("coordination.k8s.io", "leases", "Lease", true),
    ("discovery.k8s.io", "endpointslices", "EndpointSlice", true),
    ("node.k8s.io", "runtimeclasses", "RuntimeClass", false),
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
    ),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        false,
    ),
];

/// A resource a user names in the `resourceKinds` setting.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceKind {
    pub group: String,
    pub resource: String,
    pub kind: String,
    pub namespaced: bool,
}

/// The kind of a resource, and whether it is namespaced.
pub fn kind_of(group: &str, plural: &str, extra: &[ResourceKind]) -> Option<(String, bool)> {
    KNOWN
        .iter()
        .find(|(g, p, _, _)| *g == group && *p == plural)
        .map(|(_, _, kind, namespaced)| (kind.to_string(), *namespaced))
        .or_else(|| {
            extra
                .iter()
                .find(|r| r.group == group && r.resource == plural)
                .map(|r| (r.kind.clone(), r.namespaced))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_common_groups_resolve() {
        assert_eq!(kind_of("", "nodes", &[]), Some(("Node".to_string(), false)));
        assert_eq!(
            kind_of("apps", "deployments", &[]),
            Some(("Deployment".to_string(), true))
        );
        assert_eq!(kind_of("example.com", "widgets", &[]), None);
        let extra = [ResourceKind {
            group: "example.com".into(),
            resource: "widgets".into(),
            kind: "Widget".into(),
            namespaced: true,
        }];
        assert_eq!(
            kind_of("example.com", "widgets", &extra),
            Some(("Widget".to_string(), true))
        );
    }
}
