package app

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/imageio"
)

// FuzzImageFolder puts arbitrary bytes in an image folder as one image
// (c0/x.png) beside a good one and opens and reads the folder as training
// does. It must never panic; an error must name the file or the folder;
// a folder that opens must give finite pixels in [0, 1] or an error that
// names the file. Crashers are kept in testdata/fuzz/FuzzImageFolder.
func FuzzImageFolder(f *testing.F) {
	good := imageio.EncodePGM(make([]float32, 16), 4, 4)
	f.Add(good)
	f.Add(imageio.EncodePGM(make([]float32, 25), 5, 5))
	f.Add([]byte("P5 4 4 255\n\x00"))
	f.Add([]byte("P2 4 4 255\n1 2 3\n"))
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		for _, c := range []string{"c0", "c1"} {
			os.MkdirAll(filepath.Join(dir, c), 0o755)
		}
		bad := filepath.Join(dir, "c0", "x.png")
		os.WriteFile(bad, data, 0o644)
		os.WriteFile(filepath.Join(dir, "c1", "y.pgm"), good, 0o644)
		meta := &Meta{InputShape: []int{1, 4, 4}, Classes: 2, Data: DataSpec{Resize: len(data)%2 == 0}}
		s, n, _, err := openImageFolder(meta, dir, nil)
		if err != nil {
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q names no file", err)
			}
			return
		}
		x, y := make([]float32, n*16), make([]float32, n*2)
		if err := s.fill(x, y, all(n)); err != nil {
			if !strings.Contains(err.Error(), bad) {
				t.Fatalf("error %q does not name %s", err, bad)
			}
			return
		}
		for _, v := range x {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("pixel %v outside [0, 1]", v)
			}
		}
	})
}

// FuzzCheckpoint gives arbitrary bytes to train --resume as a checkpoint:
// its flags (the run settings the checkpoint keeps) and its state. It
// must never panic; every error must name the file; a checkpoint that
// loads must give a position that is not negative, a best validation loss
// that is a number, and finite weights. Crashers are kept in
// testdata/fuzz/FuzzCheckpoint.
func FuzzCheckpoint(f *testing.F) {
	dir := f.TempDir()
	m := momentumLin()
	initParams(m, 1)
	ckpt := filepath.Join(dir, "seed.safetensors")
	o := &trainOptions{data: dir, out: filepath.Join(dir, "o.safetensors"), checkpoint: ckpt, epochs: 3, lr: 0.1, valSplit: 0.25, patience: 2}
	if err := saveCheckpoint(m, ckpt, trainState{epoch: 1, batch: 2, step: 12, seed: 7, bestVal: 0.5, badEpochs: 1, run: o}); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(ckpt)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(safetensorsHeaderOnly(f, map[string]string{"mlbuild.model": "lin", "mlbuild.epoch": "1", "mlbuild.batch": "0", "mlbuild.bad_epochs": "0", "mlbuild.epochs": "0"}))
	f.Add(safetensorsHeaderOnly(f, map[string]string{"mlbuild.model": "lin", "mlbuild.epoch": "1", "mlbuild.batch": "0", "mlbuild.bad_epochs": "2", "mlbuild.best_val_loss": "nan", "mlbuild.epochs": "5"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "c.safetensors")
		os.WriteFile(path, data, 0o644)
		m := momentumLin()
		// --out and --checkpoint given, so that a path in the input
		// does not send the writability probe to some folder.
		out := filepath.Join(filepath.Dir(path), "o.safetensors")
		o, err := parseTrainFlags(m.Meta(), []string{"--resume", path, "--data", dir, "--out", out, "--checkpoint", path}, io.Discard, io.Discard)
		if err != nil {
			if _, finished := err.(finishedRun); !finished && !strings.Contains(err.Error(), path) && !strings.Contains(err.Error(), "--") {
				t.Fatalf("error %q names neither the file nor a flag", err)
			}
			return
		}
		st, err := loadCheckpoint(m, o.resume)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if st.epoch < 0 || st.batch < 0 || st.step < 0 || st.badEpochs < 0 || st.badEpochs > st.epoch || math.IsNaN(st.bestVal) {
			t.Fatalf("loaded position %+v", st)
		}
		for _, v := range m.State() {
			if v-v != 0 {
				t.Fatalf("loaded a non-finite weight %v", v)
			}
		}
	})
}
