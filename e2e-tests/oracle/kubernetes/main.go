// The Kubernetes judge of `make differential`: answers each case (one JSON
// object a line on stdin, one answer a line on stdout) as kube-apiserver's own
// code would, by calling k8s.io/apiserver in-process:
//
//   - "cel": an expression, with its variables, compiled as a
//     MutatingAdmissionPolicy's expressions are (Kubernetes' CEL libraries,
//     the admission variables, composited `variables`) and evaluated over the
//     case's object, oldObject, params and namespace;
//   - "mutate": a MutatingAdmissionPolicy run as the mutating dispatcher runs
//     it: matchConditions, then each mutation on the object the one before left
//     (a failed mutation is recorded and the next one still runs), without
//     defaulting;
//   - "normalize": an object decoded into its built-in type and encoded back,
//     as the API server does with a webhook's patched object, so that answers
//     compare field by field.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/mutation/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi/openapitest"
)

type resourceRef struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

type namedExpression struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
}

type caseIn struct {
	ID          string            `json:"id"`
	Op          string            `json:"op"`
	Expression  string            `json:"expression"`
	Variables   []namedExpression `json:"variables"`
	Object      json.RawMessage   `json:"object"`
	OldObject   json.RawMessage   `json:"oldObject"`
	Params      json.RawMessage   `json:"params"`
	Namespace   json.RawMessage   `json:"namespace"`
	Operation   string            `json:"operation"`
	Resource    resourceRef       `json:"resource"`
	SubResource string            `json:"subResource"`
	Policy      json.RawMessage   `json:"policy"`
}

type answer struct {
	ID      string   `json:"id"`
	Status  string   `json:"status"`
	Value   any      `json:"value,omitempty"`
	Object  any      `json:"object,omitempty"`
	Errors  []string `json:"errors,omitempty"`
	Message string   `json:"message,omitempty"`
	// Cost is what the evaluation spent in cel-go's runtime cost model:
	// the expression's and the variables' it read.
	Cost *int64 `json:"cost,omitempty"`
}

// anyExpression is an expression of any result type.
type anyExpression struct{ expression string }

func (e anyExpression) GetExpression() string    { return e.expression }
func (e anyExpression) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }

type variable struct{ namedExpression }

func (v variable) GetExpression() string    { return v.Expression }
func (v variable) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }
func (v variable) GetName() string          { return v.Name }

// allowAll answers every authorizer check with "allowed", as a cluster-admin's
// request would be answered.
type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

var typeConverters patch.TypeConverterManager

func main() {
	ctx := context.Background()
	typeConverters = patch.NewTypeConverterManager(nil, openapitest.NewEmbeddedFileClient())
	go typeConverters.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for typeConverters.GetTypeConverter(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}) == nil {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "oracle: no type converter for v1/Pod")
			os.Exit(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	limit := caseLimit()
	for in.Scan() {
		var c caseIn
		var a answer
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			a = answer{Status: "bad_case", Message: err.Error()}
		} else {
			a = answerWithin(&c, limit)
			a.ID = c.ID
		}
		if err := encoder.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(1)
		}
		// Answered at once: the runner may wait for this answer before
		// sending the next case.
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
}

// caseLimit is how long one case may take: DIFFERENTIAL_CASE_SECONDS, 20 s
// unless set.
func caseLimit() time.Duration {
	seconds, err := strconv.ParseFloat(os.Getenv("DIFFERENTIAL_CASE_SECONDS"), 64)
	if err != nil || seconds <= 0 {
		seconds = 20
	}
	return time.Duration(seconds * float64(time.Second))
}

// answerWithin is the case's answer, or "timeout" when it takes longer than
// limit. The case is abandoned, not stopped: its goroutine may go on, and the
// runner fails the run on the timeout anyway.
func answerWithin(c *caseIn, limit time.Duration) answer {
	done := make(chan answer, 1)
	go func() { done <- answerCase(c) }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case a := <-done:
		return a
	case <-timer.C:
		return answer{Status: "timeout", Message: fmt.Sprintf("no answer within %s", limit)}
	}
}

func answerCase(c *caseIn) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			a = answer{Status: "panic", Message: fmt.Sprint(r)}
		}
	}()
	switch c.Op {
	case "cel":
		return evaluate(c)
	case "mutate":
		return mutate(c)
	case "normalize":
		object, err := typedObject(c.Object)
		if err != nil {
			return answer{Status: "error", Message: err.Error()}
		}
		encoded, err := runtime.DefaultUnstructuredConverter.ToUnstructured(object)
		if err != nil {
			return answer{Status: "error", Message: err.Error()}
		}
		return answer{Status: "normalized", Object: encoded, Errors: invalidMetadata(object)}
	}
	return answer{Status: "bad_case", Message: "unknown op " + strconv.Quote(c.Op)}
}

// typedObject decodes JSON into the built-in type its apiVersion and kind
// name, as the API server holds an admitted object.
func typedObject(raw json.RawMessage) (runtime.Object, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	decoded, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		return nil, err
	}
	// Decoding into the internal-free client scheme keeps the external version.
	gvk := decoded.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		return nil, errors.New("object without apiVersion and kind")
	}
	decoded.GetObjectKind().SetGroupVersionKind(gvk)
	return decoded, nil
}

func namespaceOf(raw json.RawMessage) (*corev1.Namespace, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var namespace corev1.Namespace
	if err := json.Unmarshal(raw, &namespace); err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	return &namespace, nil
}

func paramsOf(raw json.RawMessage) (runtime.Object, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var params unstructured.Unstructured
	if err := params.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	return &params, nil
}

// attributes builds the admission request for the case's object as the API
// server's admission chain sees it.
func attributes(c *caseIn, object, oldObject runtime.Object) (*admission.VersionedAttributes, schema.GroupVersionResource, error) {
	gvr := schema.GroupVersionResource{Group: c.Resource.Group, Version: c.Resource.Version, Resource: c.Resource.Resource}
	var gvk schema.GroupVersionKind
	var name, namespace string
	for _, o := range []runtime.Object{object, oldObject} {
		if o == nil {
			continue
		}
		gvk = o.GetObjectKind().GroupVersionKind()
		if accessor, ok := o.(metav1.Object); ok {
			name, namespace = accessor.GetName(), accessor.GetNamespace()
		}
		break
	}
	operation := admission.Operation(c.Operation)
	if operation == "" {
		operation = admission.Create
	}
	var options runtime.Object = &metav1.CreateOptions{}
	if operation == admission.Update {
		options = &metav1.UpdateOptions{}
	}
	userInfo := &user.DefaultInfo{Name: "system:kube-scheduler", Groups: []string{"system:authenticated"}}
	attrs := admission.NewAttributesRecord(object, oldObject, gvk, namespace, name, gvr,
		c.SubResource, operation, options, false, userInfo)
	return &admission.VersionedAttributes{
		Attributes:         attrs,
		VersionedKind:      gvk,
		VersionedObject:    admission.NewLazyObject(object),
		VersionedOldObject: admission.NewLazyObject(oldObject),
	}, gvr, nil
}

// inputs are a case's objects decoded, and a fresh compiler.
type inputs struct {
	object, oldObject, params runtime.Object
	namespace                 *corev1.Namespace
	compiler                  *plugincel.CompositedCompiler
}

func inputsOf(c *caseIn) (in inputs, err error) {
	if in.object, err = typedObject(c.Object); err != nil {
		return in, fmt.Errorf("object: %w", err)
	}
	if in.oldObject, err = typedObject(c.OldObject); err != nil {
		return in, fmt.Errorf("oldObject: %w", err)
	}
	if in.namespace, err = namespaceOf(c.Namespace); err != nil {
		return in, err
	}
	if in.params, err = paramsOf(c.Params); err != nil {
		return in, err
	}
	in.compiler, err = newCompiler()
	return in, err
}

func newCompiler() (*plugincel.CompositedCompiler, error) {
	return plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
}

// compileErrors compiles the expressions as the API server validates a new
// policy (environment.NewExpressions): what it refuses, a user cannot create.
func compileErrors(variables []namedExpression, expressions []plugincel.ExpressionAccessor, options plugincel.OptionalVariableDeclarations) []string {
	compiler, err := newCompiler()
	if err != nil {
		return []string{err.Error()}
	}
	var errs []string
	for _, v := range variables {
		result := compiler.CompileAndStoreVariable(variable{v}, options, environment.NewExpressions)
		if result.Error != nil {
			errs = append(errs, "variables "+v.Name+": "+result.Error.Error())
		}
	}
	for _, e := range expressions {
		evaluator := compiler.CompileMutatingEvaluator(e, options, environment.NewExpressions)
		for _, err := range evaluator.CompilationErrors() {
			errs = append(errs, err.Error())
		}
	}
	return errs
}

func storedVariables(variables []namedExpression) []plugincel.NamedExpressionAccessor {
	var named []plugincel.NamedExpressionAccessor
	for _, v := range variables {
		named = append(named, variable{v})
	}
	return named
}

func evaluate(c *caseIn) answer {
	options := plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}
	if errs := compileErrors(c.Variables, []plugincel.ExpressionAccessor{anyExpression{c.Expression}}, options); len(errs) > 0 {
		return answer{Status: "compile_error", Errors: errs}
	}
	in, err := inputsOf(c)
	if err != nil {
		return answer{Status: "bad_case", Message: err.Error()}
	}
	object, oldObject, namespace, params, compiler := in.object, in.oldObject, in.namespace, in.params, in.compiler
	compiler.CompileAndStoreVariables(storedVariables(c.Variables), options, environment.StoredExpressions)
	evaluator := compiler.CompileMutatingEvaluator(anyExpression{c.Expression}, options, environment.StoredExpressions)
	versioned, gvr, err := attributes(c, object, oldObject)
	if err != nil {
		return answer{Status: "bad_case", Message: err.Error()}
	}
	request := plugincel.CreateAdmissionRequest(versioned.Attributes, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(versioned.VersionedKind))
	ctx := compiler.CreateContext(context.Background())
	bindings := plugincel.OptionalVariableBindings{VersionedParams: params, Authorizer: allowAll{}}
	result, remaining, err := evaluator.ForInput(ctx, versioned, request, bindings, namespace, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return answer{Status: "eval_error", Message: err.Error()}
	}
	cost := celconfig.RuntimeCELCostBudget - remaining
	if result.Error != nil {
		return answer{Status: "eval_error", Message: result.Error.Error(), Cost: &cost}
	}
	value, err := typedValue(result.EvalResult)
	if err != nil {
		return answer{Status: "eval_error", Message: err.Error()}
	}
	return answer{Status: "value", Value: value, Cost: &cost}
}

func mutate(c *caseIn) answer {
	var policy admissionregistrationv1.MutatingAdmissionPolicy
	if err := json.Unmarshal(c.Policy, &policy); err != nil {
		return answer{Status: "refused", Message: "policy: " + err.Error()}
	}
	options := plugincel.OptionalVariableDeclarations{HasParams: policy.Spec.ParamKind != nil, HasAuthorizer: true}
	patchOptions := options
	patchOptions.HasPatchTypes = true
	var variables []namedExpression
	for _, v := range policy.Spec.Variables {
		variables = append(variables, namedExpression{v.Name, v.Expression})
	}
	var conditions []plugincel.ExpressionAccessor
	for i := range policy.Spec.MatchConditions {
		conditions = append(conditions, (*matchconditions.MatchCondition)(&policy.Spec.MatchConditions[i]))
	}
	var mutations []plugincel.ExpressionAccessor
	for _, m := range policy.Spec.Mutations {
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			mutations = append(mutations, &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression})
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			mutations = append(mutations, &patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression})
		}
	}
	errs := compileErrors(variables, conditions, options)
	errs = append(errs, compileErrors(variables, mutations, patchOptions)...)
	if len(errs) > 0 {
		return answer{Status: "refused", Errors: errs}
	}
	in, err := inputsOf(c)
	if err != nil {
		return answer{Status: "bad_case", Message: err.Error()}
	}
	object, oldObject, namespace, params, compiler := in.object, in.oldObject, in.namespace, in.params, in.compiler
	compiler.CompileAndStoreVariables(storedVariables(variables), options, environment.StoredExpressions)
	versioned, gvr, err := attributes(c, object, oldObject)
	if err != nil {
		return answer{Status: "bad_case", Message: err.Error()}
	}
	ctx := compiler.CreateContext(context.Background())
	bindings := plugincel.OptionalVariableBindings{VersionedParams: params, Authorizer: allowAll{}}
	if len(conditions) > 0 {
		failurePolicy := policy.Spec.FailurePolicy
		matcher := matchconditions.NewMatcher(compiler.CompileCondition(conditions, options, environment.StoredExpressions), failurePolicy, "policy", "validate", policy.Name)
		matched := matcher.Match(ctx, versioned, params, allowAll{})
		if matched.Error != nil {
			return answer{Status: "error", Errors: []string{matched.Error.Error()}}
		}
		if !matched.Matches {
			return answer{Status: "skipped"}
		}
	}
	converter := typeConverters.GetTypeConverter(versioned.VersionedKind)
	if converter == nil {
		return answer{Status: "bad_case", Message: "no schema for " + versioned.VersionedKind.String()}
	}
	interfaces := admission.NewObjectInterfacesFromScheme(scheme.Scheme)
	for i, m := range policy.Spec.Mutations {
		var patcher patch.Patcher
		if m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil {
			patcher = patch.NewJSONPatcher(compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, patchOptions, environment.StoredExpressions))
		} else if m.ApplyConfiguration != nil {
			patcher = patch.NewApplyConfigurationPatcher(compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, patchOptions, environment.StoredExpressions))
		} else {
			continue
		}
		if err := dispatchOne(ctx, patcher, interfaces, versioned, namespace, gvr, converter, bindings); err != nil {
			errs = append(errs, fmt.Sprintf("mutations[%d]: %v", i, err))
		}
	}
	encoded, err := runtime.DefaultUnstructuredConverter.ToUnstructured(versioned.VersionedObject.Object())
	if err != nil {
		return answer{Status: "bad_case", Message: err.Error()}
	}
	if invalid := invalidMetadata(versioned.VersionedObject.Object()); len(invalid) > 0 {
		return answer{Status: "invalid", Object: encoded, Errors: append(errs, invalid...)}
	}
	return answer{Status: "patched", Object: encoded, Errors: errs}
}

// invalidMetadata is what the API server's validation, after admission, says
// of the object's labels and annotations: the part of it every kind shares.
func invalidMetadata(object runtime.Object) []string {
	accessor, ok := object.(metav1.Object)
	if !ok {
		return nil
	}
	metadata := field.NewPath("metadata")
	errs := metav1validation.ValidateLabels(accessor.GetLabels(), metadata.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(accessor.GetAnnotations(), metadata.Child("annotations"))...)
	var messages []string
	for _, err := range errs {
		messages = append(messages, "invalid: "+err.Error())
	}
	return messages
}

// dispatchOne applies one patcher as the mutating dispatcher does, less the
// defaulting (the client scheme registers no defaulters).
func dispatchOne(ctx context.Context, patcher patch.Patcher, o admission.ObjectInterfaces, versioned *admission.VersionedAttributes,
	namespace *corev1.Namespace, gvr schema.GroupVersionResource, converter managedfields.TypeConverter, bindings plugincel.OptionalVariableBindings) error {
	request := patch.Request{
		MatchedResource:     gvr,
		VersionedAttributes: versioned,
		ObjectInterfaces:    o,
		OptionalVariables:   bindings,
		Namespace:           namespace,
		TypeConverter:       converter,
	}
	patched, err := patcher.Patch(ctx, request, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return err
	}
	if _, ok := patched.(*unstructured.Unstructured); ok {
		patched, err = o.GetObjectConvertor().ConvertToVersion(patched, versioned.GetKind().GroupVersion())
		if err != nil {
			return err
		}
	}
	versioned.UpdateObject(patched)
	return nil
}

// typedValue encodes a CEL value with its type, so that 1, 1u and 1.0 stay
// apart: {"int": "1"}, {"uint": "1"}, {"double": 1}; lists and maps nest.
func typedValue(v ref.Val) (any, error) {
	switch value := v.(type) {
	case *types.Err:
		return nil, value
	case types.Null:
		return map[string]any{"null": nil}, nil
	case types.Bool:
		return map[string]any{"bool": bool(value)}, nil
	case types.Int:
		return map[string]any{"int": strconv.FormatInt(int64(value), 10)}, nil
	case types.Uint:
		return map[string]any{"uint": strconv.FormatUint(uint64(value), 10)}, nil
	case types.Double:
		return map[string]any{"double": double(float64(value))}, nil
	case types.String:
		return map[string]any{"string": string(value)}, nil
	case types.Bytes:
		return map[string]any{"bytes": base64.StdEncoding.EncodeToString(value)}, nil
	case types.Duration:
		return map[string]any{"duration": strconv.FormatInt(value.Duration.Nanoseconds(), 10)}, nil
	case types.Timestamp:
		t := value.Time.UTC()
		return map[string]any{"timestamp": fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())}, nil
	case *types.Optional:
		if !value.HasValue() {
			return map[string]any{"optional_none": true}, nil
		}
		inner, err := typedValue(value.GetValue())
		if err != nil {
			return nil, err
		}
		return map[string]any{"optional": inner}, nil
	case ref.Type:
		return map[string]any{"type": value.TypeName()}, nil
	case *dynamic.ObjectVal:
		return map[string]any{"object": value.Type().TypeName(), "fields": value.Value()}, nil
	case apiservercel.IP, apiservercel.CIDR, apiservercel.Quantity, apiservercel.Semver, apiservercel.URL:
		return map[string]any{"opaque": v.Type().TypeName(), "string": fmt.Sprint(v.Value())}, nil
	}
	if unknown, ok := v.(*types.Unknown); ok {
		return nil, fmt.Errorf("unknown value %v", unknown)
	}
	if mapper, ok := v.(traits.Mapper); ok {
		var entries [][2]any
		it := mapper.Iterator()
		for it.HasNext() == types.True {
			key := it.Next()
			k, err := typedValue(key)
			if err != nil {
				return nil, err
			}
			e, err := typedValue(mapper.Get(key))
			if err != nil {
				return nil, err
			}
			entries = append(entries, [2]any{k, e})
		}
		sort.Slice(entries, func(i, j int) bool {
			a, _ := json.Marshal(entries[i][0])
			b, _ := json.Marshal(entries[j][0])
			return string(a) < string(b)
		})
		if entries == nil {
			entries = [][2]any{}
		}
		return map[string]any{"map": entries}, nil
	}
	if lister, ok := v.(traits.Lister); ok {
		size, ok := lister.Size().(types.Int)
		if !ok {
			return nil, errors.New("list without size")
		}
		items := make([]any, 0, int(size))
		for i := types.Int(0); i < size; i++ {
			item, err := typedValue(lister.Get(i))
			if err != nil {
				return nil, err
			}
			items = append(items, item)
		}
		return map[string]any{"list": items}, nil
	}
	return map[string]any{"other": v.Type().TypeName(), "string": fmt.Sprint(v.Value())}, nil
}

// double keeps NaN and the infinities, which JSON has no numbers for.
func double(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}
