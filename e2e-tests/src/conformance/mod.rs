//! Runs Kyverno CLI tests (`kyverno-test.yaml`, `cli.kyverno.io/v1alpha1`
//! `Test`) through the policy: every mutate result of a `kyverno.io`
//! ClusterPolicy/Policy, with the policy document as the settings, as
//! Kyverno's CLI does (all policies of a test applied in file order, each on
//! the previous one's output). Values files answer the host calls the rules
//! make (Namespaces for `namespaceSelector`, ConfigMaps for `configMap`
//! context entries).

mod cluster;
mod compare;
mod documents;
mod kwctl_session;
mod run;
mod test_file;

pub use cluster::{Exchange, TestCluster};
pub use compare::{compare, first_difference, tidy};
pub use documents::{
    CLUSTER_SCOPED, create_request, find_files_named, find_tests, is_namespaced_policy,
    is_supported_policy, kind_of, name_of, namespace_of, read_documents, subresource_request,
    with_default_namespace,
};
pub use kwctl_session::session_yaml;
pub use run::{Outcome, ResultLine, Step, StepCheck, run_test};
