package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"paynotify/handler"
)

// sign and reconcile -dev, run beside a dev, reach it at the address it
// printed whatever HTTP_ADDR says in their own shell; sign refuses a JSON
// body without -provider wechatpay, saying why.
func TestToolsFindTheRunningDev(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl: the printed command needs it")
	}
	file, err := filepath.Abs("testdata/notify/wechatpay/01_pay_demo_1001.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	base, logs := start(t, []string{"dev"}, []string{"ALIPAY_JOBS_INTERVAL=1h"}) // on paynotify-dev.db, here
	if b, err := os.ReadFile("paynotify-dev.db.url"); err != nil || strings.TrimSpace(string(b)) != base {
		t.Fatalf("paynotify-dev.db.url: %q %v, want %s", b, err, base)
	}
	tool := func(t *testing.T, args ...string) (string, string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), environment{args: args, environ: []string{"HTTP_ADDR=127.0.0.1:1"},
			stdin: strings.NewReader(""), stdout: &out, stderr: &errOut})
		return out.String(), errOut.String(), err
	}

	t.Run("Sign", func(t *testing.T) {
		out, _, err := tool(t, "sign", "-provider", "wechatpay", file)
		if err != nil || !strings.Contains(out, "'"+base+"/wechatpay/notify'") {
			t.Fatalf("sign: %v\n%s", err, out)
		}
		cmd := exec.Command("sh")
		cmd.Stdin = strings.NewReader(out)
		b, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(b), " 204") {
			t.Fatalf("sh: %v\n%s\n%s", err, b, logs)
		}
	})
	t.Run("SignRefusesJSONAsAlipay", func(t *testing.T) {
		out, errOut, err := tool(t, "sign", file)
		if err == nil || out != "" || exitCode(err, io.Discard) != 2 || !strings.Contains(errOut, "-provider wechatpay") {
			t.Fatalf("sign of a JSON body as Alipay's: %q %q %v", out, errOut, err)
		}
	})
	t.Run("ReconcileDev", func(t *testing.T) {
		out, _, err := tool(t, "reconcile", "-dev", "-date", "2026-11-30")
		// Each fake took a payment for no order that day: found, unresolved.
		if exitCode(err, io.Discard) != 1 || !strings.Contains(err.Error(), "unresolved") {
			t.Fatalf("reconcile -dev: %v\n%s", err, out)
		}
		dec := json.NewDecoder(strings.NewReader(out))
		var got []string
		for dec.More() {
			var v handler.RunView
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if v.State != "DONE" || v.Counts["UNMATCHED"] != 1 {
				t.Errorf("%s: %+v, want DONE with the fake's payment UNMATCHED", v.Provider, v)
			}
			got = append(got, v.Provider)
		}
		if strings.Join(got, ",") != "alipay,wechatpay" {
			t.Errorf("runs of %v, want alipay and wechatpay", got)
		}
	})
	t.Run("ReconcileDevURL", func(t *testing.T) {
		// Another directory: no paynotify-dev.db.url to find, HTTP_ADDR
		// wrong; -url, as dev's banner prints it, reaches the dev.
		t.Chdir(t.TempDir())
		out, _, err := tool(t, "reconcile", "-dev", "-url", base, "-provider", "wechatpay", "-date", "2026-11-30")
		if exitCode(err, io.Discard) != 1 || !strings.Contains(err.Error(), "unresolved") {
			t.Fatalf("reconcile -dev -url: %v\n%s", err, out)
		}
		var v handler.RunView
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Provider != "wechatpay" || v.State != "DONE" {
			t.Fatalf("reconcile -dev -url: %+v %v\n%s", v, err, out)
		}
		if !strings.Contains(logs.String(), "reconcile -dev -url "+base+" -date 2026-11-30") {
			t.Errorf("dev's banner does not print the reconcile line with its address:\n%s", logs)
		}
	})
}

// Without a running dev here, the address is HTTP_ADDR's, as dev reads
// it, else dev's default.
func TestDevBaseURL(t *testing.T) {
	t.Chdir(t.TempDir())
	// A file a killed dev left behind is not believed: nobody holds the lock.
	if err := os.WriteFile("paynotify-dev.db.url", []byte("http://127.0.0.1:4444\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for environ, want := range map[string]string{
		"":                         "http://127.0.0.1:8080",
		"HTTP_ADDR=:9090":          "http://localhost:9090",
		"HTTP_ADDR=0.0.0.0:9091":   "http://localhost:9091",
		"HTTP_ADDR=127.0.0.2:9092": "http://127.0.0.2:9092",
	} {
		if got := devBaseURL(strings.Fields(environ)); got != want {
			t.Errorf("%q: %s, want %s", environ, got, want)
		}
	}
}

// dev -addr without a port says what it wants, not that another dev runs.
func TestDevAddrWithoutPort(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), environment{args: []string{"dev", "-addr", "8080", "-db", filepath.Join(t.TempDir(), "d.db")},
		stdin: strings.NewReader(""), stdout: &out, stderr: &out})
	if err == nil || strings.Contains(err.Error(), "another paynotify dev") || !strings.Contains(err.Error(), "want host:port") {
		t.Fatalf("dev -addr 8080: %v", err)
	}
}

// dev prints a member token for each demo member, each the member's own:
// bob's token sees bob's order and not alice's.
func TestDevPrintsBothMembersTokens(t *testing.T) {
	base, logs := start(t, []string{"dev", "-db", filepath.Join(t.TempDir(), "dev.db")}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	token := func(name string) string {
		_, rest, ok := strings.Cut(logs.String(), name+"=")
		if !ok {
			t.Fatalf("dev prints no %s:\n%s", name, logs)
		}
		tok, _, _ := strings.Cut(rest, "\n")
		return strings.TrimSpace(tok)
	}
	for _, c := range []struct {
		token, sn string
		want      int
	}{
		{"TOKEN", "DEMO-1001", 200}, {"TOKEN", "DEMO-1004", 404},
		{"TOKEN2", "DEMO-1004", 200}, {"TOKEN2", "DEMO-1001", 404},
	} {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/orders/"+c.sn, nil)
		req.Header.Set("Authorization", "Bearer "+token(c.token))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s on %s: %d, want %d", c.token, c.sn, resp.StatusCode, c.want)
		}
	}
}
