#!/usr/bin/env bats
# The e2e cases of e2e-tests/cases.json through real kwctl, the ecosystem's
# usual e2e. The wasm host (cargo test -p policy-host) runs the same cases;
# packaging.rs checks that every case there has a test here.
#
# Needs: kwctl, bats, jq, and annotated-policy.wasm (make annotated-policy.wasm).
# kwctl exits 0 even when the policy rejects: every check reads the response.
# A case that names contextAwareResources runs as a ClusterAdmissionPolicy
# manifest granting exactly those, as a user would deploy it; kwctl (1.35)
# grants host access to nothing else. Other cases get the module's metadata.

bats_require_minimum_version 1.5.0

setup() {
  cd "$BATS_TEST_DIRNAME/.."
  # kwctl appends a backtrace to replayed host errors when this is set.
  export RUST_BACKTRACE=0
}

# The ClusterAdmissionPolicy a user would apply for this case, on stdout.
manifest() {
  local case=$1
  jq -n --argjson c "$case" --arg wasm "file://$PWD/annotated-policy.wasm" '{
    apiVersion: "policies.kubewarden.io/v1",
    kind: "ClusterAdmissionPolicy",
    metadata: {name: "node-metadata"},
    spec: {
      module: $wasm,
      mutating: true,
      rules: [{apiGroups: [""], apiVersions: ["v1"], resources: ["pods/binding", "pods"], operations: ["CREATE"]}],
      settings: $c.settings,
      contextAwareResources: $c.contextAwareResources
    }
  }'
}

run_case() {
  local case settings request session expected
  case=$(jq -c --arg n "$1" '.[] | select(.name == $n)' e2e-tests/cases.json)
  [ -n "$case" ] || { echo "no case named $1 in e2e-tests/cases.json"; return 1; }
  settings=$(jq -c .settings <<<"$case")
  request=$(jq -r .request <<<"$case")
  session=$(jq -r .session <<<"$case")

  if jq -e '.expect.settings_invalid' <<<"$case" >/dev/null; then
    run kwctl run --settings-json "$settings" --request-path "$request" annotated-policy.wasm
    expected=$(jq -r .expect.settings_invalid <<<"$case")
    [ "$status" -ne 0 ]
    [[ "$output" == *"$expected"* ]]
    return
  fi

  local policy=(--settings-json "$settings" annotated-policy.wasm)
  if jq -e 'has("contextAwareResources")' <<<"$case" >/dev/null; then
    manifest "$case" >"$BATS_TEST_TMPDIR/policy.yaml"
    policy=("$BATS_TEST_TMPDIR/policy.yaml")
  fi
  run --separate-stderr kwctl run --allow-context-aware \
    --replay-host-capabilities-interactions "$session" \
    --request-path "$request" "${policy[@]}"
  [ "$status" -eq 0 ]
  local response
  response=$(tail -n 1 <<<"$output")
  [ "$(jq .allowed <<<"$response")" = "$(jq .expect.accepted <<<"$case")" ]

  local got_patch want_patch
  got_patch=$(jq -r '.patch // empty' <<<"$response" | base64 -d | jq -cS . || true)
  want_patch=$(jq -cS '.expect.patch // empty' <<<"$case")
  [ "$got_patch" = "$want_patch" ]

  [ "$(jq -c '.status.message // null' <<<"$response")" = "$(jq -c '.expect.message // null' <<<"$case")" ]
  [ "$(jq -c '.warnings // []' <<<"$response")" = "$(jq -c '.expect.warnings // []' <<<"$case")" ]

  # What the policy logged while its settings loaded: kwctl writes it to
  # stderr, as policy-server writes it to its log.
  local logged
  logged=$(sed 's/\x1b\[[0-9;]*m//g' <<<"$stderr" | grep -o 'WARN .*policy_log.*' | grep -o 'node-metadata-policy: .*' | sed 's/ data={.*}$//' || true)
  [ "$logged" = "$(jq -r '.expect.settings_logged // [] | .[] | sub("^WARN "; "")' <<<"$case")" ]
}

@test "default_settings_binding: empty settings: zone and region labels become annotations on the Binding" {
  run_case default_settings_binding
}

@test "globs_binding: globs over Node labels and annotations" {
  run_case globs_binding
}

@test "rename_prefix_and_default_binding: rename an exact key, replace a glob's prefix, default for a missing key" {
  run_case rename_prefix_and_default_binding
}

@test "labels_opt_in_binding: labels only when asked (they reach the Pod with PodTopologyLabelsAdmission)" {
  run_case labels_opt_in_binding
}

@test "placed_pod_default_settings: a Pod created with spec.nodeName is mutated itself" {
  run_case placed_pod_default_settings
}

@test "placed_pod_labels: labels on a placed Pod work on every Kubernetes version" {
  run_case placed_pod_labels
}

@test "placed_pod_spoofed_keys_overwritten: keys the creator pre-set are overwritten with the Node's values" {
  run_case placed_pod_spoofed_keys_overwritten
}

@test "placed_pod_spoofed_keys_rejected: onPresetKeys: Reject refuses Pods that lie about their Node" {
  run_case placed_pod_spoofed_keys_rejected
}

@test "unplaced_pod_no_host_call: a Pod without spec.nodeName is accepted unchanged, the Node is not read" {
  run_case unplaced_pod_no_host_call
}

@test "node_missing_ignore: failurePolicy Ignore (default): accepted unchanged with a warning" {
  run_case node_missing_ignore
}

@test "node_missing_fail: failurePolicy Fail: rejected with the cause" {
  run_case node_missing_fail
}

@test "node_access_not_granted_ignore: a policy whose contextAwareResources do not list Node: accepted unchanged with the host's refusal as a warning" {
  run_case node_access_not_granted_ignore
}

@test "non_binding_request: other kinds pass unchanged without a host call" {
  run_case non_binding_request
}

@test "invalid_settings_unknown_field: typos are refused at load time with the field path" {
  run_case invalid_settings_unknown_field
}

@test "invalid_settings_glob: invalid globs are refused" {
  run_case invalid_settings_glob
}

@test "invalid_settings_contradiction: renaming a glob's keys to one key is contradictory" {
  run_case invalid_settings_contradiction
}

@test "invalid_settings_wrong_type: wrong types name the field" {
  run_case invalid_settings_wrong_type
}

@test "kyverno_mutate_pod_binding: Kyverno's mutate-pod-binding sample, spec.rules verbatim" {
  run_case kyverno_mutate_pod_binding
}

@test "kyverno_mutate_pod_binding_node_without_zone: the sample's || 'empty' fallback" {
  run_case kyverno_mutate_pod_binding_node_without_zone
}

@test "kyverno_namespaced_policy_in_its_namespace: a pasted namespaced Policy applies to Bindings in its namespace" {
  run_case kyverno_namespaced_policy_in_its_namespace
}

@test "kyverno_namespaced_policy_elsewhere: a pasted namespaced Policy leaves other namespaces alone, without a host call" {
  run_case kyverno_namespaced_policy_elsewhere
}

@test "kyverno_rules_do_not_touch_pods: Pod/binding does not match a Pod" {
  run_case kyverno_rules_do_not_touch_pods
}

@test "kyverno_mutate_existing_refused: mutate.targets on anything but the Pod being bound needs a background controller" {
  run_case kyverno_mutate_existing_refused
}

@test "kyverno_add_node_labels_pod: Kyverno's add-node-labels-pod sample runs as a mutation of the Binding" {
  run_case kyverno_add_node_labels_pod
}

@test "kyverno_host_apicall_list_with_label_selector: an apiCall on a collection becomes list_resources_by_namespace with the labelSelector; items come back as {items}" {
  run_case kyverno_host_apicall_list_with_label_selector
}

@test "kyverno_host_configmap_and_node: configMap context read through the host, looked up by the Node's zone" {
  run_case kyverno_host_configmap_and_node
}

@test "kyverno_host_namespace_selector: namespaceSelector reads the Namespace through the host" {
  run_case kyverno_host_namespace_selector
}

@test "kyverno_host_cluster_roles: clusterRoles in match, worked out from the RBAC bindings listed through the host" {
  run_case kyverno_host_cluster_roles
}

@test "kyverno_host_roles_not_held: a requester without the Role is not matched" {
  run_case kyverno_host_roles_not_held
}

@test "kyverno_image_mirror_at_sign: {{@}} with regex_replace_all, and nested foreach" {
  run_case kyverno_image_mirror_at_sign
}

@test "kyverno_conditional_anchor_false_writes_nothing: a conditional anchor requiring \"true\" leaves a Deployment annotated \"false\" alone" {
  run_case kyverno_conditional_anchor_false_writes_nothing
}

@test "kyverno_conditional_anchor_true_injects: the same policy injects the sidecar where the annotation is \"true\"" {
  run_case kyverno_conditional_anchor_true_injects
}

@test "kyverno_global_anchor_in_list_adds_no_volume: a global anchor inside a volumes element adds no nameless volume" {
  run_case kyverno_global_anchor_in_list_adds_no_volume
}

@test "kyverno_global_anchor_not_held_skips_the_rule: the same rule on a Pod without a hostPath volume writes nothing" {
  run_case kyverno_global_anchor_not_held_skips_the_rule
}

@test "kyverno_autogen_deployment_template: a Pod rule also mutates a Deployment's Pod template (autogen)" {
  run_case kyverno_autogen_deployment_template
}

@test "kyverno_autogen_none: autogen-controllers none leaves the Deployment alone" {
  run_case kyverno_autogen_none
}

@test "cel_autogen_deployment_template: a MutatingPolicy on Pods mutates a Deployment's template through Kyverno's rewrite" {
  run_case cel_autogen_deployment_template
}

@test "cel_autogen_nested_metadata_fails: Kyverno's rewrite keeps a nested Object.metadata name, and the Deployment is refused" {
  run_case cel_autogen_nested_metadata_fails
}

@test "recipe_pod_name_at_binding: the Pod's own name as an annotation and a label at binding time" {
  run_case recipe_pod_name_at_binding
}

@test "recipe_node_pool_labels: a new Node gets its pool's labels from a ConfigMap, reserved keys stay out" {
  run_case recipe_node_pool_labels
}

@test "recipe_placed_pod_instance_rack_team: a placed Pod gets instance type, rack and team as labels" {
  run_case recipe_placed_pod_instance_rack_team
}

@test "strategic_merge_patch_as_string_refused: a patchStrategicMerge pasted as a YAML string is refused at load, naming the field (it used to replace the whole Binding with the string)" {
  run_case strategic_merge_patch_as_string_refused
}

@test "rule_replacing_the_binding_rejected: a JSON Patch that would replace the whole Binding with a string is refused; failurePolicy Fail rejects naming the rule" {
  run_case rule_replacing_the_binding_rejected
}

@test "rule_removing_the_binding_target_ignored: a rule that would remove the Binding's target is not applied; failurePolicy Ignore accepts the Binding unchanged with a warning" {
  run_case rule_removing_the_binding_target_ignored
}

@test "rule_renaming_a_placed_pod_rejected: a rule that would rename a Pod created with spec.nodeName is refused; failurePolicy Fail rejects naming the rule" {
  run_case rule_renaming_a_placed_pod_rejected
}

@test "validating_policy_refused_by_kind: a Kyverno ValidatingPolicy pasted as settings is refused by its kind, not by its first field" {
  run_case validating_policy_refused_by_kind
}

@test "glob_meeting_only_reserved_keys_warns: a glob that meets only keys under kubernetes.io/ copies nothing and says so, at load and at admission" {
  run_case glob_meeting_only_reserved_keys_warns
}

@test "empty_rule_list_changes_nothing: rules: [] means no rules, not the zone/region default; the policy logs at load that it changes nothing" {
  run_case empty_rule_list_changes_nothing
}

@test "several_policies_in_order: policies: Kyverno's mutate-pod-binding ClusterPolicy, then a namespaced Policy that reads what it wrote" {
  run_case several_policies_in_order
}

@test "cel_kyverno_binding_test: Kyverno's CLI test mutate-pod-binding-subresource: a MutatingPolicy annotating the Binding (ApplyConfiguration)" {
  run_case cel_kyverno_binding_test
}

@test "cel_time_library: timestamps, durations and Kyverno's time library in a MutatingPolicy: time.now() from the clock the host gives, truncate, toCron, arithmetic, written as RFC 3339 and by '%s'.format" {
  run_case cel_time_library
}

@test "kyverno_time_now: a pasted ClusterPolicy reading the clock: time_now_utc() and time_now() as RFC 3339 in UTC from the clock the host gives, time_since with an empty end time counting to now" {
  run_case kyverno_time_now
}

@test "cel_zone_and_region_from_node: the project's job as a MutatingPolicy: resource.Get reads the Node (its labels only), zone and region onto the Binding" {
  run_case cel_zone_and_region_from_node
}

@test "cel_node_missing_fails: a MutatingPolicy whose Node read fails rejects by its default failurePolicy (Fail), naming the policy; loading it logs a warning that a Node that cannot be read stops scheduling" {
  run_case cel_node_missing_fails
}

@test "cel_computed_invalid_label_key_ignored: a MutatingPolicy whose mutation writes a label key the API server would refuse, computed when it runs: failurePolicy Ignore accepts the Binding unchanged (no patch, not even an empty map) with a warning naming the policy and the mutation" {
  run_case cel_computed_invalid_label_key_ignored
}

@test "cel_computed_invalid_label_key_fails: the same with failurePolicy Fail: the Binding is rejected, naming the policy and the mutation" {
  run_case cel_computed_invalid_label_key_fails
}

@test "rule_invalid_label_key_left_out: a Kyverno rule writing a label key the API server would refuse onto a Binding without labels: the key is left out with a warning naming the rule, and no empty labels map is sent" {
  run_case rule_invalid_label_key_left_out
}

@test "cel_literal_invalid_label_key_refused: a MutatingPolicy writing a label key the API server would refuse as a literal is refused at load, with the expression's path and the key's line and column" {
  run_case cel_literal_invalid_label_key_refused
}

@test "cel_undeclared_variable_refused: a MutatingPolicy reading variables.zon where spec.variables declares zone is refused at load with the position and the nearest declared name" {
  run_case cel_undeclared_variable_refused
}

@test "cel_placed_pod_labels: a MutatingPolicy on Pods created with spec.nodeName: the Node's zone as a Pod label (JSONPatch)" {
  run_case cel_placed_pod_labels
}

@test "cel_parse_error_refused: a CEL expression that does not parse is refused at load with its path and position" {
  run_case cel_parse_error_refused
}

@test "cel_deepest_nesting_loads: an expression nested as deep as allowed (32) loads and runs in the module's stack" {
  run_case cel_deepest_nesting_loads
}

@test "cel_too_deep_refused: an expression nested deeper than 32 is refused at load, before parsing" {
  run_case cel_too_deep_refused
}

@test "cel_mutate_pod_binding: Kyverno's mutate-pod-binding written as a MutatingPolicy: the same patch as the ClusterPolicy sample" {
  run_case cel_mutate_pod_binding
}

@test "cel_recipe_pod_name_at_binding: recipe 2 in CEL: the Pod's own name as an annotation and a label at binding time" {
  run_case cel_recipe_pod_name_at_binding
}

@test "cel_recipe_placed_pod_instance_rack_owner: recipe 4 in CEL: a Pod created with spec.nodeName gets the Node's instance type and rack as labels and its owner annotation" {
  run_case cel_recipe_placed_pod_instance_rack_owner
}

@test "cel_deepest_chain_runs: an operator chain as deep as allowed (100) evaluates in the module's stack" {
  run_case cel_deepest_chain_runs
}

@test "kyverno_resolve_image_to_digest: Kyverno's resolve-image-to-digest: an imageRegistry context entry asks the registry (oci/v1/manifest_digest) and pins the container's image to the digest" {
  run_case kyverno_resolve_image_to_digest
}

@test "kyverno_resolve_image_unknown_to_registry: the registry does not hold the image: the rule fails, and the ClusterPolicy's failurePolicy: Fail rejects the Pod, naming the rule, the image and the registry's answer" {
  run_case kyverno_resolve_image_unknown_to_registry
}

@test "cel_authorizer_can_i_allowed: authorizer through kubernetes/can_i: the scheduler may create pods/binding; the check is asked once though read twice" {
  run_case cel_authorizer_can_i_allowed
}

@test "cel_authorizer_can_i_error: authorizer through kubernetes/can_i with the API server unreachable (recorded by kwctl): the decision errored, allowed() is false" {
  run_case cel_authorizer_can_i_error
}

@test "cel_mutate_existing_bound_pod: mutateExisting with the Pod being bound as its target: the Pod read whole, seen on node-1; the zone it gets rides on the Binding" {
  run_case cel_mutate_existing_bound_pod
}

@test "cel_mutate_existing_admission_half: Kyverno's label-existing-namespaces sample: the Namespace being created is labelled, as Kyverno's webhook labels it" {
  run_case cel_mutate_existing_admission_half
}

@test "cel_apply_atomic_refused: a MutatingAdmissionPolicy's apply configuration sets a Pod's nodeSelector, an atomic map: refused as Kubernetes refuses it, and failurePolicy Fail rejects the Pod" {
  run_case cel_apply_atomic_refused
}

@test "cel_apply_server_side_apply: the same apply configuration in a Kyverno MutatingPolicy with evaluation.useServerSideApply: the atomic nodeSelector is set whole" {
  run_case cel_apply_server_side_apply
}

@test "cel_named_time_zones: a MutatingPolicy reads a time in IANA zones: New York in summer time (UTC-4), Kathmandu's quarter hour (UTC+5:45), Sydney past midnight into the new year (UTC+11)" {
  run_case cel_named_time_zones
}

@test "cel_unknown_time_zone_refused: a MutatingPolicy's getter names a zone that does not exist, as a literal: refused when the settings load, with the expression's path and position" {
  run_case cel_unknown_time_zone_refused
}

@test "cel_unknown_time_zone_fails: a MutatingAdmissionPolicy takes a zone from a variable, and it does not exist: Go's error when the mutation runs, and failurePolicy Fail rejects the Pod" {
  run_case cel_unknown_time_zone_fails
}
