//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDevDB takes an exclusive lock on path+".lock" for as long as the dev
// runs (released by the returned func, or by the process's end), so that a
// second dev on another address cannot wipe a database in use.
func lockDevDB(path string) (release func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dev: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("dev: database %s is in use by another paynotify dev (-db picks another file)", path)
		}
		return nil, fmt.Errorf("dev: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// devDBInUse reports whether a dev holds path's lock.
func devDBInUse(path string) bool {
	f, err := os.Open(path + ".lock")
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}
