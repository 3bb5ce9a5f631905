package app

import (
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// classFolder writes one 4×4 grey PNG per class folder, its pixels the
// class's number, and returns root.
func classFolder(t *testing.T, classes ...string) string {
	t.Helper()
	root := t.TempDir()
	for i, c := range classes {
		if err := os.MkdirAll(filepath.Join(root, c), 0o755); err != nil {
			t.Fatal(err)
		}
		img := image.NewGray(image.Rect(0, 0, 4, 4))
		for p := range img.Pix {
			img.Pix[p] = uint8(i)
		}
		f, err := os.Create(filepath.Join(root, c, "x.png"))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return root
}

// TestImageFolderClassOrder: classNames in an order other than the sorted
// folders' is accepted, and class i is the folder named classNames[i]
// (before, any order but the sorted one was refused).
func TestImageFolderClassOrder(t *testing.T) {
	root := classFolder(t, "ant", "bee", "cat")
	meta := &Meta{InputShape: []int{4, 4}, Classes: 3}
	want := []string{"cat", "ant", "bee"}
	src, n, names, err := openImageFolder(meta, root, want)
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*imageFolderSource)
	if n != 3 || !slices.Equal(names, want) {
		t.Fatalf("%d images, classes %v; want 3 of %v", n, names, want)
	}
	for i, f := range s.files {
		if class := filepath.Base(filepath.Dir(f)); class != want[s.labels[i]] {
			t.Errorf("%s has label %d (%s)", f, s.labels[i], want[s.labels[i]])
		}
	}
}

// TestImageFolderClassMismatch: when the folders are not the classes, the
// message names the classes without a folder and the folders that are no
// class, and says how many more a cut list leaves out.
func TestImageFolderClassMismatch(t *testing.T) {
	var folders, want []string
	for i := range 100 {
		folders = append(folders, fmt.Sprintf("f%03d", i))
		want = append(want, fmt.Sprintf("f%03d", i))
	}
	want[50], want[51] = "zebra", "yak"
	for i := 90; i < 100; i++ {
		want[i] = fmt.Sprintf("w%03d", i)
	}
	root := classFolder(t, folders...)
	_, _, _, err := openImageFolder(&Meta{InputShape: []int{4, 4}, Classes: 100}, root, want)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{
		`no folder for the class(es) "zebra", "yak", "w090", "w091", "w092", "w093" and 6 more`,
		`folder(s) "f050", "f051", "f090", "f091", "f092", "f093" and 6 more are no class`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}
