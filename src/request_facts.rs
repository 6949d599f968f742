//! The facts of an admission request both languages match on (operation,
//! resource, kind, names, the user), decoded once per request.

use crate::admission::{AdmissionRequest, GroupVersionKind, GroupVersionResource, UserInfo};
use crate::shared::resources::{ResourceKind, kind_of};

/// What matching needs to know about a request, read once from its JSON
/// whichever language asks first.
#[derive(Debug, Default, Clone)]
pub struct RequestFacts {
    pub operation: String,
    pub group: String,
    pub version: String,
    /// The resource (`pods` for `pods/binding`).
    pub resource: String,
    /// The kind of the resource (the parent's kind for a subresource:
    /// `Pod` for `pods/binding`).
    pub kind: String,
    pub sub_resource: String,
    pub name: String,
    pub namespace: String,
    pub username: String,
    pub groups: Vec<String>,
}

impl RequestFacts {
    /// From the admission request, decoded once per evaluation for all rules.
    pub fn from_request(request: &AdmissionRequest, extra: &[ResourceKind]) -> RequestFacts {
        let resource: GroupVersionResource = request.field("resource");
        let sub_resource: String = request.field("subResource");
        let kind = if sub_resource.is_empty() {
            request.field::<GroupVersionKind>("kind").kind
        } else {
            kind_of(&resource.group, &resource.resource, extra)
                .map(|(k, _)| k)
                .unwrap_or_default()
        };
        let user: UserInfo = request.field("userInfo");
        RequestFacts {
            operation: request.field("operation"),
            group: resource.group,
            version: resource.version,
            resource: resource.resource,
            kind,
            sub_resource,
            name: request.field("name"),
            namespace: request.field("namespace"),
            username: user.username,
            groups: user.groups,
        }
    }

    /// The facts as a Pod policy sees a Pod controller's template under
    /// autogen (both languages): a core `v1` Pod, the request's operation,
    /// names and user.
    pub fn for_pod_template(&self) -> RequestFacts {
        RequestFacts {
            group: String::new(),
            version: "v1".to_string(),
            resource: "pods".to_string(),
            kind: "Pod".to_string(),
            ..self.clone()
        }
    }
}
