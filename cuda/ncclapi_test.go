package cuda

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// This file is the API table check of NCCL: every field of NCCLAPI must
// bind a function that NVIDIA's documentation declares
// (testdata/nccl-api.txt), with the Go type of each parameter and of the
// result matching its C type, and every NCCL constant of nccl.go must
// have nccl.h's value. A binding whose Go signature drifts from C's would
// pass garbage at run time; this catches it without a GPU.

// cToGo is the Go type each C type of the prototypes is bound as.
var cToGo = map[string]reflect.Type{
	"ncclResult_t":   reflect.TypeFor[NCCLResult](),
	"ncclResult_t*":  reflect.TypeFor[*NCCLResult](),
	"ncclComm_t":     reflect.TypeFor[NCCLComm](),
	"ncclComm_t*":    reflect.TypeFor[*NCCLComm](),
	"ncclUniqueId":   reflect.TypeFor[NCCLUniqueID](),
	"ncclUniqueId*":  reflect.TypeFor[*NCCLUniqueID](),
	"ncclDataType_t": reflect.TypeFor[NCCLDataType](),
	"ncclRedOp_t":    reflect.TypeFor[NCCLRedOp](),
	"cudaStream_t":   reflect.TypeFor[Stream](),
	"int":            reflect.TypeFor[int32](),
	"int*":           reflect.TypeFor[*int32](),
	"size_t":         reflect.TypeFor[uintptr](),
	"const void*":    reflect.TypeFor[DevicePtr](), // device memory, 64-bit addresses
	"void*":          reflect.TypeFor[DevicePtr](),
	"const char*":    reflect.TypeFor[string](), // results only: purego copies the C string
}

// prototype is one C function of the documentation.
type prototype struct {
	line   int
	result string
	name   string
	params []string // C types
}

// ncclDoc is what testdata/nccl-api.txt declares.
type ncclDoc struct {
	protos map[string]prototype
	enums  map[string]int64
	sizes  map[string]int
}

// parsePrototype reads "RESULT NAME(TYPE NAME, …)" with C's spacing
// around '*' normalised.
func parsePrototype(s string) (prototype, error) {
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return prototype{}, fmt.Errorf("no parameter list")
	}
	head := strings.Fields(strings.ReplaceAll(s[:open], "*", "* "))
	if len(head) < 2 {
		return prototype{}, fmt.Errorf("no result type")
	}
	p := prototype{name: head[len(head)-1], result: normalType(strings.Join(head[:len(head)-1], " "))}
	if args := strings.TrimSpace(s[open+1 : close]); args != "" && args != "void" {
		for _, a := range strings.Split(args, ",") {
			f := strings.Fields(strings.ReplaceAll(a, "*", "* "))
			if len(f) < 2 {
				return prototype{}, fmt.Errorf("parameter %q has no name", a)
			}
			p.params = append(p.params, normalType(strings.Join(f[:len(f)-1], " ")))
		}
	}
	return p, nil
}

// normalType writes "const void *" and "const void*" alike.
func normalType(t string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(t), " "), " *", "*")
}

func readNCCLDoc(t *testing.T) *ncclDoc {
	t.Helper()
	b, err := os.ReadFile("testdata/nccl-api.txt")
	if err != nil {
		t.Fatal(err)
	}
	doc := &ncclDoc{protos: map[string]prototype{}, enums: map[string]int64{}, sizes: map[string]int{}}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if kind, rest, ok := strings.Cut(line, " "); ok && (kind == "enum" || kind == "size") {
			name, val, ok := strings.Cut(rest, " = ")
			n, err := strconv.ParseInt(strings.TrimSpace(val), 0, 64)
			if !ok || err != nil {
				t.Fatalf("nccl-api.txt:%d: %q: want %s NAME = NUMBER", i+1, line, kind)
			}
			if kind == "enum" {
				doc.enums[strings.TrimSpace(name)] = n
			} else {
				doc.sizes[strings.TrimSpace(name)] = int(n)
			}
			continue
		}
		p, err := parsePrototype(line)
		if err != nil {
			t.Fatalf("nccl-api.txt:%d: %q: %v", i+1, line, err)
		}
		p.line = i + 1
		doc.protos[p.name] = p
	}
	if len(doc.protos) < 10 || len(doc.enums) < 10 {
		t.Fatalf("nccl-api.txt looks truncated: %d prototypes, %d enum values", len(doc.protos), len(doc.enums))
	}
	return doc
}

// checkTable returns every way the function table type (NCCLAPI or a
// test's variant) disagrees with the documentation.
func checkTable(doc *ncclDoc, table reflect.Type) []string {
	var problems []string
	bound := map[string]bool{}
	for i := range table.NumField() {
		f := table.Field(i)
		sym := f.Tag.Get("sym")
		bound[sym] = true
		p, ok := doc.protos[sym]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s (%s) is not among NCCL's documented functions", f.Name, sym))
			continue
		}
		ft := f.Type
		if ft.Kind() != reflect.Func {
			problems = append(problems, fmt.Sprintf("%s is a %s, not a function", f.Name, ft))
			continue
		}
		if ft.NumIn() != len(p.params) {
			problems = append(problems, fmt.Sprintf("%s: %d parameters, %s takes %d (nccl-api.txt:%d)", f.Name, ft.NumIn(), sym, len(p.params), p.line))
			continue
		}
		for j, c := range p.params {
			want, ok := cToGo[c]
			if !ok || c == "const char*" {
				problems = append(problems, fmt.Sprintf("%s: parameter %d has C type %q, which the check does not map", f.Name, j+1, c))
				continue
			}
			if ft.In(j) != want {
				problems = append(problems, fmt.Sprintf("%s: parameter %d is %s, want %s for C's %s", f.Name, j+1, ft.In(j), want, c))
			}
		}
		if ft.NumOut() != 1 || ft.Out(0) != cToGo[p.result] {
			problems = append(problems, fmt.Sprintf("%s: results %v, want %v for C's %s", f.Name, ft, cToGo[p.result], p.result))
		}
	}
	for name, p := range doc.protos {
		if !bound[name] {
			problems = append(problems, fmt.Sprintf("nccl-api.txt:%d: %s is listed but NCCLAPI does not bind it", p.line, name))
		}
	}
	return problems
}

func TestNCCLTableMatchesNVIDIADocs(t *testing.T) {
	doc := readNCCLDoc(t)
	for _, p := range checkTable(doc, reflect.TypeFor[NCCLAPI]()) {
		t.Error(p)
	}
	for name, got := range map[string]int64{
		"ncclSuccess": int64(NCCLSuccess), "ncclUnhandledCudaError": int64(NCCLUnhandledCudaError),
		"ncclSystemError": int64(NCCLSystemError), "ncclInternalError": int64(NCCLInternalError),
		"ncclInvalidArgument": int64(NCCLInvalidArgument), "ncclInvalidUsage": int64(NCCLInvalidUsage),
		"ncclRemoteError": int64(NCCLRemoteError), "ncclInProgress": int64(NCCLInProgress),
		"ncclFloat32": int64(NCCLFloat32), "ncclBfloat16": int64(NCCLBfloat16), "ncclSum": int64(NCCLSum),
	} {
		want, ok := doc.enums[name]
		if !ok {
			t.Errorf("%s is not in nccl-api.txt", name)
		} else if got != want {
			t.Errorf("%s = %d in nccl.go, nccl.h says %d", name, got, want)
		}
	}
	if n := int(unsafe.Sizeof(NCCLUniqueID{})); n != doc.sizes["ncclUniqueId"] {
		t.Errorf("NCCLUniqueID is %d bytes, ncclUniqueId %d", n, doc.sizes["ncclUniqueId"])
	}
	for r, name := range ncclNames {
		if doc.enums[name] != int64(r) {
			t.Errorf("ncclNames[%d] = %s, which nccl.h numbers %d", r, name, doc.enums[name])
		}
	}
}

// TestNCCLTableCheckCatchesDrift: the check must fail for each kind of
// mistake, or its silence on NCCLAPI would prove nothing.
func TestNCCLTableCheckCatchesDrift(t *testing.T) {
	doc := readNCCLDoc(t)
	// A table whose fields are each wrong in one way; the check is run on
	// one field at a time.
	type wrong struct {
		IntCount   func(send, recv DevicePtr, count int32, dt NCCLDataType, op NCCLRedOp, comm NCCLComm, s Stream) NCCLResult `sym:"ncclAllReduce"`
		Missing    func(send, recv DevicePtr, count uintptr, dt NCCLDataType, op NCCLRedOp, comm NCCLComm) NCCLResult         `sym:"ncclAllReduce"`
		IDByRef    func(comm *NCCLComm, nranks int32, id *NCCLUniqueID, rank int32) NCCLResult                                `sym:"ncclCommInitRank"`
		WrongRes   func(comm NCCLComm) int32                                                                                  `sym:"ncclCommAbort"`
		Undocument func() NCCLResult                                                                                          `sym:"ncclCommFlush"`
	}
	for i, want := range []string{
		"IntCount: parameter 3 is int32, want uintptr for C's size_t",
		"Missing: 6 parameters, ncclAllReduce takes 7",
		"IDByRef: parameter 3 is *cuda.NCCLUniqueID, want cuda.NCCLUniqueID for C's ncclUniqueId",
		"WrongRes: results func(cuda.NCCLComm) int32, want cuda.NCCLResult",
		"Undocument (ncclCommFlush) is not among NCCL's documented functions",
	} {
		f := reflect.TypeFor[wrong]().Field(i)
		one := reflect.StructOf([]reflect.StructField{{Name: f.Name, Type: f.Type, Tag: f.Tag}})
		got := strings.Join(checkTable(doc, one), "\n")
		if !strings.Contains(got, want) {
			t.Errorf("field %s: problems\n%s\nwant one containing %q", f.Name, got, want)
		}
	}
	p, err := parsePrototype("ncclResult_t  ncclAllReduce(const void *sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)")
	if err != nil || p.name != "ncclAllReduce" || strings.Join(p.params, "|") != "const void*|void*|size_t|ncclDataType_t|ncclRedOp_t|ncclComm_t|cudaStream_t" {
		t.Errorf("parsePrototype = %+v, %v", p, err)
	}
}

func TestNCCLVersionString(t *testing.T) {
	for v, want := range map[int32]string{22807: "2.28.7", 21805: "2.18.5", 2804: "2.8.4"} {
		if got := ncclVersionString(v); got != want {
			t.Errorf("ncclVersionString(%d) = %s, want %s", v, got, want)
		}
	}
}
