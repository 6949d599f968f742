//! The host boundary for rules: reading any Kubernetes object or list, or
//! what a container registry says of an image, through Kubewarden's
//! capabilities, with the same lookup made once per evaluation.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use kubewarden_policy_sdk::host_capabilities::kubernetes::{
    CanIRequest, GetResourceRequest, ListAllResourcesRequest, ListResourcesByNamespaceRequest,
    ResourceAttributes, SubjectAccessReview,
};

use jmespath::Rcvar;
use serde::de::DeserializeSeed;

use crate::shared::reach::{Pruned, PrunedJson, Reach};
use crate::shared::resources::{ResourceKind, kind_of};

use crate::host::node_lookup::host_error_cause;

/// One read the rules need.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Read {
    Get {
        api_version: String,
        kind: String,
        namespace: Option<String>,
        name: String,
        /// Fields to ask the host for (Kubewarden 1.35 prunes the object to
        /// them); empty: the whole object.
        field_masks: Vec<String>,
    },
    List {
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
        field_selector: Option<String>,
    },
    /// What a registry says of an image (Kubewarden's `oci/v1/*`, answered
    /// with policy-server's own registry configuration and credentials).
    Image { reference: String, what: ImageRead },
    /// A SubjectAccessReview (Kubewarden's `kubernetes/can_i`): may `user`,
    /// in `groups`, do `verb` on the resource (any API version)? Empty
    /// strings are unset.
    CanI {
        user: String,
        groups: Vec<String>,
        group: String,
        resource: String,
        subresource: String,
        namespace: String,
        name: String,
        verb: String,
    },
}

/// What a read names of an object or a list: namespace (if any), the object's
/// name (a list without one), and what to ask the host for.
#[derive(Debug, Default)]
pub struct Selection {
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// For a Get: the fields to ask for (empty: the whole object).
    pub field_masks: Vec<String>,
    /// For a List.
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
}

impl Read {
    /// The one translation of a resource both languages name by API group
    /// and plural (a Kyverno `urlPath`, a CEL `resource.Get` or `List`) into
    /// a host read: the kind from the built-in table or the `resourceKinds`
    /// setting, a Get with a name, a List without. `Err` names what is not
    /// known; `Ok` also says whether the kind is namespaced.
    pub fn of_resource(
        api_version: &str,
        resource: &str,
        kinds: &[ResourceKind],
        selection: impl FnOnce(bool) -> Selection,
    ) -> Result<(Read, bool), String> {
        let group = api_version
            .rsplit_once('/')
            .map(|(group, _)| group)
            .unwrap_or_default();
        let Some((kind, namespaced)) = kind_of(group, resource, kinds) else {
            return Err(format!(
                "resource {resource:?} of group {group:?} is not known; name it in the `resourceKinds` setting"
            ));
        };
        let selection = selection(namespaced);
        let read = match selection.name {
            Some(name) => Read::Get {
                api_version: api_version.to_string(),
                kind,
                namespace: selection.namespace,
                name,
                field_masks: selection.field_masks,
            },
            None => Read::List {
                api_version: api_version.to_string(),
                kind,
                namespace: selection.namespace,
                label_selector: selection.label_selector,
                field_selector: selection.field_selector,
            },
        };
        Ok((read, namespaced))
    }
}

/// Which of the OCI capabilities an image read uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ImageRead {
    /// `oci/v1/manifest_digest`: `{"digest": ...}`, the digest the registry
    /// gives the reference (an image index's, for a multi-platform image).
    Digest,
    /// `oci/v1/oci_manifest_config`: `{"manifest", "digest", "config"}` of
    /// the image for the host's platform.
    ManifestAndConfig,
}

pub trait Cluster {
    /// The raw JSON answer (an object, or a list shaped `{"items": [...]}`),
    /// or the cause of the failure in words for a user.
    fn read(&self, read: &Read) -> Result<Vec<u8>, String>;
}

/// Reads through policy-server's `kubernetes/*` capabilities.
pub struct HostCluster;

impl Cluster for HostCluster {
    fn read(&self, read: &Read) -> Result<Vec<u8>, String> {
        let (operation, payload) = match read {
            Read::Image { reference, what } => {
                let operation = match what {
                    ImageRead::Digest => "v1/manifest_digest",
                    ImageRead::ManifestAndConfig => "v1/oci_manifest_config",
                };
                let payload = serde_json::to_vec(reference)
                    .map_err(|e| format!("cannot encode the host request: {e}"))?;
                return wapc_guest::host_call("kubewarden", "oci", operation, &payload)
                    .map_err(|e| host_error_cause(&e.to_string()));
            }
            Read::CanI {
                user,
                groups,
                group,
                resource,
                subresource,
                namespace,
                name,
                verb,
            } => {
                let set = |s: &String| (!s.is_empty()).then(|| s.clone());
                (
                    "can_i",
                    serde_json::to_vec(&CanIRequest {
                        subject_access_review: SubjectAccessReview {
                            groups: (!groups.is_empty()).then(|| groups.clone()),
                            resource_attributes: ResourceAttributes {
                                group: Some(group.clone()),
                                name: set(name),
                                namespace: set(namespace),
                                resource: resource.clone(),
                                subresource: set(subresource),
                                verb: verb.clone(),
                                version: Some("*".to_string()),
                            },
                            user: user.clone(),
                        },
                        disable_cache: false,
                    }),
                )
            }
            Read::Get {
                api_version,
                kind,
                namespace,
                name,
                field_masks,
            } => (
                "get_resource",
                serde_json::to_vec(&GetResourceRequest {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                    name: name.clone(),
                    namespace: namespace.clone(),
                    disable_cache: false,
                    field_masks: (!field_masks.is_empty())
                        .then(|| field_masks.iter().cloned().collect()),
                }),
            ),
            Read::List {
                api_version,
                kind,
                namespace: Some(namespace),
                label_selector,
                field_selector,
            } => (
                "list_resources_by_namespace",
                serde_json::to_vec(&ListResourcesByNamespaceRequest {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                    label_selector: label_selector.clone(),
                    field_selector: field_selector.clone(),
                    field_masks: None,
                }),
            ),
            Read::List {
                api_version,
                kind,
                namespace: None,
                label_selector,
                field_selector,
            } => (
                "list_resources_all",
                serde_json::to_vec(&ListAllResourcesRequest {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                    label_selector: label_selector.clone(),
                    field_selector: field_selector.clone(),
                    field_masks: None,
                }),
            ),
        };
        let payload = payload.map_err(|e| format!("cannot encode the host request: {e}"))?;
        wapc_guest::host_call("kubewarden", "kubernetes", operation, &payload)
            .map_err(|e| host_error_cause(&e.to_string()))
    }
}

/// Remembers every answer for the rest of the evaluation: however many rules
/// or entries ask for the same object, the host is asked once.
pub struct CachedCluster<'c> {
    inner: &'c dyn Cluster,
    /// A list, searched in order: an evaluation reads a few objects, and a
    /// map's first node holds room for eleven `Read`s (over a KiB of a fresh
    /// instance's heap, where each new 4 KiB page is a page fault).
    answers: RefCell<Vec<(Read, SharedAnswer)>>,
    /// The field masks every Namespace read of this evaluation uses
    /// ([`CachedCluster::with_namespace_masks`]; empty: the whole object).
    namespace_masks: &'static [&'static str],
}

/// One read's outcome, shared by everyone who asks for it.
type SharedAnswer = Rc<Result<Answer, String>>;

/// The host's bytes, and the whole of them as JMESPath data once something
/// needed all of it.
struct Answer {
    bytes: Vec<u8>,
    whole: OnceCell<Result<Rcvar, String>>,
}

impl Answer {
    fn whole(&self) -> Result<Rcvar, String> {
        self.whole
            .get_or_init(|| {
                serde_json::from_slice::<jmespath::Variable>(&self.bytes)
                    .map(Rcvar::new)
                    .map_err(not_json)
            })
            .clone()
    }
}

fn not_json(e: serde_json::Error) -> String {
    format!("the host's answer is not JSON: {e}")
}

impl<'c> CachedCluster<'c> {
    pub fn new(inner: &'c dyn Cluster) -> Self {
        CachedCluster {
            inner,
            answers: RefCell::default(),
            namespace_masks: &[],
        }
    }

    /// Reads Namespaces with `masks`, whoever asks: the union of what the
    /// settings' policies read of one (`PolicyPlan::namespace_masks`), so
    /// that a ClusterPolicy's and a CEL policy's selectors share one read.
    pub fn with_namespace_masks(mut self, masks: &'static [&'static str]) -> Self {
        self.namespace_masks = masks;
        self
    }

    /// The read of the Namespace `name`, the one path both languages read a
    /// Namespace through, with the masks the settings set.
    pub fn namespace_read(&self, name: &str) -> Read {
        Read::Get {
            api_version: "v1".to_string(),
            kind: "Namespace".to_string(),
            namespace: None,
            name: name.to_string(),
            field_masks: self
                .namespace_masks
                .iter()
                .map(|mask| mask.to_string())
                .collect(),
        }
    }

    fn answer(&self, read: &Read) -> SharedAnswer {
        if let Some((_, answer)) = self.answers.borrow().iter().find(|(r, _)| r == read) {
            return answer.clone();
        }
        let answer = Rc::new(self.inner.read(read).map(|bytes| Answer {
            bytes,
            whole: OnceCell::new(),
        }));
        self.answers
            .borrow_mut()
            .push((read.clone(), answer.clone()));
        answer
    }

    /// The answer as JMESPath data, decoded straight from the host's bytes.
    pub fn read_var(&self, read: &Read) -> Result<Rcvar, String> {
        match &*self.answer(read) {
            Ok(answer) => answer.whole(),
            Err(e) => Err(e.clone()),
        }
    }

    /// The answer as JSON, for the CEL policies.
    pub fn read_json(&self, read: &Read) -> Result<serde_json::Value, String> {
        match &*self.answer(read) {
            Ok(answer) => serde_json::from_slice(&answer.bytes).map_err(not_json),
            Err(e) => Err(e.clone()),
        }
    }

    /// The answer as JSON, keeping inside objects only what `reach` takes
    /// (CEL policies: see [`PrunedJson`]).
    pub fn read_json_reach(&self, read: &Read, reach: &Reach) -> Result<serde_json::Value, String> {
        match &*self.answer(read) {
            Ok(answer) => PrunedJson(reach)
                .deserialize(&mut serde_json::Deserializer::from_slice(&answer.bytes))
                .map_err(not_json),
            Err(e) => Err(e.clone()),
        }
    }

    /// The answer decoded only as far as `reach`: a Node is mostly status
    /// and labels no expression reads, and building them as JMESPath data
    /// is most of what reading it costs.
    pub fn read_reach(&self, read: &Read, reach: &Reach) -> Result<Rcvar, String> {
        match &*self.answer(read) {
            Ok(answer) => match answer.whole.get() {
                Some(whole) => whole.clone(),
                None => Pruned(reach)
                    .deserialize(&mut serde_json::Deserializer::from_slice(&answer.bytes))
                    .map(Rcvar::new)
                    .map_err(not_json),
            },
            Err(e) => Err(e.clone()),
        }
    }
}
