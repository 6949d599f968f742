//! What one policy's evaluation reads of the cluster through the host: the
//! request's Namespace, `resource.Get` and `resource.List` answers,
//! `image.GetMetadata` answers and `authorizer` decisions. Each is read once,
//! all of them count against one bound, and a failed read is kept as the
//! call's answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::cel::eval::request::CelRequest;
use crate::cel::libraries::authorizer;
use crate::cel::libraries::host_reads::{self, ImageDataLibrary, ResourceCall, ResourceLibrary};
use crate::cel::libraries::values::from_json;
use crate::shared::reach::Reach;

/// At most this many host reads per policy and request.
const MAX_READS: usize = 16;

/// What `resource.Get` reads of the objects it fetches, worked out from the
/// policy's expressions: host field masks (none: whole objects) and the
/// field paths answers are decoded to (`None`: whole).
pub(in crate::cel) struct ResourceReach {
    pub masks: Vec<String>,
    pub paths: Option<Vec<Vec<String>>>,
}

/// The libraries an expression run by the `cel` crate reads the host
/// through, holding the answers read so far and recording what else it
/// wanted.
pub(in crate::cel) struct HostLibraries {
    pub resource: ResourceLibrary,
    pub images: Option<ImageDataLibrary>,
    pub checks: Option<Arc<authorizer::Answers>>,
}

/// The reads one evaluation made, and their answers.
#[derive(Default)]
pub(in crate::cel) struct ClusterReads {
    answers: Vec<(ResourceCall, Result<Value, String>)>,
    /// `image.GetMetadata` answers, by reference.
    images: BTreeMap<String, Result<Value, String>>,
    /// `authorizer` decisions, by check.
    checks: BTreeMap<authorizer::Check, authorizer::Decision>,
    namespace: Option<Result<Value, String>>,
}

/// What a run of the crate asked the host for.
pub(in crate::cel) struct Wanted {
    calls: Vec<ResourceCall>,
    images: Vec<String>,
    checks: Vec<authorizer::Check>,
}

impl Wanted {
    pub(in crate::cel) fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.images.is_empty() && self.checks.is_empty()
    }

    /// Whether it asked for `resource.Get` or `resource.List` answers.
    pub(in crate::cel) fn reads_resources(&self) -> bool {
        !self.calls.is_empty()
    }
}

impl HostLibraries {
    /// What the run asked for, taken from the libraries.
    pub(in crate::cel) fn wanted(&self) -> Wanted {
        Wanted {
            calls: take_wanted(&self.resource.wanted),
            images: self
                .images
                .as_ref()
                .map(|images| take_wanted(&images.wanted))
                .unwrap_or_default(),
            checks: self
                .checks
                .as_ref()
                .map(|checks| take_wanted(&checks.wanted))
                .unwrap_or_default(),
        }
    }
}

impl ClusterReads {
    /// The request's Namespace, read once.
    pub(in crate::cel) fn namespace(&mut self, request: &CelRequest) -> Result<Value, String> {
        if let Some(namespace) = &self.namespace {
            return namespace.clone();
        }
        let name = &request.facts.namespace;
        let namespace = if name.is_empty() {
            Ok(Value::Null)
        } else {
            // Whole, as a plan with CEL policies asks for it
            // (`PolicyPlan::namespace_masks`): `namespaceObject` may read any of it.
            let cluster = request.cluster;
            cluster
                .read_json(&cluster.namespace_read(name))
                .map_err(|why| format!("cannot read Namespace {name:?}: {why}"))
        };
        self.namespace = Some(namespace.clone());
        namespace
    }

    /// `Err` when one more host read would pass the bound: resource reads,
    /// image reads and authorizer checks count together.
    fn within_bound(&self, reads: &str) -> Result<(), String> {
        if self.answers.len() + self.images.len() + self.checks.len() >= MAX_READS {
            return Err(format!("more than {MAX_READS} {reads} in one evaluation"));
        }
        Ok(())
    }

    /// The host's answer to `call`, read once; fetched objects are read as
    /// far as `reach` says (`None`: whole).
    pub(in crate::cel) fn resource(
        &mut self,
        call: ResourceCall,
        reach: Option<&ResourceReach>,
        request: &CelRequest,
    ) -> Result<Value, String> {
        if let Some((_, answer)) = self.answers.iter().find(|(c, _)| *c == call) {
            return answer.clone();
        }
        self.within_bound("resource reads")?;
        let decode_to = reach.and_then(|reach| reach.paths.as_ref()).map(|paths| {
            let mut decode_to = Reach::Fields(Vec::new());
            for path in paths {
                decode_to.take(path.iter().map(String::as_str));
            }
            decode_to
        });
        let answer = host_reads::read(
            &call,
            reach.map_or(&[][..], |reach| &reach.masks),
            decode_to.as_ref(),
            request.kinds,
            request.cluster,
        );
        self.answers.push((call, answer.clone()));
        answer
    }

    /// The libraries for one run of the crate, with the answers so far;
    /// `images` and `checks` only for a policy that calls them.
    pub(in crate::cel) fn libraries(&self, images: bool, checks: bool) -> HostLibraries {
        let answers = self
            .answers
            .iter()
            .map(|(call, answer)| {
                (
                    call.clone(),
                    answer.as_ref().map(from_json).map_err(Clone::clone),
                )
            })
            .collect();
        HostLibraries {
            resource: ResourceLibrary {
                answers: Arc::new(answers),
                wanted: Arc::new(Mutex::new(Vec::new())),
            },
            images: images.then(|| ImageDataLibrary {
                answers: Arc::new(
                    self.images
                        .iter()
                        .map(|(image, answer)| {
                            (
                                image.clone(),
                                answer.as_ref().map(from_json).map_err(Clone::clone),
                            )
                        })
                        .collect(),
                ),
                wanted: Arc::new(Mutex::new(Vec::new())),
            }),
            checks: checks.then(|| {
                Arc::new(authorizer::Answers {
                    decisions: self.checks.clone(),
                    wanted: Mutex::default(),
                })
            }),
        }
    }

    /// Makes the reads a run of the crate asked for; resource reads as far
    /// as `reach` says. A failed read is kept as its call's answer; a read not made
    /// (too many) is the error.
    pub(in crate::cel) fn serve(
        &mut self,
        wanted: Wanted,
        reach: Option<&ResourceReach>,
        request: &CelRequest,
    ) -> Result<(), String> {
        for check in wanted.checks {
            self.within_bound("host reads")?;
            let decision = authorizer::read(&check, request.cluster);
            self.checks.insert(check, decision);
        }
        for image in wanted.images {
            self.within_bound("resource and image reads")?;
            let answer = crate::host::image_registry::image_metadata(&image, request.cluster);
            self.images.insert(image, answer);
        }
        for call in wanted.calls {
            if let Err(why) = self.resource(call.clone(), reach, request)
                && !self.answers.iter().any(|(c, _)| *c == call)
            {
                return Err(why);
            }
        }
        Ok(())
    }
}

/// What a library recorded as wanted from the host, taken (none when its
/// lock was poisoned, which a panic-free guest never does).
fn take_wanted<T: Default>(wanted: &Mutex<T>) -> T {
    wanted
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default()
}
