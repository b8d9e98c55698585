package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"paynotify/config"
)

func TestHashPassword(t *testing.T) {
	var errOut bytes.Buffer
	hash := func(t *testing.T, stdin string, args ...string) (string, error) {
		var out bytes.Buffer
		errOut.Reset()
		err := run(context.Background(), environment{args: append([]string{"hash-password"}, args...),
			stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, bcryptCost: bcrypt.MinCost})
		return strings.TrimSpace(out.String()), err
	}
	t.Run("Entry", func(t *testing.T) {
		out, err := hash(t, "correct horse battery\n", "alice")
		if err != nil {
			t.Fatal(err)
		}
		name, h, ok := strings.Cut(out, ":")
		if !ok || name != "alice" {
			t.Fatalf("output %q: want alice:HASH", out)
		}
		if err := bcrypt.CompareHashAndPassword([]byte(h), []byte("correct horse battery")); err != nil {
			t.Fatalf("the hash does not match the password: %v", err)
		}
		if cost, _ := bcrypt.Cost([]byte(h)); cost != bcrypt.MinCost {
			t.Errorf("cost %d, want the %d asked for", cost, bcrypt.MinCost)
		}
		// What it prints is what the configuration takes.
		cfg, err := config.Load([]string{"CONSOLE_OPERATORS=" + out})
		if err != nil || cfg.Operators["alice"] != h {
			t.Fatalf("CONSOLE_OPERATORS=%s: %v %v", out, cfg.Operators, err)
		}
	})
	t.Run("DefaultCost", func(t *testing.T) {
		// The product's cost, unless a test asks for less.
		if got := (environment{}).passwordCost(); got != 12 || passwordCost != 12 {
			t.Errorf("default bcrypt cost %d, want 12", got)
		}
	})
	t.Run("TooShort", func(t *testing.T) {
		if out, err := hash(t, "short\n"); err == nil || out != "" {
			t.Fatalf("a short password: %q %v", out, err)
		}
	})
	t.Run("NamesServeRefuses", func(t *testing.T) {
		// Each name here is one CONSOLE_OPERATORS refuses: hash-password
		// must not print an entry serve will not start with.
		valid, err := bcrypt.GenerateFromPassword([]byte("correct horse battery"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load([]string{"CONSOLE_OPERATORS=alice:" + string(valid)}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"Alice", "al ice", "1alice", "alice:x", strings.Repeat("a", 33), "admin-api"} {
			out, err := hash(t, "correct horse battery\n", name)
			if err == nil || out != "" {
				t.Errorf("hash-password %q: %q %v", name, out, err)
			}
			// Refused with the reason, not in silence (exit 2 alone).
			if first, _, _ := strings.Cut(errOut.String(), "\n"); !strings.HasPrefix(first, "paynotify hash-password: ") ||
				!strings.Contains(first, fmt.Sprintf("operator %q: ", name)) || exitCode(err, io.Discard) != 2 {
				t.Errorf("hash-password %q says %q (exit %d)", name, errOut.String(), exitCode(err, io.Discard))
			}
			if _, err := config.Load([]string{"CONSOLE_OPERATORS=" + name + ":" + string(valid)}); err == nil {
				t.Errorf("serve takes %q", name)
			}
		}
	})
	t.Run("TwoNames", func(t *testing.T) {
		if _, err := hash(t, "correct horse battery\n", "alice", "bob"); err == nil {
			t.Fatal("two names accepted")
		}
	})
}
