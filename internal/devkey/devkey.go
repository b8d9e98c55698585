// Package devkey reads the development keys of the repository's
// testdata/dev for tests, from whichever package directory they run in.
package devkey

import (
	"os"
	"path/filepath"
	"testing"
)

// Read returns testdata/dev/name, found in the working directory or the
// nearest directory above it that has one.
func Read(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "testdata", "dev", name))
		if err == nil {
			return string(b)
		}
		parent := filepath.Dir(dir)
		if !os.IsNotExist(err) || parent == dir {
			tb.Fatalf("read dev key %s: %v", name, err)
		}
		dir = parent
	}
}
