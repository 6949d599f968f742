//! Settings: the serde schema users write ([`schema`]), compiled at load
//! ([`compile`]) into the [`PolicyPlan`] the pipeline runs ([`plan`]).
//! Everything that can be wrong with settings is found at load time, with
//! the field path in the message.

pub mod compile;
mod documents;
pub mod plan;
pub mod schema;

pub use compile::{load, load_for_request, may_have_rules};
pub use plan::*;
pub use schema::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::autogen::Autogen;
    use crate::shared::policy_options::FailurePolicy;
    use crate::short_form::entry::{DEFAULT_LABELS, Destination, MAX_COPY_ENTRIES, PresetKeys};
    use crate::short_form::rule::{Naming, Source};

    fn load_str(s: &str) -> Result<PolicyPlan, String> {
        load(s.as_bytes())
    }

    #[test]
    fn empty_settings_copy_zone_and_region_labels_to_annotations() {
        for raw in ["{}", "", "null"] {
            let plan = load_str(raw).unwrap();
            let keys: Vec<_> = plan.copy.iter().map(|r| r.selector.as_str()).collect();
            assert_eq!(keys, DEFAULT_LABELS);
            assert!(
                plan.copy
                    .iter()
                    .all(|r| r.destination == Destination::Annotations
                        && r.source == Source::Label
                        && r.naming == Naming::Same)
            );
            assert_eq!(plan.failure_policy, FailurePolicy::Ignore);
        }
    }

    #[test]
    fn request_time_loading_builds_the_same_plan() {
        let raw = br#"{"copy":[
            {"label":"node.kubernetes.io/instance-type","rename":"example.com/instance-type","default":"unknown","to":"both"},
            {"annotation":"rack.example.com/*","replacePrefix":{"from":"rack.example.com/","to":"node.example.com/"}},
            {"label":"zone*","addPrefix":"node-"},{"label":"a?b"}]}"#;
        assert_eq!(load(raw).unwrap().copy, load_for_request(raw).unwrap().copy);
        assert_eq!(
            load(b"{}").unwrap().copy,
            load_for_request(b"{}").unwrap().copy
        );
        // Structure is still checked on every request.
        assert!(load_for_request(br#"{"copy":[{"label":"a/*","rename":"b"}]}"#).is_err());
    }

    #[test]
    fn kyverno_rules_and_huge_lists_are_refused_with_the_reason() {
        let msg = refused(
            r#"{"rules":[{"name":"x","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"validate":{}}]}"#,
        );
        assert!(
            msg.starts_with("settings.rules[0].validate: validate rules are not supported"),
            "{msg}"
        );
        let plan = load_str(r#"{"rules":[{"name":"x","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"mutate":{"patchStrategicMerge":{"metadata":{"labels":{"a":"b"}}}}}]}"#).unwrap();
        assert!(plan.copy.is_empty(), "rules alone: no built-in default");
        assert_eq!(plan.rules.len(), 1);
        let many: Vec<String> = (0..=MAX_COPY_ENTRIES)
            .map(|i| format!(r#"{{"label":"k{i}"}}"#))
            .collect();
        let msg = refused(&format!(r#"{{"copy":[{}]}}"#, many.join(",")));
        assert_eq!(
            msg,
            "settings.copy: 501 entries; at most 500 are allowed, so that one evaluation's work stays bounded"
        );
    }

    #[test]
    fn explicit_empty_list_copies_nothing() {
        assert!(load_str(r#"{"copy": []}"#).unwrap().copy.is_empty());
    }

    #[test]
    fn an_empty_rule_list_runs_nothing_instead_of_the_default() {
        for settings in [
            r#"{"rules": []}"#.to_string(),
            document("{}", "").replace(&format!("[{}]", pod_rule()), "[]"),
        ] {
            let plan = load_str(&settings).unwrap();
            assert!(plan.copy.is_empty() && plan.rules.is_empty(), "{settings}");
        }
        // With rules and no `copy`, still no default either.
        assert!(load_str(&document("{}", "")).unwrap().copy.is_empty());
    }

    #[test]
    fn copy_entries_written_as_strings_say_what_to_write() {
        let msg = refused(r#"{"copy": ["topology.kubernetes.io/zone"]}"#);
        assert_eq!(
            msg,
            "settings.copy[0]: invalid type: string \"topology.kubernetes.io/zone\", expected a copy entry, a map such as `{label: topology.kubernetes.io/zone}` or `{annotation: example.com/rack}`"
        );
    }

    #[test]
    fn other_policy_kinds_are_refused_by_kind() {
        let validating = r#"{"apiVersion":"policies.kyverno.io/v1","kind":"ValidatingPolicy","metadata":{"name":"v"},
            "spec":{"matchConstraints":{"resourceRules":[]},"validations":[]}}"#;
        let msg = refused(validating);
        assert!(
            msg.starts_with("settings.kind: ValidatingPolicy (policies.kyverno.io) validates; this policy mutates, and takes a Kyverno ClusterPolicy or Policy"),
            "{msg}"
        );
        let msg = refused(
            &validating
                .replace("\"ValidatingPolicy\"", "\"ValidatingAdmissionPolicy\"")
                .replace("policies.kyverno.io/v1", "admissionregistration.k8s.io/v1"),
        );
        assert!(
            msg.starts_with(
                "settings.kind: ValidatingAdmissionPolicy (admissionregistration.k8s.io) validates"
            ),
            "{msg}"
        );
        let msg = refused(&validating.replace("ValidatingPolicy", "GeneratingPolicy"));
        assert!(
            msg.starts_with(
                "settings.kind: GeneratingPolicy (policies.kyverno.io) generates resources"
            ),
            "{msg}"
        );
        let msg = refused(r#"{"apiVersion":"kyverno.io/v1","kind":"Pod"}"#);
        assert!(
            msg.starts_with("settings.kind: \"Pod\" is not a policy"),
            "{msg}"
        );
        let msg =
            refused(r#"{"apiVersion":"policies.kyverno.io/v1","kind":"ClusterPolicy","spec":{}}"#);
        assert_eq!(
            msg,
            "settings.apiVersion: \"policies.kyverno.io/v1\": a pasted Kyverno ClusterPolicy must be kyverno.io/v1 (or kyverno.io/v2beta1)"
        );
        assert!(!msg.contains("Some("), "{msg}");
        let msg = refused(r#"{"kind":"ClusterPolicy","spec":{}}"#);
        assert!(msg.starts_with("settings.apiVersion: missing"), "{msg}");
    }

    #[test]
    fn full_entry_parses() {
        let plan = load_str(
            r#"{"copy":[
                {"label":"node.kubernetes.io/instance-type","rename":"example.com/instance-type","default":"unknown","to":"both"},
                {"annotation":"rack.example.com/*","replacePrefix":{"from":"rack.example.com/","to":"node.example.com/"}},
                {"label":"zone*","addPrefix":"node-"}
             ],"failurePolicy":"Fail","onPresetKeys":"Reject"}"#,
        )
        .unwrap();
        assert_eq!(plan.copy.len(), 3);
        assert_eq!(plan.failure_policy, FailurePolicy::Fail);
        assert_eq!(plan.on_preset_keys, PresetKeys::Reject);
        assert_eq!(plan.copy[1].target.as_str(), "node.example.com/*");
        assert_eq!(plan.copy[2].naming.apply("zone-a"), "node-zone-a");
    }

    fn refused(raw: &str) -> String {
        load_str(raw).unwrap_err()
    }

    #[test]
    fn unknown_fields_name_their_path() {
        let msg = refused(r#"{"copy":[{"lable":"x"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].lable: unknown field `lable`"),
            "{msg}"
        );
        let msg = refused(r#"{"nodeLabels":[]}"#);
        assert!(msg.contains("unknown field `nodeLabels`"), "{msg}");
    }

    #[test]
    fn wrong_types_name_their_path() {
        let msg = refused(r#"{"copy":{"label":"x"}}"#);
        assert!(
            msg.starts_with("settings.copy: invalid type: map, expected a sequence"),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"label":"x","to":"pod"}]}"#);
        assert_eq!(
            msg,
            "settings.copy[0].to: unknown value \"pod\": expected `annotations`, `labels` or `both`"
        );
        let msg = refused(r#"{"failurePolicy":"fail"}"#);
        assert_eq!(
            msg,
            "settings.failurePolicy: unknown value \"fail\": expected `Ignore` or `Fail`"
        );
        let msg = refused(r#"{"onPresetKeys":true}"#);
        assert_eq!(
            msg,
            "settings.onPresetKeys: invalid type: boolean `true`, expected a string"
        );
        for not_a_map in ["[1]", "3", "\"copy\""] {
            assert_eq!(
                refused(not_a_map),
                "settings: must be a JSON object of setting names and values"
            );
        }
    }

    #[test]
    fn invalid_keys_and_globs() {
        let msg = refused(r#"{"copy":[{"label":"topology.kubernetes.io/[zone]"}]}"#);
        assert!(
            msg.starts_with(
                "settings.copy[0].label: \"topology.kubernetes.io/[zone]\" character '['"
            ),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"annotation":"Example.com/zone"}]}"#);
        assert!(
            msg.contains("settings.copy[0].annotation") && msg.contains("DNS subdomain"),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"label":"zone","rename":"bad key"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].rename: \"bad key\" is not a valid key"),
            "{msg}"
        );
    }

    #[test]
    fn contradictory_entries() {
        let msg = refused(r#"{"copy":[{"label":"a","annotation":"b"}]}"#);
        assert!(msg.contains("not both"), "{msg}");
        let msg = refused(r#"{"copy":[{"to":"labels"}]}"#);
        assert!(msg.contains("missing `label` or `annotation`"), "{msg}");
        let msg = refused(r#"{"copy":[{"label":"a/*","rename":"b"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].rename: cannot rename the keys of glob"),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"label":"a/*","default":"x"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].default: a default needs one exact key"),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"label":"a","rename":"b","addPrefix":"c"}]}"#);
        assert!(msg.contains("alternatives"), "{msg}");
        let msg = refused(
            r#"{"copy":[{"label":"a.io/*","replacePrefix":{"from":"b.io/","to":"c.io/"}}]}"#,
        );
        assert!(
            msg.starts_with("settings.copy[0].replacePrefix.from: \"b.io/\" is not a prefix"),
            "{msg}"
        );
        let msg =
            refused(r#"{"copy":[{"label":"a","rename":"z"},{"annotation":"b","rename":"z"}]}"#);
        assert!(msg.starts_with("settings.copy[1]: writes Pod annotation \"z\", which settings.copy[0] already writes"), "{msg}");
        // Same key to labels and to annotations is not a conflict.
        assert!(load_str(r#"{"copy":[{"label":"a","rename":"z","to":"labels"},{"annotation":"b","rename":"z"}]}"#).is_ok());
    }

    #[test]
    fn prefixes_that_make_every_key_invalid_are_refused() {
        let msg = refused(
            r#"{"copy":[{"label":"topology.kubernetes.io/*","addPrefix":"node.example.com/"}]}"#,
        );
        assert!(msg.starts_with("settings.copy[0].addPrefix: produces keys like \"node.example.com/topology.kubernetes.io/*\""), "{msg}");
        let msg = refused(
            r#"{"copy":[{"label":"a.io/*","replacePrefix":{"from":"a.io/","to":"Bad_Prefix/"}}]}"#,
        );
        assert!(
            msg.starts_with("settings.copy[0].replacePrefix.to:"),
            "{msg}"
        );
    }

    #[test]
    fn label_defaults_must_be_label_values() {
        let msg = refused(r#"{"copy":[{"label":"a","to":"labels","default":"not valid!"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].default: \"not valid!\" cannot be a label value"),
            "{msg}"
        );
        assert!(
            load_str(r#"{"copy":[{"label":"a","default":"any text is fine for annotations!"}]}"#)
                .is_ok()
        );
    }

    #[test]
    fn reserved_prefix_naming() {
        let plan = load_str(
            r#"{"copy":[{"label":"topology.kubernetes.io/*"},{"label":"*"},{"label":"*zone*"}]}"#,
        )
        .unwrap();
        assert!(plan.copy[0].names_prefix_of("topology.kubernetes.io/zone"));
        assert!(!plan.copy[1].names_prefix_of("topology.kubernetes.io/zone"));
        assert!(!plan.copy[2].names_prefix_of("topology.kubernetes.io/zone"));
    }

    fn pod_rule() -> &'static str {
        r#"{"name":"r","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"mutate":{"patchStrategicMerge":{"metadata":{"labels":{"a":"b"}}}}}"#
    }

    fn document(metadata: &str, spec_extra: &str) -> String {
        format!(
            r#"{{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{metadata},"spec":{{"background":false,{spec_extra}"rules":[{}]}}}}"#,
            pod_rule()
        )
    }

    #[test]
    fn a_whole_policy_document_is_settings() {
        let plan = load_str(&document(r#"{"name":"p","uid":"x"}"#, "")).unwrap();
        assert_eq!(plan.rules.len(), 1);
        assert!(
            plan.copy.is_empty(),
            "a pasted policy acts through its rules alone"
        );
        // Kyverno's default for a ClusterPolicy.
        assert_eq!(plan.failure_policy, FailurePolicy::Fail);
        assert_eq!(plan.rule_groups[0].autogen, Autogen::default());
        let plan = load_str(&document("{}", r#""failurePolicy":"Ignore","#)).unwrap();
        assert_eq!(plan.failure_policy, FailurePolicy::Ignore);
    }

    #[test]
    fn the_autogen_annotation_chooses_the_controllers() {
        let annotated = |value: &str| {
            document(
                &format!(
                    r#"{{"annotations":{{"pod-policies.kyverno.io/autogen-controllers":"{value}"}}}}"#
                ),
                "",
            )
        };
        assert!(
            load_str(&annotated("none")).unwrap().rule_groups[0]
                .autogen
                .controllers
                .is_empty()
        );
        assert_eq!(
            load_str(&annotated("Deployment, CronJob"))
                .unwrap()
                .rule_groups[0]
                .autogen
                .controllers,
            ["Deployment", "CronJob"]
        );
        let msg = refused(&annotated("Deployment,Pod"));
        assert!(msg.contains("\"Pod\" is not a Pod controller"), "{msg}");
        // A rule on other kinds turns autogen off for the whole policy, as in Kyverno.
        let mixed = r#"{"rules":[{"name":"a","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"mutate":{"patchStrategicMerge":{}}},{"name":"b","match":{"any":[{"resources":{"kinds":["Service"]}}]},"mutate":{"patchStrategicMerge":{}}}]}"#;
        assert!(
            load_str(mixed).unwrap().rule_groups[0]
                .autogen
                .controllers
                .is_empty()
        );
    }

    #[test]
    fn pasted_documents_are_checked() {
        let msg = refused(&document("{}", "").replace("kyverno.io/v1", "policies.kyverno.io/v1"));
        assert!(msg.starts_with("settings.apiVersion:"), "{msg}");
        // A ClusterPolicy's spec under another kind: read by that kind's schema.
        let msg = refused(&document("{}", "").replace("ClusterPolicy", "MutatingPolicy"));
        assert!(
            msg.starts_with(
                "settings.apiVersion: \"kyverno.io/v1\": a MutatingPolicy is policies.kyverno.io/v1"
            ),
            "{msg}"
        );
        let both = document("{}", "").replacen('{', &format!("{{\"rules\":[{}],", pod_rule()), 1);
        assert!(refused(&both).contains("alternatives"));
        let contradiction = document("{}", r#""failurePolicy":"Fail","#).replacen(
            '{',
            r#"{"failurePolicy":"Ignore","#,
            1,
        );
        assert!(refused(&contradiction).starts_with("settings.failurePolicy: contradicts"));
        assert!(refused(&document("{}", r#""applyRules":"One","#)).contains("applyRules"));
        assert!(refused(r#"{"metadata":{}}"#).starts_with("settings.metadata:"));
        assert!(refused(&document("{}", r#""typo":1,"#)).contains("settings.spec.typo"));
    }

    #[test]
    fn a_namespaced_policy_keeps_to_its_namespace() {
        let policy = |metadata: &str| document(metadata, "").replace("ClusterPolicy", "Policy");
        let plan = load_str(&policy(r#"{"name":"p","namespace":"team-a"}"#)).unwrap();
        assert_eq!(plan.rule_groups[0].namespace.as_deref(), Some("team-a"));
        let plan = load_str(&policy(r#"{"name":"p"}"#)).unwrap();
        assert_eq!(
            plan.rule_groups[0].namespace.as_deref(),
            Some("default"),
            "written without one, it lands in default as kubectl would put it"
        );
        let msg = refused(&policy(r#"{"namespace":"Team_A"}"#));
        assert!(
            msg.starts_with("settings.metadata.namespace: \"Team_A\" is not a namespace name"),
            "{msg}"
        );
        assert_eq!(
            load_str(&document("{}", "")).unwrap().rule_groups[0].namespace,
            None
        );
    }
}
