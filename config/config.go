// Package config reads paynotify's configuration from the environment,
// checks all of it at once, and hands each part to whoever needs it.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Config is every setting paynotify reads. Names are fixed: deployment
// tooling outside the repository sets them.
type Config struct {
	HTTPAddr       string        `env:"HTTP_ADDR" envDefault:":8080"`
	DBDriver       string        `env:"DB_DRIVER" envDefault:"sqlite"`
	DBDSN          string        `env:"DB_DSN" envDefault:"paynotify.db"`
	DBMaxOpenConns int           `env:"DB_MAX_OPEN_CONNS" envDefault:"32"`
	NotifyTimeout  time.Duration `env:"NOTIFY_TIMEOUT" envDefault:"4s"`
	// NotifyGroupApply: "on" applies first notices that queue behind a
	// transaction in flight together, in one transaction; "off", each in
	// its own.
	NotifyGroupApply string `env:"NOTIFY_GROUP_APPLY" envDefault:"on"`
	// NotifyDuplicateCache is how many trades seen committed an instance
	// remembers to answer their duplicates without the database; 0: off.
	NotifyDuplicateCache int        `env:"NOTIFY_DUPLICATE_CACHE" envDefault:"100000"`
	LogLevel             slog.Level `env:"LOG_LEVEL" envDefault:"INFO"`

	// With NotifyTimeout, APITimeout and DBTimeout are the deadlines nothing
	// waits on the database past: one notification, one /api/v1 or
	// /admin request, and one database round trip no request bounds (a
	// background job's). See dao.Options.IOTimeout.
	APITimeout time.Duration `env:"API_TIMEOUT" envDefault:"10s"`
	DBTimeout  time.Duration `env:"DB_TIMEOUT" envDefault:"10s"`

	// APIJWTSecret verifies members' HS256 tokens; unset, the order API
	// is off (the notify endpoint does not need it).
	APIJWTSecret       string        `env:"API_JWT_SECRET"`
	OrderPayTimeout    time.Duration `env:"ORDER_PAY_TIMEOUT" envDefault:"30m"`
	OrderCloseInterval time.Duration `env:"ORDER_CLOSE_INTERVAL" envDefault:"1m"`
	OrderCloseBatch    int           `env:"ORDER_CLOSE_BATCH" envDefault:"100"`

	// NATSURL is the broker the outbox relay publishes to; unset, events
	// wait in the outbox. Several servers (a cluster) are separated by
	// commas.
	NATSURL string `env:"NATS_URL"`
	// NATSStreamReplicas is how many servers of a JetStream cluster keep
	// the event stream: 1 for a single server, 3 for a three-node cluster.
	NATSStreamReplicas int `env:"NATS_STREAM_REPLICAS" envDefault:"1"`
	// AdminToken guards /admin; unset, the admin views are off.
	AdminToken string `env:"ADMIN_TOKEN"`
	// ConsoleOperators names the console's operators with their bcrypt
	// hashes ("alice:$2a$12$…,bob:$2a$12$…"); ConsoleOperatorsFile holds
	// the same, one "name:hash" a line (htpasswd -B files work). Parsed
	// into Operators.
	ConsoleOperators     string        `env:"CONSOLE_OPERATORS"`
	ConsoleOperatorsFile string        `env:"CONSOLE_OPERATORS_FILE"`
	ConsoleSessionTTL    time.Duration `env:"CONSOLE_SESSION_TTL" envDefault:"12h"`
	// Operators maps each console operator to their bcrypt hash.
	Operators map[string]string `env:"-"`

	// RedisAddr is the Redis that guards payment starts across instances;
	// unset (or down), the database's unique key alone decides.
	RedisAddr string `env:"REDIS_ADDR"`
	// PublicURL is where Alipay reaches this service: notify_url is
	// PublicURL + "/alipay/notify". Unset, the pay endpoint is off.
	PublicURL string `env:"PUBLIC_URL"`
	// TrustedProxies is TRUSTED_PROXIES: the reverse proxies (IPs or
	// CIDRs, comma-separated) whose X-Forwarded-For / X-Real-IP name the
	// client. Unset, none is trusted and the client is the connection's
	// address (a proxy's, behind one).
	TrustedProxies []string `env:"TRUSTED_PROXIES" envSeparator:","`
	// PayReturnURL is where Alipay's cashier sends the buyer back.
	PayReturnURL string `env:"PAY_RETURN_URL"`
	// AlipaySandboxGateway points the sandbox client elsewhere (a fake
	// Alipay); ignored in production.
	AlipaySandboxGateway string `env:"ALIPAY_SANDBOX_GATEWAY"`
	// AlipayJobsInterval is how often the query, close and refund jobs run.
	AlipayJobsInterval time.Duration `env:"ALIPAY_JOBS_INTERVAL" envDefault:"30s"`
	// ReconAt is when, in Beijing time (HH:MM), the daily reconciliation of
	// yesterday's Alipay bill runs; "off" turns the job off.
	ReconAt string `env:"RECON_AT" envDefault:"09:30"`
	// OutboxRetention is how long a SENT outbox row is kept after it was
	// sent; a consumer that lags longer reads the stream, not the table.
	OutboxRetention time.Duration `env:"OUTBOX_RETENTION" envDefault:"168h"`
	// ReconRetention is how long the matched bill lines of a date
	// reconciled cleanly are kept; past it the date is never run again.
	ReconRetention time.Duration `env:"RECON_RETENTION" envDefault:"2160h"`

	AppID                string `env:"ALIPAY_APP_ID"`
	SellerID             string `env:"ALIPAY_SELLER_ID"`
	AlipayPublicKey      string `env:"ALIPAY_PUBLIC_KEY"`
	AlipayPublicKeyFile  string `env:"ALIPAY_PUBLIC_KEY_FILE"`
	AppPrivateKey        string `env:"ALIPAY_APP_PRIVATE_KEY"`
	AppPrivateKeyFile    string `env:"ALIPAY_APP_PRIVATE_KEY_FILE"`
	AppCertFile          string `env:"ALIPAY_APP_CERT_FILE"`
	AlipayPublicCertFile string `env:"ALIPAY_PUBLIC_CERT_FILE"`
	AlipayRootCertFile   string `env:"ALIPAY_ROOT_CERT_FILE"`
	Production           bool   `env:"ALIPAY_PRODUCTION" envDefault:"false"`

	// WeChatPay is the WECHATPAY_* settings (config/wechatpay.go).
	WeChatPay WeChatPay
	// Webhook is the WEBHOOK_* settings (config/webhook.go).
	Webhook Webhook

	// ProvidersFile is PROVIDERS_FILE: every provider account and app
	// (config/accounts.go), read into Accounts. Unset, the ALIPAY_* and
	// WECHATPAY_* variables configure one account with one app each.
	ProvidersFile string `env:"PROVIDERS_FILE"`
	// Accounts is PROVIDERS_FILE read and checked, nil when it is unset.
	Accounts *Accounts `env:"-"`
}

// ShutdownGrace is how long requests in flight may take to finish after
// SIGTERM; each request's own deadline is shorter.
const ShutdownGrace = 20 * time.Second

// Load reads the configuration from environ (os.Environ() form). It checks
// types and ranges, and names every problem, by its environment variable,
// in one *Error; each provider's adapter reads its own settings from
// the Config (alipay.FromConfig).
func Load(environ []string) (Config, error) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	c, problems, unreadable, err := parse(vars)
	if err != nil {
		return c, err
	}
	problems = append(problems, c.check(vars, unreadable)...)
	if len(problems) > 0 {
		return c, &Error{Problems: problems}
	}
	return c, nil
}

// parse reads vars into a Config by the struct's tags: the problems are
// the values that did not parse, and unreadable their variables (whose
// fields hold zero, which check must not report again).
func parse(vars map[string]string) (c Config, problems []string, unreadable map[string]bool, err error) {
	unreadable = map[string]bool{}
	c, err = env.ParseAsWithOptions[Config](env.Options{Environment: vars,
		FuncMap: map[reflect.Type]env.ParserFunc{reflect.TypeFor[time.Duration](): parseDuration}})
	if err == nil {
		return c, nil, unreadable, nil
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return c, nil, nil, &Error{Problems: []string{err.Error()}}
	}
	for _, e := range agg.Errors {
		var pe env.ParseError
		if !errors.As(e, &pe) {
			problems = append(problems, e.Error())
			continue
		}
		name := varName(pe.Name)
		unreadable[name] = true
		problems = append(problems, fmt.Sprintf("%s=%q: want %s", name, vars[name], wantOf(pe.Type)))
	}
	return c, problems, unreadable, nil
}

// check names every value out of its range (the operators it also reads
// into c.Operators).
func (c *Config) check(vars map[string]string, unreadable map[string]bool) []string {
	var problems []string
	// check reports name unless ok, showing what was set unless secret.
	check := func(name string, ok bool, want string, secret bool) {
		switch {
		case ok || unreadable[name]:
		case secret:
			problems = append(problems, name+": want "+want)
		default:
			problems = append(problems, fmt.Sprintf("%s=%q: want %s", name, vars[name], want))
		}
	}
	positive := func(name string, ok bool) { check(name, ok, "more than zero", false) }
	check("DB_DRIVER", c.DBDriver == "mysql" || c.DBDriver == "sqlite", "mysql or sqlite", false)
	positive("DB_MAX_OPEN_CONNS", c.DBMaxOpenConns > 0)
	check("NOTIFY_GROUP_APPLY", c.NotifyGroupApply == "on" || c.NotifyGroupApply == "off", "on or off", false)
	check("NOTIFY_DUPLICATE_CACHE", c.NotifyDuplicateCache >= 0 && c.NotifyDuplicateCache <= 10_000_000, "0 (off) to 10000000 trades", false)
	check("API_JWT_SECRET", c.APIJWTSecret == "" || len(c.APIJWTSecret) >= 32, "at least 32 bytes (HS256 needs a 256-bit secret)", true)
	check("ADMIN_TOKEN", c.AdminToken == "" || len(c.AdminToken) >= 16, "at least 16 characters", true)
	if c.DBDriver == "mysql" && vars["DB_DSN"] == "" {
		// The default is an SQLite file name: never a MySQL DSN.
		problems = append(problems, "DB_DSN is required with DB_DRIVER=mysql (user:password@tcp(host:3306)/dbname)")
	}
	if ops, err := c.operators(); err != nil {
		problems = append(problems, err.Error())
	} else {
		c.Operators = ops
	}
	check("NATS_STREAM_REPLICAS", c.NATSStreamReplicas >= 1 && c.NATSStreamReplicas <= 5, "1 to 5 (JetStream keeps at most 5 replicas)", false)
	check("CONSOLE_SESSION_TTL", c.ConsoleSessionTTL >= time.Minute, "at least 1m", false)
	positive("ORDER_PAY_TIMEOUT", c.OrderPayTimeout > 0)
	positive("ORDER_CLOSE_INTERVAL", c.OrderCloseInterval > 0)
	positive("ORDER_CLOSE_BATCH", c.OrderCloseBatch > 0)
	positive("ALIPAY_JOBS_INTERVAL", c.AlipayJobsInterval > 0)
	check("OUTBOX_RETENTION", c.OutboxRetention >= time.Hour, "at least 1h", false)
	// The daily job retries a failed date for days, and a date's lines
	// are what keeps a re-run from booking its fees twice.
	check("RECON_RETENTION", c.ReconRetention >= 30*24*time.Hour, "at least 720h (30 days)", false)
	// A request in flight at SIGTERM must be answered within the grace.
	underGrace := fmt.Sprintf("less than the %v shutdown grace", ShutdownGrace)
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"NOTIFY_TIMEOUT", c.NotifyTimeout}, {"API_TIMEOUT", c.APITimeout}} {
		positive(t.name, t.d > 0)
		check(t.name, t.d <= 0 || t.d < ShutdownGrace, underGrace, false)
	}
	positive("DB_TIMEOUT", c.DBTimeout > 0)
	_, _, reconErr := c.ReconTime()
	check("RECON_AT", reconErr == nil, "HH:MM in Beijing time (such as 09:30), or off", false)
	problems = append(problems, c.Webhook.problems()...)
	if c.ProvidersFile != "" {
		problems = append(problems, fileConflicts(vars)...)
		if a, err := ReadAccounts(c.ProvidersFile); err != nil {
			problems = append(problems, err.(*Error).Problems...)
		} else {
			c.Accounts = &a
		}
	}
	if proxies, bad := trustedProxies(c.TrustedProxies); bad != "" {
		problems = append(problems, fmt.Sprintf("TRUSTED_PROXIES=%q: %q is not an IP address or CIDR (want such as 10.0.0.0/8,192.0.2.7)", vars["TRUSTED_PROXIES"], bad))
	} else {
		c.TrustedProxies = proxies
	}
	check("PUBLIC_URL", c.PublicURL == "" || strings.HasPrefix(c.PublicURL, "https://") || strings.HasPrefix(c.PublicURL, "http://"),
		"an http(s) URL", false)
	return problems
}

// Error is every problem found in the configuration, each naming its
// environment variable.
type Error struct {
	Problems []string
}

// Error lists the problems one a line under "configuration:".
func (e *Error) Error() string {
	return "configuration:\n  " + strings.Join(e.Problems, "\n  ")
}

// Join lists the problems of several checks (Load, Alipay) in one *Error,
// so that an operator sees them all at once; nil if there are none.
func Join(errs ...error) error {
	var all []string
	for _, err := range errs {
		var ce *Error
		switch {
		case err == nil:
		case errors.As(err, &ce):
			all = append(all, ce.Problems...)
		default:
			all = append(all, err.Error())
		}
	}
	if len(all) == 0 {
		return nil
	}
	return &Error{Problems: all}
}

// varName is the environment variable of a Config field.
func varName(field string) string {
	if f, ok := reflect.TypeFor[Config]().FieldByName(field); ok {
		if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
			return name
		}
	}
	return field
}

// wantOf says what a variable of type t must hold.
// parseDuration reads a Go duration (500ms, 4s, 30m, 168h) or a whole
// number of days (7d, 90d): retentions are thought of in days.
func parseDuration(v string) (any, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.Atoi(days)
		if err != nil || n > 100000 {
			return nil, fmt.Errorf("%q: too many days", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

func wantOf(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return "a duration such as 500ms, 4s, 30m or 7d"
	case reflect.TypeFor[slog.Level]():
		return "DEBUG, INFO, WARN or ERROR"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	}
	return "a " + t.String()
}

// LogValue shows the configuration without its secrets.
func (c Config) LogValue() slog.Value {
	mode := "public key"
	if c.AlipayPublicCertFile != "" {
		mode = "certificate"
	}
	return slog.GroupValue(
		slog.String("http_addr", c.HTTPAddr),
		slog.String("db_driver", c.DBDriver),
		slog.String("alipay_app_id", c.AppID),
		slog.String("alipay_seller_id", c.SellerID),
		slog.String("alipay_mode", mode),
		slog.Bool("alipay_production", c.Production),
		slog.Bool("order_api", c.APIJWTSecret != ""),
		slog.Duration("order_pay_timeout", c.OrderPayTimeout),
		slog.Bool("nats", c.NATSURL != ""),
		slog.Int("nats_stream_replicas", c.NATSStreamReplicas),
		slog.Bool("admin", c.AdminToken != ""),
		slog.Int("console_operators", len(c.Operators)),
		slog.Bool("redis", c.RedisAddr != ""),
		slog.Bool("wechatpay", c.WeChatPay.On()),
		slog.String("wechatpay_mchid", c.WeChatPay.MchID),
		slog.String("public_url", c.PublicURL),
		slog.Any("trusted_proxies", c.TrustedProxies),
		slog.Bool("alipay", c.AlipayOn()),
	)
}

// ValueOrFile reads a setting given either inline (value) or as a file
// (file, from name_FILE); both set is an error naming the variable.
func ValueOrFile(name, value, file string) (string, error) {
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("set %s or %s_FILE, not both", name, name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s_FILE: %w", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return strings.TrimSpace(value), nil
}

// ReconTime is RECON_AT: the time of day (since midnight, Beijing) the
// daily reconciliation runs, and whether it runs at all.
func (c Config) ReconTime() (time.Duration, bool, error) {
	if strings.EqualFold(c.ReconAt, "off") {
		return 0, false, nil
	}
	t, err := time.Parse("15:04", c.ReconAt)
	if err != nil {
		return 0, false, fmt.Errorf("RECON_AT=%q: want HH:MM or off", c.ReconAt)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, true, nil
}

// trustedProxies checks TRUSTED_PROXIES as gin's SetTrustedProxies will
// read it (an address, or a CIDR when it holds a "/"), with the spaces
// around each entry dropped and empty entries skipped; bad is the first
// entry that is neither.
func trustedProxies(list []string) (proxies []string, bad string) {
	for _, p := range list {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.Contains(p, "/") {
			if _, _, err := net.ParseCIDR(p); err != nil {
				return nil, p
			}
		} else if net.ParseIP(p) == nil {
			return nil, p
		}
		proxies = append(proxies, p)
	}
	return proxies, ""
}
