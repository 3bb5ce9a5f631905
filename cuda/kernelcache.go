package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// The kernel cache keeps compiled module images (CUBIN or PTX) on disk, so
// a program compiles its kernels with NVRTC once per machine rather than at
// every start. An entry's key is the SHA-256 of readable "key value" lines
// (cacheKeyLines): the source's hash, NVRTC's version, the architecture,
// the image format and the compile options; anything that changes the
// image changes the key. Entries are written atomically (a temporary file
// renamed into place) and carry the hash of their bytes: an entry that is
// short, foreign or corrupt is a miss, recompiled and written again, never
// an error. Nothing trims the cache; deleting the folder is always safe.
//
// Where it lives: Options.KernelCacheDir, else $MLBUILD_CUDA_CACHE, else
// os.UserCacheDir()/mlbuild/cuda. "off" in either turns it off.
type kernelCache struct {
	dir string // "" when off
}

// kernelCacheMagic opens every entry; bump it when the format changes.
const kernelCacheMagic = "mlbuild cuda kernel image v1\n"

// cacheDirFor resolves where the cache lives ("" when off).
func cacheDirFor(option string, getenv func(string) string) string {
	dir := option
	if dir == "" {
		dir = getenv("MLBUILD_CUDA_CACHE")
	}
	if dir == "off" {
		return ""
	}
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(base, "mlbuild", "cuda")
	}
	return dir
}

// cacheKeyLines are the lines hashed into an entry's key; printed, they
// explain a surprising miss.
func cacheKeyLines(source, nvrtcVersion, arch, format string, options []string) string {
	sum := sha256.Sum256([]byte(source))
	return "source " + hex.EncodeToString(sum[:]) + "\n" +
		"nvrtc " + nvrtcVersion + "\n" +
		"arch " + arch + "\n" +
		"format " + format + "\n" +
		"options " + strings.Join(options, " ") + "\n"
}

func (c *kernelCache) path(keyLines string) string {
	sum := sha256.Sum256([]byte(kernelCacheMagic + keyLines))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(c.dir, h[:2], h+".image")
}

// get returns the image cached under keyLines, or false on a miss (no
// entry, an unreadable one, or one whose bytes do not match their hash).
func (c *kernelCache) get(keyLines string) ([]byte, bool) {
	if c.dir == "" {
		return nil, false
	}
	b, err := os.ReadFile(c.path(keyLines))
	if err != nil || !bytes.HasPrefix(b, []byte(kernelCacheMagic)) {
		return nil, false
	}
	b = b[len(kernelCacheMagic):]
	nl := bytes.IndexByte(b, '\n')
	if nl != 2*sha256.Size {
		return nil, false
	}
	image := b[nl+1:]
	sum := sha256.Sum256(image)
	if string(b[:nl]) != hex.EncodeToString(sum[:]) || len(image) == 0 {
		return nil, false
	}
	return image, true
}

// put stores image under keyLines atomically. A failure to write is
// returned for the caller to ignore or log: the cache only saves time.
func (c *kernelCache) put(keyLines string, image []byte) error {
	if c.dir == "" {
		return nil
	}
	p := c.path(keyLines)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(image)
	_, err = f.WriteString(kernelCacheMagic + hex.EncodeToString(sum[:]) + "\n")
	if err == nil {
		_, err = f.Write(image)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
