package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestOperators(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("a-long-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hash := string(h)
	file := filepath.Join(t.TempDir(), "operators")
	if err := os.WriteFile(file, []byte("# console operators\nalice:"+hash+"\n\nbob:"+hash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     []string
		want    []string
		wantErr string
	}{
		{"None", nil, nil, ""},
		{"List", []string{"CONSOLE_OPERATORS=alice:" + hash + ", bob:" + hash}, []string{"alice", "bob"}, ""},
		{"File", []string{"CONSOLE_OPERATORS_FILE=" + file}, []string{"alice", "bob"}, ""},
		{"Both", []string{"CONSOLE_OPERATORS=alice:" + hash, "CONSOLE_OPERATORS_FILE=" + file}, nil, "not both"},
		{"MissingFile", []string{"CONSOLE_OPERATORS_FILE=/nonexistent/ops"}, nil, "CONSOLE_OPERATORS_FILE"},
		{"NotAHash", []string{"CONSOLE_OPERATORS=alice:plaintext"}, nil, `operator "alice": not a bcrypt hash`},
		{"BadName", []string{"CONSOLE_OPERATORS=Alice Smith:" + hash}, nil, "entry 1"},
		{"AdminAPI", []string{"CONSOLE_OPERATORS=admin-api:" + hash}, nil, `operator "admin-api": the name admin_audit gives the admin API`},
		{"Twice", []string{"CONSOLE_OPERATORS=alice:" + hash + ",alice:" + hash}, nil, "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "plaintext") || strings.Contains(err.Error(), hash) {
					t.Errorf("the error shows a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Operators) != len(tc.want) {
				t.Fatalf("operators %v, want %v", cfg.Operators, tc.want)
			}
			for _, name := range tc.want {
				if cfg.Operators[name] != hash {
					t.Errorf("operator %s: %q", name, cfg.Operators[name])
				}
			}
		})
	}
}
