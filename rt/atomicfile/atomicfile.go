// Package atomicfile writes files so that a crash, a kill -9 or a full disk
// never leaves a half-written file behind: readers see either the old
// contents or the complete new ones. Checkpoints, weights and cache entries go
// through it, because a training run of hours must not lose its last good
// checkpoint to an interrupted write.
//
// The new contents go to a temporary file in the same directory (so the final
// rename stays on one file system), which is synced, closed and renamed over
// the target; the directory is then synced so the rename itself survives a
// power loss. Temporary files are named ".NAME.tmp-RANDOM" next to the target.
//
// This package is copied into each generated program's module (it is embedded
// in the mlbuild binary), so it imports only the standard library.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// TempSuffix follows the target's name in temporary files, ".NAME.tmp-"
// plus a random part, so that tools (and people) can recognise the leftovers
// of a killed writer.
const TempSuffix = ".tmp-"

// WriteFile replaces path with the bytes that write produces, atomically. The
// file gets permissions perm (before the umask). On any failure (write
// returns an error, a sync or the rename fails) the old file, if any, is left
// untouched and the temporary file is removed; the error names path.
func WriteFile(path string, perm os.FileMode, write func(io.Writer) error) error {
	tmp, err := writeTemp(path, perm, write)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", path, err)
	}
	return syncDir(path)
}

// WriteNewFile is WriteFile for a path that must not exist yet: when path
// already exists it returns an error wrapping fs.ErrExist and leaves the
// existing file alone. Where the file system supports hard links the check
// and the publication are one atomic step, so two writers racing for the same
// path cannot both succeed. Commands use it for outputs they must not
// overwrite without --force.
func WriteNewFile(path string, perm os.FileMode, write func(io.Writer) error) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s: %w", path, fs.ErrExist)
	}
	tmp, err := writeTemp(path, perm, write)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", path, fs.ErrExist)
		}
		// No hard links here (some network and FAT file systems): fall
		// back to a check followed by a rename, which has a small window
		// in which a racing writer's file could be replaced.
		if _, statErr := os.Lstat(path); statErr == nil {
			return fmt.Errorf("%s: %w", path, fs.ErrExist)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return syncDir(path)
}

// WriteBytes is WriteFile for contents already in memory.
func WriteBytes(path string, perm os.FileMode, data []byte) error {
	return WriteFile(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeTemp creates the temporary file next to path, fills it through a
// buffer, syncs and closes it, and returns its name. On failure it removes
// the file and returns an error naming path.
func writeTemp(path string, perm os.FileMode, write func(io.Writer) error) (name string, err error) {
	dir, base := filepath.Split(path)
	if base == "" {
		return "", fmt.Errorf("%q: not a file name", path)
	}
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+TempSuffix+"*")
	if err != nil {
		return "", fmt.Errorf("%s: creating temporary file: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm &^ umask()); err != nil && runtime.GOOS != "windows" {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	if err := write(bw); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("%s: syncing: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return tmp, nil
}

// syncDir makes the rename of a file in path's directory durable. Windows
// cannot open a directory for syncing, and NTFS journals renames, so it is
// skipped there.
func syncDir(path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	dir := filepath.Dir(path)
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%s: syncing directory: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("%s: syncing directory: %w", path, err)
	}
	return nil
}
