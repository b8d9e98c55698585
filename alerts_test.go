package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"paynotify/internal/proctest"
)

// alertRules is the alerting rules file operators load.
const alertRules = "deploy/prometheus/alerts.yml"

// promtool is Debian's prometheus package's rule and metrics checker;
// without it the test is skipped loudly, and fails under CI.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		proctest.Unavailable(t, "promtool", "promtool is not installed (apt-get install prometheus)")
	}
	return path
}

// The alerting rules are valid, and each fires when it should and not
// when it should not (alerts_test.yml, promtool test rules).
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", alertRules},
		{"test", "rules", filepath.Join(filepath.Dir(alertRules), "alerts_test.yml")},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// What the real /metrics serves passes promtool check metrics (names,
// units, help), and carries every paynotify metric an alert watches: an
// alert on a misspelt or vanished metric would never fire.
func TestMetricsLintAndAlertsWatchRealMetrics(t *testing.T) {
	bin := promtool(t)
	base, _ := start(t, []string{"dev", "-db", filepath.Join(t.TempDir(), "dev.db")}, nil)
	watched := alertMetrics(t)

	var body []byte
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		// Jobs' series appear with their first rounds, just after start.
		var missing []string
		for _, m := range watched {
			if !regexp.MustCompile(`(?m)^` + m + `[{ ]`).Match(body) {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q, which %s watches:\n%s", missing, alertRules, body)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}

	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// alertMetrics lists the paynotify metrics the rules' expressions name.
func alertMetrics(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			for _, m := range regexp.MustCompile(`paynotify_[a-z_]+`).FindAllString(r.Expr, -1) {
				set[m] = true
			}
		}
	}
	if len(set) < 9 {
		t.Fatalf("%s names only %d metrics: %v", alertRules, len(set), set)
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
