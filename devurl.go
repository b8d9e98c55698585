package main

import (
	"net"
	"os"
	"strings"
)

// devDefaultDB is the SQLite file dev runs on unless -db says otherwise.
const devDefaultDB = "paynotify-dev.db"

// devURLFile is where a running dev writes the base URL it printed, beside
// its database: sign and reconcile -dev, run in the same directory, read
// it to reach that dev whatever -addr or HTTP_ADDR it was given.
func devURLFile(db string) string { return db + ".url" }

// writeDevURL writes base to db's URL file; remove deletes it (when dev
// stops).
func writeDevURL(db, base string) (remove func(), err error) {
	path := devURLFile(db)
	if err := os.WriteFile(path, []byte(base+"\n"), 0o644); err != nil {
		return nil, err
	}
	return func() { os.Remove(path) }, nil
}

// devBaseURL is the base URL of the dev that sign and reconcile -dev talk
// to: the one running on paynotify-dev.db in this directory (the URL it
// printed), else the one HTTP_ADDR names, else dev's default address.
func devBaseURL(environ []string) string {
	// A file left by a dev that was killed is stale: only a locked
	// database's counts.
	if b, err := os.ReadFile(devURLFile(devDefaultDB)); err == nil && devDBInUse(devDefaultDB) {
		if base := strings.TrimSpace(string(b)); strings.HasPrefix(base, "http://") {
			return base
		}
	}
	addr := devDefaultAddr
	if setIn(environ, "HTTP_ADDR") {
		addr = envValue(environ, "HTTP_ADDR")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost" // :8080 listens everywhere, this machine included
	}
	return "http://" + net.JoinHostPort(host, port)
}
