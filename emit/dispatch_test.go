package emit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// The per-kernel switches are dispatchers: each case is one statement that
// calls its family's function (docs/architecture.md, the emitter). Adding a
// kernel then adds one case per switch and one function per family file;
// a case that grows a body, or a kernel a switch forgets, fails here.
var dispatchers = []struct{ file, fn string }{
	{"cpu.go", "kernelCall"},
	{"gpu/lower.go", "lowerStep"},
}

// TestDispatchersOneLinePerKernel checks that each dispatcher names every
// kernel planner/plan.go declares, and that each of its cases is one
// statement.
func TestDispatchersOneLinePerKernel(t *testing.T) {
	kernels := plannerKernels(t)
	if len(kernels) < 30 {
		t.Fatalf("found %d kernel constants in planner/plan.go; the parse is wrong", len(kernels))
	}
	for _, d := range dispatchers {
		sw, fset := kernelSwitch(t, d.file, d.fn)
		named := map[string]bool{}
		for _, s := range sw.Body.List {
			cc := s.(*ast.CaseClause)
			for _, e := range cc.List {
				if sel, ok := e.(*ast.SelectorExpr); ok {
					named[sel.Sel.Name] = true
				}
			}
			if len(cc.Body) != 1 {
				t.Errorf("%s: a case of %s has %d statements; move its body to the kernel's family file and call it",
					fset.Position(cc.Pos()), d.fn, len(cc.Body))
			}
		}
		for _, k := range kernels {
			if !named[k] {
				t.Errorf("%s %s has no case for planner.%s", d.file, d.fn, k)
			}
		}
	}
}

// plannerKernels returns the names of planner/plan.go's Kernel constants.
func plannerKernels(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../planner/plan.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Kernel" {
				for _, n := range vs.Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}

// kernelSwitch returns the switch on st.Kernel in the function fn of file,
// and the file set that places it.
func kernelSwitch(t *testing.T, file, fn string) (*ast.SwitchStmt, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found *ast.SwitchStmt
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if sw, ok := n.(*ast.SwitchStmt); ok && found == nil {
				if sel, ok := sw.Tag.(*ast.SelectorExpr); ok && strings.HasSuffix(sel.Sel.Name, "Kernel") {
					found = sw
				}
			}
			return found == nil
		})
	}
	if found == nil {
		t.Fatalf("%s: no switch on st.Kernel in %s", file, fn)
	}
	return found, fset
}
