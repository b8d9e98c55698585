package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"paynotify/model"
)

// operatorName is what a console operator may be called: it is shown on
// pages and written to admin_audit.
var operatorName = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,31}$`)

// CheckOperatorName says why name cannot be a console operator's, or nil:
// what CONSOLE_OPERATORS refuses, hash-password refuses too.
func CheckOperatorName(name string) error {
	switch {
	case !operatorName.MatchString(name):
		return fmt.Errorf("operator %q: want a name of a-z, 0-9, '.', '_', '-' (at most 32), starting with a letter", name)
	case name == model.OperatorAdminAPI:
		return fmt.Errorf("operator %q: the name admin_audit gives the admin API's token holder; choose another", name)
	}
	return nil
}

// operators parses CONSOLE_OPERATORS or CONSOLE_OPERATORS_FILE into name →
// bcrypt hash, naming every bad entry at once (never printing a hash).
func (c Config) operators() (map[string]string, error) {
	var entries []string
	var source string
	switch {
	case c.ConsoleOperators != "" && c.ConsoleOperatorsFile != "":
		return nil, errors.New("set CONSOLE_OPERATORS or CONSOLE_OPERATORS_FILE, not both")
	case c.ConsoleOperatorsFile != "":
		b, err := os.ReadFile(c.ConsoleOperatorsFile)
		if err != nil {
			return nil, fmt.Errorf("CONSOLE_OPERATORS_FILE: %w", err)
		}
		source = "CONSOLE_OPERATORS_FILE"
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				entries = append(entries, line)
			}
		}
	case c.ConsoleOperators != "":
		source = "CONSOLE_OPERATORS"
		for _, e := range strings.Split(c.ConsoleOperators, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	default:
		return nil, nil
	}
	ops := make(map[string]string, len(entries))
	var bad []string
	for i, e := range entries {
		name, hash, ok := strings.Cut(e, ":")
		switch {
		case !ok || !operatorName.MatchString(name):
			bad = append(bad, fmt.Sprintf("entry %d: want name:bcrypt-hash with a name of a-z, 0-9, '.', '_', '-' (at most 32)", i+1))
		case CheckOperatorName(name) != nil:
			bad = append(bad, CheckOperatorName(name).Error())
		case ops[name] != "":
			bad = append(bad, fmt.Sprintf("operator %q: listed twice", name))
		default:
			if _, err := bcrypt.Cost([]byte(hash)); err != nil {
				bad = append(bad, fmt.Sprintf("operator %q: not a bcrypt hash (make one with `paynotify hash-password %s`)", name, name))
				continue
			}
			ops[name] = hash
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: %s", source, strings.Join(bad, "; "))
	}
	return ops, nil
}
