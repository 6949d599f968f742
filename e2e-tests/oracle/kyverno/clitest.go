package main

// `kyverno-oracle clitest DIR...`: Kyverno's own CLI tests (kyverno-test.yaml) replayed as
// oracle cases. Each test resource goes through the test's mutating policies one case per
// policy, in the order `kyverno test` applies them (kyverno.io policies in file order,
// then MutatingPolicies), each case on what the one before returned. Each mutate result
// of the test is then checked as `kyverno test` checks it: the rule's status against the
// expected result, and the object against the patchedResources file (compared after the
// CLI's own tidying).

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/apis/v1alpha1"
	cliresource "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/resource"
	clitestload "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/test"
	extyaml "github.com/kyverno/kyverno/ext/yaml"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

type cliPolicy struct {
	raw         json.RawMessage
	name        string
	namespace   string
	mpol        bool
	mutateRules map[string]bool
}

type step struct {
	input  json.RawMessage
	answer Answer
}

type tally struct {
	agree, disagree, excluded, refused, notCompared, unsupported int
}

func runCLITests(o *Oracle, args []string, out io.Writer) int {
	fs := flag.NewFlagSet("clitest", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "print every check, not only disagreements")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var total tally
	for _, dir := range fs.Args() {
		tests, err := clitestload.LoadTests(dir, "kyverno-test.yaml")
		if err != nil {
			fmt.Fprintln(out, "ERROR", dir, err)
			return 2
		}
		sort.Slice(tests, func(i, j int) bool { return tests[i].Path < tests[j].Path })
		for _, tc := range tests {
			t := runCLITest(o, tc, out, *verbose)
			fmt.Fprintf(out, "%s: %d agree, %d disagree, %d excluded, %d refused, %d not compared, %d unsupported\n",
				tc.Path, t.agree, t.disagree, t.excluded, t.refused, t.notCompared, t.unsupported)
			total.agree += t.agree
			total.disagree += t.disagree
			total.excluded += t.excluded
			total.refused += t.refused
			total.notCompared += t.notCompared
			total.unsupported += t.unsupported
		}
	}
	fmt.Fprintf(out, "TOTAL: %d agree, %d disagree, %d excluded, %d refused, %d not compared, %d unsupported\n",
		total.agree, total.disagree, total.excluded, total.refused, total.notCompared, total.unsupported)
	if total.disagree > 0 {
		return 1
	}
	return 0
}

func runCLITest(o *Oracle, tc clitestload.TestCase, out io.Writer, verbose bool) (t tally) {
	if tc.Err != nil {
		fmt.Fprintln(out, "  load error:", tc.Err)
		t.unsupported++
		return t
	}
	test := tc.Test
	dir := tc.Dir()
	var policies []cliPolicy
	var mpolicies []cliPolicy
	for _, p := range test.Policies {
		docs, err := readDocs(filepath.Join(dir, p))
		if err != nil {
			fmt.Fprintln(out, "  policies:", err)
			t.unsupported++
			return t
		}
		for _, doc := range docs {
			u := unstructured.Unstructured{}
			if err := u.UnmarshalJSON(doc); err != nil {
				continue
			}
			group := u.GroupVersionKind().Group
			kind := u.GetKind()
			switch {
			case group == "kyverno.io" && (kind == "ClusterPolicy" || kind == "Policy") && len(mutateRules(u)) > 0:
				policies = append(policies, cliPolicy{raw: doc, name: u.GetName(), namespace: u.GetNamespace(), mutateRules: mutateRules(u)})
			case group == "policies.kyverno.io" && (kind == "MutatingPolicy" || kind == "NamespacedMutatingPolicy"):
				mpolicies = append(mpolicies, cliPolicy{raw: doc, name: u.GetName(), namespace: u.GetNamespace(), mpol: true})
			}
		}
	}
	chainPolicies := append(append([]cliPolicy{}, policies...), mpolicies...)

	// results that are about mutations of these policies
	var results []v1alpha1.TestResult
	for _, res := range test.Results {
		if p := findPolicy(chainPolicies, res.Policy); p != nil && (p.mpol || res.Rule == "" || p.mutateRules[res.Rule]) {
			results = append(results, res)
		}
	}
	if len(results) == 0 {
		return t
	}
	if reason := unsupportedTest(test); reason != "" {
		fmt.Fprintln(out, "  unsupported:", reason)
		t.unsupported += len(results)
		return t
	}

	in, err := loadTestInputs(test, dir)
	if err != nil {
		fmt.Fprintln(out, "  unsupported:", err)
		t.unsupported += len(results)
		return t
	}
	resources := in.resources

	chains := map[string][]step{}
	chain := func(operation string, i int) []step {
		key := fmt.Sprintf("%s/%d", operation, i)
		if steps, ok := chains[key]; ok {
			return steps
		}
		current := resources[i]
		steps := make([]step, 0, len(chainPolicies))
		for n, p := range chainPolicies {
			c := map[string]any{
				"id":        fmt.Sprintf("%s#%d#%s#%d", tc.Path, i, operation, n),
				"policy":    p.raw,
				"resource":  current,
				"operation": operation,
			}
			if in.valuesFile != nil {
				c["values_file"] = in.valuesFile
			}
			if in.userInfo != nil {
				c["user_info"] = in.userInfo
			}
			if p.mpol && len(in.celReads) > 0 {
				c["resources"] = in.celReads
			} else if !p.mpol && len(in.kyvernoReads) > 0 {
				c["resources"] = in.kyvernoReads
			}
			line, _ := json.Marshal(c)
			answer := o.Answer(line)
			steps = append(steps, step{input: current, answer: answer})
			if answer.Object != nil {
				current, _ = json.Marshal(answer.Object)
			}
		}
		chains[key] = steps
		return steps
	}

	for _, res := range results {
		for i, raw := range resources {
			var u unstructured.Unstructured
			if err := u.UnmarshalJSON(raw); err != nil {
				continue
			}
			if !resultNamesResource(res, &u) {
				continue
			}
			n := findPolicyIndex(chainPolicies, res.Policy)
			st := chain(res.Operation, i)[n]
			label := fmt.Sprintf("%s %s/%s rule=%q want=%s", res.Policy, u.GetNamespace(), u.GetName(), res.Rule, res.Result)
			if st.answer.Status == statusRefused {
				t.refused++
				fmt.Fprintf(out, "  REFUSED %s: %s\n", label, st.answer.Message)
				continue
			}
			if st.answer.Status == statusInvalid || st.answer.Status == statusPanic {
				t.disagree++
				fmt.Fprintf(out, "  DISAGREE %s: oracle %s: %s\n", label, st.answer.Status, st.answer.Message)
				continue
			}
			var matched []RuleResult
			for _, r := range st.answer.Rules {
				if r.Policy != chainPolicies[n].name {
					continue
				}
				if chainPolicies[n].mpol || res.Rule == "" || r.Rule == res.Rule || r.Rule == "autogen-"+res.Rule || r.Rule == "autogen-cronjob-"+res.Rule {
					matched = append(matched, r)
				}
			}
			if len(matched) == 0 {
				// `kyverno test` counts a resource no rule answered for as excluded, not failed
				t.excluded++
				if verbose {
					fmt.Fprintf(out, "  excluded %s (oracle: %s)\n", label, st.answer.Status)
				}
				continue
			}
			actual := u
			if st.answer.Object != nil {
				actual = unstructured.Unstructured{Object: st.answer.Object}
			} else {
				_ = actual.UnmarshalJSON(st.input)
			}
			for _, r := range matched {
				if res.PatchedResources != "" {
					ok, diff, err := compareWithFile(actual, filepath.Join(dir, res.PatchedResources))
					if err != nil && strings.Contains(err.Error(), "not found in manifest") && !res.FailOnMissingResources {
						t.notCompared++
						if verbose {
							fmt.Fprintf(out, "  not compared %s: %v\n", label, err)
						}
						continue
					}
					if err != nil {
						t.disagree++
						fmt.Fprintf(out, "  DISAGREE %s: %v\n", label, err)
						continue
					}
					if !ok {
						t.disagree++
						fmt.Fprintf(out, "  DISAGREE %s: patched resource differs (oracle %s, rule %s)\n%s\n", label, st.answer.Status, r.Status, diff)
						continue
					}
				}
				if r.Status != string(res.Result) {
					t.disagree++
					fmt.Fprintf(out, "  DISAGREE %s: rule %s is %s: %s\n", label, r.Rule, r.Status, r.Message)
					continue
				}
				t.agree++
				if verbose {
					fmt.Fprintf(out, "  agree %s (oracle: %s)\n", label, st.answer.Status)
				}
			}
		}
	}
	return t
}

// testInputs are a test's files as case fields.
type testInputs struct {
	resources  []json.RawMessage
	valuesFile json.RawMessage
	userInfo   json.RawMessage
	// kyvernoReads: with clusterResources, what apiCall and configMap entries read (the
	// CLI's fake client then also holds the test's own resources)
	kyvernoReads []json.RawMessage
	// celReads: that, and the context file's resources, which the CEL libraries read
	celReads []json.RawMessage
}

func loadTestInputs(test *v1alpha1.Test, dir string) (*testInputs, error) {
	in := &testInputs{}
	for _, p := range test.Resources {
		docs, err := readDocs(filepath.Join(dir, p))
		if err != nil {
			return nil, fmt.Errorf("resources: %w", err)
		}
		in.resources = append(in.resources, docs...)
	}
	if test.Values != nil {
		in.valuesFile, _ = json.Marshal(v1alpha1.Values{ValuesSpec: *test.Values})
	} else if test.Variables != "" {
		var values json.RawMessage
		if err := readOne(filepath.Join(dir, test.Variables), &values); err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
		in.valuesFile = values
	}
	if test.UserInfo != "" {
		var ui v1alpha1.UserInfo
		if err := readOne(filepath.Join(dir, test.UserInfo), &ui); err != nil {
			return nil, fmt.Errorf("userinfo: %w", err)
		}
		in.userInfo, _ = json.Marshal(ui.RequestInfo)
	}
	var clusterResources []json.RawMessage
	for _, p := range test.ClusterResources {
		var cr v1alpha1.ClusterResource
		if err := readOne(filepath.Join(dir, p), &cr); err != nil {
			return nil, fmt.Errorf("clusterResources: %w", err)
		}
		if len(cr.Spec.CRDs) > 0 {
			return nil, fmt.Errorf("clusterResources with CRDs")
		}
		for _, r := range cr.Spec.Resources {
			raw, _ := r.MarshalJSON()
			clusterResources = append(clusterResources, raw)
		}
	}
	if len(clusterResources) > 0 {
		in.kyvernoReads = append(append(in.kyvernoReads, in.resources...), clusterResources...)
	}
	in.celReads = append([]json.RawMessage{}, in.kyvernoReads...)
	if test.Context != "" {
		var ctx struct {
			Spec struct {
				Resources []json.RawMessage `json:"resources"`
				Images    []json.RawMessage `json:"images"`
			} `json:"spec"`
		}
		if err := readOne(filepath.Join(dir, test.Context), &ctx); err != nil {
			return nil, fmt.Errorf("context: %w", err)
		}
		if len(ctx.Spec.Images) > 0 {
			return nil, fmt.Errorf("context with image data")
		}
		in.celReads = append(in.celReads, ctx.Spec.Resources...)
	}
	return in, nil
}

// readOne reads a file of one YAML document into v.
func readOne(path string, v any) error {
	docs, err := readDocs(path)
	if err != nil {
		return err
	}
	if len(docs) != 1 {
		return fmt.Errorf("%s: want one document, found %d", path, len(docs))
	}
	return json.Unmarshal(docs[0], v)
}

func unsupportedTest(test *v1alpha1.Test) string {
	var reasons []string
	if len(test.PolicyExceptions) > 0 {
		reasons = append(reasons, "exceptions")
	}
	if len(test.TargetResources) > 0 {
		reasons = append(reasons, "targetResources (mutate existing)")
	}
	if len(test.APICallResponses) > 0 {
		reasons = append(reasons, "apiCallResponses")
	}
	if len(test.GlobalContextEntries) > 0 {
		reasons = append(reasons, "globalContextEntries")
	}
	if len(test.ParamResources) > 0 {
		reasons = append(reasons, "paramResources")
	}
	return strings.Join(reasons, ", ")
}

func mutateRules(u unstructured.Unstructured) map[string]bool {
	names := map[string]bool{}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	for _, r := range rules {
		if m, ok := r.(map[string]any); ok && m["mutate"] != nil {
			if name, ok := m["name"].(string); ok {
				names[name] = true
			}
		}
	}
	return names
}

func findPolicyIndex(policies []cliPolicy, ref string) int {
	ns, name := "", ref
	if before, after, ok := strings.Cut(ref, "/"); ok {
		ns, name = before, after
	}
	for i, p := range policies {
		if p.name == name && (p.namespace == ns || (ns == "" && p.mpol)) {
			return i
		}
	}
	return -1
}

func findPolicy(policies []cliPolicy, ref string) *cliPolicy {
	if i := findPolicyIndex(policies, ref); i >= 0 {
		return &policies[i]
	}
	return nil
}

// resultNamesResource: as `kyverno test`, a result's resources name a resource by name
// or namespace/name, whatever its kind; no resources means every resource.
func resultNamesResource(res v1alpha1.TestResult, u *unstructured.Unstructured) bool {
	if len(res.Resources) == 0 && len(res.ResourceSpecs) == 0 {
		return true
	}
	for _, r := range res.Resources {
		if ns, name, ok := strings.Cut(r, "/"); ok {
			if ns == u.GetNamespace() && name == u.GetName() {
				return true
			}
		} else if r == u.GetName() {
			return true
		}
	}
	for _, spec := range res.ResourceSpecs {
		apiVersion := spec.Version
		if spec.Group != "" {
			apiVersion = spec.Group + "/" + spec.Version
		}
		if apiVersion == u.GetAPIVersion() && spec.Namespace == u.GetNamespace() && spec.Name == u.GetName() {
			return true
		}
	}
	return false
}

func compareWithFile(actual unstructured.Unstructured, path string) (bool, string, error) {
	expected, err := cliresource.GetResourceFromPath(nil, path, actual.GetAPIVersion(), actual.GetKind(), actual.GetNamespace(), actual.GetName())
	if err != nil {
		return false, "", err
	}
	cliresource.FixupGenerateLabels(actual)
	cliresource.FixupGenerateLabels(*expected)
	equal, err := cliresource.Compare(actual, *expected, true)
	if err != nil || equal {
		return equal, "", err
	}
	want, _ := yaml.Marshal(expected.Object)
	got, _ := yaml.Marshal(actual.Object)
	return false, "--- expected\n" + string(want) + "--- oracle\n" + string(got), nil
}

// readDocs reads a YAML file (or the YAML files of a folder) as JSON documents.
func readDocs(path string) ([]json.RawMessage, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		var docs []json.RawMessage
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				d, err := readDocs(filepath.Join(path, e.Name()))
				if err != nil {
					return nil, err
				}
				docs = append(docs, d...)
			}
		}
		return docs, nil
	}
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	split, err := extyaml.SplitDocuments(content)
	if err != nil {
		return nil, err
	}
	docs := make([]json.RawMessage, 0, len(split))
	for _, doc := range split {
		j, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(j) == 0 || string(j) == "null" {
			continue
		}
		docs = append(docs, j)
	}
	return docs, nil
}
