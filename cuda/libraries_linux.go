//go:build linux

package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/ebitengine/purego"
)

// LoadLibraries loads the CUDA driver, NVRTC and cuBLAS, each from the
// first place that works in the order library.candidates documents, and
// fills their function tables. When any is missing, the error
// (a *MissingLibraryError, wrapping ErrNoDevice) lists every place tried
// for each missing library and how to install it.
func LoadLibraries() (*Libraries, error) {
	return loadLibraries(systemSearchEnv(), filepath.Glob, dlopen)
}

// dlopen opens a library file or soname with the system loader.
func dlopen(p string) (uintptr, error) {
	if strings.Contains(p, "/") && !fileExists(p) {
		return 0, errors.New("no such file")
	}
	return purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func loadLibraries(env searchEnv, glob func(string) ([]string, error), openFile func(string) (uintptr, error)) (*Libraries, error) {
	l := &Libraries{Driver: &DriverAPI{}, NVRTC: &NVRTCAPI{}, BLAS: &BLASAPI{}}
	type loaded struct {
		lib    library
		table  any
		handle uintptr
		path   string
	}
	var ok []loaded
	var missing MissingLibraryError
	for _, x := range []struct {
		lib   library
		table any
	}{{driverLibrary, l.Driver}, {nvrtcLibrary, l.NVRTC}, {blasLibrary, l.BLAS}} {
		h, path, tried := x.lib.open(env, glob, openFile)
		if h == 0 {
			missing.Missing = append(missing.Missing, x.lib.describeMissing(tried))
			continue
		}
		ok = append(ok, loaded{x.lib, x.table, h, path})
	}
	if len(missing.Missing) > 0 {
		return nil, &missing
	}
	maps, _ := os.ReadFile("/proc/self/maps")
	for _, x := range ok {
		if err := bind(x.table, x.handle, x.path, "the library is too old (mlbuild needs CUDA 11.4 or newer)"); err != nil {
			return nil, err
		}
		file := x.path
		if !strings.Contains(file, "/") {
			file = mappedFile(string(maps), strings.SplitAfter(x.lib.sonames[0], ".so")[0])
		} else if r, err := filepath.EvalSymlinks(file); err == nil {
			file = r
		}
		l.Files = append(l.Files, LibraryFile{Library: x.lib.name, Path: x.path, File: file})
	}
	var v, minor int32
	if l.Driver.DriverGetVersion(&v) == Success {
		l.Files[0].Version = versionString(v)
	}
	if l.NVRTC.Version(&v, &minor) == NVRTCSuccess {
		l.Files[1].Version = fmt.Sprintf("%d.%d", v, minor)
	}
	return l, nil
}

// bind fills the function table at table (a pointer to DriverAPI, NVRTCAPI,
// BLASAPI or NCCLAPI) from the library handle: each field from the symbol
// its sym tag names. A required symbol the library lacks is an error
// naming it and saying why (tooOld).
func bind(table any, handle uintptr, path, tooOld string) error {
	v := reflect.ValueOf(table).Elem()
	t := v.Type()
	var missing []string
	for i := range t.NumField() {
		f := t.Field(i)
		sym := f.Tag.Get("sym")
		addr, err := purego.Dlsym(handle, sym)
		if err != nil || addr == 0 {
			if f.Tag.Get("optional") == "" {
				missing = append(missing, sym)
			}
			continue
		}
		purego.RegisterFunc(v.Field(i).Addr().Interface(), addr)
	}
	if len(missing) > 0 {
		return fmt.Errorf("cuda: %s lacks %s: %s: %w", path, strings.Join(missing, ", "), tooOld, ErrNoDevice)
	}
	return nil
}

// LoadNCCL loads NCCL (libnccl.so.2) into l, from the first place that
// works in the order library.candidates documents (MLBUILD_NCCL_LIB; the
// system loader; the CUDA toolkit's folders; the nvidia/nccl/lib folder
// of NVIDIA's pip wheels, which PyTorch installs), and records its file
// and version in l.Files. When it is missing, the error (a
// *MissingLibraryError) lists every place tried and how to install it.
// Only a run on several GPUs calls it.
func (l *Libraries) LoadNCCL() error {
	return l.loadNCCL(systemSearchEnv(), filepath.Glob, dlopen)
}

func (l *Libraries) loadNCCL(env searchEnv, glob func(string) ([]string, error), openFile func(string) (uintptr, error)) error {
	if l.NCCL != nil {
		return nil
	}
	h, path, tried := ncclLibrary.open(env, glob, openFile)
	if h == 0 {
		return &MissingLibraryError{Missing: []MissingLibrary{ncclLibrary.describeMissing(tried)}}
	}
	api := &NCCLAPI{}
	if err := bind(api, h, path, "NCCL is too old (mlbuild needs NCCL 2.4 or newer)"); err != nil {
		return err
	}
	file := path
	if !strings.Contains(file, "/") {
		maps, _ := os.ReadFile("/proc/self/maps")
		file = mappedFile(string(maps), "libnccl.so")
	} else if r, err := filepath.EvalSymlinks(file); err == nil {
		file = r
	}
	lf := LibraryFile{Library: ncclLibrary.name, Path: path, File: file}
	var v int32
	if api.GetVersion(&v) == NCCLSuccess {
		lf.Version = ncclVersionString(v)
	}
	l.NCCL = api
	l.Files = append(l.Files, lf)
	return nil
}

// LoadDNN loads cuDNN (libcudnn.so.9) into l, from the first place that
// works in the order library.candidates documents (MLBUILD_CUDNN_LIB; the
// system loader; the CUDA toolkit's folders; the nvidia/cudnn/lib folder
// of NVIDIA's pip wheels, which PyTorch installs), and records its file
// and version in l.Files. When it is missing, the error (a
// *MissingLibraryError) lists every place tried and how to install it.
// Only a program that records a library convolution calls it.
func (l *Libraries) LoadDNN() error {
	return l.loadDNNFrom(systemSearchEnv(), filepath.Glob, dlopen)
}

func (l *Libraries) loadDNNFrom(env searchEnv, glob func(string) ([]string, error), openFile func(string) (uintptr, error)) error {
	if l.DNN != nil {
		return nil
	}
	h, path, tried := dnnLibrary.open(env, glob, openFile)
	if h == 0 {
		return &MissingLibraryError{Missing: []MissingLibrary{dnnLibrary.describeMissing(tried)}}
	}
	file := path
	if !strings.Contains(file, "/") {
		maps, _ := os.ReadFile("/proc/self/maps")
		file = mappedFile(string(maps), "libcudnn.so")
	} else if r, err := filepath.EvalSymlinks(file); err == nil {
		file = r
	}
	// The shim loads its sub-libraries by soname at its first call:
	// open those beside it now (best effort: a missing one shows as the
	// shim's own error then).
	if dir := filepath.Dir(file); strings.Contains(file, "/") {
		for _, sub := range dnnSublibraries {
			if p := filepath.Join(dir, sub); fileExists(p) {
				openFile(p)
			}
		}
	}
	api := &DNNAPI{}
	if err := bind(api, h, path, "cuDNN is too old (mlbuild needs cuDNN 8 or 9, with the legacy convolution API)"); err != nil {
		return err
	}
	l.DNN = api
	l.Files = append(l.Files, LibraryFile{Library: dnnLibrary.name, Path: path, File: file, Version: dnnVersionString(api.GetVersion())})
	return nil
}
