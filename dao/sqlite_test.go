package dao

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An SQLite path that cannot work is refused with what is wrong with it,
// never SQLite's "out of memory (14)"; and nothing is created on the way.
func TestOpenSQLiteBadPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		want []string // in the error
	}{
		{name: "MissingDirectory", path: filepath.Join(dir, "no", "such", "dir", "x.db"),
			want: []string{filepath.Join(dir, "no", "such", "dir", "x.db"), "directory " + filepath.Join(dir, "no", "such", "dir") + " does not exist"}},
		{name: "ParentIsAFile", path: filepath.Join(file, "x.db"),
			want: []string{file + " is not a directory"}},
		{name: "PathIsADirectory", path: dir,
			want: []string{dir + " is a directory"}},
		// sysfs refuses new files even to root.
		{name: "ReadOnlyDirectory", path: "/sys/paynotify.db",
			want: []string{"/sys/paynotify.db", "cannot write in directory /sys"}},
		{name: "Empty", path: "", want: []string{"path is empty"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(context.Background(), DriverSQLite, c.path, Options{})
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", c.path)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "out of memory") {
				t.Errorf("error repeats SQLite's misleading text:\n%v", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !os.IsNotExist(err) {
		t.Errorf("a refused path left %s/no behind (%v)", dir, err)
	}

	t.Run("Writable", func(t *testing.T) {
		s, err := Open(context.Background(), DriverSQLite, filepath.Join(t.TempDir(), "ok.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	})
}
