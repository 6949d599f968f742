//! The facts of an admission request both languages match on (operation,
//! resource, kind, names, the user), decoded once per request.

use std::cell::OnceCell;

use serde_json::value::RawValue;

use serde::Deserialize;

use crate::shared::json_fields::JsonFields;
use crate::shared::resources::{ResourceKind, kind_of};

/// The admission request, read field by field by classification and by the
/// rules.
pub type AdmissionRequest<'a> = JsonFields<'a>;

#[derive(Default, Deserialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Default, Deserialize)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub resource: String,
}

/// Who sent the request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

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
    /// `userInfo` as received, decoded by [`RequestFacts::user`] when a rule
    /// first matches on the user (CEL policies never do).
    pub(crate) user_info: Option<Box<RawValue>>,
    pub(crate) user: OnceCell<UserInfo>,
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
        RequestFacts {
            operation: request.field("operation"),
            group: resource.group,
            version: resource.version,
            resource: resource.resource,
            kind,
            sub_resource,
            name: request.field("name"),
            namespace: request.field("namespace"),
            user_info: request.raw("userInfo").map(|raw| raw.to_owned()),
            user: OnceCell::new(),
        }
    }

    /// The requesting user, decoded the first time it is asked for.
    pub fn user(&self) -> &UserInfo {
        self.user.get_or_init(|| {
            self.user_info
                .as_ref()
                .and_then(|raw| serde_json::from_str::<Option<UserInfo>>(raw.get()).ok())
                .flatten()
                .unwrap_or_default()
        })
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
