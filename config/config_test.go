package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"paynotify/alipay"
	"paynotify/config"
)

// fieldNames are Config's Go field names: an error must never show one to
// an operator, who knows only the environment variables.
func fieldNames() []string {
	t := reflect.TypeFor[config.Config]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Name
	}
	return names
}

// checkNames fails unless err is a *config.Error that names each of want
// and no Go field, and lists exactly len(want) problems.
func checkNames(t *testing.T, err error, want ...string) {
	t.Helper()
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want a *config.Error", err, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not name %s:\n%v", w, err)
		}
	}
	if len(ce.Problems) != len(want) {
		t.Errorf("%d problems, want %d (one per variable):\n%v", len(ce.Problems), len(want), err)
	}
	for _, field := range fieldNames() {
		if strings.Contains(err.Error(), field) {
			t.Errorf("error names the Go field %s:\n%v", field, err)
		}
	}
}

// The defaults need nothing set.
func TestLoadDefaults(t *testing.T) {
	c, err := config.Load(nil)
	if err != nil {
		t.Fatalf("Load with nothing set: %v", err)
	}
	if c.NotifyTimeout != 4*time.Second || c.DBDriver != "sqlite" || c.OrderCloseBatch != 100 {
		t.Fatalf("defaults %+v", c)
	}
}

// Retentions are thought of in days: 7d and 90d read as 168h and 2160h.
func TestLoadReadsDays(t *testing.T) {
	c, err := config.Load([]string{"OUTBOX_RETENTION=7d", "RECON_RETENTION=90d", "CONSOLE_SESSION_TTL=1d"})
	if err != nil {
		t.Fatal(err)
	}
	if c.OutboxRetention != 168*time.Hour || c.ReconRetention != 2160*time.Hour || c.ConsoleSessionTTL != 24*time.Hour {
		t.Fatalf("7d, 90d, 1d read as %v, %v, %v", c.OutboxRetention, c.ReconRetention, c.ConsoleSessionTTL)
	}
}

// Each kind of bad value is named by its environment variable, with what
// it must hold.
func TestLoadNamesTheVariable(t *testing.T) {
	cases := []struct {
		name    string
		environ string
		want    string // the whole problem
	}{
		{"MalformedDuration", "NOTIFY_TIMEOUT=4", `NOTIFY_TIMEOUT="4": want a duration such as 500ms, 4s, 30m or 7d`},
		{"MalformedInt", "DB_MAX_OPEN_CONNS=many", `DB_MAX_OPEN_CONNS="many": want a whole number`},
		{"MalformedLevel", "LOG_LEVEL=LOUD", `LOG_LEVEL="LOUD": want DEBUG, INFO, WARN or ERROR`},
		{"MalformedBool", "ALIPAY_PRODUCTION=perhaps", `ALIPAY_PRODUCTION="perhaps": want true or false`},
		{"UnknownDriver", "DB_DRIVER=postgres", `DB_DRIVER="postgres": want mysql or sqlite`},
		{"ZeroConns", "DB_MAX_OPEN_CONNS=0", `DB_MAX_OPEN_CONNS="0": want more than zero`},
		{"ZeroNotifyTimeout", "NOTIFY_TIMEOUT=0s", `NOTIFY_TIMEOUT="0s": want more than zero`},
		{"NotifyTimeoutPastGrace", "NOTIFY_TIMEOUT=20s", `NOTIFY_TIMEOUT="20s": want less than the 20s shutdown grace`},
		{"GroupApplyNeitherOnNorOff", "NOTIFY_GROUP_APPLY=yes", `NOTIFY_GROUP_APPLY="yes": want on or off`},
		{"NegativeAPITimeout", "API_TIMEOUT=-1s", `API_TIMEOUT="-1s": want more than zero`},
		{"APITimeoutPastGrace", "API_TIMEOUT=1m", `API_TIMEOUT="1m": want less than the 20s shutdown grace`},
		{"ZeroDBTimeout", "DB_TIMEOUT=0s", `DB_TIMEOUT="0s": want more than zero`},
		{"NegativePayTimeout", "ORDER_PAY_TIMEOUT=-1m", `ORDER_PAY_TIMEOUT="-1m": want more than zero`},
		{"ZeroCloseInterval", "ORDER_CLOSE_INTERVAL=0", `ORDER_CLOSE_INTERVAL="0": want more than zero`},
		{"NegativeBatch", "ORDER_CLOSE_BATCH=-5", `ORDER_CLOSE_BATCH="-5": want more than zero`},
		{"ZeroJobsInterval", "ALIPAY_JOBS_INTERVAL=0s", `ALIPAY_JOBS_INTERVAL="0s": want more than zero`},
		{"MalformedReconAt", "RECON_AT=9.30", `RECON_AT="9.30": want HH:MM in Beijing time (such as 09:30), or off`},
		{"PublicURLWithoutScheme", "PUBLIC_URL=shop.example", `PUBLIC_URL="shop.example": want an http(s) URL`},
		{"ShortJWTSecret", "API_JWT_SECRET=short-secret", `API_JWT_SECRET: want at least 32 bytes (HS256 needs a 256-bit secret)`},
		{"ShortAdminToken", "ADMIN_TOKEN=tiny", `ADMIN_TOKEN: want at least 16 characters`},
		{"ShortSessionTTL", "CONSOLE_SESSION_TTL=30s", `CONSOLE_SESSION_TTL="30s": want at least 1m`},
		{"ShortOutboxRetention", "OUTBOX_RETENTION=10m", `OUTBOX_RETENTION="10m": want at least 1h`},
		{"ShortReconRetention", "RECON_RETENTION=168h", `RECON_RETENTION="168h": want at least 720h (30 days)`},
		{"MalformedReconRetention", "RECON_RETENTION=90 days", `RECON_RETENTION="90 days": want a duration such as 500ms, 4s, 30m or 7d`},
		{"NegativeDays", "OUTBOX_RETENTION=-7d", `OUTBOX_RETENTION="-7d": want a duration such as 500ms, 4s, 30m or 7d`},
		{"MalformedSessionTTL", "CONSOLE_SESSION_TTL=a day", `CONSOLE_SESSION_TTL="a day": want a duration such as 500ms, 4s, 30m or 7d`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load([]string{tc.environ})
			name, _, _ := strings.Cut(tc.environ, "=")
			checkNames(t, err, name)
			var ce *config.Error
			if errors.As(err, &ce) && (len(ce.Problems) != 1 || ce.Problems[0] != tc.want) {
				t.Errorf("problems %q, want %q", ce.Problems, tc.want)
			}
			// Secrets are never repeated back.
			if v := tc.environ[len(name)+1:]; strings.Contains(name, "SECRET") || strings.Contains(name, "TOKEN") {
				if strings.Contains(err.Error(), v) {
					t.Errorf("error repeats the secret:\n%v", err)
				}
			}
		})
	}
}

// Every problem is listed at once, each once: a value that does not parse
// is not reported a second time as out of range.
func TestLoadListsEveryProblem(t *testing.T) {
	_, err := config.Load([]string{
		"NOTIFY_TIMEOUT=soon", "DB_MAX_OPEN_CONNS=many", "LOG_LEVEL=LOUD", "ALIPAY_PRODUCTION=perhaps",
		"DB_DRIVER=postgres", "ORDER_CLOSE_BATCH=lots", "ORDER_PAY_TIMEOUT=0s", "PUBLIC_URL=ftp://x", "ADMIN_TOKEN=tiny",
		"CONSOLE_OPERATORS=alice", "CONSOLE_SESSION_TTL=1s",
	})
	checkNames(t, err, "NOTIFY_TIMEOUT", "DB_MAX_OPEN_CONNS", "LOG_LEVEL", "ALIPAY_PRODUCTION",
		"DB_DRIVER", "ORDER_CLOSE_BATCH", "ORDER_PAY_TIMEOUT", "PUBLIC_URL", "ADMIN_TOKEN",
		"CONSOLE_OPERATORS", "CONSOLE_SESSION_TTL")
	_, err = config.Load([]string{"DB_DRIVER=mysql"})
	checkNames(t, err, "DB_DSN")
}

// The Alipay settings: each missing or malformed one named, all at once,
// and Join lists them with Load's.
func TestAlipayNamesEveryProblem(t *testing.T) {
	cases := []struct {
		name    string
		environ []string
		want    []string
	}{
		{name: "NothingSet", want: []string{"ALIPAY_APP_ID", "ALIPAY_SELLER_ID", "ALIPAY_APP_PRIVATE_KEY", "ALIPAY_PUBLIC_KEY"}},
		{name: "Malformed", environ: []string{"ALIPAY_APP_ID=2021000000000009", "ALIPAY_SELLER_ID=1234",
			"ALIPAY_APP_PRIVATE_KEY=not-a-key", "ALIPAY_PUBLIC_KEY=also-not-a-key"},
			want: []string{"ALIPAY_SELLER_ID", "ALIPAY_APP_PRIVATE_KEY", "ALIPAY_PUBLIC_KEY"}},
		{name: "ValueAndFile", environ: []string{"ALIPAY_APP_ID=2021000000000009", "ALIPAY_SELLER_ID=2088000000000009",
			"ALIPAY_APP_PRIVATE_KEY=x", "ALIPAY_APP_PRIVATE_KEY_FILE=/k.pem", "ALIPAY_PUBLIC_KEY_FILE=/no/such/file.pem"},
			want: []string{"ALIPAY_APP_PRIVATE_KEY or ALIPAY_APP_PRIVATE_KEY_FILE", "ALIPAY_PUBLIC_KEY_FILE"}},
		{name: "HalfTheCertificates", environ: []string{"ALIPAY_APP_ID=2021000000000009", "ALIPAY_SELLER_ID=2088000000000009",
			"ALIPAY_APP_PRIVATE_KEY_FILE=../testdata/dev/app_private_key.pem", "ALIPAY_APP_CERT_FILE=/no/such/cert.crt"},
			want: []string{"ALIPAY_APP_CERT_FILE", "ALIPAY_PUBLIC_CERT_FILE", "ALIPAY_ROOT_CERT_FILE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(tc.environ)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			_, err = alipay.FromConfig(c, nil)
			checkNames(t, err, tc.want...)
			if strings.Contains(err.Error(), "not-a-key") {
				t.Errorf("error repeats the key material:\n%v", err)
			}
		})
	}
	t.Run("JoinedWithLoad", func(t *testing.T) {
		c, lerr := config.Load([]string{"NOTIFY_TIMEOUT=4", "ALIPAY_APP_ID=2021000000000009"})
		_, aerr := alipay.FromConfig(c, nil)
		checkNames(t, config.Join(lerr, aerr), "NOTIFY_TIMEOUT", "ALIPAY_SELLER_ID", "ALIPAY_APP_PRIVATE_KEY", "ALIPAY_PUBLIC_KEY")
		if err := config.Join(nil, nil); err != nil {
			t.Errorf("Join of no problems = %v, want nil", err)
		}
	})
}

// RECON_AT: a Beijing time of day, by default 09:30, or off.
func TestReconTime(t *testing.T) {
	for _, tc := range []struct {
		environ []string
		at      time.Duration
		on      bool
	}{
		{nil, 9*time.Hour + 30*time.Minute, true},
		{[]string{"RECON_AT=23:05"}, 23*time.Hour + 5*time.Minute, true},
		{[]string{"RECON_AT=off"}, 0, false},
		{[]string{"RECON_AT=OFF"}, 0, false},
	} {
		c, err := config.Load(tc.environ)
		if err != nil {
			t.Fatalf("%v: %v", tc.environ, err)
		}
		at, on, err := c.ReconTime()
		if err != nil || at != tc.at || on != tc.on {
			t.Errorf("%v: %s %v %v, want %s %v", tc.environ, at, on, err, tc.at, tc.on)
		}
	}
}
