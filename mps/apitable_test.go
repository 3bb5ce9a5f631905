package mps

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// This file is the API table check: every class and selector that mps
// sends must exist in Apple's API (testdata/apple-api, from Apple's
// headers) on the class or protocol named at registration or one of its
// ancestors, with as many arguments as the selector has colons and as the
// Go call passes.

const apiDir = "../testdata/apple-api"

// nsObjectMethods are NSObject's methods, which the tables leave out (their
// README, caveat 2); every class and protocol inherits them.
var nsObjectMethods = map[string]map[string]bool{
	"instance": {"retain": true, "release": true, "autorelease": true, "retainCount": true, "respondsToSelector:": true,
		"isKindOfClass:": true, "conformsToProtocol:": true, "class": true, "description": true, "hash": true, "isEqual:": true, "self": true},
	"class": {"alloc": true, "new": true, "class": true},
}

type apiType struct {
	kind       string // class or protocol
	superclass string
	protocols  []string
}

type methodKey struct{ owner, kind, selector string }

type apiTables struct {
	types   map[string]apiType
	methods map[methodKey]int // argument count
}

func readTSV(t testing.TB, name string, row func(h map[string]int, cols []string)) {
	t.Helper()
	f, err := os.Open(filepath.Join(apiDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	h := map[string]int{}
	for first := true; sc.Scan(); first = false {
		cols := strings.Split(sc.Text(), "\t")
		if first {
			for i, c := range cols {
				h[c] = i
			}
			continue
		}
		row(h, cols)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func loadAPI(t testing.TB) *apiTables {
	t.Helper()
	api := &apiTables{types: map[string]apiType{}, methods: map[methodKey]int{}}
	readTSV(t, "classes.tsv", func(h map[string]int, c []string) {
		ty := apiType{kind: c[h["kind"]], superclass: c[h["superclass"]]}
		if p := c[h["protocols"]]; p != "" {
			ty.protocols = strings.Split(p, ",")
		}
		api.types[c[h["name"]]] = ty
	})
	for _, file := range []string{"metal.tsv", "mps.tsv", "mpsgraph.tsv", "foundation.tsv"} {
		readTSV(t, file, func(h map[string]int, c []string) {
			n, err := strconv.Atoi(c[h["arg_count"]])
			if err != nil {
				t.Fatalf("%s: arg_count %q: %v", file, c[h["arg_count"]], err)
			}
			api.methods[methodKey{c[h["objc_class"]], c[h["kind"]], c[h["selector"]]}] = n
		})
	}
	if len(api.types) < 500 || len(api.methods) < 6000 {
		t.Fatalf("tables in %s look truncated: %d types, %d methods", apiDir, len(api.types), len(api.methods))
	}
	return api
}

// lookup finds selector among owner's methods of kind, walking superclasses
// and protocols breadth first; it returns where it was declared.
func (api *apiTables) lookup(owner, kind, selector string) (declaredOn string, args int, ok bool) {
	seen := map[string]bool{}
	queue := []string{owner}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		if n, ok := api.methods[methodKey{name, kind, selector}]; ok {
			return name, n, true
		}
		if name == "NSObject" && nsObjectMethods[kind][selector] {
			return "NSObject", strings.Count(selector, ":"), true
		}
		ty := api.types[name]
		if ty.superclass != "" {
			queue = append(queue, ty.superclass)
		}
		queue = append(queue, ty.protocols...)
	}
	return "", 0, false
}

// registration is one registerSel, registerClassSel or registerClass call.
type registration struct {
	pos      token.Position
	varName  string
	fn       string
	receiver string // class or protocol; the class name for registerClass
	selector string
}

// callUse is one Go call that passes a selector variable.
type callUse struct {
	pos  token.Position
	args int // arguments after the selector
}

// sourceFacts is what the check reads from the Go source of mps.
type sourceFacts struct {
	regs     []registration
	uses     map[string][]callUse
	mentions map[string]int
	problems []string
}

var registerFuncs = map[string]bool{"registerSel": true, "registerClassSel": true, "registerClass": true}

// collect reads the registrations and selector uses of the parsed files.
func collect(fset *token.FileSet, files []*ast.File) *sourceFacts {
	sf := &sourceFacts{uses: map[string][]callUse{}, mentions: map[string]int{}}
	inVar := map[*ast.CallExpr]bool{}
	for _, file := range files {
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					call, ok := v.(*ast.CallExpr)
					if !ok || i >= len(vs.Names) {
						continue
					}
					id, ok := call.Fun.(*ast.Ident)
					if !ok || !registerFuncs[id.Name] {
						continue
					}
					inVar[call] = true
					r := registration{pos: fset.Position(call.Pos()), varName: vs.Names[i].Name, fn: id.Name}
					var lits []string
					for _, a := range call.Args {
						lit, ok := a.(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							sf.problems = append(sf.problems, fmt.Sprintf("%s: %s takes literal strings only, so this test can read them", r.pos, id.Name))
							break
						}
						s, _ := strconv.Unquote(lit.Value)
						lits = append(lits, s)
					}
					switch {
					case len(lits) == 1 && id.Name == "registerClass":
						r.receiver = lits[0]
					case len(lits) == 2 && id.Name != "registerClass":
						r.receiver, r.selector = lits[0], lits[1]
					default:
						continue
					}
					sf.regs = append(sf.regs, r)
				}
			}
		}
	}
	selVars := map[string]bool{}
	for _, r := range sf.regs {
		if r.fn != "registerClass" {
			selVars[r.varName] = true
		}
		sf.mentions[r.varName] = 0
	}
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				return !registerFuncs[n.Name.Name] // registerClassSel calls registerSel
			case *ast.Ident:
				if _, ok := sf.mentions[n.Name]; ok {
					sf.mentions[n.Name]++
				}
			case *ast.CallExpr:
				pos := fset.Position(n.Pos())
				if id, ok := n.Fun.(*ast.Ident); ok && registerFuncs[id.Name] && !inVar[n] {
					sf.problems = append(sf.problems, fmt.Sprintf("%s: %s outside a package-level var", pos, id.Name))
				}
				if se, ok := n.Fun.(*ast.SelectorExpr); ok {
					switch se.Sel.Name {
					case "RegisterName", "GetClass", "RegisterSelector":
						for _, a := range n.Args {
							if lit, ok := a.(*ast.BasicLit); ok {
								sf.problems = append(sf.problems, fmt.Sprintf("%s: %s(%s) bypasses the registry in selectors.go", pos, se.Sel.Name, lit.Value))
							}
						}
					}
				}
				for i, a := range n.Args {
					if id, ok := a.(*ast.Ident); ok && selVars[id.Name] {
						if n.Ellipsis.IsValid() {
							sf.problems = append(sf.problems, fmt.Sprintf("%s: %s sent with args..., whose count cannot be checked", pos, id.Name))
						}
						sf.uses[id.Name] = append(sf.uses[id.Name], callUse{pos: pos, args: len(n.Args) - i - 1})
					}
				}
			}
			return true
		})
	}
	return sf
}

// checkAPI returns every registration or use that Apple's API tables
// contradict.
func checkAPI(api *apiTables, sf *sourceFacts) []string {
	problems := append([]string(nil), sf.problems...)
	for _, r := range sf.regs {
		if sf.mentions[r.varName] < 2 { // the declaration itself counts once
			problems = append(problems, fmt.Sprintf("%s: %s is registered but never used", r.pos, r.varName))
		}
		if r.fn == "registerClass" {
			if api.types[r.receiver].kind != "class" {
				problems = append(problems, fmt.Sprintf("%s: class %s is not a class in %s/classes.tsv", r.pos, r.receiver, apiDir))
			}
			continue
		}
		if _, known := api.types[r.receiver]; !known && r.receiver != "NSObject" {
			problems = append(problems, fmt.Sprintf("%s: %s: receiver %s is no class or protocol in %s/classes.tsv", r.pos, r.varName, r.receiver, apiDir))
			continue
		}
		kind := "instance"
		if r.fn == "registerClassSel" {
			kind = "class"
		}
		on, args, ok := api.lookup(r.receiver, kind, r.selector)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s: %s has no %s method %q, nor do its superclasses and protocols", r.pos, r.varName, r.receiver, kind, r.selector))
			continue
		}
		colons := strings.Count(r.selector, ":")
		if args != colons {
			problems = append(problems, fmt.Sprintf("%s: %s: %q has %d colons but %s declares %d arguments", r.pos, r.varName, r.selector, colons, on, args))
		}
		if len(sf.uses[r.varName]) == 0 {
			problems = append(problems, fmt.Sprintf("%s: %s is never sent", r.pos, r.varName))
		}
		for _, u := range sf.uses[r.varName] {
			if u.args != args {
				problems = append(problems, fmt.Sprintf("%s: %s (%q) sent with %d arguments, %s declares %d", u.pos, r.varName, r.selector, u.args, on, args))
			}
		}
	}
	return problems
}

func parseFiles(t *testing.T, fset *token.FileSet, sources map[string]string) []*ast.File {
	t.Helper()
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	sort.Strings(names)
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, sources[n], parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// TestSelectorsExistInAppleAPI is the check on this package's own source,
// every file whatever its build tags.
func TestSelectorsExistInAppleAPI(t *testing.T) {
	api := loadAPI(t)
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sources[p] = string(b)
	}
	fset := token.NewFileSet()
	sf := collect(fset, parseFiles(t, fset, sources))
	for _, p := range checkAPI(api, sf) {
		t.Error(p)
	}
	// The source reading must have found exactly what the package registers.
	var parsed, live []string
	for _, r := range sf.regs {
		parsed = append(parsed, r.receiver+" "+r.selector)
	}
	for _, s := range registeredSelectors {
		live = append(live, s.receiver+" "+s.name)
	}
	for _, c := range registeredClasses {
		live = append(live, c.name+" ")
	}
	sort.Strings(parsed)
	sort.Strings(live)
	if strings.Join(parsed, "\n") != strings.Join(live, "\n") {
		t.Errorf("selectors read from the source:\n%s\nregistered at run time:\n%s", strings.Join(parsed, "\n"), strings.Join(live, "\n"))
	}
	if len(sf.regs) < 30 {
		t.Errorf("only %d registrations found; the parser is missing some", len(sf.regs))
	}
}

// TestInheritanceWalk pins the facts the check relies on: methods declared
// on a super-protocol or superclass count for the receiver.
func TestInheritanceWalk(t *testing.T) {
	api := loadAPI(t)
	for _, c := range []struct {
		owner, kind, selector, declaredOn string
	}{
		{"MTLComputeCommandEncoder", "instance", "endEncoding", "MTLCommandEncoder"},
		{"MTLBuffer", "instance", "setLabel:", "MTLResource"},
		{"MTLBuffer", "instance", "release", "NSObject"},
		{"MPSMatrixMultiplication", "instance", "label", "MPSKernel"},
		{"MPSMatrixDescriptor", "class", "alloc", "MPSMatrixDescriptor"},
		{"NSString", "class", "alloc", "NSString"},
	} {
		on, _, ok := api.lookup(c.owner, c.kind, c.selector)
		if !ok || on != c.declaredOn {
			t.Errorf("lookup(%s, %s, %s) = %q, %v; want declared on %s", c.owner, c.kind, c.selector, on, ok, c.declaredOn)
		}
	}
	if on, _, ok := api.lookup("MTLCommandBuffer", "instance", "endEncoding"); ok {
		t.Errorf("endEncoding found on MTLCommandBuffer via %s; it is an encoder method", on)
	}
}

// TestAPICheckCatchesMistakes feeds the check source with one mistake each
// and expects it reported.
func TestAPICheckCatchesMistakes(t *testing.T) {
	api := loadAPI(t)
	for _, c := range []struct {
		name, src, want string
	}{
		{"invented selector", `var selX = registerSel("MTLDevice", "newBufferWithLength:options:zeroed:")
func f(b *bridge) { b.send(0, selX, 1, 2, 3) }`, `MTLDevice has no instance method "newBufferWithLength:options:zeroed:"`},
		{"selector on the wrong protocol", `var selX = registerSel("MTLCommandBuffer", "endEncoding")
func f(b *bridge) { b.send(0, selX) }`, `MTLCommandBuffer has no instance method "endEncoding"`},
		{"class method registered as instance", `var selX = registerSel("MPSMatrixDescriptor", "matrixDescriptorWithRows:columns:rowBytes:dataType:")
func f(b *bridge) { b.send(0, selX, 1, 2, 3, 4) }`, `has no instance method "matrixDescriptorWithRows`},
		{"unknown receiver", `var selX = registerSel("MTLGPU", "name")
func f(b *bridge) { b.send(0, selX) }`, "receiver MTLGPU is no class or protocol"},
		{"unknown class", `var classX = registerClass("MPSMatrixMultiply")
func f(b *bridge) { b.class(classX) }`, "class MPSMatrixMultiply is not a class"},
		{"too few Go arguments", `var selX = registerSel("MTLComputeCommandEncoder", "setBuffer:offset:atIndex:")
func f(b *bridge) { b.send(0, selX, 1, 2) }`, "sent with 2 arguments, MTLComputeCommandEncoder declares 3"},
		{"unused selector", `var selX = registerSel("MTLDevice", "name")`, "selX is registered but never used"},
		{"non-literal selector", `var name = "name"
var selX = registerSel("MTLDevice", name)
func f(b *bridge) { b.send(0, selX) }`, "takes literal strings only"},
		{"registry bypassed", `func f(m Messenger) { m.RegisterSelector("commit") }`, "bypasses the registry"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fset := token.NewFileSet()
			sf := collect(fset, parseFiles(t, fset, map[string]string{"bad.go": "package mps\n" + c.src}))
			problems := checkAPI(api, sf)
			if !strings.Contains(strings.Join(problems, "\n"), c.want) {
				t.Fatalf("problems %q, want one containing %q", problems, c.want)
			}
		})
	}
}
