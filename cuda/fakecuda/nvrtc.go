package fakecuda

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/mlbuild/mlbuild/cuda"
)

// nvrtcNames are NVRTC's status strings.
var nvrtcNames = map[cuda.NVRTCResult]string{
	0: "NVRTC_SUCCESS", 1: "NVRTC_ERROR_OUT_OF_MEMORY", 2: "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3: "NVRTC_ERROR_INVALID_INPUT", 4: "NVRTC_ERROR_INVALID_PROGRAM", 5: "NVRTC_ERROR_INVALID_OPTION",
	6: "NVRTC_ERROR_COMPILATION",
}

// nvrtc is the fake NVRTC: a compile builds the source with g++ (so a
// syntax error fails here, with g++'s messages as the log) and the image is
// the source behind a header naming the format and architecture.
func (f *Fake) nvrtc() *cuda.NVRTCAPI {
	return &cuda.NVRTCAPI{
		Version: func(major, minor *int32) cuda.NVRTCResult {
			*major, *minor = f.opts.NVRTCMajor, f.opts.NVRTCMinor
			return 0
		},
		GetErrorString: func(r cuda.NVRTCResult) string {
			if n, ok := nvrtcNames[r]; ok {
				return n
			}
			return "NVRTC_ERROR unknown"
		},
		GetNumSupportedArchs: func(n *int32) cuda.NVRTCResult { *n = int32(len(f.opts.Archs)); return 0 },
		GetSupportedArchs: func(archs *int32) cuda.NVRTCResult {
			copy(unsafe.Slice(archs, len(f.opts.Archs)), f.opts.Archs)
			return 0
		},
		CreateProgram: func(prog *cuda.Program, src, name string, numHeaders int32, headers, includeNames **byte) cuda.NVRTCResult {
			f.mu.Lock()
			defer f.mu.Unlock()
			if prog == nil || numHeaders != 0 {
				return 3
			}
			h := cuda.Program(f.handle())
			f.programs[h] = &program{src: src}
			*prog = h
			return 0
		},
		CompileProgram: f.compileProgram,
		DestroyProgram: func(prog *cuda.Program) cuda.NVRTCResult {
			f.mu.Lock()
			defer f.mu.Unlock()
			if prog == nil || f.programs[*prog] == nil {
				return 4
			}
			delete(f.programs, *prog)
			*prog = 0
			return 0
		},
		GetProgramLogSize: func(prog cuda.Program, n *uintptr) cuda.NVRTCResult {
			return f.withProgram(prog, func(p *program) cuda.NVRTCResult { *n = uintptr(len(p.log) + 1); return 0 })
		},
		GetProgramLog: func(prog cuda.Program, log *byte) cuda.NVRTCResult {
			return f.withProgram(prog, func(p *program) cuda.NVRTCResult {
				dst := unsafe.Slice(log, len(p.log)+1)
				copy(dst, p.log)
				dst[len(p.log)] = 0
				return 0
			})
		},
		GetPTXSize: func(prog cuda.Program, n *uintptr) cuda.NVRTCResult { return f.imageSize(prog, ptxMagic, n) },
		GetPTX:     func(prog cuda.Program, dst *byte) cuda.NVRTCResult { return f.imageCopy(prog, ptxMagic, dst) },
		GetCUBINSize: func(prog cuda.Program, n *uintptr) cuda.NVRTCResult {
			return f.imageSize(prog, cubinMagic, n)
		},
		GetCUBIN: func(prog cuda.Program, dst *byte) cuda.NVRTCResult { return f.imageCopy(prog, cubinMagic, dst) },
	}
}

func (f *Fake) withProgram(prog cuda.Program, do func(*program) cuda.NVRTCResult) cuda.NVRTCResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.programs[prog]
	if p == nil {
		return 4
	}
	return do(p)
}

func (f *Fake) compileProgram(prog cuda.Program, n int32, options **byte) cuda.NVRTCResult {
	f.mu.Lock()
	p := f.programs[prog]
	f.mu.Unlock()
	if p == nil {
		return 4
	}
	var opts []string
	if n > 0 {
		for _, o := range unsafe.Slice(options, n) {
			opts = append(opts, goString(o))
		}
	}
	p.arch, p.log = "", ""
	for _, o := range opts {
		a, ok := strings.CutPrefix(o, "--gpu-architecture=")
		if !ok {
			p.log = fmt.Sprintf("nvrtc: error: unrecognized option %q (the fake knows only --gpu-architecture)", o)
			return 5
		}
		var num int32
		_, err1 := fmt.Sscanf(a, "sm_%d", &num)
		_, err2 := fmt.Sscanf(a, "compute_%d", &num)
		if err1 != nil && err2 != nil || !slices.Contains(f.opts.Archs, num) {
			p.log = fmt.Sprintf("nvrtc: error: invalid value for --gpu-architecture (-arch): %s", a)
			return 5
		}
		p.arch = a
	}
	if p.arch == "" {
		p.log = "nvrtc: error: the fake needs --gpu-architecture"
		return 5
	}
	f.mu.Lock()
	f.stats.Compiles++
	f.mu.Unlock()
	sigs, err := parseKernels(p.src)
	if err == nil {
		_, err = build(f.opts.WorkDir, p.src, sigs)
	}
	if err != nil {
		p.log = err.Error()
		if errors.Is(err, errCompile) {
			return cuda.NVRTCErrorCompilation
		}
		return 3
	}
	p.kernels = sigs
	return 0
}

// image is the program's compiled image in the format of magic, or false
// when it was compiled for the other one (sm_ gives CUBIN, compute_ PTX).
func (p *program) imageFor(magic string) ([]byte, bool) {
	if p.arch == "" || (magic == cubinMagic) != strings.HasPrefix(p.arch, "sm_") {
		return nil, false
	}
	return []byte(magic + p.arch + "\n" + p.src + "\x00"), true
}

func (f *Fake) imageSize(prog cuda.Program, magic string, n *uintptr) cuda.NVRTCResult {
	return f.withProgram(prog, func(p *program) cuda.NVRTCResult {
		img, ok := p.imageFor(magic)
		if !ok {
			return 3
		}
		*n = uintptr(len(img))
		return 0
	})
}

func (f *Fake) imageCopy(prog cuda.Program, magic string, dst *byte) cuda.NVRTCResult {
	return f.withProgram(prog, func(p *program) cuda.NVRTCResult {
		img, ok := p.imageFor(magic)
		if !ok {
			return 3
		}
		copy(unsafe.Slice(dst, len(img)), img)
		return 0
	})
}
