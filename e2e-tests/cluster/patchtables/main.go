// Command patchtables writes the cases of kubernetes/apiserver's own table
// tests of MutatingAdmissionPolicy patches (TestJSONPatch in
// json_patch_test.go, TestApplyConfiguration in smd_test.go, package
// pkg/admission/plugin/policy/mutating/patch) as a JSON list, from the module
// this folder's go.mod requires.
//
// The tables are Go composite literals built inside the test functions, so
// they are read by running them: each test file is parsed, the loop over its
// table gets a first statement that records the case and moves on, and the
// package's tests run in a copy of the package, in a temporary module with
// this module's go.mod and go.sum (the go command refuses an overlay over the
// module cache). Nothing is written in the module cache or in the work tree.
//
// Each case: {file, name, patchType, expression, object, oldObject, expected,
// error}, objects as Go's JSON encoding of the typed values.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

const patchPackage = "k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"

// table is one test function whose `for _, tc := range tests` loop is the table.
type table struct {
	file, function, patchType string
}

var tables = []table{
	{"json_patch_test.go", "TestJSONPatch", "JSONPatch"},
	{"smd_test.go", "TestApplyConfiguration", "ApplyConfiguration"},
}

// recorder is added to the package under test: it appends one case a line.
const recorder = `package patch

import (
	"encoding/json"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
)

func recordTableCase(file, patchType, name, expression string, object, oldObject, expected runtime.Object, expectedErr string) {
	line, err := json.Marshal(map[string]any{
		"file": file, "patchType": patchType, "name": name, "expression": expression,
		"object": object, "oldObject": oldObject, "expected": expected, "error": expectedErr,
	})
	if err != nil {
		panic(err)
	}
	out, err := os.OpenFile(os.Getenv("PATCH_TABLE_CASES"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	defer out.Close()
	if _, err := out.Write(append(line, '\n')); err != nil {
		panic(err)
	}
}
`

func main() {
	outPath := flag.String("out", "", "where to write the JSON list of cases")
	flag.Parse()
	if *outPath == "" {
		fail(fmt.Errorf("usage: go run ./patchtables -out cases.json"))
	}
	if err := run(*outPath); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "patchtables:", err)
	os.Exit(1)
}

func run(outPath string) error {
	dir, err := exec.Command("go", "list", "-f", "{{.Dir}}", patchPackage).Output()
	if err != nil {
		return fmt.Errorf("go list %s: %w", patchPackage, err)
	}
	packageDir := strings.TrimSpace(string(dir))
	work, err := os.MkdirTemp("", "patchtables-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// The module: this one's requirements, so that the copy builds against
	// exactly the versions the reference control plane is built from.
	for _, name := range []string{"go.mod", "go.sum"} {
		if err := copyFile(name, filepath.Join(work, name)); err != nil {
			return err
		}
	}
	copyDir := filepath.Join(work, "patch")
	if err := os.Mkdir(copyDir, 0o755); err != nil {
		return err
	}
	sources, err := filepath.Glob(filepath.Join(packageDir, "*.go"))
	if err != nil {
		return err
	}
	for _, source := range sources {
		if err := copyFile(source, filepath.Join(copyDir, filepath.Base(source))); err != nil {
			return err
		}
	}
	var functions []string
	for _, t := range tables {
		rewritten, err := recordingTest(filepath.Join(packageDir, t.file), t)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(copyDir, t.file), rewritten, 0o644); err != nil {
			return err
		}
		functions = append(functions, t.function)
	}
	if err := os.WriteFile(filepath.Join(copyDir, "zz_record_test.go"), []byte(recorder), 0o644); err != nil {
		return err
	}

	recorded := filepath.Join(work, "cases.jsonl")
	test := exec.Command("go", "test", "-count=1", "-vet=off",
		"-run", "^("+strings.Join(functions, "|")+")$", "./patch")
	test.Dir = work
	test.Env = append(os.Environ(), "PATCH_TABLE_CASES="+recorded)
	if out, err := test.CombinedOutput(); err != nil {
		return fmt.Errorf("go test of %s with the recording tables: %w\n%s", patchPackage, err, out)
	}
	return writeList(recorded, outPath)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

// recordingTest is the test file with the table loop of t.function starting
// with `recordTableCase(...); continue`.
func recordingTest(path string, t table) ([]byte, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	loop := tableLoop(file, t.function)
	if loop == nil {
		return nil, fmt.Errorf("%s: no `for _, tc := range tests` loop in %s: the table's layout changed", path, t.function)
	}
	tc := loop.Value.(*ast.Ident).Name
	field := func(name string) ast.Expr {
		return &ast.SelectorExpr{X: ast.NewIdent(tc), Sel: ast.NewIdent(name)}
	}
	record := &ast.ExprStmt{X: &ast.CallExpr{
		Fun: ast.NewIdent("recordTableCase"),
		Args: []ast.Expr{
			&ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(t.file)},
			&ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(t.patchType)},
			field("name"), field("expression"), field("object"), field("oldObject"),
			field("expectedResult"), field("expectedErr"),
		},
	}}
	loop.Body.List = append([]ast.Stmt{record, &ast.BranchStmt{Tok: token.CONTINUE}}, loop.Body.List...)
	var out bytes.Buffer
	if err := format.Node(&out, fset, file); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// tableLoop finds, in the body of the named function, the range loop over
// the identifier `tests` whose value variable is an identifier.
func tableLoop(file *ast.File, function string) *ast.RangeStmt {
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Name.Name != function || fn.Body == nil {
			continue
		}
		for _, stmt := range fn.Body.List {
			loop, ok := stmt.(*ast.RangeStmt)
			if !ok {
				continue
			}
			over, ok := loop.X.(*ast.Ident)
			if _, named := loop.Value.(*ast.Ident); ok && named && over.Name == "tests" {
				return loop
			}
		}
	}
	return nil
}

// writeList turns the recorded lines into one JSON list, empty objects and
// errors left out as the cases' readers expect.
func writeList(recorded, outPath string) error {
	in, err := os.Open(recorded)
	if err != nil {
		return fmt.Errorf("no case was recorded: %w", err)
	}
	defer in.Close()
	var cases []map[string]any
	lines := bufio.NewScanner(in)
	lines.Buffer(nil, 16<<20)
	for lines.Scan() {
		var c map[string]any
		if err := json.Unmarshal(lines.Bytes(), &c); err != nil {
			return err
		}
		for _, key := range []string{"oldObject", "expected"} {
			if c[key] == nil {
				delete(c, key)
			}
		}
		if c["error"] == "" {
			delete(c, "error")
		}
		cases = append(cases, c)
	}
	if err := lines.Err(); err != nil {
		return err
	}
	if len(cases) == 0 {
		return fmt.Errorf("no case was recorded")
	}
	out, err := json.MarshalIndent(cases, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(outPath, append(out, '\n'), 0o644)
}
