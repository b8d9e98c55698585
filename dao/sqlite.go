package dao

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CheckSQLitePath says what is wrong with an SQLite database path that
// cannot work, before SQLite does: its own word for a missing directory,
// a read-only one or a directory given as the file is "out of memory
// (14)". Open checks; dev checks too, before it locks the file.
func CheckSQLitePath(path string) error {
	if path == "" {
		return errors.New("sqlite database path is empty")
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlite database %s: directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("sqlite database %s: %w", path, err)
	case !st.IsDir():
		return fmt.Errorf("sqlite database %s: %s is not a directory", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("sqlite database %s is a directory, not a file", path)
	}
	return nil
}

// explainSQLiteOpen adds what can be found out to SQLite's failure to open
// path: mostly, that its directory does not let this process write (a
// read-only root file system in a container, another user's directory).
// SQLite writes beside the file too (-wal, -shm).
func explainSQLiteOpen(path string, err error) error {
	dir := filepath.Dir(path)
	probe, perr := os.CreateTemp(dir, ".paynotify-write-check-*")
	if perr != nil {
		return fmt.Errorf("sqlite database %s: cannot write in directory %s (%v): use a writable directory or volume, or DB_DRIVER=mysql", path, dir, errors.Unwrap(perr))
	}
	probe.Close()
	os.Remove(probe.Name())
	return fmt.Errorf("sqlite database %s: %w", path, err)
}
