package main

// One case in, one answer out. The policy is loaded, validated and applied the way
// `kyverno test` / `kyverno apply` do it (cmd/cli/kubectl-kyverno: policy.Load,
// policyvalidation.Validate, processor.PolicyProcessor for kyverno.io policies, and the
// processor's MutatingPolicy branch for policies.kyverno.io), with the CLI's offline
// stand-ins for the cluster: its fake dynamic client over the case's "resources" (what a
// test's clusterResources give), its values (a values file), and the CEL libraries' fake
// context provider (what a test's context file gives).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/go-git/go-billy/v5/memfs"
	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	kyvernov2 "github.com/kyverno/kyverno/api/kyverno/v2"
	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/apis/v1alpha1"
	clitest "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/commands/test"
	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/data"
	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/policy"
	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/processor"
	cliresource "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/resource"
	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/store"
	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/variables"
	"github.com/kyverno/kyverno/ext/cluster"
	celengine "github.com/kyverno/kyverno/pkg/cel/engine"
	"github.com/kyverno/kyverno/pkg/cel/libs"
	"github.com/kyverno/kyverno/pkg/cel/matching"
	mpolvalidation "github.com/kyverno/kyverno/pkg/cel/policies/mpol"
	mpolcompiler "github.com/kyverno/kyverno/pkg/cel/policies/mpol/compiler"
	mpolengine "github.com/kyverno/kyverno/pkg/cel/policies/mpol/engine"
	"github.com/kyverno/kyverno/pkg/config"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	restmapperutils "github.com/kyverno/kyverno/pkg/utils/restmapper"
	policyvalidation "github.com/kyverno/kyverno/pkg/validation/policy"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
	"sigs.k8s.io/kubectl-validate/pkg/openapiclient"
)

// Case is one line of input.
type Case struct {
	ID json.RawMessage `json:"id"`
	// Policy is one kyverno.io ClusterPolicy/Policy or one policies.kyverno.io
	// MutatingPolicy/NamespacedMutatingPolicy document. Policies, when given instead, are
	// several, applied as `kyverno test` applies a test's policies: the kyverno.io ones in
	// order, then the MutatingPolicies in order, each on what the ones before left.
	// A policies.kyverno.io PolicyException among them applies to the MutatingPolicies
	// its policyRefs name, as Kyverno's webhook applies the exceptions it lists.
	Policy   json.RawMessage   `json:"policy"`
	Policies []json.RawMessage `json:"policies"`
	Resource json.RawMessage   `json:"resource"`
	// Operation is CREATE (default), UPDATE, DELETE or CONNECT. As in the CLI, UPDATE
	// gives the resource as both object and oldObject, DELETE as oldObject only.
	Operation string `json:"operation"`
	// Subresource, with Parent (defaulted for the Pod subresources), makes the resource
	// the subresource of the parent kind: Kyverno then matches e.g. Pod/binding.
	Subresource string                   `json:"subresource"`
	Parent      *metav1.GroupVersionKind `json:"parent"`
	// NamespaceLabels are the labels of the resource's namespace (the CLI's
	// namespaceSelector values); without them a Namespace in Resources gives them.
	NamespaceLabels map[string]string `json:"namespace_labels"`
	// Resources are the objects the cluster holds: read by apiCall and configMap context
	// entries (as a test's clusterResources) and by CEL resource.Get/List (as a test's
	// context file). Without them, as in the CLI, apiCall and configMap entries are not
	// loaded: their variables must come from Values.
	Resources []json.RawMessage `json:"resources"`
	// Values are variables as a values file's globalValues gives them ("request.operation",
	// "zone", "request.object.metadata.name", ...). ValuesFile is a whole values file
	// (globalValues, policies[].rules[].values and foreachValues, policies[].resources[],
	// namespaceSelector, subresources); Values win over its globalValues.
	Values     map[string]any  `json:"values"`
	ValuesFile json.RawMessage `json:"values_file"`
	// UserInfo is the CLI's user info file body: {roles, clusterRoles, userInfo}.
	UserInfo *kyvernov2.RequestInfo `json:"user_info"`
}

// RuleResult is one rule response of the engine.
type RuleResult struct {
	Policy  string `json:"policy"`
	Rule    string `json:"rule"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Answer is one line of output.
type Answer struct {
	ID      json.RawMessage `json:"id"`
	Status  string          `json:"status"`
	Object  map[string]any  `json:"object,omitempty"`
	Message string          `json:"message,omitempty"`
	Rules   []RuleResult    `json:"rules,omitempty"`
}

const (
	statusPatched   = "patched"
	statusUnchanged = "unchanged"
	statusSkipped   = "skipped"
	statusError     = "error"
	statusRefused   = "refused"
	statusInvalid   = "invalid" // the case itself is malformed or asks for what the oracle does not do
	statusPanic     = "panic"   // the engine panicked
	statusTimeout   = "timeout" // no answer within the case's time limit
)

// Oracle holds what is worth keeping between cases: loaded and validated policies,
// compiled MutatingPolicies, fake clusters, and the static OpenAPI type converter.
type Oracle struct {
	restMapper meta.RESTMapper
	tcm        mpolcompiler.TypeConverterManager
	policies   map[string]*loadedPolicy
	providers  map[string]providerEntry
	clusters   map[string]*fakeCluster
	clusterSeq int
	emptyCtx   *libs.FakeContextProvider
}

type loadedPolicy struct {
	kyverno   kyvernov1.PolicyInterface
	mpol      policiesv1beta1.MutatingPolicyLike
	exception *policiesv1beta1.PolicyException
	refused   string
	invalid   string
}

type providerEntry struct {
	provider mpolengine.Provider
	refused  string
}

type fakeCluster struct {
	id         int
	celContext *libs.FakeContextProvider
	objects    []*unstructured.Unstructured
}

func objectKey(u *unstructured.Unstructured) string {
	return u.GetAPIVersion() + "/" + u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

func (fc *fakeCluster) holds(u *unstructured.Unstructured) bool {
	if fc == nil {
		return false
	}
	key := objectKey(u)
	for _, o := range fc.objects {
		if objectKey(o) == key {
			return true
		}
	}
	return false
}

func (fc *fakeCluster) runtimeObjects() []runtime.Object {
	if fc == nil {
		return nil
	}
	objects := make([]runtime.Object, 0, len(fc.objects)+1)
	for _, o := range fc.objects {
		objects = append(objects, o.DeepCopy())
	}
	return objects
}

const cacheLimit = 4096

func NewOracle() (*Oracle, error) {
	restMapper, err := restmapperutils.GetRESTMapper(nil)
	if err != nil {
		return nil, err
	}
	return &Oracle{
		restMapper: restMapper,
		tcm:        mpolcompiler.NewStaticTypeConverterManager(cliOpenAPI()),
		policies:   map[string]*loadedPolicy{},
		providers:  map[string]providerEntry{},
		clusters:   map[string]*fakeCluster{},
		emptyCtx:   libs.NewFakeContextProvider(),
	}, nil
}

// cliOpenAPI is what PolicyProcessor.openAPI gives outside a cluster without CRD files:
// the CLI's embedded CRDs, then the hard-coded built-in types of Kubernetes 1.32.
func cliOpenAPI() openapi.Client {
	clients := make([]openapi.Client, 0, 2)
	if crds, err := data.Crds(); err == nil {
		clients = append(clients, openapiclient.NewLocalSchemaFiles(crds))
	}
	clients = append(clients, openapiclient.NewHardcodedBuiltins("1.32"))
	return openapiclient.NewComposite(clients...)
}

// Answer answers one case; a panic in the engine becomes a "panic" answer.
func (o *Oracle) Answer(line []byte) (answer Answer) {
	var c Case
	if err := json.Unmarshal(line, &c); err != nil {
		var id struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &id)
		return Answer{ID: id.ID, Status: statusInvalid, Message: "case is not valid JSON: " + err.Error()}
	}
	defer func() {
		if r := recover(); r != nil {
			answer = Answer{ID: c.ID, Status: statusPanic, Message: fmt.Sprintf("%v\n%s", r, debug.Stack())}
		}
	}()
	answer = o.answer(&c)
	answer.ID = c.ID
	return answer
}

func (o *Oracle) answer(c *Case) Answer {
	raws := c.Policies
	if len(c.Policy) > 0 && !bytes.Equal(bytes.TrimSpace(c.Policy), []byte("null")) {
		raws = append([]json.RawMessage{c.Policy}, raws...)
	}
	if len(raws) == 0 {
		return Answer{Status: statusInvalid, Message: "case has no policy"}
	}
	var kyvernoPolicies []kyvernov1.PolicyInterface
	var mpols []policiesv1beta1.MutatingPolicyLike
	var exceptions []*policiesv1beta1.PolicyException
	var mpolKey []byte
	for _, raw := range raws {
		lp := o.loadPolicy(raw)
		if lp.invalid != "" {
			return Answer{Status: statusInvalid, Message: lp.invalid}
		}
		if lp.refused != "" {
			return Answer{Status: statusRefused, Message: lp.refused}
		}
		switch {
		case lp.kyverno != nil:
			kyvernoPolicies = append(kyvernoPolicies, lp.kyverno.CreateDeepCopy())
		case lp.exception != nil:
			exceptions = append(exceptions, lp.exception)
			mpolKey = append(append(mpolKey, raw...), 0)
		default:
			mpols = append(mpols, lp.mpol)
			mpolKey = append(append(mpolKey, raw...), 0)
		}
	}
	if len(kyvernoPolicies) == 0 && len(mpols) == 0 {
		return Answer{Status: statusInvalid, Message: "case has no policy, only exceptions"}
	}

	// The admitted resource, with its numbers made float64 as the CLI's resource loading
	// (commands/test ProcessResources) makes them.
	loaded, err := cliresource.GetUnstructuredResources(c.Resource)
	if err != nil || len(loaded) != 1 {
		return Answer{Status: statusInvalid, Message: fmt.Sprintf("resource: want one object (%v)", err)}
	}
	resource := *clitest.ProcessResources(loaded)[0]

	fc, err := o.cluster(c.Resources)
	if err != nil {
		return Answer{Status: statusInvalid, Message: "resources: " + err.Error()}
	}
	// The CLI's fake client also holds the resources under test (mutate existing targets
	// are listed through it, and listing a kind it was not given panics).
	objects := fc.runtimeObjects()
	if !fc.holds(&resource) {
		objects = append(objects, resource.DeepCopy())
	}
	client, err := cluster.NewFake().DClient(objects)
	if err != nil {
		return Answer{Status: statusInvalid, Message: "resources: " + err.Error()}
	}

	operation := strings.ToUpper(strings.TrimSpace(c.Operation))
	if _, err := processor.NormalizeValuesOperation(operation); err != nil {
		return Answer{Status: statusInvalid, Message: err.Error()}
	}

	spec, err := o.valuesSpec(c, &resource, fc, operation)
	if err != nil {
		return Answer{Status: statusInvalid, Message: err.Error()}
	}
	vars, err := variables.New(io.Discard, nil, "", "", spec)
	if err != nil {
		return Answer{Status: statusInvalid, Message: "values: " + err.Error()}
	}
	// CONNECT is only a value of request.operation for the CLI, never a request shape.
	if operation == "CONNECT" {
		operation = ""
	}

	var st store.Store
	st.SetLocal(true)
	st.SetRegistryAccess(false)
	st.AllowApiCall(len(c.Resources) > 0)
	vars.SetInStore(&st)

	original, err := json.Marshal(resource.Object)
	if err != nil {
		return Answer{Status: statusInvalid, Message: err.Error()}
	}
	var rules []RuleResult
	current := resource

	// kyverno.io policies: the CLI's own processor.
	if len(kyvernoPolicies) > 0 {
		var cmResolver engineapi.ConfigmapResolver
		if fc != nil {
			// as the CLI with clusterResources
			if cmResolver, err = cluster.NewConfigMapResolver(client); err != nil {
				return Answer{Status: statusInvalid, Message: err.Error()}
			}
		}
		pp := processor.PolicyProcessor{
			Store:                &st,
			Policies:             kyvernoPolicies,
			Resource:             current,
			Operation:            operation,
			Variables:            vars,
			UserInfo:             c.UserInfo,
			PolicyReport:         true,
			NamespaceSelectorMap: vars.NamespaceSelectors(),
			Rc:                   &processor.ResultCounts{},
			Client:               client,
			Subresources:         vars.Subresources(),
			Out:                  io.Discard,
			ConfigMapResolver:    cmResolver,
			RESTMapper:           o.restMapper,
		}
		responses, err := pp.ApplyPoliciesOnResource()
		if err != nil {
			return Answer{Status: statusError, Message: err.Error(), Rules: rules}
		}
		for _, response := range responses {
			if response.Policy() == nil || response.Policy().AsKyvernoPolicy() == nil {
				continue
			}
			mutating := false
			for _, r := range response.PolicyResponse.Rules {
				if r.RuleType() == engineapi.Mutation {
					mutating = true
				}
			}
			if !mutating {
				continue
			}
			for _, r := range response.PolicyResponse.Rules {
				rules = append(rules, ruleResult(response.Policy().GetName(), r))
			}
			current = response.PatchedResource
		}
	}

	// MutatingPolicies: the processor's MutatingPolicy branch, with the subresource of
	// the request kept (the CLI passes none).
	if len(mpols) > 0 {
		// The CEL libraries read through the context the policy was compiled with (the
		// CLI compiles after making its context the library context): one compilation
		// per policy list and fake cluster.
		libsCtx, ctxID := o.emptyCtx, 0
		if fc != nil {
			libsCtx, ctxID = fc.celContext, fc.id
		}
		libs.LibraryContext = libsCtx
		entry := o.mpolProvider(fmt.Sprintf("%d\x00%s", ctxID, mpolKey), mpols, exceptions, libsCtx)
		if entry.refused != "" {
			return Answer{Status: statusRefused, Message: entry.refused}
		}
		eng := mpolengine.NewEngine(entry.provider, vars.Namespace, matching.NewMatcher(), o.tcm, libsCtx)
		gvk := current.GroupVersionKind()
		gvr, subresource, err := o.requestResource(c, gvk)
		if err != nil {
			return Answer{Status: statusInvalid, Message: err.Error()}
		}
		var user authenticationv1.UserInfo
		if c.UserInfo != nil {
			user = c.UserInfo.AdmissionUserInfo
		}
		mpolOperation := operation
		if mpolOperation == "" {
			if op, err := processor.NormalizeOperation(vars.GlobalOperation()); err == nil {
				mpolOperation = op
			}
		}
		op, object, oldObject := processor.AdmissionRequestShape(mpolOperation, &current)
		request := celengine.Request(libsCtx, gvk, gvr, subresource, current.GetName(), current.GetNamespace(),
			op, user, object, oldObject, false, nil)
		reps, err := eng.Handle(context.TODO(), request, nil)
		if err != nil {
			return Answer{Status: statusError, Message: fmt.Sprintf("failed to apply mutating policies on resource %s (%v)", current.GetName(), err), Rules: rules}
		}
		for _, r := range reps.Policies {
			for _, rr := range r.Rules {
				rules = append(rules, ruleResult(r.Policy.GetName(), rr))
			}
		}
		if reps.PatchedResource != nil {
			current = *reps.PatchedResource
		}
	}

	return verdict(original, current, rules)
}

func ruleResult(policyName string, r engineapi.RuleResponse) RuleResult {
	return RuleResult{Policy: policyName, Rule: r.Name(), Status: string(r.Status()), Message: r.Message()}
}

// verdict: any failed rule is an error (admission would refuse the request); otherwise a
// rule that applied makes the answer patched or unchanged; otherwise nothing applied.
func verdict(original []byte, current unstructured.Unstructured, rules []RuleResult) Answer {
	applied := false
	for _, r := range rules {
		switch engineapi.RuleStatus(r.Status) {
		case engineapi.RuleStatusError, engineapi.RuleStatusFail:
			return Answer{Status: statusError, Message: r.Message, Rules: rules}
		case engineapi.RuleStatusPass, engineapi.RuleStatusWarn:
			applied = true
		}
	}
	if !applied {
		return Answer{Status: statusSkipped, Rules: rules}
	}
	patched, err := json.Marshal(current.Object)
	if err != nil {
		return Answer{Status: statusError, Message: err.Error(), Rules: rules}
	}
	status := statusPatched
	if bytes.Equal(patched, original) {
		status = statusUnchanged
	}
	return Answer{Status: status, Object: current.Object, Rules: rules}
}

// loadPolicy loads one policy document through the CLI's loader (schema validation and
// defaults from Kyverno's CRDs), then validates it as Kyverno's policy webhook would.
func (o *Oracle) loadPolicy(raw json.RawMessage) *loadedPolicy {
	key := string(raw)
	if lp, ok := o.policies[key]; ok {
		return lp
	}
	lp := loadPolicyUncached(raw)
	if len(o.policies) >= cacheLimit {
		o.policies = map[string]*loadedPolicy{}
	}
	o.policies[key] = lp
	return lp
}

func loadPolicyUncached(raw json.RawMessage) *loadedPolicy {
	fs := memfs.New()
	f, err := fs.Create("policy.yaml")
	if err != nil {
		return &loadedPolicy{invalid: err.Error()}
	}
	if _, err := f.Write(raw); err != nil {
		return &loadedPolicy{invalid: err.Error()}
	}
	_ = f.Close()
	results, err := policy.Load(fs, "", "policy.yaml")
	if err != nil {
		return &loadedPolicy{refused: err.Error()}
	}
	if len(results.NonFatalErrors) > 0 {
		msgs := make([]string, 0, len(results.NonFatalErrors))
		for _, e := range results.NonFatalErrors {
			msgs = append(msgs, e.Error.Error())
		}
		return &loadedPolicy{refused: strings.Join(msgs, "; ")}
	}
	count := len(results.Policies) + len(results.MutatingPolicies) + len(results.PolicyCelExceptions)
	others := len(results.VAPs) + len(results.VAPBindings) + len(results.MAPs) + len(results.MAPBindings) +
		len(results.ValidatingPolicies) + len(results.ImageValidatingPolicies) + len(results.GeneratingPolicies) +
		len(results.DeletingPolicies) + len(results.CleanupPolicies) + len(results.PolicyExceptions) +
		len(results.EnvoyPolicies) + len(results.HTTPPolicies)
	if count != 1 || others != 0 {
		return &loadedPolicy{invalid: fmt.Sprintf("a policy document must be one kyverno.io ClusterPolicy/Policy, one policies.kyverno.io MutatingPolicy/NamespacedMutatingPolicy or one policies.kyverno.io PolicyException (found %d of those and %d others)", count, others)}
	}
	if len(results.PolicyCelExceptions) == 1 {
		// Kyverno's engine reads an exception when it compiles the policies it names
		// (mpol engine.NewProvider): nothing more is validated here.
		return &loadedPolicy{exception: results.PolicyCelExceptions[0]}
	}
	if len(results.Policies) == 1 {
		pol := results.Policies[0]
		// as `kyverno test` does before applying (it skips an invalid policy)
		sa := config.KyvernoUserName(config.KyvernoServiceAccountName())
		if _, err := policyvalidation.Validate(pol, nil, nil, true, sa, sa); err != nil {
			return &loadedPolicy{refused: err.Error()}
		}
		return &loadedPolicy{kyverno: pol}
	}
	mpol := results.MutatingPolicies[0]
	// as Kyverno's policy webhook does (the CLI does not: it fails on the first case)
	if _, err := mpolvalidation.Validate(mpol); err != nil {
		return &loadedPolicy{refused: err.Error()}
	}
	return &loadedPolicy{mpol: mpol}
}

func (o *Oracle) mpolProvider(key string, mpols []policiesv1beta1.MutatingPolicyLike, exceptions []*policiesv1beta1.PolicyException, libsCtx libs.Context) providerEntry {
	if entry, ok := o.providers[key]; ok {
		return entry
	}
	var entry providerEntry
	provider, err := mpolengine.NewProvider(mpolcompiler.NewCompiler(), mpols, exceptions, libsCtx)
	if err != nil {
		entry.refused = err.Error()
	} else {
		entry.provider = provider
	}
	if len(o.providers) >= 512 {
		o.providers = map[string]providerEntry{}
	}
	o.providers[key] = entry
	return entry
}

// cluster builds (or reuses) the fake cluster holding the case's resources: the CLI's
// fake dynamic client for apiCall and configMap entries, and the CEL libraries' fake
// context provider for resource.Get/List.
func (o *Oracle) cluster(raws []json.RawMessage) (*fakeCluster, error) {
	if len(raws) == 0 {
		return nil, nil
	}
	h := sha256.New()
	for _, raw := range raws {
		h.Write(raw)
		h.Write([]byte{0})
	}
	key := string(h.Sum(nil))
	if fc, ok := o.clusters[key]; ok {
		return fc, nil
	}
	o.clusterSeq++
	fc := &fakeCluster{id: o.clusterSeq, celContext: libs.NewFakeContextProvider()}
	for i, raw := range raws {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
		if fc.holds(&u) {
			return nil, fmt.Errorf("resources[%d]: %s given twice", i, objectKey(&u))
		}
		fc.objects = append(fc.objects, &u)
		gvk := u.GroupVersionKind()
		var gvr schema.GroupVersionResource
		if mapping, err := o.restMapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			gvr = mapping.Resource
		} else {
			gvr, _ = meta.UnsafeGuessKindToResource(gvk)
		}
		if err := fc.celContext.AddResource(gvr, &u); err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
	}
	if len(o.clusters) >= 256 {
		o.clusters = map[string]*fakeCluster{}
	}
	o.clusters[key] = fc
	return fc, nil
}

// valuesSpec builds the values file the CLI would be given for this case.
func (o *Oracle) valuesSpec(c *Case, resource *unstructured.Unstructured, fc *fakeCluster, operation string) (*v1alpha1.ValuesSpec, error) {
	spec := &v1alpha1.ValuesSpec{}
	if len(c.ValuesFile) > 0 && !bytes.Equal(bytes.TrimSpace(c.ValuesFile), []byte("null")) {
		var values v1alpha1.Values
		dec := json.NewDecoder(bytes.NewReader(c.ValuesFile))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&values); err != nil {
			return nil, fmt.Errorf("values_file: %w", err)
		}
		spec = &values.ValuesSpec
	}
	if len(c.Values) > 0 || operation == "CONNECT" {
		global := map[string]any{}
		for k, v := range spec.GlobalValues {
			global[k] = v
		}
		for k, v := range c.Values {
			global[k] = v
		}
		if operation == "CONNECT" {
			global["request.operation"] = "CONNECT"
		}
		spec.GlobalValues = global
	}
	if ns := resource.GetNamespace(); ns != "" {
		labels, given := c.NamespaceLabels, c.NamespaceLabels != nil
		// as the CLI with clusterResources: labels from the values, else the Namespace object
		if !given && fc != nil && !hasNamespace(spec, ns) {
			for _, obj := range fc.objects {
				if obj.GetKind() == "Namespace" && obj.GetAPIVersion() == "v1" && obj.GetName() == ns {
					labels, given = obj.GetLabels(), true
				}
			}
		}
		if given {
			selectors := []v1alpha1.NamespaceSelector{{Name: ns, Labels: labels}}
			for _, s := range spec.NamespaceSelectors {
				if s.Name != ns {
					selectors = append(selectors, s)
				}
			}
			spec.NamespaceSelectors = selectors
			kept := spec.Namespaces[:0:0]
			for _, n := range spec.Namespaces {
				if n.Name != ns {
					kept = append(kept, n)
				}
			}
			spec.Namespaces = kept
		}
	}
	if c.Subresource != "" {
		parent, err := o.parentOf(c, resource.GroupVersionKind())
		if err != nil {
			return nil, err
		}
		mapping, err := o.restMapper.RESTMapping(parent.GroupKind(), parent.Version)
		if err != nil {
			return nil, fmt.Errorf("parent %s: %w", parent, err)
		}
		gvk := resource.GroupVersionKind()
		spec.Subresources = append([]v1alpha1.Subresource{{
			Subresource: metav1.APIResource{Name: mapping.Resource.Resource + "/" + c.Subresource,
				Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			ParentResource: metav1.APIResource{Name: mapping.Resource.Resource,
				Group: parent.Group, Version: parent.Version, Kind: parent.Kind},
		}}, spec.Subresources...)
	}
	return spec, nil
}

// parentOf is the kind whose subresource the resource is: the case's parent, else the
// Pod for the Pod subresources, else the resource's own kind for status.
func (o *Oracle) parentOf(c *Case, gvk schema.GroupVersionKind) (schema.GroupVersionKind, error) {
	if c.Parent != nil {
		return schema.GroupVersionKind(*c.Parent), nil
	}
	switch c.Subresource {
	case "binding", "eviction", "ephemeralcontainers", "resize", "exec", "attach", "portforward", "log", "proxy":
		return schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, nil
	case "status":
		return gvk, nil
	}
	return schema.GroupVersionKind{}, errors.New("subresource " + c.Subresource + ": give its parent kind as parent {group, version, kind}")
}

// requestResource is the resource and subresource of the admission request a
// MutatingPolicy sees: the parent's resource for a subresource, else the resource's own.
func (o *Oracle) requestResource(c *Case, gvk schema.GroupVersionKind) (schema.GroupVersionResource, string, error) {
	kind := gvk
	if c.Subresource != "" {
		parent, err := o.parentOf(c, gvk)
		if err != nil {
			return schema.GroupVersionResource{}, "", err
		}
		kind = parent
	}
	mapping, err := o.restMapper.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		// the CLI's fallback outside a cluster (PolicyProcessor.resolveResource)
		guessed, _ := meta.UnsafeGuessKindToResource(kind)
		if guessed.Resource == "" {
			return schema.GroupVersionResource{}, "", fmt.Errorf("failed to map gvk to gvr %s: %w", kind, err)
		}
		return guessed, c.Subresource, nil
	}
	return mapping.Resource, c.Subresource, nil
}

func hasNamespace(spec *v1alpha1.ValuesSpec, name string) bool {
	for _, s := range spec.NamespaceSelectors {
		if s.Name == name {
			return true
		}
	}
	for _, n := range spec.Namespaces {
		if n.Name == name {
			return true
		}
	}
	return false
}
