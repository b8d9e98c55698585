//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// lockDevDB does nothing where flock(2) is missing: there, only the busy
// port keeps a second dev from wiping the first one's database.
func lockDevDB(string) (func(), error) { return func() {}, nil }

// devDBInUse cannot tell where flock(2) is missing: a dev is assumed.
func devDBInUse(string) bool { return true }
