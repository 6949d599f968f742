package main

// `kyverno-oracle totest DIR < cases.jsonl`: each case becomes a `kyverno test` folder
// under DIR (policy, resource, the oracle's object as patchedResources, and one result per
// rule response with the oracle's status), so that Kyverno's own CLI can check the oracle
// (kyverno-test/: `kyverno-test DIR`). Cases the CLI cannot express are left out and
// counted: several policies, resources (the CLI would need clusterResources and then
// ignores subresources), subresources, CONNECT, refused or invalid answers.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/apis/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func runToTest(o *Oracle, args []string, in io.Reader, out io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: kyverno-oracle totest DIR < cases.jsonl")
		return 2
	}
	dir := args[0]
	reader := bufio.NewReaderSize(in, 1<<20)
	written, left := 0, 0
	for n := 0; ; n++ {
		line, err := reader.ReadBytes('\n')
		if len(trimSpace(line)) > 0 {
			if ok, werr := writeTest(o, filepath.Join(dir, fmt.Sprintf("case-%06d", n)), line); werr != nil {
				fmt.Fprintln(os.Stderr, "kyverno-oracle:", werr)
				return 1
			} else if ok {
				written++
			} else {
				left++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kyverno-oracle:", err)
			return 1
		}
	}
	fmt.Fprintf(out, "%d tests written, %d cases left out\n", written, left)
	return 0
}

func writeTest(o *Oracle, dir string, line []byte) (bool, error) {
	var c Case
	if err := json.Unmarshal(line, &c); err != nil {
		return false, nil
	}
	if len(c.Policy) == 0 || len(c.Policies) > 0 || len(c.Resources) > 0 || c.Subresource != "" || c.Operation == "CONNECT" {
		return false, nil
	}
	answer := o.Answer(line)
	switch answer.Status {
	case statusPatched, statusUnchanged, statusSkipped, statusError:
	default:
		return false, nil
	}
	var policy, resource struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if json.Unmarshal(c.Policy, &policy) != nil || json.Unmarshal(c.Resource, &resource) != nil {
		return false, nil
	}
	policyRef := policy.Metadata.Name
	if policy.Metadata.Namespace != "" {
		policyRef = policy.Metadata.Namespace + "/" + policyRef
	}
	resourceRef := resource.Metadata.Name
	if resource.Metadata.Namespace != "" {
		resourceRef = resource.Metadata.Namespace + "/" + resourceRef
	}
	cel := policy.Kind == "MutatingPolicy" || policy.Kind == "NamespacedMutatingPolicy"
	test := map[string]any{
		"apiVersion": "cli.kyverno.io/v1alpha1",
		"kind":       "Test",
		"metadata":   map[string]any{"name": filepath.Base(dir)},
		"policies":   []string{"policy.yaml"},
		"resources":  []string{"resource.yaml"},
	}
	files := map[string]any{"policy.yaml": c.Policy, "resource.yaml": c.Resource}
	if answer.Object != nil {
		files["patched.yaml"] = answer.Object
	}
	if len(c.ValuesFile) > 0 || len(c.Values) > 0 || c.NamespaceLabels != nil || c.Operation != "" {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(c.Resource); err != nil {
			return false, nil
		}
		spec, err := o.valuesSpec(&c, &u, nil, "")
		if err != nil {
			return false, nil
		}
		if c.Operation != "" {
			global := map[string]any{}
			for k, v := range spec.GlobalValues {
				global[k] = v
			}
			global["request.operation"] = c.Operation
			spec.GlobalValues = global
		}
		files["values.yaml"] = v1alpha1.Values{TypeMeta: metav1.TypeMeta{APIVersion: "cli.kyverno.io/v1alpha1", Kind: "Values"}, ValuesSpec: *spec}
		test["variables"] = "values.yaml"
	}
	if c.UserInfo != nil {
		files["userinfo.yaml"] = map[string]any{"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "UserInfo",
			"roles": c.UserInfo.Roles, "clusterRoles": c.UserInfo.ClusterRoles, "userInfo": c.UserInfo.AdmissionUserInfo}
		test["userinfo"] = "userinfo.yaml"
	}
	var results []map[string]any
	for _, r := range answer.Rules {
		result := map[string]any{"policy": policyRef, "kind": resourceKind(c.Resource), "resources": []string{resourceRef}, "result": r.Status}
		if cel {
			result["isMutatingPolicy"] = true
		} else {
			result["rule"] = r.Rule
		}
		if answer.Object != nil {
			result["patchedResources"] = "patched.yaml"
		}
		results = append(results, result)
	}
	if len(results) == 0 {
		return false, nil
	}
	test["results"] = results
	files["kyverno-test.yaml"] = test
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	for name, content := range files {
		data, err := json.Marshal(content)
		if err != nil {
			return false, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o644); err != nil {
			return false, err
		}
	}
	return true, nil
}

func resourceKind(raw json.RawMessage) string {
	var r struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.Kind
}
